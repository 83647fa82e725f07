"""URDFs: load what ROS' parser (urdfdom) and Pinocchio load; refuse what is broken, naming the element.

Each case is a small URDF string (an arm of three joints, the last a mimic of the second) with
one thing changed. Accepted quirks load exactly like the clean arm; refusals are URDFErrors
naming the joint or link and the attribute; the fuzz test feeds arbitrary attribute values and
asserts that the loader either names the element or gives a model whose dynamics are finite.
"""
from __future__ import annotations

import warnings
from xml.sax.saxutils import quoteattr

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liedyn_ros import core

pytestmark = pytest.mark.filterwarnings("ignore::liedyn_ros.core.URDFWarning")

# Every numeric attribute the loader reads, as (owner element, tag, attribute, clean value).
FIELDS = [
    ("upper", "origin", "xyz", "0 0 -0.2"), ("upper", "origin", "rpy", "0.1 0 0"),
    ("upper", "mass", "value", "2"),
    ("upper", "inertia", "ixx", "0.02"), ("upper", "inertia", "ixy", "0.001"), ("upper", "inertia", "ixz", "0"),
    ("upper", "inertia", "iyy", "0.02"), ("upper", "inertia", "iyz", "0"), ("upper", "inertia", "izz", "0.01"),
    ("elbow", "origin", "xyz", "0 0 -0.4"), ("elbow", "origin", "rpy", "0 0.2 0"), ("elbow", "axis", "xyz", "0 1 0"),
    ("elbow", "limit", "lower", "-2"), ("elbow", "limit", "upper", "2"),
    ("elbow", "limit", "effort", "50"), ("elbow", "limit", "velocity", "2"),
    ("wrist", "mimic", "multiplier", "0.5"), ("wrist", "mimic", "offset", "0.1"),
]


def arm(**values: str) -> str:
    """The arm with attributes replaced: arm(**{"elbow.limit.upper": "nan"}), values unescaped."""
    v = {f"{o}.{t}.{a}": quoteattr(values.get(f"{o}.{t}.{a}", clean)) for o, t, a, clean in FIELDS}
    head = values.get("head", "")
    return f'''{head}<robot name="arm"{values.get("robot_attrs", "")}>
  <link name="base"/>
  <link name="upper"><inertial><origin xyz={v["upper.origin.xyz"]} rpy={v["upper.origin.rpy"]}/>
    <mass value={v["upper.mass.value"]}/><inertia ixx={v["upper.inertia.ixx"]} ixy={v["upper.inertia.ixy"]}
    ixz={v["upper.inertia.ixz"]} iyy={v["upper.inertia.iyy"]} iyz={v["upper.inertia.iyz"]}
    izz={v["upper.inertia.izz"]}/></inertial></link>
  <link name="fore"><inertial><origin xyz="0 0 -0.2"/><mass value="1.5"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.005"/></inertial></link>
  <link name="hand"><inertial><origin xyz="0 0.05 0"/><mass value="0.5"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="50" velocity="2"/></joint>
  <joint {values.get("elbow_name", 'name="elbow"')} type="revolute"><parent link="upper"/><child link="fore"/>
    <origin xyz={v["elbow.origin.xyz"]} rpy={v["elbow.origin.rpy"]}/><axis xyz={v["elbow.axis.xyz"]}/>
    <limit lower={v["elbow.limit.lower"]} upper={v["elbow.limit.upper"]} effort={v["elbow.limit.effort"]}
      velocity={v["elbow.limit.velocity"]}/></joint>
  <joint name="wrist" type="revolute"><parent link="fore"/><child link="hand"/><origin xyz="0 0 -0.4"/>
    <axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="10" velocity="3"/>
    <mimic joint="elbow" multiplier={v["wrist.mimic.multiplier"]} offset={v["wrist.mimic.offset"]}/></joint>
  {values.get("extra", "")}
</robot>'''


CLEAN = core.load_urdf(arm())


def assert_same_model(model: core.Model, want: core.Model = CLEAN) -> None:
    assert model.joint_names == want.joint_names and model.body_names == want.body_names
    for name in ("parent", "M", "S", "J", "P", "q_offset", "lower", "upper", "velocity_limit", "effort_limit"):
        np.testing.assert_array_equal(getattr(model, name), getattr(want, name), err_msg=name)


