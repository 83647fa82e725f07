"""Compiled spatial-algebra steps on (R, p) pairs and 6-vectors, without allocation.

A joint transform f_i = (R, p) is stored as rotation and translation; its adjoints act as
    Ad_{f^-1} (w, v)    = (R^T w, R^T (v + w x p))          twists, parent -> child frame
    Ad_{f^-1}^T (m, f)  = (R m + p x R f, R f)              wrenches, child -> parent frame
which costs a third of a 6x6 product. Twists are (omega, v), wrenches (m, f).
"""
from __future__ import annotations

import math

from numba import njit

from .. import singular
from .layout import AXIS, GENERAL, INERTIA, MULT, OFFSET, PM, RM, SCREW

# fastmath "contract" only: a * b + c may become one FMA instruction (one rounding, not two; aba and
# rnea took about 10% less time). No other fast-math flag, so NaN and inf keep IEEE semantics and
# the input checks hold.
jit = njit(cache=True, error_model="numpy", fastmath={"contract"})
# Steps are inlined into the kernels: numba's calls cost as much as a small step's arithmetic
# (plain calls made the kernels 1.3-1.5x slower; they compiled in two thirds of the time).
ijit = njit(cache=True, error_model="numpy", fastmath={"contract"}, inline="always")
# Batch kernels: release the GIL, so that threads.run_batch can spread a batch over threads.
bjit = njit(cache=True, error_model="numpy", fastmath={"contract"}, nogil=True)

# core.singular's rule itself, compiled: pivot_ok(d, mf[nb, SCALE]) is False for a singular pivot.
pivot_ok = ijit(singular.pivot_ok)

# sin_cos: pi/2 in three parts of 33, 33 and 53 bits (Cody and Waite), so that n PIO2_HI and n PIO2_MID are
# exact for |n| < 2^20; the Taylor coefficients (-1)^k / (2k + 1)! and (-1)^k / (2k)!.
PIO2_HI, PIO2_MID, PIO2_LO = 1.5707963267341256, 6.077100506303966e-11, 2.0222662487959506e-21
SIN_TAYLOR = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9))
COS_TAYLOR = tuple((-1) ** k / math.factorial(2 * k) for k in range(1, 9))


@ijit
def joint_transform(mf, i, q_coord, R, p):
    """(R, p) of f_i = M_i exp([S_i] q_i), q_i = mult q_coord + offset (Park et al. eqs. 15-17, 22).

    A screw along a frame axis (layout.joint_axis) skips the general exponential.
    """
    t = mf[i, MULT] * q_coord + mf[i, OFFSET]
    k = int(mf[i, AXIS])
    if k == GENERAL:
        M_exp_screw(mf, i, t, R, p)
    elif k < 3:
        M_rotation(mf, i, k, mf[i, SCREW + k] * t, R, p)
    else:
        M_translation(mf, i, k - 3, mf[i, SCREW + k] * t, R, p)


@ijit
def M_exp_screw(mf, i, t, R, p):
    """(R, p) = M_i exp([S_i] t) for any screw S_i.

    exp([S] t) with S = (w, v), |w| = k: rotation Rodrigues(w/k, k t) and translation
    (I k t + (1 - cos) [u] + (k t - sin) [u]^2) v / k; a pure translation v t when w = 0.
    """
    wx, wy, wz = mf[i, SCREW], mf[i, SCREW + 1], mf[i, SCREW + 2]
    vx, vy, vz = mf[i, SCREW + 3], mf[i, SCREW + 4], mf[i, SCREW + 5]
    k = math.sqrt(wx * wx + wy * wy + wz * wz)
    if k == 0.0:
        e00, e01, e02, e10, e11, e12, e20, e21, e22 = 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0
        ex, ey, ez = vx * t, vy * t, vz * t
    else:
        ux, uy, uz = wx / k, wy / k, wz / k
        th = k * t
        s, c = sin_cos(th)
        a, b = 1.0 - c, th - s
        e00, e01, e02 = c + a * ux * ux, a * ux * uy - s * uz, a * ux * uz + s * uy
        e10, e11, e12 = a * ux * uy + s * uz, c + a * uy * uy, a * uy * uz - s * ux
        e20, e21, e22 = a * ux * uz - s * uy, a * uy * uz + s * ux, c + a * uz * uz
        # (I th + a [u] + b [u]^2) v / k with [u]^2 = u u^T - I
        vx, vy, vz = vx / k, vy / k, vz / k
        cx, cy, cz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
        d = ux * vx + uy * vy + uz * vz
        ex = (th - b) * vx + a * cx + b * d * ux
        ey = (th - b) * vy + a * cy + b * d * uy
        ez = (th - b) * vz + a * cz + b * d * uz
    for r in range(3):
        m0, m1, m2 = mf[i, RM + 3 * r], mf[i, RM + 3 * r + 1], mf[i, RM + 3 * r + 2]
        R[r, 0] = m0 * e00 + m1 * e10 + m2 * e20
        R[r, 1] = m0 * e01 + m1 * e11 + m2 * e21
        R[r, 2] = m0 * e02 + m1 * e12 + m2 * e22
        p[r] = m0 * ex + m1 * ey + m2 * ez + mf[i, PM + r]


