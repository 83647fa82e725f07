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

__all__ = ["LEAST_NORM", "MIN_FORCE", "MIN_TORQUE", "closest_forces_many", "least_norm_forces_many",
           "psd_solve_many"]

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
def pinv_solve(K, rhs, floor):
    """Least-norm least-squares x of K x = rhs, singular values <= floor counting as zero."""
    U, s, Vt = np.linalg.svd(K, False)
    return svd_solve(U, s, Vt, rhs, floor)


@jit
def least_norm_forces_many(A, tau, passive, rows, w, mode, rtol, lam, residual, scale, free):
    """Per sample b: lam_0 = (A_p^T)^+ tau_p (SVD, rank at rtol of the largest singular value), the
    |A_p^T lam_0 - tau_p| left (residual) and max(1, |tau_p|) (scale), the projector N onto A_p^T's
    null space over the active rows (rebuilt from its eigenvectors of eigenvalue > 1/2; free = its
    trace), then the minimiser among lam_0 + N s: mode MIN_TORQUE least |w (tau_a - A_a^T lam)|,
    MIN_FORCE least |w lam| (w: the square roots of the weights), LEAST_NORM lam_0. Inactive rows zero."""
    B, m, nv = A.shape
    n_p = 0
    for j in range(nv):
        n_p += passive[j]
    n_a = nv - n_p
    if n_p == 0 or m == 0 or (mode == MIN_TORQUE and n_a == 0):
        return BAD_INPUT
    ip, ia = np.empty(n_p, np.int64), np.empty(n_a, np.int64)
    kp = ka = 0
    for j in range(nv):
        if passive[j]:
            ip[kp] = j
            kp += 1
        else:
            ia[ka] = j
            ka += 1
    for b in range(B):
        if not (all_finite(A[b]) and all_finite(tau[b])):
            return BAD_INPUT
        G, tp = np.empty((n_p, m)), np.empty(n_p)
        for r in range(n_p):
            tp[r] = tau[b, ip[r]]
            for i in range(m):
                G[r, i] = A[b, i, ip[r]]
        U, s, Vt = np.linalg.svd(G, True)
        smax = 0.0
        for i in range(s.shape[0]):
            smax = max(smax, s[i])
        N = np.eye(m)
        x = np.zeros(m)
        for i in range(s.shape[0]):
            if s[i] > rtol * smax:
                x += (U[:, i] @ tp / s[i]) * Vt[i]
                N -= np.outer(Vt[i], Vt[i])
        left, top = 0.0, 0.0
        Gx = G @ x
        for r in range(n_p):
            left = max(left, abs(Gx[r] - tp[r]))
            top = max(top, abs(tp[r]))
        residual[b], scale[b] = left, max(1.0, top)
        for i in range(m):
            for j in range(m):
                if not (rows[b, i] and rows[b, j]):
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
        free[b] = trace
        if mode == MIN_FORCE:
            wmax = 0.0
            for i in range(m):
                wmax = max(wmax, w[i])
            K = np.empty((m, m))
            for i in range(m):
                K[i] = w[i] * N[i]
            x = x - N @ pinv_solve(K, w * x, rtol * wmax)
        elif mode == MIN_TORQUE:
            wAt, t0 = np.empty((n_a, m)), np.empty(n_a)
            for r in range(n_a):
                t0[r] = tau[b, ia[r]]
                for i in range(m):
                    wAt[r, i] = w[r] * A[b, i, ia[r]]
                    t0[r] -= A[b, i, ia[r]] * x[i]
            size = np.linalg.svd(wAt, False)[1][0]  # the 2-norm of w A_a^T, before the projection
            x = x + N @ pinv_solve(wAt @ N, w * t0, rtol * size)
        for i in range(m):
            lam[b, i] = x[i] if rows[b, i] else 0.0
    return OK


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
        values, U = np.linalg.eigh(K[b])
        top = 0.0
        for i in range(m):
            top = max(top, abs(values[i]))
        x = np.zeros(m)
        for i in range(m):
            if abs(values[i]) > rtol * top:
                x += (U[:, i] @ rhs[b] / values[i]) * U[:, i]
        out[b] = x
    return OK


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
    B, m, nv = A.shape
    n = tau_out.shape[1]
    nb = nv - n
    for b in range(B):
        if not (all_finite(A[b]) and all_finite(tau[b]) and all_finite(target[b])):
            return BAD_INPUT
    for b in range(B):
        first = 0 if held[b] else nb
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
            r[c] = w * (tau[b, j] if c < n_p else tau[b, j] - target[b, j - nb])
            for i in range(m):
                M[c, i] = w * A[b, i, j] if rows[b, i] else 0.0
        U, s, Vt = np.linalg.svd(M, False)
        x = svd_solve(U, s, Vt, r, rcond * s.max())
        top, left = 0.0, 0.0
        for j in range(first, nv):
            g = tau[b, j]
            for i in range(m):
                g -= A[b, i, j] * x[i]
            if passive[j]:
                top = max(top, abs(tau[b, j]))
                left = max(left, abs(g))
                g = 0.0
            if j >= nb:
                tau_out[b, j - nb] = g
        unbalanced[b] = left > rtol * max(1.0, top)
        for i in range(m):
            lam[b, i] = x[i]
    return OK
