"""Compiled forward and hybrid dynamics (Kim 2012, Tables 3 and 4), as in reference/hybrid.py.

Backward:  J^_i = J_i + sum_c Ad_{f_c^-1}^T Pi_c Ad_{f_c^-1}
           b^_i = -ad*_{V_i} J_i V_i - F_ext,i + sum_c Ad_{f_c^-1}^T beta_c
  free:        U_i = J^_i S_i,  D_i = S_i^T U_i,  u_i = tau_i - U_i^T eta_i - S_i^T b^_i
               Pi_i = J^_i - U_i U_i^T / D_i,  beta_i = b^_i + J^_i eta_i + U_i u_i / D_i
  prescribed:  Pi_i = J^_i,  beta_i = b^_i + J^_i (eta_i + S_i qdd_i)
Forward:   a_i = Ad_{f_i^-1} dV_lambda + eta_i
  free:        qdd_i = (u_i - U_i^T Ad_{f_i^-1} dV_lambda) / D_i
  prescribed:  tau_i = U_i^T dV_i + S_i^T b^_i
           dV_i = a_i + S_i qdd_i
A free floating base solves J^_0 dV_0 = F_0 - b^_0 (J^_0 = L^T L, factored from its last row); a
prescribed one gives F_0 = J^_0 dV_0 + b^_0. Every pivot, D_i and J^_0's, passes core.singular's rule
(spatial.pivot_ok) or the kernel returns SINGULAR, and the reference raises.

Mimic joints stay in the recursion when all bodies a coordinate k drives (qdd_i = m_i qdd_k)
hang from one parent: the group is one joint of the parent, with, in the parent's frame,
    U_k = sum_i m_i Ad^T J^_i S_i,   D_k = sum_i m_i^2 S_i^T J^_i S_i,
    u_k = tau_k - sum_i m_i (U_i^T eta_i + S_i^T b^_i),
each body passing J^_i and b^_i + J^_i eta_i up whole and the parent taking
Pi -= U_k U_k^T / D_k, beta += U_k u_k / D_k once. A free coordinate that drives one body
alone is eliminated in that body's frame instead (the lines above with U_i = m_i J^_i S_i), which
moves Pi_i up without storing it and leaves U_k in {i}. Forward, qdd_k = (u_k - U_k^T dV_lambda) / D_k and
a prescribed tau_k = sum_i m_i (U_i^T dV_i + S_i^T b^_i). Other mimic layouts and a partly
prescribed base use M and the bias forces (`hybrid_dense`), like the reference.
"""
from __future__ import annotations

import numpy as np

from .crba import mass_matrix_sample
from .kinematics import BAD_INPUT, OK, SINGULAR, block, body_velocities, borrowed, inertias_block, pose_of, \
    inputs_valid, joint_transforms, link_wrench, load_inertias, model_arrays, parent_row, reshaped, screw, sizes, \
    transforms_block, vectors_valid, workspace, wrenches_valid
from .layout import ALONE, AXIS, COORD, FIRST, GENERAL, GROUPED, MULT, SCALE, SCREW
from .rnea import rnea_sample
from .spatial import bjit, body_inertia_times, coadjoint_bias, congruence_about_axis, congruence_of_blocks, \
    congruence_to_parent, dot6, factor_from_last, gravity_in_base, ijit, jit, mat6_times, pivot_ok, \
    screw_dot, solve_from_last, times_screw, twist_to_child, wrench_to_parent