@ijit
def M_rotation(mf, i, k, th, R, p):
    """(R, p) = M_i exp([e_k] th) = (R_M Rot(e_k, th), p_M), a revolute joint about axis k.

    Rot(e_k, th) keeps column k and turns e_a into c e_a + s e_b ((k, a, b) cyclic).
    """
    a = k + 1 if k < 2 else 0
    b = a + 1 if a < 2 else 0
    s, c = sin_cos(th)
    for r in range(3):
        ma, mb = mf[i, RM + 3 * r + a], mf[i, RM + 3 * r + b]
        R[r, a] = c * ma + s * mb
        R[r, b] = c * mb - s * ma
        R[r, k] = mf[i, RM + 3 * r + k]
        p[r] = mf[i, PM + r]


@ijit
def sin_cos(x):
    """(sin x, cos x) within 4 ulp of libm's (test_fast_path; 2 seen), inlined: the two libm calls of a joint took a tenth
    of batch ABA on a 7-DoF arm, and each call makes the kernel spill its registers.

    x = n pi/2 + r with |r| <= pi/4, Taylor series in r to r^17 and r^16 (truncation below 1e-17), then the
    quadrant n mod 4 swaps and negates the pair. |x| >= 1e5 (or NaN) goes to libm.
    """
    if not abs(x) < 1e5:
        return math.sin(x), math.cos(x)
    n = math.floor(x * (2.0 / math.pi) + 0.5)
    r = ((x - n * PIO2_HI) - n * PIO2_MID) - n * PIO2_LO
    z = r * r
    S, C = SIN_TAYLOR, COS_TAYLOR
    s = r + r * z * (S[0] + z * (S[1] + z * (S[2] + z * (S[3] + z * (S[4] + z * (S[5] + z * (S[6] + z * S[7])))))))
    c = 1.0 + z * (C[0] + z * (C[1] + z * (C[2] + z * (C[3] + z * (C[4] + z * (C[5] + z * (C[6] + z * C[7])))))))
    k = int(n) & 3  # sin(r + k pi/2), cos(r + k pi/2) = (s, c), (c, -s), (-s, -c), (-c, s)
    sk, ck = (c, s) if k & 1 else (s, c)
    return (-sk if k & 2 else sk), (-ck if (k + 1) & 2 else ck)


@ijit
def M_translation(mf, i, k, d, R, p):
    """(R, p) = M_i exp([(0, e_k)] d) = (R_M, p_M + d R_M e_k), a prismatic joint along axis k."""
    for r in range(3):
        for c in range(3):
            R[r, c] = mf[i, RM + 3 * r + c]
        p[r] = mf[i, PM + r] + d * mf[i, RM + 3 * r + k]


@ijit
def twist_to_child(R, p, V, out):
    """out = Ad_{f^-1} V."""
    wx, wy, wz = V[0], V[1], V[2]
    ux = V[3] + wy * p[2] - wz * p[1]
    uy = V[4] + wz * p[0] - wx * p[2]
    uz = V[5] + wx * p[1] - wy * p[0]
    for r in range(3):
        out[r] = R[0, r] * wx + R[1, r] * wy + R[2, r] * wz
        out[r + 3] = R[0, r] * ux + R[1, r] * uy + R[2, r] * uz


