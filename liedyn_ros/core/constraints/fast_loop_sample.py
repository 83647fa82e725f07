"""The loops' route sample in one compiled call: what pipeline.routes.loops' readable path computes with a dozen
core calls (each checking its inputs, each paying numpy's per-call cost), by the same rules, for one sample.

With the loop closures always on and the contacts per `active` (rows: the active constraints' rows), A and c by
fast_closures.closure_terms at q_ff (the motion's A) and at (q, v) (the rest's A, the forward's c, the frames):

    tau_r = rnea(q_ff, v_ff, a) (tau_free, the open tree's) and rnea(q, 0, 0) (the robot at rest)
    held (a fixed base, or a contact down): each one's lam by inverse.constrained_rnea's minimiser
        (fast_minimisers.least_norm_sample), tau = tau_r - A^T lam, zero on the passive coordinates;
    in flight, or where no force balances the passive coordinates (a residual above balance_rtol of its scale:
        constrained_rnea raises there): pipeline.loops.closest_loop_forces' least squares
        (fast_minimisers.closest_sample), unbalanced where it leaves the passive coordinates unbalanced
    with has_tau, constrained_aba at (q, v, tau), tau = [0; effort] zero on the passive joints (Kim 67-69), on
        M = L^T L (constraints.fast.ltl: the tree's sparsity, and core.singular's rule for a singular M: SINGULAR,
        the readable path raises):
        a_r = M^-1 (tau - rnea(q, v, 0)),  Y = L^-T A^T,  (Y^T Y) lam_a = -(A a_r + c) least-norm
        (fast_minimisers.psd_solve, A M^-1 A^T = Y^T Y),  a = a_r + L^-1 (Y lam_a)
    each contact's force in lam against `up` as core.contact_forces splits it: normal, tangential (NaN for loops)

Anything the readable path would refuse, or give to its numpy minimisers (NaN, wrong lengths, a bad pose, no
passive coordinate, A or tau_r not finite), returns BAD_INPUT: the route then runs its readable path, which
answers or words the error. Models without mimic joints (one body per coordinate: the factor's sparsity).
"""
from __future__ import annotations

import math

import numpy as np

from ..fast.crba import mass_matrix_sample
from ..fast.kinematics import (
    BAD_INPUT,
    OK,
    SINGULAR,
    inputs_valid,
    model_arrays,
    reshaped,
    sizes,
    vectors_valid,
    workspace,
)
from ..fast.layout import COORD, PARENT, SCALE
from ..fast.rnea import rnea_sample
from ..fast.spatial import ijit, jit
from .fast import ROW, WORLD, ltl, put_frames, solve_l, solve_lt
from .fast_closures import CONTACT, closure_terms
from .fast_minimisers import (
    MIN_FORCE,
    MIN_TORQUE,
    all_finite,
    closest_sample,
    coordinates,
    least_norm_sample,
    psd_solve,
)

__all__ = ["PARAMS", "loop_sample_one", "loop_sample_size"]

# loop_sample_one's params, in this order: the rank rule of the minimisers (state.RANK_RTOL), the balance rule of
# constrained_rnea (inverse.BALANCE_RTOL), and the closest forces' weight, pinv cut and unbalanced rule
# (pipeline.loops.BALANCE_WEIGHT, PINV_RCOND, pipeline.contacts.UNBALANCED_RTOL)
PARAMS = ("rank_rtol", "balance_rtol", "weight", "rcond", "unbalanced_rtol")
RANK, BALANCE, WEIGHT, RCOND, UNBALANCED = range(5)


def loop_sample_size(nv: int, n: int, m: int, k: int) -> int:
    """Floats of loop_sample_one's output: tau_r of the motion (nv), tau_ff and tau_g (n), lam (m), a (nv),
    normal and tangential (k), unbalanced (1.0 or 0.0)."""
    return 2 * nv + 2 * n + m + 2 * k + 1


