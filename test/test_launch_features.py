"""launch_testing test of the node's run-time features, live: a payload set through the parameter
service changes the feedforward torque by the payload's gravity torque, a bad value is refused
with its reason, and an external torque in the measured efforts gives a collision message.

The robot is a two-link arm of point masses swinging about y, so every torque here is a closed
form written below (not the library's numbers). Runs wherever ROS 2 is installed (``colcon
test`` or ``pytest`` in a sourced workspace); without ROS 2 the whole module is skipped, and
pytest -rs prints why.
"""
from __future__ import annotations

import math
import time
import unittest

import pytest

from arms import A1, A2, ARM, JOINTS, L1, M1, M2, require_ros

rclpy = require_ros()

import launch  # noqa: E402
import launch_ros.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

G = 9.81  # gravity along -z
Q = (0.5, -0.3)
# The payload held by the forearm: mass, centre of mass (x, y, z) in the forearm's frame.
PAYLOAD_MASS, PAYLOAD_COM = 0.7, (0.1, 0.0, -0.2)
THRESHOLD, PUSH = 3.0, 5.0  # collision_threshold [N m]; the external torque pushed on the shoulder
NODE = "liedyn_features"


def holding_torques(q: tuple[float, float], payload: float = 0.0) -> tuple[float, float]:
    """Joint torques that hold the arm still at q: tau_i = -G sum_k m_k (x_k - x_joint_i), with
    x the horizontal positions, Ry(t) (x, 0, z) = (x cos t + z sin t, ...)."""
    q1, q12 = q[0], q[0] + q[1]
    x_elbow = -L1 * math.sin(q1)
    masses = [(M1, -A1 * math.sin(q1), False), (M2, x_elbow - A2 * math.sin(q12), True)]
    cx, _, cz = PAYLOAD_COM
    masses.append((payload, x_elbow + cx * math.cos(q12) + cz * math.sin(q12), True))
    shoulder = -G * sum(m * x for m, x, _ in masses)
    elbow = -G * sum(m * (x - x_elbow) for m, x, beyond in masses if beyond)
    return shoulder, elbow


@pytest.mark.launch_test
def generate_test_description():  # type: ignore[no-untyped-def]
    node = launch_ros.actions.Node(
        package="liedyn_ros", executable="dynamics_node", name=NODE, output="screen",
        parameters=[{"robot_description": ARM, "collision_threshold": [THRESHOLD]}],
    )
    return launch.LaunchDescription([node, launch_testing.actions.ReadyToTest()]), {"dynamics": node}


