"""Forward dynamics of a constrained system (Kim 2012, section 3.2, eqs. 67-69)."""
from __future__ import annotations

import weakref

import numpy as np

from .. import reference
from ..checks import Batch
from ..dynamics import aba, hybrid_batch
from ..fast import OK, fast_model
from ..fast.entry import single
from ..model import Model
from .description import ConstraintSet, constraint_set
from .state import Problem, per_sample, setup, solve_psd

__all__ = ["constrained_aba", "unforced"]

_UNFORCED: "weakref.WeakKeyDictionary[Model, Model]" = weakref.WeakKeyDictionary()
TOL = 1e-6  # the default largest |A v| and loop position error


def unforced(model: Model) -> Model:
    """The model without gravity: aba(unforced, q, 0, f) = M^-1 f, Kim's simplified solve."""
    out = _UNFORCED.get(model)
    if out is None:
        out = _UNFORCED[model] = model.with_gravity((0.0, 0.0, 0.0))
    return out


def unit_solves(model: Model, pb: Problem, unit: np.ndarray, prescribed: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """hybrid of the unforced model at rest, per sample b and row i of `unit` (B, m, nv) at the batch's q and pose:
    (tau (B, m, nv), a (B, m, nv)); aba (tau (0, nv)) for `prescribed` None. The m solves of one call, as
    hybrid(unforced(model), q[:, None], 0, unit, ...) gives them, without checking the batch setup has checked
    (core.dynamics.hybrid_batch); None where the kernel reports a singular inertia (the public call then raises it)."""
    free = unforced(model)
    fm = fast_model(free)
    B, m, nv = unit.shape
    poses = pb.batch.base_pose  # one for all samples stays one
    batch = Batch((B, m), np.repeat(pb.batch.q, m, axis=0), [np.zeros((B * m, nv)), unit.reshape(B * m, nv)],
                  poses if len(poses) == 1 else np.repeat(poses, m, axis=0), None, None)
    out = hybrid_batch(fm, batch, fm.free if prescribed is None else prescribed, prescribed is not None)
    if out is None:
        return None
    tau, a = out
    return (tau if prescribed is None else tau.reshape(B, m, nv)), a.reshape(B, m, nv)


def baumgarte_terms(terms, baumgarte) -> np.ndarray:
    """kd A v + kp e, the feedback that pulls a drifting state back onto the constraints."""
    if baumgarte is None:
        return 0.0
    kp, kd = (float(x) for x in baumgarte)
    if not (kp >= 0 and kd >= 0):
        raise ValueError(f"baumgarte: expected gains (kp, kd) >= 0, got {baumgarte!r}")
    return kd * terms.Av + kp * terms.e


def constrained_aba(model: Model, q, v, tau, constraints, *, base_pose=None, f_ext=None, active=None,
                    baumgarte=None, tol: float = TOL, fast: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(a, lam) of  M a + b = tau + A^T lam,  A a + c = 0  (Kim eqs. 54, 67-69).

        a_r = aba(q, v, tau)                         the open tree's answer
        Y   = M^-1 A^T                               m articulated-body solves of unit forces
        (A M^-1 A^T) lam = -(A a_r + c [+ kd A v + kp e])                            (67)
        a   = a_r + Y lam                                                            (68-69)

    Shapes: q (..., n), v and tau (..., nv) -> a (..., nv), lam (..., m). lam is what each
    constraint applies to the robot, in its frame (a force (3,) or a wrench (m, f) (6,)), zero for
    an inactive one. A rank-deficient A (redundant contacts) still gives the unique a and the
    least-norm lam. active: booleans (..., k), one per constraint (default all). baumgarte: gains
    (kp, kd) of the feedback above (kp acts on loop closures' position error). tol: the largest
    |A v| and loop position error accepted (ValueError beyond, saying which constraint and how far).

    Contacts on a model without mimic joints take the compiled path (constraints.fast: the same
    equations on a tree-sparse factor of M); loop closures, f_ext, mimic joints, a rank-deficient
    A M^-1 A^T and every error take this readable one (its terms, rnea and aba compiled, and for
    loop sets its least-norm solve: fast_minimisers), which `fast=False` runs with no compiled code.
    """
    # A ConstraintSet of this model needs no lookup (constraint_set's checks, a call less per sample)
    cs = constraints if type(constraints) is ConstraintSet and constraints.model is model \
        else constraint_set(model, constraints)
    if fast and cs._fast is not None and f_ext is None:
        out = _fast(model, cs, q, v, tau, base_pose, active, baumgarte, tol)
        if out is not None:
            return out
    pb = setup(model, q, {"v": v, "tau": tau}, cs, base_pose, active, tol, fast)
    B, t = pb.batch.q.shape[0], pb.terms
    forward = aba if fast else reference.aba  # fast=False: no compiled code at all
    fm = fast_model(model)
    # setup has checked the batch: without f_ext it goes to the kernel unchecked (a singular inertia: the public
    # call below raises it)
    out = hybrid_batch(fm, pb.batch, fm.free, with_tau=False) if fast and f_ext is None else None
    a_r = forward(model, q, v, tau, base_pose=base_pose, f_ext=f_ext).reshape(B, model.nv) if out is None else out[1]
    units = unit_solves(model, pb, t.A, None) if fast else None
    if units is None:
        pose = pb.pose()
        Y = forward(unforced(model), pb.batch.q[:, None, :], np.zeros(model.nv), t.A,
                    base_pose=None if pose is None else pose[:, None])  # (B, m, nv): row i = (M^-1 A^T)_i
    else:
        Y = units[1]
    K = t.A @ np.swapaxes(Y, -1, -2)
    lam = -solve_psd(K, np.einsum("bij,bj->bi", t.A, a_r) + t.c + baumgarte_terms(t, baumgarte),
                     fast and cs._fast is None)  # compiled for loop sets, as constrained_rnea's minimiser
    lam = np.where(pb.rows, lam, 0.0)  # an inactive constraint applies nothing (not rounding)
    a = a_r + np.einsum("bi,bij->bj", lam, Y)
    return pb.restore(a), pb.restore(lam)


_ndarray = np.ndarray


_PARAMS: dict = {}


def kernel_parameters(baumgarte, tol) -> np.ndarray | None:
    """The kernel's (kp, kd, tol), one array per distinct value (the kernel only reads it); None if invalid."""
    key = (baumgarte, tol) if baumgarte is None or type(baumgarte) is tuple else None
    out = _PARAMS.get(key) if key is not None else None
    if out is None:
        try:
            kp, kd = (0.0, 0.0) if baumgarte is None else (float(x) for x in baumgarte)
            out = np.array([kp, kd, float(tol)])
        except (TypeError, ValueError):
            return None
        if not (kp >= 0 and kd >= 0 and tol >= 0):
            return None
        if key is not None and len(_PARAMS) < 64:
            _PARAMS[key] = out
    return out


_DEFAULT_PARAMS = kernel_parameters(None, TOL)  # the defaults' (kp, kd, tol), looked up once


def _fast(model: Model, cs, q, v, tau, base_pose, active, baumgarte, tol):
    """The compiled path for contacts: (a, lam), or None to let the reference answer (or raise)."""
    try:
        fm = model._fast
    except AttributeError:  # the first call builds the layout (as in core.dynamics)
        fm = fast_model(model)
    fc = cs._fast
    params = _DEFAULT_PARAMS if baumgarte is None and tol is TOL else kernel_parameters(baumgarte, tol)
    if params is None:
        return None
    T = fm.identity if base_pose is None else base_pose
    one = (type(q) is _ndarray and type(v) is _ndarray and type(tau) is _ndarray and type(T) is _ndarray
           and q.ndim == 1 and (base_pose is None) is fm.fixed)
    if one and (active is None or (type(active) is _ndarray and active.ndim == 1)):
        a, lam = np.empty(fm.nv), np.empty(fc.m)  # fc.m: an int (cs.m reads the rows' array)
        try:
            if single.constrained_aba_one(fm.handle, fc.ci, fc.cf, fc.scratch, q, v, tau, T,
                             fc.all_active if active is None else active, params, a, lam) == OK:
                return a, lam
        except TypeError:  # not float64 vectors, a bool mask: the general path
            pass
        return None
    kernel = single.constrained_aba_one
    out = per_sample(model, cs, q, {"v": v, "tau": tau}, base_pose, active, (fm.nv, cs.m),
                     lambda *x: kernel(fm.handle, fc.ci, fc.cf, fc.scratch, *x[:5], params, *x[5:]))
    return None if out is None else (out[0], out[1])
