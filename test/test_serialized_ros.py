"""The node's serialized path under a real ROS 2 (issue 24): the bytes SerializedOutputs patches
are rclpy's serialize_message of the message the factory builds with rclpy's own classes, a
subscriber receives them as that message, odometry taken raw (CDR bytes) decodes to what the
message object does, and joint states taken raw read (pipeline.cdr.JointStateBytes) as rclpy's
message objects. Without ROS 2 the module is skipped (pytest -rs says why);
test_serialized_outputs.py and test_joint_state_bytes.py check the same against rosbags'
serializer everywhere."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
from arms import require_ros
from test_messages_refill import sample
from test_pipeline import floating, random_base  # noqa: F401 - fixtures

rclpy = require_ros()

from builtin_interfaces import msg as builtin_msgs  # noqa: E402
from geometry_msgs import msg as geometry_msgs  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs import msg as sensor_msgs  # noqa: E402
from std_msgs import msg as std_msgs  # noqa: E402
from trajectory_msgs import msg as trajectory_msgs  # noqa: E402

from liedyn_ros.pipeline import (  # noqa: E402
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
    SerializedOutputs,
    SkipReason,
    decode_odometry,
)
from liedyn_ros.pipeline.cdr import JointStateBytes, JointStateFields  # noqa: E402

CLASSES = MessageClasses.from_modules(builtin_msgs, std_msgs, sensor_msgs, trajectory_msgs, geometry_msgs)
CONFIG = PipelineConfig(odom_max_age=0.02, publish_effort_command=True, collision_threshold=(1e12,))


def test_patched_bytes_are_rclpys_serialization(floating: Any) -> None:  # noqa: F811 - the fixture
    pipe = DynamicsPipeline(floating, CONFIG)
    encoder = SerializedOutputs(OutputMessageFactory(CLASSES, floating, CONFIG), serialize_message)
    for stamp, frame in [(3 * 10**9, "world"), (3 * 10**9 + 999_999_999, "world"), (2**31 * 10**9 - 1, "arm_x")]:
        out = sample(pipe, "rclpy", stamp, frame)
        encoded = encoder.encode(out)
        fresh = OutputMessageFactory(CLASSES, floating, CONFIG).build(out)
        assert set(encoded) == set(fresh) and len(encoded) >= 7
        for topic, data in encoded.items():
            assert isinstance(data, bytes) and data == serialize_message(fresh[topic]), (topic, frame)


def test_published_bytes_arrive_as_the_message_and_raw_odometry_as_its_fields(floating: Any) -> None:  # noqa: F811
    rclpy.init()
    try:
        node = rclpy.create_node("liedyn_serialized_test")
        received: list[Any] = []
        raw: list[bytes] = []
        node.create_subscription(sensor_msgs.JointState, "serialized_test_torque", received.append, 10)
        node.create_subscription(Odometry, "serialized_test_odom", raw.append, 10, raw=True)
        torque = node.create_publisher(sensor_msgs.JointState, "serialized_test_torque", 10)
        odom = node.create_publisher(Odometry, "serialized_test_odom", 10)
        pipe = DynamicsPipeline(floating, CONFIG)
        encoder = SerializedOutputs(OutputMessageFactory(CLASSES, floating, CONFIG), serialize_message)
        out = sample(pipe, "rclpy", 4 * 10**9 + 17, "world")
        p, quat, twist = random_base()
        sent = Odometry(child_frame_id="trunk")
        sent.header.stamp.sec, sent.header.stamp.nanosec, sent.header.frame_id = 9, 8, "odom"
        sent.pose.pose.position.x, sent.pose.pose.position.y, sent.pose.pose.position.z = map(float, p)
        o = sent.pose.pose.orientation
        o.x, o.y, o.z, o.w = map(float, quat)
        sent.twist.twist.angular.x, sent.twist.twist.angular.y, sent.twist.twist.angular.z = map(float, twist[:3])
        sent.twist.twist.linear.x, sent.twist.twist.linear.y, sent.twist.twist.linear.z = map(float, twist[3:])
        sent.pose.covariance = np.arange(36.0)
        deadline = time.monotonic() + 10.0
        while (not received or not raw) and time.monotonic() < deadline:
            torque.publish(encoder.encode(out)["feedforward_torque"])
            odom.publish(sent)
            rclpy.spin_once(node, timeout_sec=0.1)
        assert received and raw
        msg = received[0]
        assert isinstance(msg, sensor_msgs.JointState)
        np.testing.assert_array_equal(np.asarray(msg.effort), out.outputs.tau_ff)
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id) == (4, 17, "world")
        assert isinstance(raw[0], bytes)
        got, expected = decode_odometry(raw[0]), decode_odometry(sent)
        assert not isinstance(got, SkipReason) and not isinstance(expected, SkipReason)
        assert (got.stamp_ns, got.child_frame_id) == (9 * 10**9 + 8, "trunk")
        np.testing.assert_array_equal(got.twist, twist)
        np.testing.assert_array_equal(got.pose, expected.pose)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_joint_states_taken_raw_read_as_rclpys_messages() -> None:
    """Joint states published by rclpy, of several layouts (empty effort, NaN, 100 joints), taken
    raw and read by JointStateBytes (rclpy's deserialize_message as its check) equal the message
    objects a second subscription takes; each layout is checked once, its repetitions (other
    stamps and values: the middleware's padding bytes must repeat too) are read by views."""
    rng = np.random.default_rng(2)
    layouts = [([f"j{i}" for i in range(12)], 12, ""), (["a", "b"], 0, "base"), ([f"k{i}" for i in range(100)], 100, "x")]
    sent = []
    for names, n_effort, frame in layouts:
        for k in range(3):
            msg = sensor_msgs.JointState(name=names, position=rng.normal(size=len(names)).tolist(),
                                         velocity=rng.normal(size=len(names)).tolist(),
                                         effort=rng.normal(size=n_effort).tolist())
            msg.position[0] = float("nan") if k == 1 else msg.position[0]
            msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 5 + k, 10 * k + 1, frame
            sent.append(msg)
    rclpy.init()
    try:
        node = rclpy.create_node("liedyn_joint_state_bytes_test")
        objects: list[Any] = []
        raw: list[bytes] = []
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(sensor_msgs.JointState, "joint_state_bytes_test", objects.append, reliable)
        node.create_subscription(sensor_msgs.JointState, "joint_state_bytes_test", raw.append, reliable, raw=True)
        publisher = node.create_publisher(sensor_msgs.JointState, "joint_state_bytes_test", reliable)
        deadline = time.monotonic() + 10.0
        while publisher.get_subscription_count() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        for msg in sent:
            publisher.publish(msg)
        while (len(objects) < len(sent) or len(raw) < len(sent)) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        assert len(objects) == len(raw) == len(sent)
        checked: list[bytes] = []
        reader = JointStateBytes(lambda data: checked.append(data) or deserialize_message(data, sensor_msgs.JointState))
        for data, msg in zip(raw, objects):
            got = reader.read(data)
            assert isinstance(got, JointStateFields)
            assert got.name == tuple(msg.name) and got.header.frame_id == msg.header.frame_id
            assert got.header.stamp == (msg.header.stamp.sec, msg.header.stamp.nanosec)
            for field in ("position", "velocity", "effort"):
                assert np.asarray(getattr(msg, field)).tobytes() == getattr(got, field).tobytes(), field
        assert len(checked) == len(layouts)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
