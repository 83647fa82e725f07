"""Joint-space mass matrix in closed form, M = S^T G^T J G S (Park et al. eq. 51; Ploen & Park eq. 36)."""
from __future__ import annotations

import numpy as np

from ..checks import prepare
from ..model import Model
from .global_form import global_form


def mass_matrix(model: Model, q, *, base_pose=None) -> np.ndarray:
    """M(q), symmetric positive definite, shape (..., nv, nv).

    For a floating base the first six rows and columns belong to the base twist (omega, v) in the
    base frame; M does not depend on the base pose. Mimic joints: M = P^T M_bodies P.
    """
    batch = prepare(model, q, base_pose=base_pose, needs_pose=False)
    g = global_form(model, batch)
    GSP = g.G @ (g.S @ g.P)
    return batch.restore(np.swapaxes(GSP, -1, -2) @ g.J @ GSP)
