"""Fast path of the first-order derivatives: numba kernels, O(n * depth), no allocation per body.

Kim Table 5 propagates dV_i/dp through every Ad_{f_i^-1}: 36 multiplications per body and per
scalar p. The kernel evaluates the same derivatives in closed form instead, in the frame {0}
(world for a fixed base, the base frame for a floating one), where a change of q_j moves the
subtree of j rigidly by exp([s_j] dq_j) (s_j = Ad_{T_0j} S_j). Writing, in {0}, for body k

    V_k = V_l + s_k qd_k,  A_k = A_l + ad_{V_k} s_k qd_k + s_k qdd_k   (A_0 = dV_0 + a_g)
    f_k = I_k A_k - ad*_{V_k} I_k V_k,  I_k = Ad_{T_0k^-1}^T J_k Ad_{T_0k^-1}
    B_k = I_k ad_{V_k} + ad*_{V_k} I_k + ad*bar(I_k V_k)     (d f_k = I_k dA_k - B_k dV_k)

and sums over the subtree of i: I^c_i, B^c_i, F^c_i (tau_i = s_i^T F^c_i), a change of q_j is a
rigid motion of the subtree plus a uniform change of its twist and acceleration
    dq_j:  dV = ad_{V_j} s_j = y_j,  dA = ad_{A_j} s_j + ad_{V_j} y_j   (the rigid part moves s_i too)
    dqd_j: dV = s_j,                 dA = 2 y_j
    dqdd_j: dV = 0,                  dA = s_j
and a uniform (dV, dA) changes the subtree wrench by I^c_i dA + (I^c_i ad_{V_j} - B^c_i) dV. Hence

    i in subtree(j):  dtau_i/dq_j = a_i^T (ad_{A_j} s_j + ad_{V_j} y_j) - b_i^T y_j
                      dtau_i/dqd_j = 2 a_i^T y_j - b_i^T s_j,   M_ij = a_i^T s_j
                      with a_i = I^c_i s_i, b_i = B^c_i^T s_i
    i ancestor of j:  dtau_i/dq_j = s_i^T (I^c_j (ad_{A_j} s_j + ad_{V_j} y_j) - B^c_j y_j - ad*_{s_j} F^c_j)
                      dtau_i/dqd_j = s_i^T (2 I^c_j y_j - B^c_j s_j),   M_ij = s_i^T I^c_j s_j
    base columns:     d/dxi: a_i^T ad_{a_g}  (gravity only),  d/dV_0: a_i^T ad_{V_0} - b_i^T,  M: a_i^T
    base rows:        the same with s_i = 1_6 and subtree = every body.

This is the analytic scheme of Carpentier & Mansard (2018), derived in our notation; tests prove
it equal to the Table 5 reference. aba derivatives: -M^-1 dID/dx at a = FD(q, v, tau).
"""
from __future__ import annotations

import weakref

import numba as nb
import numpy as np

from ..checks import Batch
from ..model import Model
from ..reference.kinematics import gravity_acceleration, split
from .first_order import body_map

__all__ = ["rnea_derivatives_fast", "aba_derivatives_fast"]

_JIT = dict(cache=True, nogil=True, fastmath=False)


@nb.njit(**_JIT)
def _ad_vec(V, W, out):
    """out = ad_V W = (w x w', w x v' + v x w')."""
    out[0] = V[1] * W[2] - V[2] * W[1]
    out[1] = V[2] * W[0] - V[0] * W[2]
    out[2] = V[0] * W[1] - V[1] * W[0]
    out[3] = V[1] * W[5] - V[2] * W[4] + V[4] * W[2] - V[5] * W[1]
    out[4] = V[2] * W[3] - V[0] * W[5] + V[5] * W[0] - V[3] * W[2]
    out[5] = V[0] * W[4] - V[1] * W[3] + V[3] * W[1] - V[4] * W[0]


@nb.njit(**_JIT)
def _ad_star_vec(V, F, out):
    """out = ad*_V F = ad_V^T F = (-(w x m) - v x f, -(w x f))."""
    m0, m1, m2, f0, f1, f2 = F[0], F[1], F[2], F[3], F[4], F[5]
    out[0] = -(V[1] * m2 - V[2] * m1) - (V[4] * f2 - V[5] * f1)
    out[1] = -(V[2] * m0 - V[0] * m2) - (V[5] * f0 - V[3] * f2)
    out[2] = -(V[0] * m1 - V[1] * m0) - (V[3] * f1 - V[4] * f0)
    out[3] = -(V[1] * f2 - V[2] * f1)
    out[4] = -(V[2] * f0 - V[0] * f2)
    out[5] = -(V[0] * f1 - V[1] * f0)


