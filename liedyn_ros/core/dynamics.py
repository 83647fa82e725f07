"""The public algorithms: validate the inputs, run the compiled kernels, restore shapes.

A single sample of float64 vectors goes straight to a `*_one` kernel, which checks lengths, NaN
and the pose itself (a few hundred nanoseconds instead of numpy's microseconds). Anything else
(lists, batches, external wrenches, other dtypes) takes the general path: `checks.prepare`
validates and flattens it, a parallel `*_many` kernel computes it. Whenever a kernel reports bad
input or a singular inertia, the readable reference implementation (`liedyn_ros.core.reference`)
is run on the same arguments: it raises the precise ValueError.
"""
from __future__ import annotations

import numpy as np

from . import reference
from .checks import Batch, prepare
from .fast import OK, FastModel, fast_model
from .fast.rnea import gravity_one, rnea_many, rnea_one
from .model import Model

__all__ = ["rnea", "aba", "gravity", "mass_matrix", "coriolis_matrix", "hybrid"]

_coriolis_matrix = reference.coriolis_matrix
_mass_matrix = reference.mass_matrix
aba, hybrid = reference.aba, reference.hybrid


def _forces(fm: FastModel, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """The batch's external wrenches on bodies and base, or empty arrays when there are none."""
    if batch.f_body is None:
        return fm.no_body_force, fm.no_base_force
    return batch.f_body, batch.f_base


def rnea(model: Model, q, v, a, *, base_pose=None, f_ext=None) -> np.ndarray:
    """Inverse dynamics: tau = M(q) a + C(q, v) v + g(q) - sum_k J_k^T F_ext,k, shape (..., nv).

    For a floating base the first six entries are the base wrench (m, f) in the base frame.
    """
    fm = fast_model(model)
    if f_ext is None and (base_pose is None) != fm.floating:
        out = np.empty(fm.nv)
        try:
            if rnea_one(fm.mf, fm.mi, fm.ws, q, v, a, fm.identity if base_pose is None else base_pose, out) == OK:
                return out
        except TypeError:  # not single float64 vectors: the general path below
            pass
    batch = prepare(model, q, {"v": v, "a": a}, base_pose=base_pose, f_ext=f_ext)
    out = np.empty((batch.q.shape[0], fm.nv))
    if rnea_many(fm.mf, fm.mi, fm.ws.size, batch.q, *batch.vectors, batch.base_pose, *_forces(fm, batch), out) != OK:
        return reference.rnea(model, q, v, a, base_pose=base_pose, f_ext=f_ext)
    return batch.restore(out)


def gravity(model: Model, q, *, base_pose=None) -> np.ndarray:
    """g(q) = rnea(q, 0, 0): the generalized forces that hold the robot still against gravity."""
    fm = fast_model(model)
    if (base_pose is None) != fm.floating:
        out = np.empty(fm.nv)
        try:
            if gravity_one(fm.mf, fm.mi, fm.ws, q, fm.identity if base_pose is None else base_pose, out) == OK:
                return out
        except TypeError:
            pass
    batch = prepare(model, q, base_pose=base_pose)
    zero = np.zeros((batch.q.shape[0], fm.nv))
    out = np.empty_like(zero)
    if rnea_many(fm.mf, fm.mi, fm.ws.size, batch.q, zero, zero, batch.base_pose, fm.no_body_force,
                 fm.no_base_force, out) != OK:
        return reference.gravity(model, q, base_pose=base_pose)
    return batch.restore(out)


def mass_matrix(model: Model, q, *, base_pose=None) -> np.ndarray:
    """M(q), symmetric positive definite, shape (..., nv, nv)."""
    return _mass_matrix(model, q, base_pose=base_pose)


def coriolis_matrix(model: Model, q, v, *, base_pose=None) -> np.ndarray:
    """C(q, v) with C v = rnea(q, v, 0) - g(q) and Mdot - 2C skew-symmetric, shape (..., nv, nv)."""
    return _coriolis_matrix(model, q, v, base_pose=base_pose)
