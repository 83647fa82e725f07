"""Compiled single-sample step of the momentum observer (core.observer), for the node's rate.

One call computes M, C and g with the kernels' own sample functions, then
p = (M + diag(armature)) v, beta = tau - tau_f(qd) + C^T v - g and the exact first-order step of the residual (see
core.observer), in place: no Python between the three passes and the update.
"""
from __future__ import annotations

import math

from .coriolis import coriolis_sample
from .crba import mass_matrix_sample
from .kinematics import BAD_INPUT, OK, inputs_valid, model_arrays, sizes, vectors_valid, workspace
from .rnea import gravity_sample
from .spatial import jit


@jit
def observer_one(handle, q, v, tau, T, dt, gain, friction, state, mats):
    """One sample: state (6, nv) holds p, beta of the previous sample, r, then scratch; r is
    advanced by dt [s] when dt > 0, and p, beta become this sample's. mats (2, nv, nv): scratch.

    friction (5, n): Coulomb, viscous, offset per joint, (row 3, entry 0) the tanh smoothing
    velocity, and (row 4) the rotors' inertia on M's diagonal (armature); zeros for none. BAD_INPUT for a wrong length, NaN or a pose outside SE(3), and for
    terms that overflow (|v| ~ 1e154): the state is then left as it was.
    """
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, tau))):
        return BAD_INPUT
    nb, n, nv = sizes(mi)
    ws = workspace(mf, mi)
    M, C = mats[0], mats[1]
    p_prev, beta_prev, r, g, p, beta = state[0], state[1], state[2], state[3], state[4], state[5]
    mass_matrix_sample(mf, mi, ws, q, M)
    coriolis_sample(mf, mi, ws, q, v, C)
    gravity_sample(mf, mi, ws, q, T, g)
    for i in range(nv):
        pi, ci = 0.0, 0.0
        for j in range(nv):
            pi += M[i, j] * v[j]
            ci += C[j, i] * v[j]
        p[i] = pi
        beta[i] = tau[i] + ci - g[i]
    for j in range(n):  # (a lone floating body has no joint, and friction no column)
        qd = v[nv - n + j]
        beta[nv - n + j] -= friction[0, j] * math.tanh(qd / friction[3, 0]) + friction[1, j] * qd + friction[2, j]
        p[nv - n + j] += friction[4, j] * qd
    r_new = g  # g is spent: its row holds the new r until every term is known to be finite
    for i in range(nv):
        r_new[i] = r[i]
        if dt > 0.0:
            decay = math.exp(-gain[i] * dt)
            ds = p[i] - p_prev[i] - 0.5 * (beta[i] + beta_prev[i]) * dt
            r_new[i] = decay * r[i] + (1.0 - decay) * ds / dt
        if not (math.isfinite(p[i]) and math.isfinite(beta[i]) and math.isfinite(r_new[i])):
            return BAD_INPUT
    for i in range(nv):
        r[i] = r_new[i]
        p_prev[i] = p[i]
        beta_prev[i] = beta[i]
    return OK
