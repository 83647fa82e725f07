"""core.singular's scale, the largest diagonal entry of M(0), by composite inertias in one pass:
equal to Pinocchio's crba, and affordable on a chain of thousands of links."""
from __future__ import annotations

import numpy as np
import pytest

from liedyn_ros import core
from liedyn_ros.core.singular import inertia_scale
from robots import case, pin_mass_matrix


@pytest.mark.parametrize("name", ["panda", "ur5", "solo12", "talos", "talos_mimic", "lone_body", "tree0", "tree1"])
def test_scale_is_the_largest_diagonal_of_the_mass_matrix(name: str) -> None:
    twin = case(name)
    model = twin.model
    base_pose = np.eye(4) if model.floating_base else None
    reference = np.diagonal(pin_mass_matrix(twin, np.zeros(model.n), base_pose)).max()
    assert inertia_scale(model) == pytest.approx(reference, rel=1e-9)


def _chain(links: int) -> str:
    body = ''.join(
        f'<link name="l{i}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
        f'</inertial></link><joint name="j{i}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
        f'<origin xyz="0 0 0.1"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
        for i in range(1, links + 1))
    return f'<robot name="chain"><link name="l0"/>{body}</robot>'


def test_scale_of_a_long_chain_is_its_first_joints_inertia() -> None:
    """A straight chain of N unit masses 0.1 m apart along the axis of no joint: the first joint
    carries sum over links of (0.01 + (0.1 i)^2) about its own axis (parallel-axis theorem)."""
    links = 2000
    model = core.load_urdf(_chain(links))
    expected = sum(0.01 + (0.1 * i) ** 2 for i in range(links))
    assert inertia_scale(model) == pytest.approx(expected, rel=1e-12)
