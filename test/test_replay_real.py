"""The replay on a real rosbag2 recording: KUKA iiwa14 in Gazebo (see its README)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from liedyn_ros.replay import ReplayOptions, replay

pin = pytest.importorskip("pinocchio")

BAG = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "iiwa14_gazebo_effort_control" / "my_bag_0"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    if not BAG.exists():
        print(f"real iiwa bag not found at {BAG}")
        pytest.skip(f"real iiwa bag not found at {BAG}")
    out = tmp_path_factory.mktemp("iiwa")
    report = replay([BAG], ReplayOptions(out=out, gravity=(0.0, 0.0, 0.0), effort_topic="/effort_controller/commands",
                                         progress=False))
    return report, out


def test_real_bag_end_to_end(result):
    report, out = result
    assert report.received == 1941 and report.processed == 1941
    assert "control_msgs/msg/DynamicJointState" in report.skipped_types
    assert report.published["predicted_acceleration"] > 500  # commands cover the second half
    for name in ("torques", "torque_residuals", "accelerations"):
        assert (out / f"{name}.png").stat().st_size > 10_000


def test_real_bag_feedforward_against_pinocchio(result):
    report, out = result
    ts = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([BAG], default_typestore=ts) as reader:
        urdf = next(reader.deserialize(r, c.msgtype).data
                    for c, _, r in reader.messages([c for c in reader.connections if c.topic == "/robot_description"]))
        states = [reader.deserialize(r, c.msgtype)
                  for c, _, r in reader.messages([c for c in reader.connections if c.topic == "/joint_states"])]
    model = pin.buildModelFromXML(urdf)
    model.gravity.linear[:] = 0.0  # the simulation ran without gravity
    data = model.createData()
    ff = np.loadtxt(out / "feedforward_torque.csv", delimiter=",", skiprows=1)[:, 1:]
    acc = np.loadtxt(out / "estimated_acceleration.csv", delimiter=",", skiprows=1)[:, 1:]
    names = [model.names[i] for i in range(1, model.njoints)]
    for k in range(0, len(states), 97):
        index = [list(states[k].name).index(n) for n in names]
        q, qd = states[k].position[index], states[k].velocity[index]
        np.testing.assert_allclose(ff[k], pin.rnea(model, data, q, qd, acc[k]), rtol=1e-9, atol=1e-9)


def test_real_bag_model_explains_the_commanded_torques(result):
    """Loose agreement only (commands and states are not synchronised), but the RNEA torque
    must explain most of the commanded torque on the big joints."""
    _, out = result
    effort = np.loadtxt(out / "measured_effort.csv", delimiter=",", skiprows=1)[:, 1:]
    ff = np.loadtxt(out / "feedforward_torque.csv", delimiter=",", skiprows=1)[:, 1:]
    rows = np.isfinite(effort).all(axis=1) & (np.abs(effort).max(axis=1) > 0)
    residual = effort[rows] - ff[rows]
    for j in (1, 2, 3):  # joint_a2..a4 carry the largest commands
        assert np.sqrt((residual[:, j] ** 2).mean()) < np.sqrt((effort[rows, j] ** 2).mean())
