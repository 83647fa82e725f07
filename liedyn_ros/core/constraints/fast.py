"""Compiled constrained forward dynamics of contacts: Kim 3.2 on a tree-sparse factor of M.

Per sample, in one kernel:
    M (the composite-rigid-body kernel), b = rnea(q, v, 0) (Newton-Euler on the contact terms' forward pass),
    M = L^T L, L lower triangular with the tree's sparsity (Featherstone's LTL: eliminating the
        leaves first fills nothing in; row k holds entries only at k's ancestor coordinates),
    a_r = L^-1 L^-T (tau - b),  Y = L^-T A^T,  K = A M^-1 A^T = Y^T Y,
    K lam = -(A a_r + c + kd A v),  a = a_r + L^-1 (Y lam)                       (Kim 67-69)
L^-T and L^-1 touch only ancestors, so each of the m unit solves costs the depth of its
contact, as Kim's articulated-body unit solves do. Rows of A and c as in `jacobian`, built from
world screws s_j = Ad_{T_j} S_j: a frame a at (R_a, p_a) on body i has, per column j supporting
i, the twist (w, v + w x p_a) of s_j = (w, v) at p_a, turned by R_a^T for local axes.
Contacts only, models without mimic joints; anything else, a rank-deficient K (least-norm lam
needs the pseudo-inverse) or a state off the constraints goes to the reference in numpy.
"""
from __future__ import annotations

import math

import numpy as np

from ..fast.crba import mass_matrix_sample
from ..fast.kinematics import BAD_INPUT, OK, SINGULAR, block, body_velocities, borrowed, inputs_valid, \
    joint_transforms, model_arrays, parent_row, pose_of, reshaped, screw, sizes, vectors_valid, workspace
from ..fast.layout import COORD, GRAVITY, MULT, SCALE
from ..fast.rnea import generalized_forces, newton_euler, rnea_sample
from ..fast.spatial import all_finite, bjit, cho_solve, cholesky, gravity_in_base, ijit, jit, lower_solve, \
    pivot_ok, twist_to_child, upper_solve
from ..model import Model

__all__ = ["FastConstraints", "constrained_aba_one", "constrained_rnea_one", "constrained_terms_one",
           "contact_fit_many", "contact_kinematics_many", "contact_terms_many", "fit_size", "terms_size", "VIOLATED"]

VIOLATED = 3  # |A v| above tol: the reference words the error
# A pivot of K below this fraction of its diagonal entry: K is (numerically) singular.
PIVOT_RTOL = 1e-10
BODY, POINT, WORLD, ROW = 0, 1, 2, 3  # columns of the per-constraint int block


class FastConstraints:
    """Kernel-ready arrays of a contact-only ConstraintSet of a model without mimic joints.

    ci: [k, m, parent coordinate of each of the nv coordinates (-1 at the root), then per contact
    body, point, world, first row]; cf (k, 12): the contact frame in its body, R row-major and p; m as an int.
    scratch: the single-sample scratch (the kernels hold the GIL on that path).
    """

    def __init__(self, cs) -> None:
        model: Model = cs.model
        nv, base = model.nv, model.nv - model.n
        parent = np.empty(nv, dtype=np.int64)
        parent[:base] = np.arange(base) - 1
        coord_parent = np.array([base - 1 if p < 0 else base + p for p in model.parent], dtype=np.int64)
        parent[base:] = coord_parent
        self.ci = constraint_ints(cs, parent)
        self.cf = frame_rows(cs.T_a)
        self.m = cs.m
        self.scratch_size = scratch_size(model.nb, nv, cs.m)
        self.terms_scratch_size = terms_scratch_size(model.nb)
        self.scratch = np.empty(self.scratch_size)
        self.all_active = np.ones(cs.k, dtype=bool)
        self.ones = np.ones(max(nv, cs.m))  # unit weights (the kernels read the first n_a or m)
        self.base_passive = np.arange(nv) < base  # a floating base's six coordinates

    @staticmethod
    def supports(cs) -> bool:
        return bool(cs.is_contact.all()) and not cs.model.has_mimic


def constraint_ints(cs, parent: np.ndarray) -> np.ndarray:
    """ci: [k, m, parent (nv,), then per constraint body (of frame a), point, world, first row]."""
    per = np.stack([cs.body_a, cs.point.astype(np.int64), cs.world.astype(np.int64), cs.rows[:-1]], -1)
    return np.concatenate([[cs.k, cs.m], parent, per.reshape(-1)]).astype(np.int64)


def frame_rows(T: np.ndarray) -> np.ndarray:
    """Poses (k, 4, 4) as the kernels' rows (k, 12): R row-major, then p."""
    return np.concatenate([T[:, :3, :3].reshape(-1, 9), T[:, :3, 3]], -1).copy()


def scratch_size(nb: int, nv: int, m: int) -> int:
    """Floats of sample_blocks: L, S, 3 vectors, A, Y, Z, K, H, 2 m-vectors, followed by contact_terms' (8
    per-body blocks, h, f)."""
    return 2 * nv * nv + 3 * nv + 3 * m * nv + 2 * m * m + 2 * m + terms_scratch_size(nb)


def terms_scratch_size(nb: int) -> int:
    return 48 * (nb + 1) + 24


@ijit
def sample_blocks(sc, nv, m, n_p):
    """The single-sample scratch (scratch_size): L (nv, nv), S (n_p, n_p) in an (nv, nv) block, vecs (3, nv),
    A, Y (m, nv), Z (nv, m), K, H (m, m), mvecs (2, m), and after them contact_terms' scratch."""
    L, o = block(sc, 0, nv, nv)
    S, o = block(sc, o, n_p, n_p)
    vecs, o = block(sc, o + nv * nv - n_p * n_p, 3, nv)
    A, o = block(sc, o, m, nv)
    Y, o = block(sc, o, m, nv)
    Z, o = block(sc, o, nv, m)
    K, o = block(sc, o, m, m)
    H, o = block(sc, o, m, m)
    mvecs, o = block(sc, o, 2, m)
    return L, S, vecs, A, Y, Z, K, H, mvecs, reshaped(sc, o, (sc.shape[0] - o,))


