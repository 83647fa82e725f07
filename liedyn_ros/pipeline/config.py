"""Pipeline settings, skip reasons and the types every stage shares."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
Logger = Callable[[str], None]

NS_PER_S = 1_000_000_000


class Model(Protocol):
    """What the pipeline needs from ``liedyn_ros.core.load_urdf``'s model."""

    joint_names: tuple[str, ...]
    floating_base: bool
    root_link: str
    n: int
    nv: int


class SkipReason(str, enum.Enum):
    """Why a message produced no output. The value is the counter / diagnostics key."""

    MISSING_JOINT = "missing_joint"            # a model joint is not in the JointState
    DUPLICATE_JOINT = "duplicate_joint"        # a name appears twice: ambiguous, never guess
    LENGTH_MISMATCH = "length_mismatch"        # position/velocity/effort length != name length
    MISSING_VELOCITY = "missing_velocity"      # empty velocity array (Coriolis needs qd)
    NAN = "nan"                                # non-finite q or qd (or effort) of a model joint
    NO_ODOMETRY = "no_odometry"                # floating base, no odometry received yet
    STALE_ODOMETRY = "stale_odometry"          # latest odometry further than odom_max_age
    BAD_ODOMETRY = "bad_odometry"              # odometry with NaN or a degenerate quaternion
    ESTIMATOR_WARMUP = "estimator_warmup"      # estimated qdd needs a few samples first
    NO_REFERENCE = "no_reference"              # reference source, no trajectory received yet
    STALE_REFERENCE = "stale_reference"        # reference older than reference_max_age
    BAD_REFERENCE = "bad_reference"            # trajectory without points, NaN, missing joint
    COMPUTE_ERROR = "compute_error"            # the core rejected the input (ValueError)
    NON_FINITE_OUTPUT = "non_finite_output"    # finite inputs whose dynamics overflow (|v| ~ 1e154)
    UNSTAMPED = "unstamped"                    # stamp 0 with acceleration_source estimated (needs time)
    UNNAMED_JOINT = "unnamed_joint"            # empty names, a model joint missing: matched by name only
    INTERNAL_ERROR = "internal_error"          # an unexpected exception (a bug), logged with its traceback
    NO_CONTACT_STATE = "no_contact_state"      # contact_source topic/wrench, nothing received yet
    STALE_CONTACT_STATE = "stale_contact_state"  # contact state further than contact_max_age
    BAD_CONTACT_STATE = "bad_contact_state"    # wrong number of flags, NaN in a wrench
    EFFORT_OUT_OF_RANGE = "effort_out_of_range"  # a torque beyond effort_limit_factor x the URDF effort limit


class AccelerationSource(str, enum.Enum):
    """Where the joint accelerations fed to RNEA come from."""

    ZERO = "zero"            # gravity + Coriolis feedforward
    ESTIMATED = "estimated"  # causal filtered differentiation of measured velocities
    REFERENCE = "reference"  # computed-torque feedforward from the latest JointTrajectory


class ContactSource(str, enum.Enum):
    """Which contacts are active at a sample."""

    ALL = "all"              # every configured contact, always
    TOPIC = "topic"          # std_msgs/UInt8MultiArray on contact_state, one flag per contact
    WRENCH = "wrench"        # a WrenchStamped per contact: active when |f| > contact_force_threshold
    KINEMATIC = "kinematic"  # the contact point is near the ground plane and nearly still
    OBSERVER = "observer"    # the momentum observer's foot force along the normal, with hysteresis


CONTACT_KINDS = ("point", "flat")
CONTACT_SOLUTIONS = ("min_torque", "min_force")
LOOP_KINDS = ("point", "weld")


