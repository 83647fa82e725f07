"""Articulated-body forward dynamics and hybrid dynamics (Kim 2012, Tables 3 and 4)."""
from __future__ import annotations

import numpy as np

from ..checks import Batch, prepare
from ..model import Model
from ..singular import inertia_scale, pivot_ok, refuse
from ..spatial import ad_star
from .kinematics import bias_accelerations, gravity_acceleration, join, joint_transforms, split, velocities
from .mass_matrix import mass_matrix
from .rnea import rnea_batch

BASE = "the floating base"


def hybrid_batch(model: Model, batch: Batch, v: np.ndarray, u: np.ndarray, prescribed: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid dynamics for flattened inputs; u holds a where prescribed, tau elsewhere.

    prescribed: boolean (nv,). Returns (tau, a), both (B, nv).
    """
    if model.has_mimic or (model.floating_base and 0 < prescribed[:6].sum() < 6):
        return _hybrid_dense(model, batch, v, u, prescribed)
    return _hybrid_recursive(model, batch, v, u, prescribed)


def _hybrid_recursive(model: Model, batch: Batch, v: np.ndarray, u: np.ndarray, prescribed: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Kim Table 4 (Table 3 when nothing is prescribed), one coordinate per body.

    Backward:  J^_i = J_i + sum_c Ad_{f_c^-1}^T Pi_c Ad_{f_c^-1}
               b^_i = -ad*_{V_i} J_i V_i - F_ext,i + sum_c Ad_{f_c^-1}^T beta_c
      free:        Psi_i = (S_i^T J^_i S_i)^-1,  Pi_i = J^_i - J^_i S_i Psi_i S_i^T J^_i,
                   beta_i = b^_i + J^_i (eta_i + S_i Psi_i (tau_i - S_i^T (J^_i eta_i + b^_i)))
      prescribed:  Pi_i = J^_i,  beta_i = b^_i + J^_i (eta_i + S_i qdd_i)
    Forward:   free:        qdd_i = Psi_i (tau_i - S_i^T J^_i (Ad_{f_i^-1} dV_lambda + eta_i) - S_i^T b^_i)
               both:        dV_i = Ad_{f_i^-1} dV_lambda + eta_i + S_i qdd_i
               prescribed:  tau_i = S_i^T (J^_i dV_i + b^_i)
    A floating base is solved last in the backward pass: J^_0 dV_0 + b^_0 = F_0 (factor_from_last).
    Accelerations are apparent ones (gravity is the base acceleration -g) until they are returned.
    A pivot D_i = S_i^T J^_i S_i or one of J^_0's that fails core.singular's rule raises SingularInertiaError.
    """
    _, X = joint_transforms(model, batch.q)
    S = model.S
    V0, qd = split(model, v)
    u0, u_body = split(model, u)
    fixed = prescribed[6:] if model.floating_base else prescribed
    V = velocities(model, X, V0, qd)
    eta = bias_accelerations(model, V, qd)

    J_hat = np.broadcast_to(model.J, V.shape + (6,)).copy()
    b_hat = -np.einsum("bnij,bnj->bni", ad_star(V), np.einsum("nij,bnj->bni", model.J, V))
    if batch.f_body is not None:
        b_hat -= batch.f_body
    J0_hat = np.broadcast_to(model.J_base, (len(V0), 6, 6)).copy()
    b0_hat = -np.einsum("bij,bj->bi", ad_star(V0), V0 @ model.J_base.T)
    if batch.f_base is not None:
        b0_hat -= batch.f_base
    scale = inertia_scale(model)
    Psi = np.zeros(qd.shape)
    for i in reversed(range(model.nb)):
        JS = J_hat[:, i] @ S[i]
        if fixed[i]:
            Pi = J_hat[:, i]
            beta = b_hat[:, i] + np.einsum("bij,bj->bi", J_hat[:, i], eta[:, i] + S[i] * u_body[:, i, None])
        else:
            D = JS @ S[i]
            ok = pivot_ok(D, scale)
            if not ok.all():
                refuse(model, f"joint {model.body_joints[i]!r}", i, ~ok, batch.shape)
            Psi[:, i] = 1.0 / D
            Pi = J_hat[:, i] - np.einsum("bi,bj->bij", JS, JS) * Psi[:, i, None, None]
            u_i = u_body[:, i] - np.einsum("bi,bi->b", JS, eta[:, i]) - b_hat[:, i] @ S[i]
            beta = b_hat[:, i] + np.einsum("bij,bj->bi", J_hat[:, i], eta[:, i]) + JS * (Psi[:, i] * u_i)[:, None]
        Pi_p = np.swapaxes(X[:, i], -1, -2) @ Pi @ X[:, i]
        beta_p = np.einsum("bji,bj->bi", X[:, i], beta)
        p = model.parent[i]
        if p < 0:
            J0_hat += Pi_p
            b0_hat += beta_p
        else:
            J_hat[:, p] += Pi_p
            b_hat[:, p] += beta_p

    g0 = gravity_acceleration(model, batch)
    if not model.floating_base:
        dV0, F0 = g0, np.zeros_like(g0)
    elif prescribed[0]:
        dV0 = u0 + g0
        F0 = np.einsum("bij,bj->bi", J0_hat, dV0) + b0_hat
    else:
        F0 = u0
        dV0 = solve_from_last(factor_from_last(model, J0_hat, [(BASE, -1)] * 6, batch.shape), F0 - b0_hat)

    dV = np.zeros_like(V)
    qdd = np.where(fixed, u_body, 0.0)
    tau = np.where(fixed, 0.0, u_body)
    for i, p in enumerate(model.parent):
        dVp = dV0 if p < 0 else dV[:, p]
        a_i = np.einsum("bij,bj->bi", X[:, i], dVp) + eta[:, i]
        if fixed[i]:
            dV[:, i] = a_i + S[i] * qdd[:, i, None]
            tau[:, i] = (np.einsum("bij,bj->bi", J_hat[:, i], dV[:, i]) + b_hat[:, i]) @ S[i]
        else:
            JS = J_hat[:, i] @ S[i]
            qdd[:, i] = Psi[:, i] * (tau[:, i] - np.einsum("bi,bi->b", JS, a_i) - b_hat[:, i] @ S[i])
            dV[:, i] = a_i + S[i] * qdd[:, i, None]
    return join(model, F0, tau), join(model, dV0 - g0, qdd)


def factor_from_last(model: Model, A: np.ndarray, rows: list[tuple[str, int]], shape: tuple[int, ...]
                     ) -> np.ndarray:
    """L (B, k, k), lower triangular with A = L^T L, eliminating A's last row first: the articulated-body
    order of core.singular's rule. rows[j] = (what, body) of row j, named when its pivot fails the rule.

        d = A_jj,  L_jj = sqrt(d),  L_jc = A_jc / L_jj (c < j),  A_rc -= L_jr L_jc (r, c < j)
    """
    scale = inertia_scale(model)
    W = A.copy()
    for j in reversed(range(A.shape[-1])):
        d = W[:, j, j]
        ok = pivot_ok(d, scale)
        if not ok.all():
            refuse(model, *rows[j], ~ok, shape)
        W[:, j, :j + 1] /= np.sqrt(d)[:, None]
        W[:, :j, :j] -= W[:, j, :j, None] * W[:, j, None, :j]
    return np.tril(W)


def solve_from_last(L: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x of (L^T L) x = y for factors L (B, k, k) of factor_from_last and right sides y (B, k)."""
    z = np.linalg.solve(np.swapaxes(L, -1, -2), y[..., None])
    return np.linalg.solve(L, z)[..., 0]


def coordinate_rows(model: Model, free: np.ndarray) -> list[tuple[str, int]]:
    """(what, body) of each free coordinate (`free`, (nv,)), for factor_from_last's errors."""
    base = model.nv - model.n
    return [(BASE, -1) if k < base else (f"joint {model.joint_names[k - base]!r}", int(model.leader_bodies[k - base]))
            for k in np.flatnonzero(free)]


def free_inverse(model: Model, M: np.ndarray, free: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """M_ff^-1 (B, k, k) over the free coordinates `free` (nv,), by factor_from_last (the rule), symmetrised."""
    Mff = M[:, free][:, :, free]
    if not Mff.shape[-1]:
        return Mff.copy()
    L_inv = np.linalg.inv(factor_from_last(model, Mff, coordinate_rows(model, free), shape))
    return L_inv @ np.swapaxes(L_inv, -1, -2)


def _hybrid_dense(model: Model, batch: Batch, v: np.ndarray, u: np.ndarray, prescribed: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid dynamics from M and the bias forces, for what the recursion cannot split.

    Mimic joints couple bodies to one coordinate, and a partly prescribed base splits a 6-DoF
    joint: partition M a + b = tau into prescribed (p) and free (f) rows,
        M_ff a_f = tau_f - b_f - M_fp a_p,   tau_p = M_p. a + b_p,
    M_ff factored from its last coordinate to its first, as the recursion eliminates them (the rule).
    """
    M = mass_matrix(model, batch.q)
    b = rnea_batch(model, batch, v, np.zeros_like(v))
    f, p = ~prescribed, prescribed
    a = np.where(p, u, 0.0)
    rhs = u[:, f] - b[:, f] - np.einsum("bij,bj->bi", M[:, f][:, :, p], u[:, p])
    Mff = M[:, f][:, :, f]
    if Mff.shape[-1]:
        a[:, f] = solve_from_last(factor_from_last(model, Mff, coordinate_rows(model, f), batch.shape), rhs)
    tau = np.where(p, np.einsum("bij,bj->bi", M, a) + b, u)
    return tau, a


def _mask(model: Model, prescribed) -> np.ndarray:
    mask = np.asarray(prescribed)
    if mask.dtype != bool or mask.shape != (model.nv,):
        raise ValueError(f"prescribed: expected a boolean mask of length {model.nv}, got "
                         f"{mask.dtype} array of shape {mask.shape}")
    return mask


def hybrid(model: Model, q, v, a_or_tau, prescribed, *, base_pose=None, f_ext=None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid dynamics: accelerations given where `prescribed`, forces given elsewhere.

    Returns (tau, a), both (..., nv): tau holds the given forces and the forces the prescribed
    motions need; a holds the prescribed accelerations and the resulting free ones.
    With nothing prescribed this is `aba`; with everything prescribed, `rnea`. Raises
    SingularInertiaError when the free coordinates' articulated inertia is singular (core.singular).
    """
    mask = _mask(model, prescribed)
    batch = prepare(model, q, {"v": v, "a_or_tau": a_or_tau}, base_pose=base_pose, f_ext=f_ext)
    tau, a = hybrid_batch(model, batch, *batch.vectors, mask)
    return batch.restore(tau), batch.restore(a)


def aba(model: Model, q, v, tau, *, base_pose=None, f_ext=None) -> np.ndarray:
    """Forward dynamics by the articulated-body algorithm (Kim Table 3): a = M^-1 (tau - b).

    For a floating base tau starts with the base wrench (m, f) applied in the base frame (zero
    for a free-floating robot), and a starts with the base acceleration dV_0/dt. Raises
    SingularInertiaError when an articulated inertia is singular (core.singular's rule; a batch
    names its first such sample).
    """
    batch = prepare(model, q, {"v": v, "tau": tau}, base_pose=base_pose, f_ext=f_ext)
    _, a = hybrid_batch(model, batch, *batch.vectors, np.zeros(model.nv, dtype=bool))
    return batch.restore(a)
