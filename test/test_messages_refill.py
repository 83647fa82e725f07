"""OutputMessageFactory.build refills one message per topic in place (issue 24): a second sample's
messages are the first's objects holding the second sample's values, stamp and frame, exactly
what a new factory makes for that sample (checked against Pinocchio in test_pipeline)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_pipeline import (  # noqa: F401 - fixtures
    FLAVOURS,
    TYPESTORE,
    floating,
    odometry,
    random_base,
    random_state,
    rclpy_like_classes,
)

from liedyn_ros.pipeline import (
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
)

NAMES = [f"panda_joint{i}" for i in range(1, 8)]


def sample(pipe: DynamicsPipeline, flavour: str, stamp_ns: int, frame: str) -> Any:
    p, quat, twist = random_base()
    q, qd, tau = random_state()
    assert pipe.on_odometry(odometry(flavour, stamp_ns, p, quat, twist)) is None
    js = FLAVOURS[flavour](stamp_ns, NAMES, q, qd, tau)
    js.header.frame_id = frame
    out = pipe.on_joint_state(js)
    assert out is not None
    return out


def values(msg: Any) -> np.ndarray:
    """The numbers a message carries: its float64[] field or its two vectors."""
    for get in (lambda m: m.effort, lambda m: m.points[0].accelerations, lambda m: m.data):
        try:
            return np.asarray(get(msg), dtype=float).copy()
        except AttributeError:
            continue
    first, second = (msg.wrench.torque, msg.wrench.force) if hasattr(msg, "wrench") else \
        (msg.accel.angular, msg.accel.linear)
    return np.array([first.x, first.y, first.z, second.x, second.y, second.z])


@pytest.mark.parametrize("flavour", ["rosbags", "rclpy"])
def test_second_build_refills_the_first_messages(floating: Any, flavour: str) -> None:  # noqa: F811 - the fixture
    cfg = PipelineConfig(odom_max_age=0.02, publish_effort_command=True, command_joints=("panda_joint7", "panda_joint2"),
                         collision_threshold=(1e12,))  # random samples: no collision message (new each time)
    classes = MessageClasses.from_typestore(TYPESTORE) if flavour == "rosbags" else rclpy_like_classes()
    pipe = DynamicsPipeline(floating, cfg)
    factory = OutputMessageFactory(classes, floating, cfg)
    first = factory.build(sample(pipe, flavour, 3 * 10**9, "world"))
    before = {topic: values(msg) for topic, msg in first.items()}
    out = sample(pipe, flavour, 3 * 10**9 + 1_000_123, "arm")  # another stamp and frame_id
    second = factory.build(out)
    fresh = OutputMessageFactory(classes, floating, cfg).build(out)
    assert set(second) == set(fresh) == set(first) >= {
        "feedforward_torque", "gravity_torque", "predicted_acceleration", "base_wrench",
        "predicted_base_acceleration", "effort_command", "external_torque"}
    for topic, msg in second.items():
        assert msg is first[topic], topic
        np.testing.assert_array_equal(values(msg), values(fresh[topic]), err_msg=topic)
        assert not np.array_equal(values(msg), before[topic]), topic  # the first sample's values are gone
        if topic != "effort_command":  # Float64MultiArray has no header
            assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 1_000_123), topic
            assert msg.header.frame_id == fresh[topic].header.frame_id, topic
    assert second["feedforward_torque"].header.frame_id == "arm"
    assert second["base_wrench"].header.frame_id == "panda_link0"
    np.testing.assert_array_equal(values(second["feedforward_torque"]), out.outputs.tau_ff)
    np.testing.assert_array_equal(values(second["effort_command"]), out.outputs.tau_ff[[6, 1]])
    if flavour == "rosbags":  # byte for byte what the new messages serialize to
        for topic, msg in second.items():
            assert bytes(TYPESTORE.serialize_cdr(msg, msg.__msgtype__)) == \
                bytes(TYPESTORE.serialize_cdr(fresh[topic], msg.__msgtype__)), topic
