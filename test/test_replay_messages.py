"""The replay never passes a meaningless result off as a success (issue 16): each mistake a new
user makes on a real recording gives a one-line error, or a warning in the printed report and in
summary.json, saying what to do instead. Bags are built here (test_replay's writers)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from liedyn_ros import core, pipeline
from liedyn_ros.replay import ReplayError, ReplayOptions, replay
from liedyn_ros.replay import run as replay_run
from liedyn_ros.replay.cli import main
from test_replay import scenario, ur5_urdf, write_bag


@pytest.fixture(scope="module")
def model():
    return core.load_urdf(str(ur5_urdf()))


@pytest.fixture(scope="module")
def bag(tmp_path_factory, model):
    """Half a second of UR5 joint states (mcap) with efforts."""
    return write_bag(tmp_path_factory.mktemp("bag") / "in", "mcap", scenario(model, duration=0.5))


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args] + ["--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    """The error output, checked to be one message line and no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("liedyn-replay: error: "), err
    return lines[0]


# --------------------------------------------------------------- 6. a reused --out


def test_reused_out_keeps_nothing_of_an_earlier_run(tmp_path, bag):
    out = tmp_path / "out"
    first = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False))
    assert {Path(f).name for f in first.files} == {"torques.png", "torque_residuals.png", "accelerations.png",
                                                   "external_torque.png"}
    second = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, plots=False))
    assert second.files == [] and not list(out.glob("*.png"))  # no stale plots of the first run
    assert json.loads((out / "summary.json").read_text())["files"] == []


def test_out_with_foreign_files_is_refused_untouched(tmp_path, bag, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = run_cli(capsys, bag, "--out", out, "--urdf", ur5_urdf())
    assert code == 2 and "notes.txt" in one_line_error(err) and "new or empty directory" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


# ------------------------------------------------------- 7. messages, not tracebacks


def test_out_naming_a_file(tmp_path, bag, capsys):
    target = tmp_path / "results.txt"
    target.write_text("x")
    code, _, err = run_cli(capsys, bag, "--out", target, "--urdf", ur5_urdf())
    assert code == 2 and "is a file; give a directory" in one_line_error(err)


def test_gravity_nan(tmp_path, bag, capsys):
    code, _, err = run_cli(capsys, bag, "--out", tmp_path / "o", "--urdf", ur5_urdf(), "--gravity", "0", "0", "nan")
    assert code == 2 and "--gravity needs three finite numbers" in one_line_error(err)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------- 8. messages


def test_xacro_file_says_how_to_expand_it(tmp_path, bag, capsys):
    xacro = tmp_path / "arm.urdf"  # the suffix does not give it away; the content does
    xacro.write_text('<robot name="arm" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                     '<xacro:property name="l" value="0.3"/><xacro:include filename="links.xacro"/></robot>')
    code, _, err = run_cli(capsys, bag, "--out", tmp_path / "o", "--urdf", xacro)
    line = one_line_error(err)
    assert code == 2 and "is a xacro file" in line and "xacro FILE > robot.urdf" in line


def test_expanded_urdf_with_the_xacro_namespace_loads(tmp_path, bag):
    """xacro leaves xmlns:xacro on the robot element of the URDF it writes: that is no xacro file."""
    assert "xmlns:xacro" in ur5_urdf().read_text()
    assert replay([bag], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, plots=False)).processed > 0


def test_empty_directory_is_not_a_bag(tmp_path):
    empty = tmp_path / "recording"
    empty.mkdir()
    with pytest.raises(ReplayError, match=r"recording: not a bag \(a directory without metadata.yaml"):
        replay([empty], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf()))


def test_jobs_name_a_failing_bag_once(tmp_path, bag, capsys):
    missing = tmp_path / "missing_bag"
    code, out, err = run_cli(capsys, bag, missing, "--out", tmp_path / "o", "--urdf", ur5_urdf(),
                             "--jobs", "1", "--no-plots")
    assert code == 1 and "tau res RMS" in out
    assert one_line_error(err).count("missing_bag") == 1


