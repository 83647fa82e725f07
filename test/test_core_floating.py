"""Floating bases (issue 3): the aerial manipulator of seed 003, world-frame invariance, helpers.

The aerial manipulator follows seed 003 section 7: a hexarotor base (six tilted propellers, here
welded links that must be merged into the base) carrying two parallel 3-joint arms attached below
the base's center of mass. Table 3's numbers are not legible in the extracted text, so the
masses and lengths below are plausible values of that size class.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from liedyn_ros import core
from robots import (assert_close, body_poses, case, center_of_mass, exp_twist, inertias, random_pose,
                    random_state, rk4_step, world_momentum)

BASE_MASS, ROTOR_MASS = 2.5, 0.05
ARM_MASSES = (0.3, 0.2, 0.1)
ARM_LINK = 0.2
ARM_DROP, ARM_SPACING = 0.1, 0.15  # attachment below the base CoM, lateral half-spacing
TOTAL_MASS = BASE_MASS + 6 * ROTOR_MASS + 2 * sum(ARM_MASSES)


def _inertial(mass: float, xyz: str, ixx: float, iyy: float, izz: float) -> str:
    return (f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/></inertial>')


def aerial_manipulator_urdf() -> str:
    parts = ['<robot name="hexarotor_two_arms"><link name="world"/>',
             f'<link name="hull">{_inertial(BASE_MASS, "0 0 0", 0.035, 0.035, 0.06)}</link>',
             '<joint name="flight" type="floating"><parent link="world"/><child link="hull"/></joint>']
    for k in range(6):  # tilted propellers, alternately +-30 degrees about their radial axis
        yaw, tilt = k * np.pi / 3, (-1) ** k * np.pi / 6
        x, y = 0.3 * np.cos(yaw), 0.3 * np.sin(yaw)
        parts.append(f'<link name="rotor{k}">{_inertial(ROTOR_MASS, "0 0 0.01", 2e-5, 2e-5, 4e-5)}</link>')
        parts.append(f'<joint name="mount{k}" type="fixed"><parent link="hull"/><child link="rotor{k}"/>'
                     f'<origin xyz="{x:.17g} {y:.17g} 0.02" rpy="{tilt:.17g} 0 {yaw:.17g}"/></joint>')
    axes = ("0 0 1", "0 1 0", "0 1 0")
    for side, y in (("left", ARM_SPACING), ("right", -ARM_SPACING)):
        parent, origin = "hull", f"0 {y} {-ARM_DROP}"
        for j, (mass, axis) in enumerate(zip(ARM_MASSES, axes), start=1):
            link = f"{side}_link{j}"
            parts.append(f'<link name="{link}">{_inertial(mass, f"0 0 {-ARM_LINK / 2}", 1e-3, 1e-3, 2e-4)}</link>')
            parts.append(f'<joint name="{side}_joint{j}" type="revolute"><parent link="{parent}"/>'
                         f'<child link="{link}"/><origin xyz="{origin}"/><axis xyz="{axis}"/>'
                         f'<limit lower="-3" upper="3" effort="5" velocity="5"/></joint>')
            parent, origin = link, f"0 0 {-ARM_LINK}"
    parts.append("</robot>")
    return "".join(parts)


@pytest.fixture(scope="module")
def drone() -> core.Model:
    return core.load_urdf(aerial_manipulator_urdf())  # the floating root joint makes it floating


def test_floating_root_joint_gives_a_floating_model(drone: core.Model) -> None:
    assert drone.floating_base and drone.n == 6 and drone.nv == 12
    assert drone.joint_names == tuple(f"{s}_joint{j}" for s in ("left", "right") for j in (1, 2, 3))


def test_free_flight_conserves_momentum_and_energy(drone: core.Model) -> None:
    """No gravity, zero torques: world-frame spatial momentum and kinetic energy stay constant
    along an aba integration (RK4, base pose T exp([u]) on SE(3)), 100 steps of 2 ms."""
    model = drone.with_gravity(np.zeros(3))
    rng = np.random.default_rng(30)
    q, v, T = rng.uniform(-1, 1, model.n), rng.normal(size=model.nv) * 1.5, random_pose(rng)
    zero = np.zeros(model.nv)

    def accel(qs, vs, Ts):
        return core.aba(model, qs, vs, zero, base_pose=Ts)

    h0, E0 = world_momentum(model, q, v, T), 0.5 * v @ core.mass_matrix(model, q) @ v
    for _ in range(100):
        q, v, T = rk4_step(model, q, v, T, 2e-3, accel)
    assert np.abs(v[6:]).max() > 0.1  # the arms did move
    assert_close(world_momentum(model, q, v, T), h0, rel=1e-8, what="world spatial momentum")
    assert_close(0.5 * v @ core.mass_matrix(model, q) @ v, E0, rel=1e-8, what="kinetic energy")


def test_hover_wrench_is_the_total_weight(drone: core.Model) -> None:
    """At rest, rnea's base wrench (m, f) in the base frame holds the weight: f = m_tot R^T (0, 0, g),
    m = c x f with c the center of mass of the whole robot in the base frame."""
    rng = np.random.default_rng(31)
    q, T = rng.uniform(-1, 1, drone.n), random_pose(rng)
    wrench = core.rnea(drone, q, np.zeros(drone.nv), np.zeros(drone.nv), base_pose=T)
    f = TOTAL_MASS * T[:3, :3].T @ np.array([0.0, 0.0, 9.81])
    first_moments = sum(m * (P[:3, :3] @ c + P[:3, 3]) for P, (m, c) in
                        zip(body_poses(drone, q, T), map(center_of_mass, inertias(drone))))
    com_in_base = T[:3, :3].T @ (first_moments / TOTAL_MASS - T[:3, 3])
    assert_close(wrench[3:6], f, what="base force")
    assert_close(wrench[:3], np.cross(com_in_base, f), what="base moment")
    assert_close(wrench[6:], core.gravity(drone, q, base_pose=T)[6:])


@pytest.mark.parametrize("name", ["drone", "solo12", "talos_mimic"])
def test_rnea_does_not_depend_on_the_world_frame(name: str, drone: core.Model) -> None:
    """The same motion seen from a moved world frame W' (T' = T_W'W T, gravity rotated alike) needs
    the same base wrench (in the base frame) and the same joint torques."""
    model = drone if name == "drone" else case(name).model
    rng = np.random.default_rng(32)
    q, v, a = random_state(model, rng)
    T, move = random_pose(rng), random_pose(rng)
    moved = model.with_gravity(move[:3, :3] @ model.gravity)
    assert_close(core.rnea(moved, q, v, a, base_pose=move @ T), core.rnea(model, q, v, a, base_pose=T))


def test_pose_from_position_quaternion_normalises() -> None:
    quat = np.array([0.1, -0.4, 0.3, 0.8])
    T = core.pose_from_position_quaternion([1.0, 2.0, 3.0], 3.0 * quat)
    assert_close(T[:3, :3], Rotation.from_quat(quat / np.linalg.norm(quat)).as_matrix())  # scipy: (x, y, z, w)
    assert_close(T[:3, 3], np.array([1.0, 2.0, 3.0]))
    assert_close(T[3], np.array([0.0, 0.0, 0.0, 1.0]))


def test_pose_quaternion_round_trip_batched() -> None:
    rng = np.random.default_rng(33)
    quats = rng.normal(size=(5, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    positions = rng.normal(size=(5, 3))
    T = core.pose_from_position_quaternion(positions, quats)
    assert T.shape == (5, 4, 4)
    p, qx = core.position_quaternion_from_pose(T)
    assert_close(p, positions)
    assert_close(qx, quats * np.sign(quats[:, 3:]), rel=1e-9)  # returned with w >= 0


def test_velocity_from_twist_puts_angular_first() -> None:
    v = core.velocity_from_twist([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0])
    assert np.array_equal(v, np.arange(1.0, 9.0))


@pytest.mark.parametrize("name", ["solo12", "talos_mimic", "tree0"])
def test_pinocchio_round_trip(name: str) -> None:
    t = case(name)
    model = t.model
    rng = np.random.default_rng(34)
    q, v, _ = random_state(model, rng)
    T = random_pose(rng) if model.floating_base else None
    q_pin, v_pin = core.to_pinocchio(model, q, v, base_pose=T, joint_order=t.joint_order)
    assert q_pin.shape == (t.pin_model.nq,) and v_pin.shape == (t.pin_model.nv,)
    q2, v2, T2 = core.from_pinocchio(model, q_pin, v_pin, joint_order=t.joint_order)
    assert_close(np.angle(np.exp(1j * (q2 - q))), np.zeros(model.n))  # continuous joints come back modulo 2 pi
    assert_close(v2, v)
    if T is not None:
        assert_close(T2, T)
        # Pinocchio's free-flyer: linear velocity first, then angular.
        assert_close(v_pin[:6], np.r_[v[3:6], v[:3]])


def test_base_pose_on_se3_is_used_not_euler_angles(drone: core.Model) -> None:
    """A base pose beyond any Euler singularity (pitch exactly 90 degrees) works and equals the
    result with the same pose reached as T exp(eps [V]) as eps -> 0 (continuity on SE(3))."""
    rng = np.random.default_rng(35)
    q, v, a = random_state(drone, rng)
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("zyx", [0.3, np.pi / 2, -0.2]).as_matrix()
    near = T @ exp_twist(1e-9 * rng.normal(size=6))
    assert_close(core.rnea(drone, q, v, a, base_pose=T), core.rnea(drone, q, v, a, base_pose=near), rel=1e-7)
