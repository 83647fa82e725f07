"""The route of a sample (or a block of samples) through the dynamics, chosen once per model.

Three routes: the open tree (compute.compute_outputs), contacts (compute.compute_contact_outputs)
and closed loops with or without contacts (loops.compute_loop_outputs). A :class:`Route` holds
what its route needs (the model, its friction and rotor inertia, the contacts or loops, the
solution among many) so that the node and the replay call ``route.outputs(q, v, a, effort,
pose, active)`` for one sample or a block alike, without choosing again per sample.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from liedyn_ros.pipeline.compute import DynamicsOutputs, compute_contact_outputs, compute_outputs
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import Contacts
from liedyn_ros.pipeline.loops import Loops, compute_loop_outputs
from liedyn_ros.pipeline.payload import Dynamics


@dataclass(frozen=True)
class Route:
    """One model's route: ``loops`` (with their contacts) when configured, else ``contacts``, else
    the open tree. ``armature`` (n,) or None: the rotors' inertia (the open tree only; the
    parameters refuse it with contacts or loops)."""

    dynamics: Dynamics
    contacts: Contacts | None = None
    loops: Loops | None = None
    solution: str = "min_torque"
    armature: FloatArray | None = None

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: np.ndarray | None, *,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """The outputs of one sample (q (n,)) or a block (q (N, n)); ``active`` the contacts' state
        (None without contacts); ``algorithms`` core.reference while the kernels compile (the loops'
        route runs the core's numpy path anyway)."""
        model, friction = self.dynamics.model, self.dynamics.friction
        if self.loops is not None:
            return compute_loop_outputs(model, self.loops, q, v, a, effort, pose, active, solution=self.solution,
                                        ff_state=ff_state, friction=friction)
        if self.contacts is None or active is None:
            return compute_outputs(model, q, v, a, effort, pose, ff_state=ff_state, friction=friction,
                                   algorithms=algorithms, armature=self.armature)
        return compute_contact_outputs(model, self.contacts, q, v, a, effort, pose, active, solution=self.solution,
                                       ff_state=ff_state, friction=friction, algorithms=algorithms)


def armature_of(dynamics: Dynamics) -> FloatArray | None:
    """The rotors' inertia of the drive, None without one or when it is zero (the contact and loop
    routes refuse it: parameters.check_parameters)."""
    drive = dynamics.drive
    return None if drive is None or not drive.armature.any() else drive.armature


def choose_route(dynamics: Dynamics, contacts: Contacts | None, loops: Loops | None, solution: str) -> Route:
    """The route of ``dynamics`` (model, friction, drive) with these contacts and loops."""
    return Route(dynamics, contacts, loops, solution, armature_of(dynamics))