@nb.njit(**_JIT)
def _ad_mat(V, out):
    out[:] = 0.0
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    for k in range(2):
        o = 3 * k
        out[o + 0, o + 1] = -w2
        out[o + 0, o + 2] = w1
        out[o + 1, o + 0] = w2
        out[o + 1, o + 2] = -w0
        out[o + 2, o + 0] = -w1
        out[o + 2, o + 1] = w0
    out[3, 1], out[3, 2] = -v2, v1
    out[4, 0], out[4, 2] = v2, -v0
    out[5, 0], out[5, 1] = -v1, v0


@nb.njit(**_JIT)
def _ad_star_bar_mat(F, out):
    """ad*_V F = out V: [[[m], [f]], [[f], 0]]."""
    out[:] = 0.0
    m0, m1, m2, f0, f1, f2 = F[0], F[1], F[2], F[3], F[4], F[5]
    for (r, c, x0, x1, x2) in ((0, 0, m0, m1, m2), (0, 3, f0, f1, f2), (3, 0, f0, f1, f2)):
        out[r + 0, c + 1] = -x2
        out[r + 0, c + 2] = x1
        out[r + 1, c + 0] = x2
        out[r + 1, c + 2] = -x0
        out[r + 2, c + 0] = -x1
        out[r + 2, c + 1] = x0


@nb.njit(**_JIT)
def _joint_pose(Mi, Si, qi, out):
    """out = M_i exp([S_i] q_i) for a revolute (unit w, v = 0) or prismatic (w = 0) screw."""
    E = np.eye(4)
    w0, w1, w2 = Si[0], Si[1], Si[2]
    if w0 * w0 + w1 * w1 + w2 * w2 > 0.5:
        c, s = np.cos(qi), np.sin(qi)
        C = 1.0 - c
        E[0, 0] = c + w0 * w0 * C
        E[0, 1] = w0 * w1 * C - w2 * s
        E[0, 2] = w0 * w2 * C + w1 * s
        E[1, 0] = w1 * w0 * C + w2 * s
        E[1, 1] = c + w1 * w1 * C
        E[1, 2] = w1 * w2 * C - w0 * s
        E[2, 0] = w2 * w0 * C - w1 * s
        E[2, 1] = w2 * w1 * C + w0 * s
        E[2, 2] = c + w2 * w2 * C
    else:
        E[0, 3], E[1, 3], E[2, 3] = Si[3] * qi, Si[4] * qi, Si[5] * qi
    for r in range(4):
        for k in range(4):
            acc = 0.0
            for m in range(4):
                acc += Mi[r, m] * E[m, k]
            out[r, k] = acc


@nb.njit(**_JIT)
def _Ad_vec(T, x, out):
    """out = Ad_T x = (R w, p x (R w) + R v)."""
    for r in range(3):
        out[r] = T[r, 0] * x[0] + T[r, 1] * x[1] + T[r, 2] * x[2]
        out[3 + r] = T[r, 0] * x[3] + T[r, 1] * x[4] + T[r, 2] * x[5]
    p0, p1, p2 = T[0, 3], T[1, 3], T[2, 3]
    out[3] += p1 * out[2] - p2 * out[1]
    out[4] += p2 * out[0] - p0 * out[2]
    out[5] += p0 * out[1] - p1 * out[0]


@nb.njit(**_JIT)
def _Ad_inv_mat(T, out):
    """out = Ad_{T^-1} = [[R^T, 0], [-R^T [p], R^T]]."""
    out[:] = 0.0
    p0, p1, p2 = T[0, 3], T[1, 3], T[2, 3]
    for r in range(3):
        for c in range(3):
            out[r, c] = T[c, r]
            out[3 + r, 3 + c] = T[c, r]
        # (-R^T [p])_{r,:} = -(R^T)_{r,:} [p]
        a0, a1, a2 = T[0, r], T[1, r], T[2, r]
        out[3 + r, 0] = -(a1 * p2 - a2 * p1)
        out[3 + r, 1] = -(a2 * p0 - a0 * p2)
        out[3 + r, 2] = -(a0 * p1 - a1 * p0)


