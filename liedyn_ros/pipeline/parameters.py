"""The node's parameters: their table, and the one rule that checks their values, used by the
node's on-set callback (values typed by ROS) and by parameter files (`liedyn-replay --params`,
identified.yaml) alike.

A value has the type of its default, as ROS types a parameter (bool, integer, double, string,
or a list of one of these); nothing is converted, so a quoted "false" is a string and refused,
never read as true. Integers stand for doubles (the replay reads `1` as `1.0`), within int64;
every number is finite. The pipeline's own checks (:class:`PipelineConfig`) then apply, and the
model's (``payload.dynamics_from``) where a model is known.

A parameter file is refused before it can cost much: at most ``MAX_FILE_BYTES``, UTF-8, no
aliases, nesting at most ``MAX_DEPTH`` deep and at most ``MAX_NODES`` values.
"""
from __future__ import annotations

import array
import math
import reprlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Sequence

from liedyn_ros.pipeline.config import PipelineConfig, config_from_parameters
from liedyn_ros.pipeline.payload import DYNAMICS_PARAMETERS

if TYPE_CHECKING:  # ruamel is imported when a file is read: the node never reads one
    from ruamel.yaml.composer import Composer
    from ruamel.yaml.scanner import Scanner

# name -> (default, description); the types follow the defaults, as the node declares them.
PARAMETERS: dict[str, tuple[Any, str]] = {
    "robot_description": ("", "URDF XML; empty: wait for the robot_description topic"),
    "strict_urdf": (False, "true: refuse URDF flaws that ROS tools accept (non-PSD inertia, mimic of no moving joint)"),
    "floating_base": (False, "true: add a floating base; false: the URDF decides (floating root joint)"),
    "base_link": ("", "odometry child frame / base output frame; empty: the URDF root link"),
    "gravity": ([0.0, 0.0, -9.81], "world-frame gravity vector [m/s^2]"),
    "acceleration_source": ("zero", "zero | estimated | reference"),
    "odom_max_age": (0.02, "max |joint state stamp - odometry stamp| [s]"),
    "estimator_window": (0.05, "velocity differentiation window for 'estimated' [s]"),
    "estimator_min_samples": (3, "samples needed in the window before estimating"),
    "reference_max_age": (1.0, "max age of the reference trajectory [s]; <= 0 disables"),
    "publish_feedforward": (True, "publish feedforward_torque"),
    "publish_gravity": (True, "publish gravity_torque"),
    "publish_predicted_acceleration": (True, "publish predicted_acceleration (needs efforts)"),
    "publish_base_outputs": (True, "floating base: publish base_wrench, predicted_base_acceleration"),
    "publish_effort_command": (False, "also publish feedforward torques on effort_command"),
    "command_joints": ([""], "effort_command joint order; ['']: the model's joint order"),
    "warn_period": (5.0, "min seconds between two warnings of the same kind"),
    "contact_links": ([""], "links in contact with the ground; ['']: none (unconstrained outputs)"),
    "contact_types": (["point"], "point | flat, one for all contacts or one per contact"),
    "contact_offsets": ([0.0, 0.0, 0.0], "contact point x, y, z in the link frame [m], for all or per contact"),
    "friction_coefficient": (0.7, "Coulomb friction coefficient of the contacts (> 0)"),
    "contact_source": ("all", "all | topic (contact_state) | wrench (foot sensors) | kinematic | observer"),
    "contact_solution": ("min_torque", "min_torque | min_force, when the contacts do not fix the forces"),
    "contact_max_age": (0.02, "max |joint state stamp - contact state stamp| [s]"),
    "contact_force_threshold": (20.0, "wrench source: contact when |force| exceeds this [N]; observer source: "
                                "touch-down when the estimated normal force does"),
    "contact_force_release": (0.5, "observer source: lift-off below this fraction of contact_force_threshold"),
    "contact_wrench_topics": ([""], "wrench source: one topic per contact; ['']: contact_sensor/<link>"),
    "contact_sole_size": ([0.0], "flat contacts: sole half-lengths x, y [m] about the contact point, "
                          "for all or per flat contact; [0.0]: no centre-of-pressure check"),
    "contact_height": (0.02, "kinematic source: max contact point height above ground_height [m]"),
    "contact_speed": (0.1, "kinematic source: max contact point speed [m/s]"),
    "ground_height": (0.0, "kinematic source: world height of the ground plane [m]"),
    "publish_unconstrained": (False, "with contacts or loops, also publish unconstrained/feedforward_torque"),
    "loop_closures": ([""], "closed loops, each 'link_a link_b point|weld'; ['']: none"),
    "loop_offsets": ([0.0] * 6, "loop points x_a, y_a, z_a (link_a frame), x_b, y_b, z_b (link_b) [m], for all or per loop"),
    "passive_joints": ([""], "unactuated joints (zero torque), with loops or contacts; ['']: none"),
    "external_torque_observer": (True, "momentum observer: external_torque and collisions (needs measured efforts)"),
    "observer_gain": (50.0, "momentum observer gain K [1/s]: the estimate lags by 1/K"),
    "collision_threshold": ([10.0], "external torque [N m] that starts a collision: one for all joints or per joint"),
    "collision_release": (0.5, "a collision ends when every joint is below this fraction of its threshold"),
    "external_force_threshold": (20.0, "with contacts on a floating base: a force on the base beyond the "
                                 "contacts' [N] that starts a collision"),
    "observer_max_gap": (0.1, "a gap between joint states longer than this [s] starts the observer over"),
    "effort_limit_factor": (10.0, "skip a sample whose feedforward or gravity torque exceeds this factor x a "
                            "joint's URDF effort limit (joints with one); .inf: no check"),
    "diagnostics_period": (1.0, "seconds between /diagnostics messages"),
    "effort_delay": (0.0, "liedyn-replay only: the efforts are this late against the joint states [s] (the "
                     "time_offset hint's lag) and are shifted back; the node takes 0 only"),
    **DYNAMICS_PARAMETERS,  # payload, friction, inertial parameters: swapped in at run time
}