def test_core_functions_name_a_non_model_argument(model):
    q = np.zeros(model.n)
    for call in (lambda: core.rnea(str(ur5_urdf()), q, q, q), lambda: core.aba(None, q, q, q),
                 lambda: core.rnea_derivatives("panda.urdf", q, q, q),
                 lambda: core.rnea_time_derivatives("panda.urdf", q, [q, q])):
        with pytest.raises(TypeError, match=r"^model: expected a liedyn_ros.core.Model \(from load_urdf\), got"):
            call()


# -------------------------------------------------- 9. the compile notice only when slow


def test_compile_notice_only_when_preparing_takes_long(tmp_path, bag, capsys, monkeypatch):
    replay([bag], ReplayOptions(out=tmp_path / "warm", urdf=ur5_urdf(), plots=False))  # kernels loaded
    assert "compiling" not in capsys.readouterr().err
    real = pipeline.prepare_kernels

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(replay_run.pipeline, "prepare_kernels", slow)
    monkeypatch.setattr(replay_run, "PREPARE_NOTICE_S", 0.1)
    replay([bag], ReplayOptions(out=tmp_path / "cold", urdf=ur5_urdf(), plots=False))
    assert "compiling the dynamics kernels" in capsys.readouterr().err


# ------------------------------------------------ bags of any robot, with command topics

T0 = 1_700_000_000 * 1_000_000_000
RATE = 200