@ijit
def ltl(H, parent, scale):
    """H <- L with H = L^T L, lower triangle, tree sparsity (Featherstone); False when a pivot fails
    core.singular's rule (from the leaves, the pivots are the articulated-body algorithm's: aba refuses too)."""
    for k in range(H.shape[0] - 1, -1, -1):
        if not pivot_ok(H[k, k], scale):
            return False
        d = math.sqrt(H[k, k])
        H[k, k] = d
        i = parent[k]
        while i >= 0:
            H[k, i] /= d
            i = parent[i]
        i = parent[k]
        while i >= 0:
            j = i
            while j >= 0:
                H[i, j] -= H[k, i] * H[k, j]
                j = parent[j]
            i = parent[i]
    return True


@ijit
def solve_lt(L, parent, x):
    """x <- L^-T x (a zero entry passes nothing to its ancestors: a contact's row costs its depth)."""
    for i in range(x.shape[0] - 1, -1, -1):
        if x[i] == 0.0:
            continue
        xi = x[i] / L[i, i]
        x[i] = xi
        j = parent[i]
        while j >= 0:
            x[j] -= L[i, j] * xi
            j = parent[j]


@ijit
def solve_l(L, parent, x):
    """x <- L^-1 x."""
    for i in range(x.shape[0]):
        j = parent[i]
        while j >= 0:
            x[i] -= L[i, j] * x[j]
            j = parent[j]
        x[i] /= L[i, i]


@ijit
def world_kinematics(mf, mi, q, v, T, R, p, Rw, pw, V, eta, dV0, sw):
    """Joint transforms, world poses (Rw, pw; row nb the base), body twists V, their accelerations at
    a = 0 without gravity dV0 (row nb zero) and world screws sw of every body."""
    nb, n, nv = sizes(mi)
    joint_transforms(mf, mi, q, R, p)
    for r in range(3):
        for c in range(3):
            Rw[nb, r, c] = T[r, c]
        pw[nb, r] = T[r, 3]
    for r in range(6):
        V[nb, r] = v[r] if nv > n else 0.0
        dV0[nb, r] = 0.0
    body_velocities(mf, mi, R, p, v, V, eta)
    for i in range(nb):
        P = parent_row(mi, i)
        twist_to_child(R[i], p[i], dV0[P], dV0[i])
        for r in range(6):
            dV0[i, r] += eta[i, r]
        for r in range(3):
            s = pw[P, r]
            for c in range(3):
                s += Rw[P, r, c] * p[i, c]
                t = 0.0
                for k in range(3):
                    t += Rw[P, r, k] * R[i, k, c]
                Rw[i, r, c] = t
            pw[i, r] = s
        S = screw(mf, i)
        for r in range(3):
            sw[i, r] = Rw[i, r, 0] * S[0] + Rw[i, r, 1] * S[1] + Rw[i, r, 2] * S[2]
            sw[i, 3 + r] = Rw[i, r, 0] * S[3] + Rw[i, r, 1] * S[4] + Rw[i, r, 2] * S[5]
        w0, w1, w2 = sw[i, 0], sw[i, 1], sw[i, 2]
        sw[i, 3] += pw[i, 1] * w2 - pw[i, 2] * w1
        sw[i, 4] += pw[i, 2] * w0 - pw[i, 0] * w2
        sw[i, 5] += pw[i, 0] * w1 - pw[i, 1] * w0


@ijit
def add_column(Ra, pa, point, world, w0, w1, w2, v0, v1, v2, A, r0, col):
    """Rows r0.. of column col += the twist (w, v) moved to the point pa, in the world's or a's axes
    (added: a coordinate driving several bodies (mimic joints) sums their columns)."""
    u0 = v0 + w1 * pa[2] - w2 * pa[1]
    u1 = v1 + w2 * pa[0] - w0 * pa[2]
    u2 = v2 + w0 * pa[1] - w1 * pa[0]
    lin = r0 if point else r0 + 3
    if world:
        A[lin, col] += u0
        A[lin + 1, col] += u1
        A[lin + 2, col] += u2
        if not point:
            A[r0, col] += w0
            A[r0 + 1, col] += w1
            A[r0 + 2, col] += w2
        return
    for r in range(3):
        A[lin + r, col] += Ra[0, r] * u0 + Ra[1, r] * u1 + Ra[2, r] * u2
        if not point:
            A[r0 + r, col] += Ra[0, r] * w0 + Ra[1, r] * w1 + Ra[2, r] * w2


@ijit
def add_columns(mf, mi, body, Rw, pw, sw, Ra, pa, point, world, sign, A, r0):
    """Rows r0.. of A += sign Ad_{T_a^-1} [Ad_{T_0} | s_j P for the joints j supporting body] moved to the
    point pa (a's origin, or another point for a point loop's far side) in the world's or a's axes (Ra):
    the base's columns (floating only), then those of body's ancestors (world screws sw, mimic multipliers)."""
    nb, n, nv = sizes(mi)
    base = nv - n
    for col in range(base):  # the base twist e_col, in the world: Ad_{T_0} e_col
        if col < 3:
            w0, w1, w2 = sign * Rw[nb, 0, col], sign * Rw[nb, 1, col], sign * Rw[nb, 2, col]
            add_column(Ra, pa, point, world, w0, w1, w2, pw[nb, 1] * w2 - pw[nb, 2] * w1,
                       pw[nb, 2] * w0 - pw[nb, 0] * w2, pw[nb, 0] * w1 - pw[nb, 1] * w0, A, r0, col)
        else:
            add_column(Ra, pa, point, world, 0.0, 0.0, 0.0, sign * Rw[nb, 0, col - 3], sign * Rw[nb, 1, col - 3],
                       sign * Rw[nb, 2, col - 3], A, r0, col)
    j = body
    while j >= 0:
        m = sign * mf[j, MULT]
        add_column(Ra, pa, point, world, m * sw[j, 0], m * sw[j, 1], m * sw[j, 2], m * sw[j, 3], m * sw[j, 4],
                   m * sw[j, 5], A, r0, base + mi[j, COORD])
        j = mi[j, 0]


@ijit
def frame_in_world(RP, pP, cfk, Ra, pa):
    """Ra, pa <- the world pose of a contact frame (cfk: R row-major, p in its body) on a body at (RP, pP)."""
    for r in range(3):
        s = pP[r]
        for cc in range(3):
            s += RP[r, cc] * cfk[9 + cc]
            t = 0.0
            for j in range(3):
                t += RP[r, j] * cfk[3 * j + cc]
            Ra[r, cc] = t
        pa[r] = s


