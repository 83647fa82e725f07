"""Compiled recursive Newton-Euler inverse dynamics (Park et al. eqs. 22-27; Kim Table 2).

    Forward:   V_i  = Ad_{f_i^-1} V_lambda + S_i qd_i
               dV_i = Ad_{f_i^-1} dV_lambda + ad_{V_i} S_i qd_i + S_i qdd_i
    Backward:  F_i  = J_i dV_i - ad*_{V_i} J_i V_i - F_ext,i + sum_c Ad_{f_c^-1}^T F_c
               tau  = P^T (S_i^T F_i)_i      (mimic joints add into their leader's entry)
Gravity enters as the base acceleration (0, -R^T g). Row nb of V, dV, F is the base.
The gravity kernel is the same recursion with V = 0 and qdd = 0: dV_i = Ad_{f_i^-1} dV_lambda
and F_i = J_i dV_i + sum_c Ad_{f_c^-1}^T F_c.
"""
from __future__ import annotations

import numpy as np

from .kinematics import BAD_INPUT, OK, at, base_motion, block, body_motion, borrowed, fixed_pose, inputs_valid, \
    link_wrench, model_arrays, pose_of, parent_row, reshaped, sizes, transforms_block, vectors_valid, workspace, \
    wrenches_valid
from .layout import COORD, MULT
from .spatial import all_finite, bjit, body_inertia_times, coadjoint_bias, gravity_in_base, ijit, jit, joint_transform, \
    screw_dot, twist_to_child, wrench_to_parent


@jit
def rnea_sample(mf, mi, ws, q, v, a, T, f_body, f_base, b, out):
    """Generalized forces into out (nv,); external wrenches f_body[b] (nb, 6) and f_base[b] (6,).

    f_body and f_base have no rows when there is no external wrench.
    """
    mf, mi, q, v, a, T, out = borrowed(mf), borrowed(mi), borrowed(q), borrowed(v), borrowed(a), borrowed(T), \
        borrowed(out)  # see borrowed
    f_body, f_base = borrowed(f_body), borrowed(f_base)
    nb, n, nv = sizes(mi)
    R, p, o = transforms_block(ws, 0, nb)
    V, o = block(ws, o, nb + 1, 6)
    dV, o = block(ws, o, nb + 1, 6)
    F, o = block(ws, o, nb + 1, 6)
    h, o = block(ws, o, 2, 6)
    base = nv - n
    base_motion(mf, nb, T, v, a, base, V, dV)
    newton_euler(mf, nb, V[nb], dV[nb], h[0], F[nb])
    eta = h[1]
    for i in range(nb):  # one pass: the forward recursion and each body's F_i
        body_motion(mf, mi, i, q, v, a, R, p, V, dV, eta)
        newton_euler(mf, i, V[i], dV[i], h[0], F[i])
    if f_body.shape[0]:
        for i in range(nb):
            for r in range(6):
                F[i, r] -= f_body[b, i, r]
        for r in range(6):
            F[nb, r] -= f_base[b, r]
    generalized_forces(mf, mi, R, p, F, out)
    return OK


@jit
def gravity_sample(mf, mi, ws, q, T, out):
    """g(q) = rnea(q, 0, 0) into out (nv,), without the velocity terms that vanish."""
    mf, mi, q, T, out = borrowed(mf), borrowed(mi), borrowed(q), borrowed(T), borrowed(out)  # see borrowed
    nb, n, nv = sizes(mi)
    R, p, o = transforms_block(ws, 0, nb)
    dV, o = block(ws, o, nb + 1, 6)
    F, o = block(ws, o, nb + 1, 6)
    gravity_in_base(mf, nb, T, dV[nb])
    body_inertia_times(mf, nb, dV[nb], F[nb])
    for i in range(nb):
        joint_transform(mf, i, q[mi[i, COORD]], R[i], p[i])
        twist_to_child(R[i], p[i], dV[parent_row(mi, i)], dV[i])
        body_inertia_times(mf, i, dV[i], F[i])
    generalized_forces(mf, mi, R, p, F, out)
    return OK


@ijit
def newton_euler(mf, i, V, dV, h, F):
    """F = J_i dV - ad*_V J_i V (h: scratch 6-vector)."""
    body_inertia_times(mf, i, dV, F)
    body_inertia_times(mf, i, V, h)
    coadjoint_bias(V, h, F)


@ijit
def generalized_forces(mf, mi, R, p, F, out):
    """The backward pass: F_lambda += Ad^T F_i, out = (F_0 for a floating base; P^T (S_i^T F_i)_i)."""
    nb, n, nv = sizes(mi)
    base = nv - n
    out[:] = 0.0
    for i in range(nb - 1, -1, -1):
        out[base + mi[i, COORD]] += mf[i, MULT] * screw_dot(mf, i, F[i])
        wrench_to_parent(R[i], p[i], F[i], F[parent_row(mi, i)])
    for r in range(base):
        out[r] = F[nb, r]


