"""Closed loops of the model: loop closures and passive joints, and the outputs they give.

A loop closure ties a point of link_a to a point of link_b (``loop_closures``, "point": the
points coincide, 3 rows; "weld": the frames coincide, 6 rows); passive joints are unactuated.
With either configured, the outputs come from the constrained dynamics (Kim 2012, 3.1-3.2) with
the loops always active and the contacts (if any) per their state, solved together:

    M a + b = [0; tau] + A^T lam,   tau = 0 on the passive joints (and the supported base).

This runs the core's readable numpy path (constrained_rnea / constrained_aba with loops), about
2 ms per sample (a five-bar); the compiled contact kernels take contacts only.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core.constraints.inverse import passive_mask
from liedyn_ros.pipeline.compute import (UNBALANCED_RTOL, DynamicsOutputs, compute_outputs, constrained_predictions,
                                         rigid_body_effort)
from liedyn_ros.pipeline.config import FloatArray, PipelineConfig
from liedyn_ros.pipeline.contacts import (
    ContactChecks, Contacts, check_wrenches, contact_wrenches, forces_closest_to,
)

BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class Loops:
    """The loop closures (core.LoopClosure) and passive joints of one model, solved with the
    contacts (None without): lam stacks the contacts' rows first (``m_contacts`` of them),
    then the loops'."""

    contacts: Contacts | None
    closures: tuple[Any, ...]
    passive: tuple[str, ...]
    _sets: weakref.WeakKeyDictionary[Any, Any] = field(default_factory=weakref.WeakKeyDictionary, repr=False)

    @property
    def k_contacts(self) -> int:
        return 0 if self.contacts is None else self.contacts.k

    @property
    def m_contacts(self) -> int:
        return 0 if self.contacts is None else int(self.contacts.rows[-1])

    def on(self, model: Any) -> Any:
        """Contacts and loop closures as one core.ConstraintSet of ``model``, built once per model."""
        cs = self._sets.get(model)
        if cs is None:
            contacts = () if self.contacts is None else self.contacts.constraints
            cs = self._sets[model] = core.constraint_set(model, list(contacts) + list(self.closures))
        return cs

    def active(self, contact_active: BoolArray | None, lead: tuple[int, ...]) -> BoolArray:
        """Per constraint (..., k): the contacts' state, the loops always on."""
        on = np.ones(lead + (len(self.closures),), dtype=bool)
        return on if contact_active is None else np.concatenate((np.asarray(contact_active, dtype=bool), on), axis=-1)


def resolve_loops(model: Any, config: PipelineConfig, contacts: Contacts | None) -> Loops | None:
    """The loops of ``config`` on ``model``; None without loop closures and passive joints.
    Raises ValueError naming the parameter for a link or joint the model does not have."""
    words = config.loop_words()
    if not words and not config.passive_joints:
        return None
    offsets = np.broadcast_to(np.asarray(config.loop_offsets, dtype=np.float64).reshape(-1, 6), (len(words), 6))
    closures = []
    for (link_a, link_b, kind), offset in zip(words, offsets):
        unknown = [link for link in (link_a, link_b) if link not in model.link_frames]
        if unknown:
            raise ValueError(f"loop_closures: {unknown} in {link_a!r} {link_b!r} are not links of the model "
                             f"(it has {sorted(model.link_frames)})")
        if link_a == link_b:
            raise ValueError(f"loop_closures: {link_a!r} is closed onto itself")
        closures.append(core.LoopClosure(link_a, link_b, kind, _at(offset[:3]), _at(offset[3:])))
    unknown = [j for j in config.passive_joints if j not in model.joint_names]
    if unknown:
        raise ValueError(f"passive_joints: {unknown} are not joints of the model (it has {list(model.joint_names)})")
    return Loops(contacts, tuple(closures), tuple(config.passive_joints))


def _at(p: FloatArray) -> FloatArray:
    T = np.eye(4)
    T[:3, 3] = p
    return T