@ijit
def contact_rows(mf, mi, ci, cf, k, Rw, pw, V, dV0, sw, Ra, pa, h, A, c):
    """A's rows and c's entries of contact k (frame a at (Ra, pa), scratch h (2, 6)): J_a and dV0_a, or their
    point rows [0 1] J_a and dv0_a + w_a x v_a (jacobian's table), in a's or the world's axes. Also the frame-a
    side of a loop closure (fast_closures.closure_rows then takes frame b's away)."""
    nb, n, nv = sizes(mi)
    o = 2 + nv + 4 * k
    body, point, world, r0 = ci[o + BODY], ci[o + POINT] != 0, ci[o + WORLD] != 0, ci[o + ROW]
    P = body if body >= 0 else nb
    Roff, poff = reshaped(cf[k], 0, (3, 3)), cf[k, 9:12]
    frame_in_world(Rw[P], pw[P], cf[k], Ra, pa)
    rows = 3 if point else 6
    for r in range(r0, r0 + rows):
        for col in range(nv):
            A[r, col] = 0.0
    add_columns(mf, mi, body, Rw, pw, sw, Ra, pa, point, world, 1.0, A, r0)
    Vf, dVf = h[0], h[1]
    twist_to_child(Roff, poff, V[P], Vf)
    twist_to_child(Roff, poff, dV0[P], dVf)
    if point:  # classical acceleration of the point: dv + w x v
        dVf[3] += Vf[1] * Vf[5] - Vf[2] * Vf[4]
        dVf[4] += Vf[2] * Vf[3] - Vf[0] * Vf[5]
        dVf[5] += Vf[0] * Vf[4] - Vf[1] * Vf[3]
    for blk in range(0 if not point else 1, 2):
        lo = 3 * blk
        out = r0 + (0 if point else lo)
        for r in range(3):
            if world:
                c[out + r] = Ra[r, 0] * dVf[lo] + Ra[r, 1] * dVf[lo + 1] + Ra[r, 2] * dVf[lo + 2]
            else:
                c[out + r] = dVf[lo + r]


@ijit
def off_constraints(A, v, tol):
    """max |A v| (0 without computing it when tol is infinite: every state is accepted)."""
    worst = 0.0
    if tol < np.inf:
        for r in range(A.shape[0]):
            worst = max(worst, abs(dot(A[r], v)))
    return worst


@ijit
def dot_span(x, y, start, stop):
    """sum x[i] y[i] over start <= i < stop (zero for an empty span)."""
    s = 0.0
    for i in range(start, stop):
        s += x[i] * y[i]
    return s


@ijit
def dot(x, y):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    return s


@ijit
def terms_blocks(sc, nb):
    """contact_terms' scratch (terms_scratch_size(nb)) as views: the joint transforms R (nb, 3, 3), p (nb, 3),
    the world poses Rw (nb + 1, 3, 3), pw (nb + 1, 3) (row nb: the base), the twists V and accelerations at
    a = 0 dV0 (nb + 1, 6), eta and the world screws sw (nb, 6), h (2, 6), f (12,)."""
    R = reshaped(sc, 0, (nb, 3, 3))
    p, o = block(sc, 9 * nb, nb, 3)
    Rw = reshaped(sc, o, (nb + 1, 3, 3))
    pw, o = block(sc, o + 9 * (nb + 1), nb + 1, 3)
    V, o = block(sc, o, nb + 1, 6)
    dV0, o = block(sc, o, nb + 1, 6)
    eta, o = block(sc, o, nb, 6)
    sw, o = block(sc, o, nb, 6)
    h, o = block(sc, o, 2, 6)
    return R, p, Rw, pw, V, dV0, eta, sw, h, reshaped(sc, o, (12,))


@jit
def contact_terms(mf, mi, ci, cf, sc, q, v, T, active, A, c):
    """A (m, nv) and c (m,) of the contacts at one sample (inactive rows zero); sc: scratch.

    Called, not inlined: the forward kernel and the batch kernel of the terms share one compilation.
    """
    nb, n, nv = sizes(mi)
    k = ci[0]
    R, p, Rw, pw, V, dV0, eta, sw, h, f = terms_blocks(sc, nb)
    Ra, pa = reshaped(f, 0, (3, 3)), f[9:12]
    world_kinematics(mf, mi, q, v, T, R, p, Rw, pw, V, eta, dV0, sw)
    for j in range(k):
        o = 2 + nv + 4 * j
        r0, rows = ci[o + ROW], 3 if ci[o + POINT] != 0 else 6
        if active[j]:
            contact_rows(mf, mi, ci, cf, j, Rw, pw, V, dV0, sw, Ra, pa, h, A, c)
            continue
        for r in range(r0, r0 + rows):
            for col in range(nv):
                A[r, col] = 0.0
            c[r] = 0.0


@jit
def contact_kinematics_many(handle, ci, cf, sc, q, T, frames, A):
    """World poses of the contact frames, frames (B, k, 4, 4), and the Jacobian of every contact, A (B, m, nv),
    of q (B, n) and T (B or 1, 4, 4); either output may hold no sample (not wanted: not computed)."""
    mf, mi = model_arrays(handle)
    _, n, nv = sizes(mi)
    k, m = ci[0], ci[1]
    B = q.shape[0]
    if frames.shape[0] not in (0, B) or frames.shape[1] != k or A.shape[0] not in (0, B) or A.shape[1] != m \
            or A.shape[2] != nv or T.shape[0] not in (1, B):
        return BAD_INPUT
    scratch_A, o = block(sc, 0, m, nv)
    c, o = block(sc, o, 1, m)
    terms_sc = reshaped(sc, o, (sc.shape[0] - o,))
    rows = A.shape[0] != 0
    zero, on = np.zeros(nv), np.full(k, rows)  # no rows wanted: contact_terms leaves them (the world poses only)
    for b in range(B):
        Tb = pose_of(T, b)
        if not inputs_valid(mi, q[b], Tb):
            return BAD_INPUT
        if rows:
            contact_terms(mf, mi, ci, cf, terms_sc, q[b], zero, Tb, on, A[b], c[0])
        else:
            contact_terms(mf, mi, ci, cf, terms_sc, q[b], zero, Tb, on, scratch_A, c[0])
        if frames.shape[0] != 0:
            put_frames(mi, ci, cf, terms_sc, frames[b])
    return OK


