"""Higher-order time derivatives of inverse and forward dynamics (after Ali, Gabellieri, Franchi).

Along a motion q' = qd, T_world_base' = T_world_base [V_0], every quantity of the recursions is
differentiated k times with the Leibniz rule (x y)^(k) = sum_j C(k, j) x^(j) y^(k-j), in body
frames (Kim's recursions) rather than the paper's spatial frame. The building blocks:

    X_i = Ad_{f_i^-1}:   X_i' = -ad_{S_i qd_i} X_i           (Kim eq. 87 with dh_i/dt = S_i qd_i)
                         X_i^(k+1) = -ad_{S_i} sum_j C(k, j) qd_i^(j) X_i^(k-j)
    gravity:             a_g = Ad_{T^-1} (0, -g),  a_g' = -ad_{V_0} a_g,  G_i = X_i G_l (G_0 = a_g)
    twists:              V_i = X_i V_l + S_i qd_i
    wrenches:            F_i = J_i (V_i' + G_i) - ad*_{V_i} J_i V_i + sum_c X_c^T F_c,  tau_i = S_i^T F_i

so that the k-th derivative splits into the unknowns of order k and known lower-order terms:

    V_i^(k+1) = X_i V_l^(k+1) + S_i qd_i^(k+1) + c_i^(k),   c_i^(k) = sum_{j>=1} C(k+1, j) X_i^(j) V_l^(k+1-j)
    F_i^(k)   = J_i V_i^(k+1) + p_i^(k) + sum_c X_c^T F_c^(k),
    p_i^(k)   = J_i G_i^(k) - sum_j C(k, j) ad*_{V_i^(j)} J_i V_i^(k-j) + sum_c sum_{j>=1} C(k, j) X_c^(j)T F_c^(k-j).

Inverse dynamics of order k (H-RNEA) is one forward and one backward pass with (c, p). Forward
dynamics of order k is the articulated-body algorithm with c^(k) in place of eta = ad_V S qd and
p^(k) in place of the bias -ad*_V J V: the same X_i, S_i, J_i, hence the same articulated inertias
J^_i and Psi_i at every order (Ali et al., Lemma 2), computed once. The cost is quadratic in the
order and linear in the number of bodies.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import comb

import numpy as np

from ..checks import Batch
from ..model import Model
from ..reference.hybrid import BASE, coordinate_rows, factor_from_last, solve_from_last
from ..reference.kinematics import gravity_acceleration, join, joint_transforms, split, velocities
from ..reference.mass_matrix import mass_matrix
from ..singular import inertia_scale, pivot_ok, refuse
from ..spatial import ad, ad_star

__all__ = ["Motion", "rnea_time_derivatives_batch", "aba_time_derivatives_batch", "ArticulatedInertia"]


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A x over the batch: (..., 6, 6) x (..., 6) -> (..., 6)."""
    return np.einsum("...ij,...j->...i", A, x)


