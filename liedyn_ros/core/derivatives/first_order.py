"""First-order derivatives of inverse, forward and hybrid dynamics (Kim 2012, section 4).

Readable reference. `rnea_directional` is Kim Table 5 for D scalars p at once: every derivative
quantity carries a trailing axis of length D, one column per scalar. With p running over the
coordinates, velocities and accelerations it gives dtau/dq, dtau/dv and dtau/da = M.

Forward and hybrid dynamics solve the same equations ID(q, v, a) = tau for other unknowns, so their
derivatives follow from those of ID by the implicit-function theorem, which is what Kim Tables 6
and 7 evaluate recursively:
    forward:  dqdd/dx = -M^-1 dID/dx  (x = q, v),   dqdd/dtau = M^-1          (Carpentier 2018)
    hybrid:   M_ff da_f = dtau_f - dID_f/dq dq - dID_f/dv dv - M_fp da_p,
              dtau_p    = dID_p/dq dq + dID_p/dv dv + M_pf da_f + M_pp da_p.

Floating base: the base pose enters only through the gravity acceleration a_g = Ad_{T^-1} (0, -g)
of the base frame. Along T exp([xi]), d a_g = -ad_xi a_g = ad_{a_g} xi, so the q-derivative of the
base (the first six columns) is dID/da_0 ad_{a_g}.

Body coordinates: the recursions run on bodies (mimic bodies included) with the body-coordinate
map P_full = diag(1_6 (floating base), P); dID/dq = P_full^T (dID/dq_body) P_full.
"""
from __future__ import annotations

import numpy as np

from ..checks import Batch
from ..model import Model
from ..reference.kinematics import (
    bias_accelerations,
    gravity_acceleration,
    joint_transforms,
    split,
    velocities,
)
from ..spatial import ad, ad_star, ad_star_bar

__all__ = [
    "body_map",
    "rnea_directional",
    "rnea_derivatives_batch",
    "aba_from_rnea_derivatives",
    "hybrid_from_rnea_derivatives",
]