@ijit
def put_frames(mi, ci, cf, terms_sc, frames):
    """frames (k, 4, 4) <- the world poses of the contact frames, from the world poses of the bodies that
    contact_terms left in its scratch terms_sc."""
    nb, n, nv = sizes(mi)
    Rw, pw = terms_blocks(terms_sc, nb)[2:4]
    for j in range(ci[0]):
        body = ci[2 + nv + 4 * j + BODY]
        P = body if body >= 0 else nb
        frame_in_world(Rw[P], pw[P], cf[j], frames[j, :3, :3], frames[j, :3, 3])
        for r in range(3):
            frames[j, 3, r] = 0.0
        frames[j, 3, 3] = 1.0


@bjit
def contact_terms_many(mf, mi, ci, cf, sc_size, q, v, T, active, A, c, start, stop):
    """contact_terms over samples start..stop: q (B, n), v (B, nv), T and active (B or 1, ...)."""
    sc = np.empty(sc_size)
    for b in range(start, stop):
        contact_terms(mf, mi, ci, cf, sc, q[b], v[b], pose_of(T, b), active[b if active.shape[0] != 1 else 0],
                      A[b], c[b])
    return OK


# forward_factor, forward_solve, inverse_factor and inverse_solve are called, not inlined (as contact_terms):
# the kernels of constrained aba, rnea and terms share one compilation of each, where inlined copies (inverse_solve
# twice in constrained_terms_sample) made numba compile them once per call site; a call costs nanoseconds.
@jit
def forward_factor(parent, A, L, Y, K, scale):
    """L <- the factor of M = L^T L (L holds M on entry), Y = L^-T A^T (nv, m) in Y's block and
    K = Y^T Y = A M^-1 A^T factored. False when M (by core.singular's rule, `scale` its inertia_scale) or
    K is singular (K's inactive rows get a unit pivot: their lam is zero).

    Y is solved for all m columns at once and K summed as rank-1 updates over Y's rows, each over the span
    of a row's nonzero entries (a coordinate with no contact below it has none): the inner loops run over
    independent entries, without the chain of dependent additions of column-at-a-time solves and dot
    products. Each entry gets the operations of those, in their order; the zeros skipped add nothing.
    """
    m, nv = A.shape[0], A.shape[1]
    if not ltl(L, parent, scale):
        return False
    span = np.empty(2 * nv, dtype=np.int64)  # each row of Y's nonzero entries, Y[i, span[i]:span[nv + i]]
    Y = reshaped(Y, 0, (nv, m))
    for i in range(nv):
        for r in range(m):
            Y[i, r] = A[r, i]
    for i in range(nv - 1, -1, -1):  # L^T Y = A^T from the leaves: row i final, passed to its ancestors
        lo, hi = nonzero_span(Y[i])
        span[i], span[nv + i] = lo, hi
        if lo == hi:  # no contact below coordinate i: nothing to solve or pass on
            continue
        d = L[i, i]
        for r in range(lo, hi):
            Y[i, r] /= d
        j = parent[i]
        while j >= 0:
            lij = L[i, j]
            for r in range(lo, hi):
                Y[j, r] -= lij * Y[i, r]
            j = parent[j]
    for r in range(m):
        for s in range(r + 1):
            K[r, s] = 0.0
    for i in range(nv):
        lo, hi = span[i], span[nv + i]
        for r in range(lo, hi):
            y = Y[i, r]
            for s in range(lo, r + 1):
                K[r, s] += y * Y[i, s]
    for r in range(m):
        if K[r, r] == 0.0:  # an inactive row: lam_r = 0
            K[r, r] = 1.0
    return cholesky(K, PIVOT_RTOL)


@ijit
def nonzero_span(x):
    """(lo, hi): x[lo:hi] holds every nonzero entry of x ((0, 0) when there is none)."""
    lo, hi = 0, 0
    for r in range(x.shape[0]):
        if x[r] != 0.0:
            if hi == 0:
                lo = r
            hi = r + 1
    return lo, hi


@jit
def forward_solve(parent, L, A, Y, K, bias, a, x, lam):
    """Kim 67-69 on forward_factor's factors (Y (nv, m) in Y's block): a holds tau - b on entry and the
    constrained a on exit; bias = c (+ kd A v), lam <- -K^-1 (A a_r + bias); x: scratch (nv,)."""
    m, nv = A.shape[0], A.shape[1]
    Y = reshaped(Y, 0, (nv, m))
    solve_lt(L, parent, a)
    solve_l(L, parent, a)  # a_r = M^-1 (tau - b)
    for r in range(m):
        lam[r] = -(dot(A[r], a) + bias[r])
    cho_solve(K, lam)
    for i in range(nv):
        s = 0.0
        for r in range(m):
            s += Y[i, r] * lam[r]
        x[i] = s
    solve_l(L, parent, x)
    for i in range(nv):
        a[i] += x[i]


@jit
def constrained_aba_sample(mf, mi, ws, ci, cf, sc, q, v, tau, T, active, params, a, lam):
    """(a, lam) of one sample into a (nv,) and lam (m,); params = (kp, kd, tol). Returns a status."""
    mf, mi, ci, cf, sc = borrowed(mf), borrowed(mi), borrowed(ci), borrowed(cf), borrowed(sc)
    q, v, tau, T, a, lam = borrowed(q), borrowed(v), borrowed(tau), borrowed(T), borrowed(a), borrowed(lam)
    nb, n, nv = sizes(mi)
    m = ci[1]
    parent = ci[2:2 + nv]
    L, _, vecs, A, Y, _, K, _, mvecs, terms_sc = sample_blocks(sc, nv, m, 0)
    b, x = vecs[0], vecs[1]
    c, bias = mvecs[0], mvecs[1]
    contact_terms(mf, mi, ci, cf, terms_sc, q, v, T, active, A, c)
    kd, tol = params[1], params[2]
    for r in range(m):
        Av = dot(A[r], v)
        if not abs(Av) <= tol:
            return VIOLATED
        bias[r] = c[r] + kd * Av
    mass_matrix_sample(mf, mi, ws, q, L)
    if not forward_factor(parent, A, L, Y, K, mf[nb, SCALE]):
        return SINGULAR
    bias_forces(mf, mi, ws, terms_sc, b)
    for i in range(nv):
        a[i] = tau[i] - b[i]
    forward_solve(parent, L, A, Y, K, bias, a, x, lam)
    return OK