@ijit
def wrench_to_parent(R, p, F, out):
    """out += Ad_{f^-1}^T F."""
    fx = R[0, 0] * F[3] + R[0, 1] * F[4] + R[0, 2] * F[5]
    fy = R[1, 0] * F[3] + R[1, 1] * F[4] + R[1, 2] * F[5]
    fz = R[2, 0] * F[3] + R[2, 1] * F[4] + R[2, 2] * F[5]
    for r in range(3):
        out[r] += R[r, 0] * F[0] + R[r, 1] * F[1] + R[r, 2] * F[2]
    out[0] += p[1] * fz - p[2] * fy
    out[1] += p[2] * fx - p[0] * fz
    out[2] += p[0] * fy - p[1] * fx
    out[3] += fx
    out[4] += fy
    out[5] += fz


@ijit
def congruence_to_parent(R, p, A, out):
    """out += Ad_{f^-1}^T A Ad_{f^-1} for a symmetric 6x6 A, by 3x3 blocks held in locals.

    Ad_{f^-1}^T = [[1, [p]], [0, 1]] diag(R, R), so with A' = diag(R, R) A diag(R, R)^T
        Y22 = A'22,   Y12 = A'12 + [p] A'22,   Y11 = A'11 + [p] A'21 + Y12 [p]^T,
    two thirds of the work of six wrench maps on each side. Column c of [p] N is p x N[:, c],
    column c of N [p]^T is N (e_c x p). A' is symmetric (A'21 = A'12^T), and so are Y11 and Y22:
    only their upper triangles are formed (the compiler drops the rest of `rotated`). A is read
    whole before out is written, as the two could alias (one workspace).
    """
    congruence_of_blocks(R, p, symmetric_block3(A, 0), block3(A, 0, 3), symmetric_block3(A, 3), out)


@ijit
def congruence_of_blocks(R, p, A11, A12, A22, out):
    """congruence_to_parent of the symmetric A = [[A11, A12], [A12^T, A22]] (3x3 tuples of rows)."""
    Rl = rows3(R)
    congruence_of_rotated(p, rotated(Rl, A11), rotated(Rl, A12), rotated(Rl, A22), out)


@ijit
def congruence_about_axis(R, p, k, A11, A12, A22, out):
    """congruence_of_blocks of a symmetric A whose row and column k < 3 are zero (a revolute joint's
    articulated inertia about its axis e_k, see aba.articulated_to_parent), from what is left of it:
    A11 = (A[a, a], A[a, b], A[b, b]) and A12 = (A[a, 3:6], A[b, 3:6]) with (k, a, b) cyclic, and A22.

    With r_a, r_b the columns a, b of R, R A11 R^T = r_a (A11 R^T)[a] + r_b (A11 R^T)[b] and the same for
    A12: two of every three products of A'11 and A'12 (a fifth of the congruence's work) are skipped.
    """
    a = k + 1 if k < 2 else 0
    b = a + 1 if a < 2 else 0
    Rl = rows3(R)
    ra, rb = (R[0, a], R[1, a], R[2, a]), (R[0, b], R[1, b], R[2, b])
    C11 = (spanned(ra, rb, A11[0] * ra[0] + A11[1] * rb[0], A11[1] * ra[0] + A11[2] * rb[0]),
           spanned(ra, rb, A11[0] * ra[1] + A11[1] * rb[1], A11[1] * ra[1] + A11[2] * rb[1]),
           spanned(ra, rb, A11[0] * ra[2] + A11[1] * rb[2], A11[1] * ra[2] + A11[2] * rb[2]))
    C12 = (spanned(ra, rb, dot3(A12[0], Rl[0]), dot3(A12[1], Rl[0])),
           spanned(ra, rb, dot3(A12[0], Rl[1]), dot3(A12[1], Rl[1])),
           spanned(ra, rb, dot3(A12[0], Rl[2]), dot3(A12[1], Rl[2])))
    congruence_of_rotated(p, C11, C12, rotated(Rl, A22), out)


