"""The momentum observer with contacts: the contact forces in its estimate, what remains beyond
them, and contacts from proprioception (``contact_source: observer``).

On a robot standing on its feet the observer's residual r (nv) holds the ground's forces,
r = A^T lam + r_beyond (A the contacts' Jacobian): read as an external torque, the ground is a
never-ending collision. Measured contact forces (foot sensors: the wrench source) join the applied
torques the observer integrates, tau + A^T lam, so that its residual is r_beyond itself (filtered
like the rest). Otherwise lam is estimated from the joint rows of r, the forces the joints feel:

    lam = argmin |r_j - A_j^T lam|   over every configured contact

(the per-leg J^T pseudo-inverse of legged robots: a 3-joint leg on a point foot gives
lam_leg = J_leg^-T r_leg exactly), and what remains pushes the robot beyond its feet:

    base rows:  r_b - A_b^T lam            (a push on the trunk: its wrench (m, f), base frame)
    joint rows: r_j - A_j^T lam_down       (only the contacts down: a leg in the air keeps its own
                                            residual, a swing leg hitting a step shows on its joints)

Every contact counts on the base rows: the estimate lags the forces by 1/K, and a foot just lifted
still has its decaying force in r_b (subtracting only the feet down left 20-80 N on a trotting Go2's
base at each lift-off).

Contacts from the observer: per contact, the estimated force along the ground normal ``up`` with
hysteresis, touch-down where it exceeds ``contact_force_threshold``, lift-off where it falls under
``contact_force_release`` times that threshold. The state a sample is computed with comes from the
estimates up to the sample before (the observer takes a sample in after its outputs passed their
checks); a restarted observer (no effort, a gap) starts with every contact up.
"""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core.constraints.fit import ContactFit
from liedyn_ros.pipeline.config import ContactSource, FloatArray, PipelineConfig
from liedyn_ros.pipeline.contacts import Contacts, contact_frames, stacked_forces

BoolArray = NDArray[np.bool_]


def unreachable_touchdown(model: Any, contacts: Contacts | None, config: PipelineConfig) -> str | None:
    """Why ``contact_source: observer`` would never see a contact down on a robot standing on all
    of them (its weight per contact, m |g| / k, at most ``contact_force_threshold``), or None. A
    2.5 kg Solo12 puts about 6 N on each foot, below the default 20 N: every sample would be
    taken as flight."""
    if contacts is None or config.contact_source is not ContactSource.OBSERVER or not model.floating_base:
        return None
    threshold = config.contact_force_threshold
    per_contact = model.mass * float(np.linalg.norm(model.gravity)) / contacts.k
    if per_contact > threshold:
        return None
    return (f"contact_force_threshold {threshold:g} N is not below the robot's weight per contact, "
            f"{per_contact:.3g} N ({model.mass:.3g} kg on {contacts.k} contacts): contact_source observer then sees "
            "a contact only where a foot carries more than the weight it stands on, and takes the robot standing "
            f"as in flight; set contact_force_threshold below it (e.g. {per_contact / 2:.2g})")


def contact_estimate(model: Any, contacts: Contacts, q: FloatArray, base_pose: FloatArray | None, r: FloatArray
                     ) -> tuple[FloatArray, FloatArray]:
    """(lam (..., m), A (..., m, nv)): every contact's force fitted to the joint rows of the observer's
    residual r (..., nv), lam = argmin |r_j - A_j^T lam|, and the contacts' Jacobian. Batched."""
    A = core.constraint_jacobian(model, q, contacts.on(model), base_pose=base_pose)
    nb = model.nv - model.n
    return (np.linalg.pinv(np.swapaxes(A[..., nb:], -1, -2)) @ r[..., nb:, None])[..., 0], A


def residual_beyond(model: Any, contacts: Contacts, r: FloatArray, A: FloatArray, lam: FloatArray,
                    active: BoolArray) -> FloatArray:
    """r_beyond (..., nv) (the module docstring): all of lam off the base rows of r, the rows of the
    ``active`` (..., k) contacts off its joint rows."""
    nb = model.nv - model.n
    rows = np.repeat(np.asarray(active, dtype=bool), np.diff(contacts.rows), axis=-1)
    rest = np.array(r, dtype=np.float64)
    rest[..., :nb] -= np.einsum("...mi,...m->...i", A[..., :nb], lam)
    rest[..., nb:] -= np.einsum("...mi,...m->...i", A[..., nb:], np.where(rows, lam, 0.0))
    return rest


