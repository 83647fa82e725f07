"""The momentum observer with contacts: the contact forces in its estimate, what remains beyond
them, and contacts from proprioception (``contact_source: observer``).

On a robot standing on its feet the observer's residual r (nv) holds the ground's forces,
r = A^T lam + r_beyond (A the contacts' Jacobian): read as an external torque, the ground is a
never-ending collision. The contacts' forces lam are measured (foot sensors: the wrench source), or
else estimated from the joint rows of r, the forces the joints feel:

    lam = argmin |r_j - A_j^T lam|,   the rows of the contacts not down held at zero

(the per-leg J^T pseudo-inverse of legged robots: a 3-joint leg on a point foot gives
lam_leg = J_leg^-T r_leg exactly). What remains, r_beyond = r - A^T lam, pushes the robot beyond
its feet: on the base rows a push on the trunk (its wrench (m, f) in the base frame), on the joints
a leg hitting something away from its foot (a leg not down keeps its whole residual).

Contacts from the observer: per contact, the estimated force along the ground normal ``up`` with
hysteresis, touch-down where it exceeds ``contact_force_threshold``, lift-off where it falls under
``contact_force_release`` times that threshold. The state a sample is computed with comes from the
estimates up to the sample before (the observer takes a sample in after its outputs passed their
checks); a restarted observer (no effort, a gap) starts with every contact up.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import Contacts, contact_frames, stacked_forces

BoolArray = NDArray[np.bool_]


def contact_residual(model: Any, contacts: Contacts, q: FloatArray, base_pose: FloatArray | None, r: FloatArray,
                     active: BoolArray, measured: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
    """(lam (..., m), r_beyond (..., nv)): the active contacts' forces in the observer's residual r
    (..., nv) and what remains, r - A^T lam. ``measured`` (..., k, 6): the sensors' wrenches at the
    contact points (m, f) in link axes, taken as they are; else lam fits the joint rows of r.
    Batched over leading dimensions; inactive contacts' rows of lam are zero."""
    A = core.constraint_jacobian(model, q, contacts.on(model), base_pose=base_pose)
    rows = np.repeat(np.asarray(active, dtype=bool), np.diff(contacts.rows), axis=-1)
    A = np.where(rows[..., None], A, 0.0)
    if measured is not None:
        lam = np.where(rows, stacked_forces(contacts, measured), 0.0)
    else:
        nb = model.nv - model.n
        lam = (np.linalg.pinv(np.swapaxes(A[..., nb:], -1, -2)) @ r[..., nb:, None])[..., 0]
    return lam, r - np.einsum("...mi,...m->...i", A, lam)


def normal_forces(model: Any, contacts: Contacts, q: FloatArray, base_pose: FloatArray | None, lam: FloatArray
                  ) -> FloatArray:
    """(..., k) each contact's force in lam along the ground normal ``contacts.up``."""
    T_wc = contact_frames(model, contacts, q, base_pose)
    return core.contact_forces(contacts.on(model), lam, T_wc, contacts.up)[0]


class ObservedContacts:
    """Touch-down and lift-off of k contacts from their estimated normal forces, with hysteresis:
    down above ``threshold`` [N], up again below ``release * threshold``."""

    def __init__(self, k: int, threshold: float, release: float) -> None:
        self.on, self.off = threshold, release * threshold
        self.active = np.zeros(k, dtype=bool)

    def reset(self) -> None:
        self.active = np.zeros_like(self.active)

    def series(self, normal: FloatArray) -> BoolArray:
        """The state after each of N samples, normal (N, k) in time order, continuing the last."""
        out = np.empty(normal.shape, dtype=bool)
        state = self.active.copy()
        for i, f in enumerate(normal):
            state = np.where(state, ~(f < self.off), f > self.on)
            out[i] = state
        if len(out):
            self.active = out[-1].copy()
        return out


class ContactObserver:
    """The observer's residuals of one model with its contacts: the part beyond them, and (source
    observer) the contact state. ``source_observer``: every contact is a candidate and the state
    comes from the estimated forces; else the state of each sample is given (and measured wrenches
    when the sensors give them)."""

    def __init__(self, contacts: Contacts, threshold: float, release: float, source_observer: bool) -> None:
        self.contacts, self.source_observer = contacts, source_observer
        self.state = ObservedContacts(contacts.k, threshold, release)
        self._all = np.ones(contacts.k, dtype=bool)

    def reset(self) -> None:
        self.state.reset()

    def beyond(self, model: Any, q: FloatArray, base_pose: FloatArray | None, r: FloatArray, active: BoolArray | None,
               measured: FloatArray | None = None) -> tuple[FloatArray, BoolArray]:
        """(r_beyond (N, nv), the state after each sample (N, k)) of N consecutive samples (the
        observer's source: ``active`` None, the state updated here; else ``active`` (N, k) given)."""
        if self.source_observer:
            every = np.broadcast_to(self._all, r.shape[:-1] + (self.contacts.k,))
            lam, _ = contact_residual(model, self.contacts, q, base_pose, r, every)
            active = self.state.series(normal_forces(model, self.contacts, q, base_pose, lam))
            measured = None
        assert active is not None
        _, rest = contact_residual(model, self.contacts, q, base_pose, r, active, measured)
        return rest, active


def event_residual(model: Any, joints: FloatArray, rest: FloatArray | None) -> FloatArray:
    """What collision events watch (..., n [+ 1]): the joints' external torques and, on a floating
    base with contacts, the magnitude of the force beyond the feet on the base (last column)."""
    if rest is None or not model.floating_base:
        return joints
    return np.concatenate((joints, np.linalg.norm(rest[..., 3:6], axis=-1, keepdims=True)), axis=-1)


def event_names(model: Any, base_link: str) -> tuple[str, ...]:
    """The name of each coordinate of :func:`event_residual`: the joints, then the base link."""
    return tuple(model.joint_names) + (base_link,)
