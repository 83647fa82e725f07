"""`--identify friction|payload LINK|inertia|armature|effort_scale`: the fit of core.identification on a
replayed bag (armature and effort_scale: the drive's rotor inertia and torque constants, relative to
--params' effort_* values, with which the efforts were converted to joint torques).

Before the replay, `survey` reads the joint samples once (no dynamics) to place the split: the
first 70% of the samples inside --start/--end fit, the rest validate; too few moving samples
are refused then, with the counts, rather than after the whole replay. The replay's blocks then
feed normal equations as they stream (bounded memory). At the end the constrained least squares
is solved, its values are checked for plausibility (core.identification.plausibility, against
the URDF's limits and the recording's largest efforts), and DIR/identified.yaml (a
ros__parameters file for the node, friction compensation on when friction was identified), the
"identification" section of summary.json and identification.png (validation residual before
and after) are written; implausible values are refused (no identified.yaml, the reasons in
summary.json).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from liedyn_ros.core.identification import Drive, Recorded
from liedyn_ros.core.identification.fit import IdentificationProblem, IdentificationResult, NormalEquations, identify
from liedyn_ros.core.identification.plausibility import friction_at_velocity_limit
from liedyn_ros.core.model import urdf_limit
from liedyn_ros.pipeline.payload import dynamics_from

from .errors import ReplayError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from numpy.typing import NDArray

    from .samples import SampleBlock

FIT_SHARE = 0.7
FIT_ALL, VALIDATE_ALL = np.iinfo(np.int64).max, np.iinfo(np.int64).min  # split stamps: a whole recording fits / validates
MIN_SPEED = IdentificationProblem.min_speed  # rad/s or m/s: a joint's rows count from this speed on
MIN_VALIDATION_ROWS = 10
PLOT_POINTS = 2000


KINDS = ("friction", "inertia", "armature", "effort_scale")


def parse_targets(model: Any, targets: Sequence[Sequence[str]], min_speed: float = MIN_SPEED,
                  drive: Drive | None = None) -> IdentificationProblem:
    """The problem of the --identify arguments, e.g. [["friction"], ["payload", "tool0"]];
    `drive`: the one --params converts the efforts with (None: they are joint torques)."""
    chosen: set[str] = set()
    link = None
    for words in targets:
        kind, rest = words[0], list(words[1:])
        if kind in KINDS and not rest:
            chosen.add(kind)
        elif kind == "payload" and len(rest) == 1:
            link = rest[0]
        else:
            raise ReplayError(f"--identify {' '.join(words)}: expected 'payload LINK' or one of {', '.join(KINDS)}")
    if importlib.util.find_spec("cvxpy") is None:  # say so now, not after the whole replay
        raise ReplayError("--identify needs cvxpy (a dependency of liedyn_ros): pip install cvxpy")
    if not (np.isfinite(min_speed) and min_speed >= 0):
        raise ReplayError(f"--identify-min-speed must be a speed >= 0, got {min_speed}")
    try:
        return IdentificationProblem(model, payload_link=link, min_speed=min_speed, drive=drive,
                                     **{kind: kind in chosen for kind in KINDS})
    except ValueError as err:
        raise ReplayError(f"--identify: {err}") from err


@dataclass(frozen=True)
class Split:
    """Where a recording's fit part ends (the first stamp that validates) and, per joint, its
    moving rows with a measured effort in each part."""

    split_ns: int
    fit_rows: NDArray[np.int64]
    validation_rows: NDArray[np.int64]

    def shortage(self, problem: IdentificationProblem, names: Sequence[str]) -> str | None:
        """Why these rows cannot fit and validate `problem` (counts, needs, what to do), or None."""
        fit, val = int(self.fit_rows.sum()), int(self.validation_rows.sum())
        if fit >= problem.size and val >= MIN_VALIDATION_ROWS:
            return None
        per_joint = ", ".join(f"{j} {f}/{v}" for j, f, v in zip(names, self.fit_rows, self.validation_rows))
        return (f"--identify: too few moving samples with measured effort: {fit} to fit and {val} to validate "
                f"(joint rows counted while the joint moves at least {problem.min_speed:g} rad/s or m/s), "
                f"needed at least {problem.size} (one per unknown) and {MIN_VALIDATION_ROWS}; per joint fit/validation: "
                f"{per_joint}. Record longer or with more motion, widen --start/--end, lower "
                "--identify-min-speed, or identify fewer things")


def survey(blocks: Iterable[SampleBlock], window: tuple[float, float], min_speed: float,
           origin: Callable[[], int | None] = lambda: None) -> Split:
    """The split of the samples inside `window` (s since the first sample's stamp, or since `origin()`
    once the first block is read: the replay's time zero) into the first FIT_SHARE and the rest, and each
    part's moving rows per joint: one pass over the samples without dynamics, so that the split and a
    shortage are known before the replay. It keeps each sample's stamp and moving flags (8 + n bytes:
    72 MB for an hour of a 12-joint robot at 1 kHz)."""
    stamps, moving, t0 = [], [], None
    for block in blocks:
        if t0 is None:
            zero = origin()
            t0 = (block.stamp_ns[0] if zero is None else zero) * 1e-9
        t = block.stamp_ns * 1e-9 - t0
        inside = (t >= window[0]) & (t <= window[1])
        n = block.effort.shape[1]
        stamps.append(block.stamp_ns[inside])
        qd = block.v[inside, -n:]
        moving.append((np.abs(qd) >= min_speed) & np.isfinite(block.effort[inside]))
    if not stamps or not sum(map(len, stamps)):
        raise ReplayError("--identify: no joint samples inside --start/--end")
    stamp, rows = np.concatenate(stamps), np.concatenate(moving)
    cut = int(FIT_SHARE * len(stamp))
    return Split(int(stamp[cut]) if cut < len(stamp) else int(stamp[-1]) + 1,
                 rows[:cut].sum(0), rows[cut:].sum(0))


class Identifier:
    """Accumulates a replay's samples; `finish` fits and writes the results.

    `urdf`: the URDF's model, against which the file written is checked; `payload`: a known
    payload's share of parameters(problem.model), or None; rows stamped before `split_ns` fit,
    the others validate (FIT_ALL, VALIDATE_ALL: a whole recording of several, see `pool`)."""

    def __init__(self, problem: IdentificationProblem, urdf: Any, split_ns: int,
                 payload: NDArray[np.float64] | None = None) -> None:
        self.problem, self.urdf, self.split_ns, self.payload = problem, urdf, split_ns, payload
        n, p = problem.model.n, problem.size
        self.fit, self.validation = NormalEquations(n, p), NormalEquations(n, p)
        self.max_effort = np.zeros(n)
        # a thinned copy of the validation samples for the plot (as replay.plots keeps its series)
        self.stride, self.seen, self.t = 1, 0, np.zeros(0)
        self.G, self.r = np.zeros((0, n, p)), np.zeros((0, n))

    def add(self, block: SampleBlock, accel: NDArray[np.float64]) -> None:
        G, r = self.problem.columns(block.q, block.v, accel, block.effort, base_pose=block.base_pose)
        cut = int(np.searchsorted(block.stamp_ns, self.split_ns))
        self.fit.add(G[:cut], r[:cut])
        self.validation.add(G[cut:], r[cut:])
        self.max_effort = np.maximum(self.max_effort, np.nan_to_num(np.abs(block.effort)).max(0, initial=0.0))
        index = np.arange(self.seen, self.seen + len(r) - cut)  # the validation rows' running index
        keep = index % self.stride == 0
        self.t = np.concatenate([self.t, block.stamp_ns[cut:][keep] * 1e-9])
        self.G, self.r = np.concatenate([self.G, G[cut:][keep]]), np.concatenate([self.r, r[cut:][keep]])
        while len(self.t) > 2 * PLOT_POINTS:
            self.stride *= 2
            self.t, self.G, self.r = self.t[::2], self.G[::2], self.r[::2]
        self.seen += len(r) - cut

    def merge(self, other: Identifier) -> None:
        """Add what `other` (the same problem, another recording) accumulated; its validation
        samples follow these in the plot."""
        self.fit.merge(other.fit)
        self.validation.merge(other.validation)
        self.max_effort = np.maximum(self.max_effort, other.max_effort)
        if len(other.t):
            step = np.median(np.diff(other.t)) if len(other.t) > 1 else 0.0
            start = self.t[-1] + step if len(self.t) else other.t[0]
            self.t = np.concatenate([self.t, other.t - other.t[0] + start])
            self.G, self.r = np.concatenate([self.G, other.G]), np.concatenate([self.r, other.r])

    def held_out(self) -> Identifier:
        """This recording, replayed whole to fit (FIT_ALL), as one that validates (VALIDATE_ALL):
        for pools whose held-out recordings are chosen after the replays (liedyn-fleet)."""
        if self.split_ns != FIT_ALL:
            raise ValueError("held_out: only a recording replayed whole to fit (FIT_ALL) can be held out")
        part = Identifier(self.problem, self.urdf, VALIDATE_ALL, self.payload)
        part.validation.merge(self.fit)
        part.max_effort = self.max_effort.copy()
        return part

    def finish(self, out: Path, plots: bool) -> tuple[dict[str, Any], list[Path]]:
        """Solve, check, write identified.yaml (and the plot); returns the summary section and the
        files. A section with "error" (too few rows, implausible values) comes without the file."""
        names = self.problem.model.joint_names
        short = Split(self.split_ns, self.fit.rows, self.validation.rows).shortage(self.problem, names)
        if short is not None:
            return {"error": short, "fit_samples": int(self.fit.rows.sum()),
                    "validation_samples": int(self.validation.rows.sum())}, []
        result = identify(self.problem, self.fit, self.validation)
        section = summary_section(result, self.payload)
        unset = np.isinf(urdf_limit(self.urdf.effort_limit))
        friction = result.friction
        if friction is not None and unset.any():
            # Joints the URDF leaves unbounded get a bound in the file, checked wherever it is loaded
            # (core.identification.plausibility): what the motors delivered, or the identified friction at
            # the URDF velocity limit where that is more (the recording need not have reached it); the
            # low-speed friction is checked against the recording itself below.
            at_limit = friction_at_velocity_limit(self.urdf, friction)
            section["node_parameters"]["effort_limit"] = np.where(unset, np.maximum(self.max_effort, at_limit),
                                                                  0.0).tolist()
        files = [out / "identification.png"] if plots and len(self.t) else []
        if files:
            self._plot(files[0], result)
        try:
            dynamics_from(self.urdf, section["node_parameters"], Recorded(self.max_effort, self.problem.drive))
        except ValueError as err:
            section["error"] = (f"--identify: identified.yaml not written: {err}. The recording does not determine "
                                "these values: excite the joints and bodies named, or identify fewer things")
            return section, files
        files.append(out / "identified.yaml")
        files[-1].write_text(parameter_file(section["node_parameters"]))
        return section, files

    def _plot(self, path: Path, result: IdentificationResult) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = self.problem.model.joint_names
        t = self.t - self.t[0]
        after = self.r - self.G @ result.x
        fig, axes = plt.subplots(len(names), 1, sharex=True, figsize=(10, 1.6 * len(names) + 1.0), squeeze=False)
        for j, ax in enumerate(axes[:, 0]):
            ax.plot(t, self.r[:, j], linewidth=0.8, label=f"before (RMS {result.rms_before[j]:.3g})")
            ax.plot(t, after[:, j], linewidth=0.8, label=f"after (RMS {result.rms_after[j]:.3g})")
            if not self.validation.rows[j]:  # RMS NaN: say why rather than leave an empty panel
                ax.text(0.5, 0.5, "RMS nan: no validation rows (the joint never moved at least "
                        f"{self.problem.min_speed:g} with a measured effort here; see --identify-min-speed)",
                        transform=ax.transAxes, ha="center", fontsize=7)
            ax.set_ylabel(f"{names[j]}\n[N m]", fontsize=7)
            ax.legend(loc="upper right", fontsize=7)
            ax.grid(True, alpha=0.3)
        axes[-1, 0].set_xlabel("time since the validation part began [s]")
        fig.suptitle("Validation residual (measured - model), before and after identification")
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path


def validation_bags(count: int) -> list[bool]:
    """Which of `count` recordings pooled into one fit validate: the last FIT_SHARE-complement of
    them (at least one), so that the fit is judged on recordings it never saw."""
    if count < 2:
        raise ReplayError("--identify over recordings replayed one by one (--jobs) needs two bags or more: "
                          "some fit, the others validate")
    held = max(1, round((1 - FIT_SHARE) * count))
    return [k >= count - held for k in range(count)]


def pool(parts: Sequence[Identifier], bags: Sequence[str], out: Path, plots: bool) -> dict[str, Any]:
    """One fit of several recordings, each replayed on its own into an Identifier (FIT_ALL or
    VALIDATE_ALL): their normal equations summed, solved, checked and written to out like one
    recording's. The summary section, with the bags that fit and those that validate."""
    pooled = parts[0]
    for part in parts[1:]:
        pooled.merge(part)
    (out / "identified.yaml").unlink(missing_ok=True)  # an earlier run's file must not outlive a refusal
    section, _ = pooled.finish(out, plots)
    roles = ["validation" if p.split_ns == VALIDATE_ALL else "fit" for p in parts]
    return section | {"fit_bags": [b for b, r in zip(bags, roles) if r == "fit"],
                      "validation_bags": [b for b, r in zip(bags, roles) if r == "validation"]}


