"""Excitation design (core.identification.excitation) and its trajectory files.

Limits are checked by an evaluation independent of the design's bounds: the Fourier series
written out here, on a grid 40x finer than the design's, with Pinocchio's rnea for the efforts.
The number of base columns is checked against the rank of Pinocchio's regressor.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from liedyn_ros import core, excite_cli
from liedyn_ros.core.identification.excitation import (FourierTrajectory, condition_number, design_excitation,
                                                        excitation_limits, excitation_problem, random_fourier,
                                                        violations)
from liedyn_ros.core.identification.excitation.files import TrajectoryRefused, load_trajectory, write_trajectory

from robots import urdf_text

ROOT = Path(__file__).resolve().parents[1]


def _link(name, mass, com, inertia):
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass}"/>'
            f'<inertia ixx="{inertia[0]}" ixy="0.001" ixz="0" iyy="{inertia[1]}" iyz="0" izz="{inertia[2]}"/>'
            "</inertial></link>")


def _joint(name, parent, child, xyz, axis, effort):
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}"/><axis xyz="{axis}"/>'
            f'<limit lower="-2.0" upper="1.5" velocity="2.0" effort="{effort}"/></joint>')


# A 3-DoF arm (yaw, shoulder, elbow) with limits; the shoulder's effort limit is low enough to bind.
ARM3 = ('<robot name="arm3"><link name="world"/>'
        + _link("l1", 2.0, "0.01 0 0.1", (0.02, 0.02, 0.01)) + _link("l2", 1.5, "0.2 0.02 0", (0.01, 0.03, 0.03))
        + _link("l3", 1.0, "0.15 0 0.01", (0.005, 0.02, 0.02))
        + _joint("yaw", "world", "l1", "0 0 0", "0 0 1", 20) + _joint("shoulder", "l1", "l2", "0 0 0.2", "0 1 0", 12)
        + _joint("elbow", "l2", "l3", "0.4 0 0", "0 1 0", 20) + "</robot>")


@pytest.fixture(scope="module")
def arm3():
    model = core.load_urdf(ARM3)
    limits = excitation_limits(model, acceleration=4.0, velocity_scale=0.6, effort_scale=1.0)
    problem = excitation_problem(model, model.joint_names, limits, period=6.0, harmonics=3)
    return problem, design_excitation(problem, restarts=1, baselines=8, maxiter=40)


def _dense(traj: FourierTrajectory, t: np.ndarray):
    """q, qd, qdd of the series written out from its definition (not FourierTrajectory.derivatives)."""
    q = np.tile(traj.q_hold, (t.size, 1))
    qd, qdd = np.zeros_like(q), np.zeros_like(q)
    for k, j in enumerate(traj.joints):
        q[:, j] = traj.q0[k]
        for l in range(1, traj.harmonics + 1):
            w = traj.w_f * l
            a, b = traj.a[k, l - 1], traj.b[k, l - 1]
            q[:, j] += a / w * np.sin(w * t) - b / w * np.cos(w * t)
            qd[:, j] += a * np.cos(w * t) + b * np.sin(w * t)
            qdd[:, j] += -a * w * np.sin(w * t) + b * w * np.cos(w * t)
    return q, qd, qdd


def _pinocchio_torques(xml, names, q, qd, qdd):
    pm = pin.buildModelFromXML(xml)
    data = pm.createData()
    idx = [list(pm.names).index(j) - 1 for j in names]
    out = np.empty_like(q)
    for k in range(len(q)):
        x = [np.zeros(pm.nq) for _ in range(3)]
        for arr, src in zip(x, (q[k], qd[k], qdd[k])):
            arr[idx] = src
        out[k] = pin.rnea(pm, data, *x)[idx]
    return out


def test_limits_hold_along_the_trajectory(arm3):
    problem, result = arm3
    traj, lim = result.trajectory, problem.limits
    t = np.linspace(0.0, problem.period, 40 * problem.effort_samples + 1)
    q, qd, qdd = _dense(traj, t)
    tau = _pinocchio_torques(ARM3, problem.model.joint_names, q, qd, qdd)
    assert np.all((q >= lim.lower) & (q <= lim.upper))
    assert np.all(np.abs(qd) <= lim.velocity) and np.all(np.abs(qdd) <= lim.acceleration)
    assert np.all(np.abs(tau) <= lim.effort)
    # the limits are used, not avoided: the binding ones are nearly reached
    use = np.max([np.abs(qd).max(0) / lim.velocity, np.abs(qdd).max(0) / lim.acceleration,
                  np.abs(tau).max(0) / lim.effort], axis=0)
    assert use.max() > 0.8
    assert violations(problem, traj) == []
    # starts and ends (after whole periods) at rest
    _, qd0, qdd0 = _dense(traj, np.array([0.0, 2 * problem.period]))
    np.testing.assert_allclose(np.r_[qd0, qdd0], 0.0, atol=1e-12)


def test_design_beats_random_and_single_sine(arm3):
    problem, result = arm3
    assert result.condition_number * 3 < np.median(result.random_condition_numbers)
    assert result.condition_number < result.single_sine_condition_number
    # the reported number is the trajectory's own, recomputed on a finer grid
    assert condition_number(problem, result.trajectory, samples=10 * problem.samples) == pytest.approx(
        result.condition_number, rel=0.05)


def test_effort_limit_binds_and_holds():
    """With an effort limit below what the kinematic limits would reach, the design shrinks to it."""
    model = core.load_urdf(ARM3)
    loose = excitation_limits(model, acceleration=4.0, velocity_scale=0.6, effort_scale=1.0)
    problem = excitation_problem(model, model.joint_names, loose, period=6.0, harmonics=3)
    free = random_fourier(problem, np.random.default_rng(3))
    q, qd, qdd = _dense(free, np.linspace(0, 6.0, 2000))
    peak = np.abs(_pinocchio_torques(ARM3, model.joint_names, q, qd, qdd)).max(0)
    tight = type(loose)(loose.lower, loose.upper, loose.velocity, loose.acceleration,
                        np.minimum(loose.effort, 0.9 * peak))
    problem = excitation_problem(model, model.joint_names, tight, period=6.0, harmonics=3)
    traj = random_fourier(problem, np.random.default_rng(3))
    t = np.linspace(0, 6.0, 20000)
    tau = _pinocchio_torques(ARM3, model.joint_names, *_dense(traj, t))
    assert np.all(np.abs(tau) <= tight.effort)
    assert np.max(np.abs(tau) / tight.effort) > 0.7


def test_base_columns_are_pinocchios_rank():
    """Base columns of the Panda's inertia (all joints, then joints 2 and 4 only): as many as the rank of
    Pinocchio's stacked joint-torque regressor on the same kind of motion."""
    xml = re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"')
    model = core.load_urdf(xml)
    limits = excitation_limits(model)
    pm = pin.buildModelFromXML(xml)
    data = pm.createData()
    rng = np.random.default_rng(1)
    for moving in (list(model.joint_names), ["panda_joint2", "panda_joint4"]):
        problem = excitation_problem(model, moving, limits, period=10.0, identify=("inertia",))
        rows = [model.joint_names.index(j) for j in moving]
        W = []
        for _ in range(150):
            q, v, a = problem.q_hold.copy(), np.zeros(model.n), np.zeros(model.n)
            q[rows] = rng.uniform(limits.lower[rows], limits.upper[rows])
            v[rows], a[rows] = rng.standard_normal((2, len(rows)))
            W.append(pin.computeJointTorqueRegressor(pm, data, q, v, a)[rows])
        s = np.linalg.svd(np.vstack(W), compute_uv=False)
        assert len(problem.columns) == int(np.sum(s > 1e-9 * s[0]))


