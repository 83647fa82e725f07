"""launch_testing test of the dynamics node: start it with a pendulum URDF, publish joint
states (shuffled, with an extra joint) and check the outputs against the closed form.

Runs wherever ROS 2 is installed (``colcon test`` or ``pytest`` in a sourced workspace). Without
ROS 2 the whole module is skipped, and pytest -rs prints why.
"""
from __future__ import annotations

import math
import time
import unittest

import pytest

from arms import PENDULUM, require_ros

rclpy = require_ros()

import launch  # noqa: E402
import launch_ros.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

# The pendulum: tau = MASS LENGTH^2 qdd + MASS G LENGTH sin(q).
MASS, LENGTH, G = 2.0, 1.0, 9.81


@pytest.mark.launch_test
def generate_test_description():  # type: ignore[no-untyped-def]
    node = launch_ros.actions.Node(
        package="liedyn_ros", executable="dynamics_node", name="liedyn_dynamics",
        parameters=[{"robot_description": PENDULUM}], output="screen",
    )
    return launch.LaunchDescription([node, launch_testing.actions.ReadyToTest()]), {"dynamics": node}


class TestDynamicsOutputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.probe = rclpy.create_node("liedyn_probe")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.destroy_node()
        rclpy.shutdown()

    def test_outputs_follow_the_closed_form(self) -> None:
        received: dict[str, object] = {}
        for topic, kind in (("feedforward_torque", JointState), ("gravity_torque", JointState),
                            ("predicted_acceleration", JointTrajectory)):
            self.probe.create_subscription(kind, f"/{topic}", lambda m, t=topic: received.__setitem__(t, m), 10)
        pub = self.probe.create_publisher(JointState, "/joint_states", 10)
        q, qd, effort = 0.4, 0.0, 3.0
        msg = JointState(name=["gripper", "swing"], position=[0.0, q], velocity=[0.0, qd], effort=[0.0, effort])
        msg.header.stamp.sec, msg.header.stamp.nanosec = 42, 7
        deadline = time.monotonic() + 20.0
        while len(received) < 3 and time.monotonic() < deadline:
            pub.publish(msg)
            rclpy.spin_once(self.probe, timeout_sec=0.1)
        self.assertEqual(len(received), 3, f"outputs received: {sorted(received)}")
        gravity_torque = MASS * G * LENGTH * math.sin(q)
        ff, grav, acc = received["feedforward_torque"], received["gravity_torque"], received["predicted_acceleration"]
        self.assertEqual(list(ff.name), ["swing"])
        self.assertEqual((ff.header.stamp.sec, ff.header.stamp.nanosec), (42, 7))
        self.assertAlmostEqual(ff.effort[0], gravity_torque, places=9)  # zero acceleration source
        self.assertAlmostEqual(grav.effort[0], gravity_torque, places=9)
        expected_qdd = (effort - gravity_torque) / (MASS * LENGTH**2)
        self.assertAlmostEqual(acc.points[0].accelerations[0], expected_qdd, places=9)
        # A fixed-base model does not listen to odometry (a mobile manipulator's odom is not its base).
        self.assertEqual(self.probe.count_subscribers("/odom"), 0)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:  # type: ignore[no-untyped-def]
        launch_testing.asserts.assertExitCodes(proc_info)

    def test_model_built_once(self, proc_output, dynamics) -> None:  # type: ignore[no-untyped-def]
        text = "".join(out.text.decode(errors="replace") for out in proc_output[dynamics])
        self.assertEqual(text.count("dynamics model ready"), 1, text)
