"""Public entry points: validate with checks.prepare, run the fast kernel or the reference, restore shapes."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks import prepare
from ..model import Model
from ..reference.hybrid import _mask, hybrid_batch
from . import first_order

__all__ = [
    "rnea_derivatives",
    "aba_derivatives",
    "hybrid_derivatives",
    "rnea_time_derivatives",
    "aba_time_derivatives",
]

Derivatives = tuple[np.ndarray, np.ndarray, np.ndarray]


def rnea_derivatives(model: Model, q, v, a, *, base_pose=None, fast: bool = True) -> Derivatives:
    """(dtau/dq, dtau/dv, dtau/da = M) of tau = rnea(q, v, a), each (..., nv, nv).

    Floating base: column k < 6 of dtau/dq is the derivative along T_world_base exp([e_k]).
    Mimic joints: derivatives w.r.t. the coordinates (q_body = P q + q_offset).
    fast=False runs the readable reference (Kim Table 5) instead of the numba kernel.
    """
    if fast and (single := _single(model, q, v, a, base_pose, False)) is not None:
        return single
    batch = prepare(model, q, {"v": v, "a": a}, base_pose=base_pose)
    out = _rnea_derivatives(model, batch, *batch.vectors, fast)
    return tuple(batch.restore(x) for x in out)  # type: ignore[return-value]


def _single(model: Model, q, v, x, base_pose, forward: bool) -> Derivatives | None:
    """The numba single-sample path for plain float64 vectors; None means: take the general path."""
    from .fast import derivatives_single, is_single_sample
    if not is_single_sample(model, q, v, x, base_pose):
        return None
    return derivatives_single(model, q, v, x, base_pose, forward)


def _rnea_derivatives(model: Model, batch, v: np.ndarray, a: np.ndarray, fast: bool) -> Derivatives:
    if fast:
        from .fast import rnea_derivatives_fast
        return rnea_derivatives_fast(model, batch, v, a)
    return first_order.rnea_derivatives_batch(model, batch, v, a)


def aba_derivatives(model: Model, q, v, tau, *, base_pose=None, fast: bool = True) -> Derivatives:
    """(dqdd/dq, dqdd/dv, dqdd/dtau = M^-1) of a = aba(q, v, tau), each (..., nv, nv).

    Differentiating ID(q, v, FD(q, v, tau)) = tau: dFD/dx = -M^-1 dID/dx at a = FD(q, v, tau).
    """
    if fast and (single := _single(model, q, v, tau, base_pose, True)) is not None:
        return single
    batch = prepare(model, q, {"v": v, "tau": tau}, base_pose=base_pose)
    v_, tau_ = batch.vectors
    if fast:
        from .fast import aba_derivatives_fast
        out = aba_derivatives_fast(model, batch, v_, tau_)
    else:
        _, a = hybrid_batch(model, batch, v_, tau_, np.zeros(model.nv, dtype=bool))
        out = first_order.aba_from_rnea_derivatives(*first_order.rnea_derivatives_batch(model, batch, v_, a))
    return tuple(batch.restore(x) for x in out)  # type: ignore[return-value]


def hybrid_derivatives(model: Model, q, v, a_or_tau, prescribed, *, base_pose=None, fast: bool = True
                       ) -> Derivatives:
    """Derivatives of hybrid dynamics (Kim Table 7): (dy/dq, dy/dv, dy/du), each (..., nv, nv).

    u = a_or_tau holds the given accelerations where `prescribed` and the given forces elsewhere;
    y, the unknowns, holds the forces where `prescribed` and the accelerations elsewhere (the
    outputs of `hybrid` that were not given). With nothing prescribed this is `aba_derivatives`;
    with everything prescribed, `rnea_derivatives`.
    """
    mask = _mask(model, prescribed)
    batch = prepare(model, q, {"v": v, "a_or_tau": a_or_tau}, base_pose=base_pose)
    v_, u = batch.vectors
    _, a = hybrid_batch(model, batch, v_, u, mask)
    dq, dv, M = _rnea_derivatives(model, batch, v_, a, fast)
    out = first_order.hybrid_from_rnea_derivatives(dq, dv, M, mask)
    return tuple(batch.restore(x) for x in out)  # type: ignore[return-value]


def rnea_time_derivatives(model: Model, q, v_derivs: Sequence, *, base_pose=None) -> list[np.ndarray]:
    """[tau, tau', ..., tau^(r)] along the motion with v_derivs = [v, v', ..., v^(r+1)]."""
    from .time_derivatives import rnea_time_derivatives_batch
    batch = _prepare_sequence(model, q, "v_derivs", v_derivs, 2, base_pose)
    return [batch.restore(x) for x in rnea_time_derivatives_batch(model, batch, batch.vectors)]


def aba_time_derivatives(model: Model, q, v, tau_derivs: Sequence, *, base_pose=None) -> list[np.ndarray]:
    """[a, a', ..., a^(r)] along the motion driven by tau_derivs = [tau, tau', ..., tau^(r)] from (q, v)."""
    from .time_derivatives import aba_time_derivatives_batch
    batch = _prepare_sequence(model, q, "tau_derivs", tau_derivs, 1, base_pose, v=v)
    v_, *taus = batch.vectors
    return [batch.restore(x) for x in aba_time_derivatives_batch(model, batch, v_, taus)]


def _prepare_sequence(model: Model, q, name: str, seq: Sequence, minimum: int, base_pose, v=None):
    if isinstance(seq, np.ndarray) and seq.ndim == 1 or not hasattr(seq, "__len__") or len(seq) < minimum:
        raise ValueError(f"{name}: expected a list of at least {minimum} generalized vectors "
                         f"(got {type(seq).__name__})")
    vectors = {} if v is None else {"v": v}
    vectors.update({f"{name}[{k}]": x for k, x in enumerate(seq)})
    return prepare(model, q, vectors, base_pose=base_pose)
