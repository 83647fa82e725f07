"""Joints whose URDF sets no effort limit: friction on them is refused until an ``effort_limit``
parameter bounds it, the parameter tightens (never loosens) the URDF's limits, the node's
effort_limit_factor check follows it, and `liedyn-replay --identify` writes the recording's
largest efforts as that bound, so the file it writes is checked again when it is loaded; an
effort_limit itself is bounded by the robot's weight and size (effort_bound).

References: Pinocchio's parsed effort limits, gravity torques and frame Jacobians; the recording's
own efforts; the effort limits of real motors in example-robot-data's URDFs.
"""
from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest
import yaml

from liedyn_ros import core
from liedyn_ros.core.identification.plausibility import EFFORT_FACTOR, PAYLOAD_FACTOR, effort_bound
from liedyn_ros.core.model import urdf_limit
from liedyn_ros.pipeline import DynamicsPipeline, PipelineConfig
from liedyn_ros.pipeline.payload import dynamics_from
from robots import ROBOT_FILES, twin_from_xml, urdf_text
from test_effort_plausibility import MS, PENDULUM, joint_state
from test_identification_safety import PANDA, bag_of, replay, summary, synthetic, write_urdf


def test_friction_without_any_effort_limit_is_refused_naming_the_joint() -> None:
    model = core.load_urdf(PENDULUM.format(effort=2.0))  # "spin": no <limit> in the URDF
    with pytest.raises(ValueError, match=r"spin: friction .* cannot be checked.*effort_limit"):
        dynamics_from(model, {"friction_coulomb": [0.1, 0.2]})
    assert dynamics_from(model, {"friction_coulomb": [0.1, 0.0]}).friction is None  # nothing on spin: nothing to bound
    bounded = dynamics_from(model, {"friction_coulomb": [0.1, 0.2], "effort_limit": [0.0, 1.0]})
    assert bounded.model.effort_limit[1] == 1.0
    with pytest.raises(ValueError, match=r"spin: friction torque 5 .* exceeds the effort limit 1"):
        dynamics_from(model, {"friction_coulomb": [0.1, 5.0], "effort_limit": [0.0, 1.0]})


@pytest.mark.parametrize("given", [[-1.0], [float("nan")], [1.0, 2.0, 3.0]])
def test_a_bad_effort_limit_is_refused(given: list[float]) -> None:
    with pytest.raises(ValueError, match="effort_limit"):
        dynamics_from(core.load_urdf(PENDULUM.format(effort=2.0)), {"effort_limit": given})


def test_effort_limit_tightens_the_urdf_limits_as_pinocchio_reads_them() -> None:
    given = np.array([100.0, 0.0, 5.0, 1e3, 0.0, 20.0, 1.0])
    model = dynamics_from(core.load_urdf(PANDA), {"effort_limit": given.tolist()}).model
    urdf = pin.buildModelFromXML(PANDA).effortLimit
    assert urdf.shape == (7,) and np.all(urdf > 0)
    np.testing.assert_array_equal(model.effort_limit, np.where(given > 0, np.minimum(urdf, given), urdf))


def test_the_published_torque_check_follows_effort_limit() -> None:
    """The pendulum's gravity torque (Pinocchio) is within 10 x the URDF's 2 N m but not within
    10 x an effort_limit of 0.5 N m: published with the URDF's limit, skipped with the parameter."""
    xml = PENDULUM.format(effort=2.0)
    pm = pin.buildModelFromXML(xml)
    g = pin.computeGeneralizedGravity(pm, pm.createData(), np.array([0.0, 1.0, 0.0]))
    assert 10 * 0.5 < abs(g[0]) < 10 * 2.0
    for limit, published in (([0.0, 0.0], True), ([0.5, 1.0], False)):
        lines: list[str] = []
        pipe = DynamicsPipeline(dynamics_from(core.load_urdf(xml), {"effort_limit": limit}).model, PipelineConfig(),
                                log=lines.append)
        out = pipe.on_joint_state(joint_state(MS, ["pitch", "spin"], [0.0, 0.0], [0.0, 0.0]))
        assert (out is not None) == published, lines
        if out is None:
            assert "pitch" in lines[0] and "effort limit 0.5" in lines[0]
        assert (pipe.unchecked_note is None) == (limit[1] > 0)


