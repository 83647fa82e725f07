"""Motor currents, gear ratios, rotor inertia and a coupled wrist, identified through the replay.

MuJoCo simulates the UR5 of test/drive_sim.py: six motors whose controls are currents, torque
constants K, gear ratios up to 100, a differential wrist (two motors on wrist_2 and wrist_3
through fixed tendons), rotor inertia (armature), dry and viscous friction, a 1.2 kg payload.
The recorded JointState efforts are the currents, with 0.5% noise; positions carry the steps of
17-bit motor encoders behind the gears and velocities are differenced from them, as a driver
gives them. Everything goes through `liedyn-replay` as a user runs it: --params with the
datasheet's torque constants (5-9% off) and the transmission, --identify friction, payload,
armature and effort_scale, the accelerations estimated by the replay (Savitzky-Golay), and
--identify-min-speed 0.3 (rows near a velocity reversal left out: there dry friction flips and
the filtered acceleration smears the jump, which the armature's column would take for inertia).

1. One recording of --seconds (default 40): the table of true against identified values.
2. Three short recordings (--short, default 3 s each, other trajectories): replayed one by one
   and pooled (`liedyn-replay B1 B2 B3 --jobs 1 --identify`, the third held out to validate),
   and the first two alone (their own 70/30 split).
Run: python benchmarks/bench_drive_identification.py [--seconds S] [--short S]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from drive_sim import ARMATURE, COULOMB, K, K_DATASHEET, LINK, MASS, N, VISCOUS, simulate, ur5_arm  # noqa: E402
from robots import urdf_text  # noqa: E402
from test_identification_fit import write_joint_states  # noqa: E402

from liedyn_ros.pipeline.parameters import load_parameter_file  # noqa: E402
from liedyn_ros.replay.cli import main  # noqa: E402

IDENTIFY = ["--identify", "friction", "--identify", "payload", LINK, "--identify", "armature",
            "--identify", "effort_scale", "--identify-min-speed", "0.3"]


def driver_bag(path: Path, rec, seed: int) -> Path:
    """The recording as a driver publishes it: the steps of 17-bit encoders on the motors (a joint
    step of 2 pi / 2^17 / N), differenced velocities, currents with 0.5% noise."""
    rng = np.random.default_rng(seed)
    step = 2 * np.pi / 2**17 / np.array(N)
    q = np.round(rec.q / step) * step
    qd = np.gradient(q, rec.t, axis=0)
    effort = rec.effort + 0.005 * rng.standard_normal(rec.effort.shape) * np.sqrt((rec.effort ** 2).mean(0))
    return write_joint_states(path, rec, q, qd, effort)


def table(title: str, params: dict, names, quiet: bool = False) -> float:
    rows = [("torque constant", K, params["effort_torque_constant"]), ("armature", ARMATURE, params["armature"]),
            ("Coulomb friction", COULOMB, params["friction_coulomb"]),
            ("viscous friction", VISCOUS, params["friction_viscous"])]
    lines = [f"\n{title}\n{'':<18}{'joint':<22}{'true':>10}{'identified':>12}{'error %':>10}"]
    worst = 0.0
    for label, truth, found in rows:
        for name, t, f in zip(names, truth, found):
            err = 100 * (f / t - 1)
            worst = max(worst, abs(err))
            lines.append(f"{label:<18}{name:<22}{t:>10.4g}{f:>12.4g}{err:>10.2f}")
    err = 100 * (params["payload_mass"] / MASS - 1)
    worst = max(worst, abs(err))
    lines.append(f"{'payload mass':<18}{LINK:<22}{MASS:>10.4g}{params['payload_mass']:>12.4g}{err:>10.2f}")
    if not quiet:
        print("\n".join(lines) + f"\nlargest error: {worst:.2f}% (goal: within 5%)")
    return worst


def replay(args: list[str]) -> float:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the replay's own tables: only the fit is compared here
        code = main(args + ["--no-progress", "--no-plots"])
    if code:
        raise SystemExit(f"liedyn-replay exited with {code}")
    return time.perf_counter() - start


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--short", type=float, default=3.0)
    opts = parser.parse_args()
    arm = ur5_arm()
    names = arm.model.joint_names
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        urdf = tmp / "ur5.urdf"
        urdf.write_text(urdf_text("ur5"))
        params = tmp / "datasheet.yaml"
        params.write_text("/**:\n  ros__parameters:\n" + "".join(
            f"    {k}: {json.dumps(v)}\n" for k, v in arm.parameters().items()))
        common = ["--urdf", str(urdf), "--params", str(params)]

        start = time.perf_counter()
        rec = simulate(arm, seconds=opts.seconds, seed=1)
        bag = driver_bag(tmp / "long", rec, seed=2)
        print(f"simulated {opts.seconds:g} s in {time.perf_counter() - start:.1f} s (MuJoCo, RK4 at 1 kHz, "
              f"recorded at 500 Hz); datasheet torque constants {list(K_DATASHEET)} against the true {list(K)}")
        took = replay([str(bag), "--out", str(tmp / "long_out"), *common, *IDENTIFY])
        found = load_parameter_file(tmp / "long_out" / "identified.yaml", names).values
        table(f"1. one recording of {opts.seconds:g} s through liedyn-replay ({took:.1f} s)", found, names)

        bags = [driver_bag(tmp / f"short{k}", simulate(arm, seconds=opts.short, seed=10 + k), seed=20 + k)
                for k in range(3)]
        took = replay([str(b) for b in bags] + ["--out", str(tmp / "pooled"), "--jobs", "1", *common, *IDENTIFY])
        pooled = load_parameter_file(tmp / "pooled" / "identified.yaml", names).values
        table(f"2. three recordings of {opts.short:g} s pooled (the third validates) ({took:.1f} s)", pooled, names)
        for k, bag in enumerate(bags[:2]):
            replay([str(bag), "--out", str(tmp / f"alone{k}"), *common, *IDENTIFY])
            alone = tmp / f"alone{k}" / "identified.yaml"
            worst = (table("", load_parameter_file(alone, names).values, names, quiet=True) if alone.is_file()
                     else float("nan"))
            print(f"recording {k + 1} alone (70% fit, 30% validate): largest error {worst:.1f}%")


if __name__ == "__main__":
    main_bench()
