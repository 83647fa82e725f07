"""The node's serialized path, without ROS (issue 24): the CDR bytes it publishes (SerializedOutputs:
one serialized message per topic with stamp and values patched in) are byte for byte rosbags'
serialization of the message the factory builds for the same sample, and the odometry it reads
from CDR bytes (pipeline.cdr) is the message's. test_serialized_ros.py checks the same against
rclpy's serialize_message under a real ROS 2."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_messages_refill import NAMES, sample
from test_pipeline import TYPESTORE, floating, random_base  # noqa: F401 - fixtures

from liedyn_ros.pipeline import (
    TOPIC_FEEDFORWARD,
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
    SerializedOutputs,
    SkipReason,
    decode_odometry,
)

T = TYPESTORE.types
CONFIG = PipelineConfig(odom_max_age=0.02, publish_effort_command=True, command_joints=("panda_joint7", "panda_joint2"),
                        collision_threshold=(1e12,))  # random samples: no collision message


def serializer(little_endian: bool = True) -> Any:
    return lambda msg: bytes(TYPESTORE.serialize_cdr(msg, msg.__msgtype__, little_endian=little_endian))


def test_patched_bytes_are_the_serialized_messages(floating: Any) -> None:  # noqa: F811 - the fixture
    classes, serialize = MessageClasses.from_typestore(TYPESTORE), serializer()
    pipe = DynamicsPipeline(floating, CONFIG)
    encoder = SerializedOutputs(OutputMessageFactory(classes, floating, CONFIG), serialize)
    stamps = [3 * 10**9, 3 * 10**9 + 999_999_999, 2**31 * 10**9 - 1, 4 * 10**9 + 1, 5 * 10**9]
    for stamp, frame in zip(stamps, ["world", "world", "a_longer_frame_id", "", "world"]):
        out = sample(pipe, "rosbags", stamp, frame)
        encoded = encoder.encode(out)
        fresh = OutputMessageFactory(classes, floating, CONFIG).build(out)
        assert set(encoded) == set(fresh) >= {
            "feedforward_torque", "gravity_torque", "predicted_acceleration", "base_wrench",
            "predicted_base_acceleration", "effort_command", "external_torque"}
        for topic, data in encoded.items():
            assert isinstance(data, bytes), topic
            assert data == serialize(fresh[topic]), (topic, frame)
        received = TYPESTORE.deserialize_cdr(encoded[TOPIC_FEEDFORWARD], "sensor_msgs/msg/JointState")
        np.testing.assert_array_equal(received.effort, out.outputs.tau_ff)
        assert (received.header.stamp.sec, received.header.stamp.nanosec) == divmod(stamp, 10**9)
        assert received.header.frame_id == frame and list(received.name) == NAMES
    assert None not in encoder._layouts.values()  # every topic went the patched way


def test_only_the_wanted_topics_are_encoded(floating: Any) -> None:  # noqa: F811 - the fixture
    pipe = DynamicsPipeline(floating, CONFIG)
    encoder = SerializedOutputs(OutputMessageFactory(MessageClasses.from_typestore(TYPESTORE), floating, CONFIG),
                                serializer())
    asked: list[str] = []
    out = sample(pipe, "rosbags", 10**9, "world")
    encoded = encoder.encode(out, lambda topic: asked.append(topic) or topic == "base_wrench")
    assert list(encoded) == ["base_wrench"]
    assert len(asked) == len(set(asked)) >= 7  # each output asked once


def test_bytes_it_cannot_patch_are_message_objects(floating: Any) -> None:  # noqa: F811 - the fixture
    """Big-endian CDR is not located (little-endian only): the factory's messages go out instead."""
    classes = MessageClasses.from_typestore(TYPESTORE)
    pipe = DynamicsPipeline(floating, CONFIG)
    encoder = SerializedOutputs(OutputMessageFactory(classes, floating, CONFIG), serializer(little_endian=False))
    out = sample(pipe, "rosbags", 10**9, "world")
    encoded = encoder.encode(out)
    fresh = OutputMessageFactory(classes, floating, CONFIG).build(out)
    assert set(encoded) == set(fresh)
    for topic, msg in encoded.items():
        assert not isinstance(msg, bytes), topic
        assert serializer()(msg) == serializer()(fresh[topic]), topic


def odometry(stamp_ns: int, frame: str, child: str, p: Any, quat: Any, twist: Any, rng: Any) -> Any:
    """nav_msgs/Odometry with covariances of random numbers (which the reading must skip)."""
    V3, sec = T["geometry_msgs/msg/Vector3"], divmod(stamp_ns, 10**9)
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec[0], nanosec=sec[1]),
                                      frame_id=frame)
    pose = T["geometry_msgs/msg/PoseWithCovariance"](pose=T["geometry_msgs/msg/Pose"](
        position=T["geometry_msgs/msg/Point"](x=p[0], y=p[1], z=p[2]),
        orientation=T["geometry_msgs/msg/Quaternion"](x=quat[0], y=quat[1], z=quat[2], w=quat[3])),
        covariance=rng.normal(size=36))
    moving = T["geometry_msgs/msg/TwistWithCovariance"](twist=T["geometry_msgs/msg/Twist"](
        linear=V3(x=twist[3], y=twist[4], z=twist[5]), angular=V3(x=twist[0], y=twist[1], z=twist[2])),
        covariance=rng.normal(size=36))
    return T["nav_msgs/msg/Odometry"](header=header, child_frame_id=child, pose=pose, twist=moving)


@pytest.mark.parametrize("little_endian", [True, False])
def test_odometry_read_from_its_bytes_is_the_messages(little_endian: bool) -> None:
    rng = np.random.default_rng(5)
    for k, (frame, child) in enumerate([("", ""), ("odom", "b"), ("od", "base_link"), ("world_frame", "trunk12")]):
        p, quat, twist = random_base()
        stamp = 7 * 10**9 + 123_456_789 * k
        msg = odometry(stamp, frame, child, p, quat, twist, rng)
        data = bytes(TYPESTORE.serialize_cdr(msg, "nav_msgs/msg/Odometry", little_endian=little_endian))
        got, expected = decode_odometry(data), decode_odometry(msg)
        assert not isinstance(got, SkipReason) and not isinstance(expected, SkipReason)
        assert (got.stamp_ns, got.child_frame_id) == (stamp, child)
        np.testing.assert_array_equal(got.twist, twist)  # (omega, v), as given
        np.testing.assert_array_equal(got.pose, expected.pose)
        np.testing.assert_allclose(got.pose[:3, 3], p, rtol=0, atol=0)
        # Cut short, or not CDR at all: refused, never read from the wrong bytes.
        assert decode_odometry(data[:-8]) is SkipReason.BAD_ODOMETRY
        assert decode_odometry(b"\x00\x07" + data[2:]) is SkipReason.BAD_ODOMETRY