def _mtv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A^T x over the batch."""
    return np.einsum("...ji,...j->...i", A, x)


@dataclass
class Motion:
    """Time derivatives along the motion; element k of each list is the k-th derivative.

    X: (B, nb, 6, 6) Ad_{f_i^-1};  qd: (B, nb) joint rates;  V0, a_g: (B, 6) base twist and gravity
    acceleration in the base frame;  V, G: (B, nb, 6) body twists and gravity in body frames;
    F0, F: base wrench (B, 6) and joint wrenches (B, nb, 6).
    """

    X: list[np.ndarray]
    qd: list[np.ndarray]
    V0: list[np.ndarray]
    V: list[np.ndarray]
    a_g: list[np.ndarray]
    G: list[np.ndarray]
    F0: list[np.ndarray] = field(default_factory=list)
    F: list[np.ndarray] = field(default_factory=list)


def start(model: Model, batch: Batch, v: np.ndarray) -> Motion:
    """Order-0 kinematics: X_i, V_i and the gravity accelerations G_i."""
    _, X = joint_transforms(model, batch.q)
    V0, qd = split(model, v)
    a_g = gravity_acceleration(model, batch)
    V = velocities(model, X, V0, qd)
    m = Motion([X], [qd], [V0], [V], [a_g], [])
    m.G.append(_gravity_order(model, m, 0))
    return m


def known_terms(model: Model, m: Motion, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Extend the motion to order k (X^(k+1), a_g^(k), G^(k)) and return (c^(k), p^(k), p_0^(k)).

    Needs qd^(0..k), V0^(0..k), V^(0..k) and F^(0..k-1).
    """
    adS = ad(model.S)  # (nb, 6, 6)
    m.X.append(-adS @ sum(comb(k, j) * m.qd[j][..., None, None] * m.X[k - j] for j in range(k + 1)))
    if k >= 1:
        m.a_g.append(-sum(comb(k - 1, j) * _mv(ad(m.V0[j]), m.a_g[k - 1 - j]) for j in range(k)))
        m.G.append(_gravity_order(model, m, k))
    c = np.zeros_like(m.V[0])
    for i, p in enumerate(model.parent):
        Vp = m.V0 if p < 0 else [x[:, p] for x in m.V]
        c[:, i] = sum(comb(k + 1, j) * _mv(m.X[j][:, i], Vp[k + 1 - j]) for j in range(1, k + 2))
    p_body = _momentum_terms(model.J, m.V, m.G, k)
    p0 = _momentum_terms(model.J_base, [x[:, None] for x in m.V0], [x[:, None] for x in m.a_g], k)[:, 0]
    if not model.floating_base:
        p0 = np.zeros_like(p0)
    for i, p in enumerate(model.parent):  # cross terms sum_{j>=1} C(k, j) X_c^(j)T F_c^(k-j)
        cross = sum((comb(k, j) * _mtv(m.X[j][:, i], m.F[k - j][:, i]) for j in range(1, k + 1)),
                    np.zeros_like(p0))
        if p < 0:
            p0 = p0 + cross
        else:
            p_body[:, p] += cross
    return c, p_body, p0


def _gravity_order(model: Model, m: Motion, k: int) -> np.ndarray:
    """G_i^(k) = sum_j C(k, j) X_i^(j) G_l^(k-j), with G_l = a_g at the root."""
    G = np.zeros_like(m.V[0])
    for i, p in enumerate(model.parent):
        Gp = m.a_g if p < 0 else [x[:, p] for x in m.G] + [G[:, p]]
        G[:, i] = sum(comb(k, j) * _mv(m.X[j][:, i], Gp[k - j]) for j in range(k + 1))
    return G


def _momentum_terms(J: np.ndarray, V: list[np.ndarray], G: list[np.ndarray], k: int) -> np.ndarray:
    """J G^(k) - sum_j C(k, j) ad*_{V^(j)} J V^(k-j), per body (J (nb, 6, 6) or (6, 6))."""
    out = _mv(J, G[k])
    for j in range(k + 1):
        out = out - comb(k, j) * _mv(ad_star(V[j]), _mv(J, V[k - j]))
    return out