@jit
def hybrid_sample(mf, mi, ws, q, v, u, prescribed, T, f_body, f_base, b, tau, a):
    """(tau, a) into tau, a (nv,): u holds a where prescribed, tau elsewhere."""
    mf, mi, q, v, u, prescribed, T = borrowed(mf), borrowed(mi), borrowed(q), borrowed(v), borrowed(u), \
        borrowed(prescribed), borrowed(T)  # see borrowed
    f_body, f_base, tau, a = borrowed(f_body), borrowed(f_base), borrowed(tau), borrowed(a)
    nb, n, nv = sizes(mi)
    base = nv - n
    partial_base = False
    if base:
        count = 0
        for r in range(6):
            count += prescribed[r]
        partial_base = 0 < count < 6
    if not mf[nb, GROUPED] or partial_base:
        return hybrid_dense(mf, mi, ws, q, v, u, prescribed, T, f_body, f_base, b, tau, a)
    return hybrid_recursive(mf, mi, ws, q, v, u, prescribed, T, f_body, f_base, b, tau, a)


@jit
def hybrid_recursive(mf, mi, ws, q, v, u, prescribed, T, f_body, f_base, b, tau, a):
    """Kim Table 4 with coordinates grouped by parent; see the module docstring."""
    nb, n, nv = sizes(mi)
    base = nv - n
    R, p, o = transforms_block(ws, 0, nb)
    V, o = block(ws, o, nb + 1, 6)
    eta, o = block(ws, o, nb + 1, 6)
    dV, o = block(ws, o, nb + 1, 6)
    bh, o = block(ws, o, nb + 1, 6)
    U, o = block(ws, o, nb, 6)  # U_i = J^_i S_i in {i}
    Uk, o = block(ws, o, n, 6)  # U_k in the frame of its bodies' parent
    Du, o = block(ws, o, 2, n)  # D_k (1 / D_k once coordinate k is eliminated) and u_k
    Jh, o = inertias_block(ws, o, nb + 1)
    x, o = block(ws, o, 2, 6)
    D, uk = Du[0], Du[1]
    joint_transforms(mf, mi, q, R, p)
    for r in range(6):
        V[nb, r] = v[r] if base else 0.0
    body_velocities(mf, mi, R, p, v, V, eta)
    load_inertias(mf, nb, Jh)
    for i in range(nb + 1):
        body_inertia_times(mf, i, V[i], x[0])
        bh[i, :] = 0.0
        coadjoint_bias(V[i], x[0], bh[i])
    if f_body.shape[0]:
        for i in range(nb):
            for r in range(6):
                bh[i, r] -= f_body[b, i, r]
        for r in range(6):
            bh[nb, r] -= f_base[b, r]
    Uk[:, :] = 0.0
    D[:] = 0.0
    for k in range(n):
        uk[k] = u[base + k]

    for i in range(nb - 1, -1, -1):
        k, m = mi[i, COORD], mf[i, MULT]
        S = screw(mf, i)
        times_screw(mf, i, Jh[i], U[i])
        beta = x[0]
        free = not prescribed[base + k]
        if free:
            bias_plus(Jh[i], eta[i], bh[i], beta, int(mf[i, AXIS]))
            D[k] += m * m * screw_dot(mf, i, U[i])
            uk[k] -= m * (dot6(U[i], eta[i]) + screw_dot(mf, i, bh[i]))
            for r in range(6):
                x[1, r] = m * U[i, r]  # body i's part of U_k, in {i}
        else:
            for r in range(6):
                x[1, r] = eta[i, r] + S[r] * m * u[base + k]
            bias_plus(Jh[i], x[1], bh[i], beta, GENERAL)
        j = parent_row(mi, i)
        if free and mf[i, ALONE]:  # Pi_i and beta_i in {i}, as in plain ABA
            if not pivot_ok(D[k], mf[nb, SCALE]):
                return SINGULAR
            D[k] = D_inv = 1.0 / D[k]  # one division, not twelve: the forward pass multiplies by D[k] too
            for r in range(6):
                beta[r] += x[1, r] * (uk[k] * D_inv)
            articulated_to_parent(R[i], p[i], int(mf[i, AXIS]), Jh[i], x[1], D_inv, Jh[j])
        else:
            if free:
                wrench_to_parent(R[i], p[i], x[1], Uk[k])
            congruence_to_parent(R[i], p[i], Jh[i], Jh[j])
        wrench_to_parent(R[i], p[i], beta, bh[j])
        if mf[i, FIRST] and free and not mf[i, ALONE]:  # the last body of coordinate k's group
            if not pivot_ok(D[k], mf[nb, SCALE]):
                return SINGULAR
            D[k] = 1.0 / D[k]
            articulate(Uk[k], D[k], uk[k], Jh[j], bh[j])

    gravity_in_base(mf, nb, T, x[1])  # g0 = (0, -R^T g)
    if not base:
        dV[nb, :] = x[1]
    elif prescribed[0]:
        for r in range(6):
            dV[nb, r] = u[r] + x[1, r]
        mat6_times(Jh[nb], dV[nb], tau[:6])
        for r in range(6):
            tau[r] += bh[nb, r]
    else:
        for r in range(6):
            tau[r] = u[r]
            dV[nb, r] = u[r] - bh[nb, r]
        if not factor_from_last(Jh[nb], mf[nb, SCALE]):
            return SINGULAR
        solve_from_last(Jh[nb], dV[nb])
    for r in range(base):
        a[r] = dV[nb, r] - x[1, r]

    for i in range(nb):
        k, m = mi[i, COORD], mf[i, MULT]
        j = parent_row(mi, i)
        twist_to_child(R[i], p[i], dV[j], dV[i])
        if mf[i, FIRST]:
            if prescribed[base + k]:
                a[base + k], tau[base + k] = u[base + k], 0.0
            elif mf[i, ALONE]:  # U_k = m U_i in {i}, where dV[i] holds Ad_{f_i^-1} dV_lambda yet
                a[base + k], tau[base + k] = (uk[k] - m * dot6(U[i], dV[i])) * D[k], u[base + k]
            else:
                a[base + k], tau[base + k] = (uk[k] - dot6(Uk[k], dV[j])) * D[k], u[base + k]
        for r in range(6):
            dV[i, r] += eta[i, r] + mf[i, SCREW + r] * m * a[base + k]
        if prescribed[base + k]:
            tau[base + k] += m * (dot6(U[i], dV[i]) + screw_dot(mf, i, bh[i]))
    return OK


