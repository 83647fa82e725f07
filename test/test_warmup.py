"""Cold start: the pipeline answers at once on the reference path while a child process compiles.

The child writes numba's cache and a marker; the pipeline then switches to the compiled kernels
(the same numbers), and a later warm-up finds the marker and starts ready.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from liedyn_ros import core
from liedyn_ros.core.fast.warmup import CONTACT_KERNELS, NODE_KERNELS, KernelWarmup
from liedyn_ros.pipeline import DynamicsPipeline
from test_pipeline import ARM, ARM_XML, rclpy_joint_state


def test_first_samples_use_the_reference_then_the_kernels(tmp_path: Path) -> None:
    model = core.load_urdf(ARM_XML)
    pin_model = pin.buildModelFromXML(ARM_XML)
    pipe = DynamicsPipeline(model)
    marker = tmp_path / "warm"  # no marker yet: the warm-up must start a child
    pipe.start_warmup(KernelWarmup(NODE_KERNELS + ("observer_one",), marker=marker))
    assert pipe.warming_up
    rng = np.random.default_rng(5)

    def sample_matches_pinocchio(stamp_ns: int) -> None:
        q, qd, effort = rng.uniform(-1, 1, 7), rng.normal(size=7), rng.normal(size=7)
        out = pipe.on_joint_state(rclpy_joint_state(stamp_ns, list(ARM), q, qd, effort))
        assert out is not None
        data = pin_model.createData()
        np.testing.assert_allclose(out.outputs.tau_ff, pin.rnea(pin_model, data, q, qd, np.zeros(7)), atol=1e-9)
        np.testing.assert_allclose(out.outputs.qdd_pred, pin.aba(pin_model, data, q, qd, effort), atol=1e-8)

    sample_matches_pinocchio(1)
    assert pipe.stats.reference_samples == 1  # answered while the child was still compiling
    deadline = time.monotonic() + 900  # a cold compile on a loaded 2-core machine
    while pipe.warming_up and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pipe.warming_up
    sample_matches_pinocchio(2)
    sample_matches_pinocchio(3)
    assert pipe.stats.reference_samples == 1 and pipe.stats.published == 3  # the kernels took over
    assert marker.read_text()
    assert not KernelWarmup(NODE_KERNELS + ("observer_one",), marker=marker).compiling  # the next start: at once


class _Compiling:
    """A warm-up whose kernels are still compiling until ``done`` is set."""

    def __init__(self) -> None:
        self.done = False

    @property
    def compiling(self) -> bool:
        return not self.done

    def ready(self) -> bool:
        return self.done

    def close(self) -> None:
        pass


def test_contact_samples_while_compiling_run_no_compiled_code(monkeypatch) -> None:
    """With contacts, the samples taken while the kernels compile run the core's readable paths
    only (every compiled entry point fails here if called) and give the standing Solo12's
    contact-consistent torques, which Pinocchio's statics check; then the kernels take over with
    the same numbers."""
    import contact_sim
    from test_pipeline import odometry, ros_joint_state

    from liedyn_ros.core.fast import entry
    from liedyn_ros.pipeline import PipelineConfig
    from liedyn_ros.robot_data import robots_dir

    urdf = str(robots_dir() / "solo_description/robots/solo12.urdf")
    model = core.load_urdf(urdf, floating_base=True)
    pin_model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    q_pin = contact_sim.standing_posture(pin_model)
    pipe = DynamicsPipeline(model, PipelineConfig(base_link="base_link", contact_links=contact_sim.FEET))
    warmup = _Compiling()
    pipe.start_warmup(warmup)  # type: ignore[arg-type]
    names = [name for name in dir(entry.single) if not name.startswith("_")] + list(CONTACT_KERNELS) + [
        "rnea_one", "gravity_one", "hybrid_one", "observer_one"]

    def forbidden(*args, **kwargs):
        raise AssertionError("a compiled kernel was called while compiling")

    outputs = []
    with monkeypatch.context() as m:
        for name in set(names):
            m.setattr(entry.single, name, forbidden, raising=False)
        for k in (1, 2):
            stamp = k * 1_000_000
            pipe.on_odometry(odometry("rclpy", stamp, q_pin[:3], q_pin[3:7], np.zeros(6), "base_link"))
            out = pipe.on_joint_state(ros_joint_state(stamp, list(model.joint_names), q_pin[7:], np.zeros(12),
                                                      np.zeros(12)))
            assert out is not None
            outputs.append(out.outputs)
    assert pipe.stats.reference_samples == 2
    warmup.done = True
    stamp = 3_000_000
    pipe.on_odometry(odometry("rclpy", stamp, q_pin[:3], q_pin[3:7], np.zeros(6), "base_link"))
    compiled = pipe.on_joint_state(ros_joint_state(stamp, list(model.joint_names), q_pin[7:], np.zeros(12),
                                                   np.zeros(12)))
    assert compiled is not None and not pipe.warming_up and pipe.stats.reference_samples == 2
    # Pinocchio's statics, g(q) = [0; tau] + sum_i J_i^T f_i with the feet's LOCAL linear Jacobians,
    # and the feet carry the weight.
    data = pin_model.createData()
    g = pin.computeGeneralizedGravity(pin_model, data, q_pin)
    pin.computeJointJacobians(pin_model, data, q_pin)
    pin.updateFramePlacements(pin_model, data)
    ids = [pin_model.getFrameId(foot) for foot in contact_sim.FEET]
    J = np.vstack([pin.getFrameJacobian(pin_model, data, i, pin.LOCAL)[:3] for i in ids])
    R = np.array([data.oMf[i].rotation for i in ids])
    for res in (outputs[0], outputs[1], compiled.outputs):
        f = res.contact_wrench[:, 3:]
        np.testing.assert_allclose(np.concatenate([np.zeros(6), res.tau_g]) + J.T @ f.reshape(-1), g,
                                   atol=1e-9 * np.abs(g).max())
        assert np.einsum("kij,kj->ki", R, f)[:, 2].sum() == pytest.approx(9.81 * model.mass)
    np.testing.assert_allclose(outputs[0].tau_g, compiled.outputs.tau_g, atol=1e-9)
    np.testing.assert_allclose(outputs[0].contact_wrench, compiled.outputs.contact_wrench, atol=1e-9)
