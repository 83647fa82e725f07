"""PNG plots of measured vs computed torque, the residual, the accelerations, and the external
torque (momentum observer) with the collision events.

`PlotRecorder` keeps a thinned copy of the series in bounded memory: it keeps every
`stride`-th sample and doubles the stride (dropping every other kept sample) whenever
it holds more than `2 * points` samples, so a bag of any length ends with between
`points` and `2 * points` evenly spaced samples.

Every panel of every figure spans the same time axis (seconds since the first joint state of
the recording, the axis of --start/--end), carries its joint's units (N m and rad/s^2, or N and
m/s^2 for a prismatic joint), and one legend above the panels names the curves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray

    from .samples import SampleBlock

SERIES = ("effort", "tau_ff", "tau_g", "qdd_pred", "qdd_est", "tau_ext")
CONTACT_SERIES = ("tau_fit", "tau_free")   # per joint, with contacts
PER_CONTACT = ("normal", "normal_fit", "active")


class PlotRecorder:
    """effort_label: "measured" (JointState effort) or "commanded" (--effort-topic); gravity: plot
    the gravity torque (not when the model's gravity is zero, where it is a flat line);
    contact_links: the contacts, whose normal forces get a figure with their phases shaded."""

    def __init__(self, joint_names: tuple[str, ...], kinds: tuple[str, ...] = (), points: int = 4000, *,
                 effort_label: str = "measured", gravity: bool = True, contact_links: tuple[str, ...] = (),
                 constrained: bool = False) -> None:
        self.joint_names = joint_names
        self.kinds = kinds or ("revolute",) * len(joint_names)
        self.effort_label, self.gravity = effort_label, gravity
        self.t0: float | None = None  # s, the first joint state's stamp: time zero of every figure
        self.points = points
        self.stride = 1
        self._seen = 0
        self.t: NDArray[np.float64] = np.zeros(0)
        self.contact_links = contact_links
        n, k = len(joint_names), len(contact_links)
        self.constrained = constrained or k > 0  # contacts or loops
        self.series = SERIES + (CONTACT_SERIES if self.constrained else ()) + (PER_CONTACT if k else ())
        self.data: dict[str, NDArray[np.float64]] = {
            name: np.zeros((0, k if name in PER_CONTACT else n)) for name in self.series}

    def add_block(self, block: SampleBlock, out: Any, qdd_est: NDArray[np.float64], fit: Any,
                  tau_ext: NDArray[np.float64]) -> None:
        """A block's samples, its pipeline.DynamicsOutputs, with contacts its run.ContactFit, and
        the observer's external torques."""
        stamps_ns, effort = block.stamp_ns, block.effort
        qdd_pred = out.qdd_pred if out.qdd_pred is not None else np.full_like(qdd_est, np.nan)
        series = dict(effort=effort, tau_ff=out.tau_ff, tau_g=out.tau_g, qdd_pred=qdd_pred, qdd_est=qdd_est,
                      tau_ext=tau_ext)
        if fit is not None:
            series |= dict(tau_fit=fit.tau, tau_free=out.tau_free)
        if fit is not None and out.contact_active is not None:
            series |= dict(normal=fit.normal, normal_fit=fit.normal_fit, active=out.contact_active.astype(np.float64))
        self.add(stamps_ns, **series)

    def add(self, stamps_ns: NDArray[np.int64], **series: NDArray[np.float64]) -> None:
        index = np.arange(self._seen, self._seen + len(stamps_ns))
        keep = index % self.stride == 0
        self._seen += len(stamps_ns)
        self.t = np.concatenate([self.t, stamps_ns[keep] * 1e-9])
        for name in self.series:
            self.data[name] = np.concatenate([self.data[name], series[name][keep]])
        while len(self.t) > 2 * self.points:
            self.stride *= 2
            self.t = self.t[::2]
            self.data = {k: v[::2] for k, v in self.data.items()}

    def save(self, out_dir: Path, collisions: list[dict[str, Any]], threshold: NDArray[np.float64]) -> list[Path]:
        """Writes torques.png, torque_residuals.png, accelerations.png (and contact_forces.png)
        and external_torque.png: the observer's estimate, +-threshold dashed, the collisions shaded."""
        if not len(self.t):
            return []
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        t0 = self.t[0] if self.t0 is None else self.t0
        t = self.t - t0
        spans = [(e["start_ns"] * 1e-9 - t0, t[-1] if e["end_ns"] is None else e["end_ns"] * 1e-9 - t0)
                 for e in collisions]
        figures = self._contact_figures(out_dir, t) if self.constrained else self._figures(out_dir, t)
        return figures + [self._figure(out_dir / "external_torque.png", "External torque (momentum observer), "
                                       "collisions shaded", t, [("estimate", self.data["tau_ext"])], 0, threshold, spans)]

    def _figures(self, out_dir: Path, t: NDArray[np.float64]) -> list[Path]:
        """Torques against RNEA, their residuals, accelerations."""
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

    def _contact_figures(self, out_dir: Path, t: NDArray[np.float64]) -> list[Path]:
        """With contacts or loops: torques against the consistent ones (configured, closest to the
        effort) and the unconstrained RNEA, their residuals, accelerations, contact forces."""
        d, effort = self.data, self.effort_label
        forces = [self._contact_figure(out_dir / "contact_forces.png", t)] if self.contact_links else []
        return [
            self._figure(out_dir / "torques.png", f"{effort.capitalize()} effort vs contact-consistent torque", t,
                         [(effort, d["effort"]), ("contact-consistent (configured)", d["tau_ff"]),
                          ("contact-consistent (closest)", d["tau_fit"]), ("unconstrained RNEA", d["tau_free"])], 0),
            self._figure(out_dir / "torque_residuals.png", f"Residual: {effort} - torque", t,
                         [("configured", d["effort"] - d["tau_ff"]), ("closest", d["effort"] - d["tau_fit"]),
                          ("unconstrained", d["effort"] - d["tau_free"])], 0),
            self._figure(out_dir / "accelerations.png", "Predicted (constrained ABA) vs estimated acceleration", t,
                         [("estimated (Savitzky-Golay)", d["qdd_est"]), ("predicted", d["qdd_pred"])], 1),
        ] + forces

    def _contact_figure(self, path: Path, t: NDArray[np.float64]) -> Path:
        """Normal force of every contact over time, its contact phases shaded."""
        import matplotlib.pyplot as plt

        k, d = len(self.contact_links), self.data
        fig, axes = plt.subplots(k, 1, sharex=True, figsize=(10, 1.6 * k + 1.4), squeeze=False)
        for i, ax in enumerate(axes[:, 0]):
            active = d["active"][:, i] > 0.5
            edges = np.flatnonzero(np.diff(np.concatenate([[0], active.astype(np.int8), [0]])))
            for start, stop in zip(edges[::2], edges[1::2]):
                ax.axvspan(t[start], t[min(stop, len(t) - 1)], color="tab:green", alpha=0.15, linewidth=0)
            ax.plot(t, d["normal"][:, i], label="configured solution", linewidth=0.9)
            ax.plot(t, d["normal_fit"][:, i], label="closest to the measurements", linewidth=0.9, linestyle="--")
            ax.set_ylabel(f"{self.contact_links[i]}\n[N]", fontsize=7)
            ax.grid(True, alpha=0.3)
        axes[-1, 0].set_xlabel("time since the first joint state [s] (shaded: in contact)")
        fig.suptitle("Contact normal forces")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1.0 - 0.45 / fig.get_figheight()))
        fig.tight_layout(rect=(0, 0, 1, 1.0 - 0.6 / fig.get_figheight()))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path

    def _figure(self, path: Path, title: str, t: NDArray[np.float64],
                curves: list[tuple[str, NDArray[np.float64]]], unit: int,
                threshold: NDArray[np.float64] | None = None, spans: list[tuple[float, float]] | None = None) -> Path:
        """One panel per joint; `unit` picks the torque (0) or acceleration (1) units of UNITS;
        `threshold` (n,) is drawn dashed at +-threshold, `spans` (start, end) [s] shaded."""
        import matplotlib.pyplot as plt

        from .summary import UNITS

        n = len(self.joint_names)
        fig, axes = plt.subplots(n, 1, sharex=True, figsize=(10, 1.6 * n + 1.4), squeeze=False)
        for j, ax in enumerate(axes[:, 0]):
            for label, values in curves:
                ax.plot(t, values[:, j], label=label, linewidth=0.9)
            if threshold is not None:
                for sign in (1, -1):
                    ax.axhline(sign * threshold[j], color="red", linestyle="--", linewidth=0.7)
            for start, end in spans or []:
                ax.axvspan(start, end, color="red", alpha=0.2)
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