@nb.njit(**_JIT)
def _congruence(X, J, out, tmp):
    """out = X^T J X (6x6)."""
    for r in range(6):
        for c in range(6):
            acc = 0.0
            for m in range(6):
                acc += J[r, m] * X[m, c]
            tmp[r, c] = acc
    for r in range(6):
        for c in range(6):
            acc = 0.0
            for m in range(6):
                acc += X[m, r] * tmp[m, c]
            out[r, c] = acc


@nb.njit(**_JIT)
def _matvec(A, x, out):
    for r in range(6):
        acc = 0.0
        for c in range(6):
            acc += A[r, c] * x[c]
        out[r] = acc


@nb.njit(**_JIT)
def _matTvec(A, x, out):
    for r in range(6):
        acc = 0.0
        for c in range(6):
            acc += A[c, r] * x[c]
        out[r] = acc


@nb.njit(**_JIT)
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@nb.njit(**_JIT)
def _body_terms(Ik, V, A, h, f, Bk, adV, tmp6, tmp66):
    """h = I V, f = I A - ad*_V h, B = I ad_V + ad*_V I + ad*bar(h)."""
    _matvec(Ik, V, h)
    _matvec(Ik, A, f)
    _ad_star_vec(V, h, tmp6)
    for r in range(6):
        f[r] -= tmp6[r]
    _ad_mat(V, adV)
    _ad_star_bar_mat(h, Bk)
    for r in range(6):
        for c in range(6):
            acc = 0.0
            for m in range(6):
                acc += Ik[r, m] * adV[m, c] + adV[m, r] * Ik[m, c]
            Bk[r, c] += acc


