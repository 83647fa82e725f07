"""The node survives what it is sent (issue 20, "The node"): no exception in a model build, a
parameter change or a callback ends it, the previous model stays, and /diagnostics says why.

Runs the node's own code (dynamics_node.DynamicsNode) on the stand-in rclpy of fake_ros, so it
runs without ROS; test_launch_features.py runs the node under a real ROS 2. Torques are checked
against Pinocchio.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fake_ros import Node, Parameter, load_node_module
from liedyn_ros import core
from test_node_robustness import ARM, JOINTS, MS, Q, held_still, pin_gravity

TROUBLE = "<robot name='deep'/>"  # the description whose loading raises (see refusing_loader)


@pytest.fixture
def node_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    Node.OVERRIDES = {}
    return load_node_module(monkeypatch)


def refusing_loader(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """core.load_urdf raising ``exc`` for TROUBLE (as the recursive traversal did with a chain of
    a thousand links: RecursionError), loading anything else."""
    load = core.load_urdf

    def loader(source: str, *args: Any, **kwargs: Any) -> Any:
        if source == TROUBLE:
            raise exc
        return load(source, *args, **kwargs)
    monkeypatch.setattr(core, "load_urdf", loader)


def make_node(node_module: Any, **parameters: Any) -> Any:
    Node.OVERRIDES = parameters
    return node_module.DynamicsNode()


def feed(node: Any, stamps: list[int], tau_ext: Any = (0.0, 0.0)) -> int:
    """Send joint states of the arm held still; returns how many feedforward torques went out."""
    out = node.outputs["feedforward_torque"]
    before = len(out.sent)
    for msg in held_still(stamps, np.asarray(tau_ext)):
        node.callbacks["joint_states"](msg)
    return len(out.sent) - before


def diagnostics(node: Any) -> Any:
    """The status the diagnostics timer publishes now."""
    node.timers[0].callback()
    return node.outputs["/diagnostics"].sent[-1].status[0]


EXCEPTIONS = [RecursionError("maximum recursion depth exceeded"), MemoryError("bad allocation"),
              KeyError("link"), RuntimeError("anything")]


@pytest.mark.parametrize("exc", EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_a_description_that_raises_at_startup_leaves_the_node_waiting(
        node_module: Any, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    refusing_loader(monkeypatch, exc)
    node = make_node(node_module, robot_description=TROUBLE)
    status = diagnostics(node)
    assert status.level == bytes([2]) and type(exc).__name__ in status.message  # ERROR, saying why
    node.set_parameters([Parameter("robot_description", value=ARM)])
    assert feed(node, [k * MS for k in range(1, 11)]) == 10


@pytest.mark.parametrize("exc", EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_a_description_on_the_topic_that_raises_keeps_the_previous_model(
        node_module: Any, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    refusing_loader(monkeypatch, exc)
    node = make_node(node_module)
    node.callbacks["robot_description"](SimpleNamespace(data=ARM))
    assert feed(node, [k * MS for k in range(1, 11)]) == 10
    diagnostics(node)
    node.callbacks["robot_description"](SimpleNamespace(data=TROUBLE))
    assert feed(node, [k * MS for k in range(11, 21)]) == 10
    status = diagnostics(node)
    assert status.level == bytes([1]) and "previous model is kept" in status.message
    assert type(exc).__name__ in status.message
    values = {v.key: v.value for v in status.values}
    assert values["node_errors"] == "1" and type(exc).__name__ in values["last_node_error"]
    assert "previous model is kept" not in diagnostics(node).message  # named once
    np.testing.assert_allclose(node.outputs["gravity_torque"].sent[-1].effort, pin_gravity(Q), atol=1e-12)


@pytest.mark.parametrize("exc", EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_a_description_set_at_run_time_that_raises_is_refused(
        node_module: Any, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """``ros2 param set robot_description``: refused with the error as its reason, the node and
    its model go on."""
    refusing_loader(monkeypatch, exc)
    node = make_node(node_module, robot_description=ARM)
    [result] = node.set_parameters([Parameter("robot_description", value=TROUBLE)])
    assert not result.successful and type(exc).__name__ in result.reason
    assert node.get_parameter("robot_description").value == ARM
    assert feed(node, [k * MS for k in range(1, 11)]) == 10


def test_a_deep_chain_description_never_ends_the_node(node_module: Any) -> None:
    """A real chain of 1,500 links (a RecursionError in a recursive loader): accepted or refused,
    the node answers the next joint states."""
    links = "".join(f'<link name="l{i}"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" '
                    f'iyy="0.01" iyz="0" izz="0.01"/></inertial></link>' for i in range(1501))
    joints = "".join(f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
                     f'<origin xyz="0 0 0.01"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" '
                     f'velocity="1"/></joint>' for i in range(1500))
    node = make_node(node_module, robot_description=ARM)
    [result] = node.set_parameters([Parameter("robot_description", value=f'<robot name="deep">{links}{joints}</robot>')])
    assert result.successful or result.reason
    node.callbacks["joint_states"](b"\x00\x01\x00\x00 not a joint state")  # a caught error, nothing more
    if not result.successful:
        assert feed(node, [k * MS for k in range(1, 6)]) == 5


def test_a_callback_that_raises_is_counted_and_the_node_goes_on(node_module: Any, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    node = make_node(node_module, robot_description=ARM)
    contents = node._factory.contents
    monkeypatch.setattr(node._factory, "contents", lambda out, wanted: (_ for _ in ()).throw(RuntimeError("boom")))
    assert feed(node, [MS]) == 0
    monkeypatch.setattr(node._factory, "contents", contents)
    assert feed(node, [2 * MS]) == 1
    status = diagnostics(node)
    assert "joint state: RuntimeError: boom" in status.message
    assert any(level == "error" and "Traceback" in text for level, text in node.lines)


def test_a_clock_reset_keeps_the_outputs_flowing(node_module: Any) -> None:
    """A simulator reset through the node: every joint state after the jump back is answered, the
    external torque starts over from zero, and /diagnostics names the reset once."""
    node = make_node(node_module, robot_description=ARM)
    assert feed(node, [100 * 10**9 + k * MS for k in range(100)], (1.0, 0.5)) == 100
    diagnostics(node)
    assert feed(node, [10**9], (1.0, 0.5)) == 1
    # The observer's first sample after the reset. (The node refills one external_torque message.)
    np.testing.assert_allclose(node.outputs["external_torque"].sent[-1].effort, 0.0, atol=1e-12)
    assert feed(node, [10**9 + k * MS for k in range(1, 100)], (1.0, 0.5)) == 99
    first, second = diagnostics(node), diagnostics(node)
    assert "clock reset" in first.message and first.level == bytes([1])
    assert "clock reset" not in second.message and second.level == bytes([0])


@pytest.mark.parametrize("period", [0.0, -1.0, float("inf")])
def test_a_diagnostics_period_that_is_not_positive_is_refused(node_module: Any, period: float) -> None:
    """At startup: the timer keeps the default period (0 would spin it, a negative one end the
    node) and the model says why; at run time: refused."""
    node = make_node(node_module, robot_description=ARM, diagnostics_period=period)
    assert node.timers[0].period == 1.0
    assert "diagnostics_period" in diagnostics(node).message
    node = make_node(node_module, robot_description=ARM)
    [result] = node.set_parameters([Parameter("diagnostics_period", value=period)])
    assert not result.successful and "diagnostics_period" in result.reason
    assert feed(node, [k * MS for k in range(1, 4)]) == 3


def test_the_stand_in_publishes_real_torques(node_module: Any) -> None:
    """The harness itself: a joint state in, Pinocchio's gravity torques out."""
    node = make_node(node_module, robot_description=ARM)
    feed(node, [MS])
    msg = node.outputs["gravity_torque"].sent[-1]
    assert list(msg.name) == JOINTS
    np.testing.assert_allclose(msg.effort, pin_gravity(Q), atol=1e-12)
