"""Fast path of the time derivatives: the recursions of `time_derivatives` as numba kernels.

Same equations, same order of operations, per sample and without numpy temporaries (the readable
reference is `time_derivatives`; tests prove the two equal). In body frames, with
X_i = Ad_{f_i^-1} and k = 0..r:

    X_i^(k+1) = -ad_{S_i} sum_j C(k, j) qd_i^(j) X_i^(k-j)
    a_g^(k)   = -sum_j C(k-1, j) ad_{V_0^(j)} a_g^(k-1-j),   G_i^(k) = sum_j C(k, j) X_i^(j) G_l^(k-j)
    c_i^(k)   = sum_{j>=1} C(k+1, j) X_i^(j) V_l^(k+1-j)
    p_i^(k)   = J_i G_i^(k) - sum_j C(k, j) ad*_{V_i^(j)} J_i V_i^(k-j) + sum_c sum_{j>=1} C(k, j) X_c^(j)T F_c^(k-j)
    ID:  V_i^(k+1) = X_i V_l^(k+1) + S_i qd_i^(k+1) + c_i,  F_i^(k) = J_i V_i^(k+1) + p_i + sum_c X_c^T F_c^(k)
    FD:  the articulated-body algorithm with c^(k) and p^(k) as bias terms, J^_i and Psi_i computed
         once for every order (Ali et al., Lemma 2).
Mimic joints couple bodies: a^(k) = M^-1 (tau^(k) - h^(k)) with h^(k) the order-k ID at a zero
unknown and one factor of M (from its last row, core.singular's order) for every order; M e_c is
the order-0 ID of a unit v' with no velocity or gravity terms.

The derivatives of X are kept as 6x6 matrices (r + 2 per body); every X^(j) product is then one
6x6 product, which keeps the cost at O(r^2) per body as in the reference.
"""
from __future__ import annotations

import numpy as np

from ..fast.kinematics import BAD_INPUT, OK, SINGULAR, block, inertias_block, inputs_valid, model_arrays, pose_of, \
    reshaped, sizes, transforms_block, vectors_valid
from ..fast.layout import COORD, INERTIA, MULT, PARENT, SCALE, SCREW
from ..fast.spatial import body_inertia_times, bracket, coadjoint_bias, congruence_to_parent, dot6, \
    bjit, factor_from_last, gravity_in_base, ijit, jit, joint_transform, pivot_ok
from .fast import mat6_vec, mat6T_vec

__all__ = ["time_workspace", "rnea_time_one", "aba_time_one", "rnea_time_many", "aba_time_many"]


@jit
def time_workspace(nb, nv, K):
    """Floats one sample needs for K = r + 2 velocity orders (see `views`)."""
    return (12 * nb + K * nb * 36 + K * nb + 3 * K * (nb + 1) * 6 + K * K + 6 * nb + 6 * (nb + 1) * 4
            + 36 * (nb + 1) * 2 + 7 * nb + nv * nv + 3 * nv + 36 * 2 + 24 + 6)


@ijit
def views(ws, nb, nv, K):
    R, p, o = transforms_block(ws, 0, nb)
    Xd = reshaped(ws, o, (K, nb, 6, 6))
    o += K * nb * 36
    qd, o = block(ws, o, K, nb)
    V = reshaped(ws, o, (K, nb + 1, 6))  # row nb: the base twist V_0
    o += K * (nb + 1) * 6
    G = reshaped(ws, o, (K, nb + 1, 6))  # row nb: a_g
    o += K * (nb + 1) * 6
    F = reshaped(ws, o, (K, nb + 1, 6))  # row nb: F_0
    o += K * (nb + 1) * 6
    C, o = block(ws, o, K, K)  # binomial coefficients
    c, o = block(ws, o, nb, 6)
    pb, o = block(ws, o, nb + 1, 6)  # p^(k), row nb: p_0^(k)
    bh, o = block(ws, o, nb + 1, 6)
    Vn, o = block(ws, o, nb + 1, 6)
    Fn, o = block(ws, o, nb + 1, 6)
    Jh, o = inertias_block(ws, o, nb + 1)  # J^_i, row nb: J^_0
    Jk, o = inertias_block(ws, o, nb + 1)  # scratch
    U, o = block(ws, o, nb, 6)  # J^_i S_i
    Psi, o = block(ws, o, 1, nb)
    M, o = block(ws, o, nv, nv)
    x, o = block(ws, o, 3, nv)
    L6, o = block(ws, o, 6, 6)
    T66, o = block(ws, o, 6, 6)
    tmp, o = block(ws, o, 4, 6)
    y6, o = block(ws, o, 6, 1)
    return R, p, Xd, qd, V, G, F, C, c, pb, bh, Vn, Fn, Jh, Jk, U, Psi[0], M, x, L6, T66, tmp, y6


