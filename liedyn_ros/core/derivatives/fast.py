"""Fast path of the first-order derivatives: numba kernels, O(n * depth), no allocation per call.

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
    base columns:     d/dxi: M[:, :6] ad_{a_g}  (gravity only),  d/dV_0: a_i^T ad_{V_0} - b_i^T,  M: a_i^T
    base rows:        the same with s_i = 1_6 and subtree = every body.

This is the analytic scheme of Carpentier & Mansard (2018), derived in our notation; tests prove
it equal to the Table 5 reference. Mimic joints: body i adds mult_i mult_j D_ij into the entry of
its coordinates (dID/dq = P^T D P).

Forward dynamics: a = M^-1 (tau - b), then dFD/dx = -M^-1 dID/dx at that a. The bias b is the
pass above with qdd = 0; the acceleration then enters linearly,
    A_k += dA_k,  dA_k = dA_l + s_k qdd_k  (dA_0 = dV_0/dt),   F^c_i += sum_{k in subtree(i)} I_k dA_k,
so the poses, inertias and B_k are computed once. M = L^T D L is factored from the leaves along the
tree, which fills in nothing outside the ancestors (Featherstone's LTDL; a chain, i.e. dense, with mimic
joints), and one solve gives M^-1 [dtau/dq, dtau/dv, 1].

Spatial inertias move to {0} by rotation and translation instead of 6x6 products: with
J = [[I_o, [h]], [[h]^T, m 1]] (h = m c, the first moment) and T_0k = (R, p), g = R h,
    h' = g + m p,   I_o' = R I_o R^T - [g][p] - [p][g] - m [p]^2,
and I ad_V is three cross products per row: (I ad_V)_{r,:} = (I_{r,w} x w + I_{r,v} x v, I_{r,v} x w).
"""
from __future__ import annotations

import numpy as np

from ..checks import Batch
from ..fast.kinematics import BAD_INPUT, OK, SINGULAR, block, borrowed, inertias_block, inputs_valid, model_arrays, \
    pose_of, reshaped, screw, sizes, transforms_block, vectors_valid
from ..fast.layout import COORD, INERTIA, MULT, PARENT, SCALE, fast_model
from ..fast.spatial import bjit, bracket, coadjoint_bias, dot6, gravity_in_base, ijit, jit, joint_transform, pivot_ok
from ..fast.threads import run_batch
from ..model import Model

__all__ = ["derivatives_one", "derivatives_batch", "rnea_derivatives_fast", "workspace_of"]


# ------------------------------------------------------------------------------ small steps


@ijit
def cross_add(x, y, out, sign):
    """out += sign * (x x y) for 3-vectors."""
    out[0] += sign * (x[1] * y[2] - x[2] * y[1])
    out[1] += sign * (x[2] * y[0] - x[0] * y[2])
    out[2] += sign * (x[0] * y[1] - x[1] * y[0])


@ijit
def mat6_vec(A, x, out):
    """out = A x (6x6)."""
    for r in range(6):
        out[r] = (A[r, 0] * x[0] + A[r, 1] * x[1] + A[r, 2] * x[2] + A[r, 3] * x[3] + A[r, 4] * x[4]
                  + A[r, 5] * x[5])


@ijit
def mat6T_vec(A, x, out):
    """out = A^T x (6x6)."""
    for c in range(6):
        out[c] = (A[0, c] * x[0] + A[1, c] * x[1] + A[2, c] * x[2] + A[3, c] * x[3] + A[4, c] * x[4]
                  + A[5, c] * x[5])


@ijit
def rows_dot(X, i, Y, j):
    """X[i] . Y[j] for (n, 6) arrays, by index: the pair loop would otherwise build two row views per product."""
    return (X[i, 0] * Y[j, 0] + X[i, 1] * Y[j, 1] + X[i, 2] * Y[j, 2] + X[i, 3] * Y[j, 3] + X[i, 4] * Y[j, 4]
            + X[i, 5] * Y[j, 5])


