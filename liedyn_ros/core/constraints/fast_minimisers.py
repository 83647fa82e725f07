"""Compiled least-norm minimisers of the constrained algorithms' readable paths, rank-deficient sets included.

The same steps as inverse.least_norm_forces and state.solve_psd (the references), sample by sample, with
LAPACK's SVD and symmetric eigen-decomposition (numba's np.linalg) in place of numpy's batched calls:
where the loops' route spent most of a sample in numpy's per-call cost (a planar five-bar's point loop has
rank 2 of 3, so the Cholesky-based constraints.fast kernels decline it). Singular values (or eigenvalues)
at or below rtol times the reference size count as zero, as there. A sample with a NaN or infinity, or
with nothing to minimise over (no passive or no active coordinate), returns BAD_INPUT: the reference
then answers, or words the error. Self-contained (no inlined step of another file), so numba's own
per-file cache key suffices.
"""
from __future__ import annotations

import numpy as np

from ..fast.kinematics import BAD_INPUT, OK
from ..fast.spatial import ijit, jit

__all__ = ["LEAST_NORM", "MIN_FORCE", "MIN_TORQUE", "closest_forces_many", "closest_sample", "coordinates",
           "least_norm_forces_many", "least_norm_sample", "psd_solve", "psd_solve_many"]

# least_norm_forces_many's mode: inverse.constrained_rnea's solution (LEAST_NORM: unweighted min_force, unique).
MIN_TORQUE, MIN_FORCE, LEAST_NORM = 0, 1, 2


@ijit
def all_finite(x):
    for value in x.ravel():
        if not np.isfinite(value):
            return False
    return True


@ijit
def svd_solve(U, s, Vt, rhs, floor):
    """x = sum over the singular values s_i > floor of Vt_i (U_i . rhs) / s_i: pinv(K) rhs from K's thin SVD."""
    x = np.zeros(Vt.shape[1])
    for i in range(s.shape[0]):
        if s[i] > floor:
            x += (U[:, i] @ rhs / s[i]) * Vt[i]
    return x


@ijit
def coordinates(passive):
    """(ip, ia): the passive and the active coordinates of the mask passive (nv,), each in order."""
    nv = passive.shape[0]
    n_p = 0
    for j in range(nv):
        n_p += passive[j]
    ip, ia = np.empty(n_p, np.int64), np.empty(nv - n_p, np.int64)
    kp = ka = 0
    for j in range(nv):
        if passive[j]:
            ip[kp] = j
            kp += 1
        else:
            ia[ka] = j
            ka += 1
    return ip, ia


@ijit
def balanced_forces(U, s, Vt, floor, G, tp, x):
    """x <- lam_0 = (A_p^T)^+ tau_p from G = A_p^T's SVD (singular values above floor); returns (residual, scale):
    |A_p^T lam_0 - tau_p| and max(1, |tau_p|)."""
    x[:] = 0.0
    for i in range(s.shape[0]):
        if s[i] > floor:
            x += (U[:, i] @ tp / s[i]) * Vt[i]
    left, top = 0.0, 0.0
    Gx = G @ x
    for r in range(tp.shape[0]):
        left = max(left, abs(Gx[r] - tp[r]))
        top = max(top, abs(tp[r]))
    return left, max(1.0, top)


