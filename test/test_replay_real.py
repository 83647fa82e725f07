"""The replay on a real rosbag2 recording: KUKA iiwa14 in Gazebo (see its README).

The bag is bag_js/my_bag_0 of github.com/danieffe/7-DOF-robotic-manipulator-arm-dynamic-control
(commit 3c95a5a7be82562f4b1ef7a4a86ab9f73c91dd1f, Apache-2.0). Point $LIEDYN_IIWA_BAG at that
directory to run these tests anywhere; by default they look beside the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from liedyn_ros.replay import ReplayOptions, replay

pin = pytest.importorskip("pinocchio")

BAG = Path(os.environ.get("LIEDYN_IIWA_BAG") or Path(__file__).resolve().parents[1].parent / "shared" / "data"
           / "iiwa14_gazebo_effort_control" / "my_bag_0")
WHERE = ("bag_js/my_bag_0 of github.com/danieffe/7-DOF-robotic-manipulator-arm-dynamic-control "
         "(commit 3c95a5a7); set LIEDYN_IIWA_BAG to its directory")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    if not BAG.exists():
        pytest.skip(f"real iiwa bag not found at {BAG}: it is {WHERE}")
    out = tmp_path_factory.mktemp("iiwa")
    report = replay([BAG], ReplayOptions(out=out, gravity=(0.0, 0.0, 0.0), effort_topic="/effort_controller/commands",
                                         progress=False))
    return report, out


def test_real_bag_end_to_end(result):
    report, out = result
    assert report.received == 1941 and report.processed == 1941
    assert "control_msgs/msg/DynamicJointState" in report.skipped_types
    assert report.published["predicted_acceleration"] > 500  # commands cover the second half
    for name in ("torques", "torque_residuals", "accelerations", "external_torque"):
        assert (out / f"{name}.png").stat().st_size > 10_000


def test_real_bag_observer_sees_the_velocity_limit(result):
    """Gazebo holds joint_a1 at its URDF velocity limit (1.4834 rad/s) for about 0.3 s while the
    commands push it faster: the limit acts on the arm like an external torque against the motion,
    and the observer reports it as the one event on joint_a1, labelled a limit."""
    report, _ = result
    (event,) = [e for e in report.summary["collisions"] if e["joint"] == "joint_a1"]
    ts = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([BAG], default_typestore=ts) as reader:
        states = [reader.deserialize(r, c.msgtype)
                  for c, _, r in reader.messages([c for c in reader.connections if c.topic == "/joint_states"])]
    stamp = np.array([s.header.stamp.sec * 10**9 + s.header.stamp.nanosec for s in states])
    v1 = np.array([s.velocity[list(s.name).index("joint_a1")] for s in states])
    during = v1[(stamp >= event["start_ns"]) & (stamp < event["end_ns"])]
    print(f"\njoint_a1 event {event}, |v| up to {np.abs(during).max():.4f} rad/s")
    assert np.abs(during).max() == pytest.approx(1.4834, abs=1e-3)
    assert np.sign(event["peak"]) == -np.sign(during[np.argmax(np.abs(during))])
    assert event["kind"] == "limit"  # issue 23: the simulator's limit, not a collision


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


def test_real_bag_zero_efforts_point_to_the_commands(result, tmp_path):
    """Gazebo's JointState efforts are all zero: without --effort-topic the replay says so and
    names the command topic (issue 16)."""
    report = replay([BAG], ReplayOptions(out=tmp_path / "o", gravity=(0.0, 0.0, 0.0), progress=False, plots=False))
    assert report.problems == [
        "the measured efforts (the effort field of /joint_states) are all zero: the torque residual is minus the "
        "RNEA torque; Float64MultiArray topics in the bags: /effort_controller/commands (7 entries); try "
        "--effort-topic /effort_controller/commands"]
    assert result[0].problems == []  # with the commands: nothing to warn about


def test_real_bag_made_without_gravity_gives_the_gravity_hint(result, tmp_path):
    """The README: the world had gravity switched off. Replayed with the URDF's gravity, the
    residual is minus the gravity torque and the replay says so (issue 23); replayed with
    --gravity 0 0 0 (the fixture), it does not."""
    report = replay([BAG], ReplayOptions(out=tmp_path / "o", effort_topic="/effort_controller/commands",
                                         progress=False, plots=False))
    assert [h["code"] for h in report.summary["hints"]] == ["gravity_off", "time_offset", "missing_effort"]
    assert "--gravity 0 0 0" in report.summary["hints"][0]["message"]
    assert [h["code"] for h in result[0].summary["hints"]] == ["time_offset", "missing_effort"]


def test_real_bag_lag_between_commands_and_states(result):
    """The commands (no header, aligned by receive time) match the RNEA torque of the joint states
    about 7 ms later (a command acts after it arrives): the replay's lag agrees within a sample with
    a plain search over whole-sample shifts of the CSVs it wrote."""
    report, out = result
    (hint,) = [h for h in report.summary["hints"] if h["code"] == "time_offset"]
    effort = np.loadtxt(out / "measured_effort.csv", delimiter=",", skiprows=1)[:, 1:5]  # joint_a1..a4: loaded
    ff = np.loadtxt(out / "feedforward_torque.csv", delimiter=",", skiprows=1)[:, 1:5]
    rows = np.isfinite(effort).all(axis=1)
    e, p = effort[rows], ff[rows]

    def explained(k):  # mean corr(e(t + k dt), p(t))^2
        a, b = (e[k:], p[: len(p) - k]) if k >= 0 else (e[:k], p[-k:])
        return np.mean([np.corrcoef(a[:, j], b[:, j])[0, 1] ** 2 for j in range(4)])

    best = max(range(-20, 21), key=explained)
    print(f"\n{hint['message']}\nwhole-sample search: {best} samples, {explained(best):.3f} against {explained(0):.3f}")
    assert abs(hint["evidence"]["lag_s"] - best * 0.005) <= 0.005 and hint["evidence"]["lag_s"] < 0


def test_real_bag_says_why_most_states_have_no_command(result):
    """The commands start 5.65 s into the joint states: every state received before the first
    command has no effort (counted from the bag itself)."""
    report, _ = result
    (hint,) = [h for h in report.summary["hints"] if h["code"] == "missing_effort"]
    with AnyReader([BAG], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        times = {topic: np.array([t for c, t, _ in reader.messages([c for c in reader.connections if c.topic == topic])])
                 for topic in ("/joint_states", "/effort_controller/commands")}
    before = int((times["/joint_states"] < times["/effort_controller/commands"].min()).sum())
    print(f"\n{hint['message']}")
    assert hint["evidence"]["before_first"] == before and hint["evidence"]["after_last"] == 0
    assert hint["evidence"]["with_effort"] == report.processed - before
    assert hint["evidence"]["commands"] == len(times["/effort_controller/commands"])
