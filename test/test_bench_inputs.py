"""The latency benchmark's joint states (benchmarks/bench_pipeline.joint_states): its default,
"consistent" efforts are what a robot in normal operation sends, so the node measured on them
opens no collision, while the "random" ones keep one open (the worst case, not the usual one).
Checked through the ROS-free pipeline the node runs, with the node's parameters of each case."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_pipeline import joint_states, seven_dof_panda  # noqa: E402
from test_pipeline import T, odometry, ros_joint_state  # noqa: E402

from liedyn_ros import core  # noqa: E402
from liedyn_ros.pipeline import DynamicsPipeline  # noqa: E402
from liedyn_ros.pipeline.parameters import check_parameters  # noqa: E402
from liedyn_ros.robot_data import robots_dir  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "config"
SOLO = robots_dir() / "solo_description/robots/solo12.urdf"


def cases() -> dict[str, tuple[core.Model, dict, int]]:
    standing = yaml.safe_load((CONFIG / "solo12_contacts.yaml").read_text())["/**"]["ros__parameters"]
    solo = core.load_urdf(str(SOLO), floating_base=True)
    return {"panda": (core.load_urdf(seven_dof_panda()), {}, 0),
            "solo12-contacts": (solo, standing, len(standing["contact_links"]))}


def run(model: core.Model, params: dict, contacts: int, efforts: str, samples: int = 300) -> tuple[int, float]:
    """(collisions started, largest |external torque| after the observer's first 0.1 s) over
    ``samples`` joint states at 1 kHz, the cycle of joint_states repeated."""
    q, v, tau = joint_states(model, efforts, 1000)
    pipe = DynamicsPipeline(model, check_parameters(params, model.joint_names).config)
    flags = T["std_msgs/msg/UInt8MultiArray"](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
                                             data=np.ones(contacts, dtype=np.uint8))
    started, largest = 0, 0.0
    for k in range(samples):
        stamp = 10**9 + k * 10**6
        if model.floating_base:
            pipe.on_odometry(odometry("rosbags", stamp, np.zeros(3), np.array([0, 0, 0, 1.0]), np.zeros(6),
                                      model.root_link))
        if contacts:
            pipe.on_contact_state(flags, stamp)
        i = k % len(q)
        out = pipe.on_joint_state(ros_joint_state(stamp, list(model.joint_names), q[i], v[i], tau[i]))
        if out is None:  # the estimator's first window
            continue
        started += out.collision is not None
        if k >= 100:
            largest = max(largest, float(np.abs(out.external_torque).max()))
    assert pipe.stats.published >= samples - 50, pipe.stats.skipped
    return started, largest


@pytest.mark.parametrize("name", ["panda", "solo12-contacts"])
def test_consistent_efforts_open_no_collision_random_ones_do(name: str) -> None:
    model, params, contacts = cases()[name]
    started, largest = run(model, params, contacts, "consistent")
    assert started == 0
    # the residual of a consistent motion: the estimator's and the observer's discretisation only
    assert largest < 0.01 * np.abs(joint_states(model, "consistent", 1000)[2]).max()
    assert run(model, params, contacts, "random")[0] >= 1


def test_consistent_states_stay_within_the_urdf_limits() -> None:
    model, _, _ = cases()["panda"]
    q, v, tau = joint_states(model, "consistent", 500)
    assert q.shape == v.shape == tau.shape == (500, model.n)
    assert (q > model.lower).all() and (q < model.upper).all()
    assert (np.abs(v) < model.velocity_limit).all() and (np.abs(tau) < model.effort_limit).all()
    # one period: the cycle closes on itself (no jump between its last sample and its first)
    step = np.abs(np.diff(np.vstack([q, q[:1]]), axis=0)).max(axis=0)
    assert (step < 2 * np.abs(v).max(axis=0) / 500).all()
