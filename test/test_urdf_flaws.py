"""URDF flaws that ROS and Pinocchio accept load with one warning each; the rest say what to fix.

Each class of flaw is a small URDF string. Accepted flaws are checked three ways: the warning
names the element and the size, rnea equals Pinocchio's on the same XML (the flawed inertia is
used as given), and strict=True refuses the same file.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from liedyn_ros import core
from robots import assert_close, pin_rnea, twin_from_xml

pytestmark = pytest.mark.filterwarnings("ignore::liedyn_ros.core.URDFWarning")

BOX = '<inertial><origin xyz="0 0 -0.2"/><mass value="2"/><inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" ' \
      'iyz="0" izz="0.01"/></inertial>'


def arm(extra_links: str = "", extra_joints: str = "", elbow_inertial: str = BOX, mimic: str = "") -> str:
    """Two revolute joints (shoulder, elbow) hanging from a fixed base, plus what a test adds."""
    return f'''<robot name="arm">
      <link name="base"/><link name="upper">{BOX}</link><link name="fore">{elbow_inertial}</link>{extra_links}
      <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>
        <limit lower="-2" upper="2" effort="50" velocity="2"/></joint>
      <joint name="elbow" type="revolute"><parent link="upper"/><child link="fore"/><origin xyz="0 0 -0.4"/>
        <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="2"/>{mimic}</joint>{extra_joints}
    </robot>'''


# TIAGo's antenna: a 1-milligram link whose inertia is not positive semi-definite, fixed to a moving link.
ANTENNA = arm(
    extra_links='<link name="antenna"><inertial><mass value="0.000001"/><inertia ixx="0.00000002371" '
                'ixy="0.00000006119" ixz="0.00000001179" iyy="0.00000002833" iyz="0.00000000774" '
                'izz="0.00000003849"/></inertial></link>',
    extra_joints='<joint name="antenna_mount" type="fixed"><parent link="fore"/><child link="antenna"/>'
                 '<origin xyz="0.05 0 -0.1"/></joint>')


def load_warned(xml: str, **kw) -> tuple[core.Model, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = core.load_urdf(xml, **kw)
    return model, [str(w.message) for w in caught if issubclass(w.category, core.URDFWarning)]


def random_motion(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, n), rng.normal(size=n), rng.normal(size=n)


def test_non_psd_inertia_loads_with_one_warning_naming_link_and_size() -> None:
    model, said = load_warned(ANTENNA)
    assert len(said) == 1
    assert "'antenna'" in said[0] and "not positive semi-definite" in said[0]
    assert "-3.53e-08 kg m^2" in said[0]  # the smallest eigenvalue of TIAGo's antenna inertia
    assert [(f.kind, f.name) for f in model.flaws] == [("link", "antenna")]
    q, v, a = random_motion(model.n)
    assert_close(core.rnea(model, q, v, a), pin_rnea(twin_from_xml(ANTENNA, False), q, v, a), what="rnea")
    # The antenna's flaw is far below the forearm's inertia: forward dynamics stays defined.
    assert_close(core.aba(model, q, v, core.rnea(model, q, v, a)), a, rel=1e-9, what="aba(rnea(a))")


def test_strict_mode_refuses_the_flaw_naming_the_link() -> None:
    with pytest.raises(core.URDFError, match="'antenna'.*not positive semi-definite.*strict"):
        core.load_urdf(ANTENNA, strict=True)


def test_forward_dynamics_refuses_where_the_flaw_makes_it_meaningless() -> None:
    """A forearm whose moment about the elbow axis is negative: rnea is the formula, aba has no answer."""
    bad = '<inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="-0.05" iyz="0" izz="0.01"/></inertial>'
    xml = arm(elbow_inertial=bad)
    model, said = load_warned(xml)
    assert len(said) == 1 and "'fore'" in said[0] and "-0.05 kg m^2" in said[0]
    q, v, a = random_motion(model.n)
    assert_close(core.rnea(model, q, v, a), pin_rnea(twin_from_xml(xml, False), q, v, a), what="rnea")
    with pytest.raises(core.SingularInertiaError, match="joint 'elbow'.*link 'fore'.*not positive semi-definite"):
        core.aba(model, q, v, np.zeros(model.n))


@pytest.mark.parametrize("mimic, extra, why", [
    ('<mimic joint="index_q1" multiplier="1.06"/>', "", "not in the URDF"),  # alex_psyonic_hands
    ('<mimic joint="mount"/>', '<joint name="mount" type="fixed"><parent link="base"/><child link="cam"/></joint>',
     "fixed joint"),
])
def test_mimic_of_no_moving_joint_moves_on_its_own(mimic: str, extra: str, why: str) -> None:
    xml = arm(mimic=mimic, extra_links='<link name="cam"/>' if extra else "", extra_joints=extra)
    model, said = load_warned(xml)
    assert model.joint_names == ("shoulder", "elbow")
    assert len(said) == 1 and "joint 'elbow'" in said[0] and why in said[0]
    q, v, a = random_motion(model.n)
    assert_close(core.rnea(model, q, v, a), pin_rnea(twin_from_xml(xml, False), q, v, a), what="rnea")
    with pytest.raises(core.URDFError, match="joint 'elbow'.*strict"):
        core.load_urdf(xml, strict=True)


def test_mimic_cycle_is_broken_at_one_joint() -> None:
    xml = arm(mimic='<mimic joint="shoulder" multiplier="2"/>').replace(
        '<axis xyz="0 1 0"/>\n        <limit', '<axis xyz="0 1 0"/><mimic joint="elbow"/>\n        <limit', 1)
    model, said = load_warned(xml)
    assert len(said) == 1 and "cycle" in said[0]
    assert model.n == 1 and model.nb == 2  # one joint moves on its own, the other follows it


@pytest.mark.parametrize("xml, message", [
    (arm().replace('<link name="fore">', '<link name="upper"/><link name="fore">'),
     "link 'upper': defined twice; rename or remove"),
    ('<robot name="empty"></robot>', "has no <link>; if it came from xacro"),
    (arm(extra_links='<link name="stray"/>'), r"one root link.*\['base', 'stray'\]; connect them"),
    (arm().replace('xyz="0 0 -0.4"', 'xyz="0 0 ${-upper_length}"'), "unexpanded xacro expression; expand"),
    (arm().replace('<axis xyz="0 1 0"/><limit lower="-2"', '<axis xyz="0 0 0"/><limit lower="-2"', 1),
     "zero axis; give <axis"),
    (arm().replace('<child link="fore"/>', '<child link="forearm"/>'), "unknown link 'forearm'; add a <link"),
    (arm(elbow_inertial=BOX.replace('value="2"', 'value="-0.5"')), r"'fore': negative mass -0.5; give its <mass"),
])
def test_refusals_say_what_to_fix(xml: str, message: str) -> None:
    with pytest.raises(core.URDFError, match=message):
        core.load_urdf(xml)
