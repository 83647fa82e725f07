"""Contact forces fitted to a generalized force, compiled: the legged momentum observer's per-leg
J^T pseudo-inverse at a node's rate.

A generalized force r (nv) that the contacts' forces lam (m) carry, r = A^T lam, holds them on
its joint rows j: lam = argmin |r_j - A_j^T lam|. With A_j of full row rank (a 3-joint leg on a
point foot: its 3x3 J_leg invertible) the normal equations (A_j A_j^T) lam = A_j r_j give it
exactly, by one Cholesky factor of an m x m matrix (per leg, lam_leg = J_leg^-T r_leg). What
remains of r beyond the forces, with every contact on the base rows and the ``active`` ones on
the joint rows (pipeline.observed), and lam's forces along the ground normal come in the same
kernel call (constraints.fast.contact_fit_many); rows too close to dependent for the normal
equations are left to the caller's pseudo-inverse (its least-norm fit).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..fast import OK, fast_model
from ..fast.entry import single
from ..model import Model
from .description import constraint_set
from .fast import fit_size, scratch_size

__all__ = ["ContactFit", "FittedForces"]

_ndarray = np.ndarray


class FittedForces(NamedTuple):
    """A batch of N fits: lam (N, m), rest = r beyond lam (N, nv), each contact's force along the
    ground normal and its size across it (N, k), and the contacts' Jacobian A (N, m, nv)."""

    lam: np.ndarray
    rest: np.ndarray
    normal: np.ndarray
    tangential: np.ndarray
    A: np.ndarray


class ContactFit:
    """The fit of one model's contacts (contacts only, no mimic joints; see the module docstring),
    checked once, for a loop that calls it at every sample (a node, a replay's blocks).

    ``fit(q, base_pose, r, active)`` with q (N, n), base_pose (N or 1, 4, 4) or None on a fixed
    base, r (N, nv), active (N or 1, k) bools or None for all: FittedForces in new arrays
    (A's array is reused by the next call), or None where the compiled path does not answer (other
    constraints, not float64 C-contiguous arrays, a wrong shape or value, rows too close to
    dependent): the caller's numpy path then answers or words the error. up (3,): the ground
    normal in world axes, a unit vector.
    The kernel is looked up (loaded from numba's cache, or compiled) when the object is made.
    """

    def __init__(self, model: Model, constraints, up) -> None:
        cs = constraint_set(model, constraints)
        self.m, self.k, self.nv = cs.m, cs.k, model.nv
        self.up = np.ascontiguousarray(up, dtype=np.float64)
        fc = cs._fast
        self._static = None
        if fc is not None:
            assert fc.scratch.shape[0] >= scratch_size(model.nb, model.nv, cs.m)
            fm = fast_model(model)
            self._static = (single.contact_fit_many, fm.handle, fc.ci, fc.cf, fc.scratch)
            self._fixed = fm.fixed
            self._identity = fm.identity[None].copy()
            self._all = np.ones((1, cs.k), dtype=bool)
        self._size = fit_size(model.nv, cs.m, cs.k)
        self._A = np.empty((1, cs.m, model.nv))

    def __call__(self, q, base_pose, r, active) -> FittedForces | None:
        if type(q) is not _ndarray or q.ndim != 2:
            return None
        N = q.shape[0]
        A = self._A if N == 1 else np.empty((N, self.m, self.nv))
        out = np.empty((N, self._size))
        if not self._run(q, base_pose, r, active, A, out):
            return None
        m, nv, k = self.m, self.nv, self.k
        return FittedForces(out[:, :m], out[:, m:m + nv], out[:, m + nv:m + nv + k], out[:, m + nv + k:], A)

    def rest_one(self, q, base_pose, r, active) -> np.ndarray | None:
        """What remains of r beyond the fitted forces for one sample (q (n,), base_pose (4, 4) or None,
        r (nv,), active (k,) or None): r_beyond (nv,) in a new array, or None as the call above."""
        if type(q) is not _ndarray or q.ndim != 1:
            return None
        out = np.empty((1, self._size))
        if not self._run(q[None], None if base_pose is None else base_pose[None], r[None],
                         None if active is None else active[None], self._A, out):
            return None
        return out[0, self.m:self.m + self.nv]

    def _run(self, q, base_pose, r, active, A, out) -> bool:
        """The kernel on N samples (the call's arguments, A and out for its results): whether it answered."""
        if self._static is None or (base_pose is None) is not self._fixed:
            return False
        kernel, handle, ci, cf, scratch = self._static
        try:
            return kernel(handle, ci, cf, scratch, q, self._identity if base_pose is None else base_pose, r,
                          self._all if active is None else active, self.up, A, out) == OK
        except TypeError:  # not float64 C-contiguous, a read-only array, other dimensions: the numpy path
            return False
