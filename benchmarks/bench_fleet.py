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
- TRUNCATED bags cut at 60 % of their file (salvaged by the replay).

Then `liedyn-fleet --identify friction (--identify payload panda_hand on the arms, by the
manifest) --period day` on the whole fleet (2 workers), and the checks: the flags (exactly the
drifting joint, from about the day it crossed +20 %, and the mislabelled payload), the damaged
bags listed with what was salvaged, the pooled friction against the truth. Last, throughput on
the first THROUGHPUT bags: liedyn-fleet with 1 and 2 local workers against `liedyn-replay --jobs
1` and `--jobs 2` on the same bags and per-bag options, in samples/s.

    python benchmarks/bench_fleet.py [--arms 4] [--quadrupeds 3] [--days 30] [--bags-per-day 2]
                                     [--seconds 4] [--out /tmp/bench_fleet]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pinocchio as pin
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from liedyn_ros.robot_data import robots_dir

RATE = 200.0  # Hz
DAY_NS = 86_400 * 10**9
T0 = 1_790_000_000 * 10**9  # 2026-09-21 UTC
SMOOTHING = 0.01  # the friction's tanh velocity scale, as core.identification's default
FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
DRIFT_ROBOT, DRIFT_JOINT, DRIFT = "arm_1", "panda_joint4", 0.4
MISLABELLED, TRUE_PAYLOAD, LABEL = "arm_2", 3.0, 1.0
TRUNCATED = 3
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


def generate(out: Path, arms: int, quadrupeds: int, days: int, per_day: int, seconds: float, seed: int = 7):
    """The bags, the manifest and the truth: per robot its friction and payload."""
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
        for day in range(days):
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
    cut = [rows[i]["bag"] for i in rng.choice(len(rows), TRUNCATED, replace=False)]
    for bag in cut:
        for file in (out / bag).glob("*.mcap"):
            data = file.read_bytes()
            file.write_bytes(data[:int(0.6 * len(data))])
    (out / "truth.json").write_text(json.dumps({r: {k: v.tolist() if isinstance(v, np.ndarray) else v
                                                   for k, v in t.items()} for r, t in robots.items()}, indent=1))
    with (out / "manifest.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return robots, rows, cut


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
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--throughput", type=int, default=12, help="bags of the throughput comparison")
    p.add_argument("--out", type=Path, default=Path("/tmp/bench_fleet"))
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    started = time.perf_counter()
    robots, rows, cut = generate(args.out, args.arms, args.quadrupeds, args.days, args.bags_per_day, args.seconds)
    print(f"fleet: {args.arms} Panda arms, {args.quadrupeds} Go2 quadrupeds, {args.days} days x {args.bags_per_day} "
          f"bags of {args.seconds:g} s at {RATE:g} Hz: {len(rows)} bags ({TRUNCATED} truncated), generated in "
          f"{time.perf_counter() - started:.0f} s")
    store = args.out / "fleet"
    fleet = [*FLEET, str(args.out / "bags"), "--manifest", str(args.out / "manifest.csv"),
             "--no-plots", "--no-progress"]
    elapsed = run(fleet + ["--out", str(store), "--workers", "2", "--period", "day"])
    con = duckdb.connect(str(store / "fleet.duckdb"), read_only=True)
    samples = con.execute("SELECT sum(samples) FROM bags").fetchone()[0]
    print(f"\nliedyn-fleet, 2 workers, whole fleet: {elapsed:.0f} s, {samples:,} samples, {samples / elapsed:,.0f} samples/s")
    check(con, robots, cut, args.days)
    throughput(args, rows)


def check(con, robots: dict, cut: list[str], days: int) -> None:
    print("\nflags:")
    for robot, joint, kind, value, reference, since, detail in con.execute(
            "SELECT robot, joint, kind, value, reference, since_ns, detail FROM flags ORDER BY robot, joint, kind").fetchall():
        day = (since - T0) / DAY_NS if since is not None else float("nan")
        print(f"  {kind:<18} {robot:<7} {joint:<16} since day {day:5.2f}: {detail}")
    limit_day = 0.2 / DRIFT * (days - 1)
    print(f"  (planted: {DRIFT_ROBOT} {DRIFT_JOINT} +{DRIFT:.0%} over the {days} days, above +20 % of its start from "
          f"day {limit_day:.1f}; {MISLABELLED} carries {TRUE_PAYLOAD} kg labelled {LABEL} kg)")
    print("\ndamaged bags:")
    for bag, robot, status, samples, error in con.execute(
            "SELECT bag, robot, status, samples, error FROM bags WHERE status = 'error' OR salvaged ORDER BY bag").fetchall():
        print(f"  {robot:<7} {Path(bag).name:<10} {status}: {samples} samples salvaged {error or ''}")
    print(f"  (planted: {', '.join(sorted(Path(b).name + ' of ' + Path(b).parent.name for b in cut))})")
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


def throughput(args, rows: list[dict]) -> None:
    bags = [str(args.out / r["bag"]) for r in rows if r["robot"] == "arm_0"][:args.throughput]
    samples = None
    print(f"\nthroughput on {len(bags)} bags of arm_0 (same per-bag options, no identification):")
    params, urdf = args.out / rows[0]["params"], rows[0]["urdf"]
    common = ["--urdf", urdf, "--params", str(params), "--no-plots", "--no-progress"]
    for workers in (1, 2):
        out = args.out / f"tp_fleet_{workers}"
        elapsed = run([*FLEET, *bags, "--out", str(out), "--workers", str(workers), *common])
        with duckdb.connect(str(out / "fleet.duckdb"), read_only=True) as con:
            samples = con.execute("SELECT sum(samples) FROM bags").fetchone()[0]
        print(f"  liedyn-fleet --workers {workers}: {elapsed:6.1f} s, {samples / elapsed:8,.0f} samples/s")
    for jobs in (1, 2):
        elapsed = run([*REPLAY, *bags, "--out", str(args.out / f"tp_replay_{jobs}"),
                       "--jobs", str(jobs), *common])
        print(f"  liedyn-replay --jobs {jobs}:   {elapsed:6.1f} s, {samples / elapsed:8,.0f} samples/s")


if __name__ == "__main__":
    main()
