"""The public algorithms: validate the inputs, run the compiled kernels, restore shapes.

A single sample of float64 vectors (with external wrenches, if any, as (6,) arrays) goes
straight to a `*_one` kernel, which checks lengths, NaN and the pose itself (a few hundred
nanoseconds instead of numpy's microseconds); a wrench on one link goes to a `*_link_one`
kernel with the link's row in the model's link table (FastModel.links; -1, which the kernel
refuses, for an unknown link), which maps it to its body itself. Anything else (lists, batches, other dtypes)
takes the general path: `checks.prepare` validates and flattens it, a `*_many` kernel computes
it (over threads for a large batch, fast.threads). Lists and batches are sent there before the
kernel is tried, since a dispatcher that refuses its arguments (other dtypes, read-only arrays:
TypeError) takes about a millisecond to explain why. Whenever a kernel reports bad input or a
singular inertia, the readable reference implementation (`liedyn_ros.core.reference`) runs on
the same arguments: it raises the precise error.
"""
from __future__ import annotations

import numpy as np

from . import reference
from .checks import Batch, prepare
from .fast import OK, FastModel, fast_model
from .fast.aba import hybrid_many
from .fast.coriolis import coriolis_many
from .fast.crba import mass_matrix_many
from .fast.entry import single
from .fast.rnea import gravity_many, rnea_many
from .fast.threads import run_batch
from .model import Model
from .reference.hybrid import _mask as check_prescribed

__all__ = ["rnea", "aba", "gravity", "mass_matrix", "coriolis_matrix", "hybrid"]


_ndarray, _empty = np.ndarray, np.empty


