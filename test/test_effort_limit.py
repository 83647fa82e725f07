"""Joints whose URDF sets no effort limit: friction on them is refused until an ``effort_limit``
parameter bounds it, the parameter tightens (never loosens) the URDF's limits, the node's
effort_limit_factor check follows it, and `liedyn-replay --identify` writes the recording's
largest efforts as that bound, so the file it writes is checked again when it is loaded.

References: Pinocchio's parsed effort limits and gravity torques; the recording's own efforts.
"""
from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest
import yaml

from liedyn_ros import core
from liedyn_ros.pipeline import DynamicsPipeline, PipelineConfig
from liedyn_ros.pipeline.payload import dynamics_from
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
