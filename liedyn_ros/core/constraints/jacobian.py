"""The constraint Jacobian A(q), the bias Adot v and the violations, exact (no differences).

For every body i the forward pass of Kim Table 2 gives its world pose T_i, body twist V_i and
its acceleration at a = 0 without gravity, dV0_i = Ad_{f_i^-1} dV0_lambda(i) + ad_{V_i} S_i qd_i.
A frame F on body i (pose T_iF in it) then has

    T_F = T_i T_iF,   V_F = Ad_{T_iF^-1} V_i = J_F v,   dV_F/dt = J_F a + Ad_{T_iF^-1} dV0_i,
    J_F = Ad_{T_F^-1} [Ad_{T_0} | Ad_{T_j} S_j for the joints j supporting i] P

(world screws pulled back to F; the base block only for a floating base; P maps body rates to
coordinates, mimic joints included). The rows of a constraint (see description) and its bias:

    flat contact   A = J_a,                 c = dV0_a
    point contact  A = [0 1] J_a,           c = dv0_a + w_a x v_a              (classical accel.)
    weld           A = J_a - Ad_{T_ab} J_b, c = dV0_a - Ad_{T_ab} (dV0_b + ad_W V_b)
    point loop     A = [0 1] J_a - R_ab [0 1] J_b,
                   c = dv0_a + w_a x v_a - R_ab (dv0_b + w_b x v_b)

with T_ab = T_a^-1 T_b and W = V_b - Ad_{T_ab^-1} V_a the twist of b relative to a. The
constraint's acceleration is A a + c: c = Adot v exactly whenever A v = 0 (a consistent state),
and holding A a + c = 0 keeps a contact point's (or the relative point's) classical acceleration
zero, as Pinocchio's 3-D contacts do. A contact in the world's axes has its rows and c turned
by R_a (blockwise for a flat one: the same a, lam turned). The position error e of a loop (e = -log T_ab for a weld,
-p_ab for a point) has de/dt = A v at e = 0; contacts have none.

This module's numpy is the reference; compiled_terms gives the same terms by kernels (constraints.fast for
contacts, constraints.fast_closures for any set: loop closures, mimic joints), which the public functions
and the constrained algorithms use unless fast=False.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import Batch, prepare
from ..fast import OK, fast_model
from ..fast.entry import single
from ..fast.threads import run_batch
from ..model import Model
from ..reference.kinematics import bias_accelerations, joint_transforms, split, velocities
from ..spatial import Ad, Ad_inv, ad, inv_se3, log_se3
from .description import ConstraintSet, constraint_set
from .fast_closures import closure_arrays

__all__ = ["constraint_jacobian", "constraint_bias", "constraint_frames", "ConstraintTerms", "constraint_terms"]


@dataclass
class ConstraintTerms:
    """A (B, m, nv), c (B, m), the velocity A v (B, m) and position error e (B, m) of a flat batch."""

    A: np.ndarray
    c: np.ndarray
    Av: np.ndarray
    e: np.ndarray


def _supports(model: Model) -> np.ndarray:
    """support[i, j]: body j is body i or one of its ancestors, (nb, nb)."""
    support = np.zeros((model.nb, model.nb), dtype=bool)
    for i, p in enumerate(model.parent):
        if p >= 0:
            support[i] = support[p]
        support[i, i] = True
    return support


def _frames(model: Model, batch: Batch, v: np.ndarray, bodies: np.ndarray, T_body_frame: np.ndarray):
    """(T_F (B, k, 4, 4), J_F (B, k, 6, nv), V_F (B, k, 6), dV0_F (B, k, 6)) of frames on `bodies`."""
    B = batch.q.shape[0]
    f, X = joint_transforms(model, batch.q)
    V0, qd = split(model, v)
    V = velocities(model, X, V0, qd)
    eta = bias_accelerations(model, V, qd)
    T0 = np.broadcast_to(batch.base_pose, (B, 4, 4))
    T = np.empty((B, model.nb, 4, 4))
    dV = np.zeros_like(V)
    for i, p in enumerate(model.parent):
        T[:, i] = (T0 if p < 0 else T[:, p]) @ f[:, i]
        dV[:, i] = eta[:, i] if p < 0 else np.einsum("bij,bj->bi", X[:, i], dV[:, p]) + eta[:, i]
    # Columns in the world frame: the base's twist (floating only), then the bodies' screws.
    screws = np.einsum("bnij,nj->bni", Ad(T), model.S)  # (B, nb, 6)
    support = _supports(model)
    nbase = model.nv - model.n
    Jw = np.zeros((B, len(bodies), 6, model.nv))
    Tw = np.empty((B, len(bodies), 4, 4))
    Vb = np.zeros((B, len(bodies), 6))
    dVb = np.zeros((B, len(bodies), 6))
    for k, i in enumerate(bodies):
        if i == -2:  # the world: still, no columns
            Tw[:, k] = np.eye(4)
            continue
        if nbase:
            Jw[:, k, :, :6] = Ad(T0)
        if i >= 0:
            cols = np.where(support[i][None, :, None], screws, 0.0)  # (B, nb, 6)
            Jw[:, k, :, nbase:] = np.swapaxes(cols, 1, 2) @ model.P
            Tw[:, k], Vb[:, k], dVb[:, k] = T[:, i], V[:, i], dV[:, i]
        else:
            Tw[:, k], Vb[:, k] = T0, V0
    TF = Tw @ T_body_frame
    X_F = Ad_inv(T_body_frame)  # (k, 6, 6): body twist -> frame twist
    J = np.where((bodies == -2)[None, :, None, None], 0.0, Ad_inv(TF) @ Jw)
    return TF, J, np.einsum("kij,bkj->bki", X_F, Vb), np.einsum("kij,bkj->bki", X_F, dVb)


def _linear_acceleration(dV0: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Classical acceleration of a frame's origin in its axes at a = 0: dv0 + w x v."""
    return dV0[..., 3:] + np.cross(V[..., :3], V[..., 3:])


