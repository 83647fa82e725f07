"""The Panda description shipped with liedyn_ros (the built-in example's robot, so that the example
needs no example-robot-data) has example-robot-data's Panda dynamics: same joints, limits, torques,
accelerations and mass matrix, to 1e-9, on random states."""
from __future__ import annotations

import numpy as np

from liedyn_ros.core import aba, load_urdf, mass_matrix, rnea
from liedyn_ros.robot_data import panda_urdf, robots_dir


def test_shipped_panda_equals_example_robot_data():
    ours = load_urdf(str(panda_urdf()))
    theirs = load_urdf(str(robots_dir() / "panda_description/urdf/panda.urdf"))
    assert ours.joint_names == theirs.joint_names and ours.n == 8  # 7 arm joints, one finger (the other mimics)
    assert ours.body_names == theirs.body_names
    rng = np.random.default_rng(7)
    q, v, a, tau = (rng.uniform(-2, 2, (200, ours.n)) for _ in range(4))
    for f, args in ((rnea, (q, v, a)), (aba, (q, v, tau)), (mass_matrix, (q,))):
        np.testing.assert_allclose(f(ours, *args), f(theirs, *args), rtol=0, atol=1e-9, err_msg=f.__name__)
    np.testing.assert_array_equal(ours.effort_limit, theirs.effort_limit)
    np.testing.assert_array_equal(ours.velocity_limit, theirs.velocity_limit)
