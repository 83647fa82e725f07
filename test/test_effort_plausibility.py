"""Nothing absurd reaches a robot: a sample whose torques exceed effort_limit_factor x the URDF
effort limits is skipped (``effort_out_of_range``), however finite its inputs.

The reference for both the torques and the limits is Pinocchio (its own URDF parser and RNEA).
"""
from __future__ import annotations

import array
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from robots import twin

from liedyn_ros import core
from liedyn_ros.pipeline import DynamicsPipeline, PipelineConfig, SkipReason, config_from_parameters

MS = 1_000_000


def joint_state(stamp_ns: int, names: Any, q: Any, qd: Any, effort: Any = ()) -> Any:
    """An object shaped like an rclpy JointState."""
    sec, nsec = divmod(stamp_ns, 10**9)
    header = SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=nsec), frame_id="")
    return SimpleNamespace(header=header, name=list(names), position=array.array("d", map(float, q)),
                           velocity=array.array("d", map(float, qd)), effort=array.array("d", map(float, effort)))


@pytest.fixture(scope="module")
def panda() -> Any:
    return twin("panda_arm")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(joint=st.integers(0, 6), size=st.floats(-1, 150), seed=st.integers(0, 2**16))
def test_a_sample_is_published_exactly_when_pinocchios_torques_are_within_the_bound(
        panda: Any, joint: int, size: float, seed: int) -> None:
    """The issue's case and its neighbours: one velocity of 0.1-1e150 rad/s (finite) on a Panda at a
    random pose. Before: a 1e154 velocity at rest published a 6e307 N m feedforward. Now the sample
    is published iff Pinocchio's rnea and gravity torques are within 10 x Pinocchio's effort limits,
    and then equal to them; the samples after it equal those of a stream without it."""
    model, pm = panda.model, panda.pin_model
    rng = np.random.default_rng(seed)
    q, qd = rng.uniform(-1, 1, 7), rng.uniform(-0.5, 0.5, 7)
    effort = core.rnea(model, q, qd, np.zeros(7))
    spiked = qd.copy()
    spiked[joint] = 10.0**size
    data = pm.createData()
    tau = np.concatenate((pin.rnea(pm, data, q, spiked, np.zeros(7)), pin.computeGeneralizedGravity(pm, data, q)))
    within = bool(np.isfinite(tau).all() and (np.abs(tau) <= 10 * np.tile(pm.effortLimit, 2)).all())
    pipe, clean = DynamicsPipeline(model, PipelineConfig()), DynamicsPipeline(model, PipelineConfig())
    outs, refs = [], []
    for k in range(30):
        msg = joint_state(10**9 + k * MS, model.joint_names, q, spiked if k == 10 else qd, effort)
        outs.append(pipe.on_joint_state(msg))
        if k != 10:
            refs.append(clean.on_joint_state(msg))
    assert (outs[10] is not None) == within
    if within:
        np.testing.assert_allclose(outs[10].outputs.tau_ff, tau[:7], rtol=1e-9, atol=1e-9)
    else:
        assert pipe.stats.skipped in ({SkipReason.EFFORT_OUT_OF_RANGE: 1}, {SkipReason.NON_FINITE_OUTPUT: 1})
        np.testing.assert_allclose([o.external_torque for o in outs[11:]], [r.external_torque for r in refs[10:]],
                                   rtol=1e-9, atol=1e-9)


def test_a_finite_absurd_velocity_at_rest_is_refused_and_said(panda: Any) -> None:
    """1e100 rad/s: every product finite (1e154, the issue's, overflows the output's sum, and is
    skipped as non_finite_output)."""
    model = panda.model
    lines: list[str] = []
    pipe = DynamicsPipeline(model, PipelineConfig(), log=lines.append)
    qd = np.zeros(7)
    qd[3] = 1e100
    assert pipe.on_joint_state(joint_state(MS, model.joint_names, np.zeros(7), qd)) is None
    assert pipe.stats.skipped == {SkipReason.EFFORT_OUT_OF_RANGE: 1}
    assert "effort_out_of_range" in lines[0] and "effort_limit_factor=10" in lines[0]


def test_no_factor_publishes_what_the_dynamics_give(panda: Any) -> None:
    """effort_limit_factor .inf switches the check off: the absurd torque is Pinocchio's."""
    model, pm = panda.model, panda.pin_model
    q, qd = np.full(7, 0.3), np.zeros(7)
    qd[1] = 1e60
    pipe = DynamicsPipeline(model, PipelineConfig(effort_limit_factor=math.inf))
    out = pipe.on_joint_state(joint_state(MS, model.joint_names, q, qd))
    assert out is not None and pipe.unchecked_note is None
    tau = pin.rnea(pm, pm.createData(), q, qd, np.zeros(7))
    # Terms of 1e120 cancel down to 1e103 in some joints: compare at the scale of the largest.
    np.testing.assert_allclose(out.outputs.tau_ff, tau, rtol=0, atol=1e-9 * np.abs(tau).max())


# A pendulum whose gravity torque (2 * 9.81 * 0.5 + 0.1 * 9.81 * 1 = 10.8 N m) is above 10 x a placeholder
# effort limit of 0.5 N m on "pitch", and a wheel whose URDF gives no effort limit.
PENDULUM = """<robot name="p"><link name="base"/>
  <link name="arm"><inertial><origin xyz="0.5 0 0"/><mass value="2.0"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="wheel"><inertial><mass value="0.1"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
  <joint name="pitch" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="{effort}" velocity="2"/></joint>
  <joint name="spin" type="continuous"><parent link="arm"/><child link="wheel"/><origin xyz="1 0 0"/>
    <axis xyz="1 0 0"/></joint></robot>"""


@pytest.mark.parametrize("effort, published", [(0.5, False), (2.0, True)])
def test_a_gravity_torque_beyond_the_bound_is_refused_naming_the_joint(effort: float, published: bool) -> None:
    xml = PENDULUM.format(effort=effort)
    model, pm = core.load_urdf(xml), pin.buildModelFromXML(xml)
    g = pin.computeGeneralizedGravity(pm, pm.createData(), np.array([0.0, 1.0, 0.0]))  # spin: (cos, sin)
    assert abs(g[0]) > 10 * effort or published
    lines: list[str] = []
    pipe = DynamicsPipeline(model, PipelineConfig(), log=lines.append)
    out = pipe.on_joint_state(joint_state(MS, ["pitch", "spin"], [0.0, 0.0], [0.0, 0.0]))
    assert (out is not None) == published
    if out is None:
        assert "pitch" in lines[0] and f"effort limit {effort:.4g}" in lines[0]
    else:
        np.testing.assert_allclose(out.outputs.tau_g, g, atol=1e-12)
    assert pipe.unchecked_note is not None and "['spin']" in pipe.unchecked_note


@pytest.mark.parametrize("factor", [0.0, 0.5, -1.0, math.nan])
def test_a_factor_below_one_is_refused(factor: float) -> None:
    with pytest.raises(ValueError, match="effort_limit_factor"):
        config_from_parameters({"effort_limit_factor": factor})