def test_single_moving_joint_and_held_pose():
    model = core.load_urdf(ARM3)
    limits = excitation_limits(model, acceleration=4.0)
    hold = np.array([0.3, -0.5, 0.7])
    problem = excitation_problem(model, ["elbow"], limits, period=5.0, harmonics=2, q_hold=hold,
                                 identify=("inertia", "friction"))
    result = design_excitation(problem, restarts=1, baselines=3, maxiter=10)
    q, _, _ = result.trajectory.derivatives(np.linspace(0, 5, 50), 2)
    np.testing.assert_array_equal(q[:, :2], np.tile(hold[:2], (50, 1)))
    assert np.ptp(q[:, 2]) > 0.1
    with pytest.raises(ValueError, match="unknown joints"):
        excitation_problem(model, ["wrist"], limits, period=5.0)
    with pytest.raises(ValueError, match="held outside"):
        excitation_problem(model, ["elbow"], limits, period=5.0, q_hold=[3.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="payload"):
        excitation_problem(model, ["elbow"], limits, period=5.0, identify=("payload",))


# ---------------------------------------------------------------------------------------- files


@pytest.fixture(scope="module")
def written(arm3, tmp_path_factory):
    out = tmp_path_factory.mktemp("excite")
    paths = write_trajectory(out, arm3[1], periods=2, rate=10.0, csv_rate=50.0, approach=2.0)
    return arm3[0], paths


def test_yaml_is_a_joint_trajectory(written):
    problem, paths = written
    msg = yaml.safe_load(paths["yaml"].read_text())  # as ros2 topic pub reads it
    assert set(msg) == {"header", "joint_names", "points"}
    assert msg["header"] == {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": ""}
    assert msg["joint_names"] == list(problem.model.joint_names)
    assert len(msg["points"]) == 2 * 6 * 10 + 1
    for point in msg["points"]:
        assert set(point) == {"positions", "velocities", "accelerations", "effort", "time_from_start"}
        assert all(len(point[k]) == 3 and all(isinstance(x, float) for x in point[k])
                   for k in ("positions", "velocities", "accelerations"))
        assert set(point["time_from_start"]) == {"sec", "nanosec"}
        assert all(type(v) is int for v in point["time_from_start"].values())
    first = msg["points"][0]["time_from_start"]
    assert first["sec"] + first["nanosec"] * 1e-9 == pytest.approx(2.0)
    # the points are the trajectory's samples; the CSV holds the same trajectory at 50 Hz
    t = np.arange(len(msg["points"])) / 10.0
    q, _, _ = _dense(_design_of(written), t)
    np.testing.assert_allclose([p["positions"] for p in msg["points"]], q, atol=1e-12)
    csv = np.loadtxt(paths["csv"], delimiter=",", skiprows=1)
    header = paths["csv"].read_text().splitlines()[0].split(",")
    assert header[:2] == ["t", "q.yaw"] and len(header) == 1 + 3 * 3
    np.testing.assert_allclose(csv[:, 1:4], _dense(_design_of(written), csv[:, 0])[0], atol=1e-9)


def _design_of(written):
    """The written design's Fourier series, from design.json."""
    d = json.loads(written[1]["design"].read_text())["fourier"]
    problem = written[0]
    return FourierTrajectory(problem.moving, np.array(d["q_hold"]), np.array(d["q0"]), np.array(d["a"]),
                             np.array(d["b"]), d["w_f"])


def test_written_file_loads(written):
    problem, paths = written
    sampled = load_trajectory(paths["yaml"], problem.model, problem.limits)
    assert sampled.q.shape == (121, 3) and sampled.t[0] == pytest.approx(2.0)


def _tamper(paths, tmp_path, edit):
    msg = yaml.safe_load(paths["yaml"].read_text())
    edit(msg)
    path = tmp_path / "tampered.yaml"
    path.write_text(yaml.safe_dump(msg, default_flow_style=None, width=1 << 16))
    return path


def _set(point, key, joint, value):
    def edit(msg):
        msg["points"][point][key][joint] = value
    return edit


@pytest.mark.parametrize("edit, reason", [
    (_set(30, "positions", 1, 1.7), "position 1.7 outside its limit"),
    (_set(30, "velocities", 0, 1.5), "velocity 1.5 outside its limit"),
    (_set(30, "accelerations", 2, -9.0), "acceleration -9 outside its limit"),
    (_set(30, "positions", 0, float("nan")), "positions.* nan|position is nan"),
    (_set(0, "velocities", 1, 0.2), "not at rest"),
    (_set(-1, "accelerations", 1, 0.5), "not at rest"),
    # a jump that stays within the position range: the controller's quintic would be too fast
    (lambda msg: msg["points"][40]["positions"].__setitem__(0, msg["points"][40]["positions"][0] + 0.4),
     "quintic takes yaw (velocity|acceleration)"),
    (lambda msg: msg["points"][41].__setitem__("time_from_start", msg["points"][40]["time_from_start"]),
     "point 41: time_from_start .* does not increase"),
    (lambda msg: msg["points"][5].__setitem__("time_from_start", {"sec": 1.5, "nanosec": 0}), "time_from_start must"),
    (lambda msg: msg.__setitem__("joint_names", ["yaw", "shoulder", "wrist"]), r"missing \['elbow'\]"),
    (lambda msg: msg.__setitem__("joint_names", ["yaw", "yaw", "elbow"]), "each of the model's joints once"),
    (lambda msg: msg["points"][3]["positions"].pop(), "positions must hold 3 numbers"),
    (lambda msg: msg["points"][3]["velocities"].__setitem__(0, "fast"), "not a number"),
    (lambda msg: msg.pop("points"), "not a JointTrajectory"),
])
def test_tampered_file_is_refused(written, tmp_path, edit, reason):
    problem, paths = written
    path = _tamper(paths, tmp_path, edit)
    with pytest.raises(TrajectoryRefused) as err:
        load_trajectory(path, problem.model, problem.limits)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert re.search(reason, message), message


def test_efforts_of_a_file_are_checked(written):
    """The same file against a lower effort limit (a heavier arm's URDF, say) is refused for its effort."""
    problem, paths = written
    lim = problem.limits
    lower = type(lim)(lim.lower, lim.upper, lim.velocity, lim.acceleration, lim.effort * 0.5)
    with pytest.raises(TrajectoryRefused, match="effort .* outside its limit .* between samples"):
        load_trajectory(paths["yaml"], problem.model, lower)


def test_garbage_is_refused(tmp_path, written):
    problem, _ = written
    path = tmp_path / "bad.yaml"
    path.write_text("points: [\n  - {positions: [1, 2")
    with pytest.raises(TrajectoryRefused, match="cannot be read as YAML"):
        load_trajectory(path, problem.model, problem.limits)


# ------------------------------------------------------------------------------ command line

PROBE = ("import atexit, sys\n"
         "atexit.register(lambda: print('loaded:', *[m for m in ('numpy', 'scipy', 'numba') if m in sys.modules], "
         "file=sys.stderr))\n"
         "from liedyn_ros.excite_cli import main\nsys.exit(main({argv!r}))\n")


def _cli(argv):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], env=env, text=True, capture_output=True,
                          timeout=300)


