"""launch_testing test of the node under a real ROS 2 (issue 20, "The node"): stamps going back (a
simulator reset, a looping bag) keep the outputs flowing, the observer starting over at the jump
and /diagnostics naming the reset; a deep-chain description set at run time that cannot be built
is refused while the node goes on answering.

The arm is the two-link arm of test_node_robustness.py; the external torque of an arm held still
against a push follows r(t) = (1 - exp(-K (t - t0))) tau_ext from the observer's first sample t0.
Runs wherever ROS 2 is installed; without it the module is skipped (pytest -rs says why).
"""
from __future__ import annotations

import math
import time
import unittest

import pytest

from arms import require_ros

rclpy = require_ros()

import launch  # noqa: E402
import launch_ros.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from arms import ARM, JOINTS  # noqa: E402
from test_node_robustness import Q, pin_gravity  # noqa: E402

NODE = "liedyn_robustness"
TAU_EXT = (1.0, 0.5)  # the push the motors hold the arm against
GAIN = 50.0
PERIOD_NS = 5_000_000  # 200 Hz


def deep_chain(n: int) -> str:
    """A chain of n revolute joints whose deepest joint has a NaN upper limit: refused, naming it."""
    links = "".join(f'<link name="l{i}"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" '
                    f'iyy="0.01" iyz="0" izz="0.01"/></inertial></link>' for i in range(n + 1))
    joints = "".join(f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
                     f'<origin xyz="0 0 0.01"/><axis xyz="0 1 0"/><limit lower="-1" '
                     f'upper="{"nan" if i == n - 1 else 1}" effort="1" velocity="1"/></joint>' for i in range(n))
    return f'<robot name="deep">{links}{joints}</robot>'


@pytest.mark.launch_test
def generate_test_description():  # type: ignore[no-untyped-def]
    # Every joint state must be answered: a reliable, deep joint_states queue (the node's default,
    # best effort and 5 deep, drops samples whenever a loaded machine's scheduler holds the node
    # longer than 25 ms at 200 Hz), so that the test checks the clock resets, not the scheduler.
    node = launch_ros.actions.Node(
        package="liedyn_ros", executable="dynamics_node", name=NODE, output="screen",
        parameters=[{"robot_description": ARM, "diagnostics_period": 0.2,
                     "qos_overrides./joint_states.subscription.reliability": "reliable",
                     "qos_overrides./joint_states.subscription.depth": 1000}],
    )
    return launch.LaunchDescription([node, launch_testing.actions.ReadyToTest()]), {"dynamics": node}


def stamp_ns(msg: JointState) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


class TestRobustness(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.probe = rclpy.create_node("liedyn_robustness_probe")
        cls.feedforward: list[JointState] = []
        cls.external: dict[int, list[float]] = {}
        cls.diagnostics: list[str] = []
        cls.kernels: list[str] = []  # the compiled_kernels value of each /diagnostics status
        cls.probe.create_subscription(JointState, "/feedforward_torque", cls.feedforward.append, 1000)
        cls.probe.create_subscription(
            JointState, "/external_torque", lambda m: cls.external.__setitem__(stamp_ns(m), list(m.effort)), 1000)
        cls.probe.create_subscription(DiagnosticArray, "/diagnostics", cls.on_diagnostics, 100)
        cls.joint_states = cls.probe.create_publisher(JointState, "/joint_states", 1000)
        cls.set_parameters_client = cls.probe.create_client(SetParameters, f"/{NODE}/set_parameters")
        cls.effort = [float(g - t) for g, t in zip(pin_gravity(Q), TAU_EXT)]

    @classmethod
    def on_diagnostics(cls, msg: DiagnosticArray) -> None:
        for status in msg.status:
            cls.diagnostics.append(status.message)
            cls.kernels += [kv.value for kv in status.values if kv.key == "compiled_kernels"]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.destroy_node()
        rclpy.shutdown()

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.probe, timeout_sec=max(0.0, min(0.01, end - time.monotonic())))

    def send(self, stamps: list[int]) -> None:
        """The arm held still against TAU_EXT, with these stamps (a simulator's clock), at 200 Hz."""
        for s in stamps:
            msg = JointState(name=JOINTS, position=[float(x) for x in Q], velocity=[0.0, 0.0], effort=self.effort)
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(s, 10**9)
            self.joint_states.publish(msg)
            self.spin(PERIOD_NS * 1e-9)
        self.spin(0.5)

    def answered(self, stamps: list[int]) -> int:
        got = {stamp_ns(m) for m in self.feedforward}
        return sum(s in got for s in stamps)

    def test_1_stamps_going_back_keep_the_outputs_flowing(self) -> None:
        # Until the compiled kernels run (on a cold numba cache the reference path serves, a few
        # ms a sample, and the observer starts once its kernel is compiled).
        deadline, start = time.monotonic() + 900.0, 10**9
        while not (self.external and self.kernels and self.kernels[-1] == "ready") and time.monotonic() < deadline:
            self.send([start + PERIOD_NS * k for k in range(20)])
            start += 20 * PERIOD_NS
        self.assertTrue(self.external, "no external_torque from the node")
        self.diagnostics.clear()
        for loop, start in enumerate([100 * 10**9, 10**9, 10**9, 10**9]):  # then a reset, twice more as a bag loops
            stamps = [start + PERIOD_NS * k for k in range(200)]
            self.send(stamps)
            self.assertEqual(self.answered(stamps), 200, f"loop {loop}")
            for s in (stamps[0], stamps[-1]):  # the observer starts over at the jump
                decay = 1.0 - math.exp(-GAIN * (s - stamps[0]) * 1e-9)
                for got, push in zip(self.external[s], TAU_EXT):
                    self.assertAlmostEqual(got, decay * push, delta=1e-6)
        resets = [m for m in self.diagnostics if "clock reset" in m]
        self.assertEqual(len(resets), 3, self.diagnostics)  # each named once

    def test_2_a_deep_description_that_cannot_be_built_is_refused_and_the_node_goes_on(self) -> None:
        self.assertTrue(self.set_parameters_client.wait_for_service(timeout_sec=20.0))
        request = SetParameters.Request(parameters=[Parameter("robot_description", value=deep_chain(3000))
                                                    .to_parameter_msg()])
        future = self.set_parameters_client.call_async(request)
        rclpy.spin_until_future_complete(self.probe, future, timeout_sec=60.0)
        self.assertTrue(future.done(), "no answer from set_parameters")
        (result,) = future.result().results
        self.assertFalse(result.successful)
        self.assertIn("j2999", result.reason)
        stamps = [200 * 10**9 + PERIOD_NS * k for k in range(100)]
        self.send(stamps)
        self.assertEqual(self.answered(stamps), 100)
        for got, want in zip(self.feedforward[-1].effort, pin_gravity(Q)):
            self.assertAlmostEqual(got, want, places=9)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:  # type: ignore[no-untyped-def]
        launch_testing.asserts.assertExitCodes(proc_info)
