"""liedyn-fleet on a generated fleet: does the report flag what was planted, and how fast is it?

The fleet: ARMS Franka Panda arms (7 DoF, example-robot-data's panda.urdf with the fingers fixed)
and QUADRUPEDS Unitree Go2 (12 DoF, floating base) standing on their feet and trotting in place
(the base still, the diagonal leg pairs lifting in turn), BAGS_PER_DAY bags a day over DAYS
simulated days. Efforts are Pinocchio's inverse dynamics (independent of liedyn_ros) of the
robot with its own payload, plus its own joint friction (Coulomb tanh(qd / 0.01) + viscous) and
noise; a Go2's stance feet carry the contact forces that hold the base (solved from Pinocchio's
base rows), so its stance legs' torques are not the free dynamics. Planted:

- arm_1's panda_joint4 Coulomb friction grows linearly by +40 % over the DAYS days;
- arm_2 carries 3.0 kg, its parameter file says 1.0 kg (every other payload labelled right);
- --truncated bags cut at 60 % of their file (salvaged by the replay).

Then `liedyn-fleet --identify friction (--identify payload panda_hand on the arms, by the
manifest) --period day` on the whole fleet (2 workers), and the checks: the findings (flags no
other flag explains: exactly the drifting joint, from about the day it crossed +20 %, and the
mislabelled payload), the damaged bags (exactly the truncated ones, with what was salvaged),
the pooled friction against the truth. Then throughput on the first --throughput bags of arm_0:
liedyn-fleet with 1 and 2 local workers and on a cluster of separate `dask scheduler` and `dask
worker --nworkers 2` processes (started as a user would), against `liedyn-replay --jobs 1` and
`--jobs 2` on the same bags and per-bag options, in samples/s and the engine's overhead per bag;
and the peak resident memory of a `dask worker` process against bag length (--memory).

The issue's fleet (20 robots, 1,000 bags over 30 days; --reuse analyses its store again):

    python benchmarks/bench_fleet.py --arms 10 --quadrupeds 10 --days 30 --active-days 25 \
                                     --truncated 5 --throughput 0 --memory --out /tmp/fleet_1000
    python benchmarks/bench_fleet.py --only-scale --arms 1 --quadrupeds 0 --days 8 --truncated 0 \
                                     --throughput 12 --memory 3 30 120
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb
import numpy as np
import pinocchio as pin
import psutil
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from liedyn_ros.robot_data import robots_dir

RATE = 200.0  # Hz
DAY_NS = 86_400 * 10**9
T0 = 1_789_948_800 * 10**9  # 2026-09-21 00:00 UTC: a day's bags (08:00, 12:00, ...) within one UTC day
SMOOTHING = 0.01  # the friction's tanh velocity scale, as core.identification's default
FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
DRIFT_ROBOT, DRIFT_JOINT, DRIFT = "arm_1", "panda_joint4", 0.4
MISLABELLED, TRUE_PAYLOAD, LABEL = "arm_2", 3.0, 1.0
PY = sys.executable
FLEET = [PY, "-c", "import sys; from liedyn_ros.fleet.cli import main; sys.exit(main())"]  # liedyn-fleet
REPLAY = [PY, "-m", "liedyn_ros.replay"]  # liedyn-replay
TS = get_typestore(Stores.ROS2_JAZZY)


def panda_urdf(out: Path) -> Path:
    """panda.urdf with the two finger joints fixed (closed): a 7-DoF arm."""
    text = (robots_dir() / "panda_description/urdf/panda.urdf").read_text()
    for finger in ("panda_finger_joint1", "panda_finger_joint2"):
        start = text.index(f'<joint name="{finger}"')
        end = text.index("</joint>", start)
        block = text[start:end]
        fixed = block.replace('type="prismatic"', 'type="fixed"')
        fixed = "\n".join(line for line in fixed.splitlines() if "<mimic" not in line and "<limit" not in line)
        text = text[:start] + fixed + text[end:]
    path = out / "panda7.urdf"
    path.write_text(text)
    return path


def go2_urdf(out: Path) -> Path:
    """go2.urdf under a floating root joint: the replay and the fleet then take its base from /odom
    (while the manifest's arms, on the same command line, stay fixed-base)."""
    text = (robots_dir() / "go2_description/urdf/go2.urdf").read_text()
    start = text.index(">", text.index("<robot")) + 1
    floating = ('\n  <link name="world"/>\n  <joint name="floating_base" type="floating">'
                '<parent link="world"/><child link="base"/></joint>')
    path = out / "go2_floating.urdf"
    path.write_text(text[:start] + floating + text[start:])
    return path


def header(stamp: int, frame: str):
    t = TS.types
    sec, nsec = divmod(int(stamp), 10**9)
    return t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame)


