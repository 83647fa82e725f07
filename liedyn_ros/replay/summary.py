"""Per-joint residual statistics, accumulated block by block in constant memory.

torque residual = measured effort - inverse-dynamics torque (RNEA at the estimated
acceleration): what the model does not explain (friction, payload, model errors, contacts).
acceleration residual = predicted acceleration (ABA with the measured effort) - estimated
acceleration (derivative of the recorded velocities).
external torque = the momentum observer's estimate (external.py), and the collision events
found in it.

Units follow each joint: N m and rad/s^2 for a revolute (or continuous) joint, N and m/s^2 for
a prismatic one, in the printed table and in the keys of summary.json.
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


# (torque, acceleration) units by joint kind, as printed and as written in summary.json keys.
UNITS = {"revolute": ("N m", "rad/s^2"), "prismatic": ("N", "m/s^2")}
KEY_UNITS = {"N m": "Nm", "N": "N", "rad/s^2": "rad_s2", "m/s^2": "m_s2"}


def joint_kinds(model: Any) -> tuple[str, ...]:
    """'prismatic' or 'revolute' (continuous joints too) for each of the model's joints."""
    types = dict(zip(model.body_joints, model.body_types))
    return tuple("prismatic" if types.get(j) == "prismatic" else "revolute" for j in model.joint_names)


@dataclass
class ResidualSummary:
    """Residual statistics per joint, and the range of the measured effort (to tell an all-zero
    or constant effort, which leaves no residual worth the name)."""

    joint_names: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    torque: Running = field(init=False)
    acceleration: Running = field(init=False)
    external: Running = field(init=False)
    effort_count: NDArray[np.int64] = field(init=False)
    effort_low: NDArray[np.float64] = field(init=False)
    effort_high: NDArray[np.float64] = field(init=False)
    samples: int = 0
    first_stamp_ns: int | None = None  # time zero of the figures and of the printed events
    collisions: list[dict[str, Any]] = field(default_factory=list)
    # With contacts: residuals against the torque closest to the effort and the unconstrained
    # one, the effort itself (for relative figures); per contact the samples in contact and
    # the violations (tipping: a flat contact's centre of pressure off its sole); the samples no
    # contact force realises.
    contact_links: tuple[str, ...] = ()
    constrained: bool = False  # contacts or loops: the fit and unconstrained residuals too
    observer: bool = True  # external_torque_observer: external torques and collision events looked for
    torque_fit: Running = field(init=False)
    torque_free: Running = field(init=False)
    effort: Running = field(init=False)
    contact_counts: dict[str, NDArray[np.int64]] = field(init=False)
    unbalanced: int = 0
    hints: list[dict[str, Any]] = field(default_factory=list)  # hints.find: what is wrong with the recording
    # Per joint sums over the samples with a residual r (effort - ID torque) and gravity torque g:
    # r.g, g.g, r.r, the regression of r on g that tells a simulation without gravity (r = -g)
    gravity_sums: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        self.torque_fit, self.torque_free, self.effort = Running(n), Running(n), Running(n)
        self.contact_counts = {key: np.zeros(len(self.contact_links), dtype=np.int64)
                               for key in ("active", "pulling", "slipping", "tipping")}
        self.kinds = self.kinds or ("revolute",) * n
        self.torque = Running(n)
        self.acceleration = Running(n)
        self.external = Running(n)
        self.effort_count = np.zeros(n, dtype=np.int64)
        self.effort_low, self.effort_high = np.full(n, np.inf), np.full(n, -np.inf)
        self.gravity_sums = np.zeros((3, n))

    def add(self, effort: NDArray[np.float64], tau_id: NDArray[np.float64],
            qdd_pred: NDArray[np.float64] | None, qdd_est: NDArray[np.float64]) -> None:
        """All (N, n) in model order; qdd_est holds the joint part only."""
        self.samples += len(effort)
        self.torque.add(effort - tau_id)
        if qdd_pred is not None:
            self.acceleration.add(qdd_pred - qdd_est)
        ok = np.isfinite(effort)
        self.effort_count += ok.sum(axis=0)
        self.effort_low = np.minimum(self.effort_low, np.where(ok, effort, np.inf).min(axis=0, initial=np.inf))
        self.effort_high = np.maximum(self.effort_high, np.where(ok, effort, -np.inf).max(axis=0, initial=-np.inf))
        self.effort.add(effort)

    def add_block(self, effort: NDArray[np.float64], out: Any, qdd_est: NDArray[np.float64], fit: Any,
                  tau_ext: NDArray[np.float64]) -> None:
        """A block's outputs (pipeline.DynamicsOutputs), with contacts its run.ContactFit, and
        the observer's external torques."""
        self.add(effort, out.tau_ff, out.qdd_pred, qdd_est)
        r = effort - out.tau_ff
        ok = np.isfinite(r)
        r, g = np.where(ok, r, 0.0), np.where(ok, out.tau_g, 0.0)
        self.gravity_sums += np.stack([(r * g).sum(axis=0), (g * g).sum(axis=0), (r * r).sum(axis=0)])
        self.external.add(tau_ext)
        if fit is None:
            return
        self.torque_fit.add(effort - fit.tau)
        self.torque_free.add(effort - out.tau_free)
        if out.contact_active is not None:
            self.contact_counts["active"] += out.contact_active.sum(axis=0)
            self.contact_counts["pulling"] += out.checks.pulling.sum(axis=0)
            self.contact_counts["slipping"] += out.checks.slipping.sum(axis=0)
            self.contact_counts["tipping"] += fit.tipping.sum(axis=0)
        self.unbalanced += int(out.checks.unbalanced.sum())

    def as_dict(self) -> dict[str, Any]:
        joints = {}
        for j, (name, kind) in enumerate(zip(self.joint_names, self.kinds)):
            torque, acc = UNITS[kind]
            joints[name] = {
                "type": kind,
                f"torque_residual_{KEY_UNITS[torque]}": self.torque.stats(j),
                f"acceleration_residual_{KEY_UNITS[acc]}": self.acceleration.stats(j),
            }
            if self.observer:
                joints[name][f"external_torque_{KEY_UNITS[torque]}"] = self.external.stats(j)
            if self.contact_links or self.constrained:
                joints[name] |= {
                    f"contact_fit_torque_residual_{KEY_UNITS[torque]}": self.torque_fit.stats(j),
                    f"unconstrained_torque_residual_{KEY_UNITS[torque]}": self.torque_free.stats(j),
                    f"effort_{KEY_UNITS[torque]}": self.effort.stats(j),
                }
        out: dict[str, Any] = {"samples": self.samples, "first_stamp_ns": self.first_stamp_ns, "joints": joints,
                               "external_torque_observer": self.observer, "collisions": self.collisions,
                               "hints": self.hints}
        if self.contact_links or self.constrained:
            out["contacts"] = {
                "links": {link: {key: int(v[i]) for key, v in self.contact_counts.items()}
                          for i, link in enumerate(self.contact_links)},
                "unbalanced_samples": self.unbalanced,
            }
        return out

    def table(self) -> str:
        return format_table(self.as_dict())

    def save(self, path: Path, extra: dict[str, Any]) -> None:
        path.write_text(json.dumps(self.as_dict() | extra, indent=2) + "\n")


