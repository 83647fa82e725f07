"""The joint limits an excitation trajectory keeps, and the effort bound between samples.

Position, velocity and effort limits come from the URDF (scaled down: an identification run
need not reach them), the acceleration limit from the user (URDF has none). A limit that is
absent, zero or infinite in the URDF bounds nothing; a moving joint must have a velocity limit.

Efforts are not linear in the trajectory, so they are bounded from a fine grid: with h the
spacing and tau', tau'' from `rnea_time_derivatives`, every t within h/2 of a sample t_k has

    |tau(t)| <= |tau(t_k)| + h/2 |tau'(t_k)| + h^2/8 max |tau''|        (Taylor, remainder term)

where max |tau''| over the interval is taken as twice the largest sampled |tau''|. This is a
margin, not a proof: it holds unless tau'' doubles between samples, which on the grids used
(dozens of samples per period of the highest harmonic) a dense independent check never saw.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ...derivatives import rnea_time_derivatives
from ...model import Model

__all__ = ["Limits", "excitation_limits", "effort_bound", "one_blas_thread"]


@dataclass(frozen=True)
class Limits:
    """Per joint, model order (n,): position range, |velocity|, |acceleration| and |effort| bounds
    (inf: unbounded)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    effort: np.ndarray

    def violations(self, names, q, qd, qdd, tau=None, where=None) -> list[str]:
        """One line per joint and quantity beyond its bound in samples (N, n), at the worst sample;
        empty when none. where(k) names sample k (default 'sample k')."""
        where = where or (lambda k: f"sample {k}")
        values = {"position": q, "velocity": qd, "acceleration": qdd, "effort": tau}
        excess = {"position": np.maximum(self.lower - q, q - self.upper), "velocity": np.abs(qd) - self.velocity,
                  "acceleration": np.abs(qdd) - self.acceleration}
        if tau is not None:
            excess["effort"] = np.abs(tau) - self.effort
        out = []
        for what, e in excess.items():
            for j in np.flatnonzero((e > 0).any(0)):
                k = int(np.argmax(e[:, j]))
                bound = (f"[{self.lower[j]:.6g}, {self.upper[j]:.6g}]" if what == "position"
                         else f"+-{getattr(self, what)[j]:.6g}")
                out.append(f"{where(k)}: {names[j]} {what} {values[what][k, j]:.6g} outside its limit {bound}")
        return out


def excitation_limits(model: Model, *, acceleration=5.0, velocity_scale: float = 0.5, effort_scale: float = 0.8,
                      position_margin: float = 0.05, ranges: dict[str, tuple[float, float]] | None = None,
                      moving=None) -> Limits:
    """The limits for an excitation of `model`: the URDF's position range shrunk by position_margin
    (rad or m) at each end and narrowed to `ranges` {joint: (lo, hi)}, velocity_scale x the URDF
    velocity limit, effort_scale x the URDF effort limit, `acceleration` (one value or one per joint).

    `moving` (joint names, default all) must have a velocity limit and a non-empty range."""
    n = model.n
    names = list(model.joint_names)
    lower = np.asarray(model.lower, dtype=float) + position_margin
    upper = np.asarray(model.upper, dtype=float) - position_margin
    for joint, (lo, hi) in (ranges or {}).items():
        if joint not in names:
            raise ValueError(f"ranges: unknown joint {joint!r}")
        j = names.index(joint)
        lower[j], upper[j] = max(lower[j], lo), min(upper[j], hi)
    acc = np.broadcast_to(np.asarray(acceleration, dtype=float), (n,)).copy()
    for name, scale in (("velocity_scale", velocity_scale), ("effort_scale", effort_scale)):
        if not (np.isfinite(scale) and 0 < scale <= 1):
            raise ValueError(f"{name}: expected a fraction in (0, 1], got {scale!r}")
    if not np.all(acc > 0):
        raise ValueError(f"acceleration: expected limits > 0, got {acc.tolist()}")
    velocity, effort = _set(model.velocity_limit) * velocity_scale, _set(model.effort_limit) * effort_scale
    for joint in moving if moving is not None else names:
        j = names.index(joint)
        if not np.isfinite(velocity[j]):
            raise ValueError(f"{joint}: no velocity limit in the URDF; a moving joint needs one")
        if not lower[j] < upper[j]:
            raise ValueError(f"{joint}: empty position range [{lower[j]:.4g}, {upper[j]:.4g}] after the margin "
                             f"{position_margin:g} and the ranges given")
    return Limits(lower, upper, velocity, acc, effort)


def _set(values) -> np.ndarray:
    """A URDF limit per joint; absent (inf) or zero (a common placeholder) is unbounded."""
    v = np.asarray(values, dtype=float)
    return np.where(np.isfinite(v) & (v > 0), v, np.inf)


def effort_bound(model: Model, q, derivs, h) -> np.ndarray:
    """Upper bound of |tau| (N, n) within h/2 (scalar or (N,)) of each sample (module docstring).

    derivs = [qd, qdd, q''', q''''] at the samples, each (N, n)."""
    tau, dtau, ddtau = rnea_time_derivatives(model, q, list(derivs))
    h = np.asarray(h, dtype=float).reshape(-1, 1) if np.ndim(h) else float(h)
    return np.abs(tau) + h / 2 * np.abs(dtau) + h ** 2 / 8 * 2 * np.abs(ddtau).max(0)


def one_blas_thread() -> contextlib.AbstractContextManager:
    """BLAS and LAPACK on one thread meanwhile, where threadpoolctl is installed: on matrices this
    small their thread pools cost 10-100x the work on a busy machine. Without it (a ROS 2 install
    by rosdep, which has no key for it) the same numbers, perhaps slower."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)
