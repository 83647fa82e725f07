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

import math

import numpy as np

from .kinematics import BAD_INPUT, OK, block, borrowed, inputs_valid, model_arrays, parent_row, reshaped, sizes, \
    workspace
from .layout import AXIS, COORD, GENERAL, INERTIA, MULT, OFFSET, PARENT, PM, RM, SCREW
from .spatial import dot6, ijit, inertia10, inertia10_matrix, jit, bjit, joint_transform


@jit
def mass_matrix_sample(mf, mi, ws, q, out):
    """M(q) into out (nv, nv)."""
    mf, mi, q, out = borrowed(mf), borrowed(mi), borrowed(q), borrowed(out)  # see borrowed
    nb, n, nv = sizes(mi)
    T, o = block(ws, 0, nb + 1, 12)
    s, o = block(ws, o, nb, 6)
    Ic, o = block(ws, o, nb + 1, 10)
    sc, o = block(ws, o, nb, 2)
    f, o = block(ws, o, 1, 12)
    screws_and_inertias_in_base(mf, mi, q, T, sc, f[0], s, Ic)
    base = nv - n
    out[:, :] = 0.0
    for i in range(nb - 1, -1, -1):
        ci, mult_i = base + mi[i, COORD], mf[i, MULT]
        F = inertia10_product(Ic[i], s[i])  # Ic_i s_i
        out[ci, ci] += mult_i * mult_i * dot6(s[i], F)
        j = mi[i, PARENT]
        while j >= 0:
            cj = base + mi[j, COORD]
            m_ij = mult_i * mf[j, MULT] * dot6(s[j], F)
            out[ci, cj] += m_ij
            out[cj, ci] += m_ij
            j = mi[j, PARENT]
        for r in range(base):  # the floating base's rows
            out[r, ci] += mult_i * F[r]
            out[ci, r] += mult_i * F[r]
        parent = parent_row(mi, i)
        for k in range(10):
            Ic[parent, k] += Ic[i, k]
    if base:
        inertia10_matrix(Ic[nb], out[:6, :6])
    return OK


@ijit
def screws_and_inertias_in_base(mf, mi, q, T, sc, f, s, Ic):
    """Poses T_i (rows of T: R row-major, p), screws s_i and inertias J0_i in the base frame, in one pass.

    T[nb] is the base frame itself (the identity), the parent of the roots; Ic[nb] gets J_base.
    Scratch: sc (nb, 2) and f (12). The sines and cosines of the revolute joints come first, in a
    loop of their own: a call spills every register, which the pose loop fills with its locals.
    R and p of each pose are kept in locals for s_i and J0_i: the stores into the workspace could
    alias them, which would otherwise reload them for every entry.
    """
    nb = mi.shape[0] - 1
    for i in range(nb):
        k = int(mf[i, AXIS])
        if 0 <= k < 3:
            t = axis_step(mf, i, k, q[mi[i, COORD]])
            sc[i, 0], sc[i, 1] = math.sin(t), math.cos(t)
    for k in range(12):
        T[nb, k] = 1.0 if k == 0 or k == 4 or k == 8 else 0.0
    for i in range(nb):
        pose_in_base(mf, mi, i, q[mi[i, COORD]], T, sc[i], f)
        Ti = T[i]
        R = (Ti[0], Ti[1], Ti[2], Ti[3], Ti[4], Ti[5], Ti[6], Ti[7], Ti[8])
        p = (Ti[9], Ti[10], Ti[11])
        screw_in_base(mf, i, Ti, s[i])
        inertia10_in_base(mf, i, R, p, Ic[i])
    inertia10(mf, nb, Ic[nb])


@ijit
def pose_in_base(mf, mi, i, q_coord, T, sc, f):
    """T[i] = T_i = T_lambda M_i exp([S_i] q_i) (sc: sin and cos of a turn, f: scratch for a general f_i).

    For S_i = c e_k along a frame axis, T_lambda M_i is turned or shifted in place: exp([S_i] q_i)
    turns two of its columns (a revolute joint, as spatial.M_rotation) or moves p along one.
    """
    P, Ti = T[parent_row(mi, i)], T[i]
    k = int(mf[i, AXIS])
    if k == GENERAL:
        R, p = reshaped(f, 0, (3, 3)), f[9:]
        joint_transform(mf, i, q_coord, R, p)
        for r in range(3):
            for c in range(3):
                Ti[3 * r + c] = P[3 * r] * R[0, c] + P[3 * r + 1] * R[1, c] + P[3 * r + 2] * R[2, c]
            Ti[9 + r] = P[3 * r] * p[0] + P[3 * r + 1] * p[1] + P[3 * r + 2] * p[2] + P[9 + r]
        return
    for r in range(3):  # T_lambda M_i
        a0, a1, a2 = P[3 * r], P[3 * r + 1], P[3 * r + 2]
        for c in range(3):
            Ti[3 * r + c] = a0 * mf[i, RM + c] + a1 * mf[i, RM + 3 + c] + a2 * mf[i, RM + 6 + c]
        Ti[9 + r] = a0 * mf[i, PM] + a1 * mf[i, PM + 1] + a2 * mf[i, PM + 2] + P[9 + r]
    if k < 3:
        a = k + 1 if k < 2 else 0
        b = a + 1 if a < 2 else 0
        sn, cs = sc[0], sc[1]
        for r in range(3):
            x, y = Ti[3 * r + a], Ti[3 * r + b]
            Ti[3 * r + a] = cs * x + sn * y
            Ti[3 * r + b] = cs * y - sn * x
    else:
        t = axis_step(mf, i, k, q_coord)
        for r in range(3):
            Ti[9 + r] += t * Ti[3 * r + k - 3]


