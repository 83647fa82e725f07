"""launch_testing test of the managed node (dynamics_lifecycle_node): the test drives its
transitions through the lifecycle services, as ``ros2 lifecycle set`` does (configure,
activate, deactivate, activate, deactivate, cleanup), and checks that outputs flow only while
it is active, that deactivating keeps the model (built once), and that cleanup removes the
publishers. The node ends with exit code 0 and no traceback when launch stops it.

Runs wherever ROS 2 is installed (``colcon test`` or ``pytest`` in a sourced workspace). Without
ROS 2 the whole module is skipped, and pytest -rs prints why.
"""
from __future__ import annotations

import time
import unittest

import pytest

from arms import PENDULUM, require_ros

rclpy = require_ros()

import launch  # noqa: E402
import launch_ros.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

NODE = "liedyn_managed"


@pytest.mark.launch_test
def generate_test_description():  # type: ignore[no-untyped-def]
    node = launch_ros.actions.LifecycleNode(
        package="liedyn_ros", executable="dynamics_lifecycle_node", name=NODE, namespace="",
        parameters=[{"robot_description": PENDULUM}], output="screen",
    )
    return launch.LaunchDescription([node, launch_testing.actions.ReadyToTest()]), {"dynamics": node}


class TestTransitions(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.probe = rclpy.create_node("liedyn_lifecycle_probe")
        cls.change_state = cls.probe.create_client(ChangeState, f"/{NODE}/change_state")
        cls.get_state = cls.probe.create_client(GetState, f"/{NODE}/get_state")
        cls.outputs = 0

        def count(msg: JointState) -> None:
            cls.outputs += 1

        cls.probe.create_subscription(JointState, "/feedforward_torque", count, 10)
        cls.joint_states = cls.probe.create_publisher(JointState, "/joint_states", 10)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.destroy_node()
        rclpy.shutdown()

    def _call(self, client, request):  # type: ignore[no-untyped-def]
        self.assertTrue(client.wait_for_service(timeout_sec=20.0), f"{client.srv_name} not offered")
        future = client.call_async(request)
        rclpy.spin_until_future_complete(self.probe, future, timeout_sec=60.0)
        self.assertTrue(future.done(), f"{client.srv_name}: no answer")
        return future.result()

    def _transition(self, transition: int, expected_state: str) -> None:
        response = self._call(self.change_state, ChangeState.Request(transition=Transition(id=transition)))
        self.assertTrue(response.success, f"transition {transition} refused")
        self.assertEqual(self._call(self.get_state, GetState.Request()).current_state.label, expected_state)

    def _outputs_while_publishing(self, seconds: float, until_first: bool = False) -> int:
        """Outputs received while joint states go out at about 50 Hz for ``seconds`` (or until
        the first output, when ``until_first``)."""
        start = self.outputs
        msg = JointState(name=["swing"], position=[0.4], velocity=[0.0], effort=[1.0])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (until_first and self.outputs > start):
            msg.header.stamp = self.probe.get_clock().now().to_msg()
            self.joint_states.publish(msg)
            rclpy.spin_once(self.probe, timeout_sec=0.02)
        return self.outputs - start

    def _drain(self) -> None:
        """Let outputs already on their way arrive."""
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            rclpy.spin_once(self.probe, timeout_sec=0.05)

    def _publishers(self, expected: int) -> int:
        deadline = time.monotonic() + 10.0
        while self.probe.count_publishers("/feedforward_torque") != expected and time.monotonic() < deadline:
            rclpy.spin_once(self.probe, timeout_sec=0.1)
        return self.probe.count_publishers("/feedforward_torque")

    def test_outputs_flow_only_while_active(self) -> None:
        self.assertEqual(self._call(self.get_state, GetState.Request()).current_state.label, "unconfigured")
        self.assertEqual(self._outputs_while_publishing(1.0), 0)
        self.assertEqual(self._publishers(0), 0)

        self._transition(Transition.TRANSITION_CONFIGURE, "inactive")
        self.assertEqual(self._publishers(1), 1)  # the model is loaded, the publishers exist
        self.assertEqual(self._outputs_while_publishing(1.0), 0)

        self._transition(Transition.TRANSITION_ACTIVATE, "active")
        self.assertGreater(self._outputs_while_publishing(30.0, until_first=True), 0)
        self.assertGreater(self._outputs_while_publishing(1.0), 10)

        self._transition(Transition.TRANSITION_DEACTIVATE, "inactive")
        self._drain()
        self.assertEqual(self._outputs_while_publishing(1.0), 0)

        self._transition(Transition.TRANSITION_ACTIVATE, "active")  # the kept model answers at once
        self.assertGreater(self._outputs_while_publishing(1.0), 10)

        self._transition(Transition.TRANSITION_DEACTIVATE, "inactive")
        self._transition(Transition.TRANSITION_CLEANUP, "unconfigured")
        self._drain()
        self.assertEqual(self._publishers(0), 0)  # everything of the configuration released
        self.assertEqual(self._outputs_while_publishing(1.0), 0)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:  # type: ignore[no-untyped-def]
        launch_testing.asserts.assertExitCodes(proc_info)

    def test_model_built_once_and_no_traceback(self, proc_output, dynamics) -> None:  # type: ignore[no-untyped-def]
        text = "".join(out.text.decode(errors="replace") for out in proc_output[dynamics])
        self.assertEqual(text.count("dynamics model ready"), 1, text)  # deactivate kept it
        self.assertNotIn("Traceback", text)