@nb.njit(**_JIT)
def _derivatives_one(parent, Mh, S, J, J0, floating, qb, V0, qd, A0, qdd, out_tau, dq, dv, Mm):
    """One sample: tau_body, dtau/dq_body, dtau/dv_body and M (base rows/columns first if floating).

    A0 is the base acceleration including gravity, in {0}; V0 the base twist (zero if fixed).
    """
    n = parent.shape[0]
    o = 6 if floating else 0
    T = np.empty((n, 4, 4))
    s = np.empty((n, 6))
    V = np.empty((n, 6))
    A = np.empty((n, 6))
    Ic = np.empty((n, 6, 6))
    Bc = np.empty((n, 6, 6))
    Fc = np.empty((n, 6))
    f = np.empty((4, 4))
    X = np.empty((6, 6))
    adV = np.empty((6, 6))
    tmp66 = np.empty((6, 6))
    tmp6 = np.empty(6)
    h = np.empty(6)
    sdot = np.empty(6)
    # Forward: poses, screws, twists and accelerations in {0}; body terms I_k, B_k, f_k.
    for i in range(n):
        p = parent[i]
        _joint_pose(Mh[i], S[i], qb[i], f)
        if p < 0:
            T[i] = f
            Vp, Ap = V0, A0
        else:
            for r in range(4):
                for k in range(4):
                    T[i, r, k] = T[p, r, 0] * f[0, k] + T[p, r, 1] * f[1, k] + T[p, r, 2] * f[2, k] + T[p, r, 3] * f[3, k]
            Vp, Ap = V[p], A[p]
        _Ad_vec(T[i], S[i], s[i])
        for r in range(6):
            V[i, r] = Vp[r] + s[i, r] * qd[i]
        _ad_vec(V[i], s[i], sdot)
        for r in range(6):
            A[i, r] = Ap[r] + sdot[r] * qd[i] + s[i, r] * qdd[i]
        _Ad_inv_mat(T[i], X)
        _congruence(X, J[i], Ic[i], tmp66)
        _body_terms(Ic[i], V[i], A[i], h, Fc[i], Bc[i], adV, tmp6, tmp66)
    Ic0 = J0.copy()
    Bc0 = np.zeros((6, 6))
    Fc0 = np.zeros(6)
    if floating:
        _body_terms(J0, V0, A0, h, Fc0, Bc0, adV, tmp6, tmp66)
    # Backward: subtree sums.
    for i in range(n - 1, -1, -1):
        p = parent[i]
        if p < 0:
            Ic0 += Ic[i]
            Bc0 += Bc[i]
            Fc0 += Fc[i]
        else:
            Ic[p] += Ic[i]
            Bc[p] += Bc[i]
            Fc[p] += Fc[i]
    # Per joint j: column vectors; per row i: a_i = I^c_i s_i, b_i = B^c_i^T s_i.
    a = np.empty((n, 6))
    b = np.empty((n, 6))
    y = np.empty((n, 6))
    zq = np.empty((n, 6))
    Uq = np.empty((n, 6))
    Uv = np.empty((n, 6))
    Ua = np.empty((n, 6))
    for j in range(n):
        _matvec(Ic[j], s[j], a[j])
        _matTvec(Bc[j], s[j], b[j])
        out_tau[o + j] = _dot(s[j], Fc[j])
        _ad_vec(V[j], s[j], y[j])
        _ad_vec(A[j], s[j], zq[j])
        _ad_vec(V[j], y[j], tmp6)
        for r in range(6):
            zq[j, r] += tmp6[r]
        _matvec(Ic[j], zq[j], Uq[j])
        _matvec(Bc[j], y[j], tmp6)
        _ad_star_vec(s[j], Fc[j], h)
        for r in range(6):
            Uq[j, r] -= tmp6[r] + h[r]
        _matvec(Ic[j], y[j], Uv[j])
        _matvec(Bc[j], s[j], tmp6)
        for r in range(6):
            Uv[j, r] = 2.0 * Uv[j, r] - tmp6[r]
        Ua[j] = a[j]
    for i in range(n):
        j = i
        while j >= 0:  # j: i itself, then its ancestors
            dq[o + i, o + j] = _dot(a[i], zq[j]) - _dot(b[i], y[j])
            dv[o + i, o + j] = 2.0 * _dot(a[i], y[j]) - _dot(b[i], s[j])
            Mm[o + i, o + j] = _dot(a[i], s[j])
            if j != i:
                dq[o + j, o + i] = _dot(s[j], Uq[i])
                dv[o + j, o + i] = _dot(s[j], Uv[i])
                Mm[o + j, o + i] = Mm[o + i, o + j]
            j = parent[j]
    if floating:
        _ad_mat(V0, adV)
        for r in range(6):
            out_tau[r] = Fc0[r]
        for j in range(n):
            for r in range(6):
                dq[r, o + j] = Uq[j, r]
                dv[r, o + j] = Uv[j, r]
                Mm[r, o + j] = Ua[j, r]
                Mm[o + j, r] = Ua[j, r]
        # rows of joints i, base columns: a_i^T ad_{V0} - b_i^T (velocity), a_i^T (M)
        for i in range(n):
            for c in range(6):
                acc = 0.0
                for m in range(6):
                    acc += a[i, m] * adV[m, c]
                dv[o + i, c] = acc - b[i, c]
        for r in range(6):
            for c in range(6):
                acc = 0.0
                for m in range(6):
                    acc += Ic0[r, m] * adV[m, c]
                dv[r, c] = acc - Bc0[r, c]
                Mm[r, c] = Ic0[r, c]


@nb.njit(**_JIT)
def _base_pose_columns(Mm, a_g, dq):
    """dtau/dxi = M[:, :6] ad_{a_g}: the base pose enters only through gravity in the base frame."""
    adA = np.empty((6, 6))
    _ad_mat(a_g, adA)
    for r in range(Mm.shape[0]):
        for c in range(6):
            acc = 0.0
            for m in range(6):
                acc += Mm[r, m] * adA[m, c]
            dq[r, c] = acc


@nb.njit(parallel=False, **_JIT)
def _derivatives_batch(parent, Mh, S, J, J0, floating, qb, V0, qd, A0, qdd, a_g, tau, dq, dv, Mm):
    for k in range(qb.shape[0]):
        _derivatives_one(parent, Mh, S, J, J0, floating, qb[k], V0[k], qd[k], A0[k], qdd[k],
                         tau[k], dq[k], dv[k], Mm[k])
        if floating:
            _base_pose_columns(Mm[k], a_g[k], dq[k])