@ijit
def inertia_to_root(mf, i, R, p, out):
    """out = Ad_{T^-1}^T J_i Ad_{T^-1} for T = (R, p), by the (m, h, I_o) form of the module docstring."""
    o = INERTIA
    m = mf[i, o + 35]
    h0, h1, h2 = mf[i, o + 2 * 6 + 4], mf[i, o + 5], mf[i, o + 6 + 3]  # [h] = J[:3, 3:]
    g0 = R[0, 0] * h0 + R[0, 1] * h1 + R[0, 2] * h2
    g1 = R[1, 0] * h0 + R[1, 1] * h1 + R[1, 2] * h2
    g2 = R[2, 0] * h0 + R[2, 1] * h1 + R[2, 2] * h2
    p0, p1, p2 = p[0], p[1], p[2]
    gp = g0 * p0 + g1 * p1 + g2 * p2
    pp = p0 * p0 + p1 * p1 + p2 * p2
    for r in range(3):  # out[:3, 3:] <- R I_o (scratch for the rotation)
        for c in range(3):
            out[r, 3 + c] = R[r, 0] * mf[i, o + c] + R[r, 1] * mf[i, o + 6 + c] + R[r, 2] * mf[i, o + 12 + c]
    gv = (g0, g1, g2)
    pv = (p0, p1, p2)
    for r in range(3):
        for c in range(r, 3):
            x = out[r, 3] * R[c, 0] + out[r, 4] * R[c, 1] + out[r, 5] * R[c, 2]
            x -= pv[r] * gv[c] + gv[r] * pv[c] + m * pv[r] * pv[c]
            if r == c:
                x += 2.0 * gp + m * pp
            out[r, c] = x
            out[c, r] = x
    h0, h1, h2 = g0 + m * p0, g1 + m * p1, g2 + m * p2
    out[0, 3], out[0, 4], out[0, 5] = 0.0, -h2, h1
    out[1, 3], out[1, 4], out[1, 5] = h2, 0.0, -h0
    out[2, 3], out[2, 4], out[2, 5] = -h1, h0, 0.0
    for r in range(3):
        for c in range(3):
            out[3 + c, r] = out[r, 3 + c]
            out[3 + r, 3 + c] = m if r == c else 0.0


@ijit
def times_ad(I, V, K):
    """K = I ad_V: row r is (I_{r,w} x w + I_{r,v} x v, I_{r,v} x w)."""
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    for r in range(6):  # scalars, not row slices: a slice per cross product costs more than its six products
        x0, x1, x2, y0, y1, y2 = I[r, 0], I[r, 1], I[r, 2], I[r, 3], I[r, 4], I[r, 5]
        K[r, 0] = x1 * w2 - x2 * w1 + y1 * v2 - y2 * v1
        K[r, 1] = x2 * w0 - x0 * w2 + y2 * v0 - y0 * v2
        K[r, 2] = x0 * w1 - x1 * w0 + y0 * v1 - y1 * v0
        K[r, 3] = y1 * w2 - y2 * w1
        K[r, 4] = y2 * w0 - y0 * w2
        K[r, 5] = y0 * w1 - y1 * w0


@ijit
def coupling(I, V, h, B):
    """B = I ad_V + ad*_V I + ad*bar(h) = K + K^T + ad*bar(h) with K = I ad_V (ad*_V = ad_V^T), h = I V;
    K is built in B and symmetrized in place."""
    times_ad(I, V, B)
    for r in range(6):
        B[r, r] *= 2.0
        for c in range(r + 1, 6):
            B[r, c] += B[c, r]
            B[c, r] = B[r, c]
    m0, m1, m2, f0, f1, f2 = h[0], h[1], h[2], h[3], h[4], h[5]
    B[0, 1] -= m2
    B[0, 2] += m1
    B[1, 0] += m2
    B[1, 2] -= m0
    B[2, 0] -= m1
    B[2, 1] += m0
    for o0, o1 in ((0, 3), (3, 0)):  # the [f] blocks
        B[o0 + 0, o1 + 1] -= f2
        B[o0 + 0, o1 + 2] += f1
        B[o0 + 1, o1 + 0] += f2
        B[o0 + 1, o1 + 2] -= f0
        B[o0 + 2, o1 + 0] -= f1
        B[o0 + 2, o1 + 1] += f0


@ijit
def body_force(I, V, A, h, f):
    """h = I V, f = I A - ad*_V h."""
    mat6_vec(I, V, h)
    mat6_vec(I, A, f)
    coadjoint_bias(V, h, f)


@ijit
def body_terms(I, V, A, f, B, h):
    """f = I A - ad*_V I V and B = I ad_V + ad*_V I + ad*bar(I V) of one body (h: scratch)."""
    body_force(I, V, A, h, f)
    coupling(I, V, h, B)


