"""The node's external torque and collision events (issue 14), through the ROS-free pipeline:
a Pinocchio-simulated push on the Panda, fed as rclpy-shaped JointStates with measured efforts."""
from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.pipeline import (
    TOPIC_COLLISION, TOPIC_EXTERNAL_TORQUE, DynamicsPipeline, MessageClasses, OutputMessageFactory, PipelineConfig,
)
from liedyn_ros.pipeline.payload import Dynamics
from test_observer import GAIN, THRESHOLD, _pd_tracking, _simulate
from test_pipeline import rclpy_joint_state
from robots import twin

T_ON = 0.1 + 1e-9


@pytest.fixture(scope="module")
def pushed():
    tw = twin("panda_arm")
    q0 = np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8])
    push = ("panda_joint5", (0.0, 30.0, -40.0, 0.0, 0.0, 2.0), T_ON, 0.25)
    return tw.model, _simulate(tw, q0, 0.35, _pd_tracking(tw, q0, 0.3, 0.5), push, seed=8)


def test_pipeline_external_torque_and_one_collision(pushed):
    model, (t, q, v, tau, _, tau_ext) = pushed
    config = PipelineConfig(observer_gain=GAIN, collision_threshold=(THRESHOLD,))
    pipe = DynamicsPipeline(model, config)
    factory = OutputMessageFactory(MessageClasses.from_typestore(get_typestore(Stores.ROS2_HUMBLE)), model, config)
    stamps = np.round(t * 1e9).astype(np.int64)
    names = list(model.joint_names)
    outs = [pipe.on_joint_state(rclpy_joint_state(int(s), names, q[k], v[k], tau[k])) for k, s in enumerate(stamps)]
    external = np.array([o.external_torque for o in outs])
    obs = core.MomentumObserver(model, GAIN)
    np.testing.assert_allclose(external, obs.series(stamps * 1e-9, q, v, tau), rtol=1e-9, atol=1e-9)
    settled = (t > T_ON + 5 / GAIN) & (t < 0.25)
    assert np.abs(external[settled] - tau_ext[settled]).max() < 0.05 * np.abs(tau_ext).max()

    started = [(k, o.collision) for k, o in enumerate(outs) if o.collision is not None]
    assert len(started) == 1 and pipe.stats.collisions == 1 and pipe.collision is None  # over by the end
    k, event = started[0]
    assert 0 < (t[k] - T_ON) / 1e-3 <= 3 and event.start_ns == stamps[k]
    msgs = factory.build(outs[k])
    np.testing.assert_array_equal(msgs[TOPIC_EXTERNAL_TORQUE].effort, external[k])
    collision = msgs[TOPIC_COLLISION]
    assert list(collision.name) == [names[event.joint]] and collision.effort[0] == event.peak
    assert collision.header.stamp.sec * 10**9 + collision.header.stamp.nanosec == stamps[k]
    assert TOPIC_COLLISION not in factory.build(outs[k + 1])


def test_pipeline_observer_starts_over_on_gaps_missing_efforts_and_model_changes(pushed):
    model, (t, q, v, tau, _, _) = pushed
    pipe = DynamicsPipeline(model, PipelineConfig(observer_gain=GAIN, observer_max_gap=0.05))
    names, stamp = list(model.joint_names), lambda k, extra=0.0: int(round((t[k] + extra) * 1e9))
    for k in range(150, 160):
        out = pipe.on_joint_state(rclpy_joint_state(stamp(k), names, q[k], v[k], tau[k]))
    assert np.abs(out.external_torque).max() > 1.0  # pushed
    after_gap = pipe.on_joint_state(rclpy_joint_state(stamp(160, 0.1), names, q[160], v[160], tau[160]))
    assert not after_gap.external_torque.any()
    no_effort = pipe.on_joint_state(rclpy_joint_state(stamp(161, 0.1), names, q[161], v[161]))
    assert no_effort.external_torque is None
    again = pipe.on_joint_state(rclpy_joint_state(stamp(162, 0.1), names, q[162], v[162], tau[162]))
    assert not again.external_torque.any()
    pipe.on_joint_state(rclpy_joint_state(stamp(163, 0.1), names, q[163], v[163], tau[163]))
    pipe.set_dynamics(Dynamics(model, None))
    swapped = pipe.on_joint_state(rclpy_joint_state(stamp(164, 0.1), names, q[164], v[164], tau[164]))
    assert not swapped.external_torque.any()


def test_observer_parameters_are_checked():
    with pytest.raises(ValueError, match="collision_threshold"):
        DynamicsPipeline(twin("panda_arm").model, PipelineConfig(collision_threshold=(1.0, 2.0)))
    for bad, name in (({"collision_release": 0.0}, "collision_release"), ({"observer_gain": -1.0}, "observer_gain"),
                      ({"collision_threshold": (0.0,)}, "collision_threshold")):
        with pytest.raises(ValueError, match=name):
            PipelineConfig(**bad)