@ijit
def congruence_of_rotated(p, C11, C12, C22, out):
    """out += the congruence_of_blocks of A from the columns of A'11, A'12, A'22 (A' = diag(R, R) A diag(R, R)^T)."""
    pl = (p[0], p[1], p[2])
    Y12 = (plus_cross(C12[0], pl, C22[0]), plus_cross(C12[1], pl, C22[1]), plus_cross(C12[2], pl, C22[2]))
    for c in range(3):
        a, b = (c + 1) % 3, (c + 2) % 3
        X = plus_cross(C11[c], pl, (C12[0][c], C12[1][c], C12[2][c]))  # (A'11 + [p] A'21)[:, c]
        for r in range(3):
            out[r, 3 + c] += Y12[c][r]
            out[3 + c, r] += Y12[c][r]
        for r in range(c + 1):
            y11 = X[r] + Y12[b][r] * pl[a] - Y12[a][r] * pl[b]
            out[r, c] += y11
            out[3 + r, 3 + c] += C22[c][r]
            if r != c:
                out[c, r] += y11
                out[3 + c, 3 + r] += C22[c][r]


@ijit
def rows3(R):
    """The 3x3 array R as a tuple of rows."""
    return (R[0, 0], R[0, 1], R[0, 2]), (R[1, 0], R[1, 1], R[1, 2]), (R[2, 0], R[2, 1], R[2, 2])


@ijit
def spanned(x, y, s, t):
    """x s + y t for 3-tuples x, y."""
    return x[0] * s + y[0] * t, x[1] * s + y[1] * t, x[2] * s + y[2] * t


@ijit
def dot3(x, y):
    """x^T y for 3-tuples."""
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


@ijit
def block3(A, r0, c0):
    """The 3x3 block A[r0:r0 + 3, c0:c0 + 3] as a tuple of rows."""
    return ((A[r0, c0], A[r0, c0 + 1], A[r0, c0 + 2]), (A[r0 + 1, c0], A[r0 + 1, c0 + 1], A[r0 + 1, c0 + 2]),
            (A[r0 + 2, c0], A[r0 + 2, c0 + 1], A[r0 + 2, c0 + 2]))


@ijit
def symmetric_block3(A, r0):
    """The diagonal 3x3 block A[r0:r0 + 3, r0:r0 + 3] of a symmetric A from its upper triangle."""
    a00, a01, a02 = A[r0, r0], A[r0, r0 + 1], A[r0, r0 + 2]
    a11, a12, a22 = A[r0 + 1, r0 + 1], A[r0 + 1, r0 + 2], A[r0 + 2, r0 + 2]
    return (a00, a01, a02), (a01, a11, a12), (a02, a12, a22)


@ijit
def mat3_times(B, x):
    """B x for a 3x3 tuple of rows B."""
    return (B[0][0] * x[0] + B[0][1] * x[1] + B[0][2] * x[2], B[1][0] * x[0] + B[1][1] * x[1] + B[1][2] * x[2],
            B[2][0] * x[0] + B[2][1] * x[1] + B[2][2] * x[2])


@ijit
def rotated(R, B):
    """The columns of R B R^T (tuples of rows R, B): column c is R (B R^T e_c) = R (B R[c, :])."""
    return mat3_times(R, mat3_times(B, R[0])), mat3_times(R, mat3_times(B, R[1])), mat3_times(R, mat3_times(B, R[2]))


@ijit
def plus_cross(x, p, y):
    """x + p x y for 3-tuples."""
    return (x[0] + p[1] * y[2] - p[2] * y[1], x[1] + p[2] * y[0] - p[0] * y[2], x[2] + p[0] * y[1] - p[1] * y[0])


@ijit
def body_inertia_times(mf, i, V, out):
    """out = J_i V = (I w + h x v, m v - h x w) for V = (w, v) (i = nb for the base).

    J_i = [[I, [h]], [[h]^T, m 1]] is a rigid-body inertia (see inertia10): 24 products, not 36.
    """
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    m = mf[i, INERTIA + 35]
    h0, h1, h2 = mf[i, INERTIA + 16], mf[i, INERTIA + 5], mf[i, INERTIA + 9]  # J[2, 4], J[0, 5], J[1, 3]
    for r in range(3):
        out[r] = mf[i, INERTIA + 6 * r] * w0 + mf[i, INERTIA + 6 * r + 1] * w1 + mf[i, INERTIA + 6 * r + 2] * w2
    out[0] += h1 * v2 - h2 * v1
    out[1] += h2 * v0 - h0 * v2
    out[2] += h0 * v1 - h1 * v0
    out[3] = m * v0 - h1 * w2 + h2 * w1
    out[4] = m * v1 - h2 * w0 + h0 * w2
    out[5] = m * v2 - h0 * w1 + h1 * w0