def finite_dynamics(model: core.Model, seed: int = 0) -> None:
    """rnea and gravity are finite at a random state; aba is finite or refuses (SingularInertiaError)."""
    rng = np.random.default_rng(seed)
    q, v, a = rng.uniform(-np.pi, np.pi, model.n), rng.normal(size=model.nv), rng.normal(size=model.nv)
    pose = np.eye(4) if model.floating_base else None
    tau = core.rnea(model, q, v, a, base_pose=pose)
    assert np.all(np.isfinite(tau)), tau
    assert np.all(np.isfinite(core.gravity(model, q, base_pose=pose)))
    try:
        qdd = core.aba(model, q, v, tau, base_pose=pose)
    except core.SingularInertiaError:
        return
    assert np.all(np.isfinite(qdd)), qdd


# ----------------------------------------------------------------- what ROS and Pinocchio load


@pytest.mark.parametrize("lead", ["\n", "\n\n  \t", "\ufeff", "\ufeff\n", " \r\n"])
def test_whitespace_or_bom_before_the_declaration_loads(lead: str) -> None:
    """robot_description strings with a leading newline (a YAML block scalar, a launch file's Command)."""
    assert_same_model(core.load_urdf(arm(head=lead + '<?xml version="1.0" encoding="utf-8"?>\n')))


