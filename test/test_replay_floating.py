"""Floating-base replay: Solo12 JointStates plus nav_msgs/Odometry in a generated bag.

Checks /liedyn/base_wrench and /liedyn/predicted_base_acceleration (and the joint outputs)
against the core and against Pinocchio's free-flyer model, and the odometry pairing rule
(latest odometry within odom_max_age, none before the first one) on a dropout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from scipy.spatial.transform import Rotation

from liedyn_ros import core
from liedyn_ros.replay import ReplayOptions, replay

pin = pytest.importorskip("pinocchio")
robots = pytest.importorskip("robots")

RATE = 200
DT_NS = 1_000_000_000 // RATE
T0 = 1_650_000_000 * 1_000_000_000
ODOM_LEAD_NS = 1_000_000  # odometry stamped 1 ms before its joint state
DROPOUT = (0.5, 0.6)  # seconds without odometry: joint states there pair with stale odometry
ODOM_MAX_AGE = 0.02  # the pipeline's default


@pytest.fixture(scope="module")
def solo():
    urdf = robots.robots_dir() / robots.ROBOT_FILES["solo12"][0]
    if not urdf.is_file():
        pytest.skip("example-robot-data is not installed")
    model = core.load_urdf(str(urdf), floating_base=True)
    pin_model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
    return urdf, model, pin_model


def scenario(n_joints: int, duration: float = 1.5) -> dict[str, np.ndarray]:
    """Smooth joint and base motion; the base twist is given in the base frame, angular first."""
    t = np.arange(int(duration * RATE)) / RATE
    k = np.arange(n_joints)
    q = 0.4 * np.sin(2.0 * t[:, None] + 0.3 * k)
    qd = 0.8 * np.cos(2.0 * t[:, None] + 0.3 * k)
    effort = 1.5 * np.sin(3.0 * t[:, None] + k) + 0.2 * k
    position = np.stack([0.1 * t, 0.05 * np.sin(t), 0.3 + 0.02 * np.cos(3 * t)], axis=1)
    rotation = Rotation.from_rotvec(np.stack([0.2 * np.sin(t), 0.1 * t, 0.3 * np.cos(2 * t)], axis=1))
    twist = np.stack([0.3 * np.cos(t), -0.2 * np.sin(2 * t), 0.1 + 0 * t,
                      0.1 + 0.05 * np.sin(3 * t), 0.2 * np.cos(t), -0.1 * np.sin(t)], axis=1)
    stamps = T0 + np.round(t * 1e9).astype(np.int64)
    return dict(t=t, stamps=stamps, q=q, qd=qd, effort=effort, position=position,
                quat=rotation.as_quat(), twist=twist)


def write_bag(path: Path, model, sc: dict[str, np.ndarray]) -> Path:
    """JointStates (joints in reverse model order) and Odometry for every sample except the
    first one and the dropout; each odometry is received just before its joint state."""
    ts = get_typestore(Stores.ROS2_JAZZY)
    t = ts.types

    def header(stamp: int, frame: str):
        sec, nsec = divmod(int(stamp), 1_000_000_000)
        return t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame)

    def vector(cls: str, xyz):
        return t[cls](x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))

    names = list(model.joint_names)[::-1]
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        js = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        odom = writer.add_connection("/odom", "nav_msgs/msg/Odometry", typestore=ts)
        for i, stamp in enumerate(sc["stamps"]):
            if i > 0 and not DROPOUT[0] <= sc["t"][i] < DROPOUT[1]:
                x, y, z, w = sc["quat"][i]
                pose = t["geometry_msgs/msg/Pose"](
                    position=vector("geometry_msgs/msg/Point", sc["position"][i]),
                    orientation=t["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w))
                twist = t["geometry_msgs/msg/Twist"](
                    linear=vector("geometry_msgs/msg/Vector3", sc["twist"][i, 3:]),
                    angular=vector("geometry_msgs/msg/Vector3", sc["twist"][i, :3]))
                msg = t["nav_msgs/msg/Odometry"](
                    header=header(stamp - ODOM_LEAD_NS, "odom"), child_frame_id=model.root_link,
                    pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
                    twist=t["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)))
                writer.write(odom, int(stamp) + 100_000, ts.serialize_cdr(msg, "nav_msgs/msg/Odometry"))
            msg = t["sensor_msgs/msg/JointState"](
                header=header(stamp, "solo"), name=names, position=sc["q"][i, ::-1].copy(),
                velocity=sc["qd"][i, ::-1].copy(), effort=sc["effort"][i, ::-1].copy())
            writer.write(js, int(stamp) + 300_000, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
    return path


def expected_rows(sc: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Which joint states pair with an odometry, and the index of that odometry."""
    has_odom = (np.arange(len(sc["t"])) > 0) & ~((sc["t"] >= DROPOUT[0]) & (sc["t"] < DROPOUT[1]))
    latest = np.maximum.accumulate(np.where(has_odom, np.arange(len(sc["t"])), -1))
    age = sc["stamps"] - (sc["stamps"][np.maximum(latest, 0)] - ODOM_LEAD_NS)
    return (latest >= 0) & (age <= ODOM_MAX_AGE * 1e9), latest


