"""`--identify friction|payload LINK|inertia`: the fit of core.identification on a replayed bag.

The replay's blocks feed normal equations as they stream (bounded memory): the first 70% of the
joint samples fit, the rest validate. At the end the constrained least squares is solved and
DIR/identified.yaml (a ros__parameters file for the node), the "identification" section of
summary.json and identification.png (validation residual before and after) are written.
"""

from __future__ import annotations

import importlib.util
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from liedyn_ros.core.identification.fit import IdentificationProblem, IdentificationResult, NormalEquations, identify

from .errors import ReplayError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from numpy.typing import NDArray

    from .samples import SampleBlock

FIT_SHARE = 0.7
PLOT_POINTS = 2000


def parse_targets(model: Any, targets: Sequence[Sequence[str]]) -> IdentificationProblem:
    """The problem of the --identify arguments, e.g. [["friction"], ["payload", "tool0"]]."""
    friction = inertia = False
    link = None
    for words in targets:
        kind, rest = words[0], list(words[1:])
        if kind in ("friction", "inertia") and not rest:
            friction, inertia = friction or kind == "friction", inertia or kind == "inertia"
        elif kind == "payload" and len(rest) == 1:
            link = rest[0]
        else:
            raise ReplayError(f"--identify {' '.join(words)}: expected 'friction', 'payload LINK' or 'inertia'")
    if importlib.util.find_spec("cvxpy") is None:  # say so now, not after the whole replay
        raise ReplayError("--identify needs cvxpy (a dependency of liedyn_ros): pip install cvxpy")
    try:
        return IdentificationProblem(model, friction=friction, payload_link=link, inertia=inertia)
    except ValueError as err:
        raise ReplayError(f"--identify: {err}") from err


class Identifier:
    """Accumulates a replay's samples; `finish` fits and writes the results."""

    def __init__(self, problem: IdentificationProblem, expected_samples: int,
                 payload: NDArray[np.float64] | None = None) -> None:
        self.problem = problem
        self.payload = payload  # a known payload's share of parameters(problem.model), or None
        n, p = problem.model.n, problem.size
        self.fit, self.validation = NormalEquations(n, p), NormalEquations(n, p)
        self.split = int(FIT_SHARE * expected_samples)
        self.seen = 0
        # a thinned copy of the validation samples for the plot (as replay.plots keeps its series)
        self.stride, self.t = 1, np.zeros(0)
        self.G, self.r = np.zeros((0, n, p)), np.zeros((0, n))

    def add(self, block: SampleBlock, accel: NDArray[np.float64]) -> None:
        G, r = self.problem.columns(block.q, block.v, accel, block.effort, base_pose=block.base_pose)
        cut = int(np.clip(self.split - self.seen, 0, len(r)))
        self.fit.add(G[:cut], r[:cut])
        self.validation.add(G[cut:], r[cut:])
        index = np.arange(self.seen, self.seen + len(r))[cut:]
        keep = index % self.stride == 0
        self.t = np.concatenate([self.t, block.stamp_ns[cut:][keep] * 1e-9])
        self.G, self.r = np.concatenate([self.G, G[cut:][keep]]), np.concatenate([self.r, r[cut:][keep]])
        while len(self.t) > 2 * PLOT_POINTS:
            self.stride *= 2
            self.t, self.G, self.r = self.t[::2], self.G[::2], self.r[::2]
        self.seen += len(r)

    def finish(self, out: Path, plots: bool) -> tuple[dict[str, Any], list[Path]]:
        """Solve, write identified.yaml (and the plot); returns the summary section and the files."""
        if self.fit.rows.sum() == 0 or self.validation.rows.sum() == 0:
            raise ReplayError("--identify: too few moving samples with measured effort to fit and validate")
        result = identify(self.problem, self.fit, self.validation)
        files = [out / "identified.yaml"]
        files[0].write_text(parameter_file(result, self.payload))
        if plots and len(self.t):
            files.append(self._plot(out / "identification.png", result))
        return summary_section(result, self.payload), files

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
            ax.set_ylabel(f"{names[j]}\n[N m]", fontsize=7)
            ax.legend(loc="upper right", fontsize=7)
            ax.grid(True, alpha=0.3)
        axes[-1, 0].set_xlabel("time since the validation part began [s]")
        fig.suptitle("Validation residual (measured - model), before and after identification")
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path


def node_parameters(result: IdentificationResult, payload: NDArray[np.float64] | None = None) -> dict[str, Any]:
    """The node's parameters (CONVENTIONS.md) holding what was identified. `payload`: the share of
    a known payload in the model's parameters, which inertial_parameters leave to payload_*."""
    params: dict[str, Any] = {}
    payload = result.payload
    if payload is not None:
        params |= {"payload_link": payload["link"], "payload_mass": payload["mass"],
                   "payload_com": payload["com"], "payload_inertia": payload["inertia"]}
    friction = result.friction
    if friction is not None:
        params |= {"friction_coulomb": friction.coulomb.tolist(), "friction_viscous": friction.viscous.tolist(),
                   "friction_offset": friction.offset.tolist(), "friction_smoothing": friction.smoothing}
    if result.parameters is not None:
        pi = result.parameters if payload is None else result.parameters - payload
        params["inertial_parameters"] = pi.tolist()
    return params


def parameter_file(result: IdentificationResult, payload: NDArray[np.float64] | None = None) -> str:
    """A ros__parameters YAML for any node name (`/**`); values as JSON, which YAML reads."""
    lines = ["# identified by liedyn-replay --identify; load with --params-file or ros2 param load",
             "/**:", "  ros__parameters:"]
    lines += [f"    {k}: {json.dumps(v)}" for k, v in node_parameters(result, payload).items()]
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
    return "\n".join(lines)