# ------------------------------------------------------------------------------ building blocks


@ijit
def solve_from_last_columns(L, X):
    """X <- (L^T L)^-1 X for every column at once, L from spatial.factor_from_last.

    Row-oriented substitution: the inner loops run along a row of X (contiguous), which the
    compiler vectorizes; column by column would stride through X.
    """
    k, nc = L.shape[0], X.shape[1]
    for r in range(k - 1, -1, -1):  # L^T Z = X, from the last row
        for m in range(r + 1, k):
            w = L[m, r]
            for c in range(nc):
                X[r, c] -= w * X[m, c]
        d = 1.0 / L[r, r]
        for c in range(nc):
            X[r, c] *= d
    for r in range(k):  # L Y = Z
        for m in range(r):
            w = L[r, m]
            for c in range(nc):
                X[r, c] -= w * X[m, c]
        d = 1.0 / L[r, r]
        for c in range(nc):
            X[r, c] *= d


@ijit
def binomials(C):
    """Pascal's triangle: C[k, j] = k! / (j! (k - j)!)."""
    C[:, :] = 0.0
    for k in range(C.shape[0]):
        C[k, 0] = 1.0
        for j in range(1, k + 1):
            C[k, j] = C[k - 1, j - 1] + C[k - 1, j]


@ijit
def adjoint_inverse(R, p, X):
    """X = Ad_{f^-1} = [[R^T, 0], [-R^T [p], R^T]] for f = (R, p)."""
    X[:, :] = 0.0
    for r in range(3):
        for c in range(3):
            X[r, c] = R[c, r]
            X[3 + r, 3 + c] = R[c, r]
        X[3 + r, 0] = -(R[1, r] * p[2] - R[2, r] * p[1])
        X[3 + r, 1] = -(R[2, r] * p[0] - R[0, r] * p[2])
        X[3 + r, 2] = -(R[0, r] * p[1] - R[1, r] * p[0])


@ijit
def start(mf, mi, q, vd, T, R, p, Xd, qd, V, G):
    """Order 0: X_i, qd_i^(j) for every j, V_0, V_i and the gravity accelerations G_i."""
    nb, n, nv = sizes(mi)
    base = nv - n
    for i in range(nb):
        joint_transform(mf, i, q[mi[i, COORD]], R[i], p[i])
        adjoint_inverse(R[i], p[i], Xd[0, i])
        for j in range(vd.shape[0]):
            qd[j, i] = mf[i, MULT] * vd[j, base + mi[i, COORD]]
    for r in range(6):
        V[0, nb, r] = vd[0, r] if base else 0.0
    gravity_in_base(mf, nb, T, G[0, nb])
    for i in range(nb):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        mat6_vec(Xd[0, i], V[0, par], V[0, i])
        mat6_vec(Xd[0, i], G[0, par], G[0, i])
        for r in range(6):
            V[0, i, r] += mf[i, SCREW + r] * qd[0, i]