@ijit
def axis_step(mf, i, k, q_coord):
    """c q_i, the angle or distance of a screw S_i = c e_k along a frame axis (q_i = mult q_coord + offset)."""
    return mf[i, SCREW + k] * (mf[i, MULT] * q_coord + mf[i, OFFSET])


@ijit
def screw_in_base(mf, i, Ti, out):
    """out = s_i = Ad_{T_i} S_i = (R w, R v + p x R w) for T_i = (R, p) in the row Ti.

    For S_i = c e_k along a frame axis, R w or R v is c times a column of R.
    """
    k = int(mf[i, AXIS])
    if k == GENERAL:
        w0, w1, w2 = mf[i, SCREW], mf[i, SCREW + 1], mf[i, SCREW + 2]
        v0, v1, v2 = mf[i, SCREW + 3], mf[i, SCREW + 4], mf[i, SCREW + 5]
        x0, x1, x2 = Ti[0] * w0 + Ti[1] * w1 + Ti[2] * w2, Ti[3] * w0 + Ti[4] * w1 + Ti[5] * w2, \
            Ti[6] * w0 + Ti[7] * w1 + Ti[8] * w2
        y0, y1, y2 = Ti[0] * v0 + Ti[1] * v1 + Ti[2] * v2, Ti[3] * v0 + Ti[4] * v1 + Ti[5] * v2, \
            Ti[6] * v0 + Ti[7] * v1 + Ti[8] * v2
    elif k < 3:
        c = mf[i, SCREW + k]
        x0, x1, x2 = c * Ti[k], c * Ti[3 + k], c * Ti[6 + k]
        y0 = y1 = y2 = 0.0
    else:
        c = mf[i, SCREW + k]
        x0 = x1 = x2 = 0.0
        y0, y1, y2 = c * Ti[k - 3], c * Ti[k], c * Ti[k + 3]
    p0, p1, p2 = Ti[9], Ti[10], Ti[11]
    out[0], out[1], out[2] = x0, x1, x2
    out[3] = y0 + p1 * x2 - p2 * x1
    out[4] = y1 + p2 * x0 - p0 * x2
    out[5] = y2 + p0 * x1 - p1 * x0


@ijit
def inertia10_in_base(mf, i, R, p, out):
    """out = J0_i = Ad_{T_i^-1}^T J_i Ad_{T_i^-1} as ten numbers (spatial.inertia10), T_i = (R, p).

    With h' = R h (parallel axis theorem):
        h_0 = h' + m p,
        I_0 = R I R^T + (m |p|^2 + 2 p.h') 1 - m p p^T - p h'^T - h' p^T,
    a sixth of the 6x6 congruence's work.
    """
    m = mf[i, INERTIA + 35]
    h0, h1, h2 = mf[i, INERTIA + 16], mf[i, INERTIA + 5], mf[i, INERTIA + 9]  # J[2, 4], J[0, 5], J[1, 3]
    J00, J01, J02 = mf[i, INERTIA], mf[i, INERTIA + 1], mf[i, INERTIA + 2]
    J11, J12, J22 = mf[i, INERTIA + 7], mf[i, INERTIA + 8], mf[i, INERTIA + 14]
    hr = (R[0] * h0 + R[1] * h1 + R[2] * h2, R[3] * h0 + R[4] * h1 + R[5] * h2, R[6] * h0 + R[7] * h1 + R[8] * h2)
    d = m * (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) + 2.0 * (p[0] * hr[0] + p[1] * hr[1] + p[2] * hr[2])
    RI = ((R[0] * J00 + R[1] * J01 + R[2] * J02, R[0] * J01 + R[1] * J11 + R[2] * J12,
           R[0] * J02 + R[1] * J12 + R[2] * J22),
          (R[3] * J00 + R[4] * J01 + R[5] * J02, R[3] * J01 + R[4] * J11 + R[5] * J12,
           R[3] * J02 + R[4] * J12 + R[5] * J22),
          (R[6] * J00 + R[7] * J01 + R[8] * J02, R[6] * J01 + R[7] * J11 + R[8] * J12,
           R[6] * J02 + R[7] * J12 + R[8] * J22))
    out[0] = m
    out[1], out[2], out[3] = hr[0] + m * p[0], hr[1] + m * p[1], hr[2] + m * p[2]
    k = 4
    for r in range(3):
        for c in range(r, 3):
            out[k] = (RI[r][0] * R[3 * c] + RI[r][1] * R[3 * c + 1] + RI[r][2] * R[3 * c + 2] - m * p[r] * p[c]
                      - p[r] * hr[c] - hr[r] * p[c] + (d if r == c else 0.0))
            k += 1


@ijit
def inertia10_product(I, V):
    """I V for a ten-number inertia (spatial.inertia10_times), as a tuple: the stores into
    the workspace can then not make the loads of I and V repeat."""
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    m, h0, h1, h2 = I[0], I[1], I[2], I[3]
    return (I[4] * w0 + I[5] * w1 + I[6] * w2 + h1 * v2 - h2 * v1,
            I[5] * w0 + I[7] * w1 + I[8] * w2 + h2 * v0 - h0 * v2,
            I[6] * w0 + I[8] * w1 + I[9] * w2 + h0 * v1 - h1 * v0,
            m * v0 - h1 * w2 + h2 * w1,
            m * v1 - h2 * w0 + h0 * w2,
            m * v2 - h0 * w1 + h1 * w0)


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
