"""Closed loops of the model: loop closures and passive joints, and the least-squares loop forces.

A loop closure ties a point of link_a to a point of link_b (``loop_closures``, "point": the
points coincide, 3 rows; "weld": the frames coincide, 6 rows); passive joints are unactuated.
With either configured, the outputs come from the constrained dynamics (Kim 2012, 3.1-3.2) with
the loops always active and the contacts (if any) per their state, solved together: the loops'
route, pipeline.routes.loops.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core.constraints.inverse import passive_mask
from liedyn_ros.core.fast import OK
from liedyn_ros.core.fast.entry import single
from liedyn_ros.pipeline.config import FloatArray, PipelineConfig
from liedyn_ros.pipeline.contacts import UNBALANCED_RTOL, Contacts, forces_closest_to

BoolArray = NDArray[np.bool_]
# forces_closest_to's weight of the balance rows, and numpy.linalg.pinv's default cut (singular values at or below
# this fraction of the largest count as zero): the compiled closest_forces_many takes them from here
BALANCE_WEIGHT, PINV_RCOND = 1e6, 1e-15


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


def base_held(model: Any, loops: Loops, act: BoolArray) -> BoolArray:
    """(...,) whether the constraints can hold the base: a fixed base, or a contact down."""
    if not model.floating_base:
        return np.ones(act.shape[:-1], dtype=bool)
    return np.asarray(act[..., :loops.k_contacts].any(axis=-1))


def closest_loop_forces(model: Any, loops: Loops, tau_full: FloatArray, A: FloatArray, target: FloatArray,
                        rows: BoolArray, held: BoolArray, fast: bool = True) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(lam (..., m), tau (..., n), unbalanced (...,)): the constraint forces whose joint torques
    come closest to ``target`` (..., n) among those that balance the passive coordinates (the
    passive joints, and the base where ``held``), by :func:`forces_closest_to`; tau = 0 on the
    passive joints. tau_full (..., nv) the unconstrained RNEA, A (..., m, nv), rows (..., m).
    By the compiled core.constraints.fast_minimisers.closest_forces_many (the same rule, equal to this
    numpy to rounding) unless fast=False or it declines (not finite, arrays it does not take)."""
    nb = model.nv - model.n
    lead = np.shape(tau_full)[:-1]
    flat = (int(np.prod(lead, dtype=np.int64)),)
    tau_full, A, target = (np.reshape(x, flat + np.shape(x)[len(lead):]) for x in (tau_full, A, target))
    rows, held = np.reshape(rows, flat + (-1,)), np.reshape(held, flat)
    p_all = passive_mask(model, loops.passive)
    if fast:
        lam, tau, unbalanced = np.empty(flat + (A.shape[1],)), np.empty(target.shape), np.empty(flat, dtype=bool)
        try:
            status = single.closest_forces_many(tau_full, A, target, p_all, rows, held, BALANCE_WEIGHT, PINV_RCOND,
                                                UNBALANCED_RTOL, lam, tau, unbalanced)
        except TypeError:  # not C-contiguous float64 and bool arrays: numpy's
            status = None
        if status == OK:
            return lam.reshape(lead + (-1,)), tau.reshape(lead + (model.n,)), unbalanced.reshape(lead)
    lam, tau, unbalanced = np.zeros(flat + (A.shape[1],)), np.zeros(target.shape), np.zeros(flat, dtype=bool)
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