# Ranges that neither config_from_parameters nor the model checks: name -> lowest value allowed.
_LOWER_BOUNDS = {
    "friction_coulomb": 0.0,  # negative friction would push the joint along
    "friction_viscous": 0.0,
    "armature": 0.0,  # a rotor's inertia
}
_LENGTHS = {"gravity": 3}

# The replay's own settings, which a parameter file may hold for it: not pipeline settings. The node
# refuses values other than the default (it would not apply them): live, a joint state carries its
# efforts, and shifting them would hold external_torque and collision events back by the delay.
REPLAY_PARAMETERS = frozenset({"effort_delay"})
MAX_EFFORT_DELAY = 0.5  # s: the age at which a command no longer describes the motion (replay.samples)

# ROS's own parameters, which a parameter file may set for any node.
_ROS_PARAMETERS = frozenset({"use_sim_time", "qos_overrides", "start_type_description_service"})

MAX_FILE_BYTES = 1_000_000  # a parameter file is a few kB; more is refused before parsing
MAX_DEPTH = 32              # nested mappings and lists (qos_overrides needs 7)
MAX_NODES = 5_000           # YAML values (10 per body for 500 bodies); the parser takes ~0.1 ms each
_INT64 = 2**63

class _Short(reprlib.Repr):
    """Values shortened for a one-line message."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring, self.maxother, self.maxlist, self.maxdict = 40, 40, 6, 4

    def repr_int(self, x: int, level: int) -> str:
        # Python refuses to print an integer of more than 4300 digits
        return super().repr_int(x, level) if -_INT64 <= x < _INT64 else "<an integer beyond int64>"


_short = _Short()


class ParameterError(ValueError):
    """A parameter value or file is refused; the one-line message names the parameter."""


class Parameters(NamedTuple):
    """Checked parameter values (those given, typed as ROS types them; integers of doubles as
    floats) and the pipeline settings they give."""

    values: dict[str, Any]
    config: PipelineConfig


def check_parameters(values: Mapping[str, Any], joint_names: Sequence[str] = (), *, replay: bool = False
                     ) -> Parameters:
    """The one rule for the node's parameters: types, ranges, then the pipeline's checks.

    ``values`` maps parameter names to values as ROS or a YAML file gives them (lists may be
    ``array.array``); names not given keep their defaults. ``joint_names`` (the model's, when
    known) only names the joint of a bad per-joint entry. ``replay``: the values are liedyn-replay's,
    which applies REPLAY_PARAMETERS (the node refuses them but at their defaults). Raises
    ParameterError naming the parameter, what it expected and what it got."""
    unknown = sorted(str(name) for name in values if name not in PARAMETERS)
    if unknown:
        raise ParameterError(f"unknown parameters {_short.repr(unknown)} (not parameters of dynamics_node)")
    typed = {name: _typed(name, value, PARAMETERS[name][0]) for name, value in values.items()}
    for name, value in typed.items():
        _check_range(name, value, joint_names)
    for name in REPLAY_PARAMETERS & set(typed):
        if not replay and typed[name] != PARAMETERS[name][0]:
            raise ParameterError(f"{name}: {typed[name]} is for liedyn-replay only; the node takes "
                                 f"{PARAMETERS[name][0]} (live, a joint state carries its own efforts)")
    if any(typed.get("armature", ())) and (any(typed.get("contact_links", ())) or any(typed.get("loop_closures", ()))):
        raise ParameterError("armature: not supported together with contact_links or loop_closures yet (the "
                             "constrained paths have no rotor inertia); leave armature at [0.0] there")
    try:
        config = config_from_parameters({k: v for k, v in typed.items()
                                         if k not in DYNAMICS_PARAMETERS and k not in REPLAY_PARAMETERS})
    except ValueError as err:
        raise ParameterError(str(err)) from None
    return Parameters(typed, config)


def load_parameter_file(path: Path, joint_names: Sequence[str] = (), *, replay: bool = False) -> Parameters:
    """The ros__parameters of a node parameter file (the first '<node>: ros__parameters:' entry),
    checked by :func:`check_parameters` (``replay``: for liedyn-replay). ROS's own parameters (use_sim_time, qos_overrides) are
    left to ROS. Raises ParameterError (one line, without the path) on any problem."""
    document = _parse(_read_text(path))
    for entry in document.values() if isinstance(document, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("ros__parameters"), dict):
            ours = {k: v for k, v in entry["ros__parameters"].items() if not _is_ros_parameter(k)}
            return check_parameters(ours, joint_names, replay=replay)
    raise ParameterError("no '<node>: ros__parameters:' mapping (the node's parameter file format)")


# -- values ---------------------------------------------------------------------------------

def _typed(name: str, value: Any, default: Any) -> Any:
    """``value`` if it has the type of ``default`` (a list: a list of its entries' type)."""
    if not isinstance(default, list):
        if not _is_kind(value, type(default)):
            raise ParameterError(f"{name}: expected {_EXPECTED[type(default)]}, got {_describe(value)}")
        return float(value) if isinstance(default, float) else value
    kind = type(default[0])
    if not isinstance(value, (list, tuple, array.array)) or not all(_is_kind(x, kind) for x in value):
        raise ParameterError(f"{name}: expected a list of {_PLURAL[kind]}, got {_describe(value)}")
    return [float(x) for x in value] if kind is float else list(value)


def _is_kind(value: Any, kind: type) -> bool:
    if isinstance(value, bool) or kind is bool:  # bool is an int in Python, never a number here
        return isinstance(value, bool) and kind is bool
    if kind is str:
        return isinstance(value, str)
    if isinstance(value, int):
        return kind in (int, float) and -_INT64 <= value < _INT64
    return kind is float and isinstance(value, float) and math.isfinite(value)


_EXPECTED = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}
_PLURAL = {bool: "booleans", int: "integers", float: "finite numbers", str: "strings"}