@jit
def rnea_one(handle, q, v, a, T, out):
    """One sample, inputs unchecked by Python: BAD_INPUT when a length, NaN or the pose is wrong."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a))):
        return BAD_INPUT
    nb, n, nv = sizes(mi)
    ws = workspace(mf, mi)
    # Sample index np.int64(0), not the literal 0, which numba would compile a second rnea_sample for.
    return rnea_sample(mf, mi, ws, q, v, a, T, reshaped(ws, 0, (0, nb, 6)), reshaped(ws, 0, (0, 6)),
                       np.int64(0), out)


@jit
def rnea_wrench_one(handle, q, v, a, T, f_body, f_base, out):
    """rnea_one with external wrenches f_body (1, nb, 6) and f_base (1, 6), in body frames."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a)) and wrenches_valid(mi, f_body, f_base)):
        return BAD_INPUT
    return rnea_sample(mf, mi, workspace(mf, mi), q, v, a, T, f_body, f_base, np.int64(0), out)


@jit
def rnea_link_one(handle, q, v, a, T, w, link, out):
    """rnea_one with the wrench w (m, f) on one link, row `link` of the model's link table (kinematics.link_wrench):
    a wrench on one link, the commonest case, costs no numpy work in the caller."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a))):
        return BAD_INPUT
    nb = sizes(mi)[0]
    ws = workspace(mf, mi)
    valid, f_body, f_base = link_wrench(handle, ws, nb, w, link)
    if not valid:
        return BAD_INPUT
    return rnea_sample(mf, mi, ws, q, v, a, T, f_body, f_base, np.int64(0), out)


@jit
def gravity_one(handle, q, T, out):
    """One sample; BAD_INPUT for a wrong length, NaN or a pose outside SE(3)."""
    mf, mi = model_arrays(handle)
    if not inputs_valid(mi, q, T):
        return BAD_INPUT
    return gravity_sample(mf, mi, workspace(mf, mi), q, T, out)


# core.Data's calls on a fixed base: the output as its address and no base pose (the identity, built in the
# workspace), two arrays fewer for numba to unbox per call than the *_one kernels (about 0.1 us each).
@ijit
def fixed_q_valid(mi, q):
    """The model has a fixed base and q (n,) is finite: inputs_valid without a pose."""
    _, n, nv = sizes(mi)
    return nv == n and q.shape[0] == n and all_finite(q)


@jit
def rnea_fixed_at(handle, q, v, a, out):
    """rnea_one of a fixed base, tau written at the address `out` (nv floats)."""
    mf, mi = model_arrays(handle)
    if not (fixed_q_valid(mi, q) and vectors_valid(mi, (v, a))):
        return BAD_INPUT
    nb, _, nv = sizes(mi)
    ws = workspace(mf, mi)
    return rnea_sample(mf, mi, ws, q, v, a, fixed_pose(ws, nb), reshaped(ws, 0, (0, nb, 6)), reshaped(ws, 0, (0, 6)),
                       np.int64(0), at(out, nv))


@jit
def rnea_link_fixed_at(handle, q, v, a, w, link, out):
    """rnea_link_one of a fixed base, tau written at the address `out` (nv floats)."""
    mf, mi = model_arrays(handle)
    if not (fixed_q_valid(mi, q) and vectors_valid(mi, (v, a))):
        return BAD_INPUT
    nb, _, nv = sizes(mi)
    ws = workspace(mf, mi)
    valid, f_body, f_base = link_wrench(handle, ws, nb, w, link)
    if not valid:
        return BAD_INPUT
    return rnea_sample(mf, mi, ws, q, v, a, fixed_pose(ws, nb), f_body, f_base, np.int64(0), at(out, nv))


@jit
def gravity_fixed_at(handle, q, out):
    """gravity_one of a fixed base, g written at the address `out` (nv floats)."""
    mf, mi = model_arrays(handle)
    if not fixed_q_valid(mi, q):
        return BAD_INPUT
    nb, _, nv = sizes(mi)
    ws = workspace(mf, mi)
    return gravity_sample(mf, mi, ws, q, fixed_pose(ws, nb), at(out, nv))


@bjit
def rnea_many(mf, mi, ws_size, q, v, a, T, f_body, f_base, out, start, stop):
    """rnea over samples start..stop of a batch (B, ...); f_body (0 or B, nb, 6), f_base (0 or B, 6)."""
    ws = np.empty(ws_size)
    for b in range(start, stop):
        rnea_sample(mf, mi, ws, q[b], v[b], a[b], pose_of(T, b), f_body, f_base, b, out[b])
    return OK


@bjit
def gravity_many(mf, mi, ws_size, q, T, out, start, stop):
    """g over samples start..stop of a batch q (B, n), T (B or 1, 4, 4) into out (B, nv)."""
    ws = np.empty(ws_size)
    for b in range(start, stop):
        gravity_sample(mf, mi, ws, q[b], pose_of(T, b), out[b])
    return OK