def format_table(summary: dict[str, Any]) -> str:
    """Fixed-width text table of a summary dict (as saved in summary.json)."""
    width = max([16] + [len(name) for name in summary["joints"]])
    head = (
        f"{'joint':<{width}} {'units':>12} {'n':>7} | {'tau res RMS':>11} {'mean':>9} {'max|.|':>9} "
        f"| {'qdd res RMS':>11} {'mean':>9} {'max|.|':>9} | {'RMS':>9} {'max|.|':>9}"
    )
    lines = [
        f"{'':<{width + 21}} | effort - ID torque              | predicted - estimated qdd        "
        "| external (observer)",
        head,
        "-" * len(head),
    ]
    for name, row in summary["joints"].items():
        t = next(v for k, v in row.items() if k.startswith("torque_residual_"))
        a = next(v for k, v in row.items() if k.startswith("acceleration_residual_"))
        e = next((v for k, v in row.items() if k.startswith("external_torque_")), {"rms": None, "max_abs": None})
        units = ", ".join(UNITS[row.get("type", "revolute")])
        lines.append(
            f"{name:<{width}} {units:>12} {t['count']:>7} | {_num(t['rms'], 11)} {_num(t['mean'], 9)} "
            f"{_num(t['max_abs'], 9)} | {_num(a['rms'], 11)} {_num(a['mean'], 9)} {_num(a['max_abs'], 9)} "
            f"| {_num(e['rms'], 9)} {_num(e['max_abs'], 9)}"
        )
    if summary.get("external_torque_observer", True):
        lines += format_collisions(summary.get("collisions", []), summary.get("first_stamp_ns"))
    else:
        lines.append("collisions: not looked for (external_torque_observer: false)")
    lines += [f"hint {h['code']}: {h['message']}" for h in summary.get("hints", [])]
    if "contacts" in summary:
        lines += ["", f"{'':<{width}} | RMS of effort - contact-consistent torque",
                  f"{'joint':<{width}} | {'configured':>11} {'closest':>11} {'unconstr.':>11} {'effort RMS':>11}"]
        for name, row in summary["joints"].items():
            rms = [next(v for k, v in row.items() if k.startswith(prefix))["rms"]
                   for prefix in ("torque_residual_", "contact_fit_", "unconstrained_", "effort_")]
            lines.append(f"{name:<{width}} | " + " ".join(_num(x, 11) for x in rms))
        c = summary["contacts"]
        lines.append(("contacts: " + ", ".join(
            f"{link} in contact {v['active']}, pulling {v['pulling']}, outside the cone {v['slipping']}"
            + (f", tipping {v['tipping']}" if "tipping" in v else "")
            for link, v in c["links"].items()) + "; " if c["links"] else "")
            + f"unbalanced samples {c['unbalanced_samples']}")
    return "\n".join(lines)


def format_collisions(events: list[dict[str, Any]], t0_ns: int | None = None) -> list[str]:
    """One line per collision event: start and end [s] since t0_ns (the first joint state, time zero
    of the plots; stamps as they are without it), length, peak joint and torque, kind."""
    if not events:
        return ["collisions: none (no external torque above its threshold)"]
    t0 = t0_ns or 0
    since = "" if t0_ns is None else " since the first joint state"
    lines = [f"collisions: {len(events)} (times in s{since})",
             f"{'start':>10} {'end':>10} {'length':>10}  {'peak joint':<16} {'peak':>9}  kind"]
    for e in events:
        end = "(open)" if e["end_ns"] is None else f"{(e['end_ns'] - t0) * 1e-9:.3f}"
        length = "-" if e["end_ns"] is None else f"{(e['end_ns'] - e['start_ns']) * 1e-9:.3f}"
        lines.append(f"{(e['start_ns'] - t0) * 1e-9:>10.3f} {end:>10} {length:>10}  {e['joint']:<16} {e['peak']:>9.4g}  "
                     f"{e.get('kind', 'collision')}")
    return lines


def _num(x: float | None, width: int) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}.4g}"
