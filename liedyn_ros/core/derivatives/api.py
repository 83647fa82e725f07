"""Public entry points: validate with checks.prepare, run the fast kernel or the reference, restore shapes."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks import prepare
from ..fast import OK, fast_model
from ..fast.aba import hybrid_many
from ..fast.entry import single
from ..fast.threads import run_batch
from ..model import Model
from ..reference.hybrid import _mask, free_inverse, hybrid_batch
from . import first_order
from .fast import derivatives_batch, rnea_derivatives_fast, workspace_of
from .time_derivatives import aba_time_derivatives_batch, rnea_time_derivatives_batch
from .time_fast import aba_time_many, rnea_time_many

__all__ = [
    "rnea_derivatives",
    "aba_derivatives",
    "hybrid_derivatives",
    "rnea_time_derivatives",
    "aba_time_derivatives",
]

Derivatives = tuple[np.ndarray, np.ndarray, np.ndarray]
_ndarray = np.ndarray


def rnea_derivatives(model: Model, q, v, a, *, base_pose=None, fast: bool = True) -> Derivatives:
    """(dtau/dq, dtau/dv, dtau/da = M) of tau = rnea(q, v, a), each (..., nv, nv).

    Floating base: column k < 6 of dtau/dq is the derivative along T_world_base exp([e_k]).
    Mimic joints: derivatives w.r.t. the coordinates (q_body = P q + q_offset).
    fast=False runs the readable reference (Kim Table 5) instead of the numba kernel.
    """
    if fast:
        return _fast(model, q, v, a, base_pose, False, "a")
    batch = prepare(model, q, {"v": v, "a": a}, base_pose=base_pose)
    out = first_order.rnea_derivatives_batch(model, batch, *batch.vectors)
    return tuple(batch.restore(x) for x in out)  # type: ignore[return-value]


def aba_derivatives(model: Model, q, v, tau, *, base_pose=None, fast: bool = True) -> Derivatives:
    """(dqdd/dq, dqdd/dv, dqdd/dtau = M^-1) of a = aba(q, v, tau), each (..., nv, nv).

    Differentiating ID(q, v, FD(q, v, tau)) = tau: dFD/dx = -M^-1 dID/dx at a = FD(q, v, tau).
    Raises SingularInertiaError where aba does (core.singular's rule, on M's factor too).
    """
    if fast:
        return _fast(model, q, v, tau, base_pose, True, "tau")
    batch = prepare(model, q, {"v": v, "tau": tau}, base_pose=base_pose)
    v_, tau_ = batch.vectors
    free = np.ones(model.nv, dtype=bool)
    _, a = hybrid_batch(model, batch, v_, tau_, ~free)
    dq, dv, M = first_order.rnea_derivatives_batch(model, batch, v_, a)
    out = first_order.aba_from_rnea_derivatives(dq, dv, free_inverse(model, M, free, batch.shape))
    return tuple(batch.restore(x) for x in out)  # type: ignore[return-value]


def _fast(model: Model, q, v, x, base_pose, forward: bool, name: str) -> Derivatives:
    """The numba kernels: a single sample of numpy arrays goes straight in (the kernel checks dtype,
    lengths, NaN and the pose, as in core.dynamics); a batch, or bad input, goes through
    checks.prepare, which raises the precise ValueError, and the batch kernel. A mass matrix that
    core.singular's rule refuses is left to the reference, which raises."""
    try:
        fm = model._fast
    except AttributeError:  # a try costs nothing until it raises: the first call builds the layout
        fm = fast_model(model)
    T = fm.identity if base_pose is None else base_pose
    if (type(q) is _ndarray and type(v) is _ndarray and type(x) is _ndarray and type(T) is _ndarray
            and q.ndim == 1 and (base_pose is None) is fm.fixed):
        out = np.empty((3, fm.nv, fm.nv))
        try:
            if single.derivatives_one(fm.handle, workspace_of(model), q, v, x, T, forward, out) == OK:
                return out[0], out[1], out[2]
        except TypeError:  # not float64 vectors: the general path below
            pass
    batch = prepare(model, q, {"v": v, name: x}, base_pose=base_pose)
    out = derivatives_batch(model, batch, *batch.vectors, forward)
    if out is None:
        return aba_derivatives(model, q, v, x, base_pose=base_pose, fast=False)
    return batch.restore(out[:, 0]), batch.restore(out[:, 1]), batch.restore(out[:, 2])


def _as_sample(x, ndim: int) -> np.ndarray | None:
    """x as the kernels' one argument type, a float64 C-contiguous writeable array of `ndim`
    dimensions (no copy when it is one already), or None for a batch or anything that is no
    array of numbers, which checks.prepare then handles.

    The time derivatives take their orders as a list of vectors, which this stacks; converted here
    rather than left to the dispatcher, which takes about a millisecond to refuse a call.
    """
    try:
        a = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return a if a.ndim == ndim and a.flags.writeable else None


def _pose(fm, base_pose) -> np.ndarray | None:
    """The pose a single-sample kernel takes (the identity for a fixed base), or None when it is
    missing or unexpected (checks.prepare words that)."""
    if (base_pose is None) is not fm.fixed:
        return None
    return fm.identity if base_pose is None else _as_sample(base_pose, 2)


def _rnea_derivatives(model: Model, batch, v: np.ndarray, a: np.ndarray, fast: bool) -> Derivatives:
    if fast:
        return rnea_derivatives_fast(model, batch, v, a)
    return first_order.rnea_derivatives_batch(model, batch, v, a)


