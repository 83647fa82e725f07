"""The route of contacts from proprioception (``contact_source: observer``): the contacts' (or the
loops') route with the state the momentum observer's estimates gave up to the sample before
(pipeline.observed.ContactObserver, whose state the node's observer step updates after each sample
that passed its checks)."""
from __future__ import annotations

from typing import Any

from liedyn_ros.pipeline.compute import DynamicsOutputs
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.observed import ContactObserver
from liedyn_ros.pipeline.routes.contacts import ContactRoute
from liedyn_ros.pipeline.routes.loops import LoopRoute


class ObservedRoute:
    """``inner`` (contacts, or loops with contacts) with the state of ``observer``."""

    def __init__(self, inner: ContactRoute | LoopRoute, observer: ContactObserver) -> None:
        self.inner, self.observer = inner, observer

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: Any = None, *,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """``active`` None: the observer's state (a copy: the outputs keep it); given: that state
        (the kernels' warm-up)."""
        if active is None:
            active = self.observer.state.active.copy()
        return self.inner.outputs(q, v, a, effort, pose, active, ff_state=ff_state, algorithms=algorithms)
