"""Worked cases whose answers are derived by hand, not taken from our output.

The 2-link arm is the planar example of seed 004 (section 8): two revolute joints about z, links
along x, frames at the joints, gravity along -y. Its closed form is the classical one:

    M11 = I1 + I2 + m1 c1^2 + m2 (l1^2 + c2^2 + 2 l1 c2 cos q2)
    M12 = I2 + m2 (c2^2 + l1 c2 cos q2),          M22 = I2 + m2 c2^2,   h = m2 l1 c2 sin q2
    tau1 = M11 qdd1 + M12 qdd2 - h (2 qd1 qd2 + qd2^2) + (m1 c1 + m2 l1) g cos q1 + m2 c2 g cos(q1 + q2)
    tau2 = M12 qdd1 + M22 qdd2 + h qd1^2 + m2 c2 g cos(q1 + q2)

(the seed's velocity-quadratic terms of section 10 collapse to the +-h terms in the plane).
"""
from __future__ import annotations

import numpy as np
import pytest

from liedyn_ros import core
from robots import assert_close

G = 9.81
M1, M2, L1, C1, C2, I1, I2 = 1.7, 0.9, 0.6, 0.25, 0.3, 0.05, 0.02


def two_link_closed_form(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tau, M) of the planar 2-link arm, from the closed form above."""
    c2, h = np.cos(q[1]), M2 * L1 * C2 * np.sin(q[1])
    M = np.array([[I1 + I2 + M1 * C1**2 + M2 * (L1**2 + C2**2 + 2 * L1 * C2 * c2), I2 + M2 * (C2**2 + L1 * C2 * c2)],
                  [I2 + M2 * (C2**2 + L1 * C2 * c2), I2 + M2 * C2**2]])
    bias = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    grav = np.array([(M1 * C1 + M2 * L1) * G * np.cos(q[0]) + M2 * C2 * G * np.cos(q[0] + q[1]),
                     M2 * C2 * G * np.cos(q[0] + q[1])])
    return M @ qdd + bias + grav, M


def link_xml(name: str, mass: float, com_x: float, izz: float) -> str:
    return (f'<link name="{name}"><inertial><origin xyz="{com_x} 0 0"/><mass value="{mass}"/>'
            f'<inertia ixx="0.01" ixy="0" ixz="0" iyy="{izz}" iyz="0" izz="{izz}"/></inertial></link>')


def two_link_urdf(first: str = "revolute", mimic: str = "") -> str:
    limit = '<limit lower="-10" upper="10" effort="50" velocity="5"/>'
    return f'''<robot name="two_link">
      <link name="base"/>{link_xml("link1", M1, C1, I1)}{link_xml("link2", M2, C2, I2)}
      <joint name="j1" type="{first}"><parent link="base"/><child link="link1"/>
        <axis xyz="0 0 1"/>{limit if first == "revolute" else ""}</joint>
      <joint name="j2" type="revolute"><parent link="link1"/><child link="link2"/>
        <origin xyz="{L1} 0 0"/><axis xyz="0 0 1"/>{limit}{mimic}</joint>
    </robot>'''


def planar(xml: str) -> core.Model:
    return core.load_urdf(xml, gravity=(0.0, -G, 0.0))


STATES = [
    (np.array([0.3, -0.8]), np.array([1.1, -0.4]), np.array([0.5, 2.0])),
    (np.array([-2.0, 2.5]), np.array([-3.0, 1.5]), np.array([-1.0, 0.3])),
]


@pytest.mark.parametrize("state", STATES)
def test_two_link_arm_of_seed_004(state: tuple[np.ndarray, ...]) -> None:
    model = planar(two_link_urdf())
    q, qd, qdd = state
    tau, M = two_link_closed_form(q, qd, qdd)
    assert_close(core.rnea(model, q, qd, qdd), tau)
    assert_close(core.mass_matrix(model, q), M)
    assert_close(core.gravity(model, q), two_link_closed_form(q, 0 * qd, 0 * qdd)[0])
    assert_close(core.coriolis_matrix(model, q, qd) @ qd, two_link_closed_form(q, qd, 0 * qdd)[0]
                 - two_link_closed_form(q, 0 * qd, 0 * qdd)[0])
    assert_close(core.aba(model, q, qd, tau), qdd)


def test_continuous_joint_has_one_angle_beyond_pi() -> None:
    """A continuous first joint: one coordinate, its angle, valid past pi (4 rad here)."""
    model = planar(two_link_urdf(first="continuous"))
    assert model.joint_names == ("j1", "j2") and model.n == 2
    q, qd, qdd = np.array([4.0, 0.7]), np.array([2.0, -1.0]), np.array([0.4, -0.6])
    assert_close(core.rnea(model, q, qd, qdd), two_link_closed_form(q, qd, qdd)[0])
    q_pin, _ = core.to_pinocchio(model, q)
    assert_close(q_pin, np.array([np.cos(4.0), np.sin(4.0), 0.7]))


@pytest.mark.parametrize("multiplier, offset", [(0.5, 0.3), (-2.0, 0.0)])
def test_mimic_joint_reduces_to_its_leader(multiplier: float, offset: float) -> None:
    """j2 = multiplier * j1 + offset: tau = [1, k] . tau_2link(q_b, [1, k] qd, [1, k] qdd)."""
    mimic = f'<mimic joint="j1" multiplier="{multiplier}" offset="{offset}"/>'
    model = planar(two_link_urdf(mimic=mimic))
    assert model.joint_names == ("j1",)
    k = np.array([1.0, multiplier])
    q, qd, qdd = 0.4, -1.3, 0.8
    q_body = np.array([q, multiplier * q + offset])
    tau_body, M_body = two_link_closed_form(q_body, k * qd, k * qdd)
    assert_close(core.rnea(model, [q], [qd], [qdd]), np.array([k @ tau_body]))
    assert_close(core.mass_matrix(model, [q]), np.array([[k @ M_body @ k]]))
    bias = k @ two_link_closed_form(q_body, k * qd, 0 * k)[0]
    assert_close(core.aba(model, [q], [qd], [2.5]), np.array([(2.5 - bias) / (k @ M_body @ k)]))


@pytest.mark.parametrize("axis, expected", [("1 0 0", 2.0), ("0 1 0", 1.0), ("0 0 1", 2.5)])
def test_inertial_rpy_rotates_the_inertia(axis: str, expected: float) -> None:
    """diag(1, 2, 2.5) turned by rpy (0, 0, pi/2) is diag(2, 1, 2.5) in the link frame."""
    xml = f'''<robot name="spinner"><link name="base"/>
      <link name="rotor"><inertial><origin xyz="0 0 0" rpy="0 0 {np.pi / 2!r}"/><mass value="3"/>
        <inertia ixx="1" ixy="0" ixz="0" iyy="2" iyz="0" izz="2.5"/></inertial></link>
      <joint name="spin" type="continuous"><parent link="base"/><child link="rotor"/><axis xyz="{axis}"/></joint>
    </robot>'''
    model = core.load_urdf(xml)
    assert_close(core.rnea(model, [0.0], [0.0], [1.0]), np.array([expected]))


def test_massless_leaf_on_moving_joint_makes_aba_raise() -> None:
    """A link without inertia on a revolute joint: forward dynamics is undefined, never NaN."""
    xml = '''<robot name="bad"><link name="base"/>''' + link_xml("arm", 1.0, 0.2, 0.01) + '''
      <link name="tip"/>
      <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="j2" type="revolute"><parent link="arm"/><child link="tip"/><origin xyz="0.4 0 0"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>'''
    model = core.load_urdf(xml)
    assert np.all(np.isfinite(core.rnea(model, [0.1, 0.2], [0.0, 1.0], [0.0, 0.0])))
    with pytest.raises(ValueError, match="singular|massless"):
        core.aba(model, [0.1, 0.2], [0.0, 1.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="singular|massless"):
        core.aba(model, np.zeros((3, 2)), np.zeros((3, 2)), np.ones((3, 2)))


def test_massless_mimic_fingers_make_aba_raise() -> None:
    """Massless fingers driven by one coordinate through a mimic joint (as Romeo's hands): the dense
    path of forward dynamics names that coordinate's joint instead of failing in a factorization."""
    xml = '''<robot name="gripper"><link name="base"/>''' + link_xml("palm", 1.0, 0.2, 0.01) + '''
      <link name="finger1"/><link name="finger2"/>
      <joint name="wrist" type="revolute"><parent link="base"/><child link="palm"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="grip" type="prismatic"><parent link="palm"/><child link="finger1"/><axis xyz="0 1 0"/>
        <limit lower="0" upper="0.04" effort="1" velocity="1"/></joint>
      <joint name="grip_mirror" type="prismatic"><parent link="palm"/><child link="finger2"/><axis xyz="0 -1 0"/>
        <limit lower="0" upper="0.04" effort="1" velocity="1"/><mimic joint="grip"/></joint>
    </robot>'''
    model = core.load_urdf(xml)
    assert model.has_mimic and model.joint_names == ("wrist", "grip")
    for q, where in ((np.array([0.1, 0.02]), ""), (np.full((3, 2), 0.01), " at sample 0")):  # a batch names its sample
        with pytest.raises(core.SingularInertiaError, match=f"joint 'grip'{where} is singular"):
            core.aba(model, q, np.ones_like(q), np.zeros_like(q))
        with pytest.raises(core.SingularInertiaError, match=f"joint 'grip'{where} is singular"):
            core.aba_time_derivatives(model, q, np.ones_like(q), [np.zeros_like(q)])


def test_massless_leaf_on_fixed_joint_is_fine() -> None:
    """The same empty link welded on: merged away, aba is defined and inverts rnea."""
    xml = '''<robot name="ok"><link name="base"/>''' + link_xml("arm", 1.0, 0.2, 0.01) + '''
      <link name="tip"/>
      <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="weld" type="fixed"><parent link="arm"/><child link="tip"/><origin xyz="0.4 0 0"/></joint>
    </robot>'''
    model = core.load_urdf(xml)
    tau = core.rnea(model, [0.3], [1.0], [2.0])
    assert_close(core.aba(model, [0.3], [1.0], tau), np.array([2.0]))
