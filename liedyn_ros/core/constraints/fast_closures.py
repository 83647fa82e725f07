"""Compiled constraint terms of any constraint set: loop closures (weld, point) and contacts together, fixed or
floating base, mimic joints. The same rows as `jacobian.constraint_terms` (the readable reference):

    weld   A = J_a - Ad_{T_ab} J_b,            c = dV0_a - Ad_{T_ab} (dV0_b + ad_W V_b),   e = -log T_ab
    point  A = [0 1] J_a - R_ab [0 1] J_b,     c = dv0_a + w_a x v_a - R_ab (dv0_b + w_b x v_b),   e = -p_ab

with T_ab = T_a^-1 T_b and W = V_b - Ad_{T_ab^-1} V_a. Per sample, constraints.fast.contact_terms runs the
forward pass (Kim Table 2: world poses T_i, body twists V_i, dV0_i = Ad_{f_i^-1} dV0_lambda(i) + ad_{V_i} S_i qd_i,
world screws s_j = Ad_{T_j} S_j) and writes every constraint's frame-a side, as it does a contact's. A loop
closure then takes its frame-b side away (closure_rows). In world screws that side is, per column j supporting b,

    weld   Ad_{T_ab} J_b e_j = Ad_{T_ab} Ad_{T_b^-1} s_j = Ad_{T_a^-1} s_j     (s_j moved to a's origin, a's axes)
    point  R_ab [0 1] J_b e_j = R_a^T (v_j + w_j x p_b)                          (s_j's velocity at b's origin)

so both are constraints.fast.add_columns with the sign -1 (the joints supporting both bodies cancel exactly
in a weld). One kernel, constraint_terms_many, for a batch (the loops' route calls it with one or two samples).
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from ..fast.kinematics import BAD_INPUT, OK, inputs_valid, model_arrays, pose_of, reshaped, sizes, vectors_valid
from ..fast.spatial import bracket, ijit, jit, twist_to_child
from .fast import BODY, POINT, ROW, add_columns, constraint_ints, contact_terms, frame_in_world, frame_rows, \
    terms_blocks, terms_scratch_size

__all__ = ["CONTACT", "ClosureArrays", "closure_arrays", "closure_terms", "constraint_terms_many"]

CONTACT = -2  # body_b of a contact: the world
terms_scratch = ijit(terms_scratch_size)  # the Python rule itself, compiled (contact_terms' scratch size)


class ClosureArrays:
    """Kernel-ready arrays of any ConstraintSet (constraints.fast.FastConstraints' layout for frame a).

    ci: [k, m, nv unused entries, then per constraint body_a, point, world, first row]; cb (k,): body_b
    (CONTACT for a contact); cf (k, 24): frame a in its body (R row-major, p), then frame b.
    scratch: one sample's (the kernel holds the GIL).
    """

    def __init__(self, cs) -> None:
        model = cs.model
        self.ci = constraint_ints(cs, np.zeros(model.nv, dtype=np.int64))
        self.cb = np.ascontiguousarray(cs.body_b, dtype=np.int64)
        self.cf = np.ascontiguousarray(np.concatenate([frame_rows(cs.T_a), frame_rows(cs.T_b)], -1))
        self.scratch = np.empty(terms_scratch_size(model.nb) + 66)
        self.all_active = np.ones((1, cs.k), dtype=bool)


_ARRAYS: weakref.WeakKeyDictionary[object, ClosureArrays] = weakref.WeakKeyDictionary()


def closure_arrays(cs) -> ClosureArrays:
    """The ClosureArrays of a ConstraintSet, built once per set."""
    out = _ARRAYS.get(cs)
    if out is None:
        out = _ARRAYS[cs] = ClosureArrays(cs)
    return out


@ijit
def twist_to_parent(R, p, V, out):
    """out = Ad_f V = (R w, R v + p x R w) for f = (R, p): a twist in f's frame seen from its parent."""
    for r in range(3):
        out[r] = R[r, 0] * V[0] + R[r, 1] * V[1] + R[r, 2] * V[2]
        out[r + 3] = R[r, 0] * V[3] + R[r, 1] * V[4] + R[r, 2] * V[5]
    out[3] += p[1] * out[2] - p[2] * out[1]
    out[4] += p[2] * out[0] - p[0] * out[2]
    out[5] += p[0] * out[1] - p[1] * out[0]


@ijit
def exp_coefficients(t):
    """sin(t)/t and (1 - cos t)/t^2, with Taylor series near t = 0 (core.spatial._exp_coefficients)."""
    if t < 1e-4:
        t2 = t * t
        return 1.0 - t2 / 6.0 + t2 * t2 / 120.0, 0.5 - t2 / 24.0 + t2 * t2 / 720.0
    return math.sin(t) / t, (1.0 - math.cos(t)) / (t * t)


@ijit
def log_se3(R, p, out):
    """out = log T = (w, v) for T = (R, p), rotation angles in [0, pi] (core.spatial.log_se3):
    w = vee(R - R^T) / (2 sin t / t) (the axis of R + I near t = pi), v = A^-1 p with
    A^-1 = I - [w]/2 + d [w]^2, d = (1 - a / (2 b)) / t^2 (1/12 + t^2/720 near 0)."""
    cos_t = min(max((R[0, 0] + R[1, 1] + R[2, 2] - 1.0) / 2.0, -1.0), 1.0)
    theta = math.acos(cos_t)
    x, y, z = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]
    if theta > math.pi - 1e-6:  # sin t -> 0: the axis is the largest column of (R + I) / 2
        k = 0
        for i in range(1, 3):
            if R[i, i] > R[k, k]:
                k = i
        c0, c1, c2 = (R[0, k] + (k == 0)) / 2.0, (R[1, k] + (k == 1)) / 2.0, (R[2, k] + (k == 2)) / 2.0
        s = theta / math.sqrt(c0 * c0 + c1 * c1 + c2 * c2)
        if c0 * x + c1 * y + c2 * z < 0.0:
            s = -s
        w0, w1, w2 = c0 * s, c1 * s, c2 * s
    else:
        a = exp_coefficients(theta)[0]
        w0, w1, w2 = x / (2.0 * a), y / (2.0 * a), z / (2.0 * a)
    t = math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    a, b = exp_coefficients(t)
    d = 1.0 / 12.0 + t * t / 720.0 if t < 1e-4 else (1.0 - a / (2.0 * b)) / (t * t)
    u0, u1, u2 = w1 * p[2] - w2 * p[1], w2 * p[0] - w0 * p[2], w0 * p[1] - w1 * p[0]  # w x p
    out[0], out[1], out[2] = w0, w1, w2
    out[3] = p[0] - u0 / 2.0 + d * (w1 * u2 - w2 * u1)
    out[4] = p[1] - u1 / 2.0 + d * (w2 * u0 - w0 * u2)
    out[5] = p[2] - u2 / 2.0 + d * (w0 * u1 - w1 * u0)


