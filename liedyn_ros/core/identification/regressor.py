"""The joint-torque regressor Y(q, v, a): rnea(q, v, a) = Y pi with pi = parameters(model).

The compiled kernel is fast/regressor.py; this is its public entry, routed like `dynamics.rnea`:
a single sample of float64 vectors goes to the single-sample kernel, anything else through
`checks.prepare` to the batch kernel.
"""
from __future__ import annotations

import numpy as np

from ..checks import prepare
from ..fast import OK, fast_model
from ..fast.entry import single
from ..fast.regressor import regressor_many
from ..fast.threads import run_batch
from ..model import Model

__all__ = ["regressor"]

_ndarray = np.ndarray


def regressor(model: Model, q, v, a, *, base_pose=None) -> np.ndarray:
    """Y (..., nv, 10 k) with Y @ parameters(model) = rnea(model, q, v, a), k bodies (see parameters).

    Row order is rnea's (base wrench (m, f) first for a floating base); column block j holds
    body j's ten parameters in Pinocchio's order. Gravity enters Y, as in rnea.
    """
    fm = fast_model(model)
    k = model.nb + model.floating_base
    T = fm.identity if base_pose is None else base_pose
    if (type(q) is _ndarray and type(v) is _ndarray and type(a) is _ndarray and type(T) is _ndarray
            and q.ndim == 1 and (base_pose is None) is fm.fixed):
        out = np.empty((fm.nv, 10 * k))
        try:
            if single.regressor_one(fm.handle, q, v, a, T, out) == OK:
                return out
        except TypeError:  # not single float64 vectors: the general path below
            pass
    batch = prepare(model, q, {"v": v, "a": a}, base_pose=base_pose)
    out = np.empty((batch.q.shape[0], fm.nv, 10 * k))
    run_batch(regressor_many, out.shape[0], fm.mf, fm.mi, fm.ws_size, batch.q, *batch.vectors, batch.base_pose, out)
    return batch.restore(out)