@ijit
def bias_plus(J, V, b, out, axis):
    """out = b + J V for a 6x6 J; V is read first, as out could alias it (one workspace).

    axis k < 3 (layout.joint_axis) says V = eta_i = ad_{V_i} S_i qd_i of a revolute joint about e_k, whose
    entries k and 3 + k are zero (w x e_k and v x e_k have no part along e_k): two columns of J are skipped.
    """
    if 0 <= axis < 3:
        c = axis + 1 if axis < 2 else 0
        d = c + 1 if c < 2 else 0
        Vc, Vd, Wc, Wd = V[c], V[d], V[3 + c], V[3 + d]
        for r in range(6):
            out[r] = b[r] + J[r, c] * Vc + J[r, d] * Vd + J[r, 3 + c] * Wc + J[r, 3 + d] * Wd
    else:
        Vl = (V[0], V[1], V[2], V[3], V[4], V[5])
        for r in range(6):
            out[r] = b[r] + J[r, 0] * Vl[0] + J[r, 1] * Vl[1] + J[r, 2] * Vl[2] + J[r, 3] * Vl[3] \
                + J[r, 4] * Vl[4] + J[r, 5] * Vl[5]


@ijit
def articulate(U, D_inv, u, Pi, beta):
    """Pi -= U U^T / D and beta += U u / D: a free joint's motion eliminated (Kim Table 3).

    Pi stays symmetric: the upper triangle is formed and mirrored.
    """
    for r in range(6):
        Ur = U[r] * D_inv
        beta[r] += Ur * u
        for c in range(r, 6):
            Pi[r, c] -= Ur * U[c]
            Pi[c, r] = Pi[r, c]