def constraint_terms(cs: ConstraintSet, batch: Batch, v: np.ndarray) -> ConstraintTerms:
    """A, c, A v and e of every constraint (all rows, active or not) for a flat batch."""
    model = cs.model
    Ta, Ja, Va, dVa = _frames(model, batch, v, cs.body_a, cs.T_a)
    if cs.is_contact.all():  # frame b is the world everywhere: still, no columns
        B = batch.q.shape[0]
        Tb, Jb = np.broadcast_to(np.eye(4), (B, cs.k, 4, 4)), np.zeros_like(Ja)
        Vb = dVb = np.zeros_like(Va)
    else:
        Tb, Jb, Vb, dVb = _frames(model, batch, v, cs.body_b, cs.T_b)
    T_ab = inv_se3(Ta) @ Tb  # (B, k, 4, 4)
    X_ab = Ad(T_ab)
    B = batch.q.shape[0]
    A = np.empty((B, cs.m, model.nv))
    c, e = np.empty((B, cs.m)), np.zeros((B, cs.m))
    for k in range(cs.k):
        r = slice(cs.rows[k], cs.rows[k + 1])
        if cs.point[k]:
            R_ab = T_ab[:, k, :3, :3]
            A[:, r] = Ja[:, k, 3:] - R_ab @ Jb[:, k, 3:]
            c[:, r] = _linear_acceleration(dVa[:, k], Va[:, k]) - np.einsum(
                "bij,bj->bi", R_ab, _linear_acceleration(dVb[:, k], Vb[:, k]))
            e[:, r] = -T_ab[:, k, :3, 3]
        else:
            A[:, r] = Ja[:, k] - X_ab[:, k] @ Jb[:, k]
            W = Vb[:, k] - np.einsum("bij,bj->bi", Ad_inv(T_ab[:, k]), Va[:, k])
            c[:, r] = dVa[:, k] - np.einsum("bij,bj->bi", X_ab[:, k],
                                            dVb[:, k] + np.einsum("bij,bj->bi", ad(W), Vb[:, k]))
            e[:, r] = -log_se3(T_ab[:, k])
        if cs.is_contact[k]:
            e[:, r] = 0.0
        if cs.world[k]:  # the same rows in the world's axes: R_a, block-diagonal for a twist
            R = Ta[:, k, :3, :3]
            for s in range(0, r.stop - r.start, 3):
                rr = slice(r.start + s, r.start + s + 3)
                A[:, rr], c[:, rr] = R @ A[:, rr], np.einsum("bij,bj->bi", R, c[:, rr])
    return ConstraintTerms(A, c, np.einsum("bij,bj->bi", A, v), e)


def compiled_terms(cs: ConstraintSet, batch: Batch, rows: np.ndarray) -> ConstraintTerms | None:
    """A, c, A v and e by a compiled kernel, inactive rows zero: a contact-only set's by constraints.fast's
    contact_terms_many (e = 0), any other (loop closures, mimic joints) by fast_closures.constraint_terms_many.
    None where that kernel declines (the reference then answers, or words the error)."""
    model = cs.model
    fm = fast_model(model)
    B, v = batch.q.shape[0], batch.vectors[0] if batch.vectors else np.zeros((batch.q.shape[0], model.nv))
    active = np.ascontiguousarray(rows[:, cs.rows[:-1]])  # a constraint's rows share its state
    A, c = np.empty((B, cs.m, model.nv)), np.empty((B, cs.m))
    fc = cs._fast
    if fc is not None:
        from .fast import contact_terms_many

        run_batch(contact_terms_many, B, fm.mf, fm.mi, fc.ci, fc.cf, fc.terms_scratch_size, batch.q, v,
                  batch.base_pose, active, A, c)
        return ConstraintTerms(A, c, np.einsum("bij,bj->bi", A, v), np.zeros((B, cs.m)))
    ca = closure_arrays(cs)
    Av, e = np.empty((B, cs.m)), np.empty((B, cs.m))
    try:
        status = single.constraint_terms_many(fm.handle, ca.ci, ca.cb, ca.cf, ca.scratch, batch.q, v, batch.base_pose,
                                              active, A, c, Av, e)
    except TypeError:  # an argument the locked kernel does not take: the readable path
        return None
    return ConstraintTerms(A, c, Av, e) if status == OK else None


