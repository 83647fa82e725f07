"""Per-joint-state time of the pipeline with four point contacts on Solo12 (12 DoF) against the
same pipeline without contacts (issue target: within 1.5x), median and p99 of each sample's best
of ``--repeats`` runs (the machine is shared: the best run is the code's time, not the neighbours').

Rows: the core settings (measured accelerations, every contact down, the momentum observer on as by
default) with and without contacts, the contacts without the observer, a trot's diagonal pair; and
the node's configuration of config/solo12_contacts.yaml (estimated accelerations, a contact state
message per sample, the observer beyond the contacts) against the same file without its contacts.
Then the time per stage of both node rows (median us per sample, stages inclusive, by the wall clock
also with ``--cpu``), so that what the contacts add shows stage by stage. The messages are encoded as the node publishes them (CDR bytes,
pipeline.SerializedOutputs). ``--cpu`` times each sample by this thread's CPU time instead of the wall
clock: on a shared machine that leaves out the time other processes hold the core.

Run: python benchmarks/bench_contacts.py [--samples N] [--repeats R] [--cpu]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rosbags.typesys import Stores, get_typestore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
import contact_sim  # noqa: E402
from test_pipeline import odometry, ros_joint_state  # noqa: E402

from liedyn_ros import core  # noqa: E402
from liedyn_ros.pipeline import (  # noqa: E402
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
    SerializedOutputs,
)
from liedyn_ros.pipeline.parameters import check_parameters  # noqa: E402
from liedyn_ros.robot_data import robots_dir  # noqa: E402

URDF = robots_dir() / "solo_description/robots/solo12.urdf"
NODE_FILE = Path(__file__).resolve().parents[1] / "config/solo12_contacts.yaml"
TYPES = get_typestore(Stores.ROS2_JAZZY)
# The pipeline's stages, by attribute (stages a restructured pipeline no longer has are left out).
STAGES = (("decode", "decoder", "decode"), ("estimator", "_estimator", "update"),
          ("contact state", None, "_active_contacts"), ("contact dynamics", None, "_compute"),
          ("observer + beyond", None, "_observe"), ("  momentum observer", "_observer", "update"),
          ("  fit beyond contacts", "_contact_observer", "beyond_one"))
CLOCK = time.perf_counter  # --cpu: time.thread_time


def node_configs(model: Any) -> tuple[PipelineConfig, PipelineConfig]:
    """(config/solo12_contacts.yaml's pipeline settings, the same without its contacts)."""
    values = yaml.safe_load(NODE_FILE.read_text())["/**"]["ros__parameters"]
    without = {k: v for k, v in values.items() if not k.startswith("contact_") and k != "friction_coefficient"}
    return (check_parameters(values, model.joint_names).config, check_parameters(without, model.joint_names).config)


def _timed(obj: Any, name: str, log: list[float]) -> None:
    """Wrap a stage in a wall-clock timer, also with --cpu: the thread's CPU clock is a system call of
    about 5 us on some VMs, which two nested timers per stage added to every enclosing stage."""
    method = getattr(obj, name)
    clock = time.perf_counter

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return method(*args, **kwargs)
        finally:
            log.append(clock() - start)

    setattr(obj, name, wrapper)


def per_sample(config: PipelineConfig, rec: contact_sim.Recording, model: Any,
               stages: dict[str, list[float]] | None = None) -> np.ndarray:
    pipe = DynamicsPipeline(model, config)
    pipe.prepare_kernels()
    encoder = SerializedOutputs(OutputMessageFactory(MessageClasses.from_typestore(TYPES), model, config),
                                lambda msg: bytes(TYPES.serialize_cdr(msg, msg.__msgtype__)))
    flags = TYPES.types["std_msgs/msg/UInt8MultiArray"](
        layout=TYPES.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
        data=np.ones(len(config.contact_links), dtype=np.uint8))
    topic = config.contact_source.value == "topic"
    if stages is not None:
        for label, owner, name in STAGES:
            obj = pipe if owner is None else getattr(pipe, owner, None)
            if obj is not None and hasattr(obj, name):
                _timed(obj, name, stages.setdefault(label, []))
        _timed(encoder, "encode", stages.setdefault("messages", []))
    times = []
    for k in range(len(rec.t)):
        stamp = 10**9 + int(rec.t[k] * 1e9)
        q, v = rec.q[k], rec.v[k]
        pipe.on_odometry(odometry("rosbags", stamp, q[:3], q[3:7], np.concatenate([v[3:6], v[:3]]), "base_link"))
        if topic:
            pipe.on_contact_state(flags, stamp)
        msg = ros_joint_state(stamp, list(model.joint_names), q[7:], v[6:], rec.tau[k])
        start = CLOCK()
        out = pipe.on_joint_state(msg)
        if out is not None:
            encoder.encode(out)
        times.append(CLOCK() - start)
    assert pipe.stats.published >= len(rec.t) - 50, f"samples skipped: {pipe.stats.skipped}"
    return np.array(times[50:])


def best_of(repeats: int, run: Callable[[], np.ndarray]) -> np.ndarray:
    return np.min([run() for _ in range(repeats)], axis=0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; each sample's best is kept")
    parser.add_argument("--cpu", action="store_true", help="time by this thread's CPU time, not the wall clock")
    args = parser.parse_args()
    if args.cpu:
        global CLOCK
        CLOCK = time.thread_time
    rec = contact_sim.simulate(first_s=args.samples / contact_sim.RATE, second_s=0.0)
    model = core.load_urdf(str(URDF), floating_base=True)
    base = PipelineConfig(base_link="base_link")
    feet = contact_sim.FEET
    node, node_without = node_configs(model)
    rows = [("no contacts", base, None),
            ("4 point contacts", PipelineConfig(base_link="base_link", contact_links=feet), "no contacts"),
            ("4 contacts, no obs.", PipelineConfig(base_link="base_link", contact_links=feet,
                                                  external_torque_observer=False), "no contacts"),
            # a trot's diagonal pair: no force balances the base, the least-squares forces every sample
            ("2 point contacts", PipelineConfig(base_link="base_link", contact_links=(feet[0], feet[3])),
             "no contacts"),
            ("node, no contacts", node_without, None),
            ("node, 4 contacts", node, "node, no contacts")]
    results = {name: best_of(args.repeats, lambda cfg=cfg: per_sample(cfg, rec, model)) for name, cfg, _ in rows}
    print(f"{'case':<20} {'median us':>10} {'p99 us':>10} {'median ratio':>13} {'p99 ratio':>10}  (against)")
    for name, _, against in rows:
        t = results[name]
        ref = results[against or name]
        print(f"{name:<20} {np.median(t) * 1e6:10.1f} {np.percentile(t, 99) * 1e6:10.1f} "
              f"{np.median(t) / np.median(ref):13.2f} {np.percentile(t, 99) / np.percentile(ref, 99):10.2f}  "
              f"{against or ''}")
    for name, ref in (("4 point contacts", "no contacts"), ("node, 4 contacts", "node, no contacts")):
        t, r = results[name], results[ref]
        ratios = np.median(t) / np.median(r), np.percentile(t, 99) / np.percentile(r, 99)
        print(f"target: {name} within 1.5x of {ref}, median and p99: "
              f"{'OK' if max(ratios) <= 1.5 else 'MISSED'} ({ratios[0]:.2f}x, {ratios[1]:.2f}x)")
    per_stage = {}
    for name in ("node, no contacts", "node, 4 contacts"):
        stages: dict[str, list[float]] = {}
        total = per_sample({row[0]: row[1] for row in rows}[name], rec, model, stages)
        per_stage[name] = {"total": total, **{label: np.array(log[50:]) for label, log in stages.items()}}
    print("\nper stage, median us per sample (one run each, timers on; stages inclusive; wall clock)")
    print(f"  {'stage':<24} {'node, no contacts':>18} {'node, 4 contacts':>17} {'added':>8}")
    labels = ["total"] + [label for label, _, _ in STAGES] + ["messages"]
    for label in labels:
        a, b = (per_stage[name].get(label) for name in ("node, no contacts", "node, 4 contacts"))
        if a is None and b is None:
            continue
        ma, mb = (np.nan if x is None or not len(x) else np.median(x) * 1e6 for x in (a, b))
        print(f"  {label:<24} {ma:18.1f} {mb:17.1f} {np.nan_to_num(mb) - np.nan_to_num(ma):8.1f}")


if __name__ == "__main__":
    main()
