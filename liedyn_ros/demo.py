"""The built-in example: simulate a Panda, record a bag, replay it, check the dynamics.

`python -m liedyn_ros.demo [--dir DIR]` (what `bash scripts/demo.sh` runs):

1. If DIR/panda_demo_bag is absent, simulate the Franka Panda (liedyn_ros' own description) with our
   own ABA: RK4 at 500 Hz under a known torque profile (inverse dynamics of a smooth
   reference motion plus a light PD correction), and record sensor_msgs/JointState with
   position, velocity and the applied effort at 500 Hz, plus /robot_description, into a
   rosbag2 mcap bag. The applied torques and simulated accelerations go to a side file.
2. Replay the bag with `liedyn_ros.replay` (URDF from the bag), print the summary table and
   write CSV files and plots into DIR/replay.
3. Check: the feedforward torques (RNEA at the Savitzky-Golay acceleration estimate) match
   the applied torques to well under 1% RMS after the first half second, and the predicted
   accelerations (ABA with the recorded efforts) equal the simulated ones.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from liedyn_ros import core
from liedyn_ros.robot_data import panda_urdf

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

RATE_HZ = 500
DURATION_S = 3.0
START_NS = 1_700_000_000 * 1_000_000_000
SETTLE_S = 0.5  # the check starts after the first half second
FF_TOLERANCE = 0.01  # relative RMS


@dataclass(frozen=True)
class Reference:
    """q_ref(t) = center + amplitude * sin(2 pi f t + phase), per joint."""

    center: NDArray[np.float64]
    amplitude: NDArray[np.float64]
    freq: NDArray[np.float64]
    phase: NDArray[np.float64]

    def at(self, t: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
        w = 2 * np.pi * self.freq
        arg = w * t[:, None] + self.phase
        return (self.center + self.amplitude * np.sin(arg), self.amplitude * w * np.cos(arg),
                -self.amplitude * w * w * np.sin(arg))


def panda_reference(n: int) -> Reference:
    arm = 7
    center = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8, 0.02][:n])
    amplitude = np.array([0.5, 0.3, 0.4, 0.4, 0.6, 0.4, 0.8, 0.01][:n])
    freq = np.array([0.35, 0.5, 0.45, 0.4, 0.6, 0.55, 0.7, 0.8][:n])
    phase = np.linspace(0.0, 2.0, n)
    assert n >= arm
    return Reference(center, amplitude, freq, phase)


@dataclass(frozen=True)
class Simulation:
    stamp_ns: NDArray[np.int64]
    q: NDArray[np.float64]
    qd: NDArray[np.float64]
    tau: NDArray[np.float64]  # applied torque at each sample
    qdd: NDArray[np.float64]  # simulated acceleration at each sample


def simulate(model: object, duration_s: float = DURATION_S, rate_hz: int = RATE_HZ) -> Simulation:
    """RK4 with one step per sample; the torque is a known function of time and state:
    tau = RNEA(reference) + Kp (q_ref - q) + Kd (qd_ref - qd)."""
    n = model.n  # type: ignore[attr-defined]
    ref = panda_reference(n)
    dt = 1.0 / rate_hz
    steps = int(round(duration_s * rate_hz))
    # Reference and its inverse dynamics at every sample and half step, in one batch.
    t_half = np.arange(2 * steps + 1) * dt / 2
    q_r, qd_r, qdd_r = ref.at(t_half)
    tau_r = np.asarray(core.rnea(model, q_r, qd_r, qdd_r))
    kp = np.array([60.0] * 4 + [20.0] * 3 + [20.0] * (n - 7))
    kd = np.array([4.0] * 4 + [1.0] * 3 + [0.5] * (n - 7))

    def torque(h: int, q: NDArray[np.float64], qd: NDArray[np.float64]) -> NDArray[np.float64]:
        return tau_r[h] + kp * (q_r[h] - q) + kd * (qd_r[h] - qd)

    def accel(h: int, q: NDArray[np.float64], qd: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(core.aba(model, q, qd, torque(h, q, qd)))

    q, qd = q_r[0].copy(), qd_r[0].copy()
    qs, qds, taus, qdds = [], [], [], []
    for k in range(steps + 1):
        h = 2 * k
        tau = torque(h, q, qd)
        a1 = np.asarray(core.aba(model, q, qd, tau))
        qs.append(q.copy()); qds.append(qd.copy()); taus.append(tau); qdds.append(a1)  # noqa: E702
        if k == steps:
            break
        a2 = accel(h + 1, q + dt / 2 * qd, qd + dt / 2 * a1)
        qd2 = qd + dt / 2 * a1
        a3 = accel(h + 1, q + dt / 2 * qd2, qd + dt / 2 * a2)
        qd3 = qd + dt / 2 * a2
        a4 = accel(h + 2, q + dt * qd3, qd + dt * a3)
        qd4 = qd + dt * a3
        q = q + dt / 6 * (qd + 2 * qd2 + 2 * qd3 + qd4)
        qd = qd + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    stamps = START_NS + np.arange(steps + 1, dtype=np.int64) * (1_000_000_000 // rate_hz)
    return Simulation(stamps, np.array(qs), np.array(qds), np.array(taus), np.array(qdds))


def write_bag(path: Path, urdf_xml: str, joint_names: Sequence[str], sim: Simulation,
              extra_joint: str | None = None) -> None:
    """rosbag2 (mcap): /robot_description once, then /joint_states at every sample.

    `extra_joint` (the Panda's mimic finger) is appended as a real driver would; the replay
    must ignore it. Receive times trail the stamps by a small jittery latency.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    names = list(joint_names) + ([extra_joint] if extra_joint else [])
    pad = 1 if extra_joint else 0
    rng = np.random.default_rng(0)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        desc = writer.add_connection("/robot_description", "std_msgs/msg/String", typestore=ts)
        js = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        writer.write(desc, int(sim.stamp_ns[0]) - 1_000_000,
                     ts.serialize_cdr(t["std_msgs/msg/String"](data=urdf_xml), "std_msgs/msg/String"))
        for k, stamp in enumerate(sim.stamp_ns):
            sec, nsec = divmod(int(stamp), 1_000_000_000)
            msg = t["sensor_msgs/msg/JointState"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec),
                                                frame_id=""),
                name=names,
                position=np.concatenate([sim.q[k], sim.q[k, -1:][:pad]]),
                velocity=np.concatenate([sim.qd[k], sim.qd[k, -1:][:pad]]),
                effort=np.concatenate([sim.tau[k], np.zeros(pad)]),
            )
            latency = 200_000 + int(rng.integers(0, 300_000))
            writer.write(js, int(stamp) + latency, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def ensure_demo_bag(directory: Path) -> tuple[Path, Path]:
    """The demo bag and its truth file, simulated once and reused afterwards."""
    bag, truth = directory / "panda_demo_bag", directory / "panda_demo_truth.npz"
    if bag.exists() and truth.exists():
        print(f"using the demo bag {bag}")
        return bag, truth
    import shutil

    shutil.rmtree(bag, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    urdf = panda_urdf()
    model = core.load_urdf(str(urdf))
    print(f"simulating the Panda ({model.n} joints) for {DURATION_S} s at {RATE_HZ} Hz with liedyn ABA ...")
    sim = simulate(model)
    write_bag(bag, urdf.read_text(), model.joint_names, sim, extra_joint="panda_finger_joint2")
    np.savez(truth, stamp_ns=sim.stamp_ns, tau=sim.tau, qdd=sim.qdd)
    print(f"wrote {bag} ({len(sim.stamp_ns)} joint states)")
    return bag, truth


def check(out_dir: Path, truth_path: Path, joint_names: Sequence[str]) -> bool:
    """Compares the replay's CSV outputs with the simulation; prints and returns the verdict."""
    truth = np.load(truth_path)
    ff, ff_stamps = _read_csv(out_dir / "feedforward_torque.csv")
    pred, pred_stamps = _read_csv(out_dir / "predicted_acceleration.csv")
    index = {int(s): i for i, s in enumerate(truth["stamp_ns"])}
    ff_rows = np.array([index[s] for s in ff_stamps])
    pred_rows = np.array([index[s] for s in pred_stamps])
    settled = (truth["stamp_ns"][ff_rows] - truth["stamp_ns"][0]) >= SETTLE_S * 1e9
    err = ff[settled, 1:] - truth["tau"][ff_rows[settled]]
    rel = np.sqrt((err**2).mean(axis=0)) / np.sqrt((truth["tau"][ff_rows[settled]] ** 2).mean(axis=0))
    total = np.sqrt((err**2).sum() / (truth["tau"][ff_rows[settled]] ** 2).sum())
    acc_err = np.abs(pred[:, 1:] - truth["qdd"][pred_rows]).max()
    acc_scale = np.abs(truth["qdd"]).max()
    print("feedforward torque vs applied torque, relative RMS error after the first "
          f"{SETTLE_S} s (tolerance {FF_TOLERANCE:.0%}):")
    for name, r in zip(joint_names, rel):
        print(f"  {name:<22} {100 * r:10.3g} %")
    print(f"  {'all joints':<22} {100 * total:10.3g} %")
    print(f"predicted vs simulated acceleration: max |difference| {acc_err:.3g} rad/s^2 "
          f"(largest acceleration {acc_scale:.3g}), {len(pred)} of {len(truth['qdd'])} samples")
    ok = bool(rel.max() < FF_TOLERANCE and acc_err <= 1e-8 * max(acc_scale, 1.0) and len(pred) == len(truth["qdd"]))
    print("demo check:", "PASS" if ok else "FAIL")
    return ok


def _read_csv(path: Path) -> tuple[NDArray[np.float64], list[int]]:
    """Values (with the stamp column, as floats) and the exact integer stamps."""
    values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    stamps = np.loadtxt(path, delimiter=",", skiprows=1, usecols=0, dtype=np.int64, ndmin=1)
    return values, stamps.tolist()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liedyn_ros.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("liedyn_demo"),
                        help="where the demo bag and the replay outputs go (default: %(default)s)")
    args = parser.parse_args(argv)

    from liedyn_ros.replay import ReplayOptions, replay
    from liedyn_ros.replay.cli import print_report

    bag, truth = ensure_demo_bag(args.dir)
    out = args.dir / "replay"
    print(f"replaying: liedyn-replay {bag} --out {out}")
    report = replay([bag], ReplayOptions(out=out))
    print_report(report)
    print("plots:", ", ".join(report.files))
    joint_names = list(report.summary["joints"])
    return 0 if check(out, truth, joint_names) else 1


if __name__ == "__main__":
    sys.exit(main())