@ijit
def add_to(x, out):
    for r in range(x.shape[0]):
        out[r] += x[r]


# ------------------------------------------------------------------------------ the passes


@jit
def workspace(nb, nv):
    """Floats one sample needs (see `views`)."""
    return 12 * nb + 6 * 7 * nb + (6 * 4 + 36 * 2) * (nb + 1) + 36 + 12 + 4 * nv * nv + 2 * nv


@ijit
def views(ws, nb, nv):
    R, p, o = transforms_block(ws, 0, nb)  # T_0i = (R, p)
    s, o = block(ws, o, nb, 6)
    a, o = block(ws, o, nb, 6)
    b, o = block(ws, o, nb, 6)
    y, o = block(ws, o, nb, 6)
    z, o = block(ws, o, nb, 6)
    Uq, o = block(ws, o, nb, 6)
    Uv, o = block(ws, o, nb, 6)
    V, o = block(ws, o, nb + 1, 6)  # row nb: the base
    A, o = block(ws, o, nb + 1, 6)
    dA, o = block(ws, o, nb + 1, 6)
    Fc, o = block(ws, o, nb + 1, 6)
    Ic, o = inertias_block(ws, o, nb + 1)  # I_k, then the subtree sums I^c_i
    Bc, o = inertias_block(ws, o, nb + 1)
    K, o = block(ws, o, 6, 6)
    tmp, o = block(ws, o, 2, 6)
    L, o = block(ws, o, nv, nv)
    x, o = block(ws, o, 2, nv)
    X, o = block(ws, o, nv, 3 * nv)
    return R, p, s, a, b, y, z, Uq, Uv, V, A, dA, Fc, Ic, Bc, K, tmp, L, x, X


@ijit
def forward_pass(mf, mi, q, v, x, T, R, p, s, V, A, Fc, Ic, Bc, K, tmp):
    """Poses, screws, twists, accelerations (generalized accelerations x), I_k, f_k, B_k; subtree sums.

    Returns a_g, the gravity acceleration of the base frame, in tmp[1].
    """
    nb, n, nv = sizes(mi)
    base = nv - n
    a_g = tmp[1]
    gravity_in_base(mf, nb, T, a_g)
    for r in range(6):
        V[nb, r] = v[r] if base else 0.0
        A[nb, r] = a_g[r] + (x[r] if base else 0.0)
    Rf, pf = K[0:3, 0:3], K[3, 0:3]  # f_{l,i} = (Rf, pf), scratch
    for i in range(nb):
        par = mi[i, PARENT]
        joint_transform(mf, i, q[mi[i, COORD]], Rf, pf)
        for r in range(3):  # element by element: an array assignment costs 5x more
            for c in range(3):
                R[i, r, c] = (R[par, r, 0] * Rf[0, c] + R[par, r, 1] * Rf[1, c] + R[par, r, 2] * Rf[2, c]
                              if par >= 0 else Rf[r, c])
            p[i, r] = (R[par, r, 0] * pf[0] + R[par, r, 1] * pf[1] + R[par, r, 2] * pf[2] + p[par, r]
                       if par >= 0 else pf[r])
        par = par if par >= 0 else nb
        S = screw(mf, i)
        for r in range(3):  # s_i = Ad_{T_0i} S_i = (R w, R v + p x R w)
            s[i, r] = R[i, r, 0] * S[0] + R[i, r, 1] * S[1] + R[i, r, 2] * S[2]
            s[i, 3 + r] = R[i, r, 0] * S[3] + R[i, r, 1] * S[4] + R[i, r, 2] * S[5]
        cross_add(p[i], s[i, 0:3], s[i, 3:6], 1.0)
        qd = mf[i, MULT] * v[base + mi[i, COORD]]
        qdd = mf[i, MULT] * x[base + mi[i, COORD]]
        for r in range(6):
            V[i, r] = V[par, r] + s[i, r] * qd
        bracket(V[i], s[i], tmp[0])
        for r in range(6):
            A[i, r] = A[par, r] + tmp[0, r] * qd + s[i, r] * qdd
        # I_k straight into its subtree sum's slot (the backward loop adds the children), f_k, B_k
        inertia_to_root(mf, i, R[i], p[i], Ic[i])
        body_terms(Ic[i], V[i], A[i], Fc[i], Bc[i], tmp[0])
    for r in range(6):
        for c in range(6):
            Ic[nb, r, c] = mf[nb, INERTIA + 6 * r + c] if base else 0.0
    body_terms(Ic[nb], V[nb], A[nb], Fc[nb], Bc[nb], tmp[0])
    for i in range(nb - 1, -1, -1):  # explicit loops: numba's in-place array operators cost 10x more here
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        for r in range(6):
            Fc[par, r] += Fc[i, r]
            for c in range(6):
                Ic[par, r, c] += Ic[i, r, c]
                Bc[par, r, c] += Bc[i, r, c]