@dataclass(frozen=True)
class PipelineConfig:
    """Pipeline settings; field names match the node's ROS parameters.

    ``odom_max_age``, ``estimator_window``, ``reference_max_age`` and ``warn_period`` are in
    seconds. ``reference_max_age`` <= 0 disables the reference age check. ``command_joints``
    empty means the model's joint order. ``base_link`` empty means the model's root link.

    Contacts (none when ``contact_links`` is empty): ``contact_types`` and ``contact_offsets``
    (x, y, z of the contact point in the link frame) hold one entry for all contacts or one
    per contact; ``contact_wrench_topics`` empty means ``contact_sensor/<link>``. Ages in
    seconds, ``contact_force_threshold`` in N (wrench source: |f|; observer source: touch-down
    along the ground normal, lift-off below ``contact_force_release`` times it), ``contact_height`` (above ``ground_height``,
    world z) in m, ``contact_speed`` in m/s. ``contact_sole_size``: half-lengths (x, y) [m] of
    the rectangular sole of the flat contacts, centred at the contact point in the contact
    frame's axes, one pair for all flat contacts or one per flat contact (``contact_links``
    order); empty or zeros: no centre-of-pressure check.

    Closed loops (none when ``loop_closures`` is empty): each entry "link_a link_b kind", kind
    point (the two points coincide: a ball or, in a planar linkage, a revolute cut joint) or weld;
    ``loop_offsets`` the points in link_a's and link_b's frames (x_a, y_a, z_a, x_b, y_b, z_b [m]),
    one six for all loops or six per loop; ``passive_joints`` the unactuated joints (zero torque).

    External torque (momentum observer, on the samples with a measured effort; off with
    ``external_torque_observer`` false, and no collision events then): ``observer_gain`` K [1/s] (time constant 1/K), ``collision_threshold`` [N m or N], one for
    all joints or one per joint; an event ends when every joint is below ``collision_release``
    times its threshold; with contacts on a floating base the estimate is what remains beyond the
    contacts' forces (pipeline.observed), and a force on the base above ``external_force_threshold``
    [N] is an event too; ``observer_max_gap`` [s]: a longer gap between joint states starts the
    observer over.

    Plausibility: a sample whose feedforward or gravity torque (or the unconstrained one) exceeds
    ``effort_limit_factor`` times a joint's URDF effort limit is skipped (``effort_out_of_range``):
    such a torque comes from a corrupt input (a velocity of 1e150 is finite) or a wrong model, and
    would reach a robot through effort_command. Joints whose URDF gives no limit are not checked.
    """

    acceleration_source: AccelerationSource = AccelerationSource.ZERO
    odom_max_age: float = 0.02
    estimator_window: float = 0.05
    estimator_min_samples: int = 3
    reference_max_age: float = 1.0
    base_link: str = ""
    publish_feedforward: bool = True
    publish_gravity: bool = True
    publish_predicted_acceleration: bool = True
    publish_base_outputs: bool = True
    publish_effort_command: bool = False
    command_joints: tuple[str, ...] = ()
    warn_period: float = 5.0
    contact_links: tuple[str, ...] = ()
    contact_types: tuple[str, ...] = ("point",)
    contact_offsets: tuple[float, ...] = (0.0, 0.0, 0.0)
    friction_coefficient: float = 0.7
    contact_source: ContactSource = ContactSource.ALL
    contact_solution: str = "min_torque"
    contact_max_age: float = 0.02
    contact_force_threshold: float = 20.0
    contact_force_release: float = 0.5
    contact_wrench_topics: tuple[str, ...] = ()
    contact_height: float = 0.02
    contact_speed: float = 0.1
    ground_height: float = 0.0
    contact_sole_size: tuple[float, ...] = ()
    publish_unconstrained: bool = False
    loop_closures: tuple[str, ...] = ()
    loop_offsets: tuple[float, ...] = (0.0,) * 6
    passive_joints: tuple[str, ...] = ()
    external_torque_observer: bool = True
    observer_gain: float = 50.0
    collision_threshold: tuple[float, ...] = (10.0,)
    collision_release: float = 0.5
    external_force_threshold: float = 20.0
    observer_max_gap: float = 0.1
    effort_limit_factor: float = 10.0

    def __post_init__(self) -> None:
        # Accept the plain string a ROS parameter gives, and fail on anything else.
        try:
            source = AccelerationSource(self.acceleration_source)
        except ValueError:
            choices = ", ".join(s.value for s in AccelerationSource)
            raise ValueError(
                f"acceleration_source: {self.acceleration_source!r} is not one of {choices}"
            ) from None
        object.__setattr__(self, "acceleration_source", source)
        object.__setattr__(self, "command_joints", tuple(self.command_joints))
        _require_positive("odom_max_age", self.odom_max_age)
        _require_positive("estimator_window", self.estimator_window)
        _require_positive("warn_period", self.warn_period, allow_zero=True)
        if self.estimator_min_samples < 2:
            raise ValueError(
                f"estimator_min_samples: {self.estimator_min_samples} < 2, a slope needs two samples"
            )
        if not math.isfinite(self.reference_max_age):
            raise ValueError(f"reference_max_age: {self.reference_max_age} is not finite")
        if not self.effort_limit_factor >= 1.0:  # NaN too
            raise ValueError(f"effort_limit_factor: {self.effort_limit_factor} must be >= 1 (.inf: no check)")
        self._check_contacts()
        self._check_loops()
        self._check_observer()

    def _check_loops(self) -> None:
        for name in ("loop_closures", "loop_offsets", "passive_joints"):
            value = getattr(self, name)
            if isinstance(value, str):  # a YAML scalar where a list belongs: never split it
                raise ValueError(f"{name}: expected a list, got the string {value!r}")
            object.__setattr__(self, name, tuple(value))
        for entry in self.loop_closures:
            words = str(entry).split()
            if len(words) != 3 or words[2] not in LOOP_KINDS:
                raise ValueError(f"loop_closures: {entry!r} is not 'link_a link_b kind' with kind one of {LOOP_KINDS}")
        n = len(self.loop_closures)
        if len(self.loop_offsets) not in (6, 6 * n) or not all(map(math.isfinite, self.loop_offsets)):
            raise ValueError(f"loop_offsets: {list(self.loop_offsets)} must be x_a, y_a, z_a, x_b, y_b, z_b for all "
                             f"loops or per loop ({6 * n} numbers), finite")
        if len(set(self.passive_joints)) != len(self.passive_joints):
            raise ValueError(f"passive_joints: a joint appears twice in {list(self.passive_joints)}")
        if self.passive_joints and not (self.loop_closures or self.contact_links):
            raise ValueError(f"passive_joints: {list(self.passive_joints)} need loop_closures or contact_links "
                             "(no constraint force holds an unactuated joint otherwise)")

    def loop_words(self) -> tuple[tuple[str, str, str], ...]:
        """(link_a, link_b, kind) of every loop closure."""
        return tuple((w[0], w[1], w[2]) for w in (str(e).split() for e in self.loop_closures))

    def _check_observer(self) -> None:
        if isinstance(self.collision_threshold, (int, float)):  # one number for all joints
            object.__setattr__(self, "collision_threshold", (float(self.collision_threshold),))
        object.__setattr__(self, "collision_threshold", tuple(float(x) for x in self.collision_threshold))
        _require_positive("observer_gain", self.observer_gain)
        _require_positive("observer_max_gap", self.observer_max_gap)
        _require_positive("external_force_threshold", self.external_force_threshold)
        if not self.collision_threshold or not all(math.isfinite(x) and x > 0 for x in self.collision_threshold):
            raise ValueError(f"collision_threshold: {list(self.collision_threshold)} must be positive and finite")
        if not (math.isfinite(self.collision_release) and 0.0 < self.collision_release <= 1.0):
            raise ValueError(f"collision_release: {self.collision_release} must be in (0, 1]")

    def wrench_topics(self) -> tuple[str, ...]:
        """The foot sensor topic of each contact (relative): ``contact_wrench_topics``, or
        contact_sensor/<link> when empty."""
        return self.contact_wrench_topics or tuple(f"contact_sensor/{link}" for link in self.contact_links)

    def _check_contacts(self) -> None:
        for name in ("contact_links", "contact_types", "contact_offsets", "contact_wrench_topics"):
            value = getattr(self, name)
            if isinstance(value, str):  # a YAML scalar where a list belongs: never split it
                raise ValueError(f"{name}: expected a list, got the string {value!r}")
            object.__setattr__(self, name, tuple(value))
        try:
            source = ContactSource(self.contact_source)
        except ValueError:
            choices = ", ".join(s.value for s in ContactSource)
            raise ValueError(f"contact_source: {self.contact_source!r} is not one of {choices}") from None
        object.__setattr__(self, "contact_source", source)
        k = len(self.contact_links)
        if len(set(self.contact_links)) != k:
            raise ValueError(f"contact_links: a link appears twice in {list(self.contact_links)}")
        bad = [t for t in self.contact_types if t not in CONTACT_KINDS]
        if bad or len(self.contact_types) not in (1, k):
            raise ValueError(f"contact_types: {list(self.contact_types)} must be one of {CONTACT_KINDS} "
                             f"for all contacts or one per contact ({k})")
        if len(self.contact_offsets) not in (3, 3 * k) or not all(map(math.isfinite, self.contact_offsets)):
            raise ValueError(f"contact_offsets: {list(self.contact_offsets)} must be x, y, z for all "
                             f"contacts or per contact ({3 * k} numbers), finite")
        if len(self.contact_wrench_topics) not in (0, k):
            raise ValueError(f"contact_wrench_topics: {len(self.contact_wrench_topics)} topics for {k} contacts")
        if self.contact_solution not in CONTACT_SOLUTIONS:
            raise ValueError(f"contact_solution: {self.contact_solution!r} is not one of {CONTACT_SOLUTIONS}")
        _require_positive("friction_coefficient", self.friction_coefficient)
        _require_positive("contact_max_age", self.contact_max_age)
        _require_positive("contact_force_threshold", self.contact_force_threshold, allow_zero=True)
        if not (math.isfinite(self.contact_force_release) and 0.0 < self.contact_force_release <= 1.0):
            raise ValueError(f"contact_force_release: {self.contact_force_release} must be in (0, 1]")
        if source is ContactSource.OBSERVER and not self.external_torque_observer:
            raise ValueError("contact_source: observer needs external_torque_observer true")
        _require_positive("contact_height", self.contact_height)
        _require_positive("contact_speed", self.contact_speed)
        if not math.isfinite(self.ground_height):
            raise ValueError(f"ground_height: {self.ground_height} is not finite")
        self._check_soles()

    def flat_soles(self) -> tuple[tuple[float, float], ...]:
        """The sole half-lengths (x, y) of each flat contact in ``contact_links`` order; (0, 0)
        for a sole not checked (all of them without ``contact_sole_size``)."""
        size, flat = self.contact_sole_size, self._flat_count()
        if not any(size):
            return ((0.0, 0.0),) * flat
        pairs = tuple(zip(size[::2], size[1::2]))
        return pairs * flat if len(pairs) == 1 else pairs

    def _flat_count(self) -> int:
        k = len(self.contact_links)
        return (self.contact_types * k if len(self.contact_types) == 1 else self.contact_types).count("flat")

    def _check_soles(self) -> None:
        size = self.contact_sole_size
        if isinstance(size, (int, float)):  # one number: the node's default [0.0]
            size = (size,)
        size = tuple(float(x) for x in size)
        if not all(math.isfinite(x) and x >= 0.0 for x in size):
            raise ValueError(f"contact_sole_size: {list(size)} must be finite and >= 0")
        object.__setattr__(self, "contact_sole_size", size if any(size) else ())  # zeros: no check
        if not any(size):
            return
        flat = self._flat_count()
        if flat == 0:
            raise ValueError(f"contact_sole_size: {list(size)} given but no contact is flat (contact_types)")
        if len(size) not in (2, 2 * flat):
            raise ValueError(f"contact_sole_size: {list(size)} must be half-lengths x, y for all flat contacts "
                             f"or per flat contact ({2 * flat} numbers)")
        if any((x > 0.0) != (y > 0.0) for x, y in zip(size[::2], size[1::2])):
            raise ValueError(f"contact_sole_size: {list(size)}: a sole needs both half-lengths > 0 "
                             "(both 0: not checked)")


# Parameters of the node that are not pipeline settings (the model's, the node's timers).
NODE_ONLY_PARAMETERS = frozenset({"robot_description", "floating_base", "strict_urdf", "gravity", "diagnostics_period"})


def config_from_parameters(values: dict[str, Any]) -> PipelineConfig:
    """PipelineConfig from ROS parameter values (the node's, or a ros__parameters file's in the
    replay); string lists drop empty entries (a ROS string[] cannot be empty, so [""] stands for
    none). Raises ValueError naming a bad parameter, TypeError for an unknown one."""
    if "diagnostics_period" in values:  # the node's timer: 0 would spin it, a negative period end it
        _require_positive("diagnostics_period", values["diagnostics_period"])
    kwargs = {k: v for k, v in values.items() if k not in NODE_ONLY_PARAMETERS}
    for name in ("command_joints", "contact_links", "contact_wrench_topics", "loop_closures", "passive_joints"):
        if name in kwargs and not isinstance(kwargs[name], str):  # a string: PipelineConfig says so, unsplit
            kwargs[name] = tuple(j for j in kwargs[name] if j)
    return PipelineConfig(**kwargs)


def _require_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: {value} must be finite and {bound}")