@nb.njit(**_JIT)
def _aba_batch(parent, Mh, S, J, J0, floating, qb, V0, qd, A0, a_g, tau_in, P_full, tau, dq, dv, Mm, ddq, Minv):
    """Forward dynamics and its derivatives: a = M^-1 (tau - b), then -M^-1 dID/dx at that a."""
    nvb = tau.shape[1]
    zero = np.zeros(qd.shape[1])
    for k in range(qb.shape[0]):
        _derivatives_one(parent, Mh, S, J, J0, floating, qb[k], V0[k], qd[k], A0[k], zero,
                         tau[k], dq[k], dv[k], Mm[k])
        Mc = P_full.T @ Mm[k] @ P_full
        L = np.linalg.cholesky(Mc)
        Li = np.linalg.inv(L)
        Minv[k] = Li.T @ Li
        acc = Minv[k] @ (tau_in[k] - P_full.T @ tau[k])
        ab = P_full @ acc  # body accelerations (base first)
        ddq[k] = acc
        o = 6 if floating else 0
        A0k = A0[k].copy()
        if floating:
            A0k += ab[:6]
        _derivatives_one(parent, Mh, S, J, J0, floating, qb[k], V0[k], qd[k], A0k, ab[o:],
                         tau[k], dq[k], dv[k], Mm[k])
        if floating:
            _base_pose_columns(Mm[k], a_g[k], dq[k])
        _ = nvb


def _inputs(model: Model, batch: Batch, v: np.ndarray, a: np.ndarray | None):
    V0, qd = split(model, v)
    a_g = gravity_acceleration(model, batch)
    if a is None:
        A0, qdd = a_g, None
    else:
        dV0, qdd = split(model, a)
        A0 = dV0 + a_g
    return (np.ascontiguousarray(model.parent), np.ascontiguousarray(model.M), np.ascontiguousarray(model.S),
            np.ascontiguousarray(model.J), np.ascontiguousarray(model.J_base), bool(model.floating_base),
            np.ascontiguousarray(model.body_q(batch.q)), np.ascontiguousarray(V0), np.ascontiguousarray(qd),
            np.ascontiguousarray(A0), qdd, np.ascontiguousarray(a_g))


def _to_coordinates(model: Model, *mats: np.ndarray) -> tuple[np.ndarray, ...]:
    if not model.has_mimic:
        return mats
    Pf = body_map(model)
    return tuple(Pf.T @ m @ Pf for m in mats)