def node_parameters(result: IdentificationResult, payload: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """The node's parameters (docs/contract.md) holding what was identified. `payload`: the share of
    a known payload in the model's parameters, which inertial_parameters leave to payload_*."""
    params: dict[str, Any] = {}
    identified = result.payload
    if identified is not None:
        params |= {"payload_link": identified["link"], "payload_mass": identified["mass"],
                   "payload_com": identified["com"], "payload_inertia": identified["inertia"]}
    friction = result.friction
    if friction is not None:  # compensated as soon as the file is loaded: what it was identified for
        params |= {"friction_coulomb": friction.coulomb.tolist(), "friction_viscous": friction.viscous.tolist(),
                   "friction_offset": friction.offset.tolist(), "friction_smoothing": friction.smoothing,
                   "friction_compensation": True}
    if result.parameters is not None:
        pi = result.parameters if payload is None else result.parameters - payload
        params["inertial_parameters"] = pi.tolist()
    drive = result.drive
    if drive.converts or drive.armature.any():  # the efforts' conversion it was identified with, and its result
        G = drive.transmission
        coupled = bool(np.any(G != np.diag(np.diag(G))))
        params |= {"effort_gear_ratio": [1.0] if coupled else np.diag(G).tolist(),
                   "effort_transmission": G.reshape(-1).tolist() if coupled else [0.0],
                   "effort_torque_constant": drive.torque_constant.tolist(), "effort_offset": drive.offset.tolist(),
                   "armature": drive.armature.tolist()}
    return params


def parameter_file(params: dict[str, Any]) -> str:
    """A ros__parameters YAML of `params` for any node name (`/**`); values as JSON, which YAML reads."""
    lines = ["# identified by liedyn-replay --identify; load with --params-file or ros2 param load",
             "/**:", "  ros__parameters:"]
    lines += [f"    {k}: {json.dumps(v)}" for k, v in params.items()]
    return "\n".join(lines) + "\n"


def summary_section(result: IdentificationResult, payload: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """summary.json's "identification": every parameter with its standard deviation (null where
    the recording does not identify it), what is not excited, residual RMS before and after."""
    names = result.problem.model.joint_names

    def num(x: float) -> float | None:
        return float(x) if np.isfinite(x) else None

    return {
        "fit_samples": result.rows[0], "validation_samples": result.rows[1],
        "condition_number": num(result.condition_number),
        "unidentifiable_directions": result.unexcited,
        "parameters": [{"name": label, "value": float(x), "std": num(s), "identifiable": bool(ok)}
                       for label, x, s, ok in zip(result.problem.labels, result.x, result.std, result.identifiable)],
        "validation_rms_before": dict(zip(names, map(num, result.rms_before))),
        "validation_rms_after": dict(zip(names, map(num, result.rms_after))),
        "validation_worse": [j for j, b, a in zip(names, result.rms_before, result.rms_after) if a > b],
        "node_parameters": node_parameters(result, payload),
    }


def format_report(section: dict[str, Any]) -> str:
    """Text for the terminal: the parameters with standard deviations and the validation RMS."""
    if "parameters" not in section:
        return f"identification: {section['error']}"
    lines = [f"identification: fit on {section['fit_samples']} rows, validated on {section['validation_samples']}; "
             f"condition number {section['condition_number']:.3g}" if section["condition_number"] else
             "identification: nothing excited"]
    for p in section["parameters"]:
        std = f"+- {p['std']:.3g}" if p["std"] is not None else "(not identifiable from this recording)"
        lines.append(f"  {p['name']:<32} {p['value']:>12.5g} {std}")
    for d in section["unidentifiable_directions"]:
        lines.append(f"  unexcited: {d}")
    lines.append("  validation residual RMS before -> after:")
    for joint, before in section["validation_rms_before"].items():
        after = section["validation_rms_after"][joint]
        lines.append(f"    {joint:<30} {before if before is not None else float('nan'):10.4g} -> "
                     f"{after if after is not None else float('nan'):10.4g}")
    if section["validation_worse"]:
        lines.append(f"  WARNING: the fitted model predicts the held-back samples worse on {section['validation_worse']}: "
                     "this recording does not determine the parameters well enough; do not use identified.yaml "
                     "as it is (excite the joints more, or identify fewer things)")
    if "error" in section:
        lines.append(f"  REFUSED: {section['error']}")
    return "\n".join(lines)
