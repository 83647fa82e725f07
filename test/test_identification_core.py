"""Regressor, parameters, base parameters, payload and friction against independent references.

The regressor is checked against Pinocchio's computeJointTorqueRegressor (rows mapped by
tau = E^T tau_pin, columns by joint), and Y pi against Pinocchio's rnea; a payload model against
Pinocchio's rnea of the URDF with the payload written in as a fixed link.
"""
from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest

from liedyn_ros import core
from liedyn_ros.core import identification as ident
from robots import assert_close, case, pin_rnea, pose_arg, random_state, twin_from_xml, urdf_text

CASES = ("panda", "tree1", "solo12")


def pin_regressor(t, q, v, a, T) -> np.ndarray:
    """Pinocchio's regressor in our rows and our body order of columns."""
    q_pin, E = t.to_pin(q, T)
    Y_pin = pin.computeJointTorqueRegressor(t.pin_model, t.pin_model.createData(), q_pin, E @ v, E @ a)
    first = 2 if t.model.floating_base else 1  # Pinocchio's joint index of our first body
    joints = ([1] if t.model.floating_base else []) + [first + t.joint_order.index(j) for j in t.model.body_joints]
    cols = np.concatenate([np.arange(10 * (j - 1), 10 * j) for j in joints])
    return E.T @ Y_pin[:, cols]


@pytest.mark.parametrize("name", CASES)
def test_regressor_equals_pinocchio(name: str) -> None:
    t = case(name)
    rng = np.random.default_rng(5)
    for _ in range(2):
        q, v, a = random_state(t.model, rng)
        T = pose_arg(t.model, rng)
        Y = ident.regressor(t.model, q, v, a, base_pose=T)
        assert_close(Y, pin_regressor(t, q, v, a, T), what=name)
        assert_close(Y @ ident.parameters(t.model), pin_rnea(t, q, v, a, T), what=name)


def test_regressor_batches_and_checks() -> None:
    t = case("solo12")
    rng = np.random.default_rng(6)
    q = rng.normal(size=(2, 3, t.model.n))
    v, a = rng.normal(size=(2, 2, 3, t.model.nv))
    T = core.spatial.exp_se3(rng.normal(size=(3, 6)))
    Y = ident.regressor(t.model, q, v, a, base_pose=T)
    assert Y.shape == (2, 3, t.model.nv, 10 * (t.model.nb + 1))
    assert_close(Y[1, 2], ident.regressor(t.model, q[1, 2], v[1, 2], a[1, 2], base_pose=T[2]))
    with pytest.raises(ValueError, match="base_pose"):
        ident.regressor(t.model, q, v, a)
    with pytest.raises(ValueError, match="^v:"):
        ident.regressor(t.model, q[0, 0], v[0, 0, :-1], a[0, 0], base_pose=T[0])


def test_parameters_round_trip_and_pseudo_inertia() -> None:
    m = case("panda").model
    pi = ident.parameters(m)
    assert pi[0] == pytest.approx(m.J[0, 5, 5])
    same = ident.with_parameters(m, pi)
    assert_close(same.J, m.J)
    # every URDF body is physically consistent; a body with a negative principal inertia is not
    assert np.all(np.linalg.eigvalsh(ident.pseudo_inertia(pi.reshape(-1, 10)))[:, 0] > -1e-12)
    bad = pi.copy()
    bad[4] = -1.0
    assert np.linalg.eigvalsh(ident.pseudo_inertia(bad[:10]))[0] < 0


def test_base_parameters_reproduce_the_torques() -> None:
    """Y pi = Y_b pi_b at samples the decomposition never saw, with fewer columns than pi."""
    t = case("panda_arm")
    bp = ident.base_parameters(t.model)
    rng = np.random.default_rng(7)
    q, v, a = random_state(t.model, rng)
    Y = ident.regressor(t.model, q, v, a)
    pi = ident.parameters(t.model)
    assert 7 * 10 > bp.independent.size >= 40  # a 7R arm has 10 n - 16 - ... base parameters
    assert_close(Y[:, bp.independent] @ bp.of(pi), Y @ pi)
    assert_close(bp.K @ pi, bp.of(pi))
    # the first link turns about z only: its mass and first moments never reach a torque
    assert "panda_link1.m" not in bp.labels


