"""PNG plots of measured vs computed torque, the residual, and the accelerations.

`PlotRecorder` keeps a thinned copy of the series in bounded memory: it keeps every
`stride`-th sample and doubles the stride (dropping every other kept sample) whenever
it holds more than `2 * points` samples, so a bag of any length ends with between
`points` and `2 * points` evenly spaced samples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray

SERIES = ("effort", "tau_ff", "tau_g", "qdd_pred", "qdd_est")


class PlotRecorder:
    def __init__(self, joint_names: tuple[str, ...], points: int = 4000) -> None:
        self.joint_names = joint_names
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
        t = self.t - self.t[0]
        d = self.data
        return [
            self._figure(out_dir / "torques.png", "Measured effort vs inverse dynamics", t,
                         [("measured", d["effort"]), ("RNEA (feedforward)", d["tau_ff"]),
                          ("gravity", d["tau_g"])], "torque [N m]"),
            self._figure(out_dir / "torque_residuals.png", "Residual: measured - RNEA", t,
                         [("residual", d["effort"] - d["tau_ff"])], "torque [N m]"),
            self._figure(out_dir / "accelerations.png", "Predicted (ABA) vs estimated acceleration", t,
                         [("estimated (Savitzky-Golay)", d["qdd_est"]), ("predicted (ABA)", d["qdd_pred"])],
                         "acc. [rad/s^2]"),
        ]

    def _figure(self, path: Path, title: str, t: NDArray[np.float64],
                curves: list[tuple[str, NDArray[np.float64]]], ylabel: str) -> Path:
        import matplotlib.pyplot as plt

        n = len(self.joint_names)
        fig, axes = plt.subplots(n, 1, sharex=True, figsize=(10, 1.6 * n + 1.0), squeeze=False)
        for j, ax in enumerate(axes[:, 0]):
            for label, values in curves:
                ax.plot(t, values[:, j], label=label, linewidth=0.9)
            ax.set_ylabel(f"{self.joint_names[j]}\n{ylabel}", fontsize=7)
            ax.grid(True, alpha=0.3)
        axes[0, 0].legend(loc="upper right", fontsize=7)
        axes[-1, 0].set_xlabel("time since first sample [s]")
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path
