"""The route of a sample (or a block of samples) through the dynamics, chosen once per model.

One object per route, made once per model with what it needs, each answering
``route.outputs(q, v, a, effort, pose, active, *, ff_state=None, algorithms=None)`` for one sample
(q (n,)) or a block (q (N, n)) alike, and ``route.hold_to(bound)`` / ``route.verdict`` for the
checks of what the node publishes (:class:`Route`)::

    free      FreeRoute       the open tree (pipeline.compute.compute_outputs)
    contacts  ContactRoute    the active contacts held still: the compiled kernel per sample, the
                              core's functions one by one for what it declines
    loops     LoopRoute       loop closures and passive joints (and contacts), the core's numpy path
    observed  ObservedRoute   contacts (or loops) with the state from the momentum observer
                              (contact_source: observer)

The node (pipeline.stream) and the replay (replay.run.BlockDynamics) call the route chosen by
:func:`choose_route`; a route calls numeric helpers (pipeline.compute, pipeline.contacts,
pipeline.loops, the core) that never call back into it.
"""
from __future__ import annotations

from typing import Any, Protocol

from liedyn_ros.pipeline.compute import DynamicsOutputs
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import Contacts
from liedyn_ros.pipeline.loops import Loops
from liedyn_ros.pipeline.observed import ContactObserver
from liedyn_ros.pipeline.payload import Dynamics
from liedyn_ros.pipeline.routes.contacts import ContactRoute, compute_contact_outputs
from liedyn_ros.pipeline.routes.free import FreeRoute
from liedyn_ros.pipeline.routes.loops import LoopRoute, compute_loop_outputs
from liedyn_ros.pipeline.routes.observed import ObservedRoute


class Route(Protocol):
    """What every route answers: the outputs of one sample or a block (``active`` the contacts'
    state, None without contacts; ``ff_state`` (q_ff, v_ff) the feedforward's state;
    ``algorithms`` core.reference while the kernels compile).

    The node publishes a sample only if its outputs are finite and no torque exceeds its bound
    (pipeline.stream). A route may make those checks in the call that computes the outputs:
    ``hold_to(bound)`` gives it the bounds ((n,), inf: none; None: no bound), and ``verdict`` is
    (finite, in range) of the outputs of the latest ``outputs`` call as the route checked them, or
    None when it did not check them (the caller then checks)."""

    @property
    def verdict(self) -> tuple[bool, bool] | None: ...

    def hold_to(self, bound: FloatArray | None) -> None: ...

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: Any, *, ff_state: tuple[FloatArray, FloatArray] | None = None,
                algorithms: Any = None) -> DynamicsOutputs: ...


def armature_of(dynamics: Dynamics) -> FloatArray | None:
    """The rotors' inertia of the drive, None without one or when it is zero (the contact and loop
    routes refuse it: parameters.check_parameters)."""
    drive = dynamics.drive
    return None if drive is None or not drive.armature.any() else drive.armature


def choose_route(dynamics: Dynamics, contacts: Contacts | None, loops: Loops | None, solution: str, *,
                 observer: ContactObserver | None = None, armature: FloatArray | None = None) -> Route:
    """The route of ``dynamics`` (model, friction, drive): ``loops`` (with their contacts) when
    configured, else ``contacts``, else the open tree; ``observer`` (contact_source observer) gives
    the contacts' state. ``armature``: the open tree's rotor inertia (default: the drive's)."""
    inner: ContactRoute | LoopRoute
    if loops is not None:
        inner = LoopRoute(dynamics, loops, solution)
    elif contacts is not None:
        inner = ContactRoute(dynamics, contacts, solution)
    else:
        return FreeRoute(dynamics, armature_of(dynamics) if armature is None else armature)
    return inner if observer is None else ObservedRoute(inner, observer)


__all__ = ["ContactRoute", "FreeRoute", "LoopRoute", "ObservedRoute", "Route", "armature_of", "choose_route",
           "compute_contact_outputs", "compute_loop_outputs"]