@ijit
def inertia10(mf, i, out):
    """J_i = [[I, [h]], [[h]^T, m 1]] of body i (i = nb: J_base) as ten numbers.

    out = (m, h, I00, I01, I02, I11, I12, I22): mass, first moment h = m c, and the rotational
    inertia about the frame's origin.
    """
    out[0] = mf[i, INERTIA + 35]
    out[1], out[2], out[3] = mf[i, INERTIA + 16], mf[i, INERTIA + 5], mf[i, INERTIA + 9]  # J[2, 4], J[0, 5], J[1, 3]
    k = 4
    for r in range(3):
        for c in range(r, 3):
            out[k] = mf[i, INERTIA + 6 * r + c]
            k += 1


@ijit
def inertia10_times(I, V, out):
    """out = J V for a ten-number inertia I (see inertia10): (I w + h x v, m v - h x w)."""
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    m, h0, h1, h2 = I[0], I[1], I[2], I[3]
    out[0] = I[4] * w0 + I[5] * w1 + I[6] * w2 + h1 * v2 - h2 * v1
    out[1] = I[5] * w0 + I[7] * w1 + I[8] * w2 + h2 * v0 - h0 * v2
    out[2] = I[6] * w0 + I[8] * w1 + I[9] * w2 + h0 * v1 - h1 * v0
    out[3] = m * v0 - h1 * w2 + h2 * w1
    out[4] = m * v1 - h2 * w0 + h0 * w2
    out[5] = m * v2 - h0 * w1 + h1 * w0


@ijit
def inertia10_rate(I, V, out):
    """out = J ad_V + ad_V^T J = -dJ/dt for a ten-number inertia J moving with the twist V.

    J and V in one frame. J stays a rigid-body inertia, so the result has the ten-number form
    (0, -hdot, -Idot), with the points' velocities v + w x r:
        hdot = m v + w x h,   Idot = [w] I - I [w] + 2 (h.v) 1 - v h^T - h v^T.
    """
    w = (V[0], V[1], V[2])
    v = (V[3], V[4], V[5])
    m, h = I[0], (I[1], I[2], I[3])
    out[0] = 0.0
    for r in range(3):
        out[1 + r] = -(m * v[r] + w[(r + 1) % 3] * h[(r + 2) % 3] - w[(r + 2) % 3] * h[(r + 1) % 3])
    J = ((I[4], I[5], I[6]), (I[5], I[7], I[8]), (I[6], I[8], I[9]))
    # wJ[r][c] = ([w] J)[r, c] = (w x J[:, c])_r; [w] J - J [w] = wJ + wJ^T
    wJ = ((w[1] * J[2][0] - w[2] * J[1][0], w[1] * J[2][1] - w[2] * J[1][1], w[1] * J[2][2] - w[2] * J[1][2]),
          (w[2] * J[0][0] - w[0] * J[2][0], w[2] * J[0][1] - w[0] * J[2][1], w[2] * J[0][2] - w[0] * J[2][2]),
          (w[0] * J[1][0] - w[1] * J[0][0], w[0] * J[1][1] - w[1] * J[0][1], w[0] * J[1][2] - w[1] * J[0][2]))
    hv = 2.0 * (h[0] * v[0] + h[1] * v[1] + h[2] * v[2])
    k = 4
    for r in range(3):
        for c in range(r, 3):
            out[k] = -(wJ[r][c] + wJ[c][r] - v[r] * h[c] - h[r] * v[c] + (hv if r == c else 0.0))
            k += 1