class TestRunTimeFeatures(unittest.TestCase):
    """The tests run in name order on one node: payload set, bad values refused, collision."""

    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.probe = rclpy.create_node("liedyn_features_probe")
        cls.received: dict[str, list] = {"feedforward_torque": [], "external_torque": [], "collision": []}
        for topic, msgs in cls.received.items():
            cls.probe.create_subscription(JointState, f"/{topic}", msgs.append, 100)
        cls.diagnostics: list[DiagnosticArray] = []
        cls.probe.create_subscription(DiagnosticArray, "/diagnostics", cls.diagnostics.append, 100)
        cls.joint_states = cls.probe.create_publisher(JointState, "/joint_states", 10)
        cls.set_parameters_client = cls.probe.create_client(SetParameters, f"/{NODE}/set_parameters")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.destroy_node()
        rclpy.shutdown()

    def publish_until(self, done, effort=None, seconds: float = 20.0) -> None:  # type: ignore[no-untyped-def]
        """Publish the arm at Q (still; effort optional) at 100 Hz, stamped now, until done()."""
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            msg = JointState(name=JOINTS, position=list(Q), velocity=[0.0, 0.0])
            if effort is not None:
                msg.effort = list(effort)
            msg.header.stamp = self.probe.get_clock().now().to_msg()
            self.joint_states.publish(msg)
            end = time.monotonic() + 0.01
            while time.monotonic() < end:
                rclpy.spin_once(self.probe, timeout_sec=max(0.0, end - time.monotonic()))

    def set_parameters(self, **values):  # type: ignore[no-untyped-def]
        """The node's set_parameters service with these values, in this order: one result each."""
        self.assertTrue(self.set_parameters_client.wait_for_service(timeout_sec=20.0))
        request = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
        future = self.set_parameters_client.call_async(request)
        rclpy.spin_until_future_complete(self.probe, future, timeout_sec=20.0)
        self.assertTrue(future.done(), "no answer from set_parameters")
        return future.result().results

    def latest_feedforward_is(self, expected: tuple[float, float]):  # type: ignore[no-untyped-def]
        ff = self.received["feedforward_torque"]
        return lambda: bool(ff) and all(abs(a - b) < 1e-9 for a, b in zip(ff[-1].effort, expected))

    def test_1_payload_set_at_run_time_adds_its_gravity_torque(self) -> None:
        bare = holding_torques(Q)
        self.publish_until(lambda: bool(self.received["feedforward_torque"]))
        ff = self.received["feedforward_torque"]
        self.assertTrue(ff, "no feedforward_torque from the node")
        self.assertEqual(list(ff[-1].name), JOINTS)
        for got, want in zip(ff[-1].effort, bare):
            self.assertAlmostEqual(got, want, places=9)
        # A grasp: the link first (a massless payload), then its mass and centre of mass.
        results = self.set_parameters(payload_link="fore", payload_mass=PAYLOAD_MASS, payload_com=list(PAYLOAD_COM),
                                      payload_inertia=[0.002, 0.0, 0.0, 0.002, 0.0, 0.001])
        self.assertEqual([(r.successful, r.reason) for r in results], [(True, "")] * 4)
        held = holding_torques(Q, PAYLOAD_MASS)
        self.assertGreater(abs(held[0] - bare[0]), 1.0)  # the payload's share is worth checking
        self.publish_until(self.latest_feedforward_is(held))
        for got, want in zip(ff[-1].effort, held):
            self.assertAlmostEqual(got, want, places=9)

    def test_2_bad_values_are_refused_with_their_reason(self) -> None:
        cases = {"payload_mass": -1.0, "payload_com": [0.1, 0.2], "collision_threshold": [1.0, 2.0, 3.0],
                 "payload_link": "no_such_link", "contact_links": ["no_such_link"]}
        for name, value in cases.items():
            (result,) = self.set_parameters(**{name: value})
            self.assertFalse(result.successful, f"{name} = {value} was accepted")
            self.assertIn(name, result.reason)
        # the node computes on as before, with the payload
        self.received["feedforward_torque"].clear()
        self.publish_until(self.latest_feedforward_is(holding_torques(Q, PAYLOAD_MASS)), seconds=5.0)
        self.assertTrue(self.latest_feedforward_is(holding_torques(Q, PAYLOAD_MASS))())

    def test_3_an_external_torque_gives_one_collision(self) -> None:
        held = holding_torques(Q, PAYLOAD_MASS)
        external = self.received["external_torque"]
        # No push: the measured efforts are what the model needs. (On a cold numba cache the
        # observer starts once its kernel is compiled.)
        self.publish_until(lambda: len(external) >= 20, effort=held, seconds=240.0)
        self.assertGreaterEqual(len(external), 20, "no external_torque from the node")
        self.assertLess(max(abs(e) for e in external[-1].effort), 1e-6)
        self.assertEqual(self.received["collision"], [])
        # Something pushes on the shoulder: the motors then apply PUSH less (tau = g - tau_ext).
        pushed = (held[0] - PUSH, held[1])
        start = len(external)
        self.publish_until(lambda: len(external) >= start + 100, effort=pushed)  # 1 s, 50 time constants
        collisions = self.received["collision"]
        self.assertEqual(len(collisions), 1, "one push, one event")
        self.assertEqual(list(collisions[0].name), ["shoulder"])
        self.assertTrue(THRESHOLD < collisions[0].effort[0] <= PUSH, list(collisions[0].effort))
        self.assertAlmostEqual(external[-1].effort[0], PUSH, delta=0.05 * PUSH)
        self.assertAlmostEqual(external[-1].effort[1], 0.0, delta=1e-6)
        statuses = [{kv.key: kv.value for kv in s.values} for d in self.diagnostics for s in d.status]
        self.assertIn("true", [values.get("collision") for values in statuses])
        # The node's own time per sample, reported for the samples of each period that had any.
        timed = [[float(values[f"sample_time_us_{k}"]) for k in ("p50", "p99", "max")] for values in statuses
                 if int(values.get("sample_time_samples", "0")) > 0]
        self.assertTrue(timed, "no sample_time_us_* in /diagnostics")
        for p50, p99, top in timed:
            self.assertTrue(0 < p50 <= p99 <= top < 1e6, (p50, p99, top))


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:  # type: ignore[no-untyped-def]
        launch_testing.asserts.assertExitCodes(proc_info)