@pytest.mark.parametrize("lead", [b"\n  ", b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n", b"\t\n"])
def test_file_with_whitespace_or_bom_before_the_declaration_loads(tmp_path, lead: bytes) -> None:
    path = tmp_path / "arm.urdf"
    path.write_bytes(lead + b'<?xml version="1.0" encoding="utf-8"?>\n' + arm().encode())
    assert_same_model(core.load_urdf(path))
    assert_same_model(core.load_urdf(str(path)))


def test_latin1_file_keeps_its_declared_encoding(tmp_path) -> None:
    path = tmp_path / "arm.urdf"
    path.write_bytes(b'\n<?xml version="1.0" encoding="ISO-8859-1"?>\n<!-- r\xe9sum\xe9 -->' + arm().encode())
    assert_same_model(core.load_urdf(path))


@pytest.mark.parametrize("attrs", [' xmlns="http://www.ros.org"', ' xmlns:xacro="http://www.ros.org/wiki/xacro"',
                                   ' xmlns="urn:x" xmlns:gz="urn:gz"'])
def test_namespace_declarations_on_robot_load(attrs: str) -> None:
    assert_same_model(core.load_urdf(arm(robot_attrs=attrs)))


@pytest.mark.parametrize("extra", [
    '<gazebo reference="fore"><plugin name="p" filename="libp.so"><ros:namespace>/arm</ros:namespace></plugin></gazebo>',
    '<transmission name="t"><hwi:type>x</hwi:type><joint name="elbow"><hardwareInterface>E</hardwareInterface>'
    '</joint></transmission>',
    '<sdf:frame name="x" gz:attached="fore"/>',
])
def test_undeclared_prefix_in_an_extension_block_loads(extra: str) -> None:
    """urdfdom (TinyXML) reads names as written; content we do not use must not fail the URDF."""
    assert_same_model(core.load_urdf(arm(extra=extra)))


def test_entity_declarations_are_refused() -> None:
    """No URDF uses DTD entities and urdfdom does not expand them: refused, never expanded or fetched."""
    bomb = '<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {c} "&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};">' for p, c in zip("abcdefgh", "bcdefghi")
    ) + ']>' + arm().replace('name="arm"', 'name="&i;"')
    with pytest.raises(core.URDFError, match="entity"):
        core.load_urdf(bomb)
    external = '<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY x SYSTEM "file:///etc/passwd">]>' + arm()
    with pytest.raises(core.URDFError, match="entity"):
        core.load_urdf(external)


# ------------------------------------------------------------------ refused, naming the element


@pytest.mark.parametrize("field, value, message", [
    ("wrist.mimic.offset", "nan", r"joint 'wrist' mimic offset.*finite"),
    ("wrist.mimic.multiplier", "nan", r"joint 'wrist' mimic multiplier.*finite"),
    ("wrist.mimic.multiplier", "inf", r"joint 'wrist' mimic multiplier.*finite"),
    ("elbow.limit.upper", "nan", r"joint 'elbow' limit upper.*NaN"),
    ("elbow.limit.lower", "nan", r"joint 'elbow' limit lower.*NaN"),
    ("elbow.axis.xyz", "1e200 0 0", r"joint 'elbow' axis.*1e\+08"),
    ("elbow.axis.xyz", "0 0 0", r"joint 'elbow'.*zero axis"),
    ("elbow.axis.xyz", "1e-200 0 0", r"joint 'elbow'.*zero axis"),
    ("elbow.axis.xyz", "inf 0 0", r"joint 'elbow' axis.*finite"),
    ("upper.inertia.ixx", "1e308", r"link 'upper' inertia ixx.*1e\+12"),
    ("upper.mass.value", "1e308", r"link 'upper' mass.*1e\+12"),
    ("upper.origin.xyz", "1e300 0 0", r"link 'upper' inertial origin xyz.*1e\+08"),
    ("elbow.origin.xyz", "1e300 0 0", r"joint 'elbow' origin xyz.*1e\+08"),
    ("elbow.origin.rpy", "0 inf 0", r"joint 'elbow' origin rpy.*finite"),
    ("upper.origin.rpy", "1.34e154 0 0", r"link 'upper' inertial origin rpy.*1e\+08"),  # NaN rotation
])
def test_broken_values_are_refused_naming_element_and_attribute(field: str, value: str, message: str) -> None:
    with pytest.raises(core.URDFError, match=message):
        core.load_urdf(arm(**{field: value}))


@pytest.mark.parametrize("field", ["elbow.limit.upper", "elbow.limit.effort", "wrist.mimic.multiplier",
                                   "wrist.mimic.offset", "elbow.origin.xyz", "upper.mass.value"])
def test_non_numeric_value_names_element_and_attribute(field: str) -> None:
    owner, tag, attribute = field.split(".")
    kind = "link" if owner == "upper" else "joint"
    with pytest.raises(core.URDFError, match=rf"{kind} '{owner}' .*{attribute}: cannot read .*'abc'"):
        core.load_urdf(arm(**{field: "abc"}))


@pytest.mark.parametrize("field", ["elbow.limit.lower", "wrist.mimic.offset", "elbow.origin.xyz", "upper.mass.value"])
@pytest.mark.parametrize("value", ["${-pi}", "$(arg lower)", "${lower * 2}"])
def test_unexpanded_xacro_says_run_xacro_first(field: str, value: str) -> None:
    with pytest.raises(core.URDFError, match=r"'(elbow|wrist|upper)'.*unexpanded xacro expression.*xacro"):
        core.load_urdf(arm(**{field: value}))


@pytest.mark.parametrize("name", ['', 'name=""', 'name="  "'])
def test_joint_without_a_name_is_refused(name: str) -> None:
    with pytest.raises(core.URDFError, match=r"<joint> from link 'upper' to link 'fore' has no name"):
        core.load_urdf(arm(elbow_name=name))


def test_xacro_in_a_name_says_run_xacro_first() -> None:
    with pytest.raises(core.URDFError, match=r"unexpanded xacro expression.*xacro"):
        core.load_urdf(arm(elbow_name='name="${prefix}elbow"'))


def chain_of(joints: list[tuple[str, str, str]], links: str = "abcdefgh") -> str:
    """Revolute joints (name, parent, child) between massive links named by single letters."""
    body = '<inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'
    return ('<robot name="loop">' + "".join(f'<link name="{k}">{body}</link>' for k in links) + "".join(
        f'<joint name="{n}" type="revolute"><parent link="{p}"/><child link="{c}"/><axis xyz="0 0 1"/></joint>'
        for n, p, c in joints) + "</robot>")


def test_a_loop_of_joints_beside_the_tree_is_refused_naming_them() -> None:
    """Four of seven joints form a loop hanging from nothing: today they vanish from the model."""
    xml = chain_of([("j1", "a", "b"), ("j2", "b", "c"), ("j3", "d", "e"), ("j4", "e", "f"), ("j5", "f", "g"),
                    ("j6", "g", "d"), ("j7", "c", "h")])
    with pytest.raises(core.URDFError, match=r"joint 'j3'.*hangs link 'e' from its own descendant.*"
                                             r"'j3' -> 'j4' -> 'j5' -> 'j6'.*LoopClosure"):
        core.load_urdf(xml)


def test_a_joint_hanging_a_link_from_its_descendant_is_refused() -> None:
    """'a' is the root; 'c' hangs from 'b', and 'b' from 'c': both joints would vanish."""
    xml = chain_of([("j0", "a", "d"), ("j1", "b", "c"), ("j2", "c", "b")], links="abcd")
    with pytest.raises(core.URDFError, match=r"joint 'j1': hangs link 'c' from its own descendant 'b'"):
        core.load_urdf(xml)
    with pytest.raises(core.URDFError, match=r"joint 'j1'.*'j1' -> 'j2' form a loop"):  # no root link at all
        core.load_urdf(chain_of([("j1", "b", "c"), ("j2", "c", "b")], links="bc"))


# ------------------------------------------------------------------ loaded with a warning


@pytest.mark.parametrize("attribute", ["effort", "velocity"])
def test_negative_effort_or_velocity_limit_loads_with_a_limit_warning(attribute: str) -> None:
    field = f"elbow.limit.{attribute}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = core.load_urdf(arm(**{field: "-7"}))
    said = [w for w in caught if issubclass(w.category, core.URDFWarning)]
    assert len(said) == 1 and said[0].category is core.URDFLimitWarning
    assert f"joint 'elbow': negative {attribute} limit -7" in str(said[0].message)
    assert getattr(model, f"{attribute}_limit")[model.joint_names.index("elbow")] == 7.0  # a bound on |.|
    assert [(f.kind, f.name) for f in model.flaws] == [("joint", "elbow")]
    with pytest.raises(core.URDFError, match=f"joint 'elbow': negative {attribute} limit.*strict"):
        core.load_urdf(arm(**{field: "-7"}), strict=True)


def test_infinite_limits_mean_no_limit() -> None:
    model = core.load_urdf(arm(**{"elbow.limit.upper": "inf", "elbow.limit.lower": "-inf"}))
    assert model.upper[1] == np.inf and model.lower[1] == -np.inf


def test_values_at_the_plausibility_bounds_load_with_finite_dynamics() -> None:
    model = core.load_urdf(arm(**{"upper.mass.value": "1e12", "upper.inertia.ixx": "1e12", "upper.inertia.iyy": "1e12",
                                  "upper.inertia.izz": "1e12", "upper.origin.xyz": "1e8 -1e8 1e8",
                                  "elbow.origin.xyz": "-1e8 1e8 1e8", "wrist.mimic.multiplier": "1e8"}))
    finite_dynamics(model)


def test_mimic_chain_whose_product_overflows_is_refused() -> None:
    """Each multiplier is plausible, their product along the chain is not."""
    joints = "".join(
        f'<joint name="m{k}" type="revolute"><parent link="{"fore" if k == 0 else f"x{k - 1}"}"/><child link="x{k}"/>'
        f'<axis xyz="0 0 1"/><mimic joint="{"elbow" if k == 0 else f"m{k - 1}"}" multiplier="1e8"/></joint>'
        f'<link name="x{k}"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
        '</inertial></link>' for k in range(3))
    with pytest.raises(core.URDFError, match=r"joint 'm1': mimic.*1e\+16.*1e\+08"):
        core.load_urdf(arm(extra=joints))


# ------------------------------------------------------------------------------------ fuzzing


SPECIAL = ["nan", "-nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-1e309", "1e308", "1e200", "1e13", "1e9",
           "-1e12", "1e-320", "0", "-0", "", " ", "1 2", "0x10", "1_0", "${x}", "$(arg x)", "true", "1e", "--1"]


def values_for(clean: str) -> st.SearchStrategy[str]:
    """A whole replacement, or one number of a vector replaced."""
    numbers = st.floats(allow_nan=True, allow_infinity=True).map(repr)
    scalar = st.one_of(st.sampled_from(SPECIAL), numbers,
                       st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=8))
    if len(clean.split()) == 1:
        return scalar
    return st.one_of(scalar, st.tuples(st.integers(0, 2), scalar).map(
        lambda ix: " ".join(ix[1] if k == ix[0] else x for k, x in enumerate(clean.split()))))


@st.composite
def broken_arm(draw) -> tuple[str, str, bool]:
    owner, tag, attribute, clean = draw(st.sampled_from(FIELDS))
    return owner, arm(**{f"{owner}.{tag}.{attribute}": draw(values_for(clean))}), draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_arm())
def test_fuzzed_attribute_either_names_the_element_or_gives_finite_dynamics(case: tuple[str, str, bool]) -> None:
    owner, xml, floating = case
    try:
        model = core.load_urdf(xml, floating_base=floating)
    except core.URDFError as exc:
        assert f"'{owner}'" in str(exc), str(exc)
        return
    finite_dynamics(model)
