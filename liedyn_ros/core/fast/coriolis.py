"""Compiled Coriolis matrix, equal to the reference's C (Ploen & Park Proposition 1, for trees).

The reference's C = S^T G^T (J dG/dt + Cbar G) S is, body by body, with the body Jacobian Jac_i
(V_i = Jac_i v), h_i = J_i V_i and the skew body term
Cbar_i = 1/2 (J_i ad_{V_i} - ad*_{V_i} J_i - ad*bar(h_i)),
    C = sum_i Jac_i^T (J_i dJac_i + Cbar_i Jac_i).
Every term is covariant (Ad^T (J ad_V) Ad = J' ad_{V'}, Ad^T ad*bar(h) Ad = ad*bar(Ad^T h)), so
all of it can be written in the base frame {0}, as the mass matrix is (crba.py): joint screws
s_l = Ad_{T_L} S_l, twists V_i = V_lambda + s_i qd_i, w_l = ad_{V_L} s_l, inertias J0_i, and for
the subtree of each body K
    Ic_K = sum J0_i,   Bs_K = sum (J0_i ad_{V_i} + ad_{V_i}^T J0_i),   hc_K = sum J0_i V_i,
    A_K = -1/2 (Bs_K + ad*bar(hc_K)),
which gives an O(n d) recursion of dot products, like the composite-rigid-body algorithm:
    C_b[k, l] = s_k^T (Ic_L w_l + A_L s_l)                  k = l or an ancestor of l,
    C_b[k, l] = (A_K^T s_k)^T s_l + (Ic_K s_k)^T w_l          l an ancestor of k.
J0 ad_V + ad_V^T J0 = -dJ0/dt is a rigid-body inertia's rate, so Bs_K is ten numbers like Ic_K
(spatial.inertia10_rate). A floating base is body nb with S = 1_6 (C_b[base, base] =
Ic ad_{V_0} + A). Mimic joints: C = P^T C_b P.
"""
from __future__ import annotations

import numpy as np

from .crba import screws_and_inertias_in_base
from .kinematics import BAD_INPUT, OK, block, body_rate, borrowed, inertias_block, inputs_valid, \
    model_arrays, parent_row, sizes, vectors_valid, workspace
from .layout import COORD, MULT, PARENT
from .spatial import ad_matrix, adbar_matrix, bracket, coadjoint_bias, dot6, inertia10_matrix, inertia10_rate, \
    inertia10_times, ijit, jit, bjit


@jit
def coriolis_sample(mf, mi, ws, q, v, out):
    """C(q, v) into out (nv, nv)."""
    mf, mi, q, v, out = borrowed(mf), borrowed(mi), borrowed(q), borrowed(v), borrowed(out)  # see borrowed
    nb, n, nv = sizes(mi)
    base = nv - n
    T, o = block(ws, 0, nb + 1, 12)
    s, o = block(ws, o, nb, 6)
    W, o = block(ws, o, nb, 6)
    V, o = block(ws, o, nb + 1, 6)
    hc, o = block(ws, o, nb + 1, 6)
    Ic, o = block(ws, o, nb + 1, 10)
    Bs, o = block(ws, o, nb + 1, 10)
    x, o = block(ws, o, 5, 6)
    f, a, c, y = x[0], x[1], x[2], x[3]  # x[4]: scratch
    sc, o = block(ws, o, nb, 2)  # scratch of the poses
    g, o = block(ws, o, 1, 12)
    tmp, o = inertias_block(ws, o, 3)
    screws_and_inertias_in_base(mf, mi, q, T, sc, g[0], s, Ic)
    for r in range(6):
        V[nb, r] = v[r] if base else 0.0
    for i in range(nb):
        qd = body_rate(mf, mi, i, v)
        for r in range(6):
            V[i, r] = V[parent_row(mi, i), r] + s[i, r] * qd
        bracket(V[i], s[i], W[i])  # w_i = ad_{V_i} s_i
    for i in range(nb + 1):
        inertia10_times(Ic[i], V[i], hc[i])
        inertia10_rate(Ic[i], V[i], Bs[i])
    out[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        ci, mult_i = base + mi[i, COORD], mf[i, MULT]
        A_times_screw(Bs[i], hc[i], s[i], y, x[4], a)  # y = A s, a = A^T s
        inertia10_times(Ic[i], W[i], f)
        inertia10_times(Ic[i], s[i], c)
        for r in range(6):
            f[r] += y[r]  # f = Ic w + A s
        out[ci, ci] += mult_i * mult_i * dot6(s[i], f)
        j = mi[i, PARENT]
        while j >= 0:
            cj, mult_ij = base + mi[j, COORD], mult_i * mf[j, MULT]
            out[cj, ci] += mult_ij * dot6(s[j], f)
            out[ci, cj] += mult_ij * (dot6(a, s[j]) + dot6(c, W[j]))
            j = mi[j, PARENT]
        if base:  # the floating base: rows (f) and columns (a + ad_{V_0}^T c)
            x[4, :] = 0.0
            coadjoint_bias(V[nb], c, x[4])  # -ad*_{V_0} c = -ad_{V_0}^T c
            for r in range(6):
                out[r, ci] += mult_i * f[r]
                out[ci, r] += mult_i * (a[r] - x[4, r])
        parent = parent_row(mi, i)
        for k in range(10):
            Ic[parent, k] += Ic[i, k]
            Bs[parent, k] += Bs[i, k]
        for r in range(6):
            hc[parent, r] += hc[i, r]
    if base:
        base_block(Ic[nb], Bs[nb], hc[nb], V[nb], tmp, out[:6, :6])
    return OK


@ijit
def A_times_screw(Bs, h, s, As, scratch, ATs):
    """As = A s and ATs = A^T s for A = -1/2 (Bs + ad*bar(h)), Bs symmetric, ad*bar(h) skew.

    ad*bar(h) s = ad*_s h, and coadjoint_bias gives -ad*_s h.
    """
    inertia10_times(Bs, s, As)
    scratch[:] = 0.0
    coadjoint_bias(s, h, scratch)
    for r in range(6):
        ATs[r] = -0.5 * (As[r] + scratch[r])
        As[r] = -0.5 * (As[r] - scratch[r])


@ijit
def base_block(Ic, Bs, h, V0, tmp, out):
    """out = C_b[base, base] = Ic ad_{V_0} + A with A = -1/2 (Bs + ad*bar(h)) (tmp: 3 x 6x6 scratch)."""
    inertia10_matrix(Ic, tmp[0])
    ad_matrix(V0, tmp[1])
    inertia10_matrix(Bs, tmp[2])
    adbar_matrix(h, out)
    for r in range(6):
        for k in range(6):
            t = 0.0
            for m in range(6):
                t += tmp[0, r, m] * tmp[1, m, k]
            out[r, k] = t - 0.5 * (tmp[2, r, k] + out[r, k])


@jit
def coriolis_one(handle, q, v, T, out):
    """One sample; BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v,))):
        return BAD_INPUT
    return coriolis_sample(mf, mi, workspace(mf, mi), q, v, out)


@bjit
def coriolis_many(mf, mi, ws_size, q, v, out, start, stop):
    """C for samples start..stop of a batch (B, ...) into out (B, nv, nv)."""
    ws = np.empty(ws_size)
    for b in range(start, stop):
        coriolis_sample(mf, mi, ws, q[b], v[b], out[b])
    return OK
