"""Compiled joint-torque regressor: Y(q, v, a) with Y pi = rnea(q, v, a) (Atkeson et al. 1986).

Newton-Euler is linear in each body's ten inertial parameters pi_j = (m, h, Ibar) (h = m c,
Ibar the rotational inertia about the body frame's origin, Pinocchio's order xx, xy, yy, xz,
yz, zz). With V_j = (w, v), dV_j = (dw, dv) from the forward pass (gravity as base acceleration),

    F_j = J_j dV_j - ad*_{V_j} J_j V_j = A(V_j, dV_j) pi_j,       A (6 x 10), per column:
        m:     (0, dv + w x v)
        h_e:   (e x (dv + w x v), dw x e + w x (w x e))
        Ibar:  (L(dw) + [w] L(w), 0)        with Ibar w = L(w) (Ixx, Ixy, Iyy, Ixz, Iyz, Izz)

and tau_i = S_i^T sum_{j in subtree(i)} Ad_{T_ij}^T F_j: body j's columns are A carried up
its chain of ancestors, each joint reading S_i^T of them (mimic joints into their leader's row).
The root's columns of a floating base are its A itself; the other bodies' columns reach the base
rows as the wrench carried into the base frame.
"""
from __future__ import annotations

import numpy as np

from .kinematics import BAD_INPUT, OK, base_motion, block, body_motion, borrowed, inputs_valid, model_arrays, \
    pose_of, sizes, transforms_block, vectors_valid, workspace
from .layout import COORD, MULT
from .spatial import bjit, ijit, jit, screw_dot, wrench_to_parent


@jit
def regressor_sample(mf, mi, ws, q, v, a, T, out):
    """Y (nv, 10 k) into out, k = nb bodies (+ the base first for a floating base)."""
    mf, mi, q, v, a, T, out = borrowed(mf), borrowed(mi), borrowed(q), borrowed(v), borrowed(a), borrowed(T), \
        borrowed(out)  # see kinematics.borrowed
    nb, n, nv = sizes(mi)
    R, p, o = transforms_block(ws, 0, nb)
    V, o = block(ws, o, nb + 1, 6)
    dV, o = block(ws, o, nb + 1, 6)
    W, o = block(ws, o, 10, 6)
    Wp, o = block(ws, o, 10, 6)
    eta, o = block(ws, o, 1, 6)
    base = nv - n
    base_motion(mf, nb, T, v, a, base, V, dV)
    for i in range(nb):
        body_motion(mf, mi, i, q, v, a, R, p, V, dV, eta[0])
    out[:, :] = 0.0
    first = 10 if base else 0  # the base's columns come first
    if base:
        body_columns(V[nb], dV[nb], W)
        for k in range(10):
            for r in range(6):
                out[r, k] = W[k, r]
    for j in range(nb):
        body_columns(V[j], dV[j], W)
        col = first + 10 * j
        i = j
        while i >= 0:
            row = base + mi[i, COORD]
            mult = mf[i, MULT]
            for k in range(10):
                out[row, col + k] += mult * screw_dot(mf, i, W[k])
            parent = mi[i, 0]
            if parent < 0 and not base:
                break
            Wp[:, :] = 0.0
            for k in range(10):
                wrench_to_parent(R[i], p[i], W[k], Wp[k])
            W, Wp = Wp, W
            i = parent
        if base:
            for k in range(10):
                for r in range(6):
                    out[r, col + k] = W[k, r]
    return OK


@ijit
def body_columns(V, dV, W):
    """W[k] = the wrench F_j of parameter k alone: the rows of A(V, dV)^T (module docstring)."""
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    d0, d1, d2 = dV[0], dV[1], dV[2]
    a0 = dV[3] + w1 * v2 - w2 * v1  # dv + w x v
    a1 = dV[4] + w2 * v0 - w0 * v2
    a2 = dV[5] + w0 * v1 - w1 * v0
    W[:, :] = 0.0
    W[0, 3], W[0, 4], W[0, 5] = a0, a1, a2
    # h_e: m-part e x a; f-part K e with K = [dw] + [w]^2
    W[1, 1], W[1, 2] = -a2, a1
    W[2, 0], W[2, 2] = a2, -a0
    W[3, 0], W[3, 1] = -a1, a0
    ww = w0 * w0 + w1 * w1 + w2 * w2
    W[1, 3], W[1, 4], W[1, 5] = w0 * w0 - ww, d2 + w0 * w1, -d1 + w0 * w2
    W[2, 3], W[2, 4], W[2, 5] = -d2 + w0 * w1, w1 * w1 - ww, d0 + w1 * w2
    W[3, 3], W[3, 4], W[3, 5] = d1 + w0 * w2, -d0 + w1 * w2, w2 * w2 - ww
    # Ibar: L(dw) e_k + w x L(w) e_k, L(w) e_k for (xx, xy, yy, xz, yz, zz) below
    inertia_column(W[4], d0, 0.0, 0.0, w0, 0.0, 0.0, w0, w1, w2)
    inertia_column(W[5], d1, d0, 0.0, w1, w0, 0.0, w0, w1, w2)
    inertia_column(W[6], 0.0, d1, 0.0, 0.0, w1, 0.0, w0, w1, w2)
    inertia_column(W[7], d2, 0.0, d0, w2, 0.0, w0, w0, w1, w2)
    inertia_column(W[8], 0.0, d2, d1, 0.0, w2, w1, w0, w1, w2)
    inertia_column(W[9], 0.0, 0.0, d2, 0.0, 0.0, w2, w0, w1, w2)


@ijit
def inertia_column(out, c0, c1, c2, l0, l1, l2, w0, w1, w2):
    """out[:3] = c + w x l (c = L(dw) e_k, l = L(w) e_k)."""
    out[0] = c0 + w1 * l2 - w2 * l1
    out[1] = c1 + w2 * l0 - w0 * l2
    out[2] = c2 + w0 * l1 - w1 * l0


@jit
def regressor_one(handle, q, v, a, T, out):
    """One sample, inputs unchecked by Python: BAD_INPUT when a length, NaN or the pose is wrong."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a))):
        return BAD_INPUT
    return regressor_sample(mf, mi, workspace(mf, mi), q, v, a, T, out)


@bjit
def regressor_many(mf, mi, ws_size, q, v, a, T, out, start, stop):
    """Y over samples start..stop of a batch into out (B, nv, 10 k)."""
    ws = np.empty(ws_size)
    for b in range(start, stop):
        regressor_sample(mf, mi, ws, q[b], v[b], a[b], pose_of(T, b), out[b])
    return OK