def write_states(path: Path, names, q, qd, effort, *, t0: int = T0, arrays=None) -> Path:
    """An mcap bag: JointStates at RATE Hz from stamp t0 (received 0.3 ms later), and
    Float64MultiArray topics given as {topic: [(receive_ns, data), ...]}."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        js = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for k in range(len(q)):
            stamp = t0 + k * (1_000_000_000 // RATE)
            sec, nsec = divmod(stamp, 1_000_000_000)
            msg = t["sensor_msgs/msg/JointState"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec),
                                                frame_id="base"),
                name=list(names), position=q[k], velocity=qd[k], effort=effort[k])
            writer.write(js, stamp + 300_000, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
        layout = t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        for topic, commands in (arrays or {}).items():
            conn = writer.add_connection(topic, "std_msgs/msg/Float64MultiArray", typestore=ts)
            for recv, data in commands:
                msg = t["std_msgs/msg/Float64MultiArray"](layout=layout, data=np.asarray(data, dtype=float))
                writer.write(conn, int(recv), ts.serialize_cdr(msg, "std_msgs/msg/Float64MultiArray"))
    return path


def ur5_motion(model, seconds: float = 0.5):
    """(q, qd, effort) of a smooth UR5 motion with nonzero efforts, model joint order."""
    t = np.arange(int(seconds * RATE)) / RATE
    arg = 2 * np.pi * np.linspace(0.4, 1.1, model.n) * t[:, None]
    amp = np.linspace(0.3, 0.8, model.n)
    return amp * np.sin(arg), amp * 2 * np.pi * np.linspace(0.4, 1.1, model.n) * np.cos(arg), \
        20 * np.sin(3 * t[:, None] + np.arange(model.n))


def commands(count: int, entries: int, every_ns: int = 20_000_000):
    return [(T0 + k * every_ns, np.arange(entries) + 0.1 * k) for k in range(count)]


# ------------------------------------------------------ 1. a topic of the wrong type


def test_topic_of_the_wrong_type_names_both_types(tmp_path, model, capsys):
    q, qd, effort = ur5_motion(model)
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, effort,
                       arrays={"/effort_controller/commands": commands(20, model.n)})
    common = ["--out", tmp_path / "o", "--urdf", ur5_urdf()]
    code, _, err = run_cli(capsys, bag, *common, "--effort-topic", "/joint_states")
    line = one_line_error(err)
    assert code == 2 and ("--effort-topic /joint_states is a sensor_msgs/msg/JointState, expected a "
                          "std_msgs/msg/Float64MultiArray; the efforts of the joint states are used without") in line
    code, _, err = run_cli(capsys, bag, *common, "--joint-states-topic", "/effort_controller/commands")
    line = one_line_error(err)
    assert code == 2 and ("--joint-states-topic /effort_controller/commands is a std_msgs/msg/Float64MultiArray, "
                          "expected a sensor_msgs/msg/JointState; topics of that type in the bags: /joint_states") in line


# ------------------------------------- 2. effort commands longer than --effort-joints says


def test_effort_joints_and_command_length_disagree(tmp_path, model, capsys):
    q, qd, effort = ur5_motion(model)
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, effort, arrays={"/cmd": commands(20, 7)})
    common = ["--out", tmp_path / "o", "--urdf", ur5_urdf(), "--effort-topic", "/cmd"]
    code, _, err = run_cli(capsys, bag, *common, "--effort-joints", ",".join(model.joint_names[:2]))
    assert code == 2 and "--effort-joints names 2 joints, /cmd holds 7 entries" in one_line_error(err)
    code, _, err = run_cli(capsys, bag, *common)  # default: the model's 6 joints
    assert code == 2 and "/cmd holds 7 entries, the model has 6 joints" in one_line_error(err)
    assert "give --effort-joints" in err


# -------------------------------------------- 3. all-zero and constant effort series


def test_all_zero_efforts_warn_and_point_to_command_topics(tmp_path, model, capsys):
    q, qd, effort = ur5_motion(model)
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, 0 * effort,
                       arrays={"/effort_controller/commands": commands(20, model.n), "/gains": commands(3, 2)})
    code, out, _ = run_cli(capsys, bag, "--out", tmp_path / "o", "--urdf", ur5_urdf(), "--no-plots")
    assert code == 0
    warning = ("the measured efforts (the effort field of /joint_states) are all zero: the torque residual is "
               "minus the RNEA torque; Float64MultiArray topics in the bags: /effort_controller/commands "
               "(6 entries), /gains (2 entries); try --effort-topic /effort_controller/commands")
    assert out.strip().splitlines()[-1] == f"WARNING: {warning}"
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["problems"] == [warning]


def test_constant_effort_on_one_joint_is_named(tmp_path, model):
    q, qd, effort = ur5_motion(model)
    effort[:, 2] = 4.0
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, effort)
    report = replay([bag], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, plots=False))
    assert report.problems == [f"the measured effort (the effort field of /joint_states) is constant on "
                               f"{model.joint_names[2]}: the torque residual there only shifts the RNEA torque; "
                               "check that these joints' efforts are recorded"]
    ok = write_states(tmp_path / "ok", model.joint_names, q, qd, ur5_motion(model)[2])
    assert replay([ok], ReplayOptions(out=tmp_path / "o2", urdf=ur5_urdf(), progress=False, plots=False)).problems == []


def test_no_effort_at_all_warns(tmp_path, model):
    q, qd, effort = ur5_motion(model)
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, effort[:, :0])  # empty effort field
    report = replay([bag], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, plots=False))
    assert len(report.problems) == 1 and report.problems[0].startswith(
        "no measured effort in the effort field of /joint_states: the torque residual columns are empty; "
        "the bags hold no std_msgs/msg/Float64MultiArray topic")


# --------------------------------------------- 4. separate recordings given together


def test_recordings_that_do_not_overlap_are_refused(tmp_path, model, capsys):
    q, qd, effort = ur5_motion(model)
    # Two simulation runs an hour apart, both stamped from the same simulated clock.
    a = write_states(tmp_path / "run_a", model.joint_names, q, qd, effort)
    b = write_states(tmp_path / "run_b", model.joint_names, q, qd, effort, t0=T0 + 3600 * 1_000_000_000)
    code, _, err = run_cli(capsys, a, b, "--out", tmp_path / "o", "--urdf", ur5_urdf())
    line = one_line_error(err)
    assert code == 2 and "run_a" in line and "run_b" in line
    assert "do not overlap in time: separate recordings are not merged; replay each on its own with --jobs N" in line


def test_consecutive_parts_of_one_recording_merge(tmp_path, model):
    q, qd, effort = ur5_motion(model, seconds=1.0)
    half = len(q) // 2
    a = write_states(tmp_path / "part0", model.joint_names, q[:half], qd[:half], effort[:half])
    b = write_states(tmp_path / "part1", model.joint_names, q[half:], qd[half:], effort[half:],
                     t0=T0 + half * (1_000_000_000 // RATE))
    report = replay([a, b], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, plots=False))
    assert report.processed == len(q) and report.skipped == {}


# ----------------------------------------------------------- 5. prismatic joint units

SLIDER_URDF = """<robot name="slider_arm">
  <link name="base"/>
  <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="2.0"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.03"/></inertial></link>
  <link name="carriage"><inertial><mass value="1.0"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
  <joint name="turn" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="50" velocity="5"/></joint>
  <joint name="slide" type="prismatic"><parent link="arm"/><child link="carriage"/>
    <origin xyz="0.3 0 0"/><axis xyz="1 0 0"/><limit lower="-0.5" upper="0.5" effort="100" velocity="1"/></joint>
