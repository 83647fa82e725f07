"""The node's own CPU per sample around rclpy, in one process under real ROS 2 (issue 24).

bench_ros_latency.py measures whole processes, whose CPU per sample swings with the machine's
load; this one times two ways of the same step in one process, alternating in rounds, so that
the load falls on both alike:

- publishing a joint state's outputs (with a listener in another process for every output, as
  rosbag record or RViz would be): ``objects``, the factory's refilled messages converted by
  rclpy's publish, against ``bytes``, the node's way (pipeline.SerializedOutputs: CDR bytes
  patched into one serialized message per topic, published as they are);
- taking and decoding a joint state: ``objects``, rclpy's take into a message object then the
  pipeline's decoder, against ``bytes``, the node's way (a raw take, pipeline.cdr.JointStateBytes'
  views on the arrays, then the same decoder);
- taking and decoding an odometry message: ``objects``, rclpy's take into a message object then
  pipeline.decode_odometry, against ``bytes``, the node's way (a raw take, pipeline.cdr reading
  the stamp, child frame, pose and twist alone).

Prints CPU microseconds per sample (process time) for each, median over the rounds, and the
ratio. Then, per case (``solo12-contacts`` too), the node's callbacks of one whole sample as
bench_ros_latency's probe sends it: its odometry, contact state and joint state as the bytes a
raw take gives, stamped now, through the node's subscription callbacks (pipeline, encoding,
publishing to the listener), in CPU microseconds of this thread per sample: everything the node
does per sample but rclpy's wait and take. Run where ROS 2 is sourced:
python benchmarks/bench_node_cost.py [--samples N] [--rounds R] [--cases ...]
"""
from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

try:
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import UInt8MultiArray
except ImportError:
    print("bench_node_cost: skipped, no ROS 2 (rclpy) in this environment")
    sys.exit(0)

from bench_pipeline import joint_states as probe_states
from bench_ros_latency import OTHER_OUTPUTS, cases

from liedyn_ros import core
from liedyn_ros.pipeline import SkipReason

RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def listener_main() -> None:
    """Subscribes to every output (raw: this process spends nothing converting them)."""
    rclpy.init()
    node = rclpy.create_node("cost_listener")
    for topic, kind in {"feedforward_torque": JointState, **OTHER_OUTPUTS}.items():
        node.create_subscription(kind, topic, lambda msg: None, RELIABLE, raw=True)
    try:
        rclpy.spin(node)
    except Exception:  # noqa: BLE001, S110 - stopped by the benchmark
        pass


def cpu_per_call(step: Callable[[int], None], n: int) -> float:
    start = time.process_time()
    for i in range(n):
        step(i)
    return (time.process_time() - start) / n * 1e6