def rnea_step(model: Model, m: Motion, k: int, c: np.ndarray, p: np.ndarray, p0: np.ndarray,
              V0_next: np.ndarray, qd_next: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order-k inverse dynamics: V^(k+1) forward, F^(k) backward. Returns (F0^(k), tau_body^(k))."""
    X = m.X[0]
    V_next = np.zeros_like(c)
    for i, par in enumerate(model.parent):
        Vp = V0_next if par < 0 else V_next[:, par]
        V_next[:, i] = _mv(X[:, i], Vp) + model.S[i] * qd_next[:, i, None] + c[:, i]
    F = _mv(model.J, V_next) + p
    F0 = _mv(model.J_base, V0_next) + p0 if model.floating_base else np.zeros_like(p0)
    tau = np.zeros(qd_next.shape)
    for i in reversed(range(model.nb)):
        tau[:, i] = F[:, i] @ model.S[i]
        par = model.parent[i]
        if par < 0:
            F0 = F0 + _mtv(X[:, i], F[:, i])
        else:
            F[:, par] += _mtv(X[:, i], F[:, i])
    _record(m, k, V0_next, qd_next, V_next, F0, F)
    return F0, tau


def _record(m: Motion, k: int, V0_next, qd_next, V_next, F0, F) -> None:
    m.V0.append(V0_next)
    m.qd.append(qd_next)
    m.V.append(V_next)
    m.F0.append(F0)
    m.F.append(F)
    assert len(m.V) == k + 2 and len(m.F) == k + 1


def rnea_time_derivatives_batch(model: Model, batch: Batch, v_derivs: list[np.ndarray]) -> list[np.ndarray]:
    """[tau^(0), ..., tau^(r)] for v_derivs = [v, ..., v^(r+1)] (flattened batch)."""
    m = start(model, batch, v_derivs[0])
    out = []
    for k in range(len(v_derivs) - 1):
        c, p, p0 = known_terms(model, m, k)
        V0_next, qd_next = split(model, v_derivs[k + 1])
        F0, tau = rnea_step(model, m, k, c, p, p0, V0_next, qd_next)
        out.append(join(model, F0, tau))
    return out


@dataclass
class ArticulatedInertia:
    """J^_i, Psi_i = (S_i^T J^_i S_i)^-1 and the factor of the base's J^_0 (Kim Table 3): the same at every order."""

    J_hat: np.ndarray  # (B, nb, 6, 6)
    Psi: np.ndarray  # (B, nb)
    L0: np.ndarray | None  # (B, 6, 6), J^_0 = L0^T L0 (reference.hybrid.factor_from_last); None for a fixed base


def articulated_inertias(model: Model, X: np.ndarray, shape: tuple[int, ...]) -> ArticulatedInertia:
    """J^_i = J_i + sum_c X_c^T (J^_c - J^_c S_c Psi_c S_c^T J^_c) X_c, once per configuration.

    SingularInertiaError (naming the first sample of a batch of `shape`) where a pivot fails core.singular's rule.
    """
    B = X.shape[0]
    J_hat = np.broadcast_to(model.J, (B,) + model.J.shape).copy()
    J0_hat = np.broadcast_to(model.J_base, (B, 6, 6)).copy()
    Psi = np.zeros((B, model.nb))
    scale = inertia_scale(model)
    for i in reversed(range(model.nb)):
        JS = J_hat[:, i] @ model.S[i]
        D = JS @ model.S[i]
        ok = pivot_ok(D, scale)
        if not ok.all():
            refuse(model, f"joint {model.body_joints[i]!r}", i, ~ok, shape)
        Psi[:, i] = 1.0 / D
        Pi = J_hat[:, i] - np.einsum("bi,bj->bij", JS, JS) * Psi[:, i, None, None]
        Pi_p = np.swapaxes(X[:, i], -1, -2) @ Pi @ X[:, i]
        par = model.parent[i]
        if par < 0:
            J0_hat += Pi_p
        else:
            J_hat[:, par] += Pi_p
    L0 = factor_from_last(model, J0_hat, [(BASE, -1)] * 6, shape) if model.floating_base else None
    return ArticulatedInertia(J_hat, Psi, L0)


def aba_step(model: Model, m: Motion, k: int, art: ArticulatedInertia, c: np.ndarray, p: np.ndarray,
             p0: np.ndarray, F0: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Order-k forward dynamics (Kim Table 3 with eta -> c^(k), bias -> p^(k)); returns a^(k).

    Backward:  b^_i = p_i + sum_c X_c^T beta_c,
               beta_i = b^_i + J^_i (c_i + S_i Psi_i (tau_i - S_i^T (J^_i c_i + b^_i)))
    Base:      J^_0 V_0^(k+1) = F_0 - b^_0   (floating base; V_0 = 0 for a fixed one)
    Forward:   qd_i^(k+1) = Psi_i (tau_i - S_i^T J^_i (X_i V_l^(k+1) + c_i) - S_i^T b^_i)
               V_i^(k+1) = X_i V_l^(k+1) + c_i + S_i qd_i^(k+1),   F_i^(k) = J^_i V_i^(k+1) + b^_i
    """
    X, S, Jh = m.X[0], model.S, art.J_hat
    b_hat = p.copy()
    b0 = p0.copy()
    for i in reversed(range(model.nb)):
        u = tau[:, i] - np.einsum("bi,bi->b", Jh[:, i] @ S[i], c[:, i]) - b_hat[:, i] @ S[i]
        beta = b_hat[:, i] + _mv(Jh[:, i], c[:, i] + S[i] * (art.Psi[:, i] * u)[:, None])
        par = model.parent[i]
        if par < 0:
            b0 = b0 + _mtv(X[:, i], beta)
        else:
            b_hat[:, par] += _mtv(X[:, i], beta)
    V0_next = solve_from_last(art.L0, F0 - b0) if art.L0 is not None else np.zeros_like(b0)
    V_next = np.zeros_like(c)
    qd_next = np.zeros(tau.shape)
    for i, par in enumerate(model.parent):
        Vp = V0_next if par < 0 else V_next[:, par]
        w = _mv(X[:, i], Vp) + c[:, i]
        qd_next[:, i] = art.Psi[:, i] * (tau[:, i] - np.einsum("bi,bi->b", Jh[:, i] @ S[i], w) - b_hat[:, i] @ S[i])
        V_next[:, i] = w + S[i] * qd_next[:, i, None]
    F = _mv(Jh, V_next) + b_hat
    F0_out = F0 if model.floating_base else np.zeros_like(F0)
    _record(m, k, V0_next, qd_next, V_next, F0_out, F)
    return join(model, V0_next, qd_next) if model.floating_base else qd_next


def aba_time_derivatives_batch(model: Model, batch: Batch, v: np.ndarray, tau_derivs: list[np.ndarray]
                               ) -> list[np.ndarray]:
    """[a^(0), ..., a^(r)] for tau_derivs = [tau, ..., tau^(r)] (flattened batch)."""
    m = start(model, batch, v)
    if model.has_mimic:
        return _aba_time_derivatives_dense(model, batch, m, tau_derivs)
    art = articulated_inertias(model, m.X[0], batch.shape)  # Lemma 2: once for every order
    out = []
    for k, tau_k in enumerate(tau_derivs):
        c, p, p0 = known_terms(model, m, k)
        F0, tau_body = split(model, tau_k)
        out.append(aba_step(model, m, k, art, c, p, p0, F0, tau_body))
    return out


def _aba_time_derivatives_dense(model: Model, batch: Batch, m: Motion, tau_derivs: list[np.ndarray]
                                ) -> list[np.ndarray]:
    """Mimic joints couple bodies: a^(k) = M^-1 (tau^(k) - h^(k)), one factor of M for all orders.

    h^(k) is the order-k inverse dynamics with the unknown v^(k+1) set to zero (tau^(k) is affine
    in v^(k+1) with the coefficient M).
    """
    # M does not depend on the base pose
    every = np.ones(model.nv, bool)
    L = factor_from_last(model, mass_matrix(model, batch.q), coordinate_rows(model, every), batch.shape)
    zero = np.zeros((batch.q.shape[0], model.nv))
    out = []
    for k, tau_k in enumerate(tau_derivs):
        c, p, p0 = known_terms(model, m, k)
        trial = Motion(m.X, list(m.qd), list(m.V0), list(m.V), m.a_g, m.G, list(m.F0), list(m.F))
        h = join(model, *rnea_step(model, trial, k, c, p, p0, *split(model, zero)))
        a_k = solve_from_last(L, tau_k - h)
        rnea_step(model, m, k, c, p, p0, *split(model, a_k))
        out.append(a_k)
    return out
