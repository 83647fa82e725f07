"""A go2_sim recording through the node's pipeline and the replay's observer, with contact_source
observer, and what the test and benchmarks/bench_legged_observer.py check of it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

import go2_sim
from liedyn_ros import core, pipeline
from liedyn_ros.replay.external import ExternalTorque, ObserverSettings
from liedyn_ros.replay.samples import SampleBlock
from test_pipeline import odometry, rclpy_joint_state

MARGIN_MS = 20.0  # the torque check leaves out this much around each switch and push
TOUCH_N = 1.0  # MuJoCo's foot in contact: pushing with more than this
AFTER_PUSH_S = 0.3  # the torque check also leaves out a push and the stance it unsettles (a foot under
# contact_force_release x contact_force_threshold is up for the observer, down for MuJoCo)
SCRAPE_MS = 10.0  # MuJoCo's contact or flight shorter than this is a scrape or a bounce, not a step


def config(gain: float) -> pipeline.PipelineConfig:
    return pipeline.PipelineConfig(contact_links=go2_sim.FEET, contact_source="observer", observer_gain=gain,
                                   contact_force_threshold=20.0, contact_force_release=0.5,
                                   external_force_threshold=15.0, collision_threshold=(10.0,),
                                   odom_max_age=0.01)


def model() -> core.Model:
    return core.load_urdf(str(go2_sim.URDF), floating_base=True)


@dataclass
class Run:
    """Per sample: the contact state the sample was computed with (N, k), the base force beyond the
    feet (N, 3), the base wrench beyond them (N, 6); the events (start_s, name, peak)."""

    state: np.ndarray
    base: np.ndarray
    wrench: np.ndarray
    events: list[tuple[float, str, float]]


def run_node(rec: go2_sim.Recording, gain: float, samples: int | None = None) -> Run:
    """The node's path on the first ``samples`` samples (all by default)."""
    m = model()
    pipe = pipeline.DynamicsPipeline(m, config(gain))
    names = pipeline.event_names(m, pipe.base_frame)
    N = len(rec.t[:samples])
    state = np.zeros((N, len(go2_sim.FEET)), dtype=bool)
    wrench = np.full((N, 6), np.nan)
    events = []
    for i, t in enumerate(rec.t[:samples]):
        stamp = int(round(t * 1e9))
        T = rec.pose[i]
        pipe.on_odometry(odometry("rclpy", stamp, T[:3, 3], Rotation.from_matrix(T[:3, :3]).as_quat(), rec.v[i, :6],
                                  child="base"))
        out = pipe.on_joint_state(rclpy_joint_state(stamp, list(rec.names), rec.q[i], rec.v[i, 6:], rec.effort[i]))
        assert out is not None, pipe.stats.skipped
        assert out.outputs.contact_active is not None
        state[i] = out.outputs.contact_active
        if out.external_base_wrench is not None:
            wrench[i] = out.external_base_wrench
        if out.collision is not None:
            events.append((out.collision.start_ns * 1e-9, names[out.collision.joint], out.collision.peak))
    return Run(state, np.linalg.norm(wrench[:, 3:], axis=1), wrench, events)


def run_replay(rec: go2_sim.Recording, gain: float, block: int = 1000) -> Run:
    """The replay's path: ExternalTorque over blocks of samples."""
    m, cfg = model(), config(gain)
    contacts = pipeline.resolve_contacts(m, cfg)
    assert contacts is not None
    observer = pipeline.ContactObserver(contacts, cfg.contact_force_threshold, cfg.contact_force_release, True)
    external = ExternalTorque(m, ObserverSettings(gain=gain, threshold=cfg.collision_threshold), None, None, observer,
                              cfg.external_force_threshold, "base")
    order = [rec.names.index(j) for j in m.joint_names]
    stamps = np.round(rec.t * 1e9).astype(np.int64)
    states, wrenches = [], []
    for a in range(0, len(rec.t), block):
        rows = slice(a, a + block)
        v = np.concatenate((rec.v[rows, :6], rec.v[rows, 6:][:, order]), axis=1)
        b = SampleBlock(stamps[rows], stamps[rows], rec.q[rows][:, order], v, rec.effort[rows][:, order],
                        rec.pose[rows], ("",) * len(stamps[rows]))
        external.add(b)
        assert external.contact_state is not None and external.base_wrench is not None
        states.append(external.contact_state)
        wrenches.append(external.base_wrench)
    events = [(e["start_ns"] * 1e-9, e["joint"], e["peak"]) for e in external.collisions()]
    wrench = np.concatenate(wrenches)
    return Run(np.concatenate(states), np.linalg.norm(wrench[:, 3:], axis=1), wrench, events)


@dataclass
class PushResult:
    start: float
    force: tuple[float, float, float]
    name: str
    delay_ms: float
    estimated: float
    applied: float
    error_pct: float
    wrench_error_pct: float