@ijit
def articulated_to_parent(R, p, axis, J, U, D_inv, out):
    """out += Ad_{f^-1}^T Pi Ad_{f^-1} with Pi = J - U U^T / D (Kim Table 3), Pi never stored.

    A revolute joint about a frame axis (axis k < 3, layout.joint_axis: S = c e_k) has U = m J S = m c J e_k and
    D = m S^T U = m c U_k (m the mimic multiplier), so Pi e_k = J e_k - U U_k / D = 0: the congruence leaves
    Pi's row and column k out (congruence_about_axis), exact zeros where the formula leaves rounding errors.
    """
    W = (U[0] * D_inv, U[1] * D_inv, U[2] * D_inv, U[3] * D_inv, U[4] * D_inv, U[5] * D_inv)
    Ul = (U[0], U[1], U[2], U[3], U[4], U[5])
    if 0 <= axis < 3:
        a = axis + 1 if axis < 2 else 0
        b = a + 1 if a < 2 else 0
        congruence_about_axis(R, p, axis, (J[a, a] - Ul[a] * W[a], J[a, b] - Ul[a] * W[b], J[b, b] - Ul[b] * W[b]),
                              (eliminated_row(J, Ul, W, a), eliminated_row(J, Ul, W, b)),
                              eliminated_diagonal(J, Ul, W, 3), out)
    else:
        congruence_of_blocks(R, p, eliminated_diagonal(J, Ul, W, 0), eliminated_block(J, Ul, W, 0, 3),
                             eliminated_diagonal(J, Ul, W, 3), out)


@ijit
def eliminated_diagonal(J, U, W, r0):
    """The diagonal block (J - U W^T)[r0:r0 + 3, r0:r0 + 3] with W = U / D, symmetric: six entries formed."""
    b00, b01, b02 = J[r0, r0] - U[r0] * W[r0], J[r0, r0 + 1] - U[r0] * W[r0 + 1], J[r0, r0 + 2] - U[r0] * W[r0 + 2]
    b11, b12 = J[r0 + 1, r0 + 1] - U[r0 + 1] * W[r0 + 1], J[r0 + 1, r0 + 2] - U[r0 + 1] * W[r0 + 2]
    b22 = J[r0 + 2, r0 + 2] - U[r0 + 2] * W[r0 + 2]
    return (b00, b01, b02), (b01, b11, b12), (b02, b12, b22)


@ijit
def eliminated_row(J, U, W, r):
    """(J - U W^T)[r, 3:6] (U, W: 6-tuples)."""
    return J[r, 3] - U[r] * W[3], J[r, 4] - U[r] * W[4], J[r, 5] - U[r] * W[5]


@ijit
def eliminated_block(J, U, W, r0, c0):
    """The 3x3 block (J - U W^T)[r0:r0 + 3, c0:c0 + 3] as a tuple of rows (U, W: 6-tuples)."""
    return ((J[r0, c0] - U[r0] * W[c0], J[r0, c0 + 1] - U[r0] * W[c0 + 1], J[r0, c0 + 2] - U[r0] * W[c0 + 2]),
            (J[r0 + 1, c0] - U[r0 + 1] * W[c0], J[r0 + 1, c0 + 1] - U[r0 + 1] * W[c0 + 1],
             J[r0 + 1, c0 + 2] - U[r0 + 1] * W[c0 + 2]),
            (J[r0 + 2, c0] - U[r0 + 2] * W[c0], J[r0 + 2, c0 + 1] - U[r0 + 2] * W[c0 + 1],
             J[r0 + 2, c0 + 2] - U[r0 + 2] * W[c0 + 2]))