</robot>"""


class Figures:
    """Captures what the replay's plots draw (savefig patched): labels, legends, time limits."""

    def __init__(self, monkeypatch) -> None:
        import matplotlib
        from matplotlib.figure import Figure

        matplotlib.use("Agg")
        self.seen: dict[str, dict] = {}

        def savefig(fig, path, *args, **kwargs):
            axes = fig.get_axes()
            self.seen[Path(path).name] = {
                "ylabels": [ax.get_ylabel() for ax in axes],
                "xlims": [tuple(ax.get_xlim()) for ax in axes],
                "ylims": [tuple(ax.get_ylim()) for ax in axes],
                "texts": [[text.get_text() for text in ax.texts] for ax in axes],  # a panel's notes
                "curves": [[line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
                           for ax in axes],  # "_..." labels: lines kept out of legends (thresholds)
                "legend": [text.get_text() for legend in fig.legends for text in legend.get_texts()],
                "title": fig._suptitle.get_text() if fig._suptitle else "",
            }

        monkeypatch.setattr(Figure, "savefig", savefig)


def test_prismatic_joint_units_in_summary_table_and_plots(tmp_path, monkeypatch):
    urdf = tmp_path / "slider.urdf"
    urdf.write_text(SLIDER_URDF)
    slider = core.load_urdf(str(urdf))
    assert slider.joint_names == ("turn", "slide")
    t = np.arange(100) / RATE
    q = np.stack([0.5 * np.sin(2 * t), 0.1 * np.sin(3 * t)], axis=1)
    qd = np.stack([np.cos(2 * t), 0.3 * np.cos(3 * t)], axis=1)
    bag = write_states(tmp_path / "in", slider.joint_names, q, qd, np.stack([np.sin(t), 2 + np.cos(t)], axis=1))
    figures = Figures(monkeypatch)
    report = replay([bag], ReplayOptions(out=tmp_path / "o", urdf=urdf, progress=False))
    joints = json.loads((tmp_path / "o" / "summary.json").read_text())["joints"]
    assert set(joints["turn"]) == {"type", "torque_residual_Nm", "acceleration_residual_rad_s2", "external_torque_Nm"}
    assert set(joints["slide"]) == {"type", "torque_residual_N", "acceleration_residual_m_s2", "external_torque_N"}
    assert joints["slide"]["type"] == "prismatic" and joints["slide"]["torque_residual_N"]["count"] == 100
    rows = {line.split()[0]: line for line in report.table.splitlines()}
    assert "N m, rad/s^2" in rows["turn"] and " N, m/s^2 " in rows["slide"]
    assert figures.seen["torques.png"]["ylabels"] == ["turn\n[N m]", "slide\n[N]"]
    assert figures.seen["accelerations.png"]["ylabels"] == ["turn\n[rad/s^2]", "slide\n[m/s^2]"]
    assert figures.seen["external_torque.png"]["ylabels"] == ["turn\n[N m]", "slide\n[N]"]


# --------------------------------------------------------------- 10. plots of real bags


def test_plots_share_the_time_axis_name_commands_and_drop_zero_gravity(tmp_path, model, monkeypatch):
    q, qd, effort = ur5_motion(model, seconds=1.0)
    late = [(T0 + 500_000_000 + k * 20_000_000, np.arange(model.n) + 0.1 * k) for k in range(25)]  # from 0.5 s
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, effort, arrays={"/cmd": late})
    figures = Figures(monkeypatch)
    replay([bag], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, effort_topic="/cmd",
                                gravity=(0.0, 0.0, 0.0)))
    assert set(figures.seen) == {"torques.png", "torque_residuals.png", "accelerations.png", "external_torque.png"}
    end = (len(q) - 1) / RATE
    for fig in figures.seen.values():  # the residual exists from 0.5 s only, its axis still starts at 0
        assert all(lim == pytest.approx((0.0, end)) for lim in fig["xlims"])
        # the first panel's curves, then the threshold and event kinds (external torque)
        assert fig["legend"][:len(fig["curves"][0])] == fig["curves"][0] and len(fig["legend"]) >= 1
    torques = figures.seen["torques.png"]
    assert torques["legend"] == ["commanded", "RNEA (feedforward)"]  # no flat gravity line
    assert torques["title"] == "Commanded effort vs inverse dynamics"
    assert figures.seen["torque_residuals.png"]["title"].startswith("Residual: commanded - RNEA")  # + a clipping note

    with_gravity = Figures(monkeypatch)  # gravity on, JointState efforts: "measured" and the gravity curve
    replay([bag], ReplayOptions(out=tmp_path / "o2", urdf=ur5_urdf(), progress=False))
    assert with_gravity.seen["torques.png"]["legend"] == ["measured", "RNEA (feedforward)", "gravity"]