def read_base_outputs(out: Path) -> dict[str, tuple[list[int], list[str], np.ndarray]]:
    """{topic: (stamps, frame ids, (N, 6) angular-first values)} of the base outputs."""
    found: dict[str, tuple[list[int], list[str], list[np.ndarray]]] = {}
    with AnyReader([out / "outputs"]) as reader:
        conns = [c for c in reader.connections if c.topic.startswith("/liedyn/") and "base" in c.topic]
        for conn, _, raw in reader.messages(connections=conns):
            msg = reader.deserialize(raw, conn.msgtype)
            if conn.msgtype.endswith("WrenchStamped"):
                ang, lin = msg.wrench.torque, msg.wrench.force
            else:
                ang, lin = msg.accel.angular, msg.accel.linear
            stamps, frames, values = found.setdefault(conn.topic, ([], [], []))
            stamps.append(msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec)
            frames.append(msg.header.frame_id)
            values.append(np.array([ang.x, ang.y, ang.z, lin.x, lin.y, lin.z]))
    return {k: (s, f, np.array(v)) for k, (s, f, v) in found.items()}


def test_floating_base_outputs_match_core_and_pinocchio(tmp_path, solo):
    urdf, model, pin_model = solo
    sc = scenario(model.n)
    bag = write_bag(tmp_path / "in", model, sc)
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=urdf, odom_topic="/odom", progress=False, plots=False))

    ok, latest = expected_rows(sc)
    assert report.skipped == {"no_odometry": 1, "stale_odometry": int((~ok).sum()) - 1}
    assert report.processed == ok.sum()
    assert 10 < (~ok).sum() < 25  # the dropout really produced stale pairs

    rows, odom_rows = np.flatnonzero(ok), latest[ok]
    q, effort = sc["q"][rows], sc["effort"][rows]
    v = np.concatenate([sc["twist"][odom_rows], sc["qd"][rows]], axis=1)
    pose = np.array([core.pose_from_position_quaternion(p, x)
                     for p, x in zip(sc["position"][odom_rows], sc["quat"][odom_rows])])
    a_est = np.loadtxt(out / "estimated_acceleration.csv", delimiter=",", skiprows=1, ndmin=2)[:, 1:]
    assert a_est.shape == (len(rows), 6 + model.n)
    # The base acceleration estimate differentiates the recorded base twist (checked away
    # from the dropout, where joint states were paired with an older odometry).
    slope = np.gradient(sc["twist"], sc["t"], axis=0)[rows]
    clear = (odom_rows == rows) & (np.abs(sc["t"][rows] - np.mean(DROPOUT)) > 0.1)
    assert clear.sum() > 200
    assert np.abs(a_est[:, :6] - slope)[clear][5:-5].max() < 2e-3

    # Pinocchio free-flyer: vectors (linear, angular) first, quaternion in q.
    m, d = pin_model, pin_model.createData()
    order = list(m.names)[2:]
    wrench_pin, acc_pin = [], []
    for i in range(len(rows)):
        q_pin, v_pin = core.to_pinocchio(model, q[i], v[i], base_pose=pose[i], joint_order=order)
        _, a_pin = core.to_pinocchio(model, q[i], a_est[i], base_pose=pose[i], joint_order=order)
        _, tau_pin = core.to_pinocchio(model, q[i], np.concatenate([np.zeros(6), effort[i]]),
                                       base_pose=pose[i], joint_order=order)
        f = pin.rnea(m, d, q_pin, v_pin, a_pin)
        acc = pin.aba(m, d, q_pin, v_pin, tau_pin)
        wrench_pin.append(np.concatenate([f[3:6], f[:3]]))
        acc_pin.append(np.concatenate([acc[3:6], acc[:3]]))
    wrench_pin, acc_pin = np.array(wrench_pin), np.array(acc_pin)

    outputs = read_base_outputs(out)
    for topic, expected in (("/liedyn/base_wrench", wrench_pin),
                            ("/liedyn/predicted_base_acceleration", acc_pin)):
        stamps, frames, values = outputs[topic]
        assert stamps == sc["stamps"][rows].tolist()
        assert set(frames) == {model.root_link}
        np.testing.assert_allclose(values, expected, rtol=1e-8, atol=1e-8 * np.abs(expected).max())

    # The same numbers from the core directly (batched, our conventions).
    wrench_core = np.asarray(core.rnea(model, q, v, a_est, base_pose=pose))[:, :6]
    acc_core = np.asarray(core.aba(model, q, v, np.concatenate([np.zeros((len(rows), 6)), effort], axis=1),
                                   base_pose=pose))
    np.testing.assert_allclose(outputs["/liedyn/base_wrench"][2], wrench_core, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outputs["/liedyn/predicted_base_acceleration"][2], acc_core[:, :6],
                               rtol=1e-12, atol=1e-12)
    predicted = np.loadtxt(out / "predicted_acceleration.csv", delimiter=",", skiprows=1, ndmin=2)[:, 1:]
    np.testing.assert_allclose(predicted, acc_core[:, 6:], rtol=1e-12, atol=1e-12)
