"""Identification on recordings simulated by MuJoCo (test/simulated.py) with known friction and payload.

The fit never sees the simulator's values: they are the damping, friction loss and welded payload
MuJoCo simulates, and the recorded effort is the torque MuJoCo's arm needed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.core import identification as ident
from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify
from liedyn_ros.pipeline.payload import dynamics_from
from liedyn_ros.replay.cli import main
from robots import urdf_text
from simulated import arm_urdf, simulate
from test_pipeline import read_ros_parameters

LINK = "panda_hand"
MASS, COM = 1.5, np.array([0.02, -0.01, 0.08])
I_COM = np.diag([0.004, 0.005, 0.003])


@pytest.fixture(scope="module")
def arm():
    """The Panda with its fingers welded, and MuJoCo's URDF of it with friction and a payload."""
    xml = re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"')
    model = core.load_urdf(xml)
    names = model.joint_names
    damping = dict(zip(names, 0.5 + 0.1 * np.arange(7)))
    friction = dict(zip(names, 1.0 + 0.2 * np.arange(7)))
    return model, arm_urdf(xml, damping, friction, (LINK, MASS, COM, I_COM)), damping, friction


def record(arm, seconds, seed, moving=None):
    model, sim, damping, friction = arm
    return simulate(sim, model.joint_names, model, seconds=seconds, seed=seed, moving=moving,
                    compensation=(np.array(list(friction.values())), np.array(list(damping.values()))))


def fit_arrays(problem, q, qd, qdd, effort):
    """identify() on arrays: the first 70% fit, the rest validate."""
    cut = int(0.7 * len(q))
    fit, val = NormalEquations(problem.model.n, problem.size), NormalEquations(problem.model.n, problem.size)
    fit.add(*problem.columns(q[:cut], qd[:cut], qdd[:cut], effort[:cut]))
    val.add(*problem.columns(q[cut:], qd[cut:], qdd[cut:], effort[cut:]))
    return identify(problem, fit, val)


def assert_recovered(result, damping, friction, rel, com_tol):
    f, p = result.friction, result.payload
    np.testing.assert_allclose(f.coulomb, list(friction.values()), rtol=rel)
    np.testing.assert_allclose(f.viscous, list(damping.values()), rtol=rel)
    assert p["mass"] == pytest.approx(MASS, rel=rel)
    assert np.linalg.norm(np.array(p["com"]) - COM) < com_tol


@pytest.fixture(scope="module")
def clean(arm):
    """A noise-free recording with MuJoCo's own accelerations."""
    return record(arm, 16.0, seed=1)


def test_noise_free_recording_gives_friction_and_payload(arm, clean):
    model, sim, damping, friction = arm
    rec = clean
    problem = IdentificationProblem(model, friction=True, payload_link=LINK)
    result = fit_arrays(problem, rec.q, rec.qd, rec.qdd, rec.effort)
    assert_recovered(result, damping, friction, rel=0.02, com_tol=0.005)
    assert not result.unexcited
    assert np.all(result.rms_after < 0.01 * result.rms_before)
    assert np.all(np.isfinite(result.std))


def test_noise_free_inertial_fit_gives_the_base_parameters_of_arm_and_payload(arm, clean):
    """All 70 parameters and friction at once: every base parameter the recording identifies
    equals that of the URDF with MuJoCo's payload merged into the hand."""
    model, sim, damping, friction = arm
    problem = IdentificationProblem(model, friction=True, inertia=True)
    result = fit_arrays(problem, clean.q, clean.qd, clean.qdd, clean.effort)
    truth = ident.with_payload(model, LINK, MASS, COM, I_COM[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]])
    bp = ident.base_parameters(model)
    known = result.identifiable[problem.slices["inertia"]]
    seen = np.array([np.all(known[np.abs(row) > 1e-12]) for row in bp.K])
    assert seen.sum() >= 15
    np.testing.assert_allclose(bp.of(result.parameters)[seen], bp.of(ident.parameters(truth))[seen], atol=1e-5)
    np.testing.assert_allclose(result.friction.coulomb, list(friction.values()), rtol=1e-4)
    assert np.all(np.linalg.eigvalsh(ident.pseudo_inertia(result.parameters.reshape(-1, 10)))[:, 0] > -1e-9)


def test_two_joint_recording_stays_consistent_and_says_what_it_misses(arm):
    """Only joints 2 and 4 move: the full inertial fit keeps every body physically consistent and
    reports the parameters (and friction of the joints at rest) it cannot identify."""
    model, sim, damping, friction = arm
    moving = model.joint_names[1:4:2]
    rec = record(arm, 6.0, seed=2, moving=moving)
    problem = IdentificationProblem(model, friction=True, inertia=True)
    result = fit_arrays(problem, rec.q, rec.qd, rec.qdd, rec.effort)
    pi = result.parameters.reshape(-1, 10)
    assert np.all(pi[:, 0] > 0)
    assert np.all(np.linalg.eigvalsh(ident.pseudo_inertia(pi))[:, 0] > -1e-7)
    assert len(result.unexcited) > 10
    labels = dict(zip(problem.labels, result.identifiable))
    assert not labels[f"{model.joint_names[0]}.coulomb"] and not labels["panda_link7.m"]
    assert labels[f"{moving[0]}.viscous"]
    still = [j for j, name in enumerate(model.joint_names) if name not in moving]
    assert np.all(np.isnan(result.rms_after[still]))  # no moving rows to validate them on
    assert np.all(result.rms_after[[1, 3]] < result.rms_before[[1, 3]])


