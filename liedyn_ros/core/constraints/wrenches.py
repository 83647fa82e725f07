"""Whether contact forces are physical: pushing, and inside a friction cone."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .description import ConstraintSet

__all__ = ["ContactCheck", "constraint_wrenches", "contact_forces", "contact_wrench_checks", "wrench_spread"]


@dataclass
class ContactCheck:
    """One contact's force in its frame (z: the surface normal into the robot), shapes (...,).

    normal f_z (> 0 pushes), tangential |(f_x, f_y)|, pushes (f_z >= 0), in_cone (|f_t| <= mu f_z),
    and wrench: lam's entries of this contact, (..., 3) force or (..., 6) wrench (m, f).
    """

    name: str
    wrench: np.ndarray
    normal: np.ndarray
    tangential: np.ndarray
    pushes: np.ndarray
    in_cone: np.ndarray


def contact_wrench_checks(constraints: ConstraintSet, lam, friction: float, *, atol: float = 1e-9
                          ) -> list[ContactCheck]:
    """Per contact of `constraints` (a ConstraintSet; loop closures skipped): is lam (..., m) physical?

    pushes:  f_z >= -atol;   in_cone: |f_xy| <= friction f_z + atol  (Coulomb, friction >= 0).
    """
    if not isinstance(constraints, ConstraintSet):
        raise ValueError("constraints: expected the ConstraintSet the forces were computed with (constraint_set)")
    if not friction >= 0:
        raise ValueError(f"friction: expected a coefficient >= 0, got {friction!r}")
    lam = np.asarray(lam, dtype=float)
    if lam.ndim == 0 or lam.shape[-1] != constraints.m:
        raise ValueError(f"lam: expected length {constraints.m} in the last dimension, got shape {lam.shape}")
    out = []
    for k in np.flatnonzero(constraints.is_contact):
        w = lam[..., constraints.rows[k]:constraints.rows[k + 1]]
        f = w[..., -3:]
        normal, tangential = f[..., 2], np.hypot(f[..., 0], f[..., 1])
        out.append(ContactCheck(constraints.names[k], w, normal, tangential, normal >= -atol,
                                tangential <= friction * normal + atol))
    return out


def contact_forces(constraints: ConstraintSet, lam, frames, up) -> tuple[np.ndarray, np.ndarray]:
    """(normal, tangential) (..., k): each contact's force f in lam (..., m) against the ground normal up,

        normal = f_w . up,   tangential = |f_w - normal up|,   f_w = R_a f in world axes

    with frames (..., k, 4, 4) the constraint frames' world poses (constraint_frames) and up (3,) a unit
    vector in world axes. A point foot's frame turns with its shank, so its z is no ground normal (what
    contact_wrench_checks takes). NaN for loop closures.
    """
    lam, frames = np.asarray(lam, dtype=float), np.asarray(frames, dtype=float)
    normal = np.full(lam.shape[:-1] + (constraints.k,), np.nan)
    tangential = normal.copy()
    for j in np.flatnonzero(constraints.is_contact):
        f = lam[..., constraints.rows[j + 1] - 3:constraints.rows[j + 1]]  # the force: a flat contact's last rows
        if not constraints.world[j]:
            f = np.einsum("...ij,...j->...i", frames[..., j, :3, :3], f)
        normal[..., j] = f @ up
        tangential[..., j] = np.sqrt(np.maximum((f * f).sum(axis=-1) - normal[..., j] ** 2, 0.0))
    return normal, tangential


def wrench_spread(constraints: ConstraintSet) -> np.ndarray:
    """S (6k, m) with lam @ S.T the k constraint wrenches (m, f) stacked: a point's force as (0, f)."""
    S = np.zeros((6 * constraints.k, constraints.m))
    for j in range(constraints.k):
        r0, r1 = constraints.rows[j], constraints.rows[j + 1]
        S[6 * j + 6 - (r1 - r0):6 * j + 6, r0:r1] = np.eye(r1 - r0)
    return S


def constraint_wrenches(constraints: ConstraintSet, lam) -> np.ndarray:
    """lam (..., m) -> (..., k, 6): what each constraint applies as a wrench (m, f) in its lam axes."""
    lam = np.asarray(lam, dtype=float)
    return (lam @ wrench_spread(constraints).T).reshape(lam.shape[:-1] + (constraints.k, 6))