@dataclass
class Evaluation:
    pushes: list[PushResult]
    other_events: list[tuple[float, str, float]]
    touchdown_ms: list[float]
    liftoff_ms: list[float]
    spurious: int
    margin_ms: float
    samples: int
    torque_median_pct: float
    torque_p99_pct: float
    torque_max_pct: float
    within_1pct: float


def switches(flags: np.ndarray) -> list[tuple[int, int, bool]]:
    """(sample, foot, on) of every change of the flags (N, k)."""
    change = np.diff(flags.astype(np.int8), axis=0)
    rows, feet = np.nonzero(change)
    return [(int(r) + 1, int(f), bool(change[r, f] > 0)) for r, f in zip(rows, feet)]


def steps(rec: go2_sim.Recording) -> np.ndarray:
    """MuJoCo's contact state (N, k) as steps: a foot pushing with more than TOUCH_N, runs shorter
    than SCRAPE_MS (a foot scraping the floor as it lifts, a bounce) merged into the one before."""
    flags = rec.normal > TOUCH_N
    shortest = int(round(SCRAPE_MS * 1e-3 / (rec.t[1] - rec.t[0])))
    for foot in range(flags.shape[1]):
        f = flags[:, foot]
        edges = np.flatnonzero(np.diff(f.astype(np.int8))) + 1
        bounds = np.concatenate(([0], edges, [len(f)]))
        for a, b in zip(bounds[1:-1], bounds[2:]):
            if b - a < shortest and b < len(f):
                f[a:b] = f[a - 1]
    return flags


def evaluate(rec: go2_sim.Recording, run: Run, pushes: tuple[go2_sim.Push, ...]) -> Evaluation:
    dt = rec.t[1] - rec.t[0]
    results, matched = [], set()
    for p in pushes:
        after = [e for e in run.events if p.start <= e[0] <= p.start + p.duration]
        name, delay = (after[0][1], (after[0][0] - p.start) * 1e3) if after else ("none", np.inf)
        matched |= {e for e in after}
        half = (rec.t >= p.start + p.duration / 2) & (rec.t < p.start + p.duration)
        est, applied = run.wrench[half].mean(axis=0), rec.push[half].mean(axis=0)
        f_est, f_app = np.linalg.norm(est[3:]), np.linalg.norm(applied[3:])
        results.append(PushResult(p.start, p.force, name, delay, f_est, f_app, (f_est / f_app - 1) * 100,
                                  np.linalg.norm(est - applied) / np.linalg.norm(applied) * 100))
    # the observer's state changes one sample after its estimate crosses: compare with the sample before
    sim, obs = switches(steps(rec)), switches(run.state)
    delays: dict[bool, list[float]] = {True: [], False: []}
    used = set()
    for i, foot, on in sim:
        if rec.t[i] < 0.2:  # the observer starting from rest
            continue
        near = [(abs(j - i), j) for j, f, o in obs if f == foot and o == on and abs(j - i) * dt < 0.05]
        if near:
            j = min(near)[1]
            used.add((j, foot))
            delays[on].append((j - 1 - i) * dt * 1e3)
        else:
            delays[on].append(np.inf)
    spurious = sum(1 for j, f, _ in obs if (j, f) not in used and rec.t[j] >= 0.2)
    # contact-consistent torques with the observer's states, MuJoCo's accelerations
    m = model()
    order = [rec.names.index(j) for j in m.joint_names]
    q, effort = rec.q[:, order], rec.effort[:, order]
    v = np.concatenate((rec.v[:, :6], rec.v[:, 6:][:, order]), axis=1)
    a = np.concatenate((rec.a[:, :6], rec.a[:, 6:][:, order]), axis=1)
    contacts = pipeline.resolve_contacts(m, config(100.0))
    assert contacts is not None
    keep = rec.t >= 0.2
    for i, _, _ in sim:
        keep[max(0, i - int(MARGIN_MS * 1e-3 / dt)): i + int(MARGIN_MS * 1e-3 / dt)] = False
    for p in pushes:
        keep &= ~((rec.t >= p.start - MARGIN_MS * 1e-3) & (rec.t < p.start + p.duration + AFTER_PUSH_S))
    idx = np.flatnonzero(keep)
    tau_full = core.rnea(m, q[idx], v[idx], a[idx], base_pose=rec.pose[idx])
    A = core.constraint_jacobian(m, q[idx], contacts.on(m), base_pose=rec.pose[idx])
    rows = np.repeat(run.state[idx], np.diff(contacts.rows), axis=1)
    lam = pipeline.forces_closest_to(tau_full, A, effort[idx], 6, rows)
    tau = pipeline.joint_torques(tau_full, A, lam, 6)
    rel = np.linalg.norm(tau - effort[idx], axis=1) / np.linalg.norm(effort[idx], axis=1) * 100
    return Evaluation(results, [e for e in run.events if e not in matched], delays[True], delays[False], spurious,
                      MARGIN_MS, len(idx), float(np.median(rel)), float(np.percentile(rel, 99)), float(rel.max()),
                      float((rel <= 1.0).mean() * 100))
