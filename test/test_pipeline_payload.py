"""Payload and friction in the pipeline: the node's parameters, an atomic swap, smooth compensation.

References: the payload model against Pinocchio's rnea of the URDF with the payload written in as
a fixed link (as in test_identification_core), friction against its formula written out here.
"""
from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest

from liedyn_ros import core
from liedyn_ros.pipeline import AccelerationSource, DynamicsPipeline, PipelineConfig
from liedyn_ros.pipeline.payload import DYNAMICS_PARAMETERS, dynamics_from
from test_pipeline import ARM, ARM_XML, ros_joint_state

PAYLOAD = {"payload_link": "panda_hand", "payload_mass": 0.8, "payload_com": [0.01, 0.0, 0.05],
           "payload_inertia": [0.002, 0.0, 0.0, 0.002, 0.0, 0.001]}
FRICTION = {"friction_compensation": True, "friction_coulomb": [1.0, 1.2, 1.4, 1.6, 0.8, 0.6, 0.4],
            "friction_viscous": [0.5], "friction_offset": [0.05], "friction_smoothing": 0.02}


@pytest.fixture(scope="module")
def arm():
    return core.load_urdf(ARM_XML)


def pin_with_payload() -> tuple[pin.Model, pin.Data]:
    c, I = PAYLOAD["payload_com"], PAYLOAD["payload_inertia"]
    link = (f'<link name="load"><inertial><origin xyz="{c[0]} {c[1]} {c[2]}"/><mass value="{PAYLOAD["payload_mass"]}"/>'
            f'<inertia ixx="{I[0]}" ixy="{I[1]}" ixz="{I[2]}" iyy="{I[3]}" iyz="{I[4]}" izz="{I[5]}"/></inertial>'
            '</link><joint name="load_weld" type="fixed"><parent link="panda_hand"/><child link="load"/></joint></robot>')
    model = pin.buildModelFromXML(ARM_XML.replace("</robot>", link))
    return model, model.createData()


def friction_formula(qd: np.ndarray) -> np.ndarray:
    fc = np.array(FRICTION["friction_coulomb"])
    return fc * np.tanh(qd / FRICTION["friction_smoothing"]) + 0.5 * qd + 0.05


def test_parameters_give_the_payload_model_and_friction_compensation(arm) -> None:
    dyn = dynamics_from(arm, PAYLOAD | FRICTION)
    pipe = DynamicsPipeline(dyn.model, PipelineConfig(), friction=dyn.friction)
    rng = np.random.default_rng(3)
    q, qd = rng.uniform(-1, 1, 7), rng.normal(size=7)
    out = pipe.on_joint_state(ros_joint_state(10**9, list(ARM), q, qd))
    pm, data = pin_with_payload()
    want = pin.rnea(pm, data, q, qd, np.zeros(7)) + friction_formula(qd)
    np.testing.assert_allclose(out.outputs.tau_ff, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.outputs.tau_g, pin.computeGeneralizedGravity(pm, data, q), rtol=1e-10, atol=1e-10)


def test_compensation_is_smooth_through_zero_velocity(arm) -> None:
    """Feedforward torque along velocities crossing zero: steps bounded by the tanh's slope
    (Coulomb / smoothing), no jump of twice the Coulomb level as a sign function would make."""
    dyn = dynamics_from(arm, FRICTION)
    pipe = DynamicsPipeline(dyn.model, PipelineConfig(), friction=dyn.friction)
    speeds = np.linspace(-1e-3, 1e-3, 41)
    tau = np.array([pipe.on_joint_state(ros_joint_state(10**9 + k, list(ARM), np.zeros(7), np.full(7, s))).outputs.tau_ff
                    for k, s in enumerate(speeds)])
    slope = np.array(FRICTION["friction_coulomb"]) / FRICTION["friction_smoothing"] + 0.5
    assert np.all(np.abs(np.diff(tau, axis=0)) <= slope * (speeds[1] - speeds[0]) * 1.001)
    np.testing.assert_allclose(tau[-1] - tau[0], friction_formula(speeds[-1]) - friction_formula(speeds[0]),
                               rtol=1e-9)


def test_swap_changes_the_model_between_samples_and_keeps_the_estimator(arm) -> None:
    pipe = DynamicsPipeline(arm, PipelineConfig(acceleration_source=AccelerationSource.ESTIMATED,
                                                estimator_min_samples=3))
    q, qd = np.full(7, 0.3), np.full(7, 0.2)
    outs = [pipe.on_joint_state(ros_joint_state(10**9 + k * 10**6, list(ARM), q, qd)) for k in range(4)]
    assert outs[-1] is not None
    pipe.set_dynamics(dynamics_from(arm, PAYLOAD))
    after = pipe.on_joint_state(ros_joint_state(10**9 + 4 * 10**6, list(ARM), q, qd))
    assert after is not None  # no new warm-up: the estimator was kept
    pm, data = pin_with_payload()
    np.testing.assert_allclose(after.outputs.tau_g, pin.computeGeneralizedGravity(pm, data, q), rtol=1e-10, atol=1e-10)
    assert np.abs(after.outputs.tau_g - outs[-1].outputs.tau_g).max() > 0.1
    with pytest.raises(ValueError, match="same joints"):
        pipe.set_dynamics(dynamics_from(core.load_urdf(re.sub(r'type="revolute"', 'type="fixed"', ARM_XML, 1)), {}))


@pytest.mark.parametrize("values, name", [
    ({"payload_link": "no_such_link"}, "payload_link"),
    ({"payload_link": "panda_hand", "payload_mass": -1.0}, "payload_mass"),
    ({"payload_mass": 1.0}, "payload_mass"),
    ({"payload_link": "panda_hand", "payload_com": [0.0, 0.0]}, "payload_com"),
    ({"friction_compensation": True, "friction_coulomb": [1.0, 2.0]}, "friction_coulomb"),
    ({"friction_viscous": [1.0, 2.0]}, "friction_viscous"),  # refused even while compensation is off
    ({"friction_compensation": True, "friction_smoothing": 0.0}, "friction_smoothing"),
    ({"inertial_parameters": [1.0, 2.0]}, "inertial_parameters"),
])
def test_bad_parameters_name_themselves(arm, values, name) -> None:
    with pytest.raises(ValueError, match=f"^{name}"):
        dynamics_from(arm, values)


def test_defaults_change_nothing(arm) -> None:
    dyn = dynamics_from(arm, {k: d for k, (d, _) in DYNAMICS_PARAMETERS.items()})
    assert dyn.friction is None and dyn.model is arm
