"""Per-sample time of the ROS-free pipeline for a 7-DoF JointState (target <= 100 us).

Measures what the node does for each message, without rclpy: decode a JointState (rosbags
typestore class, shuffled names), RNEA, gravity, ABA with the measured efforts, and build the
three output messages. Run: python benchmarks/bench_pipeline.py [--samples N]
"""
from __future__ import annotations

import argparse
import re
import sysconfig
import time
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.pipeline import DynamicsPipeline, MessageClasses, OutputMessageFactory, PipelineConfig

PANDA = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf"


def seven_dof_panda() -> str:
    """The Panda URDF with its fingers welded: the 7-DoF arm."""
    xml = re.sub(r"<mimic[^>]*/>", "", PANDA.read_text())
    return xml.replace('type="prismatic"', 'type="fixed"')


def make_messages(typestore, joint_names: tuple[str, ...], count: int) -> list:
    T = typestore.types
    rng = np.random.default_rng(0)
    names = list(reversed(joint_names))  # matched by name, never by position
    msgs = []
    for k in range(count):
        sec, nsec = divmod(k * 1_000_000, 10**9)
        header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="")
        msgs.append(T["sensor_msgs/msg/JointState"](
            header=header, name=names, position=rng.uniform(-1, 1, 7),
            velocity=rng.uniform(-1, 1, 7), effort=rng.uniform(-5, 5, 7)))
    return msgs


def bench_pipeline(samples: int = 2000, source: str = "zero") -> float:
    """Seconds per sample for on_joint_state + building the output messages."""
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    model = core.load_urdf(seven_dof_panda())
    config = PipelineConfig(acceleration_source=source)
    pipe = DynamicsPipeline(model, config)
    factory = OutputMessageFactory(MessageClasses.from_typestore(typestore), model, config)
    msgs = make_messages(typestore, model.joint_names, samples)
    for msg in msgs[:50]:  # warm-up (JIT compilation, caches)
        out = pipe.on_joint_state(msg)
        if out is not None:
            factory.build(out)
    started = time.perf_counter()
    built = 0
    for msg in msgs:
        out = pipe.on_joint_state(msg)
        if out is not None:
            built += len(factory.build(out))
    elapsed = time.perf_counter() - started
    if built < 3 * len(msgs) - 3 * config.estimator_min_samples:
        raise RuntimeError(f"only {built} messages built for {len(msgs)} samples: {pipe.stats.skipped}")
    return elapsed / len(msgs)


class _ZeroCore:
    """Stands in for the dynamics core to time the pipeline's own share (decode, pairing,
    message building): returns zeros of the right shapes."""

    @staticmethod
    def rnea(model, q, v, a, **kwargs):
        return np.zeros(np.shape(v))

    @staticmethod
    def gravity(model, q, **kwargs):
        return np.zeros(np.shape(q)[:-1] + (model.nv,))

    @staticmethod
    def aba(model, q, v, tau, **kwargs):
        return np.zeros(np.shape(v))


def bench_overhead(samples: int = 2000) -> float:
    """Seconds per sample spent outside the core's rnea/gravity/aba."""
    import liedyn_ros.pipeline as pipeline

    real = pipeline.core
    pipeline.core = _ZeroCore  # type: ignore[assignment]
    try:
        return bench_pipeline(samples)
    finally:
        pipeline.core = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    for source in ("zero", "estimated"):
        per_sample = bench_pipeline(args.samples, source)
        verdict = "OK" if per_sample <= 100e-6 else "ABOVE the 100 us target"
        print(f"pipeline, 7-DoF JointState, acceleration_source={source}: "
              f"{per_sample * 1e6:.1f} us/sample ({verdict})")
    overhead = bench_overhead(args.samples)
    print(f"  of which pipeline overhead (decode, outputs, 3 messages; core stubbed): "
          f"{overhead * 1e6:.1f} us/sample")


if __name__ == "__main__":
    main()
