"""Cold start: the pipeline answers at once on the reference path while a child process compiles.

The child writes numba's cache and a marker; the pipeline then switches to the compiled kernels
(the same numbers), and a later warm-up finds the marker and starts ready.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pinocchio as pin

from liedyn_ros import core
from liedyn_ros.core.fast.warmup import NODE_KERNELS, KernelWarmup
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
