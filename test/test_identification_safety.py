"""Identification a robot can trust (issue 21's defects): what a recording never excites keeps its
prior exactly, implausible values are refused when written and when loaded, the file written
switches on the friction it identified, predictions take that friction off the efforts, the split
follows --start/--end, and too few moving samples are said early with the counts.

Recordings: MuJoCo (test/simulated.py, an independent simulator) for the fits whose values are
checked; the robot's own rnea plus friction (`synthetic`) where only the replay's bookkeeping is.
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from liedyn_ros import core, pipeline
from liedyn_ros.core import identification as ident
from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify
from liedyn_ros.pipeline.payload import dynamics_from
from liedyn_ros.replay.cli import main
from liedyn_ros.robot_data import robots_dir
from robots import urdf_text
from simulated import Recording
from test_identification_fit import arm, fit_arrays, record, write_joint_states  # noqa: F401 (arm: a fixture)

PANDA = re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"')
FRICTION = 1.0 + 0.2 * np.arange(7)  # test_identification_fit's simulated Coulomb friction
DAMPING = 0.5 + 0.1 * np.arange(7)


def synthetic(model, seconds: float, rate: float = 250.0, scale=1.0, seed: int = 0,
              friction: tuple[np.ndarray, np.ndarray] = (FRICTION, DAMPING)) -> Recording:
    """Sums of sines (amplitude `scale` per joint, times a third of the joint's range) with
    effort = rnea + friction (Coulomb, viscous; test_identification_fit's by default): a recording
    for the replay's bookkeeping."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 1.0 / rate)
    n = model.n
    lo = np.where(np.isfinite(model.lower), model.lower, -np.pi)  # a continuous joint: a turn
    hi = np.where(np.isfinite(model.upper), model.upper, np.pi)
    mid, span = (lo + hi) / 2, (hi - lo) / 2
    w = 2 * np.pi * rng.uniform(0.1, 0.5, (n, 3))
    amp = rng.uniform(0.2, 0.5, (n, 3)) * (span * np.broadcast_to(scale, n) / 3)[:, None]
    phase = rng.uniform(0, 2 * np.pi, (n, 3))
    arg = w * t[:, None, None] + phase
    q = mid + (amp * np.sin(arg)).sum(-1)
    qd = (amp * w * np.cos(arg)).sum(-1)
    qdd = -(amp * w * w * np.sin(arg)).sum(-1)
    effort = core.rnea(model, q, qd, qdd) + friction[0] * np.tanh(qd / 0.01) + friction[1] * qd
    return Recording(t, q, qd, qdd, effort, tuple(model.joint_names))


@pytest.fixture(scope="module")
def panda():
    return core.load_urdf(PANDA)


def write_urdf(tmp_path: Path, text: str = PANDA) -> Path:
    path = tmp_path / "arm.urdf"
    path.write_text(text)
    return path


def bag_of(tmp_path: Path, rec: Recording, name: str = "bag") -> Path:
    return write_joint_states(tmp_path / name, rec, rec.q, rec.qd, rec.effort)


def replay(bag: Path, urdf: Path, out: Path, *extra: str) -> int:
    return main([str(bag), "--out", str(out), "--urdf", str(urdf), "--no-progress", "--no-plots", *extra])


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


# -- unexcited parameters keep the prior exactly -------------------------------------------------


def test_still_joints_of_an_arm_and_the_link_only_they_carry_keep_the_prior_exactly(arm) -> None:  # noqa: F811
    """A Panda with only joints 2 and 4 moving (MuJoCo): friction and all inertias fitted. The still
    joints' friction stays exactly zero (it was 6.8-1,272 N m), link 1 (carried by joint 1 alone)
    keeps its URDF parameters exactly (it lost 80% of its mass), and the values are plausible."""
    model = arm[0]
    moving = model.joint_names[1:4:2]
    rec = record(arm, 6.0, seed=2, moving=moving)
    problem = IdentificationProblem(model, friction=True, inertia=True)
    result = fit_arrays(problem, rec.q, rec.qd, rec.qdd, rec.effort)
    still = [j for j, name in enumerate(model.joint_names) if name not in moving]
    f = result.friction
    for values in (f.coulomb, f.viscous, f.offset):
        assert np.all(values[still] == 0.0)
    pi0 = ident.parameters(model).reshape(-1, 10)
    pi = result.parameters.reshape(-1, 10)
    np.testing.assert_array_equal(pi[0], pi0[0])  # panda_link1
    assert result.at_prior[problem.slices["inertia"]][:10].all()
    assert all(p in " ".join(result.unexcited) for p in ("panda_link1.m", f"{model.joint_names[0]}.coulomb"))
    np.testing.assert_allclose(f.coulomb[[1, 3]], FRICTION[[1, 3]], rtol=1e-3)
    assert ident.implausible(model, friction=f, inertial_parameters=result.parameters) == []


def test_mobile_manipulator_still_wheels_and_head_keep_the_prior_exactly() -> None:
    """TIAGo (example-robot-data, wheels as joints): torso and arm move, wheels and head do not.
    Wheel and head friction stay exactly zero (4,569-11,074 N m before) and the wheels' bodies
    their URDF parameters (242 kg per wheel before); the robot's mass stays its URDF's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", core.URDFWarning)
        model = core.load_urdf(str(robots_dir() / "tiago_description/robots/tiago_no_hand.urdf"))
    names = model.joint_names
    still = np.array([j.startswith(("wheel", "head")) for j in names])
    limit = np.minimum(model.effort_limit, 50.0)
    rec = synthetic(model, 6.0, scale=np.where(still, 0.0, 1.0), seed=3, friction=(0.05 * limit, 0.02 * limit))
    problem = IdentificationProblem(model, friction=True, inertia=True)
    result = fit_arrays(problem, rec.q, rec.qd, rec.qdd, rec.effort)
    f = result.friction
    assert np.all(np.stack([f.coulomb, f.viscous, f.offset])[:, still] == 0.0)
    wheels = [model.body_names.index(b) for b in ("wheel_right_link", "wheel_left_link")]
    pi, pi0 = result.parameters.reshape(-1, 10), ident.parameters(model).reshape(-1, 10)
    np.testing.assert_array_equal(pi[wheels], pi0[wheels])
    x, fixed = result.x, result.at_prior
    assert np.all(x[fixed] == 0.0) and fixed.sum() >= 2 * 10 + 5 * 3
    assert pi[:, 0].sum() == pytest.approx(pi0[:, 0].sum(), rel=0.05)
    assert ident.implausible(model, friction=f, inertial_parameters=result.parameters) == []


# -- implausible values refused, when written and when loaded ---------------------------------------


@pytest.mark.parametrize(("values", "words"), [
    ({"friction_coulomb": [0.0] * 6 + [1e4]}, ["panda_joint7", "effort limit 12"]),
    ({"friction_viscous": [0.0, 0.0, 0.0, 0.0, 0.0, 1e3, 0.0]}, ["panda_joint6", "velocity limit 2.61"]),
    ({"friction_coulomb": [0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0]}, ["panda_joint2", "negative friction"]),
    ({"payload_link": "panda_hand", "payload_mass": 500.0}, ["payload_mass", "robot's"]),
])
def test_implausible_friction_and_payload_are_refused_by_the_node_rule(panda, values, words) -> None:
    """dynamics_from is what the node's parameter validation and its model build call (and the
    replay's --params): the refusal names the joint and the bound."""
    with pytest.raises(ValueError, match="implausible") as err:
        dynamics_from(panda, values)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_implausible_bodies_are_refused_by_the_node_rule(panda) -> None:
    pi = ident.parameters(panda)
    heavy = pi.copy()
    heavy[10:20] *= 5.0  # panda_link2 five times as heavy
    with pytest.raises(ValueError, match=r"panda_link2: mass .* outside \[1/3, 3\] x the URDF's"):
        dynamics_from(panda, {"inertial_parameters": heavy.tolist()})
    bent = pi.copy()
    bent[24] = 10.0  # panda_link3's I_xx alone: the triangle inequality broken
    with pytest.raises(ValueError, match="panda_link3: not a physical rigid body"):
        dynamics_from(panda, {"inertial_parameters": bent.tolist()})
    assert dynamics_from(panda, {"inertial_parameters": (pi * 1.2).tolist()}).model.mass == pytest.approx(1.2 * panda.mass)


def test_tampered_parameter_file_is_refused_by_the_replay_with_its_reason(panda, tmp_path, capsys) -> None:
    params = tmp_path / "identified.yaml"
    params.write_text("/**:\n  ros__parameters:\n    friction_compensation: true\n"
                      f"    friction_coulomb: {[1.0] * 6 + [1e4]}\n")
    bag = bag_of(tmp_path, synthetic(panda, 1.0))
    assert replay(bag, write_urdf(tmp_path), tmp_path / "out", "--params", str(params)) == 2
    message = capsys.readouterr().err
    assert "panda_joint7" in message and "exceeds the effort limit 12" in message and "implausible" in message


def test_implausible_fit_is_not_written(arm, tmp_path) -> None:  # noqa: F811
    """A URDF whose joint 7 delivers at most 1 N m, on a recording whose joint 7 has 2.2 N m of
    Coulomb friction: the fit is right and the URDF wrong, and identified.yaml is not written;
    summary.json says why, naming the joint and the bound."""
    rec = record(arm, 6.0, seed=4)
    lowered = re.sub(r'(<joint name="panda_joint7".*?<limit[^>]*effort=")[^"]*"', r'\g<1>1.0"', PANDA, flags=re.S)
    out = tmp_path / "out"
    assert replay(bag_of(tmp_path, rec), write_urdf(tmp_path, lowered), out, "--identify", "friction") == 2
    section = summary(out)["identification"]
    assert not (out / "identified.yaml").exists()
    assert "panda_joint7" in section["error"] and "effort limit 1" in section["error"]
    assert section["node_parameters"]["friction_coulomb"][6] == pytest.approx(2.2, rel=0.05)


# -- the file as written compensates what it identified -------------------------------------------------


def test_identified_file_as_written_compensates_friction_and_reduces_the_residual(arm, tmp_path) -> None:  # noqa: F811
    """Replaying with --params identified.yaml, untouched, shrinks the torque residual as much as the
    summary promised (friction_compensation is on in the file)."""
    rec = record(arm, 8.0, seed=6)
    bag, urdf = bag_of(tmp_path, rec), write_urdf(tmp_path)
    assert replay(bag, urdf, tmp_path / "fit", "--identify", "friction", "--identify", "payload", "panda_hand") == 0
    section = summary(tmp_path / "fit")["identification"]
    assert section["node_parameters"]["friction_compensation"] is True
    assert replay(bag, urdf, tmp_path / "loaded", "--params", str(tmp_path / "fit" / "identified.yaml")) == 0
    names = arm[0].joint_names

    def rms(out: Path) -> np.ndarray:
        return np.array([summary(out)["joints"][j]["torque_residual_Nm"]["rms"] for j in names])

    promised = np.array([section["validation_rms_before"][j] / section["validation_rms_after"][j] for j in names])
    achieved = rms(tmp_path / "fit") / rms(tmp_path / "loaded")
    assert np.all(promised > 8) and np.all(achieved > 8), (promised, achieved)


def test_identified_inertias_leave_a_known_payload_to_the_payload_parameters(panda, tmp_path) -> None:
    """--params holds a 0.5 kg payload, --identify inertia: the file's inertial_parameters are the
    bodies without it (the node adds payload_* to them), not the bodies with it counted twice."""
    com, inertia = [0.0, 0.0, 0.08], [1e-3, 0.0, 0.0, 1e-3, 0.0, 1e-3]
    held = ident.with_payload(panda, "panda_hand", 0.5, com, inertia)
    rec = synthetic(held, 6.0, seed=10)
    params = tmp_path / "params.yaml"
    params.write_text(f"/**:\n  ros__parameters:\n    payload_link: panda_hand\n    payload_mass: 0.5\n"
                      f"    payload_com: {com}\n    payload_inertia: {inertia}\n")
    out = tmp_path / "out"
    assert replay(bag_of(tmp_path, rec), write_urdf(tmp_path), out, "--params", str(params),
                  "--identify", "inertia", "--identify", "friction") == 0
    pi = np.array(summary(out)["identification"]["node_parameters"]["inertial_parameters"]).reshape(-1, 10)
    np.testing.assert_allclose(pi[:, 0], ident.parameters(panda).reshape(-1, 10)[:, 0], rtol=1e-3)


# -- predictions take the compensated friction off the efforts --------------------------------------------


def friction_of(n: int) -> core.Friction:
    return core.Friction(coulomb=np.linspace(0.5, 1.5, n), viscous=np.linspace(0.1, 0.3, n), offset=np.full(n, 0.05))


def test_predicted_accelerations_invert_rnea_with_the_friction_compensated(panda) -> None:
    """ABA(q, qd, tau_measured - friction) = qdd where tau_measured = RNEA(q, qd, qdd) + friction, as the
    feedforward (RNEA + friction) and the observer (tau - friction) take it: one sample (the node's
    path) and a batch (the replay's)."""
    rng = np.random.default_rng(1)
    q, qd, qdd = rng.normal(size=(3, 5, panda.n))
    f = friction_of(panda.n)
    tau = core.rnea(panda, q, qd, qdd) + core.friction_torque(f, qd)
    batch = pipeline.compute_outputs(panda, q, qd, qdd, tau, friction=f)
    np.testing.assert_allclose(batch.qdd_pred, qdd, atol=1e-8)
    np.testing.assert_allclose(batch.tau_ff, tau, atol=1e-9)
    one = pipeline.compute_outputs(panda, q[0].copy(), qd[0].copy(), qdd[0].copy(), tau[0].copy(), friction=f)
    np.testing.assert_allclose(one.qdd_pred, qdd[0], atol=1e-8)


def test_constrained_predictions_take_the_compensated_friction_off_the_efforts() -> None:
    """With contacts (Solo12, the compiled sample, a block and the general path) and with a closed
    loop: the predictions with friction equal those without it from efforts less the friction."""
    from liedyn_ros.pipeline.routes import compute_loop_outputs
    from test_constraints_loops import FIVE_BAR, L5, THETA, _Phi, phi

    model = core.load_urdf(str(robots_dir() / "solo_description/robots/solo12.urdf"), floating_base=True)
    contacts = pipeline.resolve_contacts(model, pipeline.PipelineConfig(
        contact_links=("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")))
    rng = np.random.default_rng(2)
    B = 3
    q = np.tile([0.0, 0.8, -1.6], (B, 4)) + rng.normal(scale=0.1, size=(B, 12))
    v, a = rng.normal(size=(2, B, 18))
    pose = np.stack([np.eye(4)] * B)
    pose[:, 2, 3] = 0.3
    effort, active = rng.normal(size=(B, 12)), np.ones((B, 4), dtype=bool)
    f = friction_of(12)
    cases = [((q, v, a, effort, pose, active), {}), ((q[0], v[0], a[0], effort[0], pose[0], active[0]), {}),
             ((q[1], v[1], a[1], effort[1], pose[1], active[1]), {"ff_state": (q[1], v[1])})]
    for (qq, vv, aa, e, T, act), kw in cases:
        with_f = pipeline.compute_contact_outputs(model, contacts, qq, vv, aa, e, T, act, friction=f, **kw)
        net = e - core.friction_torque(f, vv[..., 6:])
        without = pipeline.compute_contact_outputs(model, contacts, qq, vv, aa, net, T, act, **kw)
        np.testing.assert_allclose(with_f.qdd_pred, without.qdd_pred, atol=1e-9)
        np.testing.assert_allclose(with_f.base_acc_pred, without.base_acc_pred, atol=1e-9)

    five = core.load_urdf(FIVE_BAR)
    config = pipeline.PipelineConfig(loop_closures=("l2 l3 point",), passive_joints=("j2", "j4"),
                                     loop_offsets=(L5[1], 0.0, 0.0, L5[2], 0.0, 0.0))
    loops = pipeline.resolve_loops(five, config, None)
    qq = phi("five_bar", THETA["five_bar"])
    vv = _Phi("five_bar", THETA["five_bar"]) @ rng.normal(size=2)
    e, f4 = rng.normal(size=4), friction_of(4)
    with_f = compute_loop_outputs(five, loops, qq, vv, np.zeros(4), e, None, None, friction=f4)
    without = compute_loop_outputs(five, loops, qq, vv, np.zeros(4), e - core.friction_torque(f4, vv), None, None)
    np.testing.assert_allclose(with_f.qdd_pred, without.qdd_pred, atol=1e-9)


# -- the split follows --start/--end; too few samples said early ---------------------------------------------


def test_start_and_end_split_the_window_seventy_thirty(panda, tmp_path) -> None:
    """A 4-12 s window of a 16 s recording fits on its first 70% and validates on the rest (the
    split was that of the whole bag: 95% and 5%)."""
    bag = bag_of(tmp_path, synthetic(panda, 16.0, seed=7))
    out = tmp_path / "out"
    assert replay(bag, write_urdf(tmp_path), out, "--identify", "friction", "--start", "4", "--end", "12") == 0
    section = summary(out)["identification"]
    share = section["fit_samples"] / (section["fit_samples"] + section["validation_samples"])
    assert share == pytest.approx(0.7, abs=0.03)


def test_too_few_moving_samples_are_said_before_the_replay(panda, tmp_path, capsys) -> None:
    """Nothing is replayed (no output directory) and the message gives the counts found and needed,
    per joint, and what to do."""
    bag = bag_of(tmp_path, synthetic(panda, 2.0, scale=0.01, seed=8))
    out = tmp_path / "out"
    assert replay(bag, write_urdf(tmp_path), out, "--identify", "friction") == 2
    message = capsys.readouterr().err
    assert "too few moving samples" in message and "needed at least 21" in message
    assert "panda_joint1 0/0" in message and "--identify-min-speed" in message and "--start/--end" in message
    assert not out.exists()


def test_slow_joint_gets_validation_rows_with_a_lower_min_speed(panda, tmp_path) -> None:
    """Joint 1 moves at most ~0.04 rad/s: at the default 0.05 rad/s it has no validation rows
    (RMS null); --identify-min-speed 0.005 gives it rows and an RMS."""
    scale = np.ones(panda.n)
    scale[0] = 0.008
    rec = synthetic(panda, 8.0, scale=scale, seed=9)
    assert 0.02 < np.abs(rec.qd[:, 0]).max() < 0.05
    bag, urdf = bag_of(tmp_path, rec), write_urdf(tmp_path)
    name = panda.joint_names[0]
    assert replay(bag, urdf, tmp_path / "default", "--identify", "friction") == 0
    assert summary(tmp_path / "default")["identification"]["validation_rms_after"][name] is None
    assert replay(bag, urdf, tmp_path / "slow", "--identify", "friction", "--identify-min-speed", "0.005") == 0
    section = summary(tmp_path / "slow")["identification"]
    assert section["validation_rms_after"][name] < section["validation_rms_before"][name]


def test_too_few_rows_at_the_end_still_give_a_summary_section(panda) -> None:
    """Rows the survey counted but the replay could not use (no acceleration estimate): the fit says
    so with the counts in the section that summary.json receives, and writes nothing."""
    from liedyn_ros.replay.identify import Identifier

    problem = IdentificationProblem(panda, friction=True)
    identifier = Identifier(problem, panda, split_ns=0)
    section, files = identifier.finish(Path("/nonexistent"), plots=False)
    assert files == [] and section["fit_samples"] == 0 and "needed at least 21" in section["error"]


# -- several recordings, one fit ------------------------------------------------------------------


@pytest.fixture(scope="module")
def three(arm):  # noqa: F811
    """Three 3 s MuJoCo recordings: joints 1-4 move, joints 4-7 move, all move. Neither of the first
    two identifies every joint's friction; the third is held out to validate."""
    names = arm[0].joint_names
    return [record(arm, 3.0, seed=20 + k, moving=m) for k, m in enumerate((names[:4], names[3:], None))]


def test_normal_equations_of_several_recordings_pool_into_one_fit(arm, three) -> None:  # noqa: F811
    """Per recording: Y^T Y, Y^T tau and counts (MuJoCo's accelerations); merged, the first two fit
    friction and payload within 5% (alone, each keeps the friction of the joints it never moved at
    zero), the third validates."""
    model = arm[0]
    problem = IdentificationProblem(model, friction=True, payload_link="panda_hand")
    parts = []
    for rec in three:
        eq = NormalEquations(model.n, problem.size)
        eq.add(*problem.columns(rec.q, rec.qd, rec.qdd, rec.effort))
        parts.append(eq)
    alone = identify(problem, parts[0], parts[2])
    assert np.all(alone.friction.coulomb[4:] == 0.0)
    parts[0].merge(parts[1])
    result = identify(problem, parts[0], parts[2])
    np.testing.assert_allclose(result.friction.coulomb, FRICTION, rtol=0.05)
    np.testing.assert_allclose(result.friction.viscous, DAMPING, rtol=0.05)
    assert result.payload["mass"] == pytest.approx(1.5, rel=0.05)
    assert np.linalg.norm(np.array(result.payload["com"]) - [0.02, -0.01, 0.08]) < 0.005
    assert result.rows[1] == int(parts[2].rows.sum()) and np.all(result.rms_after < 0.1 * result.rms_before)


def test_replay_pools_recordings_and_validates_on_the_held_out_one(arm, three, tmp_path) -> None:  # noqa: F811
    """What `liedyn-replay B1 B2 B3 --jobs N --identify ...` (and a fleet engine, per bag) runs: each
    bag replayed on its own as a fit or validation part, then `pool`: one identified.yaml from the
    first two bags' equations, validated on the third only (by recording, not by row)."""
    from liedyn_ros.replay import ReplayOptions
    from liedyn_ros.replay import replay as replay_bags
    from liedyn_ros.replay.identify import pool, validation_bags

    assert validation_bags(3) == [False, False, True] and validation_bags(10)[-3:] == [True] * 3
    urdf, bags = write_urdf(tmp_path), [bag_of(tmp_path, rec, f"bag{k}") for k, rec in enumerate(three)]
    parts = [replay_bags([bag], ReplayOptions(out=tmp_path / f"out{k}", urdf=urdf, progress=False, plots=False,
                                              identify=(("friction",), ("payload", "panda_hand")),
                                              identify_role=role)).identifier
             for k, (bag, role) in enumerate(zip(bags, ("fit", "fit", "validation")))]
    held_out = int(parts[2].validation.rows.sum())
    section = pool(parts, [str(b) for b in bags], tmp_path, plots=False)
    assert section["validation_bags"] == [str(bags[2])] and section["validation_samples"] == held_out
    params = read_identified(tmp_path / "identified.yaml")
    np.testing.assert_allclose(params["friction_coulomb"], FRICTION, rtol=0.05)
    np.testing.assert_allclose(params["friction_viscous"], DAMPING, rtol=0.12)  # the replay's qdd estimate: 11% on joint 2
    assert params["payload_mass"] == pytest.approx(1.5, rel=0.05)


def test_pooling_needs_two_bags(panda, tmp_path, capsys) -> None:
    bag = bag_of(tmp_path, synthetic(panda, 1.0))
    assert replay(bag, write_urdf(tmp_path), tmp_path / "out", "--jobs", "1", "--identify", "friction") == 2
    assert "needs two bags or more" in capsys.readouterr().err


def read_identified(path: Path) -> dict:
    """The ros__parameters of identified.yaml, read as plain YAML."""
    from ruamel.yaml import YAML
    return YAML(typ="safe", pure=True).load(path.read_text())["/**"]["ros__parameters"]