def test_cli_help_is_light_and_defaults_are_the_cores():
    proc = _cli(["--help"])
    assert proc.returncode == 0 and "usage: liedyn-excite" in proc.stdout
    assert proc.stderr.strip() == "loaded:"
    import inspect

    from liedyn_ros.core.identification.excitation import files

    lim = inspect.signature(excitation_limits).parameters
    assert (excite_cli.ACCELERATION, excite_cli.VELOCITY_SCALE, excite_cli.EFFORT_SCALE, excite_cli.POSITION_MARGIN) \
        == tuple(lim[k].default for k in ("acceleration", "velocity_scale", "effort_scale", "position_margin"))
    w = inspect.signature(files.write_trajectory).parameters
    assert (excite_cli.RATE, excite_cli.CSV_RATE, excite_cli.APPROACH) == tuple(
        w[k].default for k in ("rate", "csv_rate", "approach"))


def test_cli_checks_files(written, tmp_path, capsys):
    _, paths = written
    urdf = tmp_path / "arm3.urdf"
    urdf.write_text(ARM3)
    args = ["--urdf", str(urdf), "--max-acceleration", "4", "--velocity-scale", "0.6", "--effort-scale", "1"]
    assert excite_cli.main(args + ["--check", str(paths["yaml"])]) == 0
    assert "OK, 121 points" in capsys.readouterr().out
    bad = _tamper(paths, tmp_path, _set(30, "velocities", 0, 1.5))
    assert excite_cli.main(args + ["--check", str(bad)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("liedyn-excite: ") and "velocity 1.5 outside" in error


def test_payload_design():
    """--identify payload: the payload's columns on the chosen link; the design beats random on them."""
    model = core.load_urdf(ARM3)
    limits = excitation_limits(model, acceleration=4.0)
    problem = excitation_problem(model, model.joint_names, limits, period=6.0, harmonics=3, identify=("payload",),
                                 payload_link="l3")
    assert problem.labels and all(label.startswith("payload.") for label in problem.labels)
    result = design_excitation(problem, restarts=1, baselines=6, maxiter=20)
    assert result.condition_number < np.median(result.random_condition_numbers)
    assert violations(problem, result.trajectory) == []