@ijit
def coordinate_parents(mi, nv, n):
    """Each coordinate's parent coordinate (-1 at the root; a floating base's six a chain before the joints), of a
    model with one body per coordinate (constraints.fast.FastConstraints' parent, from the packed model)."""
    nb = mi.shape[0] - 1
    base = nv - n
    parent = np.empty(nv, np.int64)
    for i in range(base):
        parent[i] = i - 1
    for j in range(nb):
        P = mi[j, PARENT]
        parent[base + mi[j, COORD]] = base - 1 if P < 0 else base + mi[P, COORD]
    return parent


@jit
def loop_sample_one(handle, ci, cb, cf, sc, q, v, a, q_ff, v_ff, effort, T, active, passive, w, mode, has_tau, params,
                    up, out):
    """The module's sample into out (loop_sample_size): ci, cb, cf, sc of fast_closures.ClosureArrays, active (k,)
    per constraint, passive (nv,) (inverse.passive_mask), w and mode as least_norm_forces_many takes them, effort
    (n,) the joints' forces of the forward dynamics (read with has_tau only; tau = 0 on the passive coordinates,
    the base's among them), params (PARAMS). Returns a status: BAD_INPUT or SINGULAR where the readable path
    answers (or raises) instead."""
    mf, mi = model_arrays(handle)
    nb, n, nv = sizes(mi)
    k, m = ci[0], ci[1]
    base = nv - n
    if not (inputs_valid(mi, q, T) and inputs_valid(mi, q_ff, T) and vectors_valid(mi, (v, a, v_ff))) \
            or (has_tau and not (effort.shape[0] == n and all_finite(effort))) or active.shape[0] != k \
            or cb.shape[0] != k or passive.shape[0] != nv or params.shape[0] != 5 or up.shape[0] != 3 \
            or out.shape[0] != 2 * nv + 2 * n + m + 2 * k + 1:
        return BAD_INPUT
    ip, ia = coordinates(passive)
    n_a = ia.shape[0]
    if ip.shape[0] == 0 or m == 0 or (mode == MIN_TORQUE and (n_a == 0 or w.shape[0] != n_a)) \
            or (mode == MIN_FORCE and w.shape[0] != m):  # the numpy minimiser's (least_norm_forces_many declines)
        return BAD_INPUT
    rows = np.empty(m, np.bool_)
    held = base == 0
    for j in range(k):
        o = 2 + nv + 4 * j
        stop = ci[o + 4 + ROW] if j + 1 < k else m
        for r in range(ci[o + ROW], stop):
            rows[r] = active[j]
        if cb[j] == CONTACT and active[j]:
            held = True
    ws = workspace(mf, mi)
    no_body, no_base = np.empty((0, nb, 6)), np.empty((0, 6))
    zero, target = np.zeros(nv), np.zeros(n)  # target: closest_loop_forces' (the route's torques closest to 0)
    A, tau_r, c, e = np.empty((2, m, nv)), np.empty((2, nv)), np.empty(m), np.empty(m)  # e: not used here
    frames = np.empty((k, 4, 4))
    # sample 0 the motion, sample 1 the robot at rest; A does not depend on v: the pass at (q, v) gives the rest's
    # A, the forward's c and (in sc) the bodies' poses of the frames
    closure_terms(mf, mi, ci, cb, cf, sc, q_ff, v_ff, T, active, A[0], c, e)
    closure_terms(mf, mi, ci, cb, cf, sc, q, v, T, active, A[1], c, e)
    put_frames(mi, ci, cf, sc, frames)
    rnea_sample(mf, mi, ws, q_ff, v_ff, a, T, no_body, no_base, np.int64(0), tau_r[0])
    rnea_sample(mf, mi, ws, q, zero, zero, T, no_body, no_base, np.int64(0), tau_r[1])
    if not (all_finite(A) and all_finite(tau_r)):
        return BAD_INPUT
    tau_free, lam = reshaped(out, 0, (nv,)), reshaped(out, nv + 2 * n, (m,))
    for i in range(nv):
        tau_free[i] = tau_r[0, i]
    forces, residual, scale = np.empty((2, m)), np.empty(2), np.empty(2)  # lam of the motion and of the rest
    least = not held
    if held:
        same = True  # q_ff is q (the usual case): one A, factored once for both
        for i in range(n):
            same = same and q_ff[i] == q[i]
        if same:
            least_norm_sample(A[1], tau_r, ip, ia, rows, w, mode, params[RANK], forces, residual, scale)
        else:
            for s in range(2):
                least_norm_sample(A[s], tau_r[s:s + 1], ip, ia, rows, w, mode, params[RANK], forces[s:s + 1],
                                  residual[s:s + 1], scale[s:s + 1])
        for s in range(2):
            if residual[s] > params[BALANCE] * scale[s]:  # constrained_rnea raises: least squares below
                least = True
    unbalanced = False
    for s in range(2):
        joints = reshaped(out, nv + s * n, (n,))
        if least:
            flag = closest_sample(tau_r[s], A[s], target, passive, rows, held, params[WEIGHT], params[RCOND],
                                  params[UNBALANCED], forces[s], joints)
            unbalanced = unbalanced or (flag and s == 0)
            continue
        for i in range(base, nv):  # tau_r - A^T lam, zero on the passive coordinates
            t = 0.0
            for r in range(m):
                t += A[s, r, i] * forces[s, r]
            joints[i - base] = 0.0 if passive[i] else tau_r[s, i] - t
    for r in range(m):
        lam[r] = forces[0, r]
    acc = reshaped(out, nv + 2 * n + m, (nv,))
    if has_tau:
        L = np.empty((nv, nv))
        mass_matrix_sample(mf, mi, ws, q, L)
        parent = coordinate_parents(mi, nv, n)
        if not ltl(L, parent, mf[nb, SCALE]):
            return SINGULAR
        rnea_sample(mf, mi, ws, q, v, zero, T, no_body, no_base, np.int64(0), acc)  # b = rnea(q, v, 0)
        for i in range(nv):
            acc[i] = (0.0 if passive[i] else effort[i - base]) - acc[i]
        solve_lt(L, parent, acc)
        solve_l(L, parent, acc)  # a_r = M^-1 (tau - b)
        Y = A[1].copy()
        for r in range(m):
            solve_lt(L, parent, Y[r])  # Y^T's rows: L^-T A_r^T
        K, rhs = np.empty((m, m)), np.empty(m)
        for r in range(m):
            for s in range(m):
                t = 0.0
                for i in range(nv):
                    t += Y[r, i] * Y[s, i]
                K[r, s] = t
            t = 0.0
            for i in range(nv):
                t += A[1, r, i] * acc[i]
            rhs[r] = t + c[r]
        if not (all_finite(K) and all_finite(rhs)):
            return BAD_INPUT
        lam_a = np.empty(m)
        psd_solve(K, rhs, params[RANK], lam_a)
        x = np.zeros(nv)
        for r in range(m):
            if rows[r]:  # an inactive constraint applies nothing
                for i in range(nv):
                    x[i] -= lam_a[r] * Y[r, i]
        solve_l(L, parent, x)
        for i in range(nv):
            acc[i] += x[i]
    else:
        for i in range(nv):
            acc[i] = np.nan
    at = 2 * nv + 2 * n + m
    for j in range(k):
        if cb[j] != CONTACT:
            out[at + j] = out[at + k + j] = np.nan
            continue
        o = 2 + nv + 4 * j
        stop = ci[o + 4 + ROW] if j + 1 < k else m  # the force: a flat contact's last rows
        f0, f1, f2 = lam[stop - 3], lam[stop - 2], lam[stop - 1]
        if ci[o + WORLD] == 0:  # in the contact's axes: turned into the world's
            R = frames[j]
            f0, f1, f2 = (R[0, 0] * f0 + R[0, 1] * f1 + R[0, 2] * f2, R[1, 0] * f0 + R[1, 1] * f1 + R[1, 2] * f2,
                          R[2, 0] * f0 + R[2, 1] * f1 + R[2, 2] * f2)
        fn = f0 * up[0] + f1 * up[1] + f2 * up[2]
        out[at + j] = fn
        out[at + k + j] = math.sqrt(max(f0 * f0 + f1 * f1 + f2 * f2 - fn * fn, 0.0))
    out[at + 2 * k] = 1.0 if unbalanced else 0.0
    return OK