def publishing(node: Any, model: Any, samples: int, rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    js = JointState(name=list(model.joint_names), position=rng.uniform(-1, 1, model.n).tolist(),
                    velocity=rng.normal(size=model.n).tolist(), effort=rng.normal(size=model.n).tolist())
    outs = []
    for i in range(200):  # outputs of distinct samples, computed once (the pipeline is not timed)
        js.header.stamp.sec, js.header.stamp.nanosec = 1, 1000 * (i + 1)
        out = node._pipeline.on_joint_state(js)
        assert out is not None, node._pipeline.stats.skipped
        outs.append(out)
    publishers = node._outputs

    def objects(i: int) -> None:  # the node's way before: refilled messages, converted by rclpy
        for topic, msg in node._factory.build(outs[i % len(outs)]).items():
            publisher = publishers[topic]
            if publisher.get_subscription_count():
                publisher.publish(msg)

    def serialized(i: int) -> None:  # the node's way now
        for topic, data in node._serialized.encode(outs[i % len(outs)], node._listened).items():
            publishers[topic].publish(data)

    published = [t for t in node._serialized.encode(outs[0], node._listened)]
    print(f"  published topics: {published}")
    return alternate({"objects": objects, "bytes": serialized}, samples, rounds)


def odometry(node: Any, samples: int, rounds: int) -> dict[str, float]:
    msg = Odometry(child_frame_id="base_link")
    msg.header.frame_id = "odom"
    msg.pose.pose.orientation.w = 1.0
    msg.twist.twist.linear.x = 0.3
    publisher = node.create_publisher(Odometry, "cost_odom", RELIABLE)
    subs = {raw: node.create_subscription(Odometry, "cost_odom", lambda m: None, RELIABLE, raw=raw)
            for raw in (False, True)}
    pipeline = node._pipeline

    def take(raw: bool) -> Callable[[int], None]:
        sub = subs[raw]

        def step(i: int) -> None:
            assert pipeline.on_odometry(take_one(sub)) is None
        return step

    return taken_in_rounds(publisher, msg, take, samples, rounds)


def joint_states(node: Any, model: Any, samples: int, rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    msg = JointState(name=list(model.joint_names), position=rng.uniform(-1, 1, model.n).tolist(),
                     velocity=rng.normal(size=model.n).tolist(), effort=rng.normal(size=model.n).tolist())
    publisher = node.create_publisher(JointState, "cost_joint_states", RELIABLE)
    subs = {raw: node.create_subscription(JointState, "cost_joint_states", lambda m: None, RELIABLE, raw=raw)
            for raw in (False, True)}
    decoder, reader = node._pipeline.decoder, node._joint_states

    def take(raw: bool) -> Callable[[int], None]:
        sub = subs[raw]

        def step(i: int) -> None:
            taken = take_one(sub)
            decoded = decoder.decode(reader.read(taken) if raw else taken)
            assert not isinstance(decoded, SkipReason), decoded
        return step

    return taken_in_rounds(publisher, msg, take, samples, rounds)


def callbacks(node: Any, model: Any, contacts: int, samples: int, rounds: int) -> float:
    """CPU us (this thread) per sample of the node's subscription callbacks for bench_ros_latency's
    samples (its consistent efforts, bench_pipeline.joint_states: a Panda moving on a sine, Solo12
    standing on every foot; odometry at the origin), each message the bytes of a raw take with the
    stamp of now (a subscription that is not raw: its message object, converted here); median over the
    rounds."""
    odom = Odometry(child_frame_id=model.root_link)
    odom.pose.pose.orientation.w = 1.0
    by_topic = {s.topic_name.lstrip("/"): s for s in node.subscriptions}
    names = list(model.joint_names)
    joints = [bytearray(serialize_message(JointState(name=names, position=q.tolist(), velocity=v.tolist(),
                                                      effort=tau.tolist())))
              for q, v, tau in zip(*probe_states(model, "consistent", 1000))]
    first = [(by_topic["odom"], bytearray(serialize_message(odom)))] if model.floating_base else []
    if contacts:  # odometry, contact state, joint state: the probe's order
        first.append((by_topic["contact_state"], serialize_message(UInt8MultiArray(data=[1] * contacts))))
    on_joint_state = by_topic["joint_states"]

    def step(i: int) -> None:
        sec, nanosec = divmod(time.time_ns(), 1_000_000_000)
        for sub, data in [*first, (on_joint_state, joints[i % len(joints)])]:
            if isinstance(data, bytearray):  # stamped: header.stamp right after the CDR header
                struct.pack_into("<iI", data, 4, sec, nanosec)
            # a subscription that is not raw gets the message object rclpy's take would convert
            sub.callback(bytes(data) if sub.raw else deserialize_message(bytes(data), sub.msg_type))

    stats = node._pipeline.stats
    for i in range(200):  # the estimator's and the observer's first samples
        step(i)
    published, times = stats.published, []
    for _ in range(rounds):
        start = time.thread_time()
        for i in range(samples):
            step(i)
        times.append((time.thread_time() - start) / samples * 1e6)
    answered = stats.published - published
    if answered < samples * rounds * 0.99:
        print(f"  (only {answered} of {samples * rounds} samples answered: {stats.skipped})")
    return float(np.median(times))


def take_one(sub: Any) -> Any:
    """One message from ``sub``'s queue, as rclpy's executor takes it (CDR bytes on a raw subscription)."""
    with sub.handle:
        taken = sub.handle.take_message(sub.msg_type, sub.raw)
    assert taken is not None
    return taken[0]


def taken_in_rounds(publisher: Any, msg: Any, take: Callable[[bool], Callable[[int], None]], samples: int,
                    rounds: int) -> dict[str, float]:
    """Per round, publish a batch of ``msg`` (stamped 1 s + k ns) to the two subscriptions
    (message objects and raw), then time taking and decoding them from each."""
    results: dict[str, list[float]] = {"objects": [], "bytes": []}
    batch = min(samples, 900)  # within the subscriptions' depth
    for _ in range(rounds):
        for k in range(batch):
            msg.header.stamp.sec, msg.header.stamp.nanosec = 1, k
            publisher.publish(msg)
        time.sleep(0.5)  # delivered to both subscriptions
        for name, raw in (("objects", False), ("bytes", True)):
            results[name].append(cpu_per_call(take(raw), batch))
    return {name: float(np.median(v)) for name, v in results.items()}


def alternate(ways: dict[str, Callable[[int], None]], samples: int, rounds: int) -> dict[str, float]:
    results: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, step in ways.items():
            results[name].append(cpu_per_call(step, samples))
    return {name: float(np.median(v)) for name, v in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="samples per round and way")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", nargs="+", choices=["panda", "solo12", "solo12-contacts"],
                        default=["panda", "solo12", "solo12-contacts"])
    parser.add_argument("--listener", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.listener:
        listener_main()
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    listener = subprocess.Popen([sys.executable, __file__, "--listener"], env=env)
    from liedyn_ros.dynamics_node import DynamicsNode

    print(f"CPU us per sample (median of {args.rounds} rounds of {args.samples}), "
          f"RMW {os.environ.get('RMW_IMPLEMENTATION', 'default')}, load {os.getloadavg()[0]:.1f}")
    tmp = tempfile.mkdtemp()
    try:
        for name in args.cases:
            case = cases()[name]
            model = core.load_urdf(case.urdf, floating_base=case.floating)
            params = Path(tmp) / f"{name}.yaml"
            params.write_text(yaml.safe_dump({"liedyn_dynamics": {"ros__parameters": {
                **case.parameters, "robot_description": case.urdf, "odom_max_age": 1e9}}}))
            rclpy.init(args=["--ros-args", "--params-file", str(params)])
            try:
                node = DynamicsNode()
                assert node._pipeline is not None, node._model_status
                deadline = time.monotonic() + 600  # the callbacks' row times the compiled kernels
                while node._pipeline.warming_up and time.monotonic() < deadline:
                    time.sleep(0.5)
                kernels = "kernels not ready after 600 s" if node._pipeline.warming_up else "compiled"
                node._pipeline.close()
                if model.floating_base:  # one odometry for the joint states to pair with
                    seed = Odometry(child_frame_id=str(model.root_link))
                    seed.header.stamp.sec, seed.pose.pose.orientation.w = 1, 1.0
                    node._pipeline.on_odometry(seed)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not all(
                        node._outputs[t].get_subscription_count() for t in ("feedforward_torque", "gravity_torque")):
                    time.sleep(0.1)
                print(case.title)
                rows = []
                if not case.contacts:  # these rows feed joint states alone
                    rows += [("taking + decoding one joint state", joint_states(node, model, args.samples, args.rounds)),
                             ("publishing a sample's outputs", publishing(node, model, args.samples, args.rounds))]
                if model.floating_base and not case.contacts:
                    rows.append(("taking + decoding one odometry", odometry(node, args.samples, args.rounds)))
                for what, r in rows:
                    print(f"  {what:<32} objects {r['objects']:7.1f}   bytes {r['bytes']:7.1f}   "
                          f"bytes / objects {r['bytes'] / r['objects']:.2f}", flush=True)
                print(f"  the node's callbacks of one sample ({kernels}): "
                      f"{callbacks(node, model, case.contacts, args.samples, args.rounds):7.1f}", flush=True)
                node.destroy_node()
            finally:
                rclpy.try_shutdown()
    finally:
        listener.terminate()
        listener.wait()
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