@ijit
def bias_forces(mf, mi, ws, terms_sc, b):
    """b = rnea(q, v, 0) into b (nv,) from contact_terms' forward pass (in terms_sc), without a pass of its own.

    rnea's dV_i at a = 0 is dV0_i plus the base's gravity acceleration (0, -R^T g) carried to body i,
    (0, -Rw_i^T g) for body i's world rotation Rw_i; then F_i = J_i dV_i - ad*_{V_i} J_i V_i and rnea's
    backward pass. ws: the model's workspace ((nb + 1) 6 + 18 floats).
    """
    nb = mi.shape[0] - 1
    R, p, Rw, _, V, dV0 = terms_blocks(terms_sc, nb)[:6]
    F, o = block(ws, 0, nb + 1, 6)
    h, o = block(ws, o, 3, 6)
    dV = h[2]
    g0, g1, g2 = mf[nb, GRAVITY], mf[nb, GRAVITY + 1], mf[nb, GRAVITY + 2]
    for i in range(nb + 1):
        for r in range(3):
            dV[r] = dV0[i, r]
            dV[3 + r] = dV0[i, 3 + r] - (Rw[i, 0, r] * g0 + Rw[i, 1, r] * g1 + Rw[i, 2, r] * g2)
        newton_euler(mf, i, V[i], dV, h[0], F[i])
    generalized_forces(mf, mi, R, p, F, b)


@jit
def constrained_aba_one(handle, ci, cf, sc, q, v, tau, T, active, params, a, lam):
    """One sample: checks lengths, NaN and the pose, then constrained_aba_sample."""
    mf, mi = model_arrays(handle)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, tau))) or active.shape[0] != ci[0]:
        return BAD_INPUT
    return constrained_aba_sample(mf, mi, workspace(mf, mi), ci, cf, sc, q, v, tau, T, active, params, a, lam)


@jit  # called, not inlined: see forward_factor
def inverse_factor(ci, A, active, passive, w, min_force, S, Z, H, C, least_squares):
    """The factors of Kim 3.1's minimisers for G = A_p^T (passive columns of A), weights w, and how S is
    solved: (0, _) singular, (1, _) by its Cholesky factor, (2, V) by its pseudo-inverse S^+ = V diag(1/s) V^T
    (S <- diag(s); only with least_squares: no force balances every passive coordinate, G lam = tau_pr is
    then met in the least-squares sense, and among those lam the minimiser is taken).

      min_force:  S = G W^-1 G^T
      min_torque: H = A_a W A_a^T = L L^T (H <- L), Z = L^-1 G^T (m, n_p), S = Z^T Z = G H^-1 G^T
    S is (n_p, n_p) at the start of its block, n_p the number of passive coordinates. C: scratch (m nv,)
    for A_a W^1/2 (m, n_a) and G (n_p, m), compact: the products run over contiguous rows.
    """
    m, nv = A.shape[0], A.shape[1]
    n_p = passive_count(passive)
    n_a = nv - n_p
    Aw, G = reshaped(C, 0, (m, n_a)), reshaped(C, m * n_a, (n_p, m))
    span = np.empty((m, 2), dtype=np.int64)  # where Aw's row r is nonzero: a foot moves its own leg only
    for r in range(m):
        ja, ip = 0, 0
        span[r, 0], span[r, 1] = n_a, 0
        for j in range(nv):
            if passive[j]:
                G[ip, r] = A[r, j]
                ip += 1
            else:
                Aw[r, ja] = math.sqrt(w[ja]) * A[r, j]
                if Aw[r, ja] != 0.0:
                    span[r, 0], span[r, 1] = min(span[r, 0], ja), ja + 1
                ja += 1
    if min_force:
        for ip in range(n_p):
            for kp in range(ip + 1):
                t = 0.0
                for r in range(m):
                    t += G[ip, r] * G[kp, r] / w[r]
                S[ip, kp] = t
        return schur_factor(S, least_squares)
    for r in range(m):
        for s in range(r + 1):
            H[r, s] = dot_span(Aw[r], Aw[s], max(span[r, 0], span[s, 0]), min(span[r, 1], span[s, 1]))
        if H[r, r] == 0.0 and not active[row_constraint(ci, r)]:  # an inactive row: lam_r = 0
            H[r, r] = 1.0
    if not cholesky(H, PIVOT_RTOL):
        return 0, np.empty((0, 0))
    Zm = reshaped(Z, 0, (m, n_p))
    for r in range(m):  # L Z = G^T, all n_p columns at once
        for ip in range(n_p):
            Zm[r, ip] = G[ip, r]
        for k in range(r):
            h = H[r, k]
            for ip in range(n_p):
                Zm[r, ip] -= h * Zm[k, ip]
        d = H[r, r]
        for ip in range(n_p):
            Zm[r, ip] /= d
    for ip in range(n_p):
        for kp in range(ip + 1):
            t = 0.0
            for r in range(m):
                t += Zm[r, ip] * Zm[r, kp]
            S[ip, kp] = t
    return schur_factor(S, least_squares)


@ijit
def schur_factor(S, least_squares):
    """S (lower triangle) by Cholesky: (1, _); singular, and least_squares: its eigen-decomposition (2, V)."""
    n = S.shape[0]
    diagonal = np.empty(n)
    for r in range(n):  # keep the upper triangle and the diagonal: the Cholesky factor overwrites the rest
        diagonal[r] = S[r, r]
        for c in range(r):
            S[c, r] = S[r, c]
    if cholesky(S, PIVOT_RTOL):
        return 1, np.empty((0, 0))
    if not least_squares:
        return 0, np.empty((0, 0))
    for r in range(n):
        S[r, r] = diagonal[r]
        for c in range(r):
            S[r, c] = S[c, r]
    V = np.empty((n, n))
    symmetric_eigen(S, V)
    return 2, V