def body_map(model: Model) -> np.ndarray:
    """P_full: generalized coordinates -> (base xi, body joint angles), shape (6b + nb, nv)."""
    if not model.floating_base:
        return np.array(model.P)
    out = np.zeros((6 + model.nb, model.nv))
    out[:6, :6] = np.eye(6)
    out[6:, 6:] = model.P
    return out


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Batched A x for A (B, 6, 6) or (6, 6) and x (B, 6, D)."""
    return A @ x


def rnea_directional(model: Model, batch: Batch, v: np.ndarray, a: np.ndarray,
                     dq: np.ndarray, dv: np.ndarray, da: np.ndarray) -> np.ndarray:
    """Kim Table 5: d tau_body / dp for D scalars p, given dq, dv, da = d(q, v, a)/dp.

    dq, dv, da: (B, 6b + nb, D) derivatives of (xi_base, q_body), (V_0, qd_body), (dV_0, qdd_body).
    Returns dtau/dp, (B, 6b + nb, D): base wrench rows first for a floating base.

    Forward (dh_i/dp = S_i dq_i/dp, S_i constant in {i}, so dS_i/dp = dS_i'/dp = 0):
        dV_i  = Ad_{f_i^-1} dV_l - ad_{dh_i} Ad_{f_i^-1} V_l + S_i dqd_i
        ddV_i = Ad_{f_i^-1} ddV_l - ad_{dh_i} Ad_{f_i^-1} dV_l + S_i dqdd_i
                + ad_{dV_i} S_i qd_i + ad_{V_i} S_i dqd_i
    Backward:
        dF_i  = J_i ddV_i - ad*_{dV_i} J_i V_i - ad*_{V_i} J_i dV_i
                + sum_c Ad*_{f_c^-1} (dF_c - ad*_{dh_c} F_c)
        dtau_i = S_i^T dF_i
    """
    base = 6 if model.floating_base else 0
    S = model.S
    _, X = joint_transforms(model, batch.q)
    V0, qd = split(model, v)
    A0, qdd = split(model, a)
    a_g = gravity_acceleration(model, batch)
    A0 = A0 + a_g
    V = velocities(model, X, V0, qd)
    eta = bias_accelerations(model, V, qd)
    D = dq.shape[-1]
    zeros = np.zeros((len(V0), 6, D))
    dxi = dq[:, :6] if base else zeros
    dV0 = dv[:, :6] if base else zeros
    dA0 = (da[:, :6] + ad(a_g) @ dxi) if base else zeros  # d a_g = ad_{a_g} xi
    dq_b, dqd_b, dqdd_b = dq[:, base:], dv[:, base:], da[:, base:]

    A = np.zeros_like(V)
    dV = np.zeros(V.shape + (D,))
    dA = np.zeros_like(dV)
    for i, p in enumerate(model.parent):
        Vp, Ap = (V0, A0) if p < 0 else (V[:, p], A[:, p])
        dVp, dAp = (dV0, dA0) if p < 0 else (dV[:, p], dA[:, p])
        XV = np.einsum("bij,bj->bi", X[:, i], Vp)
        XA = np.einsum("bij,bj->bi", X[:, i], Ap)
        A[:, i] = XA + eta[:, i] + S[i] * qdd[:, i, None]
        adS = ad(S[i])
        dV[:, i] = (X[:, i] @ dVp - (adS @ XV.T).T[:, :, None] * dq_b[:, i, None, :]
                    + S[i][None, :, None] * dqd_b[:, i, None, :])
        dA[:, i] = (X[:, i] @ dAp - (adS @ XA.T).T[:, :, None] * dq_b[:, i, None, :]
                    + S[i][None, :, None] * dqdd_b[:, i, None, :]
                    - qd[:, i, None, None] * (adS @ dV[:, i])  # ad_{dV} S qd = -ad_{S qd} dV
                    + (ad(V[:, i]) @ S[i])[:, :, None] * dqd_b[:, i, None, :])

    F = np.zeros_like(V)
    dF = np.zeros_like(dV)
    F0, dF0 = _body_force(model.J_base, V0, A0, dV0, dA0)
    for i in range(model.nb):
        F[:, i], dF[:, i] = _body_force(model.J[i], V[:, i], A[:, i], dV[:, i], dA[:, i])
    dtau = np.zeros((len(V0), base + model.nb, D))
    for i in reversed(range(model.nb)):
        dtau[:, base + i] = np.einsum("j,bjd->bd", S[i], dF[:, i])
        p = model.parent[i]
        Xt = np.swapaxes(X[:, i], -1, -2)
        Fp = np.einsum("bij,bj->bi", Xt, F[:, i])
        dFp = Xt @ (dF[:, i] - (ad_star(S[i]) @ F[:, i].T).T[:, :, None] * dq_b[:, i, None, :])
        if p < 0:
            F0, dF0 = F0 + Fp, dF0 + dFp
        else:
            F[:, p] += Fp
            dF[:, p] += dFp
    if base:
        dtau[:, :6] = dF0
    return dtau


def _body_force(J: np.ndarray, V: np.ndarray, A: np.ndarray, dV: np.ndarray, dA: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """F = J dV/dt - ad*_V J V and its derivative J ddV - ad*_{dV} J V - ad*_V J dV (one body)."""
    JV = V @ J.T
    F = A @ J.T - np.einsum("bij,bj->bi", ad_star(V), JV)
    dF = J @ dA - ad_star_bar(JV) @ dV - ad_star(V) @ (J @ dV)
    return F, dF


def rnea_derivatives_batch(model: Model, batch: Batch, v: np.ndarray, a: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dtau/dq, dtau/dv, dtau/da = M), each (B, nv, nv): Table 5 with p = every q, v, a entry."""
    Pf = body_map(model)
    nvb, nv = Pf.shape
    B = batch.q.shape[0]
    eye = np.broadcast_to(Pf, (B, nvb, nv))
    zero = np.zeros((B, nvb, nv))
    dtau = rnea_directional(model, batch, v, a,
                            np.concatenate([eye, zero, zero], -1),
                            np.concatenate([zero, eye, zero], -1),
                            np.concatenate([zero, zero, eye], -1))
    dtau = Pf.T @ dtau
    return dtau[..., :nv], dtau[..., nv:2 * nv], dtau[..., 2 * nv:]


def aba_from_rnea_derivatives(dtau_dq: np.ndarray, dtau_dv: np.ndarray, M_inv: np.ndarray
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward-dynamics derivatives at a = FD(q, v, tau): (-M^-1 dID/dq, -M^-1 dID/dv, M^-1)."""
    return -M_inv @ dtau_dq, -M_inv @ dtau_dv, M_inv


def hybrid_from_rnea_derivatives(dtau_dq: np.ndarray, dtau_dv: np.ndarray, M: np.ndarray, Mff_inv: np.ndarray,
                                 prescribed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Derivatives of the unknowns y (tau where prescribed, a elsewhere) w.r.t. q, v and u.

    u = a_or_tau (a where prescribed, tau elsewhere); with f free and p prescribed rows:
        dy_f/dx = -M_ff^-1 dID_f/dx,  dy_f/du_f = M_ff^-1,  dy_f/du_p = -M_ff^-1 M_fp
        dy_p/dx = dID_p/dx + M_pf dy_f/dx,  dy_p/du = M_p. da/du   (da_p/du_p = 1, da_f/du = dy_f/du)
    """
    f, p = ~prescribed, prescribed
    B, nv = M.shape[0], M.shape[-1]
    Mfp = M[:, f][:, :, p]
    da_du = np.zeros((B, nv, nv))  # the full acceleration's derivative w.r.t. u
    da_du[:, p, p] = 1.0
    da_du[:, f] = np.concatenate([Mff_inv, -Mff_inv @ Mfp], -1)[..., _order(f, p)]
    dyf_dq, dyf_dv = -Mff_inv @ dtau_dq[:, f], -Mff_inv @ dtau_dv[:, f]
    Mpf = M[:, p][:, :, f]
    dy_dq = np.zeros_like(dtau_dq)
    dy_dv = np.zeros_like(dtau_dv)
    dy_du = np.zeros_like(M)
    dy_dq[:, f], dy_dv[:, f], dy_du[:, f] = dyf_dq, dyf_dv, da_du[:, f]
    dy_dq[:, p] = dtau_dq[:, p] + Mpf @ dyf_dq
    dy_dv[:, p] = dtau_dv[:, p] + Mpf @ dyf_dv
    dy_du[:, p] = M[:, p] @ da_du
    return dy_dq, dy_dv, dy_du


def _order(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Column permutation that takes [free columns, prescribed columns] back to 0..nv-1."""
    cols = np.concatenate([np.flatnonzero(f), np.flatnonzero(p)])
    return np.argsort(cols)
