"""The open tree's route: no contact, no loop (pipeline.compute.compute_outputs: RNEA for the
feedforward, gravity, ABA for the predictions, with the friction compensated and the rotors'
inertia), one sample or a block alike."""
from __future__ import annotations

from typing import Any

from liedyn_ros.pipeline.compute import DynamicsOutputs, compute_outputs
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.payload import Dynamics
from liedyn_ros.pipeline.routes.unchecked import Unchecked


class FreeRoute(Unchecked):
    """The open tree of one model: its friction and rotor inertia (``armature`` (n,) or None); its
    outputs checked by the caller."""

    def __init__(self, dynamics: Dynamics, armature: FloatArray | None = None) -> None:
        self.dynamics, self.armature = dynamics, armature

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: Any = None, *,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """One sample (q (n,)) or a block (q (N, n)); ``active`` unused (no contacts)."""
        return compute_outputs(self.dynamics.model, q, v, a, effort, pose, ff_state=ff_state,
                               friction=self.dynamics.friction, algorithms=algorithms, armature=self.armature)