def test_payload_model_equals_pinocchio_with_the_payload_as_a_link() -> None:
    xml = re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"')
    mass, com, I = 1.3, np.array([0.02, -0.01, 0.08]), (0.004, 0.0005, -0.0002, 0.005, 0.0003, 0.003)
    payload = (f'<link name="payload"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="{mass}"/>'
               f'<inertia ixx="{I[0]}" ixy="{I[1]}" ixz="{I[2]}" iyy="{I[3]}" iyz="{I[4]}" izz="{I[5]}"/>'
               '</inertial></link><joint name="grip" type="fixed"><parent link="panda_hand"/>'
               '<child link="payload"/><origin xyz="0 0 0.1" rpy="0.3 -0.2 1.0"/></joint></robot>')
    with_link = twin_from_xml(xml.replace("</robot>", payload), False)
    plain = core.load_urdf(xml)
    # the same payload given about panda_hand's frame: move its com and axes from the payload link
    T = np.linalg.inv(with_link.model.link_frames["panda_hand"][1]) @ with_link.model.link_frames["payload"][1]
    R, p = T[:3, :3], T[:3, 3]
    Ic = np.array([[I[0], I[1], I[2]], [I[1], I[3], I[4]], [I[2], I[4], I[5]]])
    Ih = R @ Ic @ R.T
    model = ident.with_payload(plain, "panda_hand", mass, R @ com + p, Ih[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]])
    rng = np.random.default_rng(8)
    q, v, a = random_state(model, rng)
    assert_close(core.rnea(model, q, v, a), pin_rnea(with_link, q, v, a))


def test_friction_is_smooth_and_linear_in_its_parameters() -> None:
    f = ident.Friction(coulomb=[2.0, 1.0], viscous=[0.5, 0.1], offset=[0.1, -0.2], smoothing=0.01)
    qd = np.array([[1.0, -1.0], [0.0, 0.0], [1e-4, -1e-4]])
    tau = ident.friction_torque(f, qd)
    assert_close(tau[0], [2.0 + 0.5 + 0.1, -1.0 - 0.1 - 0.2], rel=1e-8)
    assert_close(tau[1], f.offset)
    assert abs(tau[2, 0] - tau[1, 0]) < 0.03  # no jump through zero velocity
    phi = np.stack([f.coulomb, f.viscous, f.offset], -1).reshape(-1)
    assert_close(ident.friction_regressor(qd, 0.01) @ phi, tau)
    with pytest.raises(ValueError, match="friction_viscous"):
        ident.Friction(coulomb=[1.0, 2.0], viscous=[1.0])


def test_floating_base_fit_on_pinocchio_torques_finds_a_foot_payload_and_friction() -> None:
    """Solo12 at random base poses and twists: joint torques from Pinocchio's rnea of the URDF with
    a load welded to FL_FOOT, plus friction; the joint rows alone give both back, and a payload
    on the base, which no joint torque feels, is reported as not identifiable."""
    from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify

    xml = urdf_text("solo12")
    load = ('<link name="load"><inertial><origin xyz="0.01 -0.02 0.03"/><mass value="0.4"/>'
            '<inertia ixx="2e-4" ixy="0" ixz="0" iyy="3e-4" iyz="0" izz="1e-4"/></inertial></link>'
            '<joint name="load_weld" type="fixed"><parent link="FL_FOOT"/><child link="load"/></joint></robot>')
    truth = twin_from_xml(xml.replace("</robot>", load), True)
    model = core.load_urdf(xml, floating_base=True)
    rng = np.random.default_rng(9)
    samples = [(*random_state(model, rng), pose_arg(model, rng)) for _ in range(300)]
    q, v, a, T = (np.array(x) for x in zip(*samples))
    fc, fv = rng.uniform(0.1, 0.5, model.n), rng.uniform(0.01, 0.1, model.n)
    tau = np.array([pin_rnea(truth, *s)[6:] for s in samples]) + fc * np.tanh(v[:, 6:] / 0.01) + fv * v[:, 6:]
    for link, seen in (("FL_FOOT", True), ("base_link", False)):
        problem = IdentificationProblem(model, friction=True, payload_link=link, min_speed=0.0)
        fit, val = NormalEquations(model.n, problem.size), NormalEquations(model.n, problem.size)
        fit.add(*problem.columns(q[:200], v[:200], a[:200], tau[:200], base_pose=T[:200]))
        val.add(*problem.columns(q[200:], v[200:], a[200:], tau[200:], base_pose=T[200:]))
        result = identify(problem, fit, val)
        payload = result.payload
        if seen:
            assert payload["mass"] == pytest.approx(0.4, rel=1e-6)
            np.testing.assert_allclose(payload["com"], [0.01, -0.02, 0.03], atol=1e-7)
            np.testing.assert_allclose(result.friction.coulomb, fc, rtol=1e-6)
            assert np.all(result.rms_after < 1e-4 * result.rms_before)
        else:
            assert not result.identifiable[problem.slices["payload"]].any()
            assert any("payload.m" in d for d in result.unexcited)
