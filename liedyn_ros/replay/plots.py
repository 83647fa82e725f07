"""PNG plots of measured vs computed torque, the residual, and the accelerations.

`PlotRecorder` keeps a thinned copy of the series in bounded memory: it keeps every
`stride`-th sample and doubles the stride (dropping every other kept sample) whenever
it holds more than `2 * points` samples, so a bag of any length ends with between
`points` and `2 * points` evenly spaced samples.

Every panel of every figure spans the same time axis (seconds since the first joint state of
the recording, the axis of --start/--end), carries its joint's units (N m and rad/s^2, or N and
m/s^2 for a prismatic joint), and one legend above the panels names the curves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray

SERIES = ("effort", "tau_ff", "tau_g", "qdd_pred", "qdd_est")


class PlotRecorder:
    """effort_label: "measured" (JointState effort) or "commanded" (--effort-topic); gravity: plot
    the gravity torque (not when the model's gravity is zero, where it is a flat line)."""

    def __init__(self, joint_names: tuple[str, ...], kinds: tuple[str, ...] = (), points: int = 4000, *,
                 effort_label: str = "measured", gravity: bool = True) -> None:
        self.joint_names = joint_names
        self.kinds = kinds or ("revolute",) * len(joint_names)
        self.effort_label, self.gravity = effort_label, gravity
        self.t0: float | None = None  # s, the first joint state's stamp: time zero of every figure
        self.points = points
        self.stride = 1
        self._seen = 0
        self.t: NDArray[np.float64] = np.zeros(0)
        self.data: dict[str, NDArray[np.float64]] = {k: np.zeros((0, len(joint_names))) for k in SERIES}

    def add(self, stamps_ns: NDArray[np.int64], **series: NDArray[np.float64]) -> None:
        index = np.arange(self._seen, self._seen + len(stamps_ns))
        keep = index % self.stride == 0
        self._seen += len(stamps_ns)
        self.t = np.concatenate([self.t, stamps_ns[keep] * 1e-9])
        for name in SERIES:
            self.data[name] = np.concatenate([self.data[name], series[name][keep]])
        while len(self.t) > 2 * self.points:
            self.stride *= 2
            self.t = self.t[::2]
            self.data = {k: v[::2] for k, v in self.data.items()}

    def save(self, out_dir: Path) -> list[Path]:
        """Writes torques.png, torque_residuals.png and accelerations.png."""
        if not len(self.t):
            return []
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        t = self.t - (self.t[0] if self.t0 is None else self.t0)
        d, effort = self.data, self.effort_label
        torques = [(effort, d["effort"]), ("RNEA (feedforward)", d["tau_ff"])]
        if self.gravity:
            torques.append(("gravity", d["tau_g"]))
        return [
            self._figure(out_dir / "torques.png", f"{effort.capitalize()} effort vs inverse dynamics", t,
                         torques, 0),
            self._figure(out_dir / "torque_residuals.png", f"Residual: {effort} - RNEA", t,
                         [("residual", d["effort"] - d["tau_ff"])], 0),
            self._figure(out_dir / "accelerations.png", "Predicted (ABA) vs estimated acceleration", t,
                         [("estimated (Savitzky-Golay)", d["qdd_est"]), ("predicted (ABA)", d["qdd_pred"])], 1),
        ]

    def _figure(self, path: Path, title: str, t: NDArray[np.float64],
                curves: list[tuple[str, NDArray[np.float64]]], unit: int) -> Path:
        """One panel per joint; `unit` picks the torque (0) or acceleration (1) units of UNITS."""
        import matplotlib.pyplot as plt

        from .summary import UNITS

        n = len(self.joint_names)
        fig, axes = plt.subplots(n, 1, sharex=True, figsize=(10, 1.6 * n + 1.4), squeeze=False)
        for j, ax in enumerate(axes[:, 0]):
            for label, values in curves:
                ax.plot(t, values[:, j], label=label, linewidth=0.9)
            ax.set_ylabel(f"{self.joint_names[j]}\n[{UNITS[self.kinds[j]][unit]}]", fontsize=7)
            ax.grid(True, alpha=0.3)
        # Curves that start late (commands, predictions) must not move their panel's time axis.
        axes[0, 0].set_xlim(float(t[0]), float(t[-1]) if t[-1] > t[0] else float(t[0]) + 1.0)
        axes[-1, 0].set_xlabel("time since the first joint state [s]")
        fig.suptitle(title)
        # One legend above the panels: it never covers a curve, and names them for every panel.
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=len(curves), fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1.0 - 0.45 / fig.get_figheight()))
        fig.tight_layout(rect=(0, 0, 1, 1.0 - 0.6 / fig.get_figheight()))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path