@ijit
def symmetric_eigen(S, V):
    """S <- diag(s), V <- orthonormal with S_in = V diag(s) V^T: cyclic Jacobi rotations, each zeroing S[p, q]."""
    n = S.shape[0]
    for r in range(n):
        for c in range(n):
            V[r, c] = 1.0 if r == c else 0.0
    for _ in range(64):
        off, size = 0.0, 0.0
        for r in range(n):
            size += S[r, r] * S[r, r]
            for c in range(r):
                off += S[r, c] * S[r, c]
        if off <= 1e-32 * size:
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                if S[p, q] == 0.0:
                    continue
                theta = (S[q, q] - S[p, p]) / (2.0 * S[p, q])
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                if theta < 0.0:
                    t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                sn = t * c
                for k in range(n):  # S J, then J^T (S J), and V J: J the rotation by (c, sn) in (p, q)
                    skp, skq = S[k, p], S[k, q]
                    S[k, p], S[k, q] = c * skp - sn * skq, sn * skp + c * skq
                for k in range(n):
                    spk, sqk = S[p, k], S[q, k]
                    S[p, k], S[q, k] = c * spk - sn * sqk, sn * spk + c * sqk
                for k in range(n):
                    vkp, vkq = V[k, p], V[k, q]
                    V[k, p], V[k, q] = c * vkp - sn * vkq, sn * vkp + c * vkq


@ijit
def schur_solve(S, mode, V, x):
    """x <- S^-1 x (mode 1: Cholesky) or S^+ x (mode 2: eigen-decomposition, directions with an eigenvalue
    below PIVOT_RTOL of the largest dropped)."""
    if mode == 1:
        cho_solve(S, x)
        return
    n = x.shape[0]
    top = 0.0
    for i in range(n):
        top = max(top, S[i, i])
    y = np.empty(n)
    for i in range(n):
        t = 0.0
        if S[i, i] > PIVOT_RTOL * top:
            for r in range(n):
                t += V[r, i] * x[r]
            t /= S[i, i]
        y[i] = t
    for r in range(n):
        t = 0.0
        for i in range(n):
            t += V[r, i] * y[i]
        x[r] = t


@jit
def inverse_solve(A, passive, w, min_force, S, Z, H, mode, V, tau, g, mu, lam):
    """Kim 3.1 on inverse_factor's factors (mode, V): tau holds tau_r = rnea(q, v, a) on entry and
    tau_r - A^T lam (zero on the passive coordinates) on exit; g (m,), mu (nv,): scratch. Returns how far
    lam is from balancing the passive coordinates, |A_p^T lam - tau_pr|_inf / max(1, |tau_pr|_inf).

      min_force:  lam = W^-1 G^T S^-1 tau_pr
      min_torque: y = L^-1 A_a W tau_ar,  S mu = Z^T y - tau_pr,  lam = L^-T (y - Z mu)
        (the KKT system's Schur complement: lam = H^-1 (A_a W tau_ar - G^T mu))
    """
    m, nv = A.shape[0], A.shape[1]
    n_p = 0
    for i in range(nv):
        if passive[i]:
            mu[n_p] = tau[i]
            n_p += 1
    if min_force:
        schur_solve(S, mode, V, mu[:n_p])
        for r in range(m):
            t, ip = 0.0, 0
            for i in range(nv):
                if passive[i]:
                    t += A[r, i] * mu[ip]
                    ip += 1
            lam[r] = t / w[r]
    else:
        Zm = reshaped(Z, 0, (m, n_p))
        for r in range(m):
            t, ja = 0.0, 0
            for j in range(nv):
                if not passive[j]:
                    t += w[ja] * A[r, j] * tau[j]
                    ja += 1
            g[r] = t
        lower_solve(H, g)
        for ip in range(n_p):
            t = -mu[ip]
            for r in range(m):
                t += Zm[r, ip] * g[r]
            mu[ip] = t
        schur_solve(S, mode, V, mu[:n_p])
        for r in range(m):
            t = g[r]
            for ip in range(n_p):
                t -= Zm[r, ip] * mu[ip]
            lam[r] = t
        upper_solve(H, lam)
    worst, scale = 0.0, 1.0
    for j in range(nv):
        t = tau[j]
        for r in range(m):
            t -= A[r, j] * lam[r]
        if passive[j]:
            worst, scale = max(worst, abs(t)), max(scale, abs(tau[j]))
            t = 0.0
        tau[j] = t
    return worst / scale


@ijit
def passive_count(passive):
    n_p = 0
    for j in range(passive.shape[0]):
        n_p += 1 if passive[j] else 0
    return n_p


@jit
def constrained_rnea_sample(mf, mi, ws, ci, cf, sc, q, v, a, T, active, passive, w, min_force, tol, tau, lam):
    """Kim 3.1 for full-rank cases: (tau, lam) into tau (nv,), lam (m,). Returns a status.

    With G = A_p^T (passive columns of A) of full row rank and tau_r = rnea(q, v, a): inverse_factor, then
    inverse_solve (min_force by G W^-1 G^T, min_torque by the KKT system's Schur complement with
    H = A_a W A_a^T positive definite). A singular H or G W^-1 G^T (ties, too few constraints) returns
    SINGULAR: the reference's pseudo-inverses answer.
    """
    mf, mi, ci, cf, sc = borrowed(mf), borrowed(mi), borrowed(ci), borrowed(cf), borrowed(sc)
    q, v, a, T, tau, lam = borrowed(q), borrowed(v), borrowed(a), borrowed(T), borrowed(tau), borrowed(lam)
    nb, n, nv = sizes(mi)
    m = ci[1]
    n_p = passive_count(passive)
    _, S, vecs, A, C, Z, _, H, mvecs, terms_sc = sample_blocks(sc, nv, m, n_p)
    mu, c, g = vecs[0], mvecs[0], mvecs[1]
    rnea_sample(mf, mi, ws, q, v, a, T, np.empty((0, nb, 6)), np.empty((0, 6)), np.int64(0), tau)
    contact_terms(mf, mi, ci, cf, terms_sc, q, v, T, active, A, c)
    if not off_constraints(A, v, tol) <= tol:
        return VIOLATED
    mode, V = inverse_factor(ci, A, active, passive, w, min_force, S, Z, H, reshaped(C, 0, (m * nv,)), np.bool_(False))
    if mode == 0:
        return SINGULAR
    inverse_solve(A, passive, w, min_force, S, Z, H, mode, V, tau, g, mu, lam)
    return OK