@ijit
def closure_rows(mf, mi, ci, cb, cf, k, Rw, pw, V, dV0, sw, t, A, c, e):
    """Loop closure k's rows of A, c and e, given their frame-a side (contact_rows): the frame-b side taken
    away (the module's table); Rw, pw, V, dV0, sw: contact_terms' forward pass; t: scratch (66,)."""
    nb, n, nv = sizes(mi)
    o = 2 + nv + 4 * k
    body_a, body_b, point, r0 = ci[o + BODY], cb[k], ci[o + POINT] != 0, ci[o + ROW]
    Pa, Pb = body_a if body_a >= 0 else nb, body_b if body_b >= 0 else nb
    Ra, pa, Rb, pb = reshaped(t, 0, (3, 3)), t[9:12], reshaped(t, 12, (3, 3)), t[21:24]
    R_ab, p_ab = reshaped(t, 24, (3, 3)), t[33:36]
    Va, Vb, dVb, W, y = t[36:42], t[42:48], t[48:54], t[54:60], t[60:66]
    frame_in_world(Rw[Pa], pw[Pa], cf[k], Ra, pa)
    frame_in_world(Rw[Pb], pw[Pb], cf[k, 12:], Rb, pb)
    for r in range(3):  # T_ab = T_a^-1 T_b = (R_a^T R_b, R_a^T (p_b - p_a))
        p_ab[r] = Ra[0, r] * (pb[0] - pa[0]) + Ra[1, r] * (pb[1] - pa[1]) + Ra[2, r] * (pb[2] - pa[2])
        for col in range(3):
            R_ab[r, col] = Ra[0, r] * Rb[0, col] + Ra[1, r] * Rb[1, col] + Ra[2, r] * Rb[2, col]
    add_columns(mf, mi, body_b, Rw, pw, sw, Ra, pb if point else pa, point, False, -1.0, A, r0)
    Roff_b, poff_b = reshaped(cf[k], 12, (3, 3)), cf[k, 21:24]
    twist_to_child(Roff_b, poff_b, V[Pb], Vb)  # frame b's twist and acceleration at a = 0
    twist_to_child(Roff_b, poff_b, dV0[Pb], dVb)
    if point:  # R_ab (dv0_b + w_b x v_b): b's classical acceleration in a's axes
        x0 = dVb[3] + Vb[1] * Vb[5] - Vb[2] * Vb[4]
        x1 = dVb[4] + Vb[2] * Vb[3] - Vb[0] * Vb[5]
        x2 = dVb[5] + Vb[0] * Vb[4] - Vb[1] * Vb[3]
        for r in range(3):
            c[r0 + r] -= R_ab[r, 0] * x0 + R_ab[r, 1] * x1 + R_ab[r, 2] * x2
            e[r0 + r] = -p_ab[r]
        return
    twist_to_child(reshaped(cf[k], 0, (3, 3)), cf[k, 9:12], V[Pa], Va)  # frame a's twist
    twist_to_child(R_ab, p_ab, Va, W)  # Ad_{T_ab^-1} V_a
    for r in range(6):
        W[r] = Vb[r] - W[r]
    bracket(W, Vb, y)  # ad_W V_b
    for r in range(6):
        y[r] += dVb[r]
    twist_to_parent(R_ab, p_ab, y, W)  # Ad_{T_ab} (dV0_b + ad_W V_b)
    log_se3(R_ab, p_ab, y)
    for r in range(6):
        c[r0 + r] -= W[r]
        e[r0 + r] = -y[r]


