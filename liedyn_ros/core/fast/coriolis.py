"""Compiled Coriolis matrix, equal to the reference's C (Ploen & Park Proposition 1, for trees).

The reference's C = S^T G^T (J dG/dt + Cbar G) S is, body by body, with the body Jacobian Jac_i
(V_i = Jac_i v), h_i = J_i V_i and the skew body term
Cbar_i = 1/2 (J_i ad_{V_i} - ad*_{V_i} J_i - ad*bar(h_i)),
    C = sum_i Jac_i^T (J_i dJac_i + Cbar_i Jac_i).
A column of Jac_i is Ad S_l carried from joint l's body L to {i}; its rate is
-Ad ad_{V_i - Ad V_L} S_l. Every term transforms by congruence (Ad^T (J ad_V) Ad = J' ad_{V'},
Ad^T ad*bar(h) Ad = ad*bar(Ad^T h)), so summing over the subtree of a body K in frame {K}, with
    Ic_K = sum Ad^T J_i Ad,  B_K = sum Ad^T (J_i ad_{V_i}) Ad,  hc_K = sum Ad^T h_i,
    A_K = -1/2 (B_K + B_K^T + ad*bar(hc_K)),  w_l = ad_{V_L} S_l,
gives an O(n d) recursion like the composite-rigid-body algorithm:
    C_b[k, l] = S_k^T Ad^T (Ic_L w_l + A_L S_l)             k = l or an ancestor of l,
    C_b[k, l] = (Ad^T A_K^T S_k)^T S_l + (Ad^T Ic_K S_k)^T w_l  l an ancestor of k,
with Ad^T carrying wrenches from the lower body up to the upper one. A floating base is body
nb with S = 1_6 (C_b[base, base] = Ic ad_{V_0} + A). Mimic joints: C = P^T C_b P.
Only B_K + B_K^T enters A_K, so that symmetric sum is what the recursion carries (Bs_K): every
composite is then symmetric and takes the cheap symmetric congruence.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .kinematics import BAD_INPUT, OK, block, body_velocities, chunk_bounds, inertias_block, inputs_valid, \
    joint_transforms, load_inertias, parent_row, sizes, transforms_block, vectors_valid, workspace
from .layout import COORD, MULT, PARENT, SCREW
from .spatial import ad_matrix, adbar_matrix, bracket, coadjoint_bias, congruence_to_parent, dot6, ijit, jit, \
    mat6_times, pjit, wrench_to_parent, wrench_up


@jit
def coriolis_sample(mf, mi, ws, q, v, out):
    """C(q, v) into out (nv, nv)."""
    nb, n, nv = sizes(mi)
    base = nv - n
    R, p, o = transforms_block(ws, 0, nb)
    V, o = block(ws, o, nb + 1, 6)
    eta, o = block(ws, o, nb + 1, 6)
    hc, o = block(ws, o, nb + 1, 6)
    Ic, o = inertias_block(ws, o, nb + 1)
    Bs, o = inertias_block(ws, o, nb + 1)
    A, o = inertias_block(ws, o, 2)
    W, o = block(ws, o, nb, 6)
    x, o = block(ws, o, 5, 6)
    f, a, c = x[0], x[2], x[3]  # x[1], x[4]: scratch
    joint_transforms(mf, mi, q, R, p)
    for r in range(6):
        V[nb, r] = v[r] if base else 0.0
    body_velocities(mf, mi, R, p, v, V, eta)
    load_inertias(mf, nb, Ic)
    for i in range(nb):
        bracket(V[i], mf[i, SCREW:SCREW + 6], W[i])  # w_i = ad_{V_i} S_i
    for i in range(nb + 1):
        mat6_times(Ic[i], V[i], hc[i])
        ad_matrix(V[i], A[0])
        matmul6(Ic[i], A[0], A[1])
        for r in range(6):
            for s in range(6):
                Bs[i, r, s] = A[1, r, s] + A[1, s, r]
    out[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        ci, mult_i = base + mi[i, COORD], mf[i, MULT]
        S = mf[i, SCREW:SCREW + 6]
        composite_A(Bs[i], hc[i], A[0])
        mat6_times(Ic[i], W[i], f)         # f = Ic w + A S
        mat6_times(A[0], S, x[1])
        transpose_times(A[0], S, a)        # a = A^T S
        mat6_times(Ic[i], S, c)            # c = Ic S
        for r in range(6):
            f[r] += x[1, r]
        out[ci, ci] += mult_i * mult_i * dot6(S, f)
        j = i
        while mi[j, PARENT] >= 0 or base:
            for y in (f, a, c):  # carry the three wrenches to the parent's frame
                wrench_up(R[j], p[j], y)
            j = mi[j, PARENT]
            if j < 0:  # the floating base: rows (f) and columns (a + ad_{V_0}^T c)
                x[4, :] = 0.0
                coadjoint_bias(V[nb], c, x[4])  # -ad*_{V_0} c = -ad_{V_0}^T c
                for r in range(6):
                    out[r, ci] += mult_i * f[r]
                    out[ci, r] += mult_i * (a[r] - x[4, r])
                break
            cj, mult_ij = base + mi[j, COORD], mult_i * mf[j, MULT]
            Sj = mf[j, SCREW:SCREW + 6]
            out[cj, ci] += mult_ij * dot6(Sj, f)
            out[ci, cj] += mult_ij * (dot6(a, Sj) + dot6(c, W[j]))
        parent = parent_row(mi, i)
        congruence_to_parent(R[i], p[i], Ic[i], Ic[parent], A[1])
        congruence_to_parent(R[i], p[i], Bs[i], Bs[parent], A[1])
        wrench_to_parent(R[i], p[i], hc[i], hc[parent])
    if base:
        composite_A(Bs[nb], hc[nb], A[0])
        ad_matrix(V[nb], A[1])
        matmul6(Ic[nb], A[1], Bs[nb])  # Bs[nb] is spent: it now holds Ic ad_{V_0}
        for r in range(6):
            for s in range(6):
                out[r, s] = Bs[nb, r, s] + A[0, r, s]
    return OK


@ijit
def composite_A(Bs, h, out):
    """out = A = -1/2 (Bs + ad*bar(h)), Bs = B + B^T."""
    adbar_matrix(h, out)
    for r in range(6):
        for s in range(6):
            out[r, s] = -0.5 * (Bs[r, s] + out[r, s])


@ijit
def matmul6(X, Y, out):
    for r in range(6):
        for s in range(6):
            t = 0.0
            for k in range(6):
                t += X[r, k] * Y[k, s]
            out[r, s] = t


@ijit
def transpose_times(X, y, out):
    """out = X^T y."""
    for s in range(6):
        t = 0.0
        for r in range(6):
            t += X[r, s] * y[r]
        out[s] = t


@jit
def coriolis_one(mf, mi, q, v, T, out):
    """One sample; BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v,))):
        return BAD_INPUT
    return coriolis_sample(mf, mi, workspace(mf, mi), q, v, out)


@pjit
def coriolis_many(mf, mi, ws_size, q, v, out):
    """C for a batch (B, ...) into out (B, nv, nv)."""
    chunks = chunk_bounds(q.shape[0])
    for c in prange(chunks.shape[0] - 1):
        ws = np.empty(ws_size)
        for b in range(chunks[c], chunks[c + 1]):
            coriolis_sample(mf, mi, ws, q[b], v[b], out[b])
    return OK