@ijit
def mass_matrix_and_bias(mf, mi, s, a, Ic, Fc, M, bias):
    """a_i = I^c_i s_i; M (nv, nv) in coordinates; bias = ID at the accelerations of the pass."""
    nb, n, nv = sizes(mi)
    base = nv - n
    M[:, :] = 0.0
    bias[:] = 0.0
    for i in range(nb):
        mat6_vec(Ic[i], s[i], a[i])
        ci, wi = base + mi[i, COORD], mf[i, MULT]
        bias[ci] += wi * dot6(s[i], Fc[i])
        j = i
        while j >= 0:
            cj, wj = base + mi[j, COORD], mf[j, MULT]
            m_ij = wi * wj * dot6(a[i], s[j])
            M[ci, cj] += m_ij
            if j != i:
                M[cj, ci] += m_ij
            j = mi[j, PARENT]
        for r in range(base):
            M[r, ci] += wi * a[i, r]
            M[ci, r] += wi * a[i, r]
    for r in range(base):
        bias[r] = Fc[nb, r]
        for c in range(6):
            M[r, c] = Ic[nb, r, c]


@ijit
def accelerate(mf, mi, x, s, a, A, dA, Ic, Fc, tmp):
    """Add the generalized accelerations x to a pass made with zero: A_k += dA_k and
    F^c_i += sum_{k in subtree(i)} I_k dA_k = I^c_i dA_i + sum_{j in subtree(i), j != i} a_j qdd_j,
    since dA_k - dA_i sums s_j qdd_j over the path from i down to k (a_j = I^c_j s_j)."""
    nb, n, nv = sizes(mi)
    base = nv - n
    for r in range(6):
        dA[nb, r] = x[r] if base else 0.0
    for i in range(nb):
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        qdd = mf[i, MULT] * x[base + mi[i, COORD]]
        for r in range(6):
            dA[i, r] = dA[par, r] + s[i, r] * qdd
    for i in range(nb + 1):  # dA_k is spent on the way: dA_k <- a_k qdd_k (0 for the base)
        add_to(dA[i], A[i])
        mat6_vec(Ic[i], dA[i], tmp)
        add_to(tmp, Fc[i])
        qdd = mf[i, MULT] * x[base + mi[i, COORD]] if i < nb else 0.0
        for r in range(6):
            dA[i, r] = a[i, r] * qdd if i < nb else 0.0
    for i in range(nb - 1, -1, -1):  # subtree sums of a_j qdd_j, each into the parent's F^c
        par = mi[i, PARENT] if mi[i, PARENT] >= 0 else nb
        add_to(dA[i], dA[par])
        add_to(dA[i], Fc[par])


