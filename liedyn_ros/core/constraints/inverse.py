"""Inverse dynamics of a constrained system (Kim 2012, section 3.1, eqs. 56-66)."""
from __future__ import annotations

import numpy as np


from .. import reference
from ..dynamics import rnea, rnea_batch
from ..fast import OK, fast_model
from ..fast.entry import single
from ..model import Model
from .description import constraint_set
from .fast_minimisers import LEAST_NORM, MIN_FORCE, MIN_TORQUE
from .state import RANK_RTOL, per_sample, setup

__all__ = ["constrained_rnea", "passive_mask"]

SOLUTIONS = ("min_torque", "min_force", "unique")
BALANCES = ("exact", "least_squares")
# |A_p^T lam - tau_pr| beyond this fraction of max(1, |tau_pr|) means no constraint force balances the
# passive coordinates: the acceleration is not one the constraints allow.
BALANCE_RTOL = 1e-8
_ONES = np.ones(1)  # the weights the compiled minimiser ignores (solution "least_norm")


def passive_mask(model: Model, passive) -> np.ndarray:
    """Boolean (nv,): the floating base's six coordinates and the joints named in `passive`."""
    mask = np.zeros(model.nv, dtype=bool)
    base = model.nv - model.n
    mask[:base] = True
    names = [passive] if isinstance(passive, str) else list(passive or ())
    for name in names:
        if name not in model.joint_names:
            raise ValueError(f"passive: unknown joint {name!r} (the model's joints: {list(model.joint_names)})")
        mask[base + model.joint_names.index(name)] = True
    return mask