def hybrid_derivatives(model: Model, q, v, a_or_tau, prescribed, *, base_pose=None, fast: bool = True
                       ) -> Derivatives:
    """Derivatives of hybrid dynamics (Kim Table 7): (dy/dq, dy/dv, dy/du), each (..., nv, nv).

    u = a_or_tau holds the given accelerations where `prescribed` and the given forces elsewhere;
    y, the unknowns, holds the forces where `prescribed` and the accelerations elsewhere (the
    outputs of `hybrid` that were not given). With nothing prescribed this is `aba_derivatives`;
    with everything prescribed, `rnea_derivatives`. Raises SingularInertiaError where hybrid does.
    """
    mask = _mask(model, prescribed)
    batch = prepare(model, q, {"v": v, "a_or_tau": a_or_tau}, base_pose=base_pose)
    v_, u = batch.vectors
    a = _hybrid_fast(model, batch, v_, u, mask) if fast else None
    if a is None:  # the reference, which also raises on a singular inertia
        _, a = hybrid_batch(model, batch, v_, u, mask)
    dq, dv, M = _rnea_derivatives(model, batch, v_, a, fast)
    out = first_order.hybrid_from_rnea_derivatives(dq, dv, M, free_inverse(model, M, ~mask, batch.shape), mask)
    return tuple(batch.restore(x) for x in out)  # type: ignore[return-value]


def _hybrid_fast(model: Model, batch, v: np.ndarray, u: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """The accelerations of hybrid dynamics by the compiled kernel, or None when it reports a singular inertia."""
    fm = fast_model(model)
    a = np.empty((batch.q.shape[0], fm.nv))
    status = run_batch(hybrid_many, a.shape[0], fm.mf, fm.mi, fm.ws_size, batch.q, v, u, mask, batch.base_pose,
                       fm.no_body_force, fm.no_base_force, a[:0], a)  # tau of no rows: not needed
    return a if status == OK else None


def rnea_time_derivatives(model: Model, q, v_derivs: Sequence, *, base_pose=None, fast: bool = True
                          ) -> list[np.ndarray]:
    """[tau, tau', ..., tau^(r)] along the motion with v_derivs = [v, v', ..., v^(r+1)].

    fast=False runs the readable reference (time_derivatives) instead of the numba kernel. A single
    sample (q (n,), v_derivs a list of (nv,) vectors or an (r + 2, nv) array) goes straight to the
    kernel, which checks it; a batch or bad input goes through checks.prepare.
    """
    fm = fast_model(model)
    if fast:
        q1, vd, T = _as_sample(q, 1), _as_sample(v_derivs, 2), _pose(fm, base_pose)
        if q1 is not None and vd is not None and T is not None:
            out = np.empty((max(vd.shape[0] - 1, 0), fm.nv))
            if single.rnea_time_one(fm.handle, q1, vd, T, out) == OK:
                return list(out)
    batch = _prepare_sequence(model, q, "v_derivs", v_derivs, 2, base_pose)
    if not fast:
        return [batch.restore(x) for x in rnea_time_derivatives_batch(model, batch, batch.vectors)]
    vd = np.stack(batch.vectors, 1)
    out = np.empty((vd.shape[0], vd.shape[1] - 1, fm.nv))
    run_batch(rnea_time_many, out.shape[0], fm.mf, fm.mi, batch.q, vd, batch.base_pose, out)
    return [batch.restore(out[:, k]) for k in range(out.shape[1])]


def aba_time_derivatives(model: Model, q, v, tau_derivs: Sequence, *, base_pose=None, fast: bool = True
                         ) -> list[np.ndarray]:
    """[a, a', ..., a^(r)] along the motion driven by tau_derivs = [tau, tau', ..., tau^(r)] from (q, v).

    fast=False runs the readable reference; so does an articulated inertia that core.singular's rule
    refuses, which it reports (SingularInertiaError, naming the first such sample of a batch).
    A single sample goes straight to the kernel, as in rnea_time_derivatives.
    """
    fm = fast_model(model)
    if fast:
        q1, v1, td, T = _as_sample(q, 1), _as_sample(v, 1), _as_sample(tau_derivs, 2), _pose(fm, base_pose)
        if q1 is not None and v1 is not None and td is not None and T is not None:
            out = np.empty((td.shape[0], fm.nv))
            if single.aba_time_one(fm.handle, q1, v1, td, T, out) == OK:
                return list(out)
    batch = _prepare_sequence(model, q, "tau_derivs", tau_derivs, 1, base_pose, v=v)
    v_, *taus = batch.vectors
    if fast:
        td = np.stack(taus, 1)
        out = np.empty_like(td)
        if run_batch(aba_time_many, out.shape[0], fm.mf, fm.mi, batch.q, v_, td, batch.base_pose, out) == OK:
            return [batch.restore(out[:, k]) for k in range(out.shape[1])]
    return [batch.restore(x) for x in aba_time_derivatives_batch(model, batch, v_, taus)]


def _prepare_sequence(model: Model, q, name: str, seq: Sequence, minimum: int, base_pose, v=None):
    if isinstance(seq, np.ndarray) and seq.ndim == 1 or not hasattr(seq, "__len__") or len(seq) < minimum:
        raise ValueError(f"{name}: expected a list of at least {minimum} generalized vectors "
                         f"(got {type(seq).__name__})")
    vectors = {} if v is None else {"v": v}
    vectors.update({f"{name}[{k}]": x for k, x in enumerate(seq)})
    return prepare(model, q, vectors, base_pose=base_pose)