@ijit
def row_constraint(ci, r):
    """The constraint that row r of A belongs to."""
    nv = ci.shape[0] - 2 - 4 * ci[0]
    k = ci[0] - 1
    while ci[2 + nv + 4 * k + ROW] > r:
        k -= 1
    return k


@jit
def constrained_rnea_one(handle, ci, cf, sc, q, v, a, T, active, passive, w, min_force, tol, tau, lam):
    """One sample: checks lengths, NaN and the pose, then constrained_rnea_sample."""
    mf, mi = model_arrays(handle)
    nb, n, nv = sizes(mi)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a))) or active.shape[0] != ci[0] \
            or passive.shape[0] != nv:
        return BAD_INPUT
    return constrained_rnea_sample(mf, mi, workspace(mf, mi), ci, cf, sc, q, v, a, T, active, passive, w, min_force,
                                   tol, tau, lam)


def terms_size(nv: int, m: int, k: int) -> int:
    """Floats of constrained_terms_sample's output: tau_r, tau, lam, tau_g, lam_g, a, lam_a, frames (k, 4, 4),
    normal (k,), tangential (k,), wrench (k, 6), residual, residual_g."""
    return 4 * nv + 3 * m + 24 * k + 2


@ijit
def split_forces(ci, lam, frames, up, normal, tangential, wrench):
    """normal, tangential (k,) <- each contact's force in lam resolved along the world direction up and across
    it; wrench (k, 6) <- lam per contact as a wrench (m, f) (a point contact's moment zero)."""
    nv = ci.shape[0] - 2 - 4 * ci[0]
    for j in range(ci[0]):
        o = 2 + nv + 4 * j
        r = ci[o + ROW] + (0 if ci[o + POINT] != 0 else 3)
        for i in range(3):
            wrench[j, i] = 0.0 if ci[o + POINT] != 0 else lam[r - 3 + i]
            wrench[j, 3 + i] = lam[r + i]
        f0, f1, f2 = lam[r], lam[r + 1], lam[r + 2]
        if ci[o + WORLD] == 0:  # f in the contact's axes: f . R^T up
            u0 = frames[j, 0, 0] * up[0] + frames[j, 1, 0] * up[1] + frames[j, 2, 0] * up[2]
            u1 = frames[j, 0, 1] * up[0] + frames[j, 1, 1] * up[1] + frames[j, 2, 1] * up[2]
            u2 = frames[j, 0, 2] * up[0] + frames[j, 1, 2] * up[1] + frames[j, 2, 2] * up[2]
        else:
            u0, u1, u2 = up[0], up[1], up[2]
        fn = f0 * u0 + f1 * u1 + f2 * u2
        normal[j] = fn
        tangential[j] = math.sqrt(max(f0 * f0 + f1 * f1 + f2 * f2 - fn * fn, 0.0))


@jit
def constrained_terms_sample(mf, mi, ws, ci, cf, sc, q, v, a, tau, T, active, passive, w, min_force, has_tau, tol,
                             least_squares, up, out):
    """A whole sample of a robot on contacts, on one evaluation of A(q), c and of each factor. Returns a status.

    out (terms_size,) <- tau_r = rnea(q, v, a); (tau, lam) = Kim 3.1 at (q, v, a) and (tau_g, lam_g) at
    (q, 0, 0), both from inverse_factor's factors of A; (a, lam_a) = Kim 3.2 with the forces tau (NaN
    without has_tau); the world poses of the contact frames (k, 4, 4); lam's forces along the world
    direction up and across it, and lam as k wrenches (split_forces); the balance residuals of lam and lam_g
    (inverse_solve), which least_squares lets exceed zero (otherwise SINGULAR).
    """
    mf, mi, ci, cf, sc = borrowed(mf), borrowed(mi), borrowed(ci), borrowed(cf), borrowed(sc)
    q, v, a, tau, T, out = borrowed(q), borrowed(v), borrowed(a), borrowed(tau), borrowed(T), borrowed(out)
    nb, n, nv = sizes(mi)
    k, m = ci[0], ci[1]
    parent = ci[2:2 + nv]
    n_p = passive_count(passive)
    L, S, vecs, A, Y, Z, K, H, mvecs, terms_sc = sample_blocks(sc, nv, m, n_p)
    zero, x, mu = vecs[0], vecs[1], vecs[2]
    c, g = mvecs[0], mvecs[1]
    tau_r, tau_c, lam = reshaped(out, 0, (nv,)), reshaped(out, nv, (nv,)), reshaped(out, 2 * nv, (m,))
    tau_g, lam_g = reshaped(out, 2 * nv + m, (nv,)), reshaped(out, 3 * nv + m, (m,))
    acc, lam_a = reshaped(out, 3 * nv + 2 * m, (nv,)), reshaped(out, 4 * nv + 2 * m, (m,))
    frames = reshaped(out, 4 * nv + 3 * m, (k, 4, 4))
    normal, tangential = reshaped(out, 4 * nv + 3 * m + 16 * k, (k,)), reshaped(out, 4 * nv + 3 * m + 17 * k, (k,))
    wrench = reshaped(out, 4 * nv + 3 * m + 18 * k, (k, 6))
    size = out.shape[0]
    for i in range(nv):
        zero[i] = 0.0
    contact_terms(mf, mi, ci, cf, terms_sc, q, v, T, active, A, c)
    if not off_constraints(A, v, tol) <= tol:
        return VIOLATED
    put_frames(mi, ci, cf, terms_sc, frames)
    mode, V = inverse_factor(ci, A, active, passive, w, min_force, S, Z, H, reshaped(Y, 0, (m * nv,)), least_squares)
    if mode == 0:
        return SINGULAR
    no_wrench_body, no_wrench_base = np.empty((0, nb, 6)), np.empty((0, 6))
    rnea_sample(mf, mi, ws, q, v, a, T, no_wrench_body, no_wrench_base, np.int64(0), tau_r)
    for i in range(nv):
        tau_c[i] = tau_r[i]
    out[size - 2] = inverse_solve(A, passive, w, min_force, S, Z, H, mode, V, tau_c, g, mu, lam)
    split_forces(ci, lam, frames, up, normal, tangential, wrench)
    floating = nv > n
    if floating or has_tau:
        mass_matrix_sample(mf, mi, ws, q, L)
    if floating:  # rnea(q, 0, 0) = M (0, -R^T g; 0): gravity as the base's upward acceleration, no pass
        gravity_in_base(mf, nb, T, x)
        for i in range(nv):
            tau_g[i] = dot(L[i, :6], x[:6])
    else:
        rnea_sample(mf, mi, ws, q, zero, zero, T, no_wrench_body, no_wrench_base, np.int64(0), tau_g)
    out[size - 1] = inverse_solve(A, passive, w, min_force, S, Z, H, mode, V, tau_g, g, mu, lam_g)
    if not has_tau:
        for i in range(nv):
            acc[i] = np.nan
        for r in range(m):
            lam_a[r] = np.nan
        return OK
    for i in range(nv):  # tau - b with b = rnea(q, v, 0) = tau_r - M a: no third pass
        acc[i] = tau[i] - tau_r[i] + dot(L[i], a)
    if not forward_factor(parent, A, L, Y, K, mf[nb, SCALE]):
        return SINGULAR
    forward_solve(parent, L, A, Y, K, c, acc, x, lam_a)
    return OK