@ijit
def inertia10_matrix(I, out):
    """out = the 6x6 J = [[I, [h]], [[h]^T, m 1]] of a ten-number inertia."""
    out[:, :] = 0.0
    k = 4
    for r in range(3):
        for c in range(r, 3):
            out[r, c] = out[c, r] = I[k]
            k += 1
        out[3 + r, 3 + r] = I[0]
    for r, c, h in ((2, 1, I[1]), (0, 2, I[2]), (1, 0, I[3])):  # [h][r, c] = h_k, [h][c, r] = -h_k
        out[r, 3 + c] = out[3 + c, r] = h
        out[c, 3 + r] = out[3 + r, c] = -h


@ijit
def mat6_times(A, V, out):
    """out = A V for a 6x6 A."""
    for r in range(6):
        s = 0.0
        for c in range(6):
            s += A[r, c] * V[c]
        out[r] = s


@ijit
def times_screw(mf, i, A, out):
    """out = A S_i for a 6x6 A: a column of A, scaled, for S_i = c e_k along a frame axis."""
    k = int(mf[i, AXIS])
    for r in range(6):
        if k != GENERAL:
            out[r] = mf[i, SCREW + k] * A[r, k]
        else:
            s = 0.0
            for m in range(6):
                s += A[r, m] * mf[i, SCREW + m]
            out[r] = s


@ijit
def bracket(V, S, out):
    """out = ad_V S = [V, S] = (w x s_w, v x s_w + w x s_v)."""
    out[0] = V[1] * S[2] - V[2] * S[1]
    out[1] = V[2] * S[0] - V[0] * S[2]
    out[2] = V[0] * S[1] - V[1] * S[0]
    out[3] = V[4] * S[2] - V[5] * S[1] + V[1] * S[5] - V[2] * S[4]
    out[4] = V[5] * S[0] - V[3] * S[2] + V[2] * S[3] - V[0] * S[5]
    out[5] = V[3] * S[1] - V[4] * S[0] + V[0] * S[4] - V[1] * S[3]


@ijit
def coadjoint_bias(V, h, out):
    """out += -ad*_V h = (w x m + v x f, w x f) for h = (m, f), the Newton-Euler velocity term."""
    out[0] += V[1] * h[2] - V[2] * h[1] + V[4] * h[5] - V[5] * h[4]
    out[1] += V[2] * h[0] - V[0] * h[2] + V[5] * h[3] - V[3] * h[5]
    out[2] += V[0] * h[1] - V[1] * h[0] + V[3] * h[4] - V[4] * h[3]
    out[3] += V[1] * h[5] - V[2] * h[4]
    out[4] += V[2] * h[3] - V[0] * h[5]
    out[5] += V[0] * h[4] - V[1] * h[3]


@ijit
def screw_dot(mf, i, F):
    """S_i^T F: one product for a screw along a frame axis (layout.joint_axis)."""
    k = int(mf[i, AXIS])
    if k != GENERAL:
        return mf[i, SCREW + k] * F[k]
    s = 0.0
    for r in range(6):
        s += mf[i, SCREW + r] * F[r]
    return s


@ijit
def pose_is_valid(T):
    """T is 4x4, in SE(3) to the tolerance of checks.check_pose (1e-6), all entries finite."""
    if T.shape[0] != 4 or T.shape[1] != 4:
        return False
    for r in range(4):
        for c in range(4):
            if not math.isfinite(T[r, c]):
                return False
    for r in range(3):
        for c in range(3):
            d = T[r, 0] * T[c, 0] + T[r, 1] * T[c, 1] + T[r, 2] * T[c, 2] - (1.0 if r == c else 0.0)
            if abs(d) > 1e-6:
                return False
    det = (T[0, 0] * (T[1, 1] * T[2, 2] - T[1, 2] * T[2, 1]) - T[0, 1] * (T[1, 0] * T[2, 2] - T[1, 2] * T[2, 0])
           + T[0, 2] * (T[1, 0] * T[2, 1] - T[1, 1] * T[2, 0]))
    return det >= 0.0 and abs(T[3, 0]) <= 1e-6 and abs(T[3, 1]) <= 1e-6 and abs(T[3, 2]) <= 1e-6 \
        and abs(T[3, 3] - 1.0) <= 1e-6


@ijit
def all_finite(x):
    for k in range(x.shape[0]):
        if not math.isfinite(x[k]):
            return False
    return True


