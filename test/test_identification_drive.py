"""Efforts that are not joint torques: motor currents through gear ratios and a coupled wrist, the
rotors' inertia (armature), their identification and the plausibility of the drive values.

References: MuJoCo (test/drive_sim.py: its actuators, tendons and armature turn the recorded
currents into motion, nothing of liedyn_ros), Pinocchio's armature (rnea, aba and crba with
model.armature) for the node's feedforward, predicted accelerations and observer momentum.
"""
from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from drive_sim import ARMATURE, COULOMB, K, K_DATASHEET, LINK, MASS, VISCOUS, G, simulate, ur5_arm
from liedyn_ros import core, pipeline
from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify
from liedyn_ros.pipeline.parameters import ParameterError, check_parameters, load_parameter_file
from liedyn_ros.pipeline.payload import dynamics_from
from liedyn_ros.replay.cli import main
from robots import urdf_text
from test_identification_fit import write_joint_states


@pytest.fixture(scope="module")
def arm():
    return ur5_arm()


@pytest.fixture(scope="module")
def recording(arm):
    """Five seconds of the UR5 driven by currents, all joints moving (MuJoCo's accelerations)."""
    return simulate(arm, seconds=5.0, seed=1)


def test_mujoco_turns_currents_into_the_joint_torques_the_drive_says(arm):
    """tau = G^T (k * e): MuJoCo's actuator forces (motors through gears and the wrist's tendons)
    equal Drive.joint_torque of the same currents, and Drive.effort inverts it."""
    mj = mujoco.MjModel.from_xml_string(arm.mjcf)
    data = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    drive = arm.drive()
    for _ in range(5):
        data.qpos[:], data.ctrl[:] = rng.uniform(-2, 2, 6), rng.uniform(-10, 10, 6)
        mujoco.mj_forward(mj, data)
        np.testing.assert_allclose(drive.joint_torque(data.ctrl), data.qfrc_actuator, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(drive.effort(data.qfrc_actuator), data.ctrl, rtol=1e-10)


def test_armature_in_feedforward_predictions_and_observer_equals_pinocchios(arm):
    """compute_outputs with the drive's armature: tau_ff = Pinocchio's rnea, qdd_pred = its aba
    (model.armature set), and the observer's momentum (M + diag(armature)) v from its crba."""
    xml = urdf_text("ur5")
    pm = pin.buildModelFromXML(xml)
    pm.armature = np.array(ARMATURE)
    pd = pm.createData()
    rng = np.random.default_rng(1)
    q, v, a, tau = (rng.uniform(-1.5, 1.5, (4, 6)) for _ in range(4))
    out = pipeline.compute_outputs(arm.model, q, v, a, tau, armature=np.array(ARMATURE))
    for k in range(4):
        np.testing.assert_allclose(out.tau_ff[k], pin.rnea(pm, pd, q[k], v[k], a[k]), atol=1e-10)
        np.testing.assert_allclose(out.qdd_pred[k], pin.aba(pm, pd, q[k], v[k], tau[k]), atol=1e-9)
    one = pipeline.compute_outputs(arm.model, q[0], v[0], a[0], tau[0], armature=np.array(ARMATURE))
    np.testing.assert_allclose(one.qdd_pred, out.qdd_pred[0], atol=1e-10)
    observer = core.MomentumObserver(arm.model, 50.0, armature=np.array(ARMATURE))
    p, _ = observer._momentum_terms(q[0], v[0], tau[0], None)
    np.testing.assert_allclose(p, pin.crba(pm, pd, q[0]) @ v[0], atol=1e-10)
    # the compiled single-sample step (the node's) equals the general path over the same samples
    t = np.array([0.0, 0.01, 0.02, 0.03])
    steps = np.array([observer.update(t[k], q[k], v[k], tau[k]) for k in range(4)])
    series = core.MomentumObserver(arm.model, 50.0, armature=np.array(ARMATURE)).series(t, q, v, tau)
    np.testing.assert_allclose(steps, series, atol=1e-9)
    plain = core.MomentumObserver(arm.model, 50.0).series(t, q, v, tau)
    assert np.abs(plain - series).max() > 1.0  # the armature's momentum is in it


def test_node_pipeline_converts_currents_and_swaps_the_drive_with_the_model(arm):
    """The node's path (DynamicsPipeline.on_joint_state, rclpy-shaped messages, reference source):
    feedforward and predicted accelerations equal Pinocchio's with the drive's armature, on the
    currents converted by the drive; after set_dynamics without a drive, the raw efforts and no
    armature."""
    from liedyn_ros.pipeline.payload import Dynamics
    from test_pipeline import rclpy_joint_state, trajectory

    pm = pin.buildModelFromXML(urdf_text("ur5"))
    pd = pm.createData()
    drive = arm.drive(armature=ARMATURE)
    names = list(arm.model.joint_names)
    config = pipeline.PipelineConfig(acceleration_source="reference")
    node = pipeline.DynamicsPipeline(arm.model, config, drive=drive)
    rng = np.random.default_rng(4)
    for k, armature in enumerate((np.array(ARMATURE), np.zeros(6))):
        q, qd, qdd, current = (rng.uniform(-1, 1, 6) for _ in range(4))
        stamp = (k + 1) * 10**9
        node.on_reference(trajectory(names, q, qd, qdd, stamp))
        out = node.on_joint_state(rclpy_joint_state(stamp, names, q, qd, current)).outputs
        pm.armature = armature
        tau = drive.joint_torque(current) if armature.any() else current
        np.testing.assert_allclose(out.tau_ff, pin.rnea(pm, pd, q, qd, qdd), atol=1e-10)
        np.testing.assert_allclose(out.qdd_pred, pin.aba(pm, pd, q, qd, tau), atol=1e-9)
        node.set_dynamics(Dynamics(arm.model, None))


def fit(problem, rec, tau):
    cut = int(0.7 * len(tau))
    part = [NormalEquations(6, problem.size) for _ in range(2)]
    part[0].add(*problem.columns(rec.q[:cut], rec.qd[:cut], rec.qdd[:cut], tau[:cut]))
    part[1].add(*problem.columns(rec.q[cut:], rec.qd[cut:], rec.qdd[cut:], tau[cut:]))
    return identify(problem, *part)


def assert_within(result, rel):
    np.testing.assert_allclose(result.drive.torque_constant, K, rtol=rel)
    np.testing.assert_allclose(result.drive.armature, ARMATURE, rtol=rel)
    np.testing.assert_allclose(result.friction.coulomb, COULOMB, rtol=rel)
    np.testing.assert_allclose(result.friction.viscous, VISCOUS, rtol=rel)
    assert result.payload["mass"] == pytest.approx(MASS, rel=rel)


def test_short_current_recording_gives_torque_constants_armature_friction_and_payload(arm, recording):
    """From the datasheet's torque constants (5-9% off) and currents with 0.5% noise: MuJoCo's
    torque constants, armature, friction and payload within 5%."""
    noisy = recording.effort + 0.005 * np.random.default_rng(2).standard_normal(recording.effort.shape) \
        * np.sqrt((recording.effort ** 2).mean(0))
    datasheet = arm.drive(K_DATASHEET)
    problem = IdentificationProblem(arm.model, friction=True, payload_link=LINK, armature=True, effort_scale=True,
                                    drive=datasheet)
    result = fit(problem, recording, datasheet.joint_torque(noisy))
    assert_within(result, 0.05)
    assert not result.unexcited and np.all(result.rms_after < 0.2 * result.rms_before)


def test_three_short_recordings_pooled_give_what_none_gives_alone(arm):
    """Shoulder and elbow moving, then the wrist, then all (held out to validate): alone, the first
    leaves the wrist's armature, constants and friction at the prior; pooled, all within 5%."""
    names = arm.model.joint_names
    recs = [simulate(arm, seconds=2.5, seed=10 + k, moving=m) for k, m in enumerate((names[:3], names[3:], None))]
    datasheet = arm.drive(K_DATASHEET)
    problem = IdentificationProblem(arm.model, friction=True, payload_link=LINK, armature=True, effort_scale=True,
                                    drive=datasheet)
    parts = []
    for rec in recs:
        parts.append(NormalEquations(6, problem.size))
        parts[-1].add(*problem.columns(rec.q, rec.qd, rec.qdd, datasheet.joint_torque(rec.effort)))
    alone = identify(problem, parts[0], parts[2])
    assert np.all(alone.drive.armature[3:] == 0.0) and np.all(alone.friction.coulomb[3:] == 0.0)
    parts[0].merge(parts[1])
    assert_within(identify(problem, parts[0], parts[2]), 0.05)


# -- the parameter file: written by the replay, loaded by node and replay, refused when implausible --


def params_file(path: Path, values: dict) -> Path:
    path.write_text("/**:\n  ros__parameters:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in values.items()))
    return path


def test_replay_converts_currents_identifies_the_drive_and_the_file_changes_the_feedforward(arm, recording, tmp_path):
    """A bag of currents replayed with the datasheet's drive (--params): identified.yaml holds the
    torque constants and armature within 5%; replayed with that file, the feedforward is the
    file's (rnea + armature * qdd + friction) and the residuals of torque, predicted acceleration
    (aba with the armature, on the efforts its constants convert) and the observer's external torque
    (its momentum with the armature) shrink more than tenfold."""
    bag = write_joint_states(tmp_path / "bag", recording, recording.q, recording.qd, recording.effort)
    urdf = tmp_path / "ur5.urdf"
    urdf.write_text(urdf_text("ur5"))
    out = tmp_path / "out"
    params = params_file(tmp_path / "datasheet.yaml", arm.parameters())
    assert main([str(bag), "--out", str(out), "--urdf", str(urdf), "--no-progress", "--no-plots", "--params",
                 str(params), "--identify", "friction", "--identify", "payload", LINK, "--identify", "armature",
                 "--identify", "effort_scale"]) == 0
    written = load_parameter_file(out / "identified.yaml", arm.model.joint_names).values
    np.testing.assert_allclose(written["effort_torque_constant"], K, rtol=0.05)
    np.testing.assert_allclose(written["armature"], ARMATURE, rtol=0.05)
    np.testing.assert_allclose(np.reshape(written["effort_transmission"], (6, 6)), G)
    assert written["payload_mass"] == pytest.approx(MASS, rel=0.05)
    again = tmp_path / "again"
    assert main([str(bag), "--out", str(again), "--urdf", str(urdf), "--no-progress", "--no-plots", "--params",
                 str(out / "identified.yaml")]) == 0
    tau = np.loadtxt(again / "feedforward_torque.csv", delimiter=",", skiprows=1)[:, 1:]
    qdd = np.loadtxt(again / "estimated_acceleration.csv", delimiter=",", skiprows=1)[:, 1:]
    q, qd = recording.q[:len(tau)], recording.qd[:len(tau)]
    held = core.identification.with_payload(arm.model, LINK, written["payload_mass"], written["payload_com"],
                                            written["payload_inertia"])
    friction = core.identification.Friction(*(np.array(written[f"friction_{k}"]) for k in ("coulomb", "viscous",
                                                                                            "offset")))
    want = (core.rnea(held, q, qd, qdd) + np.array(written["armature"]) * qdd
            + core.identification.friction_torque(friction, qd))
    np.testing.assert_allclose(tau, want, rtol=1e-9, atol=1e-9)
    measured = json.loads((again / "summary.json").read_text())
    datasheet = json.loads((out / "summary.json").read_text())
    for joint in arm.model.joint_names:  # the file explains the currents, and predicts the motion, far better
        for key in ("torque_residual_Nm", "acceleration_residual_rad_s2", "external_torque_Nm"):
            assert measured["joints"][joint][key]["rms"] < 0.1 * datasheet["joints"][joint][key]["rms"]


@pytest.fixture(scope="module")
def short_bag(arm, tmp_path_factory):
    """(bag, URDF file) of 50 ms of currents."""
    tmp = tmp_path_factory.mktemp("short")
    urdf = tmp / "ur5.urdf"
    urdf.write_text(urdf_text("ur5"))
    rec = simulate(arm, seconds=0.05, seed=3)
    return write_joint_states(tmp / "bag", rec, rec.q, rec.qd, rec.effort), urdf


@pytest.mark.parametrize("values, words", [
    ({"effort_gear_ratio": [100.0, 100.0, 0.0, 80.0, 50.0, 50.0]},
     "effort_gear_ratio: 0 for ['elbow_joint'] must be nonzero"),
    ({"effort_torque_constant": [0.0]}, "effort_torque_constant: 0 for"),
    ({"effort_torque_constant": [1e9]}, "shoulder_pan_joint: effort_torque_constant 1e+09 is outside"),
    ({"effort_transmission": [1.0] * 36}, "effort_transmission: singular"),
    ({"effort_transmission": [1.0] * 35}, "expected 6 x 6 = 36 values"),
    ({"effort_offset": [0.0, 0.0, 0.0, 0.0, 0.0, 500.0]},
     "wrist_3_joint: effort_offset 500 exceeds the effort limit 28"),
    ({"armature": [0.0, 0.0, 0.0, 0.0, 0.0, 1e4]},
     "wrist_3_joint: armature 1e+04 exceeds 10 x the largest diagonal entry of the URDF's mass matrix"),
    ({"friction_coulomb": [1e4], "friction_compensation": True}, "shoulder_pan_joint: friction torque 1e+04"),
])
def test_tampered_file_is_refused_with_its_reason_at_load(arm, short_bag, tmp_path, values, words, capsys):
    """identified.yaml with one value changed: the node's rule (dynamics_from after
    check_parameters, as the node's validation runs them) and the replay's --params refuse it."""
    path = params_file(tmp_path / "tampered.yaml", arm.parameters(K) | {"armature": list(ARMATURE)} | values)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("[", r"\[").replace("+", r"\+")):
        dynamics_from(arm.model, load_parameter_file(path, arm.model.joint_names).values)
    bag, urdf = short_bag
    assert main([str(bag), "--out", str(tmp_path / "out"), "--urdf", str(urdf), "--no-progress", "--no-plots",
                 "--params", str(path)]) == 2
    assert words in capsys.readouterr().err


def test_armature_bound_is_ten_times_the_largest_diagonal_of_pinocchios_mass_matrix(arm):
    """At the middle of the joint ranges (the UR5's: all zero)."""
    pm = pin.buildModelFromXML(urdf_text("ur5"))
    largest = pin.crba(pm, pm.createData(), (pm.lowerPositionLimit + pm.upperPositionLimit) / 2).diagonal().max()
    drive = core.identification.Drive.of
    assert core.identification.implausible(arm.model, drive=drive(6, armature=[0.0] * 5 + [9.99 * largest])) == []
    refused = core.identification.implausible(arm.model, drive=drive(6, armature=[0.0] * 5 + [10.01 * largest]))
    assert len(refused) == 1 and refused[0].endswith(f"mass matrix, {largest:.4g} at the middle of the joint ranges")


def test_negative_armature_and_armature_with_contacts_are_refused_by_the_parameter_rule(arm):
    with pytest.raises(ParameterError, match="armature: -0.1 for joint elbow_joint must be >= 0"):
        check_parameters({"armature": [0.0, 0.0, -0.1, 0.0, 0.0, 0.0]}, arm.model.joint_names)
    with pytest.raises(ParameterError, match="armature: not supported together with contact_links"):
        check_parameters({"armature": [0.1], "contact_links": ["wrist_3_link"]}, arm.model.joint_names)


def test_identified_torque_constant_far_from_the_replayed_one_is_not_written(arm, recording):
    """A recording whose efforts are milliamperes read as amperes: the fit finds constants 1000x
    off the datasheet's, a unit mistake, and the file is refused when written."""
    from liedyn_ros.replay.identify import Identifier

    milli = arm.drive(np.array(K_DATASHEET) * 1e3)
    problem = IdentificationProblem(arm.model, friction=True, effort_scale=True, drive=milli)
    identifier = Identifier(problem, arm.model, split_ns=int(3.5e9))
    block = type("Block", (), {"q": recording.q, "v": recording.qd, "effort": milli.joint_torque(recording.effort),
                               "base_pose": None, "stamp_ns": (recording.t * 1e9).astype(np.int64)})
    identifier.add(block, recording.qdd)
    section, files = identifier.finish(Path("/nonexistent"), plots=False)
    assert files == [] and "effort_torque_constant" in section["error"] and "x the 100 the recording was replayed" \
        in section["error"]
