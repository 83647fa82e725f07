"""PNG plots of measured vs computed torque, the residual, the accelerations, and the external
torque (momentum observer) with the collision events.

`PlotRecorder` keeps a thinned copy of the series in bounded memory: it keeps every
`stride`-th sample and doubles the stride (dropping every other kept sample) whenever
it holds more than `2 * points` samples, so a bag of any length ends with between
`points` and `2 * points` evenly spaced samples.

Every panel of every figure spans the same time axis (seconds since the first joint state of
the recording, the axis of --start/--end), carries its joint's units (N m and rad/s^2, or N and
m/s^2 for a prismatic joint), and one legend above the panels names the curves, the collision
threshold and the kinds of events. Figures are zoomed to where the robot moves (when that is less
than most of the recording; the title says so); the residual and acceleration scales leave out
the first and last END_S of each run of samples (the derivative's and a command's start spikes;
the title says when that clips a curve); a panel with nothing to show says why; a curve that looks
identical to one drawn before it is dashed and a note says they coincide; no line bridges a gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .external import LIMIT_MIN_SAMPLES
from .summary import UNITS

if TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray

    from .samples import SampleBlock

SERIES = ("effort", "tau_ff", "tau_g", "qdd_pred", "qdd_est", "tau_ext", "speed", "at_limit")
CONTACT_SERIES = ("tau_fit", "tau_free")   # per joint, with contacts
PER_CONTACT = ("normal", "normal_fit", "active")
MOVING_SHARE = 0.02  # moving: some joint faster than 2% of the recording's top speed
ZOOM_SHARE = 0.8  # zoom when the motion spans less than this share of the recording
ZOOM_MARGIN = 0.1  # of the motion's span on each side, at least ZOOM_MIN_MARGIN_S
ZOOM_MIN_MARGIN_S = 0.2
END_S = 0.1  # s at each end of a run of values left out of the residual scales (the observer's settling time)
LATE_SHARE = 0.05  # curves that start later than this share of the window into it: the title says why
COINCIDE = 0.005  # curves closer than this share of their range look as one (a line's width)
EVENT_COLOURS = {"collision": "red", "limit": "tab:orange", "command_step": "tab:gray"}
AT_LIMIT = "joint at its URDF limit"  # hatched per panel on the torque figures: a simulator's stop pushes


class PlotRecorder:
    """effort_label: "measured" (JointState effort) or "commanded" (--effort-topic); gravity: plot
    the gravity torque (not when the model's gravity is zero, where it is a flat line);
    contact_links: the contacts, whose normal forces get a figure with their phases shaded."""

    def __init__(self, joint_names: tuple[str, ...], kinds: tuple[str, ...] = (), points: int = 4000, *,
                 effort_label: str = "measured", gravity: bool = True, contact_links: tuple[str, ...] = (),
                 constrained: bool = False, base_link: str = "") -> None:
        self.joint_names = joint_names
        self.kinds = kinds or ("revolute",) * len(joint_names)
        self.effort_label, self.gravity = effort_label, gravity
        self.t0: float | None = None  # s, the first joint state's stamp: time zero of every figure
        self.points = points
        self.stride = 1
        self._seen = 0
        self.t: NDArray[np.float64] = np.zeros(0)
        self._window = (0.0, 1.0, "")  # the figures' time axis and its title note (save)
        self.contact_links = contact_links
        n, k = len(joint_names), len(contact_links)
        self.constrained = constrained or k > 0  # contacts or loops
        # base_link: a floating base with contacts, whose force beyond the feet is watched for events too
        self.base_link = base_link
        self.series = (SERIES + (CONTACT_SERIES if self.constrained else ()) + (PER_CONTACT if k else ())
                       + (("base_force",) if base_link else ()))
        self.data: dict[str, NDArray[np.float64]] = {
            name: np.zeros((0, k if name in PER_CONTACT else 1 if name in ("speed", "base_force") else n))
            for name in self.series}

    def add_block(self, block: SampleBlock, out: Any, qdd_est: NDArray[np.float64], fit: Any,
                  tau_ext: NDArray[np.float64], at_limit: NDArray[np.bool_] | None = None,
                  base_force: NDArray[np.float64] | None = None) -> None:
        """A block's samples, its pipeline.DynamicsOutputs, with contacts its run.ContactFit, the
        observer's external torques, the joints at their URDF limits (external.joints_at_limit) and,
        with base_link, the magnitude of the force on the base beyond the feet (N,)."""
        stamps_ns, effort = block.stamp_ns, block.effort
        qdd_pred = out.qdd_pred if out.qdd_pred is not None else np.full_like(qdd_est, np.nan)
        speed = np.abs(block.v[:, block.v.shape[1] - effort.shape[1]:]).max(axis=1, keepdims=True)
        series = dict(effort=effort, tau_ff=out.tau_ff, tau_g=out.tau_g, qdd_pred=qdd_pred, qdd_est=qdd_est,
                      tau_ext=tau_ext, speed=speed,
                      at_limit=np.zeros_like(effort) if at_limit is None else at_limit.astype(np.float64))
        if self.base_link:
            series["base_force"] = (np.full(len(effort), np.nan) if base_force is None else base_force)[:, None]
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

    def save(self, out_dir: Path, collisions: list[dict[str, Any]], threshold: NDArray[np.float64] | None
             ) -> list[Path]:
        """Writes torques.png, torque_residuals.png, accelerations.png (and contact_forces.png)
        and external_torque.png: the observer's estimate, +-threshold dashed, the collisions shaded
        (threshold None: the observer is off, no such figure)."""
        if not len(self.t):
            return []
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        t0 = self.t[0] if self.t0 is None else self.t0
        t = self.t - t0
        self._window = self._motion_window(t)
        spans = [(e["start_ns"] * 1e-9 - t0, t[-1] if e["end_ns"] is None else e["end_ns"] * 1e-9 - t0,
                  e.get("kind", "collision")) for e in collisions]
        figures = self._contact_figures(out_dir, t) if self.constrained else self._figures(out_dir, t)
        if threshold is None:
            return figures
        estimate, panels = self.data["tau_ext"], None
        if self.base_link:  # the events also watch the base: its panel, or they would be shaded without a curve
            estimate = np.concatenate([estimate, self.data["base_force"]], axis=1)
            panels = [(name, UNITS[kind][0]) for name, kind in zip(self.joint_names, self.kinds)]
            panels.append((f"{self.base_link}\n|force beyond the feet|", "N"))
        return figures + [self._figure(out_dir / "external_torque.png", "External torque (momentum observer), "
                                       "events shaded", t, [("estimate", estimate)], 0, threshold, spans,
                                       missing=f"the observer needs a {self.effort_label} effort", limits=True,
                                       panels=panels)]

    def _motion_window(self, t: NDArray[np.float64]) -> tuple[float, float, str]:
        """(start, end, title note) of the figures' time axis: where some joint moves faster than
        MOVING_SHARE of the top speed, with a margin; the whole recording when it moves most of it."""
        whole = (float(t[0]), float(t[-1]) if t[-1] > t[0] else float(t[0]) + 1.0, "")
        speed = self.data["speed"][:, 0]
        top = np.nanmax(speed, initial=0.0)
        moving = np.flatnonzero(speed > MOVING_SHARE * top) if top > 0 else np.zeros(0, dtype=int)
        if not len(moving):
            return whole[0], whole[1], " (the robot does not move)"
        a, b = t[moving[0]], t[moving[-1]]
        if b - a > ZOOM_SHARE * (whole[1] - whole[0]):
            return whole
        margin = max(ZOOM_MARGIN * (b - a), ZOOM_MIN_MARGIN_S)
        a, b = max(a - margin, whole[0]), min(b + margin, whole[1])
        return float(a), float(b), f" (zoomed to the motion: {a:.2f}-{b:.2f} s of {whole[0]:.2f}-{whole[1]:.2f} s)"

    def _figures(self, out_dir: Path, t: NDArray[np.float64]) -> list[Path]:
        """Torques against RNEA, their residuals, accelerations."""
        d, effort = self.data, self.effort_label
        torques = [(effort, d["effort"]), ("RNEA (feedforward)", d["tau_ff"])]
        if self.gravity:
            torques.append(("gravity", d["tau_g"]))
        return [
            self._figure(out_dir / "torques.png", f"{effort.capitalize()} effort vs inverse dynamics", t,
                         torques, 0, limits=True),
            self._figure(out_dir / "torque_residuals.png", f"Residual: {effort} - RNEA", t,
                         [("residual", d["effort"] - d["tau_ff"])], 0, robust=True, missing=f"no {effort} effort",
                         limits=True),
            self._figure(out_dir / "accelerations.png", "Predicted (ABA) vs estimated acceleration", t,
                         [("estimated (Savitzky-Golay)", d["qdd_est"]), ("predicted (ABA)", d["qdd_pred"])], 1,
                         robust=True, missing=f"the prediction needs a {effort} effort"),
        ]

    def _contact_figures(self, out_dir: Path, t: NDArray[np.float64]) -> list[Path]:
        """With contacts or loops: torques against the consistent ones (configured, closest to the
        effort) and the unconstrained RNEA, their residuals, accelerations, contact forces."""
        d, effort = self.data, self.effort_label
        forces = [self._contact_figure(out_dir / "contact_forces.png", t)] if self.contact_links else []
        return [
            self._figure(out_dir / "torques.png", f"{effort.capitalize()} effort vs contact-consistent torque", t,
                         [(effort, d["effort"]), ("contact-consistent (configured)", d["tau_ff"]),
                          ("contact-consistent (closest)", d["tau_fit"]), ("unconstrained RNEA", d["tau_free"])], 0,
                         limits=True),
            self._figure(out_dir / "torque_residuals.png", f"Residual: {effort} - torque", t,
                         [("configured", d["effort"] - d["tau_ff"]), ("closest", d["effort"] - d["tau_fit"]),
                          ("unconstrained", d["effort"] - d["tau_free"])], 0, robust=True,
                         missing=f"no {effort} effort", limits=True),
            self._figure(out_dir / "accelerations.png", "Predicted (constrained ABA) vs estimated acceleration", t,
                         [("estimated (Savitzky-Golay)", d["qdd_est"]), ("predicted", d["qdd_pred"])], 1,
                         robust=True, missing=f"the prediction needs a {effort} effort"),
        ] + forces

    def _contact_figure(self, path: Path, t: NDArray[np.float64]) -> Path:
        """Normal force of every contact over time, its contact phases shaded."""
        import matplotlib.pyplot as plt

        k, d = len(self.contact_links), self.data
        fig, axes = plt.subplots(k, 1, sharex=True, figsize=(10, 1.6 * k + 1.4), squeeze=False)
        for i, ax in enumerate(axes[:, 0]):
            _shade(ax, t, d["active"][:, i] > 0.5, color="tab:green", alpha=0.15, linewidth=0)
            ax.plot(t, d["normal"][:, i], label="configured solution", linewidth=0.9)
            ax.plot(t, d["normal_fit"][:, i], label="closest to the measurements", linewidth=0.9, linestyle="--")
            ax.set_ylabel(f"{self.contact_links[i]}\n[N]", fontsize=7)
            ax.grid(True, alpha=0.3)
        axes[0, 0].set_xlim(self._window[0], self._window[1])
        axes[-1, 0].set_xlabel("time since the first joint state [s] (shaded: in contact)")
        fig.suptitle("Contact normal forces" + self._window[2])
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1.0 - 0.45 / fig.get_figheight()))
        fig.tight_layout(rect=(0, 0, 1, 1.0 - 0.6 / fig.get_figheight()))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path

    def _figure(self, path: Path, title: str, t: NDArray[np.float64],
                curves: list[tuple[str, NDArray[np.float64]]], unit: int,
                threshold: NDArray[np.float64] | None = None, spans: list[tuple[float, float, str]] | None = None,
                *, robust: bool = False, missing: str = "", limits: bool = False,
                panels: list[tuple[str, str]] | None = None) -> Path:
        """One panel per joint over the motion window; `unit` picks the torque (0) or acceleration
        (1) units of UNITS; `threshold` (n,) is drawn dashed at +-threshold, `spans` (start, end,
        kind) [s] shaded; `robust`: scales without the ends of runs; `missing`: why a curve can
        be empty; `limits`: hatch where the panel's joint sits at its URDF limit (a simulator's
        stop adds a torque the model does not have); `panels`: (label, unit) of each panel when
        they are not the joints (the joints then a floating base)."""
        import matplotlib.pyplot as plt

        if panels is None:
            panels = [(name, UNITS[kind][unit]) for name, kind in zip(self.joint_names, self.kinds)]
        n = len(panels)
        start, end, note = self._window
        inside = (t >= start) & (t <= end)
        fig, axes = plt.subplots(n, 1, sharex=True, figsize=(10, 1.6 * n + 1.4), squeeze=False)
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        clipped = False
        gaps = _gaps(t)
        t_gaps = np.insert(t, gaps, np.nan)  # no line drawn across a gap in the samples
        for j, ax in enumerate(axes[:, 0]):
            drawn: list[tuple[str, NDArray[np.float64]]] = []
            notes = []
            for c, (label, values) in enumerate(curves):
                y = values[:, j]
                same = next((other for other, z in drawn if _coincide(y, z, inside)), None)
                ax.plot(t_gaps, np.insert(y, gaps, np.nan), label=label, linewidth=0.9, color=colours[c % len(colours)],
                        linestyle=(0, (4, 3)) if same else "-")
                if same:
                    notes.append(f"{label} coincides with {same}")
                drawn.append((label, y))
            empty = [label for label, values in curves if not np.isfinite(values[inside, j]).any()]
            if empty:
                notes.append(("nothing to show" if len(empty) == len(curves) else "no " + ", ".join(empty))
                             + (f": {missing}" if missing else ""))
            if threshold is not None:
                for sign in (1, -1) if j < len(self.joint_names) else (1,):  # the base's panel: a magnitude
                    ax.axhline(sign * threshold[j], color="red", linestyle="--", linewidth=0.7,
                               label="+-collision threshold" if sign > 0 else None)
            for a, b, kind in spans or []:
                ax.axvspan(a, b, color=EVENT_COLOURS.get(kind, "red"), alpha=0.2, label=f"event: {kind}")
            if limits and j < len(self.joint_names):
                # held there (LIMIT_MIN_SAMPLES in a row, the events' rule), not a motion passing its speed
                _shade(ax, t, self.data["at_limit"][:, j] > 0.5, AT_LIMIT, LIMIT_MIN_SAMPLES, facecolor="none",
                       edgecolor="tab:purple", hatch="////", linewidth=0, alpha=0.5)
            if robust:
                clipped |= _robust_limits(ax, t, [v[:, j] for _, v in curves], inside)
            if notes:
                # just above the panel: a note must not cover a curve either
                ax.text(0.0, 1.01, "; ".join(notes), transform=ax.transAxes, fontsize=7, va="bottom")
            ax.set_ylabel(f"{panels[j][0]}\n[{panels[j][1]}]", fontsize=7)
            ax.grid(True, alpha=0.3)
        # Curves that start late (commands, predictions) must not move their panel's time axis; the
        # empty start of the window is said, not left to guess.
        axes[0, 0].set_xlim(start, end)
        axes[-1, 0].set_xlabel("time since the first joint state [s]")
        shown = inside & np.logical_or.reduce([np.isfinite(v).any(axis=1) for _, v in curves])
        late = missing and shown.any() and t[shown][0] > start + LATE_SHARE * (end - start)
        # The title hangs from the top and the legend below its last line, in inches: on a tall figure
        # (twelve joints) a share of the height would put them on top of each other.
        height = fig.get_figheight()
        fig.suptitle(title + note + (f"\nscales without the first and last {END_S * 1e3:.0f} ms of each run: "
                                     "spikes there are clipped" if clipped else "")
                     + (f"\nnothing before {t[shown][0]:.2f} s: {missing}" if late else ""),
                     y=1.0 - 0.1 / height, va="top")
        # One legend above the panels: it never covers a curve, and names them for every panel.
        legend: dict[str, Any] = {}
        for ax in axes[:, 0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
        top = 0.2 + 0.25 * (1 + clipped + bool(late))
        fig.legend(legend.values(), legend.keys(), loc="upper center", ncol=min(len(legend), 5), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 1.0 - top / height))
        fig.tight_layout(rect=(0, 0, 1, 1.0 - (top + 0.3 + 0.2 * (len(legend) > 5)) / height))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path


def _shade(ax: Any, t: NDArray[np.float64], mask: NDArray[np.bool_], label: str | None = None, min_run: int = 1,
           **style: Any) -> None:
    """Shades each run of at least `min_run` samples where `mask` holds (one legend entry for all)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    for start, stop in zip(edges[::2], edges[1::2]):
        if stop - start < min_run:
            continue
        ax.axvspan(t[start], t[min(stop, len(t) - 1)], label=label, **style)
        label = None