def write_joint_states(path: Path, rec, q, qd, effort) -> Path:
    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    with Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for k, stamp in enumerate((1_700_000_000 + rec.t) * 1e9):
            sec, nsec = divmod(int(round(stamp)), 1_000_000_000)
            msg = t["sensor_msgs/msg/JointState"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec),
                                                frame_id=""),
                name=list(rec.joint_names), position=q[k], velocity=qd[k], effort=effort[k])
            writer.write(conn, sec * 1_000_000_000 + nsec, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
    return path


def test_replay_identifies_a_noisy_recording(arm, tmp_path):
    """1% effort noise, 17-bit encoders with velocities differenced from them, accelerations
    estimated by the replay: friction within 10%, payload mass within 10%, centre of mass 10 mm."""
    model, sim, damping, friction = arm
    rec = record(arm, 16.0, seed=3)
    rng = np.random.default_rng(4)
    step = 2 * np.pi / 2**17
    q = np.round(rec.q / step) * step
    qd = np.gradient(q, rec.t, axis=0)
    effort = rec.effort + 0.01 * rng.standard_normal(rec.effort.shape) * np.sqrt((rec.effort ** 2).mean(0))
    bag = write_joint_states(tmp_path / "bag", rec, q, qd, effort)
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"'))
    out = tmp_path / "out"
    assert main([str(bag), "--out", str(out), "--urdf", str(urdf), "--no-progress", "--identify", "friction",
                 "--identify", "payload", LINK]) == 0
    section = json.loads((out / "summary.json").read_text())["identification"]
    params = section["node_parameters"]
    np.testing.assert_allclose(params["friction_coulomb"], list(friction.values()), rtol=0.1)
    np.testing.assert_allclose(params["friction_viscous"], list(damping.values()), rtol=0.1)
    assert params["payload_mass"] == pytest.approx(MASS, rel=0.1)
    assert np.linalg.norm(np.array(params["payload_com"]) - COM) < 0.01
    assert all(section["validation_rms_after"][j] < section["validation_rms_before"][j] for j in model.joint_names)
    assert section["validation_worse"] == [] and section["unidentifiable_directions"] == []
    assert all(p["std"] is not None and p["std"] > 0 for p in section["parameters"])
    # the node's parameter file, read as the node's config files are read in test_pipeline
    text = (out / "identified.yaml").read_text()
    assert text.splitlines()[1:3] == ["/**:", "  ros__parameters:"] and (out / "identification.png").is_file()
    values = read_ros_parameters(out / "identified.yaml")
    assert values == params
    loaded = dynamics_from(model, values | {"friction_compensation": True})
    np.testing.assert_allclose(loaded.friction.coulomb, params["friction_coulomb"])
    assert loaded.model.mass == pytest.approx(model.mass + params["payload_mass"])


def test_replay_params_apply_payload_and_friction_and_identify_replaces_the_payload(arm, tmp_path):
    """--params with a payload and friction compensation: the replay's feedforward is the payload
    model's rnea plus the friction torque; --identify payload then fits the whole payload again."""
    model, sim, damping, friction = arm
    rec = record(arm, 4.0, seed=5)
    bag = write_joint_states(tmp_path / "bag", rec, rec.q, rec.qd, rec.effort)
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"'))
    I = I_COM[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]].tolist()
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n"
                      f"    payload_link: {LINK}\n    payload_mass: 0.5\n    payload_com: {COM.tolist()}\n"
                      f"    payload_inertia: {I}\n    friction_compensation: true\n"
                      f"    friction_coulomb: {[float(f) for f in friction.values()]}\n    friction_viscous: [0.5]\n")
    out = tmp_path / "out"
    assert main([str(bag), "--out", str(out), "--urdf", str(urdf), "--no-progress", "--no-plots",
                 "--params", str(params), "--identify", "payload", LINK, "--identify", "friction"]) == 0
    tau = np.loadtxt(out / "feedforward_torque.csv", delimiter=",", skiprows=1)[:, 1:]
    qdd = np.loadtxt(out / "estimated_acceleration.csv", delimiter=",", skiprows=1)[:, 1:]
    held = ident.with_payload(model, LINK, 0.5, COM, I)
    qd = rec.qd[:len(tau)]
    want = core.rnea(held, rec.q[:len(tau)], qd, qdd) + np.array(list(friction.values())) * np.tanh(qd / 0.01) + 0.5 * qd
    np.testing.assert_allclose(tau, want, rtol=1e-9, atol=1e-9)
    section = json.loads((out / "summary.json").read_text())["identification"]
    assert section["node_parameters"]["payload_mass"] == pytest.approx(MASS, rel=0.1)  # the whole 1.5 kg, not 1.0