@ijit
def known_terms(mf, mi, k, Xd, qd, V, G, F, C, c, pb, T66, tmp):
    """Extend the motion to order k (X^(k+1), a_g^(k), G^(k)) and set c^(k), p^(k) (row nb: p_0^(k)).

    Needs qd^(0..k), V^(0..k) and F^(0..k-1).
    """
    nb, n, nv = sizes(mi)
    base = nv - n
    for i in range(nb):  # X_i^(k+1) = -ad_{S_i} sum_j C(k, j) qd_i^(j) X_i^(k-j)
        T66[:, :] = 0.0
        for j in range(k + 1):
            w = C[k, j] * qd[j, i]
            for r in range(6):
                for m in range(6):
                    T66[r, m] += w * Xd[k - j, i, r, m]
        S = mf[i, SCREW:SCREW + 6]
        for m in range(6):
            bracket(S, T66[:, m], tmp[0])
            for r in range(6):
                Xd[k + 1, i, r, m] = -tmp[0, r]
    if k >= 1:  # a_g^(k) = -sum_j C(k-1, j) ad_{V_0^(j)} a_g^(k-1-j), then G^(k)
        G[k, nb] = 0.0
        for j in range(k):
            bracket(V[j, nb], G[k - 1 - j, nb], tmp[0])
            for r in range(6):
                G[k, nb, r] -= C[k - 1, j] * tmp[0, r]
        for i in range(nb):
            par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
            G[k, i] = 0.0
            for j in range(k + 1):
                mat6_vec(Xd[j, i], G[k - j, par], tmp[0])
                for r in range(6):
                    G[k, i, r] += C[k, j] * tmp[0, r]
    for i in range(nb):  # c_i^(k) = sum_{j>=1} C(k+1, j) X_i^(j) V_l^(k+1-j)
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        c[i] = 0.0
        for j in range(1, k + 2):
            mat6_vec(Xd[j, i], V[k + 1 - j, par], tmp[0])
            for r in range(6):
                c[i, r] += C[k + 1, j] * tmp[0, r]
    for i in range(nb + 1):  # p_i^(k) = J_i G_i^(k) - sum_j C(k, j) ad*_{V_i^(j)} J_i V_i^(k-j)
        if i == nb and not base:
            pb[nb] = 0.0
            continue
        body_inertia_times(mf, i, G[k, i], pb[i])
        for j in range(k + 1):
            body_inertia_times(mf, i, V[k - j, i], tmp[1])
            tmp[0] = 0.0
            coadjoint_bias(V[j, i], tmp[1], tmp[0])
            for r in range(6):
                pb[i, r] += C[k, j] * tmp[0, r]
    for i in range(nb):  # cross terms sum_{j>=1} C(k, j) X_c^(j)T F_c^(k-j), into the parent
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        for j in range(1, k + 1):
            mat6T_vec(Xd[j, i], F[k - j, i], tmp[0])
            for r in range(6):
                pb[par, r] += C[k, j] * tmp[0, r]
    if not base:
        pb[nb] = 0.0


@ijit
def rnea_step(mf, mi, k, Xd, c, pb, V0n, qdn, Vn, Fn, tau, with_bias):
    """Order-k ID: V^(k+1) into Vn (row nb: V0n), wrenches F^(k) into Fn, generalized tau^(k) into tau.

    qdn: the body rates qd^(k+1); with_bias False drops c and p (then tau = M v^(k+1)).
    """
    nb, n, nv = sizes(mi)
    base = nv - n
    for r in range(6):
        Vn[nb, r] = V0n[r] if base else 0.0
    for i in range(nb):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        mat6_vec(Xd[0, i], Vn[par], Vn[i])
        for r in range(6):
            Vn[i, r] += mf[i, SCREW + r] * qdn[i] + (c[i, r] if with_bias else 0.0)
    for i in range(nb + 1):
        if i == nb and not base:
            Fn[nb] = 0.0
            continue
        body_inertia_times(mf, i, Vn[i], Fn[i])
        if with_bias:
            for r in range(6):
                Fn[i, r] += pb[i, r]
    tau[:] = 0.0
    for i in range(nb - 1, -1, -1):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        tau[base + mi[i, COORD]] += mf[i, MULT] * dot6(mf[i, SCREW:SCREW + 6], Fn[i])
        for m in range(6):  # F_l += X_i^T F_i
            acc = 0.0
            for r in range(6):
                acc += Xd[0, i, r, m] * Fn[i, r]
            Fn[par, m] += acc
    for r in range(base):
        tau[r] = Fn[nb, r]


# rnea_step called, not inlined: the mimic path of aba_time_sample takes it at three places, which would
# compile three copies (a third of that kernel's compile time); the call costs nothing next to M's factor.
rnea_step_called = jit(rnea_step.py_func)


@ijit
def body_rates(mf, mi, x, qdn):
    """qd_i^(k+1) = mult_i x_coord(i): the body rates of a generalized vector (base part first)."""
    nb, n, nv = sizes(mi)
    for i in range(nb):
        qdn[i] = mf[i, MULT] * x[nv - n + mi[i, COORD]]


@jit
def rnea_time_sample(mf, mi, ws, q, vd, T, out):
    """out (r + 1, nv): tau^(0..r) for vd (r + 2, nv) = v^(0..r+1)."""
    nb, n, nv = sizes(mi)
    K = vd.shape[0]
    R, p, Xd, qd, V, G, F, C, c, pb, bh, Vn, Fn, Jh, Jk, U, Psi, M, x, L6, T66, tmp, y6 = views(ws, nb, nv, K)
    binomials(C)
    start(mf, mi, q, vd, T, R, p, Xd, qd, V, G)
    for k in range(K - 1):
        known_terms(mf, mi, k, Xd, qd, V, G, F, C, c, pb, T66, tmp)
        rnea_step(mf, mi, k, Xd, c, pb, vd[k + 1, 0:6], qd[k + 1], V[k + 1], F[k], out[k], True)
    return OK


