"""Compiled joint-space mass matrix by the composite-rigid-body recursion.

    Ic_i = J_i + sum_c Ad_{f_c^-1}^T Ic_c Ad_{f_c^-1}           (composite inertia in {i})
    M_b[i, j] = S_j^T Ad^T ... Ad^T Ic_i S_i                    (j = i and its ancestors)
    M = P^T M_b P      (each body adds mult_i mult_j M_b[i, j] into its coordinates' entry)
For a floating base the base rows hold Ic_i S_i carried to the base frame, and M_00 = Ic_base.
Equal to the reference's closed form S^T G^T J G S.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .kinematics import BAD_INPUT, OK, block, chunk_bounds, inertias_block, inputs_valid, joint_transforms, \
    load_inertias, parent_row, sizes, transforms_block, workspace
from .layout import COORD, MULT, PARENT, SCREW
from .spatial import congruence_to_parent, jit, mat6_times, pjit, screw_dot, wrench_up


@jit
def mass_matrix_sample(mf, mi, ws, q, out):
    """M(q) into out (nv, nv)."""
    nb, n, nv = sizes(mi)
    R, p, o = transforms_block(ws, 0, nb)
    Ic, o = inertias_block(ws, o, nb + 1)
    tmp, o = block(ws, o, 6, 6)
    F, o = block(ws, o, 1, 6)
    f = F[0]
    joint_transforms(mf, mi, q, R, p)
    load_inertias(mf, nb, Ic)
    base = nv - n
    out[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        ci, mult_i = base + mi[i, COORD], mf[i, MULT]
        mat6_times(Ic[i], mf[i, SCREW:SCREW + 6], f)  # f = Ic_i S_i, carried up the path to the root
        out[ci, ci] += mult_i * mult_i * screw_dot(mf, i, f)
        j = i
        while mi[j, PARENT] >= 0 or base:
            wrench_up(R[j], p[j], f)
            j = mi[j, PARENT]
            if j < 0:  # reached the floating base: its six rows
                for r in range(6):
                    out[r, ci] += mult_i * f[r]
                    out[ci, r] += mult_i * f[r]
                break
            cj = base + mi[j, COORD]
            m_ij = mult_i * mf[j, MULT] * screw_dot(mf, j, f)
            out[ci, cj] += m_ij
            out[cj, ci] += m_ij
        congruence_to_parent(R[i], p[i], Ic[i], Ic[parent_row(mi, i)], tmp)
    if base:
        out[:6, :6] = Ic[nb]
    return OK


@jit
def mass_matrix_one(mf, mi, q, T, out):
    """One sample; BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    if not inputs_valid(mi, q, T):
        return BAD_INPUT
    return mass_matrix_sample(mf, mi, workspace(mf, mi), q, out)


@pjit
def mass_matrix_many(mf, mi, ws_size, q, out):
    """M for a batch q (B, n) into out (B, nv, nv)."""
    chunks = chunk_bounds(q.shape[0])
    for c in prange(chunks.shape[0] - 1):
        ws = np.empty(ws_size)
        for b in range(chunks[c], chunks[c + 1]):
            mass_matrix_sample(mf, mi, ws, q[b], out[b])
    return OK