def _weights(name: str, weights, size: int) -> np.ndarray:
    if weights is None:
        return np.ones(size)
    w = np.asarray(weights, dtype=float)
    if w.shape != (size,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights: for solution={name!r} expected {size} positive numbers, got {weights!r}")
    return w


def constrained_rnea(model: Model, q, v, a, constraints, *, base_pose=None, passive=None,
                     solution: str = "min_torque", weights=None, f_ext=None, active=None, tol: float = 1e-6,
                     balance: str = "exact", fast: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(tau, lam) with  M a + b = tau + A^T lam  and tau = 0 on the passive coordinates (Kim 3.1).

    With tau_r = rnea(q, v, a) split into active (a) and passive (p) rows, lam must solve
        A_p^T lam = tau_pr                                                         (57)
    and then tau_a = tau_ar - A_a^T lam (58, 60). The solutions are lam_0 + N s with lam_0 the
    least-norm one and N spanning the null space of A_p^T (59); `solution` picks
        "min_torque"  least sum w_i tau_a,i^2 (weights per active coordinate; eqs. 62-64, 65-66)
        "min_force"   least sum w_i lam_i^2 (weights per row of A; lam_0 when unweighted)
        "unique"      demands m = n_p-like uniqueness (A_p^T without null space), else ValueError.
    Ties are broken by the least-norm lam. For a legged robot with the base passive this is the
    contact-consistent torque: the contacts, not a wrench on the base, carry the robot.

    passive: names of unactuated joints (a floating base is always passive). a should satisfy
    A a + c = 0; if no lam balances the passive rows (too few constraints for the motion) this
    raises ValueError with the residual, unless balance="least_squares": lam_0 then balances them
    in the least-squares sense (a measured motion of two point feet, whose base would need a moment
    about the line through them), and the minimiser is taken among those lam. Shapes: q (..., n),
    v, a (..., nv) -> tau (..., nv), lam (..., m), what each constraint applies to the robot in its
    frame (zero when inactive).
    Contacts on a model without mimic joints run compiled (constraints.fast: the same minimisers by
    Cholesky factors where they are unique) unless fast=False; ties, "unique", f_ext, loops and
    errors run this readable path, with compiled terms and, for loop sets, a compiled least-norm
    minimiser (fast_closures, fast_minimisers). fast=False runs no compiled code at all.
    """
    if solution not in SOLUTIONS:
        raise ValueError(f"solution: expected one of {SOLUTIONS}, got {solution!r}")
    if balance not in BALANCES:
        raise ValueError(f"balance: expected one of {BALANCES}, got {balance!r}")
    cs = constraint_set(model, constraints)
    if fast and cs._fast is not None and f_ext is None and solution != "unique":
        out = _fast(model, cs, q, v, a, base_pose, passive, solution, weights, active, tol)
        if out is not None:
            return out
    p = passive_mask(model, passive)
    pb = setup(model, q, {"v": v, "a": a}, cs, base_pose, active, tol, fast)
    B, A = pb.batch.q.shape[0], pb.terms.A
    if fast and f_ext is None:  # the batch setup has checked, not checked again
        tau_r = rnea_batch(fast_model(model), pb.batch)
    else:
        tau_r = (rnea if fast else reference.rnea)(model, q, v, a, base_pose=base_pose, f_ext=f_ext).reshape(B, model.nv)
    weighted = solution == "min_torque" or (solution == "min_force" and weights is not None)
    w = np.sqrt(_weights(solution, weights, A.shape[1] if solution == "min_force" else int((~p).sum()))) \
        if weighted else None
    # compiled for loop sets (LOOP_KERNELS); contact sets where constrained_rnea_one declines stay numpy, as the
    # contact node's warm-up (CONTACT_KERNELS) does not build the minimiser
    lam, residual, scale, free = least_norm_forces(A, tau_r, p, pb.rows, solution if weighted else "least_norm", w,
                                                   fast and cs._fast is None)
    if balance == "exact" and np.any(residual > BALANCE_RTOL * scale):
        raise ValueError(f"constraints: no constraint force balances the passive coordinates (residual "
                         f"{float(np.max(residual)):.3g}); the acceleration violates the constraints or they are "
                         "too few for it")
    if solution == "unique" and np.any(free > 0.5):
        raise ValueError(f"solution: the constraint forces are not unique ({int(np.round(free.max()))} "
                         "free directions: more constraints than passive coordinates, or a singular A_p); "
                         "choose 'min_torque' or 'min_force'")
    tau = tau_r - np.einsum("bji,bj->bi", A, lam)
    tau[:, p] = 0.0
    return pb.restore(tau), pb.restore(lam)


_MODES = {"min_torque": MIN_TORQUE, "min_force": MIN_FORCE, "least_norm": LEAST_NORM}


def least_norm_forces(A: np.ndarray, tau_r: np.ndarray, p: np.ndarray, rows: np.ndarray, solution: str, w, fast: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lam, residual, scale, free) of constrained_rnea's minimiser, (B, m), (B,), (B,), (B,): lam_0 =
    (A_p^T)^+ tau_pr, moved in A_p^T's null space (over the active rows) to the least |w (tau_a - A_a^T lam)|
    (solution "min_torque") or |w lam| ("min_force"), or left least-norm ("least_norm"); w the square roots of
    the weights (None for "least_norm"); residual |A_p^T lam_0 - tau_pr|, scale max(1, |tau_pr|), free the
    null space's dimension. Inactive rows zero. By fast_minimisers.least_norm_forces_many when `fast`
    (rank-deficient sets alike), else, or where it declines, by readable_forces."""
    if fast:
        B, m = rows.shape
        out = np.empty((B, m)), np.empty(B), np.empty(B), np.empty(B)
        try:
            status = single.least_norm_forces_many(A, tau_r, p, np.array(rows, order="C"),
                                                   _ONES if w is None else w, _MODES[solution], RANK_RTOL, *out)
        except TypeError:  # not C-contiguous float64 arrays: the readable path
            status = None
        if status == OK:
            return out
    return readable_forces(A, tau_r, p, rows, solution, w)


def readable_forces(A: np.ndarray, tau_r: np.ndarray, p: np.ndarray, rows: np.ndarray, solution: str, w
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """least_norm_forces in numpy, batched: the reference of fast_minimisers.least_norm_forces_many."""
    B = A.shape[0]
    G = np.swapaxes(A[:, :, p], -1, -2)  # A_p^T, (B, n_p, m)
    U, s, Vt = np.linalg.svd(G, full_matrices=True)
    r = s > RANK_RTOL * s.max(axis=-1, keepdims=True, initial=0.0)  # (B, min(n_p, m))
    s_inv = np.where(r, 1.0 / np.where(r, s, 1.0), 0.0)
    k = s.shape[-1]
    lam = np.einsum("bki,bk,bjk,bj->bi", Vt[:, :k], s_inv, U[:, :, :k], tau_r[:, p])  # lam_0 = (A_p^T)^+ tau_pr
    residual = np.abs(np.einsum("bij,bj->bi", G, lam) - tau_r[:, p]).max(axis=-1, initial=0.0)
    scale = np.maximum(1.0, np.abs(tau_r[:, p]).max(axis=-1, initial=0.0))
    # Projector onto the null space of A_p^T, over the active rows.
    rank_rows = np.concatenate([r, np.zeros((B, A.shape[1] - k), dtype=bool)], -1)
    Vr = np.where(rank_rows[:, :, None], Vt, 0.0)
    N = np.eye(A.shape[1]) - np.swapaxes(Vr, -1, -2) @ Vr
    N = N * (rows[:, :, None] & rows[:, None, :])
    # N is an orthogonal projector up to rounding; rebuilt from its unit eigenvectors it is exact,
    # and exactly zero without a null space (one flat foot: A_p^T square), where the rounding
    # left in I - Vr^T Vr would be blown up into forces by the pseudo-inverse below.
    eigenvalues, E = np.linalg.eigh(N)
    E = np.where(eigenvalues[:, None, :] > 0.5, E, 0.0)
    N = E @ np.swapaxes(E, -1, -2)
    if solution == "min_force":
        lam = lam - np.einsum("bij,bj->bi", N, _pinv_solve(w[:, None] * N, w * lam, w.max()))
    elif solution == "min_torque":
        act = ~p
        At = np.swapaxes(A[:, :, act], -1, -2)  # A_a^T, (B, n_a, m)
        t0 = tau_r[:, act] - np.einsum("bij,bj->bi", At, lam)
        wAt = w[:, None] * At
        size = np.linalg.norm(wAt, ord=2, axis=(-2, -1))
        lam = lam + np.einsum("bij,bj->bi", N, _pinv_solve(wAt @ N, w * t0, size))
    lam = np.where(rows, lam, 0.0)  # an inactive constraint applies nothing (not rounding)
    return lam, residual, scale, np.einsum("bii->b", N)


def _pinv_solve(K: np.ndarray, rhs: np.ndarray, scale) -> np.ndarray:
    """Least-norm least-squares x of K x = rhs, (B, r, c) and (B, r) -> (B, c). Singular values
    below RANK_RTOL * scale (the size of K before the null-space projection, scalar or (B,)) count
    as zero: relative to K's own largest they would not, and a direction the projection left
    only as rounding (an empty loop row on a floating base) would be inverted into huge forces."""
    U, s, Vt = np.linalg.svd(K, full_matrices=False)
    keep = s > RANK_RTOL * np.reshape(scale, (-1, 1))
    s_inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    return np.einsum("bki,bk,bjk,bj->bi", Vt, s_inv, U, rhs)


_ndarray = np.ndarray


def kernel_arguments(model: Model, cs, passive, solution: str, weights, tol):
    """(passive mask, weights, min_force, tol) as the compiled minimisers take them; None for a tol that is
    no number (the readable path words the error)."""
    fc = cs._fast
    p = fc.base_passive if passive is None else passive_mask(model, passive)
    min_force = solution == "min_force"
    w = fc.ones if weights is None else _weights(solution, weights, cs.m if min_force else int((~p).sum()))
    try:
        return p, w, min_force, float(tol)
    except (TypeError, ValueError):
        return None


def _fast(model: Model, cs, q, v, a, base_pose, passive, solution, weights, active, tol):
    """The compiled path for contacts: (tau, lam), or None for the reference."""
    fm, fc = fast_model(model), cs._fast
    T = fm.identity if base_pose is None else base_pose
    args = kernel_arguments(model, cs, passive, solution, weights, tol)
    if args is None:
        return None
    p, w, min_force, tol = args
    if (type(q) is _ndarray and type(v) is _ndarray and type(a) is _ndarray and type(T) is _ndarray
            and q.ndim == 1 and (base_pose is None) is fm.fixed
            and (active is None or (type(active) is _ndarray and active.ndim == 1))):
        tau, lam = np.empty(fm.nv), np.empty(cs.m)
        try:
            status = single.constrained_rnea_one(fm.handle, fc.ci, fc.cf, fc.scratch, q, v, a, T,
                                   fc.all_active if active is None else active, p, w, min_force, tol, tau, lam)
        except (TypeError, ValueError):  # not float64 vectors or a boolean mask: the general path
            return None
        return (tau, lam) if status == OK else None
    kernel = single.constrained_rnea_one
    out = per_sample(model, cs, q, {"v": v, "a": a}, base_pose, active, (fm.nv, cs.m),
                     lambda *x: kernel(fm.handle, fc.ci, fc.cf, fc.scratch, *x[:5], p, w, min_force, tol, *x[5:]))
    return None if out is None else (out[0], out[1])