@ijit
def columns(mf, mi, s, a, b, y, z, Uq, Uv, V, A, Fc, Ic, Bc, M, dq, dv, K, tmp):
    """dtau/dq and dtau/dv in coordinates (M already assembled); see the module docstring."""
    nb, n, nv = sizes(mi)
    base = nv - n
    dq[:, :] = 0.0
    dv[:, :] = 0.0
    for j in range(nb):
        mat6T_vec(Bc[j], s[j], b[j])
        bracket(V[j], s[j], y[j])
        bracket(A[j], s[j], z[j])
        bracket(V[j], y[j], tmp[0])
        add_to(tmp[0], z[j])
        mat6_vec(Ic[j], z[j], Uq[j])
        mat6_vec(Bc[j], y[j], tmp[0])
        for r in range(6):  # - ad*_{s_j} F^c_j = coadjoint_bias(s_j, F^c_j)
            Uq[j, r] -= tmp[0, r]
        coadjoint_bias(s[j], Fc[j], Uq[j])
        mat6_vec(Ic[j], y[j], Uv[j])
        mat6_vec(Bc[j], s[j], tmp[0])
        for r in range(6):
            Uv[j, r] = 2.0 * Uv[j, r] - tmp[0, r]
    for i in range(nb):
        ci, wi = base + mi[i, COORD], mf[i, MULT]
        j = i
        while j >= 0:  # j: i itself, then its ancestors
            cj, w = base + mi[j, COORD], wi * mf[j, MULT]
            dq[ci, cj] += w * (rows_dot(a, i, z, j) - rows_dot(b, i, y, j))
            dv[ci, cj] += w * (2.0 * rows_dot(a, i, y, j) - rows_dot(b, i, s, j))
            if j != i:
                dq[cj, ci] += w * rows_dot(s, j, Uq, i)
                dv[cj, ci] += w * rows_dot(s, j, Uv, i)
            j = mi[j, PARENT]
        for r in range(base):
            dq[r, ci] += wi * Uq[i, r]
            dv[r, ci] += wi * Uv[i, r]
        if base:  # joint rows, base-velocity columns: a_i^T ad_{V_0} - b_i^T = (ad*_{V_0} a_i - b_i)^T
            tmp[0] = 0.0
            coadjoint_bias(V[nb], a[i], tmp[0])  # -ad*_{V_0} a_i
            for r in range(6):
                dv[ci, r] -= wi * (tmp[0, r] + b[i, r])
    if base:
        times_ad(Ic[nb], V[nb], K)
        for r in range(6):
            for c in range(6):
                dv[r, c] = K[r, c] - Bc[nb, r, c]
        for r in range(nv):  # dtau/dxi = M[:, :6] ad_{a_g}, row r: ad*_{a_g} M[r, :6]
            tmp[0] = 0.0
            coadjoint_bias(tmp[1], M[r, 0:6], tmp[0])
            for c in range(6):
                dq[r, c] = -tmp[0, c]


@ijit
def tree_coordinates(mi):
    """True when body i is driven by coordinate i alone (no mimic joint): bodies are parent-ordered,
    so lambda orders the coordinates too, and M_ij = 0 unless i, j are on one path to the root."""
    nb, n, _ = sizes(mi)
    if n != nb:
        return False
    for i in range(nb):
        if mi[i, COORD] != i:
            return False
    return True


@ijit
def coordinate_parent(mi, tree, k):
    """lambda of entry k of v (-1 at the root): the base's six form a chain from which the root bodies
    hang; without `tree` every entry hangs from the one before (the dense factorization)."""
    _, n, nv = sizes(mi)
    base = nv - n
    if not tree or k < base:
        return k - 1
    par = mi[k - base, PARENT]
    return base + par if par >= 0 else base - 1


@ijit
def ltdl(mi, tree, L, scale):
    """Lower triangle of L (= M) <- M = L^T D L, unit L below the diagonal, D on it (Featherstone,
    RBDA 6.5): eliminating from the leaves along lambda fills in nothing off the ancestors. Its pivots
    are the articulated-body algorithm's: False when one fails core.singular's rule (as aba refuses)."""
    for k in range(L.shape[0] - 1, -1, -1):
        d = L[k, k]
        if not pivot_ok(d, scale):
            return False
        i = coordinate_parent(mi, tree, k)
        while i >= 0:
            w = L[k, i] / d
            j = i
            while j >= 0:
                L[i, j] -= w * L[k, j]
                j = coordinate_parent(mi, tree, j)
            L[k, i] = w
            i = coordinate_parent(mi, tree, i)
    return True


@ijit
def ltdl_solve(mi, tree, L, X):
    """X <- M^-1 X with L from `ltdl`: L^T Y = X from the leaves, then L Z = D^-1 Y from the root.

    Row operations: the inner loops run along rows of X, which the compiler vectorizes; a row
    operation costs little more than its start-up below some 30 entries, so the right-hand sides
    go in side by side (one wide X) rather than one matrix after another.
    """
    nv, nc = X.shape
    for k in range(nv - 1, -1, -1):
        i = coordinate_parent(mi, tree, k)
        while i >= 0:
            w = L[k, i]
            for c in range(nc):
                X[i, c] -= w * X[k, c]
            i = coordinate_parent(mi, tree, i)
    for k in range(nv):
        d = 1.0 / L[k, k]
        for c in range(nc):
            X[k, c] *= d
        i = coordinate_parent(mi, tree, k)
        while i >= 0:
            w = L[k, i]
            for c in range(nc):
                X[k, c] -= w * X[i, c]
            i = coordinate_parent(mi, tree, i)


