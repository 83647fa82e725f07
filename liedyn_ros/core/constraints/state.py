"""What the constrained algorithms share: validated inputs, the active rows, the state check."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import Batch, prepare
from ..fast import OK
from ..fast.entry import single
from ..model import Model
from .description import ConstraintSet, constraint_set
from .jacobian import ConstraintTerms, compiled_terms, constraint_terms

# Singular values of A M^-1 A^T (or A_p^T) below this fraction of the largest count as zero.
RANK_RTOL = 1e-10


@dataclass
class Problem:
    """One call's constraint set, flat batch, terms (inactive rows zeroed) and row mask (B, m)."""

    cs: ConstraintSet
    batch: Batch
    terms: ConstraintTerms
    rows: np.ndarray

    def pose(self) -> np.ndarray | None:
        """The batch's base poses for a further call on the flat batch, None for a fixed base."""
        return self.batch.base_pose if self.cs.model.floating_base else None

    def restore(self, x: np.ndarray) -> np.ndarray:
        return self.batch.restore(x)


def setup(model: Model, q, vectors: dict, constraints, base_pose, active, tol: float, fast: bool = True
          ) -> Problem:
    """Validate, evaluate A, c, A v and e, drop inactive rows, and refuse a state off the constraints.

    tol bounds |A v| (m/s, rad/s) and the loop position error |e| (m, rad) of the active rows.
    A compiled kernel (jacobian.compiled_terms) gives A, c, A v and e when `fast`, the numpy reference otherwise.
    The batch is checked here once: without f_ext the algorithms pass it on to the private entries of rnea
    and hybrid (core.dynamics.rnea_batch, hybrid_batch), which do not check it again.
    """
    cs = constraint_set(model, constraints)
    batch = prepare(model, q, vectors, base_pose=base_pose)
    B = batch.q.shape[0]
    mask = cs.row_mask(active)
    try:  # (a mask of the batch's shape, the common case, needs no broadcasting)
        rows = (mask if mask.shape == batch.shape + (cs.m,) else np.broadcast_to(mask, batch.shape + (cs.m,))
                ).reshape(B, cs.m)
    except ValueError as exc:
        raise ValueError(f"active: batch shape {mask.shape[:-1]} does not broadcast to {batch.shape}") from exc
    terms = compiled_terms(cs, batch, rows) if fast else None
    if terms is None:
        terms = constraint_terms(cs, batch, batch.vectors[0])
        terms.A = np.where(rows[..., None], terms.A, 0.0)
        terms.c, terms.Av, terms.e = (np.where(rows, x, 0.0) for x in (terms.c, terms.Av, terms.e))
    if not tol >= 0:
        raise ValueError(f"tol: expected a non-negative number, got {tol!r}")
    for what, x, unit in (() if tol == np.inf else (("velocity (A v)", terms.Av, "m/s or rad/s"),
                                                    ("position", terms.e, "m or rad"))):  # inf: nothing to refuse
        worst = np.abs(x).max(axis=0, initial=0.0)
        if worst.max(initial=0.0) > tol:
            r = int(np.argmax(worst))
            k = int(np.searchsorted(cs.rows, r, side="right") - 1)
            raise ValueError(f"constraints: the state violates the {cs.names[k]} by {worst[r]:.3g} {unit} in its "
                             f"{what}, more than tol={tol:g}")
    return Problem(cs, batch, terms, rows)


def solve_psd(K: np.ndarray, rhs: np.ndarray, fast: bool = True) -> np.ndarray:
    """The least-norm solution of K x = rhs for symmetric positive semi-definite K (B, m, m): eigenvalues
    at or below RANK_RTOL of the largest count as zero. By fast_minimisers.psd_solve_many when `fast`
    (its eigen-decomposition per sample, numpy's pinv's own), else, or where it declines, readable_psd_solve."""
    if fast:
        out = np.empty(rhs.shape)
        try:
            if single.psd_solve_many(K, rhs, RANK_RTOL, out) == OK:
                return out
        except TypeError:  # not C-contiguous float64 arrays: numpy's
            pass
    return readable_psd_solve(K, rhs)


def readable_psd_solve(K: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """solve_psd by numpy's pinv: the reference of fast_minimisers.psd_solve_many."""
    return np.einsum("bij,bj->bi", np.linalg.pinv(K, rcond=RANK_RTOL, hermitian=True), rhs)


def batch_mask(cs: ConstraintSet, batch: Batch, active) -> np.ndarray | None:
    """active as a C-contiguous (B or 1, k) boolean mask for the compiled per-sample loops; None when it
    is no boolean mask of k flags per sample (the readable path then words the error)."""
    if active is None:
        return cs._fast.all_active[None]
    mask = np.asarray(active)
    if mask.dtype != bool or mask.ndim == 0 or mask.shape[-1] != cs.k:
        return None
    try:
        return np.ascontiguousarray(np.broadcast_to(mask, batch.shape + (cs.k,)).reshape(batch.q.shape[0], cs.k))
    except ValueError:
        return None


def per_sample(model: Model, cs: ConstraintSet, q, vectors: dict, base_pose, active, sizes: tuple, step
               ) -> list | None:
    """A batch through a single-sample kernel (a compiled batch kernel would double the compile time of
    the largest kernels for a loop that costs a microsecond per sample here): step(q_b, *vectors_b,
    pose_b, active_b, *outputs_b) per sample, returning OK; outputs of `sizes` floats per sample, in the
    caller's batch shape. None when the kernel declines a sample or an argument (the readable path then
    answers, or words the error)."""
    batch = prepare(model, q, vectors, base_pose=base_pose)
    B = batch.q.shape[0]
    act = batch_mask(cs, batch, active)
    if act is None:
        return None
    outs = [np.empty((B, size)) for size in sizes]
    poses, one_pose, one_mask = batch.base_pose, len(batch.base_pose) == 1, len(act) == 1
    try:
        for b in range(B):
            if step(batch.q[b], *(x[b] for x in batch.vectors), poses[0 if one_pose else b], act[0 if one_mask else b],
                    *(out[b] for out in outs)) != OK:
                return None
    except TypeError:  # a read-only mask or pose
        return None
    return [batch.restore(out) for out in outs]