def _forces(fm: FastModel, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """The batch's external wrenches on bodies and base, or empty arrays when there are none."""
    if batch.f_body is None:
        return fm.no_body_force, fm.no_base_force
    return batch.f_body, batch.f_base


def _sample_wrenches(model: Model, f_ext) -> tuple[np.ndarray, np.ndarray] | None:
    """One sample's f_ext as (f_body (1, nb, 6), f_base (1, 6)) in body frames (checks.prepare's map).

    None unless f_ext maps known links to (6,) arrays: the general path then takes the batch or
    words the error. The kernel checks the wrenches for NaN.
    """
    if type(f_ext) is not dict:
        return None
    maps = model._wrench_maps
    f_body, f_base = np.zeros((1, model.nb, 6)), np.zeros((1, 6))
    for link, w in f_ext.items():
        entry = maps.get(link)
        if entry is None or type(w) is not _ndarray or w.shape != (6,):
            return None
        body, X = entry
        F = w if X is None else w @ X
        if body < 0:
            f_base[0] += F
        else:
            f_body[0, body] += F
    return f_body, f_base


# The single-sample branches below are written out in each function rather than shared: a helper
# call costs about a tenth of a microsecond, a twentieth of the Panda's rnea. Each tests that the
# arguments are numpy arrays, q a vector, and the pose given exactly when the base floats; the
# kernel checks the rest (dtype, lengths, NaN, SE(3)) or refuses the call with TypeError.

def rnea(model: Model, q, v, a, *, base_pose=None, f_ext=None) -> np.ndarray:
    """Inverse dynamics: tau = M(q) a + C(q, v) v + g(q) - sum_k J_k^T F_ext,k, shape (..., nv).

    For a floating base the first six entries are the base wrench (m, f) in the base frame.
    """
    try:
        fm = model._fast
    except AttributeError:  # a try costs nothing until it raises: the first call builds the layout
        fm = fast_model(model)
    T = fm.identity if base_pose is None else base_pose
    if (type(q) is _ndarray and type(v) is _ndarray and type(a) is _ndarray and type(T) is _ndarray
            and q.ndim == 1 and (base_pose is None) is fm.fixed):
        out = _empty(fm.nv)
        try:
            if f_ext is None:
                if single.rnea_one(fm.handle, q, v, a, T, out) == OK:
                    return out
            elif type(f_ext) is dict and len(f_ext) == 1:  # one link: the row -1 of an unknown one is refused
                for link, w in f_ext.items():
                    if single.rnea_link_one(fm.handle, q, v, a, T, w, fm.links.get(link, -1), out) == OK:
                        return out
            elif (wrenches := _sample_wrenches(model, f_ext)) is not None:
                if single.rnea_wrench_one(fm.handle, q, v, a, T, *wrenches, out) == OK:
                    return out
        except TypeError:  # not single float64 vectors: the general path below
            pass
    batch = prepare(model, q, {"v": v, "a": a}, base_pose=base_pose, f_ext=f_ext)
    return batch.restore(rnea_batch(fm, batch))


def rnea_batch(fm: FastModel, batch: Batch) -> np.ndarray:
    """rnea of a batch that checks.prepare has validated (q, v, a), flat (B, nv). The private entry of the
    constrained algorithms, which validate their arguments once (constraints.state.setup)."""
    out = np.empty((batch.q.shape[0], fm.nv))
    run_batch(rnea_many, out.shape[0], fm.mf, fm.mi, fm.ws_size, batch.q, *batch.vectors, batch.base_pose,
              *_forces(fm, batch), out)
    return out


def gravity(model: Model, q, *, base_pose=None) -> np.ndarray:
    """g(q) = rnea(q, 0, 0): the generalized forces that hold the robot still against gravity."""
    try:
        fm = model._fast
    except AttributeError:
        fm = fast_model(model)
    T = fm.identity if base_pose is None else base_pose
    if type(q) is _ndarray and type(T) is _ndarray and q.ndim == 1 and (base_pose is None) is fm.fixed:
        out = _empty(fm.nv)
        try:
            if single.gravity_one(fm.handle, q, T, out) == OK:
                return out
        except TypeError:
            pass
    batch = prepare(model, q, base_pose=base_pose)
    out = np.empty((batch.q.shape[0], fm.nv))
    run_batch(gravity_many, out.shape[0], fm.mf, fm.mi, fm.ws_size, batch.q, batch.base_pose, out)
    return batch.restore(out)


def mass_matrix(model: Model, q, *, base_pose=None) -> np.ndarray:
    """M(q), symmetric positive definite, shape (..., nv, nv); independent of the base pose.

    For a floating base the first six rows and columns belong to the base twist (omega, v).
    """
    try:
        fm = model._fast
    except AttributeError:
        fm = fast_model(model)
    T = fm.identity if base_pose is None else base_pose
    if type(q) is _ndarray and type(T) is _ndarray and q.ndim == 1 and (base_pose is None or not fm.fixed):
        out = _empty((fm.nv, fm.nv))
        try:
            if single.mass_matrix_one(fm.handle, q, T, out) == OK:
                return out
        except TypeError:
            pass
    batch = prepare(model, q, base_pose=base_pose, needs_pose=False)
    out = np.empty((batch.q.shape[0], fm.nv, fm.nv))
    run_batch(mass_matrix_many, out.shape[0], fm.mf, fm.mi, fm.ws_size, batch.q, out)
    return batch.restore(out)


def coriolis_matrix(model: Model, q, v, *, base_pose=None) -> np.ndarray:
    """C(q, v) with C v = rnea(q, v, 0) - g(q) and Mdot - 2C skew-symmetric, shape (..., nv, nv)."""
    try:
        fm = model._fast
    except AttributeError:
        fm = fast_model(model)
    T = fm.identity if base_pose is None else base_pose
    if (type(q) is _ndarray and type(v) is _ndarray and type(T) is _ndarray and q.ndim == 1
            and (base_pose is None or not fm.fixed)):
        out = _empty((fm.nv, fm.nv))
        try:
            if single.coriolis_one(fm.handle, q, v, T, out) == OK:
                return out
        except TypeError:
            pass
    batch = prepare(model, q, {"v": v}, base_pose=base_pose, needs_pose=False)
    out = np.empty((batch.q.shape[0], fm.nv, fm.nv))
    run_batch(coriolis_many, out.shape[0], fm.mf, fm.mi, fm.ws_size, batch.q, *batch.vectors, out)
    return batch.restore(out)


def hybrid(model: Model, q, v, a_or_tau, prescribed, *, base_pose=None, f_ext=None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid dynamics (Kim Table 4): accelerations given where `prescribed`, forces elsewhere.

    Returns (tau, a), both (..., nv): tau holds the given forces and the forces the prescribed
    motions need; a holds the prescribed accelerations and the resulting free ones. Raises
    SingularInertiaError when the free coordinates' articulated inertia is singular (core.singular).
    """
    try:
        fm = model._fast
    except AttributeError:
        fm = fast_model(model)
    mask = check_prescribed(model, prescribed)
    T = fm.identity if base_pose is None else base_pose
    if (type(q) is _ndarray and type(v) is _ndarray and type(a_or_tau) is _ndarray and type(T) is _ndarray
            and q.ndim == 1 and (base_pose is None) is fm.fixed):
        tau, a = _empty(fm.nv), _empty(fm.nv)
        try:
            if f_ext is None:
                if single.hybrid_one(fm.handle, q, v, a_or_tau, mask, T, tau, a) == OK:
                    return tau, a
            elif type(f_ext) is dict and len(f_ext) == 1:
                for link, w in f_ext.items():
                    if single.hybrid_link_one(fm.handle, q, v, a_or_tau, mask, T, w, fm.links.get(link, -1), tau,
                                              a) == OK:
                        return tau, a
            elif (wrenches := _sample_wrenches(model, f_ext)) is not None:
                if single.hybrid_wrench_one(fm.handle, q, v, a_or_tau, mask, T, *wrenches, tau, a) == OK:
                    return tau, a
        except TypeError:
            pass
    return _hybrid(model, fm, q, v, a_or_tau, mask, base_pose, f_ext, "a_or_tau")


def aba(model: Model, q, v, tau, *, base_pose=None, f_ext=None) -> np.ndarray:
    """Forward dynamics by the articulated-body algorithm (Kim Table 3): a = M^-1 (tau - b).

    For a floating base tau starts with the base wrench (m, f) applied in the base frame (zero
    for a free-floating robot), and a starts with the base acceleration dV_0/dt. Raises
    SingularInertiaError when an articulated inertia is singular (core.singular's rule, the same on
    every path); a batch with one such sample raises, naming the first.
    """
    try:
        fm = model._fast
    except AttributeError:
        fm = fast_model(model)
    T = fm.identity if base_pose is None else base_pose
    if (type(q) is _ndarray and type(v) is _ndarray and type(tau) is _ndarray and type(T) is _ndarray
            and q.ndim == 1 and (base_pose is None) is fm.fixed):
        tau_out, a = _empty(fm.nv), _empty(fm.nv)
        try:
            if f_ext is None:
                if single.hybrid_one(fm.handle, q, v, tau, fm.free, T, tau_out, a) == OK:
                    return a
            elif type(f_ext) is dict and len(f_ext) == 1:
                for link, w in f_ext.items():
                    if single.hybrid_link_one(fm.handle, q, v, tau, fm.free, T, w, fm.links.get(link, -1), tau_out,
                                              a) == OK:
                        return a
            elif (wrenches := _sample_wrenches(model, f_ext)) is not None:
                if single.hybrid_wrench_one(fm.handle, q, v, tau, fm.free, T, *wrenches, tau_out, a) == OK:
                    return a
        except TypeError:
            pass
    return _hybrid(model, fm, q, v, tau, fm.free, base_pose, f_ext, "tau", with_tau=False)[1]


def _hybrid(model: Model, fm: FastModel, q, v, u, mask: np.ndarray, base_pose, f_ext, name: str,
            with_tau: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """hybrid (or aba) through the general path; the reference raises on a singular inertia.

    Without `with_tau` (aba) the kernel writes tau to scratch and tau is returned empty.
    """
    batch = prepare(model, q, {"v": v, name: u}, base_pose=base_pose, f_ext=f_ext)
    out = hybrid_batch(fm, batch, mask, with_tau)
    if out is None:
        return reference.hybrid(model, q, v, u, mask, base_pose=base_pose, f_ext=f_ext)
    tau, a = out
    return (batch.restore(tau) if with_tau else tau), batch.restore(a)


def hybrid_batch(fm: FastModel, batch: Batch, mask: np.ndarray, with_tau: bool = True
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """hybrid (aba: mask fm.free) of a batch that checks.prepare has validated (q, v, u), flat (tau, a), each
    (B, nv) (tau (0, nv) without `with_tau`); None when the kernel reports a singular inertia (the public call
    then raises it). The constrained algorithms' private entry, as rnea_batch."""
    B = batch.q.shape[0]
    tau, a = np.empty((B if with_tau else 0, fm.nv)), np.empty((B, fm.nv))
    if run_batch(hybrid_many, B, fm.mf, fm.mi, fm.ws_size, batch.q, *batch.vectors, mask, batch.base_pose,
                 *_forces(fm, batch), tau, a) != OK:
        return None
    return tau, a