@jit
def derivatives_sample(mf, mi, ws, q, v, x, T, forward, out):
    """out (3, nv, nv): (dtau/dq, dtau/dv, M) for x = a, or (dqdd/dq, dqdd/dv, M^-1) for x = tau (forward)."""
    nb, n, nv = sizes(mi)
    R, p, s, a, b, y, z, Uq, Uv, V, A, dA, Fc, Ic, Bc, K, tmp, L, xs, X = views(ws, nb, nv)
    M = borrowed(out[2])  # its row views in `columns` would count references (see kinematics.borrowed)
    tree = tree_coordinates(mi)
    acc, bias = xs[0], xs[1]
    if forward:  # the pass at zero acceleration gives M and the bias; `accelerate` adds M^-1 (tau - b)
        acc[:] = 0.0
    # One call site each: these steps are inlined, and a second call would compile them twice.
    forward_pass(mf, mi, q, v, acc if forward else x, T, R, p, s, V, A, Fc, Ic, Bc, K, tmp)
    mass_matrix_and_bias(mf, mi, s, a, Ic, Fc, M, bias)
    if forward:
        for r in range(nv):
            for c in range(r + 1):
                L[r, c] = M[r, c]
        if not ltdl(mi, tree, L, mf[nb, SCALE]):
            return SINGULAR
        for r in range(nv):
            acc[r] = x[r] - bias[r]
        ltdl_solve(mi, tree, L, reshaped(acc, 0, (nv, 1)))
        accelerate(mf, mi, acc, s, a, A, dA, Ic, Fc, tmp[0])
        dq, dv = X[:, 0:nv], X[:, nv:2 * nv]  # solved below beside the identity
    else:
        dq, dv = borrowed(out[0]), borrowed(out[1])
    columns(mf, mi, s, a, b, y, z, Uq, Uv, V, A, Fc, Ic, Bc, M, dq, dv, K, tmp)
    if forward:  # X = M^-1 [dtau/dq, dtau/dv, 1]
        for r in range(nv):
            for c in range(nv):
                X[r, 2 * nv + c] = 1.0 if r == c else 0.0
        ltdl_solve(mi, tree, L, X)
        for r in range(nv):
            for c in range(nv):
                out[0, r, c] = -X[r, c]
                out[1, r, c] = -X[r, nv + c]
                out[2, r, c] = X[r, 2 * nv + c]
    return OK


@jit
def derivatives_one(handle, ws, q, v, x, T, forward, out):
    """One sample, inputs unchecked by Python: BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, x))):
        return BAD_INPUT
    return derivatives_sample(mf, mi, ws, q, v, x, T, forward, out)


@bjit
def derivatives_many(mf, mi, q, v, x, T, forward, out, start, stop):
    """Samples start..stop of a batch (B, ...) into out (B, 3, nv, nv); the worst status of those samples."""
    nb, n, nv = sizes(mi)
    ws = np.empty(workspace(nb, nv))
    status = OK
    for k in range(start, stop):
        status = max(status, derivatives_sample(mf, mi, ws, q[k], v[k], x[k], pose_of(T, k), forward, out[k]))
    return status


def workspace_of(model: Model) -> np.ndarray:
    """The single-sample workspace of `model`, kept in its instance dictionary like core.fast's."""
    ws = model.__dict__.get("_derivatives_ws")
    if ws is None:
        ws = np.zeros(workspace(model.nb, model.nv))
        object.__setattr__(model, "_derivatives_ws", ws)  # Model is frozen; the cache is no model field
    return ws


def derivatives_batch(model: Model, batch: Batch, v: np.ndarray, x: np.ndarray, forward: bool) -> np.ndarray | None:
    """(B, 3, nv, nv) for a prepared batch; None when M is singular (forward dynamics only)."""
    fm = fast_model(model)
    out = np.empty((batch.q.shape[0], 3, fm.nv, fm.nv))
    status = run_batch(derivatives_many, out.shape[0], fm.mf, fm.mi, batch.q, v, x, batch.base_pose, forward, out)
    return out if status == OK else None


def rnea_derivatives_fast(model: Model, batch: Batch, v: np.ndarray, a: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same result as first_order.rnea_derivatives_batch, (B, nv, nv) each."""
    out = derivatives_batch(model, batch, v, a, False)
    return out[:, 0], out[:, 1], out[:, 2]
