"""Joint friction: Coulomb with a smooth sign, viscous, and a constant offset per joint.

    tau_f,i = f_c,i tanh(qd_i / eps) + f_v,i qd_i + f_o,i

The tanh makes the torque smooth through zero velocity (eps, rad/s or m/s, is the velocity at
which 76% of the Coulomb level is reached). The same function serves the node's friction
compensation, the observer model and the identification (whose columns are friction_regressor).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checks import check_vector

__all__ = ["Friction", "friction_torque", "friction_regressor", "DEFAULT_SMOOTHING"]

DEFAULT_SMOOTHING = 0.01


@dataclass(frozen=True)
class Friction:
    """Per-joint friction parameters, model joint order (each (n,)); zeros mean no friction."""

    coulomb: np.ndarray
    viscous: np.ndarray
    offset: np.ndarray = field(default=None)  # type: ignore[assignment]
    smoothing: float = DEFAULT_SMOOTHING

    def __post_init__(self) -> None:
        n = np.size(self.coulomb)
        offset = np.zeros(n) if self.offset is None else self.offset
        for name, x in (("coulomb", self.coulomb), ("viscous", self.viscous), ("offset", offset)):
            arr = check_vector(f"friction_{name}", np.atleast_1d(x) if np.size(x) else np.zeros(0), n).copy()
            if arr.ndim != 1:
                raise ValueError(f"friction_{name}: expected one value per joint, got shape {arr.shape}")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        if not (np.isfinite(self.smoothing) and self.smoothing > 0):
            raise ValueError(f"smoothing: expected a velocity > 0, got {self.smoothing!r}")

    @classmethod
    def zero(cls, n: int) -> "Friction":
        return cls(np.zeros(n), np.zeros(n))


def friction_regressor(qd, smoothing: float = DEFAULT_SMOOTHING) -> np.ndarray:
    """Columns of the friction torque, (..., n) -> (..., n, 3 n): tau_f = Y_f (f_c, f_v, f_o) stacked
    per joint, (f_c,0, f_v,0, f_o,0, f_c,1, ...)."""
    qd = np.asarray(qd, dtype=float)
    n = qd.shape[-1]
    Y = np.zeros(qd.shape + (n, 3))
    idx = np.arange(n)
    Y[..., idx, idx, 0] = np.tanh(qd / smoothing)
    Y[..., idx, idx, 1] = qd
    Y[..., idx, idx, 2] = 1.0
    return Y.reshape(qd.shape + (3 * n,))


def friction_torque(friction: Friction, qd) -> np.ndarray:
    """tau_f (..., n) of joint velocities qd (..., n) (the joint part of v, not the base twist)."""
    qd = check_vector("qd", qd, friction.coulomb.shape[0])
    return friction.coulomb * np.tanh(qd / friction.smoothing) + friction.viscous * qd + friction.offset