def _compiled_kinematics(model: Model, q, cs: ConstraintSet, base_pose, frames: bool, jacobian: bool):
    """(frames (..., k, 4, 4) or None, A (..., m, nv) or None) of contacts by the compiled kernel
    (constraints.fast.contact_kinematics_many), or None where it does not answer: other constraints, not
    float64 arrays, a pose that is not one per sample (the general path then checks and words the error)."""
    fc = cs._fast
    if fc is None or type(q) is not np.ndarray or q.dtype != np.float64 or q.ndim < 1:
        return None
    lead = q.shape[:-1]
    fm = fast_model(model)
    if fm.fixed:
        if base_pose is not None:
            return None
        poses = fm.identity[None]
    elif (type(base_pose) is np.ndarray and base_pose.dtype == np.float64 and base_pose.shape[:-2] == lead
          and base_pose.shape[-2:] == (4, 4)):
        poses = np.ascontiguousarray(base_pose.reshape(-1, 4, 4))
    else:
        return None
    qb = np.ascontiguousarray(q.reshape(-1, q.shape[-1]))
    B = qb.shape[0]
    T = np.empty((B if frames else 0, cs.k, 4, 4))
    A = np.empty((B if jacobian else 0, cs.m, model.nv))
    try:
        if single.contact_kinematics_many(fm.handle, fc.ci, fc.cf, fc.scratch, qb, poses, T, A) != 0:
            return None
    except TypeError:  # a read-only argument: the readable path
        return None
    return (T.reshape(lead + (cs.k, 4, 4)) if frames else None), (A.reshape(lead + (cs.m, model.nv)) if jacobian
                                                                  else None)


def constraint_jacobian(model: Model, q, constraints, *, base_pose=None, fast: bool = True) -> np.ndarray:
    """A(q), shape (..., m, nv): the rows of every constraint, stacked in the order given.

    A v is the velocity each constraint forbids (see liedyn_ros.core.constraints.jacobian), in
    the constraint's frame; lam = A-rows' forces on the robot enter as M a + b = tau + A^T lam.
    Contacts take the compiled kernel (constraints.fast.contact_kinematics_many: float64 arrays go
    to it unchecked; anything it refuses is validated here), sets with loop closures (or mimic
    joints) fast_closures.constraint_terms_many after validation, unless fast=False (no compiled code).
    """
    cs = constraint_set(model, constraints)
    compiled = _compiled_kinematics(model, q, cs, base_pose, False, True) if fast else None
    if compiled is not None:
        return compiled[1]
    batch = prepare(model, q, {"v": np.zeros(model.nv)}, base_pose=base_pose)
    terms = compiled_terms(cs, batch, np.ones((batch.q.shape[0], cs.m), dtype=bool)) if fast else None
    return batch.restore((constraint_terms(cs, batch, batch.vectors[0]) if terms is None else terms).A)


def constraint_bias(model: Model, q, v, constraints, *, base_pose=None, fast: bool = True) -> np.ndarray:
    """c(q, v), shape (..., m): the constraint acceleration is A a + c (c = Adot v when A v = 0).
    Compiled (compiled_terms) unless fast=False."""
    cs = constraint_set(model, constraints)
    batch = prepare(model, q, {"v": v}, base_pose=base_pose)
    terms = compiled_terms(cs, batch, np.ones((batch.q.shape[0], cs.m), dtype=bool)) if fast else None
    return batch.restore((constraint_terms(cs, batch, batch.vectors[0]) if terms is None else terms).c)


def constraint_frames(model: Model, q, constraints, *, base_pose=None, fast: bool = True) -> np.ndarray:
    """World poses T_a = T_i T_ia of every constraint's frame a (a contact's frame), (..., k, 4, 4).

    Contacts take the compiled forward pass (constraints.fast.contact_kinematics_many) unless
    fast=False; float64 arrays go to it unchecked (it checks lengths, NaN and the pose; anything it
    refuses is validated here).
    """
    cs = constraint_set(model, constraints)
    compiled = _compiled_kinematics(model, q, cs, base_pose, True, False) if fast else None
    if compiled is not None:
        return compiled[0]
    batch = prepare(model, q, base_pose=base_pose)
    zero = np.zeros((batch.q.shape[0], model.nv))
    return batch.restore(_frames(model, batch, zero, cs.body_a, cs.T_a)[0])
