"""Compiled joint-space mass matrix by the composite-rigid-body algorithm, in the base frame.

With every quantity in the base frame {0} (T_i the pose of body i, s_i = Ad_{T_i} S_i its joint
screw, J0_i = Ad_{T_i^-1}^T J_i Ad_{T_i^-1} its inertia), composites are plain sums and the
entries are dot products, so no transform runs along the paths to the root:
    Ic_i = J0_i + sum_c Ic_c                          (composite inertia of the subtree of i)
    M_b[i, j] = s_j^T Ic_i s_i                        (j = i and its ancestors)
    M = P^T M_b P      (each body adds mult_i mult_j M_b[i, j] into its coordinates' entry)
For a floating base, {0} is the base frame: its rows hold Ic_i s_i and M_00 = Ic_base.
The inertias are rigid-body ones, kept as ten numbers (spatial.inertia10).
Equal to the reference's closed form S^T G^T J G S.
"""
from __future__ import annotations

import numpy as np

from .kinematics import BAD_INPUT, OK, block, borrowed, inputs_valid, joint_transforms, \
    model_arrays, parent_row, sizes, transforms_block, workspace
from .layout import COORD, MULT, PARENT
from .spatial import dot6, ijit, inertia10, inertia10_matrix, inertia10_times, inertia10_to_world, jit, bjit, \
    pose_in_world, screw_to_world


@jit
def mass_matrix_sample(mf, mi, ws, q, out):
    """M(q) into out (nv, nv)."""
    mf, mi, q, out = borrowed(mf), borrowed(mi), borrowed(q), borrowed(out)  # see borrowed
    nb, n, nv = sizes(mi)
    R, p, o = transforms_block(ws, 0, nb)
    Rw, pw, o = transforms_block(ws, o, nb)
    s, o = block(ws, o, nb, 6)
    Ic, o = block(ws, o, nb + 1, 10)
    F, o = block(ws, o, 1, 6)
    f = F[0]
    joint_transforms(mf, mi, q, R, p)
    screws_and_inertias_in_base(mf, mi, R, p, Rw, pw, s, Ic)
    base = nv - n
    out[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        ci, mult_i = base + mi[i, COORD], mf[i, MULT]
        inertia10_times(Ic[i], s[i], f)  # f = Ic_i s_i
        out[ci, ci] += mult_i * mult_i * dot6(s[i], f)
        j = mi[i, PARENT]
        while j >= 0:
            cj = base + mi[j, COORD]
            m_ij = mult_i * mf[j, MULT] * dot6(s[j], f)
            out[ci, cj] += m_ij
            out[cj, ci] += m_ij
            j = mi[j, PARENT]
        for r in range(base):  # the floating base's rows
            out[r, ci] += mult_i * f[r]
            out[ci, r] += mult_i * f[r]
        parent = parent_row(mi, i)
        for k in range(10):
            Ic[parent, k] += Ic[i, k]
    if base:
        inertia10_matrix(Ic[nb], out[:6, :6])
    return OK


@ijit
def screws_and_inertias_in_base(mf, mi, R, p, Rw, pw, s, Ic):
    """Poses T_i = T_lambda f_i, screws s_i = Ad_{T_i} S_i and inertias J0_i in the base frame.

    Ic[nb] gets the base's own inertia J_base (already in the base frame).
    """
    nb = mi.shape[0] - 1
    for i in range(nb):
        parent = mi[i, PARENT]
        if parent < 0:
            Rw[i, :, :] = R[i]
            pw[i, :] = p[i]
        else:
            pose_in_world(Rw[parent], pw[parent], R[i], p[i], Rw[i], pw[i])
        screw_to_world(mf, i, Rw[i], pw[i], s[i])
        inertia10(mf, i, Ic[i])
        inertia10_to_world(Rw[i], pw[i], Ic[i])
    inertia10(mf, nb, Ic[nb])


@jit
def mass_matrix_one(handle, q, T, out):
    """One sample; BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    mf, mi = model_arrays(handle)
    if not inputs_valid(mi, q, T):
        return BAD_INPUT
    return mass_matrix_sample(mf, mi, workspace(mf, mi), q, out)


@bjit
def mass_matrix_many(mf, mi, ws_size, q, out, start, stop):
    """M for samples start..stop of a batch q (B, n) into out (B, nv, nv)."""
    ws = np.empty(ws_size)
    for b in range(start, stop):
        mass_matrix_sample(mf, mi, ws, q[b], out[b])
    return OK
