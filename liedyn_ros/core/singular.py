"""When forward dynamics refuses a singular articulated inertia: one rule for every path.

Forward dynamics eliminates the coordinates from the leaves to the root, as the articulated-body
algorithm does: the pivots of M = L^T L taken from the last coordinate to the first are the ABA's
D_i = S_i^T J^_i S_i (Featherstone, RBDA 6.5), and those of a floating base are the pivots of its
articulated inertia J^_0 taken from its last row (f_z) to its first (m_x). Every path factors in
that order: the recursions (reference and compiled: aba, hybrid, aba_time_derivatives), and the
factorizations of M (mimic joints or a partly prescribed base, aba_derivatives, contacts).

A pivot d passes when  d > SINGULAR_RTOL * inertia_scale(model);  any other pivot (zero, negative,
NaN, or small against the robot's size) makes the articulated inertia singular or indefinite, and
the algorithms raise SingularInertiaError instead of returning accelerations of 1e15 and more: a
massless subtree on a moving joint, a massless floating base whose joints repeat its own motion
(bullet3's cartpole, pendulum5), massless links between joints that align. A batch raises for the
first such sample, named by its index: no partial result.

The scale is one number per model, the largest diagonal entry of M at q = 0, so that every path
compares its own pivots (of J^_i in the recursions, of M in the factorizations) with the same size
and reaches the same verdict. M's diagonal, not the link inertias: a pivot's rounding error grows
with the m r^2 of the links eliminated before it, which M carries. On a singular model that error
stays below 1e-13 of this scale (chains of up to 100 links); a real robot's smallest pivot is above
1e-5 of it (example-robot-data).
"""
from __future__ import annotations

import numpy as np

from .model import Model, SingularInertiaError

__all__ = ["SINGULAR_RTOL", "inertia_scale", "pivot_ok", "refuse"]

SINGULAR_RTOL = 1e-11


def inertia_scale(model: Model) -> float:
    """The largest diagonal entry of M(q = 0): the size every pivot is compared with (kept on the model)."""
    scale = model.__dict__.get("_inertia_scale")
    if scale is None:
        scale = float(_mass_matrix_diagonal(model).max(initial=0.0))
        object.__setattr__(model, "_inertia_scale", scale)  # Model is frozen; the cache is no model field
    return scale


def _mass_matrix_diagonal(model: Model) -> np.ndarray:
    """diag M(q = 0) by one backward pass of composite inertias, Jc_lambda += X^T Jc_i X (O(bodies):
    the dense M of a 3,000-link chain would not fit in memory). M_jj = S_i^T Jc_i S_i for the body i
    joint j moves; a mimic coordinate moves several bodies, whose cross terms need the dense M."""
    if (np.count_nonzero(model.P, axis=0) > 1).any():
        from .reference.mass_matrix import mass_matrix  # here: the reference imports this module

        return np.diagonal(mass_matrix(model, np.zeros(model.n)))
    from .reference.kinematics import joint_transforms  # here: the reference imports this module

    _, X = joint_transforms(model, np.zeros((1, model.n)))
    X = X[0]
    Jc = np.array(model.J, dtype=float)
    Jc_base = np.array(model.J_base, dtype=float)
    for i in range(len(model.parent) - 1, -1, -1):
        parent = int(model.parent[i])
        child = X[i].T @ Jc[i] @ X[i]
        if parent >= 0:
            Jc[parent] += child
        else:
            Jc_base += child
    body = np.einsum("bi,bij,bj->b", model.S, Jc, model.S)
    joint = (model.P ** 2).T @ body
    return np.concatenate([np.diagonal(Jc_base), joint]) if model.floating_base else joint


def pivot_ok(pivot: np.ndarray, scale: float) -> np.ndarray:
    """The rule, on an array of pivots (the reference) or one float (compiled, fast.spatial.pivot_ok):
    False where singular, NaN included."""
    return pivot > SINGULAR_RTOL * scale


def refuse(model: Model, where: str, body: int, failed: np.ndarray, shape: tuple[int, ...]) -> None:
    """Raise SingularInertiaError about `where` (a joint, the floating base) with the link flaws below
    `body`, naming the first sample of a batch of `shape` where `failed` (flattened, (B,)) holds."""
    if shape:
        index = np.unravel_index(int(np.flatnonzero(failed)[0]), shape)
        where += f" at sample {index[0] if len(shape) == 1 else tuple(int(i) for i in index)}"
    raise SingularInertiaError(where, model.inertia_flaws_below(body))