@ijit
def articulated_inertias(mf, mi, R, p, Jh, Jk, U, Psi):
    """J^_i = J_i + sum_c X_c^T (J^_c - U_c Psi_c U_c^T) X_c, U_i = J^_i S_i, Psi_i = 1 / (S_i^T U_i).

    False when a pivot S_i^T J^_i S_i fails core.singular's rule (a massless subtree on a moving joint).
    """
    nb, n, nv = sizes(mi)
    for i in range(nb + 1):
        for r in range(6):
            for m in range(6):
                Jh[i, r, m] = mf[i, INERTIA + 6 * r + m]
    for i in range(nb - 1, -1, -1):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        mat6_vec(Jh[i], mf[i, SCREW:SCREW + 6], U[i])
        D = dot6(mf[i, SCREW:SCREW + 6], U[i])
        if not pivot_ok(D, mf[nb, SCALE]):
            return False
        Psi[i] = 1.0 / D
        for r in range(6):
            for m in range(6):
                Jk[i, r, m] = Jh[i, r, m] - U[i, r] * U[i, m] * Psi[i]
        congruence_to_parent(R[i], p[i], Jk[i], Jh[par])
    return True


@ijit
def aba_step(mf, mi, k, Xd, Jh, U, Psi, L6, c, pb, bh, tau_k, qdn, Vn, Fn, tmp, y6):
    """Order-k FD (time_derivatives.aba_step): V^(k+1) (row nb: V_0^(k+1)), F^(k) and the body rates qd^(k+1).

    L6: the factor of J^_0 = L6^T L6 (floating base, spatial.factor_from_last); y6: (6, 1) scratch.
    """
    nb, n, nv = sizes(mi)
    base = nv - n
    bh[:, :] = pb
    for i in range(nb - 1, -1, -1):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        S = mf[i, SCREW:SCREW + 6]
        u = tau_k[base + mi[i, COORD]] - dot6(U[i], c[i]) - dot6(bh[i], S)
        for r in range(6):  # beta_i = b^_i + J^_i (c_i + S_i Psi_i u_i)
            tmp[0, r] = c[i, r] + S[r] * Psi[i] * u
        mat6_vec(Jh[i], tmp[0], tmp[1])
        for r in range(6):
            tmp[1, r] += bh[i, r]
        for m in range(6):
            acc = 0.0
            for r in range(6):
                acc += Xd[0, i, r, m] * tmp[1, r]
            bh[par, m] += acc
    Vn[nb] = 0.0
    if base:  # J^_0 V_0^(k+1) = F_0 - b^_0
        for r in range(6):
            y6[r, 0] = tau_k[r] - bh[nb, r]
        solve_from_last_columns(L6, y6)
        for r in range(6):
            Vn[nb, r] = y6[r, 0]
    for i in range(nb):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        S = mf[i, SCREW:SCREW + 6]
        mat6_vec(Xd[0, i], Vn[par], Vn[i])
        for r in range(6):
            Vn[i, r] += c[i, r]
        qdn[i] = Psi[i] * (tau_k[base + mi[i, COORD]] - dot6(U[i], Vn[i]) - dot6(bh[i], S))
        for r in range(6):
            Vn[i, r] += S[r] * qdn[i]
    for i in range(nb):
        mat6_vec(Jh[i], Vn[i], Fn[i])
        for r in range(6):
            Fn[i, r] += bh[i, r]
    for r in range(6):
        Fn[nb, r] = tau_k[r] if base else 0.0


