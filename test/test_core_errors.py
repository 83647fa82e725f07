"""Bad input raises a ValueError that names the argument, never garbage out."""
from __future__ import annotations

import numpy as np
import pytest

from liedyn_ros import core
from robots import case

FIXED = case("ur5").model
FLOATING = case("solo12").model


def fixed_args(n: int = FIXED.n) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(n), np.zeros(n), np.zeros(n)


@pytest.mark.parametrize("fn", [core.rnea, core.aba])
@pytest.mark.parametrize("which, name", [(0, "q"), (1, "v"), (2, "a|tau")])
def test_wrong_length_names_the_argument(fn, which: int, name: str) -> None:
    args = list(fixed_args())
    args[which] = np.zeros(FIXED.n + 1)
    with pytest.raises(ValueError, match=name):
        fn(FIXED, *args)


@pytest.mark.parametrize("which, name", [(0, "q"), (1, "v"), (2, "a")])
def test_nan_names_the_argument(which: int, name: str) -> None:
    args = list(fixed_args())
    args[which] = args[which].copy()
    args[which][2] = np.nan
    with pytest.raises(ValueError, match=f"{name}.*NaN"):
        core.rnea(FIXED, *args)


def test_nan_in_a_batch_is_refused() -> None:
    q = np.zeros((4, FIXED.n))
    q[3, 1] = np.inf
    with pytest.raises(ValueError, match="q"):
        core.mass_matrix(FIXED, q)


def test_floating_base_velocity_must_include_the_base() -> None:
    with pytest.raises(ValueError, match="v"):
        core.rnea(FLOATING, np.zeros(FLOATING.n), np.zeros(FLOATING.n), np.zeros(FLOATING.nv),
                  base_pose=np.eye(4))


@pytest.mark.parametrize("pose, why", [
    (np.diag([1.0, 1.0, -1.0, 1.0]), "base_pose"),          # a reflection
    (np.diag([2.0, 1.0, 1.0, 1.0]), "base_pose"),           # not orthonormal
    (np.eye(3), "base_pose"),                               # wrong shape
    (np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1.0]]), "base_pose"),  # last row
])
def test_non_se3_pose_is_refused(pose: np.ndarray, why: str) -> None:
    z = np.zeros(FLOATING.nv)
    with pytest.raises(ValueError, match=why):
        core.rnea(FLOATING, np.zeros(FLOATING.n), z, z, base_pose=pose)


def test_missing_base_pose_is_refused_where_it_matters() -> None:
    z = np.zeros(FLOATING.nv)
    with pytest.raises(ValueError, match="base_pose"):
        core.rnea(FLOATING, np.zeros(FLOATING.n), z, z)


def test_unknown_f_ext_link_is_named() -> None:
    with pytest.raises(ValueError, match="f_ext.*no_such_link"):
        core.rnea(FIXED, *fixed_args(), f_ext={"no_such_link": np.zeros(6)})


def test_f_ext_wrench_must_have_six_entries() -> None:
    link = FIXED.body_names[-1]
    with pytest.raises(ValueError, match="f_ext"):
        core.rnea(FIXED, *fixed_args(), f_ext={link: np.zeros(3)})


def test_planar_joint_is_refused_naming_the_joint() -> None:
    xml = '''<robot name="slider"><link name="base"/><link name="puck"><inertial><mass value="1"/>
      <inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
      <joint name="table" type="planar"><parent link="base"/><child link="puck"/></joint></robot>'''
    with pytest.raises(ValueError, match="table.*planar|planar.*table"):
        core.load_urdf(xml)


def test_prescribed_mask_must_match() -> None:
    with pytest.raises(ValueError, match="prescribed"):
        core.hybrid(FIXED, *fixed_args(), np.ones(FIXED.n + 1, bool))


@pytest.mark.parametrize("quat", [[0.0, 0.0, 0.0, 0.0], [np.nan, 0.0, 0.0, 1.0]])
def test_bad_quaternion_is_refused(quat: list[float]) -> None:
    with pytest.raises(ValueError, match="quaternion"):
        core.pose_from_position_quaternion([0.0, 0.0, 0.0], quat)
