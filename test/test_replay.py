"""Replay tests on bags generated here (mcap, sqlite3, ROS 1), checked against the core and
against Pinocchio as an independent reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.replay import ReplayError, ReplayOptions, replay
from liedyn_ros.replay.cli import main
from liedyn_ros.robot_data import robots_dir

pin = pytest.importorskip("pinocchio")

RATE = 200
DT_NS = 1_000_000_000 // RATE
T0 = 1_600_000_000 * 1_000_000_000
NAN_INDEX = 50
GAP = (1.0, 1.3)  # seconds without samples; the motion changes across it


def ur5_urdf() -> Path:
    return robots_dir() / "ur_description/urdf/ur5_robot.urdf"


@pytest.fixture(scope="module")
def model():
    return core.load_urdf(str(ur5_urdf()))


@pytest.fixture(scope="module")
def pin_model():
    m = pin.buildModelFromUrdf(str(ur5_urdf()))
    return m, m.createData()


def motion(t: np.ndarray, second: bool):
    """Smooth sinusoids; after the gap a different motion (so bridging the gap would show)."""
    n = 6
    amp = np.linspace(0.3, 0.8, n) * (1.5 if second else 1.0)
    w = 2 * np.pi * np.linspace(0.4, 1.1, n) * (0.7 if second else 1.0)
    ph = np.linspace(0, 1, n) + (0.9 if second else 0.0)
    arg = w * t[:, None] + ph
    return amp * np.sin(arg), amp * w * np.cos(arg), -amp * w * w * np.sin(arg)


def scenario(model, duration=2.0):
    """Stamps, q, qd, qdd (model order), efforts, and per-message joint orders."""
    t = np.arange(int(duration * RATE)) / RATE
    t = t[(t < GAP[0]) | (t >= GAP[1])]
    second = t >= GAP[1]
    q, qd, qdd = motion(t, False)
    q2, qd2, qdd2 = motion(t, True)
    q[second], qd[second], qdd[second] = q2[second], qd2[second], qdd2[second]
    effort = 20 * np.sin(3 * t[:, None] + np.arange(6)) + np.arange(6)
    stamps = T0 + np.round(t * 1e9).astype(np.int64)
    rng = np.random.default_rng(1)
    orders = [rng.permutation(6) for _ in t]
    return dict(stamps=stamps, q=q, qd=qd, qdd=qdd, effort=effort, orders=orders, names=list(model.joint_names))


def joint_state(ts, kind, stamp, names, q, qd, effort):
    t = ts.types
    sec, nsec = divmod(int(stamp), 1_000_000_000)
    stamp_msg = t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec)
    header = (t["std_msgs/msg/Header"](seq=0, stamp=stamp_msg, frame_id="base")
              if kind == "ros1" else t["std_msgs/msg/Header"](stamp=stamp_msg, frame_id="base"))
    return t["sensor_msgs/msg/JointState"](header=header, name=names, position=q, velocity=qd, effort=effort)


def write_bag(path: Path, kind: str, sc: dict, rows=None, extra=None) -> Path:
    """JointStates with shuffled names plus an extra joint; sample NAN_INDEX has a NaN."""
    rows = range(len(sc["stamps"])) if rows is None else rows
    ts = get_typestore(Stores.ROS1_NOETIC if kind == "ros1" else Stores.ROS2_HUMBLE)
    if kind == "ros1":
        path = path.with_suffix(".bag")
        writer = Writer1(path)
    else:
        writer = Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP if kind == "mcap" else StoragePlugin.SQLITE3)
    serialize = ts.serialize_ros1 if kind == "ros1" else ts.serialize_cdr
    with writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for i in rows:
            order = sc["orders"][i]
            names = [sc["names"][j] for j in order] + ["gripper_joint"]
            q = np.append(sc["q"][i, order], 0.1)
            if i == NAN_INDEX:
                q[2] = np.nan
            msg = joint_state(ts, kind, sc["stamps"][i], names, q,
                              np.append(sc["qd"][i, order], 0.0), np.append(sc["effort"][i, order], 0.0))
            writer.write(conn, int(sc["stamps"][i]) + 300_000, serialize(msg, "sensor_msgs/msg/JointState"))
        if extra:
            extra(writer, ts)
    return path


def read_csv(path: Path):
    values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    stamps = np.loadtxt(path, delimiter=",", skiprows=1, usecols=0, dtype=np.int64, ndmin=1)
    return stamps, values[:, 1:]


def read_outputs(out: Path):
    """{topic: (log times, stamps, names, values)} from the output mcap bag."""
    found: dict[str, list] = {}
    with AnyReader([out / "outputs"]) as reader:
        for conn, logtime, raw in reader.messages():
            msg = reader.deserialize(raw, conn.msgtype)
            stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            if conn.msgtype.endswith("JointState"):
                names, values = list(msg.name), np.asarray(msg.effort)
            else:
                names, values = list(msg.joint_names), np.asarray(msg.points[0].accelerations)
            found.setdefault(conn.topic, []).append((logtime, stamp, names, values))
    return found


def pin_reference(pin_model, q, qd, a, effort):
    m, d = pin_model
    tau = np.array([pin.rnea(m, d, q[i], qd[i], a[i]) for i in range(len(q))])
    grav = np.array([pin.computeGeneralizedGravity(m, d, q[i]) for i in range(len(q))])
    acc = np.array([pin.aba(m, d, q[i], qd[i], effort[i]) for i in range(len(q))])
    return tau, grav, acc


@pytest.mark.parametrize("kind", ["mcap", "sqlite3", "ros1"])
def test_replay_outputs_match_core_and_pinocchio(tmp_path, model, pin_model, kind):
    sc = scenario(model)
    bag = write_bag(tmp_path / "in", kind, sc)
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False))

    keep = np.arange(len(sc["stamps"])) != NAN_INDEX
    assert report.skipped == {"nan": 1}
    assert report.processed == keep.sum()
    stamps, q, qd, effort = sc["stamps"][keep], sc["q"][keep], sc["qd"][keep], sc["effort"][keep]

    est_stamps, a_est = read_csv(out / "estimated_acceleration.csv")
    np.testing.assert_array_equal(est_stamps, stamps)
    # Savitzky-Golay on smooth motion: close to the analytic acceleration everywhere,
    # including both edges of the gap (a derivative across it would be far off).
    scale = np.abs(sc["qdd"]).max()
    assert np.abs(a_est - sc["qdd"][keep]).max() < 2e-3 * scale

    tau_pin, grav_pin, acc_pin = pin_reference(pin_model, q, qd, a_est, effort)
    outputs = read_outputs(out)
    for topic, expected in (("/liedyn/feedforward_torque", tau_pin), ("/liedyn/gravity_torque", grav_pin),
                            ("/liedyn/predicted_acceleration", acc_pin)):
        rows = outputs[topic]
        assert [r[0] for r in rows] == (stamps + 300_000).tolist()  # logged at the receive time
        assert [r[1] for r in rows] == stamps.tolist()  # stamped like the inputs
        assert all(r[2] == list(model.joint_names) for r in rows)
        values = np.array([r[3] for r in rows])
        np.testing.assert_allclose(values, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
        csv_stamps, csv_values = read_csv(out / f"{topic.rsplit('/', 1)[1]}.csv")
        np.testing.assert_array_equal(csv_stamps, stamps)
        np.testing.assert_allclose(csv_values, values, rtol=1e-13, atol=1e-300)

    tau_core = np.asarray(core.rnea(model, q, qd, a_est))
    np.testing.assert_allclose(np.array([r[3] for r in outputs["/liedyn/feedforward_torque"]]), tau_core,
                               rtol=1e-12, atol=1e-12)

    summary = json.loads((out / "summary.json").read_text())
    residual = effort - tau_pin
    for j, name in enumerate(model.joint_names):
        stats = summary["joints"][name]["torque_residual_Nm"]
        assert stats["count"] == len(q)
        assert stats["rms"] == pytest.approx(np.sqrt((residual[:, j] ** 2).mean()), rel=1e-9)
        assert stats["mean"] == pytest.approx(residual[:, j].mean(), rel=1e-9, abs=1e-9)
        assert stats["max_abs"] == pytest.approx(np.abs(residual[:, j]).max(), rel=1e-9)
        acc_stats = summary["joints"][name]["acceleration_residual_rad_s2"]
        assert acc_stats["rms"] == pytest.approx(np.sqrt(((acc_pin - a_est)[:, j] ** 2).mean()), rel=1e-7)
    assert {p.name for p in out.glob("*.png")} == {"torques.png", "torque_residuals.png", "accelerations.png",
                                                  "external_torque.png"}


def test_bags_merged_in_time_across_formats(tmp_path, model):
    sc = scenario(model)
    n = len(sc["stamps"])
    single = replay([write_bag(tmp_path / "all", "mcap", sc)], ReplayOptions(out=tmp_path / "o1", urdf=ur5_urdf(), progress=False))
    # Interleaved halves in a ROS 1 bag and a rosbag2 sqlite3 bag: the merge must restore time order.
    a = write_bag(tmp_path / "even", "ros1", sc, rows=range(0, n, 2))
    b = write_bag(tmp_path / "odd", "sqlite3", sc, rows=range(1, n, 2))
    merged = replay([a, b], ReplayOptions(out=tmp_path / "o2", urdf=ur5_urdf(), progress=False, plots=False))
    assert merged.processed == single.processed
    for name in ("feedforward_torque", "predicted_acceleration", "estimated_acceleration"):
        s1, v1 = read_csv(tmp_path / "o1" / f"{name}.csv")
        s2, v2 = read_csv(tmp_path / "o2" / f"{name}.csv")
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-12)


def test_effort_topic_aligned_by_receive_time_in_given_order(tmp_path, model, pin_model):
    sc = scenario(model, duration=1.0)
    order = list(reversed(model.joint_names))
    commands = []

    def extra(writer, ts):
        conn = writer.add_connection("/cmd", "std_msgs/msg/Float64MultiArray", typestore=ts)
        layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        for k, recv in enumerate(range(int(sc["stamps"][10]), int(sc["stamps"][-1]), 23_000_000)):
            data = np.arange(6, dtype=float) + k  # entries in `order`
            commands.append((recv, data))
            msg = ts.types["std_msgs/msg/Float64MultiArray"](layout=layout, data=data)
            writer.write(conn, recv, ts.serialize_cdr(msg, "std_msgs/msg/Float64MultiArray"))

    bag = write_bag(tmp_path / "in", "mcap", sc, extra=extra)
    out = tmp_path / "out"
    replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), effort_topic="/cmd", effort_joints=tuple(order),
                                progress=False, plots=False))
    stamps, measured = read_csv(out / "measured_effort.csv")
    recv_times = np.array([c[0] for c in commands])
    for stamp, row in zip(stamps, measured):
        latest = np.searchsorted(recv_times, stamp + 300_000, side="right") - 1
        if latest < 0:
            assert np.isnan(row).all()
        else:
            expected = dict(zip(order, commands[latest][1]))
            np.testing.assert_array_equal(row, [expected[j] for j in model.joint_names])
    pred_stamps, _ = read_csv(out / "predicted_acceleration.csv")
    assert len(pred_stamps) == np.isfinite(measured).all(axis=1).sum() > 0


def test_gravity_override(tmp_path, model, pin_model):
    sc = scenario(model, duration=0.5)
    bag = write_bag(tmp_path / "in", "mcap", sc)
    replay([bag], ReplayOptions(out=tmp_path / "out", urdf=ur5_urdf(), gravity=(0.0, 0.0, 0.0), progress=False, plots=False))
    _, grav = read_csv(tmp_path / "out" / "gravity_torque.csv")
    assert np.abs(grav).max() < 1e-12
    stamps, ff = read_csv(tmp_path / "out" / "feedforward_torque.csv")
    _, a_est = read_csv(tmp_path / "out" / "estimated_acceleration.csv")
    m, d = pin_model
    m0 = m.copy()
    m0.gravity.linear[:] = 0.0
    keep = np.arange(len(sc["stamps"])) != NAN_INDEX
    q, qd = sc["q"][keep], sc["qd"][keep]
    ref = np.array([pin.rnea(m0, m0.createData(), q[i], qd[i], a_est[i]) for i in range(len(q))])
    np.testing.assert_allclose(ff, ref, rtol=1e-9, atol=1e-9)


def test_robot_description_from_bag_and_unknown_types_skipped(tmp_path, model):
    sc = scenario(model, duration=0.5)
    urdf_xml = ur5_urdf().read_text()

    def extra(writer, ts):
        desc = writer.add_connection("/robot_description", "std_msgs/msg/String", typestore=ts)
        writer.write(desc, int(sc["stamps"][0]) - 1, ts.serialize_cdr(ts.types["std_msgs/msg/String"](data=urdf_xml), "std_msgs/msg/String"))
        # A type the reader cannot know: no definition in the bag, not a standard message.
        dyn = writer.add_connection("/dynamic_joint_states", "control_msgs/msg/DynamicJointState",
                                    msgdef="", rihs01="RIHS01_" + "0" * 64)
        writer.write(dyn, int(sc["stamps"][3]), b"\x00\x01\x00\x00garbage")

    bag = write_bag(tmp_path / "in", "sqlite3", sc, extra=extra)
    report = replay([bag], ReplayOptions(out=tmp_path / "out", progress=False, plots=False))
    assert "control_msgs/msg/DynamicJointState" in report.skipped_types
    assert report.processed == len(sc["stamps"]) - 1


def test_truncated_mcap_gives_what_was_read(tmp_path, model):
    sc = scenario(model)
    bag = write_bag(tmp_path / "in", "mcap", sc)
    full = replay([bag], ReplayOptions(out=tmp_path / "full", urdf=ur5_urdf(), progress=False, plots=False))
    mcap = next(bag.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: int(len(data) * 0.6)])
    cut = replay([bag], ReplayOptions(out=tmp_path / "cut", urdf=ur5_urdf(), progress=False, plots=False))
    assert any("damaged" in p for p in cut.problems)
    assert 0.4 * full.processed < cut.processed < full.processed
    s_full, v_full = read_csv(tmp_path / "full" / "gravity_torque.csv")
    s_cut, v_cut = read_csv(tmp_path / "cut" / "gravity_torque.csv")
    np.testing.assert_array_equal(s_cut, s_full[: len(s_cut)])
    np.testing.assert_allclose(v_cut, v_full[: len(s_cut)], rtol=1e-12)


def test_unreadable_bags_raise_clear_errors(tmp_path):
    with pytest.raises(ReplayError, match="no such bag"):
        replay([tmp_path / "missing"], ReplayOptions(out=tmp_path / "o"))
    junk = tmp_path / "junk.db3"
    junk.write_bytes(b"this is not sqlite" * 10)
    with pytest.raises(ReplayError, match="cannot open bag"):
        replay([junk], ReplayOptions(out=tmp_path / "o"))


def test_cli_errors_and_parallel_jobs(tmp_path, model, capsys):
    sc = scenario(model, duration=0.5)
    a = write_bag(tmp_path / "a", "mcap", sc)
    b = write_bag(tmp_path / "b", "ros1", sc)
    assert main([str(a), "--out", str(tmp_path / "o"), "--no-progress"]) == 2  # no URDF in the bag
    assert "robot_description" in capsys.readouterr().err
    assert main([str(a), "--out", str(tmp_path / "o"), "--urdf", str(ur5_urdf()), "--effort-topic", "/nope"]) == 2
    assert "/nope" in capsys.readouterr().err
    assert main([str(a), str(b), "--out", str(tmp_path / "par"), "--urdf", str(ur5_urdf()), "--jobs", "2", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    for name in ("a", "b"):
        summary = json.loads((tmp_path / "par" / name / "summary.json").read_text())
        assert summary["processed"] == len(sc["stamps"]) - 1
    assert printed.count("tau res RMS") == 2


def test_model_without_forward_dynamics_replays_torques_only(tmp_path, model, pin_model, capsys):
    """The UR5 with its wrist_3 link and tool frames massless: aba is undefined, so the replay says
    why once and writes feedforward and gravity (equal to Pinocchio's) without predictions; the
    momentum observer never inverts M, so the external torque is there too."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(ur5_urdf().read_text())
    emptied = []
    for link in root.iter("link"):
        if link.get("name") in ("wrist_3_link", "ee_link", "tool0"):
            emptied += [link.get("name")] * len(link.findall("inertial"))
            for inertial in link.findall("inertial"):
                link.remove(inertial)
    assert "wrist_3_link" in emptied
    urdf = tmp_path / "ur5_massless_wrist.urdf"
    urdf.write_text(ET.tostring(root, encoding="unicode"))
    sc = scenario(model, duration=0.5)
    bag = write_bag(tmp_path / "in", "mcap", sc)
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=urdf, progress=False, plots=False))
    assert "no predicted accelerations" in capsys.readouterr().err
    assert report.processed == len(sc["stamps"]) - 1
    outputs = read_outputs(out)
    assert set(outputs) == {"/liedyn/feedforward_torque", "/liedyn/gravity_torque", "/liedyn/external_torque"}
    # The massless wrist changes no torque of the joints before it, and its own is zero.
    keep = np.arange(len(sc["stamps"])) != NAN_INDEX
    light = core.load_urdf(str(urdf))
    grav = np.array([r[3] for r in outputs["/liedyn/gravity_torque"]])
    expected = np.array([core.gravity(light, q) for q in sc["q"][keep]])
    np.testing.assert_allclose(grav, expected, atol=1e-9)
    assert np.abs(grav[:, -1]).max() < 1e-12