@jit
def hybrid_dense(mf, mi, ws, q, v, u, prescribed, T, f_body, f_base, b, tau, a):
    """Partition M a + b = tau into prescribed (p) and free (f) rows, b = rnea(q, v, 0):

        M_ff a_f = tau_f - b_f - M_fp a_p  (M_ff = L^T L from its last row),   tau_p = M_p. a + b_p.
    """
    nb, n, nv = sizes(mi)
    M, o = block(ws, 0, nv, nv)
    Mff, o = block(ws, o, nv, nv)
    bias, o = block(ws, o, 2, nv)
    free, o = block(ws, o, 1, nv)
    rest = ws[o:]
    mass_matrix_sample(mf, mi, rest, q, M)
    zero = bias[1]
    zero[:] = 0.0
    rnea_sample(mf, mi, rest, q, v, zero, T, f_body, f_base, b, bias[0])
    nf = 0
    for k in range(nv):
        a[k] = u[k] if prescribed[k] else 0.0
        if not prescribed[k]:
            free[0, nf] = k
            nf += 1
    rhs = zero[:nf]
    for r in range(nf):
        kr = int(free[0, r])
        rhs[r] = u[kr] - bias[0, kr]
        for c in range(nv):
            rhs[r] -= M[kr, c] * a[c]  # a is zero on the free entries yet
        for c in range(nf):
            Mff[r, c] = M[kr, int(free[0, c])]
    if not factor_from_last(Mff[:nf, :nf], mf[nb, SCALE]):
        return SINGULAR
    solve_from_last(Mff[:nf, :nf], rhs)
    for r in range(nf):
        a[int(free[0, r])] = rhs[r]
    for k in range(nv):
        if prescribed[k]:
            tau[k] = bias[0, k]
            for c in range(nv):
                tau[k] += M[k, c] * a[c]
        else:
            tau[k] = u[k]
    return OK


@jit
def hybrid_one(handle, q, v, u, prescribed, T, tau, a):
    """One sample; BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, u))):
        return BAD_INPUT
    nb, n, nv = sizes(mi)
    ws = workspace(mf, mi)
    # Sample index np.int64(0), not the literal 0, which numba would compile a second hybrid_sample for.
    return hybrid_sample(mf, mi, ws, q, v, u, prescribed, T, reshaped(ws, 0, (0, nb, 6)), reshaped(ws, 0, (0, 6)),
                         np.int64(0), tau, a)


@jit
def hybrid_wrench_one(handle, q, v, u, prescribed, T, f_body, f_base, tau, a):
    """hybrid_one with external wrenches f_body (1, nb, 6) and f_base (1, 6), in body frames."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, u)) and wrenches_valid(mi, f_body, f_base)):
        return BAD_INPUT
    return hybrid_sample(mf, mi, workspace(mf, mi), q, v, u, prescribed, T, f_body, f_base, np.int64(0), tau, a)


@jit
def hybrid_link_one(handle, q, v, u, prescribed, T, w, link, tau, a):
    """hybrid_one with the wrench w (m, f) on one link, row `link` of the model's link table (rnea_link_one)."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, u))):
        return BAD_INPUT
    nb = sizes(mi)[0]
    ws = workspace(mf, mi)
    valid, f_body, f_base = link_wrench(handle, ws, nb, w, link)
    if not valid:
        return BAD_INPUT
    return hybrid_sample(mf, mi, ws, q, v, u, prescribed, T, f_body, f_base, np.int64(0), tau, a)


@bjit
def hybrid_many(mf, mi, ws_size, q, v, u, prescribed, T, f_body, f_base, tau, a, start, stop):
    """hybrid over samples start..stop of a batch (B, ...); returns the worst status of those samples.

    tau without rows (aba, which returns a alone) goes to scratch: no output array for it.
    """
    ws = np.empty(ws_size + a.shape[1])
    work, scratch = ws[:ws_size], ws[ws_size:]
    status = OK
    for b in range(start, stop):
        status = max(status, hybrid_sample(mf, mi, work, q[b], v[b], u[b], prescribed, pose_of(T, b), f_body, f_base,
                                           b, tau[b] if tau.shape[0] else scratch, a[b]))
    return status