@jit
def least_norm_sample(A, tau, ip, ia, rows, w, mode, rtol, lam, residual, scale):
    """least_norm_forces_many's step for S samples of one A (m, nv) and rows (m,): tau (S, nv), lam (S, m),
    residual and scale (S,) (ip and ia: coordinates). Returns free. The factors of A (the SVD of A_p^T, N, the
    minimiser's SVD) are made once for the S samples: the loops' sample kernel (fast_loop_sample) solves the
    motion and the robot at rest on one A. Called, not inlined: the batch kernel and that kernel share one
    compilation of its LAPACK calls."""
    m = A.shape[0]
    n_p, n_a = ip.shape[0], ia.shape[0]
    G = np.empty((n_p, m))
    for r in range(n_p):
        for i in range(m):
            G[r, i] = A[i, ip[r]]
    U, s, Vt = np.linalg.svd(G, True)
    smax = 0.0
    for i in range(s.shape[0]):
        smax = max(smax, s[i])
    N = np.eye(m)
    for i in range(s.shape[0]):
        if s[i] > rtol * smax:
            N -= np.outer(Vt[i], Vt[i])
    for i in range(m):
        for j in range(m):
            if not (rows[i] and rows[j]):
                N[i, j] = 0.0
    # N is a projector up to rounding; rebuilt from its unit eigenvectors it is exact (and exactly zero
    # without a null space, where the rounding would be blown up into forces below).
    values, E = np.linalg.eigh(N)
    N[:] = 0.0
    for j in range(m):
        if values[j] > 0.5:
            N += np.outer(E[:, j], E[:, j])
    trace = 0.0
    for i in range(m):
        trace += N[i, i]
    tp, x = np.empty(n_p), np.empty(m)
    if mode == MIN_FORCE or mode == MIN_TORQUE:
        if mode == MIN_FORCE:
            wmax = 0.0
            for i in range(m):
                wmax = max(wmax, w[i])
            K = np.empty((m, m))
            for i in range(m):
                K[i] = w[i] * N[i]
            floor = rtol * wmax
        else:
            wAt = np.empty((n_a, m))
            for r in range(n_a):
                for i in range(m):
                    wAt[r, i] = w[r] * A[i, ia[r]]
            floor = rtol * np.linalg.svd(wAt, False)[1][0]  # the 2-norm of w A_a^T, before the projection
            K = wAt @ N
        Uk, sk, Vtk = np.linalg.svd(K, False)
        t0 = np.empty(n_a)
        for b in range(tau.shape[0]):
            for r in range(n_p):
                tp[r] = tau[b, ip[r]]
            residual[b], scale[b] = balanced_forces(U, s, Vt, rtol * smax, G, tp, x)
            if mode == MIN_FORCE:
                y = x - N @ svd_solve(Uk, sk, Vtk, w * x, floor)
            else:
                for r in range(n_a):
                    t0[r] = tau[b, ia[r]]
                    for i in range(m):
                        t0[r] -= A[i, ia[r]] * x[i]
                y = x + N @ svd_solve(Uk, sk, Vtk, w * t0, floor)
            for i in range(m):
                lam[b, i] = y[i] if rows[i] else 0.0
    else:
        for b in range(tau.shape[0]):
            for r in range(n_p):
                tp[r] = tau[b, ip[r]]
            residual[b], scale[b] = balanced_forces(U, s, Vt, rtol * smax, G, tp, x)
            for i in range(m):
                lam[b, i] = x[i] if rows[i] else 0.0
    return trace


@jit
def least_norm_forces_many(A, tau, passive, rows, w, mode, rtol, lam, residual, scale, free):
    """Per sample b: lam_0 = (A_p^T)^+ tau_p (SVD, rank at rtol of the largest singular value), the
    |A_p^T lam_0 - tau_p| left (residual) and max(1, |tau_p|) (scale), the projector N onto A_p^T's
    null space over the active rows (rebuilt from its eigenvectors of eigenvalue > 1/2; free = its
    trace), then the minimiser among lam_0 + N s: mode MIN_TORQUE least |w (tau_a - A_a^T lam)|,
    MIN_FORCE least |w lam| (w: the square roots of the weights), LEAST_NORM lam_0. Inactive rows zero."""
    B, m = A.shape[0], A.shape[1]
    ip, ia = coordinates(passive)
    if ip.shape[0] == 0 or m == 0 or (mode == MIN_TORQUE and ia.shape[0] == 0):
        return BAD_INPUT
    for b in range(B):
        if not (all_finite(A[b]) and all_finite(tau[b])):
            return BAD_INPUT
        free[b] = least_norm_sample(A[b], tau[b:b + 1], ip, ia, rows[b], w, mode, rtol, lam[b:b + 1],
                                    residual[b:b + 1], scale[b:b + 1])
    return OK


