"""Excitation trajectories as files a robot runs: a trajectory_msgs/JointTrajectory YAML mapping
(what `ros2 topic pub` reads into a message for a joint_trajectory_controller), a CSV, design.json.

A joint_trajectory_controller given positions, velocities and accelerations at each point moves
along the quintic polynomial through each pair of consecutive points. So a file is checked along
those quintics, not only at its points: on each segment the quintic and its first two
derivatives lie within the convex hull of their Bernstein coefficients; a segment whose hull
crosses a limit is split in halves (up to 64 pieces) before it is called a violation. Efforts
(when the model is given) are bounded at 4 samples per segment by limits.effort_bound. The file
must also list each joint of the model once, hold finite numbers, have strictly increasing
times, and start and end at rest. The same check runs before writing and when loading; a file
that fails is refused with one line naming the point (or segment), the joint and the limit.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import comb

from ...model import Model
from .design import Excitation
from .limits import Limits, effort_bound, one_blas_thread

__all__ = ["TrajectoryRefused", "SampledTrajectory", "trajectory_message", "check_trajectory", "write_trajectory",
           "load_trajectory"]

REST = 1e-6  # |qd|, |qdd| at the first and last point: at rest up to rounding
MAX_SPLITS = 6  # a segment is split into at most 2^6 pieces before a hull crossing counts


class TrajectoryRefused(ValueError):
    """A trajectory that must not go to a robot; the message is one line that says why."""


@dataclass(frozen=True)
class SampledTrajectory:
    """A JointTrajectory's points in model joint order: t (N,), q, qd, qdd (N, n)."""

    joint_names: tuple[str, ...]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


def trajectory_message(names, t, q, qd, qdd) -> dict:
    """The JointTrajectory mapping (header stamp 0: the controller starts it on receipt)."""
    points = []
    for k in range(len(t)):
        sec = math.floor(t[k])
        nanosec = int(round((t[k] - sec) * 1e9))
        sec, nanosec = (sec + 1, 0) if nanosec >= 1_000_000_000 else (sec, nanosec)
        points.append({"positions": q[k].tolist(), "velocities": qd[k].tolist(), "accelerations": qdd[k].tolist(),
                       "effort": [], "time_from_start": {"sec": int(sec), "nanosec": nanosec}})
    return {"header": {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""}, "joint_names": list(names),
            "points": points}


def check_trajectory(message, model: Model, limits: Limits, *, efforts: bool = True) -> SampledTrajectory:
    """The points of a JointTrajectory mapping in model order, or TrajectoryRefused (module docstring)."""
    with one_blas_thread():  # small matrices: BLAS threads only cost time
        return _checked(message, model, limits, efforts)


def _checked(message, model: Model, limits: Limits, efforts: bool) -> SampledTrajectory:
    t, q, qd, qdd = _parse(message, model)
    where = (lambda k: f"point {k} (t={t[k]:.3f} s)")
    for k in (0, len(t) - 1):
        moving = np.flatnonzero((np.abs(qd[k]) > REST) | (np.abs(qdd[k]) > REST))
        if moving.size:
            j = moving[0]
            raise TrajectoryRefused(f"{where(k)}: not at rest ({model.joint_names[j]} velocity {qd[k, j]:.6g}, "
                                    f"acceleration {qdd[k, j]:.6g}); a trajectory must start and end at rest")
    bad = limits.violations(model.joint_names, q, qd, qdd, where=where)
    if bad:
        raise TrajectoryRefused(bad[0])
    _check_segments(model.joint_names, t, q, qd, qdd, limits)
    if efforts and np.isfinite(limits.effort).any():
        tt, derivs = _spline_samples(t, q, qd, qdd, 4)
        h = np.diff(tt, append=tt[-1])
        h = np.maximum(h, np.concatenate([[0.0], h[:-1]]))  # each sample covers half a step either side
        bad = limits.violations(model.joint_names, derivs[0], derivs[1], derivs[2],
                                tau=effort_bound(model, derivs[0], derivs[1:], h),
                                where=lambda k: f"t={tt[k]:.3f} s")
        bad = [b for b in bad if " effort " in b]
        if bad:
            raise TrajectoryRefused(bad[0] + " (effort bound between samples)")
    return SampledTrajectory(tuple(model.joint_names), t, q, qd, qdd)