def test_identified_file_bounds_unlimited_joints_by_the_recorded_efforts(tmp_path, capsys) -> None:
    """A Panda URDF with every effort limit zeroed (a placeholder): --identify friction writes
    effort_limit = the recording's largest |effort| per joint, or the identified friction at the
    velocity limit where more; the file loads as written, and the same file with one joint's
    friction above that bound is refused naming it."""
    unlimited = re.sub(r'effort="[^"]*"', 'effort="0"', PANDA)
    model = core.load_urdf(unlimited)
    rec = synthetic(model, 8.0)
    bag, urdf = bag_of(tmp_path, rec), write_urdf(tmp_path, unlimited)
    assert replay(bag, urdf, tmp_path / "fit", "--identify", "friction") == 0
    written = yaml.safe_load((tmp_path / "fit" / "identified.yaml").read_text())["/**"]["ros__parameters"]
    speed = pin.buildModelFromXML(unlimited).velocityLimit
    at_limit = (np.array(written["friction_coulomb"]) + np.abs(written["friction_offset"])
                + np.array(written["friction_viscous"]) * speed)
    np.testing.assert_allclose(written["effort_limit"], np.maximum(np.abs(rec.effort).max(0), at_limit), rtol=1e-12)
    assert np.any(np.abs(rec.effort).max(0) > at_limit)  # both sides of the max are exercised
    assert summary(tmp_path / "fit")["identification"]["node_parameters"]["effort_limit"] == written["effort_limit"]
    assert replay(bag, urdf, tmp_path / "loaded", "--params", str(tmp_path / "fit" / "identified.yaml")) == 0
    tampered = tmp_path / "tampered.yaml"
    written["friction_coulomb"][3] = 2 * written["effort_limit"][3]
    tampered.write_text(yaml.safe_dump({"/**": {"ros__parameters": written}}))
    assert replay(bag, urdf, tmp_path / "refused", "--params", str(tampered)) == 2
    assert "panda_joint4: friction torque" in capsys.readouterr().err


def _static_loads(model: core.Model, pm: pin.Model, joint_order: list[str], samples: int, seed: int) -> np.ndarray:
    """Largest |torque| per joint (model order) that Pinocchio computes for the robot's weight in a
    random direction plus a force of PAYLOAD_FACTOR times that weight on one of its links (a
    payload, or the ground under a foot), over random configurations, links and directions."""
    rng = np.random.default_rng(seed)
    data, g0 = pm.createData(), 9.80665
    idx_v = np.array([pm.joints[pm.getJointId(name)].idx_v for name in model.joint_names])
    lower, upper = np.maximum(pm.lowerPositionLimit, -3.0), np.minimum(pm.upperPositionLimit, 3.0)
    frames = [i for i, f in enumerate(pm.frames) if f.type == pin.FrameType.BODY]
    worst = np.zeros(model.n)
    for _ in range(samples):
        q = pin.randomConfiguration(pm, lower, upper)
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        pm.gravity = pin.Motion(np.r_[g0 * direction, 0.0, 0.0, 0.0])
        gravity = pin.computeGeneralizedGravity(pm, data, q)
        pin.computeJointJacobians(pm, data, q)
        pin.updateFramePlacements(pm, data)
        f = PAYLOAD_FACTOR * model.mass * g0 * direction
        for frame in frames:
            J = pin.getFrameJacobian(pm, data, frame, pin.LOCAL_WORLD_ALIGNED)
            worst = np.maximum(worst, np.abs(gravity + J[:3].T @ f)[idx_v])
    return worst


@pytest.mark.parametrize("name", ["panda", "ur5", "solo12", "talos"])
def test_effort_bound_exceeds_every_static_load_and_every_real_motor(name: str) -> None:
    """effort_bound / EFFORT_FACTOR is at least every static torque Pinocchio computes for the
    robot's weight and a payload-sized force (what the bound claims); the URDF effort limits of
    real motors (Panda, UR5, Talos datasheets) lie within effort_bound, and the 1000 N m placeholder
    of the ODRI Solo12 URDF (a 2.5 kg robot with 2.7 N m motors) lies beyond it."""
    twin = twin_from_xml(urdf_text(name), ROBOT_FILES[name][1])
    static = effort_bound(twin.model) / EFFORT_FACTOR
    loads = _static_loads(twin.model, twin.pin_model, twin.joint_order, samples=40, seed=1)
    assert np.all(loads <= static) and loads.max() > 0.05 * static.max()  # a bound, not a vacuous one
    limits = urdf_limit(twin.model.effort_limit)
    assert np.all(np.isfinite(limits))
    if name == "solo12":
        assert np.all(limits == 1000.0) and np.all(limits > effort_bound(twin.model))
    else:
        assert np.all(limits <= effort_bound(twin.model))


def test_an_effort_limit_beyond_the_bound_is_refused_even_with_friction_to_match() -> None:
    """The gap a consistent tampering left open: effort_limit 1e9 and Coulomb friction 1e4 on a
    joint the URDF leaves unbounded passed the friction check (1e4 < 1e9); the bound refuses it,
    naming the joint, and accepts the same file with a motor-sized limit."""
    unlimited = re.sub(r'effort="[^"]*"', 'effort="0"', PANDA)
    model = core.load_urdf(unlimited)
    limit, coulomb = np.full(7, 100.0), np.full(7, 1.0)

    def load() -> object:
        return dynamics_from(model, {"effort_limit": limit.tolist(), "friction_coulomb": coulomb.tolist(),
                                     "friction_compensation": True}).friction

    assert load() is not None
    limit[3], coulomb[3] = 1e9, 1e4
    with pytest.raises(ValueError, match=r"panda_joint4: effort_limit 1e\+09 exceeds .*unit mistake") as err:
        load()
    assert "panda_joint3" not in str(err.value)
    given = np.full(7, 1e9)  # where the URDF sets a limit, effort_limit only tightens it: nothing to refuse
    assert np.array_equal(dynamics_from(core.load_urdf(PANDA), {"effort_limit": given.tolist()}).model.effort_limit,
                          core.load_urdf(PANDA).effort_limit)