@jit
def aba_time_sample(mf, mi, ws, q, v, taus, T, out):
    """out (r + 1, nv): a^(0..r) for taus (r + 1, nv) from (q, v); SINGULAR for a singular inertia."""
    nb, n, nv = sizes(mi)
    base = nv - n
    K = taus.shape[0] + 1
    R, p, Xd, qd, V, G, F, C, c, pb, bh, Vn, Fn, Jh, Jk, U, Psi, M, x, L6, T66, tmp, y6 = views(ws, nb, nv, K)
    binomials(C)
    x[0] = v
    start(mf, mi, q, x[0:1], T, R, p, Xd, qd, V, G)
    dense = nb != n
    if dense:  # mimic joints: M by unit v' (order-0 ID without c, p), one factor for every order
        for col in range(nv):
            x[1] = 0.0
            x[1, col] = 1.0
            body_rates(mf, mi, x[1], qd[1])
            rnea_step_called(mf, mi, np.int64(0), Xd, c, pb, x[1, 0:6], qd[1], Vn, Fn, x[2], np.bool_(False))
            for r in range(nv):  # through x[2]: the column M[:, col] is strided, another compilation
                M[r, col] = x[2, r]
        if not factor_from_last(M, mf[nb, SCALE]):
            return SINGULAR
    else:
        if not articulated_inertias(mf, mi, R, p, Jh, Jk, U, Psi):
            return SINGULAR
        L6[:, :] = Jh[nb]
        if base and not factor_from_last(L6, mf[nb, SCALE]):
            return SINGULAR
    for k in range(K - 1):
        known_terms(mf, mi, k, Xd, qd, V, G, F, C, c, pb, T66, tmp)
        if dense:  # h^(k): ID with v^(k+1) = 0; a^(k) = M^-1 (tau^(k) - h^(k))
            x[1] = 0.0
            body_rates(mf, mi, x[1], qd[k + 1])
            rnea_step_called(mf, mi, k, Xd, c, pb, x[1, 0:6], qd[k + 1], Vn, Fn, x[2], np.bool_(True))
            for r in range(nv):
                out[k, r] = taus[k, r] - x[2, r]
            solve_from_last_columns(M, out[k:k + 1].T)
            body_rates(mf, mi, out[k], qd[k + 1])
            rnea_step_called(mf, mi, k, Xd, c, pb, out[k, 0:6], qd[k + 1], V[k + 1], F[k], x[2], np.bool_(True))
        else:
            aba_step(mf, mi, k, Xd, Jh, U, Psi, L6, c, pb, bh, taus[k], qd[k + 1], V[k + 1], F[k], tmp, y6)
            for r in range(base):
                out[k, r] = V[k + 1, nb, r]
            for i in range(nb):
                out[k, base + mi[i, COORD]] = qd[k + 1, i]
    return OK


@jit
def rnea_time_one(handle, q, vd, T, out):
    """One sample, inputs unchecked by Python: BAD_INPUT for fewer than two velocity orders, a wrong
    length, NaN or a pose outside SE(3)."""
    mf, mi = model_arrays(handle)
    nb, n, nv = sizes(mi)
    if not (vd.shape[0] >= 2 and out.shape[0] == vd.shape[0] - 1 and inputs_valid(mi, q, T)
            and vectors_valid(mi, vd)):
        return BAD_INPUT
    return rnea_time_sample(mf, mi, np.empty(time_workspace(nb, nv, vd.shape[0])), q, vd, T, out)


@jit
def aba_time_one(handle, q, v, taus, T, out):
    """One sample: BAD_INPUT for no torque, a wrong length, NaN or a bad pose."""
    mf, mi = model_arrays(handle)
    nb, n, nv = sizes(mi)
    if not (taus.shape[0] >= 1 and out.shape[0] == taus.shape[0] and inputs_valid(mi, q, T)
            and vectors_valid(mi, (v,)) and vectors_valid(mi, taus)):
        return BAD_INPUT
    return aba_time_sample(mf, mi, np.empty(time_workspace(nb, nv, taus.shape[0] + 1)), q, v, taus, T, out)


@bjit
def rnea_time_many(mf, mi, q, vd, T, out, start, stop):
    """Samples start..stop of a batch: q (B, n), vd (B, r + 2, nv), T (B or 1, 4, 4) into out (B, r + 1, nv)."""
    nb, n, nv = sizes(mi)
    ws = np.empty(time_workspace(nb, nv, vd.shape[1]))
    for b in range(start, stop):
        rnea_time_sample(mf, mi, ws, q[b], vd[b], pose_of(T, b), out[b])
    return OK


@bjit
def aba_time_many(mf, mi, q, v, taus, T, out, start, stop):
    """Samples start..stop of a batch: q (B, n), v (B, nv), taus (B, r + 1, nv), T (B or 1, 4, 4) into
    out (B, r + 1, nv); the worst status of those samples."""
    nb, n, nv = sizes(mi)
    ws = np.empty(time_workspace(nb, nv, taus.shape[1] + 1))
    status = OK
    for b in range(start, stop):
        status = max(status, aba_time_sample(mf, mi, ws, q[b], v[b], taus[b], pose_of(T, b), out[b]))
    return status