def write_bag(path: Path, stamps, names, q, qd, effort, base_z: float | None = None) -> None:
    """JointStates (and, for a floating base, an Odometry of the still base before each) as mcap."""
    t = TS.types
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        js = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=TS)
        odom = None if base_z is None else writer.add_connection("/odom", "nav_msgs/msg/Odometry", typestore=TS)
        for i, stamp in enumerate(stamps):
            if odom is not None:
                zero = t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0)
                pose = t["geometry_msgs/msg/Pose"](position=t["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=base_z),
                                                  orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))
                msg = t["nav_msgs/msg/Odometry"](
                    header=header(stamp, "odom"), child_frame_id="base",
                    pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
                    twist=t["geometry_msgs/msg/TwistWithCovariance"](
                        twist=t["geometry_msgs/msg/Twist"](linear=zero, angular=zero), covariance=np.zeros(36)))
                writer.write(odom, int(stamp) + 100_000, TS.serialize_cdr(msg, "nav_msgs/msg/Odometry"))
            msg = t["sensor_msgs/msg/JointState"](header=header(stamp, "base"), name=list(names), position=q[i].copy(),
                                                  velocity=qd[i].copy(), effort=effort[i].copy())
            writer.write(js, int(stamp) + 300_000, TS.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


class Arm:
    """A Panda whose payload (mass at 0.1 m along the hand's z) and friction are its own."""

    def __init__(self, urdf: Path, payload: float, coulomb: np.ndarray, viscous: np.ndarray) -> None:
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        self.names = list(self.model.names[1:])
        self.coulomb, self.viscous = coulomb, viscous
        hand = self.model.getFrameId("panda_hand")
        frame = self.model.frames[hand]
        inertia = pin.Inertia(payload, np.array([0.0, 0.0, 0.1]), np.diag([2e-3, 2e-3, 1e-3]) * payload)
        self.model.inertias[frame.parentJoint] += frame.placement.act(inertia)

    def recording(self, t: np.ndarray, rng: np.random.Generator, drift: float = 1.0):
        n = self.model.nq
        home = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
        amp = rng.uniform(0.3, 0.6, n)
        w = 2 * np.pi * rng.uniform(0.3, 0.8, n)
        ph = rng.uniform(0, 2 * np.pi, n)
        arg = w * t[:, None] + ph
        q, qd, qdd = home + amp * np.sin(arg), amp * w * np.cos(arg), -amp * w * w * np.sin(arg)
        tau = np.array([pin.rnea(self.model, self.data, *x) for x in zip(q, qd, qdd)])
        coulomb = self.coulomb.copy()
        coulomb[self.names.index(DRIFT_JOINT)] *= drift
        tau += coulomb * np.tanh(qd / SMOOTHING) + self.viscous * qd
        return q, qd, tau


def bump(s, power):
    """sin^power(pi s) and its first two derivatives in s (zero at both ends for power 4)."""
    x, c = np.sin(np.pi * s), np.cos(np.pi * s)
    if power == 4:
        return x**4, 4 * np.pi * x**3 * c, 4 * np.pi**2 * (3 * x**2 * c**2 - x**4)
    # sin^3(2 pi s): out and back (both signs of velocity) within the swing
    x, c = np.sin(2 * np.pi * s), np.cos(2 * np.pi * s)
    return x**3, 6 * np.pi * x**2 * c, 12 * np.pi**2 * x * (2 * c**2 - x**2)


class Quadruped:
    """A Go2 with a payload on its trunk, its base still and the diagonal pairs trotting in place;
    the stance feet's forces (point contacts) hold the base."""

    STAND = {"hip": 0.0, "thigh": 0.8, "calf": -1.6}
    SWING = {"hip": 0.15, "thigh": 0.4, "calf": -0.8}

    def __init__(self, urdf: Path, payload: float, coulomb: np.ndarray, viscous: np.ndarray) -> None:
        self.model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
        self.data = self.model.createData()
        self.names = list(self.model.names[2:])
        self.coulomb, self.viscous = coulomb, viscous
        self.model.inertias[1] += pin.Inertia(payload, np.array([0.0, 0.0, 0.05]), np.diag([5e-3, 1e-2, 1e-2]) * payload)
        self.feet = [self.model.getFrameId(f) for f in FEET]
        stand = np.array([self.STAND[n.split("_")[1]] for n in self.names])
        pin.framesForwardKinematics(self.model, self.data, np.concatenate([[0, 0, 0, 0, 0, 0, 1], stand]))
        self.base_z = -min(self.data.oMf[f].translation[2] for f in self.feet)  # stance feet on z = 0
        self.stand = stand

    def recording(self, t: np.ndarray, rng: np.random.Generator):
        n = len(self.names)
        period = rng.uniform(0.9, 1.2)
        scale = rng.uniform(0.8, 1.2, n)
        q, qd, qdd = np.tile(self.stand, (len(t), 1)), np.zeros((len(t), n)), np.zeros((len(t), n))
        phase = (t / period) % 1.0
        swinging = np.zeros((len(t), 4), dtype=bool)
        for leg, name in enumerate(("FL", "FR", "RL", "RR")):
            first = name in ("FL", "RR")  # the diagonal pairs
            s = np.where(first, phase * 2, phase * 2 - 1)
            on = (s >= 0) & (s < 1)
            swinging[:, leg] = on
            half = period / 2
            for part in ("hip", "thigh", "calf"):
                j = self.names.index(f"{name}_{part}_joint")
                b, db, ddb = bump(np.clip(s, 0, 1), 3 if part == "hip" else 4)
                a = self.SWING[part] * scale[j]
                q[:, j] += np.where(on, a * b, 0.0)
                qd[:, j] = np.where(on, a * db / half, 0.0)
                qdd[:, j] = np.where(on, a * ddb / half**2, 0.0)
        tau = np.zeros((len(t), n))
        for i in range(len(t)):
            qi = np.concatenate([[0, 0, self.base_z, 0, 0, 0, 1], q[i]])
            full = pin.rnea(self.model, self.data, qi, np.concatenate([np.zeros(6), qd[i]]),
                            np.concatenate([np.zeros(6), qdd[i]]))
            pin.computeJointJacobians(self.model, self.data, qi)
            pin.framesForwardKinematics(self.model, self.data, qi)
            J = np.vstack([pin.getFrameJacobian(self.model, self.data, f, pin.LOCAL_WORLD_ALIGNED)[:3]
                           for f, swing in zip(self.feet, swinging[i]) if not swing])
            lam = np.linalg.lstsq(J[:, :6].T, full[:6], rcond=None)[0]  # the stance feet hold the base
            tau[i] = full[6:] - J[:, 6:].T @ lam
        tau += self.coulomb * np.tanh(qd / SMOOTHING) + self.viscous * qd
        return q, qd, tau


def params_file(path: Path, values: dict) -> Path:
    path.write_text("/**:\n  ros__parameters:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in values.items()))
    return path


def recording_days(rng: np.random.Generator, days: int, active: int) -> list[int]:
    """`active` of the `days` days on which a robot records (the first and the last among them;
    the others idle, as robots in maintenance or on leave)."""
    if not 2 <= active <= days:
        raise SystemExit(f"a robot records on 2 to {days} days, not {active}")
    return sorted([0, days - 1, *rng.choice(np.arange(1, days - 1), active - 2, replace=False).tolist()])


def generate(out: Path, arms: int, quadrupeds: int, days: int, per_day: int, seconds: float, truncated: int,
             active: int | None = None, seed: int = 7):
    """The bags, the manifest and the truth: per robot its friction and payload. Each robot
    records `per_day` bags on `active` of the `days` days (default: every day)."""
    rng = np.random.default_rng(seed)
    (out / "params").mkdir(parents=True)
    arm_urdf, go2 = panda_urdf(out), go2_urdf(out)
    t = np.arange(int(seconds * RATE)) / RATE
    robots, rows = {}, []
    for r in range(arms + quadrupeds):
        arm = r < arms
        robot = f"arm_{r}" if arm else f"go2_{r - arms}"
        n = 7 if arm else 12
        base_c = np.full(n, 0.8) if arm else np.tile([0.4, 0.4, 0.6], 4)
        coulomb = base_c * rng.uniform(0.85, 1.15, n)
        viscous = (0.3 if arm else 0.05) * rng.uniform(0.8, 1.2, n)
        payload = TRUE_PAYLOAD if robot == MISLABELLED else float(rng.uniform(0.5, 2.0))
        label = LABEL if robot == MISLABELLED else payload
        sim = Arm(arm_urdf, payload, coulomb, viscous) if arm else Quadruped(robots_dir() / "go2_description/urdf/go2.urdf", payload, coulomb, viscous)
        if arm:
            values = {"payload_link": "panda_hand", "payload_mass": label, "payload_com": [0.0, 0.0, 0.1],
                      "payload_inertia": [2e-3 * label, 0.0, 0.0, 2e-3 * label, 0.0, 1e-3 * label]}
        else:
            values = {"payload_link": "base", "payload_mass": label, "payload_com": [0.0, 0.0, 0.05],
                      "payload_inertia": [5e-3 * label, 0.0, 0.0, 1e-2 * label, 0.0, 1e-2 * label],
                      "contact_links": list(FEET), "contact_types": ["point"], "contact_source": "kinematic"}
        params = params_file(out / "params" / f"{robot}.yaml", values)
        robots[robot] = {"names": sim.names, "coulomb": coulomb, "viscous": viscous, "payload": payload,
                         "label": label, "arm": arm}
        (out / "bags" / robot).mkdir(parents=True)
        for day in recording_days(rng, days, active or days):
            drift = 1 + DRIFT * day / (days - 1) if robot == DRIFT_ROBOT else 1.0
            for k in range(per_day):
                stamps = T0 + day * DAY_NS + (8 + 4 * k) * 3600 * 10**9 + np.round(t * 1e9).astype(np.int64)
                q, qd, tau = sim.recording(t, rng, drift) if arm else sim.recording(t, rng)
                tau = tau + rng.normal(0, 0.05 if arm else 0.02, tau.shape)
                bag = out / "bags" / robot / f"day{day:02d}_{k}"
                write_bag(bag, stamps, sim.names, q, qd, tau, None if arm else sim.base_z)
                rows.append({"bag": str(bag.relative_to(out)), "robot": robot,
                             "urdf": str(arm_urdf if arm else go2), "params": str(params.relative_to(out)),
                             "identify": "friction; payload panda_hand" if arm else "friction"})
    cut = [rows[i]["bag"] for i in rng.choice(len(rows), truncated, replace=False)]
    for bag in cut:
        for file in (out / bag).glob("*.mcap"):
            data = file.read_bytes()
            file.write_bytes(data[:int(0.6 * len(data))])
    (out / "truth.json").write_text(json.dumps({r: {k: v.tolist() if isinstance(v, np.ndarray) else v
                                                   for k, v in t.items()} for r, t in robots.items()}, indent=1))
    (out / "truncated.json").write_text(json.dumps(cut))
    with (out / "manifest.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return robots, rows, cut


def generated(out: Path):
    """The truth, the manifest's rows and the truncated bags of a fleet `generate` wrote."""
    with (out / "manifest.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return json.loads((out / "truth.json").read_text()), rows, json.loads((out / "truncated.json").read_text())


def run(cmd: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd[:4])} ...")
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, default=4)
    p.add_argument("--quadrupeds", type=int, default=3)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--bags-per-day", type=int, default=2)
    p.add_argument("--active-days", type=int, help="days on which each robot records (default: every day)")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--truncated", type=int, default=3, help="bags cut at 60 %% of their file")
    p.add_argument("--throughput", type=int, default=12, help="bags of the throughput comparison (0: none)")
    p.add_argument("--memory", type=float, nargs="*", default=[3.0, 30.0, 120.0], metavar="SECONDS",
                   help="bag lengths of the peak-memory comparison (none: skip it)")
    p.add_argument("--only-scale", action="store_true",
                   help="generate, then only the throughput and memory comparisons (not the whole fleet's run)")
    p.add_argument("--out", type=Path, default=Path("/tmp/bench_fleet"))
    p.add_argument("--reuse", action="store_true",
                   help="the fleet OUT holds already: run liedyn-fleet on it again (it replays only new or changed "
                   "bags, then analyses the whole store) and check")
    args = p.parse_args()
    started = time.perf_counter()
    if args.reuse:
        robots, rows, cut = generated(args.out)
    else:
        shutil.rmtree(args.out, ignore_errors=True)
        robots, rows, cut = generate(args.out, args.arms, args.quadrupeds, args.days, args.bags_per_day,
                                     args.seconds, args.truncated, args.active_days)
    arms = sum(t["arm"] for t in robots.values())
    print(f"fleet: {arms} Panda arms, {len(robots) - arms} Go2 quadrupeds over {args.days} days, {len(rows)} bags "
          f"({len(cut)} truncated), {'reused' if args.reuse else 'generated'} in {time.perf_counter() - started:.0f} s",
          flush=True)
    if args.only_scale:
        throughput(args, rows)
        memory(args, rows)
        return
    store = args.out / "fleet"
    fleet = [*FLEET, str(args.out / "bags"), "--manifest", str(args.out / "manifest.csv"),
             "--no-plots", "--no-progress"]
    elapsed = run(fleet + ["--out", str(store), "--workers", "2", "--period", "day"])
    con = duckdb.connect(str(store / "fleet.duckdb"), read_only=True)
    samples = con.execute("SELECT sum(samples) FROM bags").fetchone()[0]
    print(f"\nliedyn-fleet, 2 workers, whole fleet: {elapsed:.0f} s, {samples:,} samples, {samples / elapsed:,.0f} "
          "samples/s", flush=True)
    check(con, robots, cut, args.days)
    if args.throughput:
        throughput(args, rows)
    if args.memory:
        memory(args, rows)


def check(con, robots: dict, cut: list[str], days: int) -> None:
    print("\nflags (those a cause explains under it):")
    flags = con.execute("SELECT robot, joint, kind, since_ns, detail, explained_by FROM flags "
                        "ORDER BY robot, joint, kind").fetchall()
    for robot, joint, kind, since, detail, explained_by in flags:
        if explained_by is None:
            print(f"  {kind:<18} {robot:<7} {joint:<16} since day {(since - T0) / DAY_NS:5.2f}: {detail}")
            for r, j, k, _, d, _ in (f for f in flags if f[0] == robot and f[5] == kind):
                print(f"      explains {k:<18} {j:<16} {d}")
    limit_day = 0.2 / DRIFT * (days - 1)
    print(f"  (planted: {DRIFT_ROBOT} {DRIFT_JOINT} +{DRIFT:.0%} over the {days} days, above +20 % of its start from "
          f"day {limit_day:.1f}; {MISLABELLED} carries {TRUE_PAYLOAD} kg labelled {LABEL} kg)")
    findings = sorted((r, j, k) for r, j, k, _, _, e in flags if e is None)
    expected = sorted([(DRIFT_ROBOT, DRIFT_JOINT, "friction_drift"), (MISLABELLED, "panda_hand", "payload_mismatch")])
    print(f"  findings (flags no other explains) exactly the planted ones: {findings == expected}")
    print("\ndamaged bags:")
    for bag, robot, status, samples, error in con.execute(
            "SELECT bag, robot, status, samples, error FROM bags WHERE status = 'error' OR salvaged ORDER BY bag").fetchall():
        print(f"  {robot:<7} {Path(bag).name:<10} {status}: {samples} samples salvaged {error or ''}")
    print(f"  (planted: {', '.join(sorted(Path(b).name + ' of ' + Path(b).parent.name for b in cut))})")
    damaged = {str(Path(b).relative_to(Path(b).parents[2])) for (b,) in con.execute(
        "SELECT bag FROM bags WHERE status = 'error' OR salvaged").fetchall()}
    print(f"  damaged bags exactly the truncated ones: {damaged == set(cut)}")
    ident = con.execute("SELECT robot, period, joint, coulomb, payload_mass, status FROM identification").fetchall()
    statuses = {}
    for *_, status in ident:
        statuses[status] = statuses.get(status, 0) + 1
    print(f"\npooled identification: {len(ident)} rows (robot x day x joint), status {statuses}")
    worst = {"arm": [], "go2": []}
    first = min(r[1] for r in ident)
    for robot, period, joint, coulomb, payload, status in ident:
        if status != "ok" or coulomb is None:
            continue
        truth = robots[robot]
        c = truth["coulomb"][truth["names"].index(joint)]
        if robot == DRIFT_ROBOT and joint == DRIFT_JOINT:
            day = (np.datetime64(period) - np.datetime64(first)).astype(int)
            c *= 1 + DRIFT * day / (days - 1)
        worst["arm" if truth["arm"] else "go2"].append(abs(coulomb / c - 1))
    for kind, errors in worst.items():
        if errors:
            e = np.array(errors)
            print(f"  {kind} Coulomb friction per robot-day vs truth: median {np.median(e):.2%}, 95th pct "
                  f"{np.percentile(e, 95):.2%}, max {e.max():.2%}, within 5 %: {np.mean(e < 0.05):.1%} of {e.size}")
    payloads = con.execute("SELECT robot, median(payload_mass), min(payload_mass), max(payload_mass) FROM "
                           "(SELECT DISTINCT robot, period, payload_mass FROM identification WHERE status = 'ok' "
                           "AND payload_mass IS NOT NULL) GROUP BY robot ORDER BY robot").fetchall()
    for robot, med, lo, hi in payloads:
        print(f"  payload {robot}: identified median {med:.3f} kg (days {lo:.3f} to {hi:.3f}), true "
              f"{robots[robot]['payload']:.3f} kg, labelled {robots[robot]['label']:.3f} kg")


@contextmanager
def separate_cluster(workers: int):
    """`dask scheduler` and `dask worker` as a user starts them (this environment's `dask` command,
    each in its own process group, single-threaded workers): the scheduler's address and the
    worker command's process; all of it ended on leaving."""
    dask = Path(PY).with_name("dask")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs.append(subprocess.Popen([str(dask), "worker", address, "--host", "127.0.0.1", "--nworkers", str(workers),
                                   "--nthreads", "1", "--no-dashboard"],
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        yield address, procs[1]
    finally:
        for proc in reversed(procs):  # the workers (their nanny ends them), then the scheduler
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # anything of its group still there


def peak_rss_mb(nannies: subprocess.Popen) -> list[float]:
    """The peak resident memory (VmHWM) of each worker process under the `dask worker` command."""
    peaks = []
    for child in psutil.Process(nannies.pid).children(recursive=True):
        if "spawn_main" in " ".join(child.cmdline()):  # not multiprocessing's resource tracker
            status = Path(f"/proc/{child.pid}/status").read_text()
            peaks.append(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024)
    return peaks


def replay_seconds(folders: list[Path]) -> float:
    """The replays' own time (summary.json's elapsed_s), summed over their output folders."""
    return sum(json.loads((f / "summary.json").read_text())["elapsed_s"] for f in folders)


def throughput(args, rows: list[dict]) -> None:
    """liedyn-fleet (1 and 2 local workers, 2 separate worker processes) against liedyn-replay --jobs
    1 and 2 on the same bags: samples/s, and the engine's overhead per bag (wall per bag and
    process, less the replay's own time per bag)."""
    bags = [str(args.out / r["bag"]) for r in rows if r["robot"] == "arm_0"][:args.throughput]
    params, urdf = args.out / rows[0]["params"], rows[0]["urdf"]
    common = ["--urdf", urdf, "--params", str(params), "--no-plots", "--no-progress"]
    print(f"\nthroughput on {len(bags)} bags of arm_0 (same per-bag options, no identification; overhead: "
          "wall x processes / bags - the replay's own time per bag):", flush=True)
    samples = None
    for label, workers, cluster in (("--workers 1", 1, False), ("--workers 2", 2, False),
                                    ("--scheduler (dask scheduler + dask worker --nworkers 2)", 2, True)):
        out = args.out / f"tp_fleet_{workers}{'_separate' if cluster else ''}"
        if cluster:
            with separate_cluster(workers) as (address, _):
                elapsed = run([*FLEET, *bags, "--out", str(out), "--scheduler", address, *common])
        else:
            elapsed = run([*FLEET, *bags, "--out", str(out), "--workers", str(workers), *common])
        with duckdb.connect(str(out / "fleet.duckdb"), read_only=True) as con:
            samples = con.execute("SELECT sum(samples) FROM bags").fetchone()[0]
        own = replay_seconds(list((out / "bags").iterdir())) / len(bags)
        print(f"  liedyn-fleet {label:<56} {elapsed:6.1f} s, {samples / elapsed:7,.0f} samples/s, overhead "
              f"{elapsed * workers / len(bags) - own:5.2f} s a bag (replay {own:.2f} s)", flush=True)
    for jobs in (1, 2):
        out = args.out / f"tp_replay_{jobs}"
        elapsed = run([*REPLAY, *bags, "--out", str(out), "--jobs", str(jobs), *common])
        own = replay_seconds([p for p in out.iterdir() if p.is_dir()]) / len(bags)
        print(f"  liedyn-replay --jobs {jobs:<48} {elapsed:6.1f} s, {samples / elapsed:7,.0f} samples/s, overhead "
              f"{elapsed * jobs / len(bags) - own:5.2f} s a bag (replay {own:.2f} s)", flush=True)


def memory(args, rows: list[dict]) -> None:
    """Peak resident memory of a worker process against bag length: for each length, two bags of
    arm_0's robot on a fresh `dask worker` process (flat if the replay streams the bag)."""
    truth = json.loads((args.out / "truth.json").read_text())["arm_0"]
    arm = Arm(Path(rows[0]["urdf"]), truth["payload"], np.array(truth["coulomb"]), np.array(truth["viscous"]))
    rng = np.random.default_rng(11)
    common = ["--urdf", rows[0]["urdf"], "--params", str(args.out / rows[0]["params"]), "--no-plots", "--no-progress"]
    print("\npeak resident memory of a worker process (VmHWM) against bag length:", flush=True)
    for seconds in args.memory:
        folder = args.out / f"mem_{seconds:g}s"
        folder.mkdir()
        t = np.arange(int(seconds * RATE)) / RATE
        for k in range(2):
            q, qd, tau = arm.recording(t, rng)
            write_bag(folder / f"bag{k}", T0 + k * 3600 * 10**9 + np.round(t * 1e9).astype(np.int64), arm.names,
                      q, qd, tau + rng.normal(0, 0.05, tau.shape))
        size = sum(f.stat().st_size for f in folder.rglob("*.mcap")) / 2 / 2**20
        with separate_cluster(1) as (address, nannies):
            elapsed = run([*FLEET, str(folder), "--out", str(folder / "fleet"), "--scheduler", address, *common])
            peaks = peak_rss_mb(nannies)
        print(f"  bags of {seconds:5g} s ({len(t):6,} samples, {size:6.2f} MiB): worker peak "
              f"{', '.join(f'{p:.0f}' for p in peaks)} MiB ({elapsed:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
