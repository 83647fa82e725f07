"""Parameter values and parameter files (issue 20): one rule for the node and `liedyn-replay
--params` (pipeline.check_parameters, pipeline.load_parameter_file). Every bad value is refused
with a one-line message naming the parameter, what it expected and what it got; every hostile
file (huge, not UTF-8, deeply nested, an alias bomb) is refused quickly, before it costs memory.
"""
from __future__ import annotations

import array
import json
import math
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arms import ARM
from arms import JOINTS as ARM_JOINTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.pipeline import PARAMETERS, ParameterError, check_parameters, load_parameter_file
from liedyn_ros.pipeline import parameters as parameters_module
from liedyn_ros.replay.cli import main

REPO = Path(__file__).resolve().parents[1]
HEADER = "/**:\n  ros__parameters:\n"
JOINTS = tuple(ARM_JOINTS)  # test/arms.py's two point masses swinging about y: a model in milliseconds
PUSH = 15.0  # N m on the shoulder for PUSHED seconds: above the default collision_threshold (10)
PUSHED = (0.5, 0.8)


def param_file(path: Path, body: str | bytes) -> Path:
    data = body if isinstance(body, bytes) else (HEADER + body).encode()
    path.write_bytes(data)
    return path


def refused(path: Path, joint_names: tuple[str, ...] = JOINTS) -> str:
    with pytest.raises(ParameterError) as info:
        load_parameter_file(path, joint_names)
    return str(info.value)


# ------------------------------------------------------------------- values: one rule, clear messages

def test_a_quoted_false_is_a_string_not_true() -> None:
    """`friction_compensation: "false"` switched compensation on (residual 6e-8 -> 30 N m)."""
    with pytest.raises(ParameterError) as info:
        check_parameters({"friction_compensation": "false"})
    assert str(info.value) == "friction_compensation: expected true or false, got the string 'false'"
    for name in ("publish_gravity", "floating_base", "strict_urdf", "external_torque_observer"):
        with pytest.raises(ParameterError, match=f"^{name}: expected true or false, got the number 1$"):
            check_parameters({name: 1})
    assert check_parameters({"friction_compensation": False}).values == {"friction_compensation": False}


def test_negative_friction_is_refused_naming_the_joint() -> None:
    with pytest.raises(ParameterError, match=r"^friction_coulomb: -0\.5 for joint elbow must be >= 0"):
        check_parameters({"friction_coulomb": [1.0, -0.5]}, JOINTS)
    with pytest.raises(ParameterError, match=r"^friction_viscous: -2\.0 \(all joints\) must be >= 0"):
        check_parameters({"friction_viscous": [-2.0]}, JOINTS)
    with pytest.raises(ParameterError, match=r"^friction_viscous: -2\.0 \(entry 1, model joint order\)"):
        check_parameters({"friction_viscous": [0.0, -2.0]})  # no model known yet
    with pytest.raises(ParameterError, match="^friction_coulomb: expected a list of finite numbers, got"):
        check_parameters({"friction_coulomb": [math.nan]})
    assert check_parameters({"friction_coulomb": [0.0, 2.0], "friction_offset": [-1.0]}, JOINTS).values[
        "friction_coulomb"] == [0.0, 2.0]


def test_wrong_types_name_the_parameter_and_the_type() -> None:
    """They were all reported as 'unknown parameters []'."""
    cases = [
        ("estimator_min_samples", "3", "expected an integer, got the string '3'"),
        ("estimator_min_samples", 3.0, "expected an integer, got the number 3.0"),
        ("estimator_min_samples", 2**70, "expected an integer, got the number <an integer beyond int64>"),
        ("observer_gain", "fast", "expected a finite number, got the string 'fast'"),
        ("gravity", ["a", "b"], "expected a list of finite numbers, got ['a', 'b']"),
        ("base_link", 12, "expected a string, got the number 12"),
        ("contact_offsets", {"x": 1}, "expected a list of finite numbers, got a mapping {'x': 1}"),
        ("payload_mass", None, "expected a finite number, got null (an empty value)"),
        ("warn_period", math.inf, "expected a finite number, got the number inf"),
    ]
    for name, value, why in cases:
        with pytest.raises(ParameterError) as info:
            check_parameters({name: value})
        assert str(info.value) == f"{name}: {why}"


def test_a_string_is_never_split_into_a_list_of_characters() -> None:
    with pytest.raises(ParameterError) as info:
        check_parameters({"contact_links": "panda_hand"})
    assert str(info.value) == "contact_links: expected a list of strings, got the string 'panda_hand'"