def _gaps(t: NDArray[np.float64]) -> NDArray[np.intp]:
    """Indices before which the time step exceeds three median steps (np.insert positions)."""
    if len(t) < 3:
        return np.zeros(0, dtype=np.intp)
    step = np.diff(t)
    return np.flatnonzero(step > 3 * np.median(step)) + 1


def _away_from_run_ends(t: NDArray[np.float64], y: NDArray[np.float64], margin: float) -> NDArray[np.bool_]:
    """Samples of y more than `margin` [s] inside their run of finite values (runs also split
    where the time step exceeds three median steps: gaps)."""
    finite = np.isfinite(y)
    if len(t) < 2:
        return finite
    cut = np.zeros(len(t), dtype=bool)
    cut[_gaps(t)] = True
    cut |= np.concatenate([[True], ~finite[:-1]])
    run = np.cumsum(cut & finite)
    first = np.full(run.max() + 1, np.inf)
    last = np.full(run.max() + 1, -np.inf)
    np.minimum.at(first, run[finite], t[finite])
    np.maximum.at(last, run[finite], t[finite])
    return finite & (t - first[run] > margin) & (last[run] - t > margin)


def _robust_limits(ax: Any, t: NDArray[np.float64], values: list[NDArray[np.float64]],
                   inside: NDArray[np.bool_]) -> bool:
    """Sets the panel's y range from its curves' samples in the window away from the ends of
    their runs (with a margin); whether that clips a sample."""
    def span(parts: list[NDArray[np.float64]]) -> tuple[float, float] | None:
        v = np.concatenate(parts)
        v = v[np.isfinite(v)]
        return (float(v.min()), float(v.max())) if len(v) else None

    full = span([y[inside] for y in values])
    core = span([y[inside & _away_from_run_ends(t, y, END_S)] for y in values])
    if full is None or core is None:
        return False
    pad = 0.08 * (core[1] - core[0]) or max(0.1 * abs(core[0]), 0.05)  # a flat curve: a readable band
    low, high = core[0] - pad, core[1] + pad
    ax.set_ylim(low, high)
    return full[0] < low or full[1] > high


def _coincide(a: NDArray[np.float64], b: NDArray[np.float64], inside: NDArray[np.bool_]) -> bool:
    """Whether two curves are the same where either has a value in the window."""
    x, y = a[inside], b[inside]
    both = np.isfinite(x) & np.isfinite(y)
    if not both.any() or (np.isfinite(x) != np.isfinite(y)).any():
        return False
    scale = max(float(np.ptp(x[both])), float(np.ptp(y[both])), 1e-12)
    return bool(np.abs(x[both] - y[both]).max() <= COINCIDE * scale)
