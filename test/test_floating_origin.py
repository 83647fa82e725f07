"""A floating root joint's <origin> survives: our model agrees with Pinocchio's on the same URDF.

Pinocchio turns a URDF `floating` joint into a free-flyer placed at the joint's origin, so its
configuration is the joint's: T_world_base = origin * T(q_pin). Our base_pose stays the base
link's pose in the world (what odometry gives); `to_pinocchio` and `from_pinocchio` map through
the origin kept in `model.root_joint_origin`.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from liedyn_ros import core
from robots import Twin, assert_close, pin_gravity, pin_mass_matrix, pin_rnea, random_pose

BOX = '<inertial><origin xyz="0.02 0 -0.1"/><mass value="{m}"/><inertia ixx="0.02" ixy="0.001" ixz="0" ' \
      'iyy="0.03" iyz="0" izz="0.01"/></inertial>'


def floating_urdf(origin: str) -> str:
    return f'''<robot name="hopper"><link name="world"/>
      <link name="body">{BOX.format(m=4)}</link><link name="thigh">{BOX.format(m=1.5)}</link>
      <link name="shin">{BOX.format(m=0.8)}</link>
      <joint name="flight" type="floating"><parent link="world"/><child link="body"/>{origin}</joint>
      <joint name="hip" type="revolute"><parent link="body"/><child link="thigh"/><origin xyz="0.1 0.05 -0.1"/>
        <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="5"/></joint>
      <joint name="knee" type="continuous"><parent link="thigh"/><child link="shin"/><origin xyz="0 0 -0.3"/>
        <axis xyz="0.6 0.8 0"/><limit effort="50" velocity="5"/></joint>
    </robot>'''


ORIGINS = ['<origin xyz="0.1 0.2 1.0" rpy="0.3 -0.5 0.7"/>', '<origin rpy="1.2 0 0"/>', '<origin xyz="0 0 0.8"/>', ""]


def twin(origin: str) -> Twin:
    xml = floating_urdf(origin)
    pm = pin.buildModelFromXML(xml)  # the URDF's floating joint becomes Pinocchio's free-flyer
    assert pm.joints[1].shortname() == "JointModelFreeFlyer"
    return Twin(core.load_urdf(xml), pm, list(pm.names)[2:])


@pytest.mark.parametrize("origin", ORIGINS)
def test_floating_root_origin_gives_pinocchios_dynamics(origin: str) -> None:
    t = twin(origin)
    assert t.model.floating_base
    rng = np.random.default_rng(11)
    for _ in range(3):
        q, v, a, pose = rng.uniform(-2, 2, t.model.n), rng.normal(size=t.model.nv), rng.normal(size=t.model.nv), \
            random_pose(rng)
        assert_close(core.gravity(t.model, q, base_pose=pose), pin_gravity(t, q, pose), what="gravity")
        assert_close(core.rnea(t.model, q, v, a, base_pose=pose), pin_rnea(t, q, v, a, pose), what="rnea")
        assert_close(core.mass_matrix(t.model, q, base_pose=pose), pin_mass_matrix(t, q, pose), what="M")


@pytest.mark.parametrize("origin", ORIGINS)
def test_base_pose_round_trips_through_pinocchio(origin: str) -> None:
    t = twin(origin)
    rng = np.random.default_rng(2)
    q, v, pose = rng.uniform(-2, 2, t.model.n), rng.normal(size=t.model.nv), random_pose(rng)
    q_pin, v_pin = core.to_pinocchio(t.model, q, v, base_pose=pose, joint_order=t.joint_order)
    data = t.pin_model.createData()
    pin.forwardKinematics(t.pin_model, data, q_pin)
    assert_close(data.oMi[1].homogeneous, pose, what="Pinocchio's base placement")  # the base link, world frame
    q_back, v_back, pose_back = core.from_pinocchio(t.model, q_pin, v_pin, joint_order=t.joint_order)
    assert_close(q_back, q, what="q")
    assert_close(v_back, v, what="v")
    assert_close(pose_back, pose, what="base_pose")


def test_root_joint_origin_is_kept_on_the_model() -> None:
    model = core.load_urdf(floating_urdf(ORIGINS[0]))
    want = np.eye(4)
    want[:3, :3] = pin.rpy.rpyToMatrix(0.3, -0.5, 0.7)
    want[:3, 3] = (0.1, 0.2, 1.0)
    assert_close(model.root_joint_origin, want, what="root_joint_origin")
    assert np.array_equal(core.load_urdf(floating_urdf("")).root_joint_origin, np.eye(4))
