"""Recursive Newton-Euler inverse dynamics (Park et al. eqs. 22-27; Kim Table 2)."""
from __future__ import annotations

import numpy as np

from ..checks import Batch, prepare
from ..model import Model
from ..spatial import ad_star
from .kinematics import bias_accelerations, gravity_acceleration, join, joint_transforms, split, velocities


def rnea_batch(model: Model, batch: Batch, v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Generalized forces for flattened inputs; see `rnea`.

    Forward:   V_i  = Ad_{f_i^-1} V_lambda + S_i qd_i
               dV_i = Ad_{f_i^-1} dV_lambda + ad_{V_i} S_i qd_i + S_i qdd_i
    Backward:  F_i  = J_i dV_i - ad*_{V_i} J_i V_i - F_ext,i + sum_c Ad_{f_c^-1}^T F_c
               tau_i = S_i^T F_i
    Gravity enters as the base acceleration -g (in the base frame).
    """
    _, X = joint_transforms(model, batch.q)
    V0, qd = split(model, v)
    dV0, qdd = split(model, a)
    dV0 = dV0 + gravity_acceleration(model, batch)
    V = velocities(model, X, V0, qd)
    eta = bias_accelerations(model, V, qd)
    dV = np.zeros_like(V)
    for i, p in enumerate(model.parent):
        dVp = dV0 if p < 0 else dV[:, p]
        dV[:, i] = np.einsum("bij,bj->bi", X[:, i], dVp) + eta[:, i] + model.S[i] * qdd[:, i, None]

    JV = np.einsum("nij,bnj->bni", model.J, V)
    F = np.einsum("nij,bnj->bni", model.J, dV) - np.einsum("bnij,bnj->bni", ad_star(V), JV)
    if batch.f_body is not None:
        F = F - batch.f_body
    F0 = model.J_base @ dV0.T
    F0 = (F0.T - np.einsum("bij,bj->bi", ad_star(V0), V0 @ model.J_base.T))
    if batch.f_base is not None:
        F0 = F0 - batch.f_base
    tau = np.zeros(qd.shape)
    for i in reversed(range(model.nb)):
        tau[:, i] = F[:, i] @ model.S[i]
        p = model.parent[i]
        Fp = np.einsum("bji,bj->bi", X[:, i], F[:, i])  # Ad_{f_i^-1}^T F_i
        if p < 0:
            F0 = F0 + Fp
        else:
            F[:, p] += Fp
    return join(model, F0, tau)


def rnea(model: Model, q, v, a, *, base_pose=None, f_ext=None) -> np.ndarray:
    """Inverse dynamics: the generalized forces that produce acceleration a at (q, v).

    tau = M(q) a + C(q, v) v + g(q) - sum_k J_k^T F_ext,k.  Shapes: q (..., n), v and a (..., nv),
    result (..., nv); for a floating base the first six entries are the base wrench (m, f).
    """
    batch = prepare(model, q, {"v": v, "a": a}, base_pose=base_pose, f_ext=f_ext)
    return batch.restore(rnea_batch(model, batch, *batch.vectors))


def gravity(model: Model, q, *, base_pose=None) -> np.ndarray:
    """g(q) = rnea(q, 0, 0): the generalized forces that hold the robot still against gravity."""
    batch = prepare(model, q, base_pose=base_pose)
    zero = np.zeros((batch.q.shape[0], model.nv))
    return batch.restore(rnea_batch(model, batch, zero, zero))