def _parse(message, model: Model):
    if not isinstance(message, dict) or not isinstance(message.get("points"), list):
        raise TrajectoryRefused("not a JointTrajectory mapping (no 'points' list)")
    names = message.get("joint_names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrajectoryRefused("joint_names: expected a list of joint names")
    if sorted(names) != sorted(model.joint_names):
        missing = sorted(set(model.joint_names) - set(names))
        extra = sorted(set(names) - set(model.joint_names)) or sorted(n for n in names if names.count(n) > 1)
        raise TrajectoryRefused(f"joint_names: must list each of the model's joints once (missing {missing}, "
                                f"unknown or repeated {extra})")
    order = [names.index(j) for j in model.joint_names]
    if not message["points"]:
        raise TrajectoryRefused("points: empty")
    t: list[float] = []
    rows: dict[str, list[list[float]]] = {key: [] for key in ("positions", "velocities", "accelerations")}
    for k, point in enumerate(message["points"]):
        if not isinstance(point, dict):
            raise TrajectoryRefused(f"point {k}: not a mapping")
        for key, out in rows.items():
            values = point.get(key)
            if not isinstance(values, list) or len(values) != len(names):
                raise TrajectoryRefused(f"point {k}: {key} must hold {len(names)} numbers")
            try:
                out.append([float(values[i]) for i in order])
            except (TypeError, ValueError):
                raise TrajectoryRefused(f"point {k}: {key} holds something that is not a number") from None
        stamp = point.get("time_from_start")
        if not (isinstance(stamp, dict) and all(type(stamp.get(f)) is int for f in ("sec", "nanosec"))
                and 0 <= stamp["nanosec"] < 1_000_000_000):
            raise TrajectoryRefused(f"point {k}: time_from_start must be {{sec: int, nanosec: int < 1e9}}")
        t.append(stamp["sec"] + stamp["nanosec"] * 1e-9)
    t_arr = np.array(t)
    q, qd, qdd = (np.array(rows[key]) for key in ("positions", "velocities", "accelerations"))
    for key, x in (("positions", q), ("velocities", qd), ("accelerations", qdd)):
        if not np.all(np.isfinite(x)):
            k, j = np.argwhere(~np.isfinite(x))[0]
            raise TrajectoryRefused(f"point {k}: {model.joint_names[j]} {key[:-1]} is {x[k, j]}")
    if t_arr[0] < 0 or np.any(np.diff(t_arr) <= 0):
        k = 0 if t_arr[0] < 0 else int(np.argmax(np.diff(t_arr) <= 0)) + 1
        raise TrajectoryRefused(f"point {k}: time_from_start {t_arr[k]:.9g} s does not increase")
    return t_arr, q, qd, qdd


def _quintics(t, q, qd, qdd) -> tuple[np.ndarray, np.ndarray]:
    """(c (S, n, 6), h (S,)): segment k's quintic p(s) = sum_i c_i s^i, s = (t - t_k) / h_k in [0, 1],
    with the points' positions, velocities and accelerations at both ends."""
    h = np.diff(t)[:, None]
    p0, p1 = q[:-1], q[1:]
    d0, d1 = qd[:-1] * h, qd[1:] * h  # dp/ds
    e0, e1 = qdd[:-1] * h ** 2, qdd[1:] * h ** 2
    dp = p1 - p0
    c = np.stack([p0, d0, e0 / 2, 10 * dp - 6 * d0 - 4 * d1 - 1.5 * e0 + 0.5 * e1,
                  -15 * dp + 8 * d0 + 7 * d1 + 1.5 * e0 - e1, 6 * dp - 3 * d0 - 3 * d1 - 0.5 * e0 + 0.5 * e1], -1)
    return c, h[:, 0]


def _derivative(c: np.ndarray) -> np.ndarray:
    """d/ds of power coefficients (..., d + 1) -> (..., d)."""
    return c[..., 1:] * np.arange(1, c.shape[-1])


def _bernstein(c: np.ndarray) -> np.ndarray:
    """Bernstein coefficients on [0, 1] of power coefficients (..., d + 1): b_i = sum_{k<=i} C(i,k)/C(d,k) c_k."""
    d = c.shape[-1] - 1
    i, k = np.meshgrid(np.arange(d + 1), np.arange(d + 1), indexing="ij")
    M = np.where(k <= i, comb(i, k) / comb(d, k), 0.0)
    return c @ M.T


def _halves(c: np.ndarray) -> np.ndarray:
    """Power coefficients (..., 6) on [0, 1/2] and [1/2, 1], each re-parametrised to [0, 1]: (2, ..., 6)."""
    d = c.shape[-1] - 1
    j, k = np.meshgrid(np.arange(d + 1), np.arange(d + 1), indexing="ij")
    left = np.diag(0.5 ** np.arange(d + 1))
    right = np.where(k >= j, comb(k, j) * 0.5 ** (k - j) * 0.5 ** j, 0.0)  # p(1/2 + s/2)
    return np.stack([c @ left.T, c @ right.T])


def _check_segments(names, t, q, qd, qdd, limits: Limits) -> None:
    """TrajectoryRefused when a segment's quintic crosses a limit (module docstring)."""
    c, h = _quintics(t, q, qd, qdd)
    start = t[:-1]
    for split in range(MAX_SPLITS + 1):
        pos = _bernstein(c)
        vel = _bernstein(_derivative(c)) / h[:, None, None]
        acc = _bernstein(_derivative(_derivative(c))) / h[:, None, None] ** 2
        excess = {"position": np.maximum(limits.lower[:, None] - pos, pos - limits.upper[:, None]).max(-1),
                  "velocity": np.abs(vel).max(-1) - limits.velocity[None, :],
                  "acceleration": np.abs(acc).max(-1) - limits.acceleration[None, :]}
        crossing = np.zeros(len(h), dtype=bool)
        for e in excess.values():
            crossing |= (e > 0).any(-1)
        if not crossing.any():
            return
        if split == MAX_SPLITS:
            k = int(np.flatnonzero(crossing)[0])
            what, e = next((w, e) for w, e in excess.items() if (e[k] > 0).any())
            j = int(np.argmax(e[k]))
            raise TrajectoryRefused(f"between t={start[k]:.3f} s and {start[k] + h[k]:.3f} s: the controller's "
                                    f"quintic takes {names[j]} {what} {e[k, j]:.3g} beyond its limit")
        c = _halves(c[crossing]).reshape(-1, *c.shape[1:])
        start = np.concatenate([start[crossing], start[crossing] + h[crossing] / 2])
        h = np.tile(h[crossing] / 2, 2)


def _spline_samples(t, q, qd, qdd, per_segment: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Times (M,) and [q, qd, qdd, q''', q''''] (M, n) of the quintics, per_segment per segment plus the end."""
    c, h = _quintics(t, q, qd, qdd)
    s = np.arange(per_segment) / per_segment
    derivs, ck = [], c
    for order in range(5):
        powers = s[:, None] ** np.arange(ck.shape[-1])  # (P, d + 1)
        x = np.einsum("snd,pd->spn", ck, powers) / h[:, None, None] ** order
        derivs.append(x.reshape(-1, q.shape[1]))
        ck = _derivative(ck)
    tt = (t[:-1, None] + h[:, None] * s[None, :]).reshape(-1)
    last = [q[-1], qd[-1], qdd[-1]] + [_end_derivative(c[-1], h[-1], order) for order in (3, 4)]
    return np.append(tt, t[-1]), [np.vstack([x, e]) for x, e in zip(derivs, last)]


def _end_derivative(c: np.ndarray, h: float, order: int) -> np.ndarray:
    for _ in range(order):
        c = _derivative(c)
    return c.sum(-1) / h ** order


def write_trajectory(out: Path, excitation: Excitation, *, periods: int = 1, rate: float = 10.0,
                     csv_rate: float = 100.0, approach: float = 5.0) -> dict[str, Path]:
    """trajectory.yaml (points at `rate` Hz, the first one `approach` s after the controller receives
    it), trajectory.csv (t, q, qd, qdd at csv_rate Hz, t = 0 at the start pose) and design.json
    into `out`; checked first (TrajectoryRefused: nothing written)."""
    problem, traj = excitation.problem, excitation.trajectory
    model = problem.model
    duration = periods * problem.period
    if int(periods) != periods or periods < 1 or not (rate > 0 and csv_rate > 0 and approach > 0):
        raise ValueError("periods must be a whole number >= 1; rate, csv_rate and approach > 0")
    t = np.linspace(0.0, duration, int(round(duration * rate)) + 1)
    q, qd, qdd = traj.derivatives(t, 2)
    message = trajectory_message(model.joint_names, t + approach, q, qd, qdd)
    check_trajectory(message, model, problem.limits)
    tc = np.linspace(0.0, duration, int(round(duration * csv_rate)) + 1)
    columns = np.hstack([tc[:, None], *traj.derivatives(tc, 2)])
    header = ",".join(["t"] + [f"{x}.{j}" for x in ("q", "qd", "qdd") for j in model.joint_names])
    out.mkdir(parents=True, exist_ok=True)
    paths = {"yaml": out / "trajectory.yaml", "csv": out / "trajectory.csv", "design": out / "design.json"}
    paths["yaml"].write_text(_yaml(message, excitation, duration))
    np.savetxt(paths["csv"], columns, delimiter=",", header=header, comments="", fmt="%.10g")
    paths["design"].write_text(json.dumps(_design(excitation, periods, rate, approach), indent=1))
    return paths


def _yaml(message: dict, excitation: Excitation, duration: float) -> str:
    import yaml  # PyYAML: what `ros2 topic pub` reads the file with

    body = yaml.dump(message, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=None,
                     width=1 << 16, sort_keys=False)
    kappa, random = excitation.condition_number, np.median(excitation.random_condition_numbers)
    head = (f"# liedyn-excite: excitation trajectory for {excitation.problem.model.name}, {duration:g} s after a "
            f"{message['points'][0]['time_from_start']['sec']} s approach\n"
            f"# condition number {kappa:.4g} (random Fourier: median {random:.4g}; single sine: "
            f"{excitation.single_sine_condition_number:.4g})\n"
            "# ros2 topic pub --once --stdin /<controller>/joint_trajectory trajectory_msgs/msg/JointTrajectory "
            "< trajectory.yaml\n")
    return head + body


def _design(excitation: Excitation, periods: int, rate: float, approach: float) -> dict:
    p, tr = excitation.problem, excitation.trajectory
    names = p.model.joint_names
    lim = p.limits
    return {"robot": p.model.name, "moving": [names[j] for j in p.moving], "period": p.period,
            "periods": periods, "harmonics": p.harmonics, "rate": rate, "approach": approach,
            "identify": [k for k in ("inertia", "friction") if getattr(p.fit, k)]
            + (["payload"] if p.fit.payload_link else []), "payload_link": p.fit.payload_link,
            "condition_number": excitation.condition_number,
            "random_condition_numbers": excitation.random_condition_numbers.tolist(),
            "single_sine_condition_number": excitation.single_sine_condition_number,
            "base_columns": list(p.labels),
            "limits": {j: {"lower": lim.lower[i], "upper": lim.upper[i], "velocity": lim.velocity[i],
                           "acceleration": lim.acceleration[i], "effort": lim.effort[i]}
                       for i, j in enumerate(names)},
            "fourier": {"w_f": tr.w_f, "q_hold": tr.q_hold.tolist(), "q0": tr.q0.tolist(), "a": tr.a.tolist(),
                        "b": tr.b.tolist()}}


def load_trajectory(path, model: Model, limits: Limits, *, efforts: bool = True) -> SampledTrajectory:
    """A trajectory YAML file, checked (module docstring); TrajectoryRefused '<path>: <reason>' otherwise."""
    import yaml  # PyYAML's safe loader, as `ros2 topic pub` reads the file

    try:
        message = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise TrajectoryRefused(f"{path}: cannot be read as YAML ({' '.join(str(e).split())})") from None
    try:
        return check_trajectory(message, model, limits, efforts=efforts)
    except TrajectoryRefused as e:
        raise TrajectoryRefused(f"{path}: {e}") from None
