"""Per-joint residual statistics, accumulated block by block in constant memory.

torque residual = measured effort - inverse-dynamics torque (RNEA at the estimated
acceleration): what the model does not explain (friction, payload, model errors, contacts).
acceleration residual = predicted acceleration (ABA with the measured effort) - estimated
acceleration (derivative of the recorded velocities).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray


@dataclass
class Running:
    """Count, sum, sum of squares and largest magnitude of one residual per joint."""

    size: int
    count: NDArray[np.int64] = field(init=False)
    total: NDArray[np.float64] = field(init=False)
    squares: NDArray[np.float64] = field(init=False)
    peak: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        self.count = np.zeros(self.size, dtype=np.int64)
        self.total = np.zeros(self.size)
        self.squares = np.zeros(self.size)
        self.peak = np.zeros(self.size)

    def add(self, residual: NDArray[np.float64]) -> None:
        """residual: (N, size); NaN entries (nothing measured) are left out."""
        ok = np.isfinite(residual)
        r = np.where(ok, residual, 0.0)
        self.count += ok.sum(axis=0)
        self.total += r.sum(axis=0)
        self.squares += (r * r).sum(axis=0)
        if len(r):
            self.peak = np.maximum(self.peak, np.abs(r).max(axis=0))

    def stats(self, j: int) -> dict[str, float | int | None]:
        n = int(self.count[j])
        if n == 0:
            return {"count": 0, "rms": None, "mean": None, "max_abs": None}
        return {
            "count": n,
            "rms": math.sqrt(self.squares[j] / n),
            "mean": self.total[j] / n,
            "max_abs": float(self.peak[j]),
        }


@dataclass
class ResidualSummary:
    joint_names: tuple[str, ...]
    torque: Running = field(init=False)
    acceleration: Running = field(init=False)
    samples: int = 0

    def __post_init__(self) -> None:
        self.torque = Running(len(self.joint_names))
        self.acceleration = Running(len(self.joint_names))

    def add(self, effort: NDArray[np.float64], tau_id: NDArray[np.float64],
            qdd_pred: NDArray[np.float64] | None, qdd_est: NDArray[np.float64]) -> None:
        """All (N, n) in model order; qdd_est holds the joint part only."""
        self.samples += len(effort)
        self.torque.add(effort - tau_id)
        if qdd_pred is not None:
            self.acceleration.add(qdd_pred - qdd_est)

    def as_dict(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "joints": {
                name: {
                    "torque_residual_Nm": self.torque.stats(j),
                    "acceleration_residual_rad_s2": self.acceleration.stats(j),
                }
                for j, name in enumerate(self.joint_names)
            },
        }

    def table(self) -> str:
        return format_table(self.as_dict())

    def save(self, path: Path, extra: dict[str, Any]) -> None:
        path.write_text(json.dumps(self.as_dict() | extra, indent=2) + "\n")


def format_table(summary: dict[str, Any]) -> str:
    """Fixed-width text table of a summary dict (as saved in summary.json)."""
    width = max([16] + [len(name) for name in summary["joints"]])
    head = (
        f"{'joint':<{width}} {'n':>7} | {'tau res RMS':>11} {'mean':>9} {'max|.|':>9} "
        f"| {'qdd res RMS':>11} {'mean':>9} {'max|.|':>9}"
    )
    lines = [
        f"{'':<{width + 8}} | effort - ID torque [N m or N]  | predicted - estimated qdd [rad/s^2 or m/s^2]",
        head,
        "-" * len(head),
    ]
    for name, row in summary["joints"].items():
        t, a = row["torque_residual_Nm"], row["acceleration_residual_rad_s2"]
        lines.append(
            f"{name:<{width}} {t['count']:>7} | {_num(t['rms'], 11)} {_num(t['mean'], 9)} "
            f"{_num(t['max_abs'], 9)} | {_num(a['rms'], 11)} {_num(a['mean'], 9)} {_num(a['max_abs'], 9)}"
        )
    return "\n".join(lines)


def _num(x: float | None, width: int) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}.4g}"