def _describe(value: Any) -> str:
    """What a refused value is, in YAML's words, shortened to one short line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null (an empty value)"
    if isinstance(value, str):
        return f"the string {_short.repr(value)}"
    if isinstance(value, (int, float)):
        return f"the number {_short.repr(value)}"
    if isinstance(value, dict):
        return f"a mapping {_short.repr(value)}"
    if isinstance(value, (list, tuple, array.array)):
        return _short.repr(list(value))
    return f"a {type(value).__name__} {_short.repr(value)}"


def _check_range(name: str, value: Any, joint_names: Sequence[str]) -> None:
    if name in _LENGTHS and len(value) != _LENGTHS[name]:
        raise ParameterError(f"{name}: expected {_LENGTHS[name]} numbers, got {len(value)}")
    if name == "effort_delay" and abs(value) > MAX_EFFORT_DELAY:
        raise ParameterError(f"{name}: {value} s is beyond +-{MAX_EFFORT_DELAY:g} s (a lag between efforts and "
                             "joint states is milliseconds; the time_offset hint looks within 0.3 s)")
    if name not in _LOWER_BOUNDS:
        return
    bound = _LOWER_BOUNDS[name]
    for i, x in enumerate(value):
        if x < bound:
            raise ParameterError(f"{name}: {x}{_joint_label(i, len(value), joint_names)} must be >= {bound:g}")


def _joint_label(i: int, count: int, joint_names: Sequence[str]) -> str:
    """Which joint the i-th of ``count`` per-joint entries is for."""
    if count == 1:
        return " (all joints)"
    if count == len(joint_names):
        return f" for joint {joint_names[i]}"
    return f" (entry {i}, model joint order)"


# -- files ----------------------------------------------------------------------------------

def _read_text(path: Path) -> str:
    """The file's text, read no further than the size limit."""
    if not path.is_file():  # a FIFO or device would block or never end
        raise ParameterError("no such file" if not path.exists() else "not a regular file")
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ParameterError(f"cannot read it: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ParameterError(f"larger than {MAX_FILE_BYTES} bytes, refused unread (a parameter file is a few kB)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ParameterError(f"not UTF-8 text: byte 0x{data[err.start]:02x} at offset {err.start}") from None


def _parse(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, MarkedYAMLFutureWarning, YAMLError

    yaml = YAML(typ="safe", pure=True)
    yaml.Scanner, yaml.Composer = _bounded_reading()
    try:
        return yaml.load(text)
    except ParameterError:
        raise
    except (MarkedYAMLError, MarkedYAMLFutureWarning) as err:  # duplicate keys are a "warning"
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ParameterError(f"not YAML: {where}{err.problem or err.context}") from None
    except (YAMLError, ValueError) as err:  # ValueError: an integer of more than 4300 digits
        raise ParameterError(f"not YAML: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None


def _bounded_reading() -> tuple[type[Scanner], type[Composer]]:
    """ruamel's Scanner and Composer, refusing as they meet them: aliases (a few hundred bytes
    of them expand to gigabytes), nesting deeper than MAX_DEPTH (the scanner's cost grows with
    the square of the flow nesting, the composer recurses) and more than MAX_NODES values."""
    from ruamel.yaml.composer import Composer
    from ruamel.yaml.events import AliasEvent
    from ruamel.yaml.scanner import Scanner

    class BoundedScanner(Scanner):
        def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
            if self.flow_level >= MAX_DEPTH:
                raise ParameterError(f"line {self.reader.line + 1}: nested more than {MAX_DEPTH} deep")
            super().fetch_flow_collection_start(TokenClass, to_push)

    class BoundedComposer(Composer):
        def __init__(self, loader: Any = None) -> None:
            super().__init__(loader)
            self.nesting, self.nodes = 0, 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.parser.peek_event()
            line = f"line {event.start_mark.line + 1}: "
            if isinstance(event, AliasEvent):
                raise ParameterError(f"{line}alias *{event.anchor}: a parameter file may not use aliases")
            self.nesting, self.nodes = self.nesting + 1, self.nodes + 1
            if self.nesting > MAX_DEPTH:
                raise ParameterError(f"{line}nested more than {MAX_DEPTH} deep")
            if self.nodes > MAX_NODES:
                raise ParameterError(f"{line}more than {MAX_NODES} values")
            try:
                return super().compose_node(parent, index)
            finally:
                self.nesting -= 1

    return BoundedScanner, BoundedComposer


def _is_ros_parameter(name: Any) -> bool:
    return name in _ROS_PARAMETERS or (isinstance(name, str) and name.startswith("qos_overrides."))
