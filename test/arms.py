"""The small robots of the node tests, whose torques are closed forms written in the tests, and
the skip of the launch tests where ROS 2 is absent (imports no ROS itself)."""
from __future__ import annotations

from typing import Any

import pytest

SKIP_REASON = "ROS 2 is not installed here (no {}): source a ROS 2 workspace to run the node test"


def require_ros() -> Any:
    """rclpy, or the calling launch test module skipped with the reason pytest -rs prints."""
    pytest.importorskip("launch_testing", reason=SKIP_REASON.format("launch_testing"))
    return pytest.importorskip("rclpy", reason=SKIP_REASON.format("rclpy"))


# A point mass m = 2 kg at l = 1 m on a y-axis hinge: tau = m l^2 qdd + m g l sin(q).
PENDULUM = """<robot name="pendulum"><link name="world"/>
  <link name="bob"><inertial><origin xyz="0 0 -1"/><mass value="2"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
  <joint name="swing" type="continuous"><parent link="world"/><child link="bob"/>
    <axis xyz="0 1 0"/></joint></robot>"""

# Point masses M1 at A1 below the shoulder and M2 at A2 below the elbow, the elbow L1 below the
# shoulder, both hinges about y.
M1, A1, L1, M2, A2 = 1.5, 0.3, 0.5, 1.0, 0.4
ARM = f"""<robot name="arm2"><link name="world"/>
  <link name="upper"><inertial><origin xyz="0 0 -{A1}"/><mass value="{M1}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
  <link name="fore"><inertial><origin xyz="0 0 -{A2}"/><mass value="{M2}"/>
    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
  <joint name="shoulder" type="continuous"><parent link="world"/><child link="upper"/>
    <axis xyz="0 1 0"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="fore"/>
    <origin xyz="0 0 -{L1}"/><axis xyz="0 1 0"/></joint></robot>"""
JOINTS = ["shoulder", "elbow"]