@jit
def psd_solve(K, rhs, rtol, out):
    """psd_solve_many's step for one sample (K (m, m), rhs and out (m,)); called, not inlined, as
    least_norm_sample."""
    m = rhs.shape[0]
    values, U = np.linalg.eigh(K)
    top = 0.0
    for i in range(m):
        top = max(top, abs(values[i]))
    x = np.zeros(m)
    for i in range(m):
        if abs(values[i]) > rtol * top:
            x += (U[:, i] @ rhs / values[i]) * U[:, i]
    out[:] = x


@jit
def psd_solve_many(K, rhs, rtol, out):
    """Per sample, the least-norm x of K x = rhs for symmetric K (its lower triangle read): sum over K's
    eigenvalues s_i with |s_i| > rtol max|s| of u_i (u_i . rhs) / s_i (numpy's pinv(hermitian=True))."""
    B, m = rhs.shape
    if m == 0:
        return BAD_INPUT
    for b in range(B):
        if not (all_finite(K[b]) and all_finite(rhs[b])):
            return BAD_INPUT
        psd_solve(K[b], rhs[b], rtol, out[b])
    return OK


@jit
def closest_sample(tau, A, target, passive, rows, held, weight, rcond, rtol, lam, tau_out):
    """closest_forces_many's step for one sample: tau (nv,), A (m, nv), target and tau_out (n,), rows (m,),
    lam (m,); returns whether it is unbalanced. Called, not inlined, as least_norm_sample."""
    m, nv = A.shape
    n = tau_out.shape[0]
    nb = nv - n
    first = 0 if held else nb
    nc = nv - first
    cols = np.empty(nc, np.int64)  # the passive columns first, then the others, each in order
    k = 0
    for j in range(first, nv):
        if passive[j]:
            cols[k] = j
            k += 1
    n_p = k
    for j in range(first, nv):
        if not passive[j]:
            cols[k] = j
            k += 1
    M, r = np.empty((nc, m)), np.empty(nc)
    for c in range(nc):
        j = cols[c]
        w = weight if c < n_p else 1.0
        r[c] = w * (tau[j] if c < n_p else tau[j] - target[j - nb])
        for i in range(m):
            M[c, i] = w * A[i, j] if rows[i] else 0.0
    U, s, Vt = np.linalg.svd(M, False)
    x = svd_solve(U, s, Vt, r, rcond * s.max())
    top, left = 0.0, 0.0
    for j in range(first, nv):
        g = tau[j]
        for i in range(m):
            g -= A[i, j] * x[i]
        if passive[j]:
            top = max(top, abs(tau[j]))
            left = max(left, abs(g))
            g = 0.0
        if j >= nb:
            tau_out[j - nb] = g
    for i in range(m):
        lam[i] = x[i]
    return left > rtol * max(1.0, top)


@jit
def closest_forces_many(tau, A, target, passive, rows, held, weight, rcond, rtol, lam, tau_out, unbalanced):
    """pipeline.loops.closest_loop_forces per sample b (its reference): over the columns c (all where held[b],
    else the joints', the last n), the forces lam of the active rows with the least |W (r - A_c^T lam)| and,
    among those, the least |lam|: W = weight on the passive columns, 1 on the others, r = tau_c less target
    (zero on the passive and base columns); by numpy's pinv rule (singular values at or below rcond times the
    largest count as zero), the passive columns first as pipeline.contacts.forces_closest_to orders them. Then
    g = tau_c - A_c^T lam: unbalanced where some |g_p| > rtol max(1, |tau_p|), and tau_out g's last n entries,
    zero on the passive joints. Inactive rows count as zero columns of A_c^T; passive holds the base's columns
    (inverse.passive_mask)."""
    B = A.shape[0]
    for b in range(B):
        if not (all_finite(A[b]) and all_finite(tau[b]) and all_finite(target[b])):
            return BAD_INPUT
    for b in range(B):
        unbalanced[b] = closest_sample(tau[b], A[b], target[b], passive, rows[b], held[b], weight, rcond, rtol,
                                       lam[b], tau_out[b])
    return OK