@jit
def constrained_terms_one(handle, ci, cf, sc, q, v, a, tau, T, active, passive, w, min_force, has_tau, tol,
                          least_squares, up, out):
    """One sample: checks lengths, NaN and the pose, then constrained_terms_sample."""
    mf, mi = model_arrays(handle)
    nb, n, nv = sizes(mi)
    if not (inputs_valid(mi, q, T) and vectors_valid(mi, (v, a, tau))) or active.shape[0] != ci[0] \
            or passive.shape[0] != nv or up.shape[0] != 3 or out.shape[0] != 4 * nv + 3 * ci[1] + 24 * ci[0] + 2:
        return BAD_INPUT
    return constrained_terms_sample(mf, mi, workspace(mf, mi), ci, cf, sc, q, v, a, tau, T, active, passive, w,
                                    min_force, has_tau, tol, least_squares, up, out)


def fit_size(nv: int, m: int, k: int) -> int:
    """Floats of contact_fit_many's output per sample: lam (m), rest (nv), normal (k), tangential (k)."""
    return m + nv + 2 * k


# A pivot of A_j A_j^T below this fraction of its diagonal entry: the rows are too close to dependent for the
# normal equations (their error grows with cond(A_j)^2, here up to ~1e-8 relative): the pseudo-inverse decides.
FIT_PIVOT_RTOL = 1e-8


@jit
def contact_fit_many(handle, ci, cf, sc, q, T, r, active, up, A, out):
    """The contact forces that explain a generalized force best on the joint rows, and what remains.

    Per sample b of q (B, n), T and active (B or 1, ...), r (B, nv): A[b] (m, nv) of every contact (active or
    not), lam = argmin |r_j - A_j^T lam| over the joint coordinates j by the normal equations
    (A_j A_j^T) lam = A_j r_j (Cholesky of an m x m matrix: the per-leg J^T pseudo-inverse at once),
    rest = r - A^T lam with every contact on the base rows and the active contacts' rows only on the joint
    rows, and lam's forces along the world direction up and across it (split_forces). out[b] = (lam, rest,
    normal, tangential). SINGULAR when A_j A_j^T is singular to FIT_PIVOT_RTOL (the caller's pseudo-inverse
    then gives the least-norm fit); sc: FastConstraints.scratch.
    """
    mf, mi = model_arrays(handle)
    _, n, nv = sizes(mi)
    k, m = ci[0], ci[1]
    B, base = q.shape[0], nv - n
    if (T.shape[0] not in (1, B) or r.shape[0] != B or r.shape[1] != nv or active.shape[0] not in (1, B)
            or active.shape[1] != k or up.shape[0] != 3 or A.shape[0] != B or A.shape[1] != m or A.shape[2] != nv
            or out.shape[0] != B or out.shape[1] != m + nv + 2 * k):
        return BAD_INPUT
    G, o = block(sc, 0, m, m)
    frames = reshaped(sc, o, (k, 4, 4))
    wrench, o = block(sc, o + 16 * k, k, 6)
    vecs, o = block(sc, o, 2, max(nv, m))
    zero, c = vecs[0, :nv], vecs[1, :m]
    terms_sc = reshaped(sc, o, (sc.shape[0] - o,))
    all_on = np.ones(k, dtype=np.bool_)
    for i in range(nv):
        zero[i] = 0.0
    for b in range(B):
        Tb, rb, Ab, on = pose_of(T, b), r[b], A[b], active[b if active.shape[0] != 1 else 0]
        if not (inputs_valid(mi, q[b], Tb) and all_finite(rb)):
            return BAD_INPUT
        lam, rest = out[b, :m], out[b, m:m + nv]
        normal, tangential = out[b, m + nv:m + nv + k], out[b, m + nv + k:]
        contact_terms(mf, mi, ci, cf, terms_sc, q[b], zero, Tb, all_on, Ab, c)
        for i in range(m):
            s = 0.0
            for col in range(base, nv):
                s += Ab[i, col] * rb[col]
            lam[i] = s
            for j in range(i + 1):
                s = 0.0
                for col in range(base, nv):
                    s += Ab[i, col] * Ab[j, col]
                G[i, j] = s
                G[j, i] = s
        if not cholesky(G, FIT_PIVOT_RTOL):
            return SINGULAR
        cho_solve(G, lam)
        for col in range(nv):
            rest[col] = rb[col]
        for j in range(k):
            o = 2 + nv + 4 * j
            r0 = ci[o + ROW]
            rows = 3 if ci[o + POINT] != 0 else 6
            down = on[j]
            for i in range(r0, r0 + rows):
                for col in range(nv if down else base):
                    rest[col] -= Ab[i, col] * lam[i]
        put_frames(mi, ci, cf, terms_sc, frames)
        split_forces(ci, lam, frames, up, normal, tangential, wrench)
    return OK
