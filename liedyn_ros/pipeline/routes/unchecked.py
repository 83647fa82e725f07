"""What a route that makes no checks of its own answers to pipeline.routes.Route's checks: no verdict (its
caller checks the outputs it publishes), no bound to hold."""
from __future__ import annotations

from liedyn_ros.pipeline.config import FloatArray


class Unchecked:
    """A route whose outputs its caller checks (finite, within their bounds): ``verdict`` always None."""

    verdict: tuple[bool, bool] | None = None

    def hold_to(self, bound: FloatArray | None) -> None:
        """Nothing to hold: the caller checks the outputs against ``bound``."""