def rnea_derivatives_fast(model: Model, batch: Batch, v: np.ndarray, a: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same result as first_order.rnea_derivatives_batch, (B, nv, nv) each."""
    parent, Mh, S, J, J0, floating, qb, V0, qd, A0, qdd, a_g = _inputs(model, batch, v, a)
    B, nvb = qb.shape[0], model.nb + 6 * floating
    tau = np.zeros((B, nvb))
    dq, dv, Mm = np.zeros((B, nvb, nvb)), np.zeros((B, nvb, nvb)), np.zeros((B, nvb, nvb))
    _derivatives_batch(parent, Mh, S, J, J0, floating, qb, V0, qd, A0, np.ascontiguousarray(qdd), a_g,
                       tau, dq, dv, Mm)
    return _to_coordinates(model, dq, dv, Mm)  # type: ignore[return-value]


def aba_derivatives_fast(model: Model, batch: Batch, v: np.ndarray, tau: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same result as the reference aba derivatives, (B, nv, nv) each."""
    parent, Mh, S, J, J0, floating, qb, V0, qd, A0, _, a_g = _inputs(model, batch, v, None)
    B, nvb = qb.shape[0], model.nb + 6 * floating
    Pf = np.ascontiguousarray(body_map(model))
    tau_b = np.zeros((B, nvb))
    dq, dv, Mm = np.zeros((B, nvb, nvb)), np.zeros((B, nvb, nvb)), np.zeros((B, nvb, nvb))
    ddq, Minv = np.zeros((B, model.nv)), np.zeros((B, model.nv, model.nv))
    _aba_batch(parent, Mh, S, J, J0, floating, qb, V0, qd, A0, a_g, np.ascontiguousarray(tau), Pf,
               tau_b, dq, dv, Mm, ddq, Minv)
    dq, dv = _to_coordinates(model, dq, dv)
    return -Minv @ dq, -Minv @ dv, Minv


# ------------------------------------------------------------------------ single-sample path
# One unbatched float64 sample skips the numpy glue: the kernel splits the vectors, applies the
# mimic map, checks finiteness and the pose, and reports bad input so that the caller can let
# checks.prepare raise its ValueError.

_PACKS: "weakref.WeakKeyDictionary[Model, tuple]" = weakref.WeakKeyDictionary()


def _pack(model: Model) -> tuple:
    pack = _PACKS.get(model)
    if pack is None:
        c = np.ascontiguousarray
        pack = (c(model.parent), c(model.M), c(model.S), c(model.J), c(model.J_base), bool(model.floating_base),
                c(body_map(model)), c(model.q_offset), c(model.gravity), bool(model.has_mimic))
        _PACKS[model] = pack
    return pack


@nb.njit(**_JIT)
def _finite(x):
    for e in x.ravel():
        if not np.isfinite(e):
            return False
    return True


@nb.njit(**_JIT)
def _is_pose(T):
    for r in range(3):
        for c in range(3):
            acc = T[r, 0] * T[c, 0] + T[r, 1] * T[c, 1] + T[r, 2] * T[c, 2]
            if abs(acc - (1.0 if r == c else 0.0)) > 1e-6:
                return False
    det = (T[0, 0] * (T[1, 1] * T[2, 2] - T[1, 2] * T[2, 1]) - T[0, 1] * (T[1, 0] * T[2, 2] - T[1, 2] * T[2, 0])
           + T[0, 2] * (T[1, 0] * T[2, 1] - T[1, 1] * T[2, 0]))
    return det > 0 and T[3, 0] == 0.0 and T[3, 1] == 0.0 and T[3, 2] == 0.0 and T[3, 3] == 1.0


@nb.njit(**_JIT)
def _single(parent, Mh, S, J, J0, floating, Pf, q_off, grav, mimic, q, v, x, T, forward):
    """rnea (forward=False, x = a) or aba (forward=True, x = tau) derivatives of one sample.

    Returns (ok, dq, dv, third) in generalized coordinates; ok is False for non-finite input or a
    base pose outside SE(3).
    """
    nvb = Pf.shape[0]
    o = 6 if floating else 0
    dq = np.zeros((nvb, nvb))
    dv = np.zeros((nvb, nvb))
    Mm = np.zeros((nvb, nvb))
    if not (_finite(q) and _finite(v) and _finite(x) and _finite(T) and (not floating or _is_pose(T))):
        return False, dq, dv, Mm
    n = parent.shape[0]
    qb = Pf[o:, o:] @ q + q_off
    vb = Pf @ v
    a_g = np.zeros(6)
    for r in range(3):
        a_g[3 + r] = -(T[0, r] * grav[0] + T[1, r] * grav[1] + T[2, r] * grav[2])
    V0 = np.zeros(6)
    A0 = a_g.copy()
    if floating:
        V0[:] = vb[:6]
    tau = np.zeros(nvb)
    if forward:
        _derivatives_one(parent, Mh, S, J, J0, floating, qb, V0, vb[o:], A0, np.zeros(n), tau, dq, dv, Mm)
        Mc = Pf.T @ Mm @ Pf
        Li = np.linalg.inv(np.linalg.cholesky(Mc))
        Minv = Li.T @ Li
        acc = Pf @ (Minv @ (x - Pf.T @ tau))
    else:
        acc = Pf @ x
    if floating:
        A0 += acc[:6]
    _derivatives_one(parent, Mh, S, J, J0, floating, qb, V0, vb[o:], A0, acc[o:].copy(), tau, dq, dv, Mm)
    if floating:
        _base_pose_columns(Mm, a_g, dq)
    if mimic:
        dq, dv, Mm = Pf.T @ dq @ Pf, Pf.T @ dv @ Pf, Pf.T @ Mm @ Pf
    if forward:
        return True, -Minv @ dq, -Minv @ dv, Minv
    return True, dq, dv, Mm


def is_single_sample(model: Model, q, v, x, base_pose) -> bool:
    """Plain unbatched float64 ndarrays of the right lengths (and a 4x4 pose for a floating base)."""
    for arr, length in ((q, model.n), (v, model.nv), (x, model.nv)):
        if type(arr) is not np.ndarray or arr.dtype != np.float64 or arr.shape != (length,):
            return False
    if model.floating_base:
        return type(base_pose) is np.ndarray and base_pose.dtype == np.float64 and base_pose.shape == (4, 4)
    return base_pose is None


_EYE4 = np.eye(4)


def derivatives_single(model: Model, q: np.ndarray, v: np.ndarray, x: np.ndarray, base_pose, forward: bool):
    """(dq, dv, M or M^-1) of one sample, or None when the input is bad (let prepare explain)."""
    T = _EYE4 if base_pose is None else np.ascontiguousarray(base_pose)
    ok, dq, dv, third = _single(*_pack(model), np.ascontiguousarray(q), np.ascontiguousarray(v),
                                np.ascontiguousarray(x), T, forward)
    return (dq, dv, third) if ok else None
