"""The route of contacts from proprioception (``contact_source: observer``): the contacts' (or the
loops') route with the state the momentum observer's estimates gave up to the sample before
(pipeline.observed.ContactObserver, whose state the node's observer step updates after each sample
that passed its checks). The node and the replay take it alike (pipeline.choose_route with the
observer); the replay gives a block's states, which its observer's run over the block found first
(replay.external.ExternalTorque.contact_state), the node none (the observer's state now)."""
from __future__ import annotations

from typing import Any

import numpy as np

from liedyn_ros.pipeline.compute import DynamicsOutputs
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.observed import ContactObserver
from liedyn_ros.pipeline.routes.contacts import ContactRoute
from liedyn_ros.pipeline.routes.loops import LoopRoute


class ObservedRoute:
    """``inner`` (contacts, or loops with contacts) with the state of ``observer``."""

    def __init__(self, inner: ContactRoute | LoopRoute, observer: ContactObserver) -> None:
        self.inner, self.observer = inner, observer

    @property
    def verdict(self) -> tuple[bool, bool] | None:
        """The inner route's checks of the latest outputs (pipeline.routes.Route)."""
        return self.inner.verdict

    def hold_to(self, bound: FloatArray | None) -> None:
        self.inner.hold_to(bound)

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: Any = None, *,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """``active`` None: the observer's state (a copy: the outputs keep it), for one sample; given:
        that state, (k,) or a block's (N, k) (the replay's, the kernels' warm-up)."""
        if active is None:
            if np.ndim(q) != 1:  # the observer holds the state after its last sample, not one per row
                raise ValueError("a block of samples through the observer's route needs each sample's contact state")
            active = self.observer.state.active.copy()
        return self.inner.outputs(q, v, a, effort, pose, active, ff_state=ff_state, algorithms=algorithms)
