"""The README's identification example: a MuJoCo recording identified by liedyn-replay.

MuJoCo simulates the Panda (fingers welded) with joint damping and friction loss and a 1.5 kg
payload welded to panda_hand (test/simulated.py), 16 s at 500 Hz; the bag gets 1% effort noise
and 17-bit encoder positions with velocities differenced from them. The replay then runs
`--identify friction --identify payload panda_hand`; this prints the fit beside the simulator's
values and copies the validation plot to benchmarks/identification.png.
Run: python benchmarks/example_identification.py OUT_DIR
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from liedyn_ros import core  # noqa: E402
from liedyn_ros.replay.cli import main as replay  # noqa: E402
from robots import urdf_text  # noqa: E402
from simulated import arm_urdf, simulate  # noqa: E402
from test_identification_fit import COM, I_COM, LINK, MASS, write_joint_states  # noqa: E402


def run(out: Path) -> None:
    xml = re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"')
    model = core.load_urdf(xml)
    damping, friction = 0.5 + 0.1 * np.arange(7), 1.0 + 0.2 * np.arange(7)
    sim = arm_urdf(xml, dict(zip(model.joint_names, damping)), dict(zip(model.joint_names, friction)),
                   (LINK, MASS, COM, I_COM))
    rec = simulate(sim, model.joint_names, model, seconds=16.0, seed=3, compensation=(friction, damping))
    rng = np.random.default_rng(4)
    step = 2 * np.pi / 2**17
    q = np.round(rec.q / step) * step
    qd = np.gradient(q, rec.t, axis=0)
    effort = rec.effort + 0.01 * rng.standard_normal(rec.effort.shape) * np.sqrt((rec.effort ** 2).mean(0))
    out.mkdir(parents=True, exist_ok=True)
    bag = write_joint_states(out / "bag", rec, q, qd, effort)
    (out / "arm.urdf").write_text(xml)
    replay([str(bag), "--out", str(out / "replay"), "--urdf", str(out / "arm.urdf"), "--no-progress",
            "--identify", "friction", "--identify", "payload", LINK])
    p = json.loads((out / "replay" / "summary.json").read_text())["identification"]["node_parameters"]
    print("\nsimulated -> identified")
    print(f"payload mass {MASS} -> {p['payload_mass']:.4f} kg; centre of mass {COM.tolist()} -> "
          f"{np.round(p['payload_com'], 4).tolist()} m (error {1000 * np.linalg.norm(p['payload_com'] - COM):.1f} mm)")
    for name, true, got in (("Coulomb", friction, p["friction_coulomb"]), ("viscous", damping, p["friction_viscous"])):
        err = np.abs(np.array(got) - true) / true
        print(f"{name:8} {np.round(true, 3).tolist()} -> {np.round(got, 3).tolist()} (max error {err.max():.1%})")
    shutil.copy(out / "replay" / "identification.png", Path(__file__).parent / "identification.png")


if __name__ == "__main__":
    run(Path(sys.argv[1] if len(sys.argv) > 1 else "identification_example"))