def test_time_window(tmp_path, model, monkeypatch, capsys):
    q, qd, effort = ur5_motion(model, seconds=1.0)
    bag = write_states(tmp_path / "in", model.joint_names, q, qd, effort)
    full = replay([bag], ReplayOptions(out=tmp_path / "full", urdf=ur5_urdf(), progress=False, plots=False))
    figures = Figures(monkeypatch)
    code, out, _ = run_cli(capsys, bag, "--out", tmp_path / "win", "--urdf", ur5_urdf(), "--start", "0.25",
                           "--end", "0.5")
    assert code == 0 and "skipped samples: outside_window=149" in out
    summary = json.loads((tmp_path / "win" / "summary.json").read_text())
    assert summary["processed"] == 51  # samples 50..100 at 200 Hz
    stamps = np.loadtxt(tmp_path / "win" / "feedforward_torque.csv", delimiter=",", skiprows=1, usecols=0,
                        dtype=np.int64)
    assert stamps.tolist() == [T0 + k * 5_000_000 for k in range(50, 101)]
    # The window's torques are those of the full replay (its derivative saw the samples around it).
    ff_full = np.loadtxt(tmp_path / "full" / "feedforward_torque.csv", delimiter=",", skiprows=1)
    ff_win = np.loadtxt(tmp_path / "win" / "feedforward_torque.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(ff_win, ff_full[50:101])
    assert full.processed == 200
    assert figures.seen["torques.png"]["xlims"][0] == pytest.approx((0.25, 0.5))
    code, _, err = run_cli(capsys, bag, "--out", tmp_path / "bad", "--urdf", ur5_urdf(), "--start", "2", "--end", "1")
    assert code == 2 and "--start 2.0 s is not before --end 1.0 s" in one_line_error(err)


def test_a_bag_given_twice_or_with_its_copy(tmp_path, model, capsys):
    q, qd, effort = ur5_motion(model)
    a = write_states(tmp_path / "run", model.joint_names, q, qd, effort)
    code, _, err = run_cli(capsys, a, tmp_path / "." / "run", "--out", tmp_path / "o", "--urdf", ur5_urdf())
    assert code == 2 and "is given twice" in one_line_error(err)
    import shutil

    copy = Path(shutil.copytree(a, tmp_path / "run_copy"))
    report = replay([a, copy], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, plots=False))
    assert report.skipped == {"non_increasing_stamp": len(q)} and report.processed == len(q)
    assert report.problems == [f"{len(q)} of {2 * len(q)} joint states were dropped because their stamps did not "
                               "increase: bags that hold the same samples (a copy given with its original) or "
                               "recordings whose clocks restart; give each recording once, and separate "
                               "recordings with --jobs N"]
