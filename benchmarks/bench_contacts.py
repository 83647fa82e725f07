"""Per-joint-state time of the pipeline with four point contacts on Solo12 (12 DoF) against the
same pipeline without contacts (issue target: within 1.5x), median and p99 of each sample's best
of ``--repeats`` runs (the machine is shared: the best run is the code's time, not the neighbours').

Run: python benchmarks/bench_contacts.py [--samples N] [--repeats R]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
import contact_sim  # noqa: E402
from test_pipeline import odometry, ros_joint_state  # noqa: E402

from liedyn_ros import core  # noqa: E402
from liedyn_ros.pipeline import DynamicsPipeline, MessageClasses, OutputMessageFactory, PipelineConfig  # noqa: E402
from liedyn_ros.robot_data import robots_dir  # noqa: E402

URDF = robots_dir() / "solo_description/robots/solo12.urdf"


def per_sample(config: PipelineConfig, rec: contact_sim.Recording, model: object) -> np.ndarray:
    pipe = DynamicsPipeline(model, config)
    factory = OutputMessageFactory(MessageClasses.from_typestore(get_typestore(Stores.ROS2_JAZZY)), model, config)
    times = []
    for k in range(len(rec.t)):
        stamp = 10**9 + int(rec.t[k] * 1e9)
        q, v = rec.q[k], rec.v[k]
        pipe.on_odometry(odometry("rosbags", stamp, q[:3], q[3:7], np.concatenate([v[3:6], v[:3]]), "base_link"))
        msg = ros_joint_state(stamp, list(model.joint_names), q[7:], v[6:], rec.tau[k])
        start = time.perf_counter()
        out = pipe.on_joint_state(msg)
        if out is not None:
            factory.build(out)
        times.append(time.perf_counter() - start)
    return np.array(times[50:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; each sample's best is kept")
    args = parser.parse_args()
    rec = contact_sim.simulate(first_s=args.samples / contact_sim.RATE, second_s=0.0)
    model = core.load_urdf(str(URDF), floating_base=True)
    base = PipelineConfig(base_link="base_link")
    feet = contact_sim.FEET
    rows = [("no contacts", base),
            ("4 point contacts", PipelineConfig(base_link="base_link", contact_links=feet)),
            # a trot's diagonal pair: no force balances the base, the least-squares forces every sample
            ("2 point contacts", PipelineConfig(base_link="base_link", contact_links=(feet[0], feet[3])))]
    results = {name: np.min([per_sample(cfg, rec, model) for _ in range(args.repeats)], axis=0) for name, cfg in rows}
    ref = results["no contacts"]
    print(f"{'case':<18} {'median us':>10} {'p99 us':>10} {'median ratio':>13} {'p99 ratio':>10}")
    for name, t in results.items():
        print(f"{name:<18} {np.median(t) * 1e6:10.1f} {np.percentile(t, 99) * 1e6:10.1f} "
              f"{np.median(t) / np.median(ref):13.2f} {np.percentile(t, 99) / np.percentile(ref, 99):10.2f}")
    t = results["4 point contacts"]
    ratios = np.median(t) / np.median(ref), np.percentile(t, 99) / np.percentile(ref, 99)
    print(f"target: 4 contacts within 1.5x of no contacts, median and p99: "
          f"{'OK' if max(ratios) <= 1.5 else 'MISSED'} ({ratios[0]:.2f}x, {ratios[1]:.2f}x)")


if __name__ == "__main__":
    main()