def test_gravity_unknown_names_and_ranges() -> None:
    with pytest.raises(ParameterError, match=r"^gravity: expected 3 numbers, got 2$"):
        check_parameters({"gravity": [0.0, -9.81]})
    with pytest.raises(ParameterError, match=r"^unknown parameters \['friction_colomb'\]"):
        check_parameters({"friction_colomb": [0.1]})
    with pytest.raises(ParameterError, match=r"^diagnostics_period: .* > 0"):
        check_parameters({"diagnostics_period": 0.0})
    with pytest.raises(ParameterError, match=r"^collision_threshold: "):  # the pipeline's own check
        check_parameters({"collision_threshold": [0.0]})


def test_the_node_values_ros_gives_are_accepted() -> None:
    """ROS hands the node double[] as array.array('d'), integer[] as array.array('q')."""
    values = {name: default for name, (default, _) in PARAMETERS.items()}
    values |= {"gravity": array.array("d", [0.0, 0.0, -9.81]), "collision_threshold": array.array("d", [5.0, 6.0])}
    checked = check_parameters(values, JOINTS)
    assert checked.values["gravity"] == [0.0, 0.0, -9.81]
    assert checked.config.collision_threshold == (5.0, 6.0)
    assert check_parameters({"payload_mass": 2}).values["payload_mass"] == 2.0  # an integer is a number