def compute_loop_outputs(
    model: Any,
    loops: Loops,
    q: FloatArray,
    v: FloatArray,
    a: FloatArray,
    effort: FloatArray | None,
    base_pose: FloatArray | None,
    active: BoolArray | None,
    *,
    solution: str = "min_torque",
    ff_state: tuple[FloatArray, FloatArray] | None = None,
    friction: Any = None,
) -> DynamicsOutputs:
    """:func:`~liedyn_ros.pipeline.compute.compute_contact_outputs` with the loops always active
    and the passive joints unactuated; ``active`` (..., k) the contacts' state (None without
    contacts). Batched over leading dimensions.

    tau_ff: core.constrained_rnea (``solution`` among many, zero on the passive joints); tau_g:
    the same at rest; predictions: core.constrained_aba with the measured efforts (zero on the
    passive joints). A floating base with no contact down (flight) is not held by the loops:
    there the base keeps the wrench of the unconstrained RNEA (``base_wrench``) and the joints
    the loop-consistent torques. A motion no constraint force realises gets least-squares forces
    and ``checks.unbalanced``. contact_active, contact_wrench (and the cone checks) only with
    contacts; tau_free the unconstrained tau_ff.
    """
    free = compute_outputs(model, q, v, a, effort, base_pose, ff_state=ff_state, friction=friction)
    lead = np.shape(q)[:-1]
    act = loops.active(active, lead)
    q_ff, v_ff = (q, v) if ff_state is None else ff_state
    rest = np.zeros_like(v)
    pose = None if base_pose is None else np.stack((base_pose, base_pose))
    tau, lam, unbalanced = loop_torques(model, loops, np.stack((q_ff, q)), np.stack((v_ff, rest)),
                                        np.stack((a, rest)), pose, np.stack((act, act)), solution)
    tau_ff, tau_g = tau[0], tau[1]
    passive = passive_mask(model, loops.passive)[model.nv - model.n:]
    if friction is not None:  # compensated on the actuated joints only
        nb = model.nv - model.n
        tau_ff = tau_ff + np.where(passive, 0.0, core.friction_torque(friction, v_ff[..., nb:]))
    out = free._replace(tau_ff=tau_ff, tau_g=tau_g, tau_free=free.tau_ff)
    if effort is not None and free.qdd_pred is not None:
        net = np.where(passive, 0.0, rigid_body_effort(model, v, effort, friction))  # friction: as compensated
        out = constrained_predictions(model, loops, q, v, net, base_pose, act, np.ones(lead, dtype=bool), out)
    contacts = loops.contacts
    if contacts is None:
        none = np.zeros(lead + (0,), dtype=bool)
        return out._replace(checks=ContactChecks(none, none, unbalanced[0]))
    contact_active = act[..., :contacts.k]
    wrench = contact_wrenches(contacts, lam[0][..., :loops.m_contacts])
    wrench[~contact_active] = 0.0
    pulling, slipping = check_wrenches(model, contacts, q, base_pose, wrench, contact_active)
    return out._replace(contact_active=contact_active, contact_wrench=wrench,
                        checks=ContactChecks(pulling, slipping, unbalanced[0]))


def base_held(model: Any, loops: Loops, act: BoolArray) -> BoolArray:
    """(...,) whether the constraints can hold the base: a fixed base, or a contact down."""
    if not model.floating_base:
        return np.ones(act.shape[:-1], dtype=bool)
    return np.asarray(act[..., :loops.k_contacts].any(axis=-1))


def loop_torques(model: Any, loops: Loops, q: FloatArray, v: FloatArray, a: FloatArray,
                 base_pose: FloatArray | None, act: BoolArray, solution: str
                 ) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(tau (..., n), lam (..., m), unbalanced (...,)) that realise (q, v, a) with the passive
    joints at zero torque: core.constrained_rnea where the base is held (or fixed); least
    squares elsewhere (flight) and where no constraint force realises the motion."""
    nb = model.nv - model.n
    held = base_held(model, loops, act)
    if held.all():
        try:
            tau, lam = core.constrained_rnea(model, q, v, a, loops.on(model), base_pose=base_pose,
                                             passive=loops.passive, active=act, solution=solution, tol=np.inf)
            return tau[..., nb:], lam, np.zeros(held.shape, dtype=bool)
        except ValueError:  # no constraint force realises the motion: least squares below
            pass
    cs = loops.on(model)
    tau_full = core.rnea(model, q, v, a, base_pose=base_pose)
    A = core.constraint_jacobian(model, q, cs, base_pose=base_pose)
    lam, tau, unbalanced = closest_loop_forces(model, loops, tau_full, A, np.zeros(np.shape(q)), cs.row_mask(act), held)
    return tau, lam, unbalanced


def closest_loop_forces(model: Any, loops: Loops, tau_full: FloatArray, A: FloatArray, target: FloatArray,
                        rows: BoolArray, held: BoolArray) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(lam (..., m), tau (..., n), unbalanced (...,)): the constraint forces whose joint torques
    come closest to ``target`` (..., n) among those that balance the passive coordinates (the
    passive joints, and the base where ``held``), by :func:`forces_closest_to`; tau = 0 on the
    passive joints. tau_full (..., nv) the unconstrained RNEA, A (..., m, nv), rows (..., m)."""
    nb = model.nv - model.n
    lead = np.shape(tau_full)[:-1]
    flat = (int(np.prod(lead, dtype=np.int64)),)
    tau_full, A, target = (np.reshape(x, flat + np.shape(x)[len(lead):]) for x in (tau_full, A, target))
    rows, held = np.reshape(rows, flat + (-1,)), np.reshape(held, flat)
    lam, tau, unbalanced = np.zeros(flat + (A.shape[1],)), np.zeros(target.shape), np.zeros(flat, dtype=bool)
    p_all = passive_mask(model, loops.passive)
    for group, cols in ((held, slice(None)), (~held, slice(nb, None))):  # unheld: the base's rows left out
        if not group.any():
            continue
        p = p_all[cols]
        order = np.concatenate((np.flatnonzero(p), np.flatnonzero(~p)))
        t, J = tau_full[group][:, cols], A[group][:, :, cols]
        goal = np.concatenate((np.zeros((len(t), nb)), target[group]), axis=-1)[:, cols]
        lam[group] = forces_closest_to(t[:, order], J[:, :, order], goal[:, ~p], int(p.sum()), rows[group])
        generalized = t - np.einsum("bmi,bm->bi", J, lam[group])
        scale = np.maximum(1.0, np.abs(t[:, p]).max(axis=-1, initial=0.0))
        unbalanced[group] = np.abs(generalized[:, p]).max(axis=-1, initial=0.0) > UNBALANCED_RTOL * scale
        generalized[:, p] = 0.0
        tau[group] = generalized[:, generalized.shape[1] - model.n:]
    return lam.reshape(lead + (-1,)), tau.reshape(lead + (model.n,)), unbalanced.reshape(lead)