@ijit
def gravity_in_base(mf, nb, T, out):
    """out = (0, -R^T g): gravity as a fictitious upward base acceleration, in the base frame."""
    out[0] = out[1] = out[2] = 0.0
    for r in range(3):
        out[3 + r] = -(T[0, r] * mf[nb, 0] + T[1, r] * mf[nb, 1] + T[2, r] * mf[nb, 2])


@ijit
def ad_matrix(V, out):
    """out = ad_V = [[[w], 0], [[v], [w]]] (6x6)."""
    out[:, :] = 0.0
    for k in range(2):
        w = V[3 * k:3 * k + 3]
        for d in range(2 - k):  # [w] on the diagonal blocks, [v] below
            r0, c0 = 3 * (k + d), 3 * d
            out[r0, c0 + 1], out[r0, c0 + 2] = -w[2], w[1]
            out[r0 + 1, c0], out[r0 + 1, c0 + 2] = w[2], -w[0]
            out[r0 + 2, c0], out[r0 + 2, c0 + 1] = -w[1], w[0]


@ijit
def adbar_matrix(h, out):
    """out = ad*bar(h) = [[[m], [f]], [[f], 0]], the skew matrix with ad*_V h = ad*bar(h) V."""
    out[:, :] = 0.0
    for r0, c0, k in ((0, 0, 0), (0, 3, 3), (3, 0, 3)):
        out[r0, c0 + 1], out[r0, c0 + 2] = -h[k + 2], h[k + 1]
        out[r0 + 1, c0], out[r0 + 1, c0 + 2] = h[k + 2], -h[k]
        out[r0 + 2, c0], out[r0 + 2, c0 + 1] = -h[k + 1], h[k]


@ijit
def cholesky(A, rtol):
    """A <- its lower Cholesky factor L (A = L L^T), in place; False when a pivot is not positive or,
    for rtol > 0, not above rtol times its diagonal entry (A singular to that tolerance)."""
    k = A.shape[0]
    for j in range(k):
        d = A[j, j]
        for m in range(j):
            d -= A[j, m] * A[j, m]
        if not d > 0.0 or d <= rtol * A[j, j]:
            return False
        d = math.sqrt(d)
        A[j, j] = d
        for r in range(j + 1, k):
            s = A[r, j]
            for m in range(j):
                s -= A[r, m] * A[j, m]
            A[r, j] = s / d
    return True


@ijit
def cho_solve(L, x):
    """x <- (L L^T)^-1 x in place, for the factor L of cholesky."""
    lower_solve(L, x)
    upper_solve(L, x)


@ijit
def lower_solve(L, x):
    """x <- L^-1 x in place (L lower triangular)."""
    for r in range(L.shape[0]):
        s = x[r]
        for m in range(r):
            s -= L[r, m] * x[m]
        x[r] = s / L[r, r]


@ijit
def upper_solve(L, x):
    """x <- L^-T x in place (L lower triangular)."""
    k = L.shape[0]
    for r in range(k - 1, -1, -1):
        s = x[r]
        for m in range(r + 1, k):
            s -= L[m, r] * x[m]
        x[r] = s / L[r, r]


@ijit
def factor_from_last(A, scale):
    """A <- L, lower triangular with A = L^T L, eliminating the last row first: the articulated-body
    order of core.singular's rule (reference.hybrid.factor_from_last). Reads and writes the lower
    triangle only. False when a pivot fails the rule (A singular to its tolerance, or indefinite)."""
    for j in range(A.shape[0] - 1, -1, -1):
        d = A[j, j]
        if not pivot_ok(d, scale):
            return False
        d = math.sqrt(d)
        A[j, j] = d
        for c in range(j):
            A[j, c] /= d
        for r in range(j):
            w = A[j, r]
            for c in range(r + 1):
                A[r, c] -= w * A[j, c]
    return True


@ijit
def solve_from_last(L, x):
    """x <- (L^T L)^-1 x in place, for the factor L of factor_from_last."""
    upper_solve(L, x)
    lower_solve(L, x)


@ijit
def dot6(x, y):
    """x^T y for 6-vectors."""
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3] + x[4] * y[4] + x[5] * y[5]