def measured_torque(model: Any, contacts: Contacts, q: FloatArray, base_pose: FloatArray | None,
                    wrench: FloatArray, active: BoolArray) -> FloatArray:
    """A^T lam (..., nv): the generalized force of the sensors' wrenches (..., k, 6) at the contact
    points, (m, f) in link axes, of the ``active`` contacts: what the observer adds to the efforts."""
    A = core.constraint_jacobian(model, q, contacts.on(model), base_pose=base_pose)
    rows = np.repeat(np.asarray(active, dtype=bool), np.diff(contacts.rows), axis=-1)
    return np.einsum("...mi,...m->...i", A, np.where(rows, stacked_forces(contacts, wrench), 0.0))


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
    comes from the estimated forces; else the state of each sample is given (with foot sensors, their
    forces are in the observer's torques already: :func:`measured_torque`)."""

    def __init__(self, contacts: Contacts, threshold: float, release: float, source_observer: bool) -> None:
        self.contacts, self.source_observer = contacts, source_observer
        self.state = ObservedContacts(contacts.k, threshold, release)
        self._fits: weakref.WeakKeyDictionary[Any, ContactFit] = weakref.WeakKeyDictionary()
        self._felt: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

    def reset(self) -> None:
        self.state.reset()

    def prepare(self, model: Any) -> ContactFit:
        """The compiled fit of the contacts on ``model`` (core.constraints.fit), made once per model;
        its kernel is loaded from numba's cache (or compiled) here: call it before the first sample."""
        fit = self._fits.get(model)
        if fit is None:
            fit = self._fits[model] = ContactFit(model, self.contacts.on(model), self.contacts.up)
        return fit

    def felt(self, model: Any) -> bool:
        """Whether a contact's force reaches a joint of ``model``. One on the root link (the ground link of a
        closed chain, a robot lying on its trunk) has no joint columns in A: the joint rows of r say nothing of
        its force, and the least-norm fit (the pseudo-inverse's) gives it none, while the compiled fit declines
        (A_j A_j^T singular)."""
        felt = self._felt.get(model)
        if felt is None:
            felt = self._felt[model] = bool((self.contacts.on(model).body_a >= 0).any())
        return felt

    def beyond(self, model: Any, q: FloatArray, base_pose: FloatArray | None, r: FloatArray, active: BoolArray | None,
               measured: bool = False) -> tuple[FloatArray, BoolArray]:
        """(r_beyond (N, nv), the state after each sample (N, k)) of N consecutive samples (the
        observer's source: ``active`` None, the state updated here; else ``active`` (N, k) given).
        ``measured``: the sensors' forces are in the observer's torques already (r is r_beyond)."""
        if measured:
            assert active is not None
            return r, active
        # The compiled fit first (one kernel call); with the observer's source, the joint rows are
        # taken off for the state before this sample and put right where the state changes (rarely).
        used = self.state.active[None] if self.source_observer else active
        fitted = self.prepare(model)(q, base_pose, r, used)
        if fitted is not None:
            if not self.source_observer:
                assert active is not None
                return fitted.rest, active
            active = self.state.series(fitted.normal)
            change = active != used
            if change.any():
                rows = np.repeat(np.where(change, np.where(active, 1.0, -1.0), 0.0), np.diff(self.contacts.rows),
                                 axis=-1)
                nb = model.nv - model.n
                fitted.rest[:, nb:] -= np.einsum("nmi,nm->ni", fitted.A[:, :, nb:], fitted.lam * rows)
            return fitted.rest, active
        if not self.felt(model):  # every force fitted zero: r is all beyond them (and no contact touches down)
            if self.source_observer:
                active = self.state.series(np.zeros(np.shape(r)[:-1] + (self.contacts.k,)))
            assert active is not None
            return np.array(r, dtype=np.float64), active
        lam, A = contact_estimate(model, self.contacts, q, base_pose, r)
        if self.source_observer:
            active = self.state.series(normal_forces(model, self.contacts, q, base_pose, lam))
        assert active is not None
        return residual_beyond(model, self.contacts, r, A, lam, active), active

    def beyond_one(self, model: Any, q: FloatArray, base_pose: FloatArray | None, r: FloatArray,
                   active: BoolArray | None, measured: bool = False) -> FloatArray:
        """r_beyond (nv,) of one sample (the node's): :meth:`beyond` with q (n,), base_pose (4, 4) or
        None, r (nv,), active (k,) (None with the observer's source, the state updated here)."""
        if measured:
            return r
        if not self.source_observer:  # the compiled fit's one-sample call (no batch of one to unpack)
            rest = self.prepare(model).rest_one(q, base_pose, r, active)
            if rest is not None:
                return rest
            if not self.felt(model):  # (see beyond)
                return r
        return self.beyond(model, q[None], None if base_pose is None else base_pose[None], r[None],
                           None if active is None else active[None])[0][0]


def event_residual(model: Any, joints: FloatArray, rest: FloatArray | None) -> FloatArray:
    """What collision events watch (..., n [+ 1]): the joints' external torques and, on a floating
    base with contacts, the magnitude of the force beyond the feet on the base (last column)."""
    if rest is None or not model.floating_base:
        return joints
    if rest.ndim == 1:  # one sample (the node): a norm and a concatenate in numpy cost microseconds each
        out = np.empty(joints.shape[0] + 1)
        out[:-1] = joints
        out[-1] = math.hypot(*rest[3:6].tolist())
        return out
    return np.concatenate((joints, np.linalg.norm(rest[..., 3:6], axis=-1, keepdims=True)), axis=-1)


def event_names(model: Any, base_link: str) -> tuple[str, ...]:
    """The name of each coordinate of :func:`event_residual`: the joints, then the base link."""
    return tuple(model.joint_names) + (base_link,)
