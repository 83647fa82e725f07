"""Compiled recursive Newton-Euler inverse dynamics (Park et al. eqs. 22-27; Kim Table 2).

    Forward:   V_i  = Ad_{f_i^-1} V_lambda + S_i qd_i
               dV_i = Ad_{f_i^-1} dV_lambda + ad_{V_i} S_i qd_i + S_i qdd_i
    Backward:  F_i  = J_i dV_i - ad*_{V_i} J_i V_i - F_ext,i + sum_c Ad_{f_c^-1}^T F_c
               tau  = P^T (S_i^T F_i)_i      (mimic joints add into their leader's entry)
Gravity enters as the base acceleration (0, -R^T g). Row nb of V, dV, F is the base.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .kinematics import BAD_INPUT, OK, block, body_rate, body_velocities, chunk_bounds, inputs_valid, \
    joint_transforms, parent_row, sizes, transforms_block, vectors_valid
from .layout import COORD, MULT, SCREW
from .spatial import body_inertia_times, coadjoint_bias, gravity_in_base, ijit, jit, pjit, screw_dot, \
    twist_to_child, wrench_to_parent


@jit
def rnea_sample(mf, mi, ws, q, v, a, T, f_body, f_base, b, out):
    """Generalized forces into out (nv,); external wrenches f_body[b] (nb, 6) and f_base[b] (6,).

    f_body and f_base have no rows when there is no external wrench.
    """
    nb, n, nv = sizes(mi)
    R, p, o = transforms_block(ws, 0, nb)
    V, o = block(ws, o, nb + 1, 6)
    eta, o = block(ws, o, nb + 1, 6)
    dV, o = block(ws, o, nb + 1, 6)
    F, o = block(ws, o, nb + 1, 6)
    h, o = block(ws, o, 1, 6)
    joint_transforms(mf, mi, q, R, p)
    base = nv - n
    gravity_in_base(mf, nb, T, dV[nb])
    for r in range(6):
        V[nb, r] = v[r] if base else 0.0
        dV[nb, r] += a[r] if base else 0.0
    body_velocities(mf, mi, R, p, v, V, eta)
    for i in range(nb):
        twist_to_child(R[i], p[i], dV[parent_row(mi, i)], dV[i])
        qdd = body_rate(mf, mi, i, a)
        for r in range(6):
            dV[i, r] += eta[i, r] + mf[i, SCREW + r] * qdd
    for i in range(nb + 1):
        newton_euler(mf, i, V[i], dV[i], h[0], F[i])
    if f_body.shape[0]:
        for i in range(nb):
            for r in range(6):
                F[i, r] -= f_body[b, i, r]
        for r in range(6):
            F[nb, r] -= f_base[b, r]
    out[:] = 0.0
    for i in range(nb - 1, -1, -1):
        out[base + mi[i, COORD]] += mf[i, MULT] * screw_dot(mf, i, F[i])
        wrench_to_parent(R[i], p[i], F[i], F[parent_row(mi, i)])
    for r in range(base):
        out[r] = F[nb, r]
    return OK


@ijit
def newton_euler(mf, i, V, dV, h, F):
    """F = J_i dV - ad*_V J_i V (h: scratch 6-vector)."""
    body_inertia_times(mf, i, dV, F)
    body_inertia_times(mf, i, V, h)
    coadjoint_bias(V, h, F)


@jit
def rnea_one(mf, mi, ws, q, v, a, T, out):
    """One sample, inputs unchecked by Python: BAD_INPUT when a length, NaN or the pose is wrong."""
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a))):
        return BAD_INPUT
    nb, n, nv = sizes(mi)
    return rnea_sample(mf, mi, ws, q, v, a, T, ws[:0].reshape((0, nb, 6)), ws[:0].reshape((0, 6)), 0, out)


@jit
def gravity_one(mf, mi, ws, q, T, out):
    """g(q) = rnea(q, 0, 0) for one sample; the zero vectors live at the end of the workspace."""
    nb, n, nv = sizes(mi)
    if not inputs_valid(mi, q, T):
        return BAD_INPUT
    zero = ws[ws.shape[0] - nv:]
    zero[:] = 0.0
    return rnea_sample(mf, mi, ws[:ws.shape[0] - nv], q, zero, zero, T, ws[:0].reshape((0, nb, 6)),
                       ws[:0].reshape((0, 6)), 0, out)


@pjit
def rnea_many(mf, mi, ws_size, q, v, a, T, f_body, f_base, out):
    """rnea over a batch (B, ...), samples spread over threads; f_body (0 or B, nb, 6), f_base (0 or B, 6)."""
    chunks = chunk_bounds(q.shape[0])
    for c in prange(chunks.shape[0] - 1):
        ws = np.empty(ws_size)
        for b in range(chunks[c], chunks[c + 1]):
            rnea_sample(mf, mi, ws, q[b], v[b], a[b], T[b], f_body, f_base, b, out[b])
    return OK