@ijit
def closure_terms(mf, mi, ci, cb, cf, sc, q, v, T, on, A, c, e):
    """A (m, nv), c and e (m,) of every constraint at one sample (q, v, T), the constraints on where `on` (k,)
    (inactive rows zero); sc: ClosureArrays.scratch, whose first terms_scratch(nb) floats then hold
    contact_terms' forward pass (the bodies' world poses: constraints.fast.put_frames)."""
    nb = sizes(mi)[0]
    k, m = ci[0], ci[1]
    terms_sc = reshaped(sc, 0, (terms_scratch(nb),))
    t = reshaped(sc, terms_scratch(nb), (66,))
    _, _, Rw, pw, V, dV0, _, sw, _, _ = terms_blocks(terms_sc, nb)
    for r in range(m):
        e[r] = 0.0
    contact_terms(mf, mi, ci, cf, terms_sc, q, v, T, on, A, c)  # every constraint's frame a
    for j in range(k):
        if cb[j] != CONTACT and on[j]:
            closure_rows(mf, mi, ci, cb, cf, j, Rw, pw, V, dV0, sw, t, A, c, e)


@jit
def constraint_terms_many(handle, ci, cb, cf, sc, q, v, T, active, A, c, Av, e):
    """A (B, m, nv), c, A v and e (B, m) of every constraint of a set with loop closures, at q (B, n), v (B, nv),
    T and active (B or 1, ...) (inactive rows zero). Checks lengths, NaN and the pose: BAD_INPUT, and the
    reference words the error; sc: ClosureArrays.scratch."""
    mf, mi = model_arrays(handle)
    _, _, nv = sizes(mi)
    k, m = ci[0], ci[1]
    B = q.shape[0]
    if (v.shape[0] != B or T.shape[0] not in (1, B) or active.shape[0] not in (1, B) or active.shape[1] != k
            or A.shape[0] != B or A.shape[1] != m or A.shape[2] != nv or c.shape[0] != B or c.shape[1] != m
            or Av.shape[0] != B or Av.shape[1] != m or e.shape[0] != B or e.shape[1] != m or cb.shape[0] != k
            or cf.shape[0] != k or cf.shape[1] != 24):
        return BAD_INPUT
    for b in range(B):
        Tb, on = pose_of(T, b), active[b if active.shape[0] != 1 else 0]
        if not (inputs_valid(mi, q[b], Tb) and vectors_valid(mi, (v[b],))):
            return BAD_INPUT
        closure_terms(mf, mi, ci, cb, cf, sc, q[b], v[b], Tb, on, A[b], c[b], e[b])
        for r in range(m):
            s = 0.0
            for col in range(nv):
                s += A[b, r, col] * v[b, col]
            Av[b, r] = s
    return OK