# Values of every YAML type, nested, and the strings that look like other types.
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-2**80, max_value=2**80)
    | st.floats() | st.text(max_size=8)
    | st.sampled_from(["false", "true", "1.0", "nan", "", "point", "all", "l1 l2 point"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=8,
)


def same_value(got: Any, given: Any) -> bool:
    """``got`` is ``given`` unchanged, but for an integer read as a double."""
    if isinstance(got, list):
        return isinstance(given, list) and len(got) == len(given) and all(map(same_value, got, given))
    return type(got) is type(given) and got == given or (type(got) is float and type(given) is int and got == given)


@pytest.mark.parametrize("name", sorted(PARAMETERS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=YAML_VALUES)
def test_fuzzed_values_are_accepted_as_they_are_or_refused_by_name(name: str, value: Any) -> None:
    """Any value: either accepted, of the parameter's type and unchanged, or a ParameterError
    whose one line names the parameter; never another exception, never a conversion."""
    try:
        checked = check_parameters({name: value}, JOINTS)
    except ParameterError as err:
        text = str(err)
        assert text.startswith(f"{name}: ") or text.startswith(f"{name} "), text
        assert "\n" not in text and len(text) < 400, text
        return
    default = PARAMETERS[name][0]
    got = checked.values[name]
    assert same_value(got, value), (got, value)
    kinds = {type(x) for x in got} if isinstance(default, list) else {type(got)}
    assert kinds <= {type(default[0]) if isinstance(default, list) else type(default)}


# ------------------------------------------------------------------- files: refused quickly and cheaply

def alias_bomb() -> str:
    """A billion laughs: eight levels of ten aliases to the level below, 10^9 numbers (7.45 GiB
    as the float array the replay made of them), in under 600 bytes."""
    levels = "abcdefghi"
    text = "x:\n  a: &a [" + ",".join(["1.0"] * 10) + "]\n"
    for below, level in zip(levels, levels[1:]):
        text += f"  {level}: &{level} [" + ",".join([f"*{below}"] * 10) + "]\n"
    return text + HEADER + "    friction_coulomb: *i\n"


HOSTILE = {
    "non_utf8": (b"/**:\n  ros__parameters:\n    base_link: \"\xff\xfe\"\n", "not UTF-8 text: byte 0xff at offset"),
    "flow_nesting": ("    contact_offsets: " + "[" * 20_000 + "]" * 20_000 + "\n", "line 3: nested more than 32 deep"),
    "map_nesting": ("    contact_offsets: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n", "nested more than 32 deep"),
    "block_nesting": ("    contact_offsets:\n" + "".join(" " * (6 + 2 * i) + "-\n" for i in range(200)),
                      "nested more than 32 deep"),
    "alias_bomb": (alias_bomb().encode(), "alias *a: a parameter file may not use aliases"),
    "syntax": ("    gravity: [0, 0, -9.81\n", "not YAML: line 4, column 1: expected ',' or ']'"),
    "duplicate": ("    gravity: [0, 0, 1]\n    gravity: [0, 0, 2]\n", 'not YAML: line 4, column 5: found duplicate key'),
    "python_tag": ("    base_link: !!python/object/apply:os.system [ls]\n", "not YAML: line 3, column 16: could not"),
    "huge_integer": ("    estimator_min_samples: " + "9" * 5000 + "\n", "not YAML: Exceeds the limit"),
    "no_ros_parameters": (b"gravity: [0, 0, -9.81]\n", "no '<node>: ros__parameters:' mapping"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_are_refused_in_one_line_quickly(tmp_path: Path, case: str) -> None:
    body, why = HOSTILE[case]
    path = param_file(tmp_path / "params.yaml", body)
    tracemalloc.start()
    start = time.perf_counter()
    text = refused(path)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert why in text and "\n" not in text and len(text) < 300, text
    assert elapsed < 2.0 and peak < 50e6, (elapsed, peak)
    if case == "alias_bomb":
        assert path.stat().st_size < 600


def test_a_large_file_is_refused_unread(tmp_path: Path) -> None:
    """A 50 MB file took 271 s and 5.1 GB before being refused."""
    path = tmp_path / "big.yaml"
    with path.open("wb") as f:
        f.write(HEADER.encode() + b"    friction_viscous: [")
        f.truncate(50_000_000)  # sparse: the test writes nothing, the loader must not read it
    start = time.perf_counter()
    assert refused(path) == f"larger than {parameters_module.MAX_FILE_BYTES} bytes, refused unread (a parameter file is a few kB)"
    assert time.perf_counter() - start < 0.5


def test_too_many_values_and_special_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parameters_module, "MAX_NODES", 50)  # the real limit takes the parser a second
    path = param_file(tmp_path / "many.yaml", "    friction_viscous: [" + ", ".join(["0.5"] * 60) + "]\n")
    assert refused(path) == "line 3: more than 50 values"
    assert refused(tmp_path) == "not a regular file"
    assert refused(tmp_path / "missing.yaml") == "no such file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert refused(fifo) == "not a regular file"  # opening it would block


def test_ros_own_parameters_are_left_to_ros(tmp_path: Path) -> None:
    """use_sim_time and qos_overrides (the README's reliability override) belong to every node."""
    path = param_file(tmp_path / "p.yaml", "    use_sim_time: true\n    qos_overrides:\n      /joint_states:\n"
                      "        subscription:\n          reliability: reliable\n"
                      "    qos_overrides./odom.subscription.depth: 5\n    gravity: [0, 0, -9.81]\n")
    assert load_parameter_file(path).values == {"gravity": [0.0, 0.0, -9.81]}


@pytest.mark.parametrize("name", ["dynamics.yaml", "floating_base.yaml", "solo12_contacts.yaml"])
def test_shipped_parameter_files_load(name: str) -> None:
    values = load_parameter_file(REPO / "config" / name).values
    assert set(values) <= set(PARAMETERS)


YAML_TEXT = st.text(alphabet=st.sampled_from(list("ab01.-: [],{}&*!|>'\"#\n\t\\%@`?") + ["\x00", "\xff", "é"]),
                    max_size=60)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=YAML_TEXT)
def test_fuzzed_file_text_gives_values_or_a_parameter_error(tmp_path: Path, tail: str) -> None:
    """Any text after the header, as UTF-8 or Latin-1 bytes: parsed and checked, or refused with a
    ParameterError; never another exception."""
    for data in ((HEADER + "    " + tail).encode(), (HEADER + "    " + tail).encode("latin-1", "replace")):
        path = param_file(tmp_path / "fuzz.yaml", data)
        try:
            load_parameter_file(path)
        except ParameterError as err:
            assert "\n" not in str(err), str(err)


# ------------------------------------------------------------------- the replay: --params end to end

def write_arm_bag(path: Path) -> Path:
    """The arm held still at q = (0.5, -0.3) for 1.5 s at 200 Hz, its efforts the holding torques
    less PUSH on the shoulder during PUSHED (an external torque the observer sees)."""
    model = core.load_urdf(ARM)
    q = np.array([0.5, -0.3])
    hold = core.gravity(model, q)
    ts = get_typestore(Stores.ROS2_HUMBLE)
    t0 = 1_700_000_000 * 10**9
    with Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for i in range(300):
            t = i / 200
            effort = hold - (np.array([PUSH, 0.0]) if PUSHED[0] <= t < PUSHED[1] else 0.0)
            stamp = t0 + i * 5_000_000
            msg = ts.types["sensor_msgs/msg/JointState"](
                header=ts.types["std_msgs/msg/Header"](
                    stamp=ts.types["builtin_interfaces/msg/Time"](sec=stamp // 10**9, nanosec=stamp % 10**9),
                    frame_id=""),
                name=list(JOINTS), position=q, velocity=np.zeros(2), effort=effort)
            writer.write(conn, stamp, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
    return path


@pytest.fixture(scope="module")
def arm_bag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("arm")
    (root / "arm.urdf").write_text(ARM)
    return write_arm_bag(root / "bag"), root / "arm.urdf"


def replay_cli(bag: Path, urdf: Path, out: Path, *extra: str) -> int:
    return main([str(bag), "--out", str(out), "--urdf", str(urdf), "--no-progress", "--no-plots", *extra])


def collisions(out: Path) -> list[dict[str, Any]]:
    return json.loads((out / "summary.json").read_text())["collisions"]


def test_collision_threshold_of_params_takes_effect(tmp_path: Path, arm_bag: tuple[Path, Path]) -> None:
    """--params' collision_threshold was ignored (the command line's default was used)."""
    bag, urdf = arm_bag
    assert replay_cli(bag, urdf, tmp_path / "default") == 0
    assert [e["joint"] for e in collisions(tmp_path / "default")] == ["shoulder"]
    high = param_file(tmp_path / "high.yaml", f"    collision_threshold: [{2 * PUSH}]\n")
    assert replay_cli(bag, urdf, tmp_path / "high", "--params", str(high)) == 0
    assert collisions(tmp_path / "high") == []
    # the command line over --params
    assert replay_cli(bag, urdf, tmp_path / "cli", "--params", str(high), "--collision-threshold", str(PUSH / 2)) == 0
    assert [e["joint"] for e in collisions(tmp_path / "cli")] == ["shoulder"]


CLI_REFUSED = {
    "quoted_false": ("    friction_compensation: \"false\"\n    friction_coulomb: [3.0]\n",
                     "friction_compensation: expected true or false, got the string 'false'"),
    "negative_friction": ("    friction_viscous: [0.5, -0.1]\n", "friction_viscous: -0.1 for joint elbow must be >= 0"),
    "gravity": ("    gravity: [0, x]\n", "gravity: expected a list of finite numbers, got [0, 'x']"),
    "wrong_type": ("    estimator_min_samples: '3'\n", "estimator_min_samples: expected an integer, got the string '3'"),
    "string_list": ("    contact_links: panda_hand\n", "contact_links: expected a list of strings, got the string"),
    "deep": ("    contact_offsets: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested more than 32 deep"),
    "alias_bomb": (alias_bomb().encode(), "may not use aliases"),
    "non_utf8": (b"/**:\n  ros__parameters:\n    base_link: \"\xff\"\n", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(CLI_REFUSED))
def test_cli_refuses_bad_params_with_exit_2_and_one_line(tmp_path: Path, arm_bag: tuple[Path, Path],
                                                         capsys: pytest.CaptureFixture[str], case: str) -> None:
    body, why = CLI_REFUSED[case]
    params = param_file(tmp_path / "params.yaml", body)
    assert replay_cli(*arm_bag, tmp_path / "out", "--params", str(params)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"liedyn-replay: error: --params {params}: "), err
    assert why in err, err


def test_cli_refuses_a_bad_observer_option_as_the_node_would(tmp_path: Path, arm_bag: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert replay_cli(*arm_bag, tmp_path / "out", "--observer-gain", "-1") == 2
    assert capsys.readouterr().err == (
        "liedyn-replay: error: observer_gain: -1.0 must be finite and > 0 (given on the command line)\n")


# ------------------------------------------------------------------- the node: the same rule

@pytest.fixture
def node_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    from fake_ros import Node, load_node_module
    Node.OVERRIDES = {}
    return load_node_module(monkeypatch)


NODE_REFUSED = {  # as ROS hands them to the on-set callback: double[] as array.array
    "friction_compensation": "false",
    "friction_coulomb": array.array("d", [1.0, -0.5]),
    "gravity": array.array("d", [0.0, -9.81]),
    "contact_links": "panda_hand",
    "estimator_min_samples": 1,
}


def test_the_node_refuses_a_value_with_the_replays_words(node_module: Any) -> None:
    from fake_ros import Node, Parameter
    Node.OVERRIDES = {"robot_description": ARM}
    node = node_module.DynamicsNode()
    for name, value in NODE_REFUSED.items():
        [result] = node.set_parameters([Parameter(name, value=value)])
        with pytest.raises(ParameterError) as info:
            check_parameters({name: value}, JOINTS)
        assert not result.successful and result.reason == str(info.value)
    # test/arms.py's arm has no URDF effort limits: its friction is refused until effort_limit bounds it
    [result] = node.set_parameters([Parameter("friction_coulomb", value=array.array("d", [1.0, 0.5]))])
    assert not result.successful and "effort_limit" in result.reason
    [result] = node.set_parameters([Parameter("effort_limit", value=array.array("d", [5.0, 5.0])),
                                    Parameter("friction_coulomb", value=array.array("d", [1.0, 0.5]))])
    assert result.successful


def test_the_node_refuses_a_bad_override_at_startup_saying_why(node_module: Any) -> None:
    """A launch file's `friction_compensation: "false"` leaves the node without a model, saying why."""
    from fake_ros import Node
    Node.OVERRIDES = {"robot_description": ARM, "friction_compensation": "false"}
    node = node_module.DynamicsNode()
    errors = [text for level, text in node.lines if level == "error"]
    assert any("friction_compensation: expected true or false, got the string 'false'" in t for t in errors), errors
