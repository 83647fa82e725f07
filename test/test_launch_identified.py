"""launch_testing test: a parameter file as liedyn-replay --identify writes it loads into the node
under a real ROS 2 (``--params-file``) and changes the feedforward by exactly what it says, and the
same file tampered (a Coulomb friction of 1e4 N m) is refused, the node saying why in /diagnostics
and publishing nothing.

The robot is test/arms.py's two-link arm of point masses (with URDF effort and velocity limits, which
the plausibility check reads); the file's payload is a point mass on the forearm. The expected
torques are written below from the masses' positions alone (their Jacobians and accelerations by
finite differences), not from the library. Runs wherever ROS 2 is installed; without it the module
is skipped (pytest -rs says why).
"""
from __future__ import annotations

import math
import tempfile
import time
import unittest
from pathlib import Path

import pytest
from arms import A1, A2, ARM, JOINTS, L1, M1, M2, require_ros

rclpy = require_ros()

import launch  # noqa: E402
import launch_ros.actions  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from liedyn_ros.replay.identify import parameter_file  # noqa: E402

G = 9.81
LIMITED_ARM = ARM.replace('<axis xyz="0 1 0"/></joint>', '<axis xyz="0 1 0"/><limit effort="50" velocity="3"/></joint>')
Q, QD = (0.5, -0.3), (0.4, -0.7)
PAYLOAD_MASS, PAYLOAD_COM = 0.7, (0.1, 0.0, -0.2)
COULOMB, VISCOUS, OFFSET, SMOOTHING = (1.5, 0.8), (0.6, 0.3), (0.05, -0.02), 0.01
IDENTIFIED = {
    "payload_link": "fore", "payload_mass": PAYLOAD_MASS, "payload_com": list(PAYLOAD_COM),
    "payload_inertia": [0.0] * 6,
    "friction_coulomb": list(COULOMB), "friction_viscous": list(VISCOUS), "friction_offset": list(OFFSET),
    "friction_smoothing": SMOOTHING, "friction_compensation": True,
}
TAMPERED = IDENTIFIED | {"friction_coulomb": [1e4, COULOMB[1]]}


def positions(q: tuple[float, float]) -> list[tuple[float, float, float]]:
    """(mass, x, z) of the upper arm's, the forearm's and the payload's point masses at q (hinges
    about y: R_y(t) (x, z) = (x cos t + z sin t, -x sin t + z cos t))."""
    def rot(t: float, x: float, z: float) -> tuple[float, float]:
        return x * math.cos(t) + z * math.sin(t), -x * math.sin(t) + z * math.cos(t)
    q1, q12 = q[0], q[0] + q[1]
    elbow = rot(q1, 0.0, -L1)
    fore, load = rot(q12, 0.0, -A2), rot(q12, PAYLOAD_COM[0], PAYLOAD_COM[2])
    return [(M1, *rot(q1, 0.0, -A1)), (M2, elbow[0] + fore[0], elbow[1] + fore[1]),
            (PAYLOAD_MASS, elbow[0] + load[0], elbow[1] + load[1])]


def expected_feedforward() -> list[float]:
    """tau_i = sum_k m_k dp_k/dq_i . (a_k + G z) at qdd = 0 (a_k = d2/dt2 p_k(q + t qd)), plus
    the friction tau_f = c tanh(qd / eps) + v qd + o."""
    h = 1e-4
    def along(t: float) -> list[tuple[float, float, float]]:
        return positions((Q[0] + t * QD[0], Q[1] + t * QD[1]))
    acc = [((xp - 2 * x0 + xm) / h**2, (zp - 2 * z0 + zm) / h**2)
           for (_, xp, zp), (_, x0, z0), (_, xm, zm) in zip(along(h), along(0.0), along(-h))]
    tau = []
    for i in range(2):
        dq = [h if j == i else 0.0 for j in range(2)]
        plus = positions((Q[0] + dq[0], Q[1] + dq[1]))
        minus = positions((Q[0] - dq[0], Q[1] - dq[1]))
        rigid = sum(m * ((xp - xm) * ax + (zp - zm) * (az + G)) / (2 * h)
                    for (m, xp, zp), (_, xm, zm), (ax, az) in zip(plus, minus, acc))
        tau.append(rigid + COULOMB[i] * math.tanh(QD[i] / SMOOTHING) + VISCOUS[i] * QD[i] + OFFSET[i])
    return tau


@pytest.mark.launch_test
def generate_test_description():  # type: ignore[no-untyped-def]
    folder = Path(tempfile.mkdtemp(prefix="liedyn_identified_"))
    nodes = {}
    for name, params in (("identified", IDENTIFIED), ("tampered", TAMPERED)):
        path = folder / f"{name}.yaml"
        path.write_text(parameter_file(params))
        nodes[name] = launch_ros.actions.Node(
            package="liedyn_ros", executable="dynamics_node", name=f"liedyn_{name}", namespace=name,
            output="screen", parameters=[{"robot_description": LIMITED_ARM}, str(path)])
    return launch.LaunchDescription([*nodes.values(), launch_testing.actions.ReadyToTest()]), nodes


class TestIdentifiedFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.probe = rclpy.create_node("liedyn_identified_probe")
        cls.feedforward: dict[str, list] = {"identified": [], "tampered": []}
        cls.publishers = {}
        for name, msgs in cls.feedforward.items():
            cls.probe.create_subscription(JointState, f"/{name}/feedforward_torque", msgs.append, 100)
            cls.publishers[name] = cls.probe.create_publisher(JointState, f"/{name}/joint_states", 10)
        cls.diagnostics: list[DiagnosticArray] = []
        cls.probe.create_subscription(DiagnosticArray, "/diagnostics", cls.diagnostics.append, 100)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.destroy_node()
        rclpy.shutdown()

    def publish_until(self, done, seconds: float = 30.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            for publisher in self.publishers.values():
                msg = JointState(name=JOINTS, position=list(Q), velocity=list(QD))
                msg.header.stamp = self.probe.get_clock().now().to_msg()
                publisher.publish(msg)
            end = time.monotonic() + 0.01
            while time.monotonic() < end:
                rclpy.spin_once(self.probe, timeout_sec=max(0.0, end - time.monotonic()))

    def refusal(self) -> str | None:
        for array in self.diagnostics:
            for status in array.status:
                if "liedyn_tampered" in status.name and "implausible" in status.message:
                    return str(status.message)
        return None

    def test_the_identified_file_sets_the_feedforward_it_says(self) -> None:
        ff = self.feedforward["identified"]
        self.publish_until(lambda: bool(ff))
        self.assertTrue(ff, "no feedforward_torque from the node loaded with the identified file")
        self.assertEqual(list(ff[-1].name), JOINTS)
        for got, want in zip(ff[-1].effort, expected_feedforward()):
            self.assertAlmostEqual(got, want, delta=1e-6 * max(1.0, abs(want)))

    def test_the_tampered_file_is_refused_with_its_reason(self) -> None:
        self.publish_until(lambda: self.refusal() is not None and bool(self.feedforward["identified"]))
        reason = self.refusal()
        self.assertIsNotNone(reason, "no /diagnostics refusal from the node loaded with the tampered file")
        self.assertIn("shoulder", reason)
        self.assertIn("friction", reason)
        self.assertEqual(self.feedforward["tampered"], [])


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:  # type: ignore[no-untyped-def]
        launch_testing.asserts.assertExitCodes(proc_info)
