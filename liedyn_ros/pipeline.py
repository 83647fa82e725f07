"""ROS-free message-to-dynamics pipeline shared by the ROS 2 node and the bag replay.

Nothing here imports rclpy or any message package: messages are read by attribute (duck
typing), so the same code accepts rclpy messages (``array.array`` fields), rosbags typestore
messages (``numpy`` fields) and plain test objects. Output messages are built by
:class:`OutputMessageFactory` from a :class:`MessageClasses` bundle, which the node fills with
rclpy classes and the replay with rosbags typestore classes.

Data flow for one JointState::

    JointStateDecoder.decode(msg)         -> JointSample (stamp ns, q, qd, effort in model order)
      (decode_arrays: the same for a chunk of messages as (N, n) arrays; the replay uses it)
    pair_odometry (floating base)         -> base_pose T_world_base, base twist (omega, v)
    acceleration source                   -> a (zero | estimated | reference)
    compute_outputs(model, q, v, a, ...)  -> DynamicsOutputs (batched numpy, core calls)
    OutputMessageFactory.build(output)    -> {topic: message}

Conventions (shared/CONVENTIONS.md): twists (omega, v), wrenches (m, f), angular first;
the floating-base generalized velocity is the Odometry twist in child_frame_id, reordered
angular-first; output stamps copy the JointState stamp.
"""
from __future__ import annotations

import array
import enum
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core import SingularInertiaError

FloatArray = NDArray[np.float64]
Logger = Callable[[str], None]

NS_PER_S = 1_000_000_000

# Output topic names (relative, in the node's namespace); the replay prefixes them.
TOPIC_FEEDFORWARD = "feedforward_torque"
TOPIC_GRAVITY = "gravity_torque"
TOPIC_PREDICTED_ACCELERATION = "predicted_acceleration"
TOPIC_BASE_WRENCH = "base_wrench"
TOPIC_BASE_ACCELERATION = "predicted_base_acceleration"
TOPIC_EFFORT_COMMAND = "effort_command"


class Model(Protocol):
    """What the pipeline needs from ``liedyn_ros.core.load_urdf``'s model."""

    joint_names: tuple[str, ...]
    floating_base: bool
    root_link: str
    n: int
    nv: int


# --------------------------------------------------------------------------------------
# Skip reasons and configuration
# --------------------------------------------------------------------------------------


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


class AccelerationSource(str, enum.Enum):
    """Where the joint accelerations fed to RNEA come from."""

    ZERO = "zero"            # gravity + Coriolis feedforward
    ESTIMATED = "estimated"  # causal filtered differentiation of measured velocities
    REFERENCE = "reference"  # computed-torque feedforward from the latest JointTrajectory


@dataclass(frozen=True)
class PipelineConfig:
    """Pipeline settings; field names match the node's ROS parameters.

    ``odom_max_age``, ``estimator_window``, ``reference_max_age`` and ``warn_period`` are in
    seconds. ``reference_max_age`` <= 0 disables the reference age check. ``command_joints``
    empty means the model's joint order. ``base_link`` empty means the model's root link.
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


def _require_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: {value} must be finite and {bound}")


# --------------------------------------------------------------------------------------
# Decoding JointState
# --------------------------------------------------------------------------------------


class JointSample(NamedTuple):
    """One JointState reordered to the model's joints. ``effort`` is None when absent.

    q, qd and effort are contiguous float64 views of one array: the core's single-sample fast
    path takes them as they are."""

    stamp_ns: int
    frame_id: str
    q: FloatArray
    qd: FloatArray
    effort: FloatArray | None


def stamp_to_ns(stamp: Any) -> int:
    """builtin_interfaces/Time (``sec``, ``nanosec``) -> integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def as_float_array(values: Any) -> FloatArray:
    """A float64[] field (array.array, numpy array or list) as a float64 numpy array."""
    # np.asarray reads array.array through the buffer protocol without a Python loop.
    return np.asarray(values, dtype=np.float64)


def joined_float_arrays(position: Any, velocity: Any, effort: Any) -> FloatArray:
    """The three float64[] fields of a JointState end to end as one float64 array, so that
    one gather picks q, qd and effort."""
    if (type(position) is type(velocity) is type(effort) is array.array
            and position.typecode == velocity.typecode == effort.typecode == "d"):
        # rclpy's fields: joining the bytes and viewing them beats numpy's per-argument
        # conversion several times over.
        return np.frombuffer(b"".join((position, velocity, effort)), dtype=np.float64)
    return np.concatenate((position, velocity, effort), dtype=np.float64)


def length_problem(n_names: int, n_position: int, n_velocity: int, n_effort: int) -> SkipReason | None:
    """Why position/velocity/effort lengths cannot be matched to ``n_names`` names, if so.
    Effort may be empty (no measured torques); velocity may not (Coriolis needs it)."""
    if n_position != n_names or n_effort not in (0, n_names):
        return SkipReason.LENGTH_MISMATCH
    if n_velocity == 0:
        return SkipReason.MISSING_VELOCITY
    if n_velocity != n_names:
        return SkipReason.LENGTH_MISMATCH
    return None


class JointStateArrays(NamedTuple):
    """JointState messages that share one name list, as arrays: the input of decoding.

    position, velocity, effort: (N, m) rows as received, where m is each field's length in
    the messages (0 for an empty field); stamp_ns: (N,); frame_id: one per message.
    Decoding checks m against ``len(names)``. The bag replay fills this for a whole chunk
    straight from the CDR bytes. A single message (:meth:`from_message`) has no leading
    dimension: (m,) fields and a 0-d stamp. (The node's per-message path,
    :meth:`JointStateDecoder.decode`, reads the message itself with the same checks.)
    """

    names: tuple[str, ...]
    stamp_ns: NDArray[np.int64]
    frame_id: tuple[str, ...]
    position: FloatArray
    velocity: FloatArray
    effort: FloatArray

    @classmethod
    def from_message(cls, msg: Any) -> JointStateArrays:
        header = msg.header
        return cls(
            tuple(msg.name), np.asarray(stamp_to_ns(header.stamp), dtype=np.int64),
            (str(header.frame_id),), as_float_array(msg.position),
            as_float_array(msg.velocity), as_float_array(msg.effort),
        )


class JointBlock(NamedTuple):
    """Decoded JointStates in model order: q, qd (N, n); effort (N, n) or None when the
    messages carry none; ``finite`` (N,) is False for rows to skip with
    :attr:`SkipReason.NAN` (a non-finite q, qd or effort of a model joint). No leading
    dimension when decoded from a single message."""

    stamp_ns: NDArray[np.int64]
    frame_id: tuple[str, ...]
    q: FloatArray
    qd: FloatArray
    effort: FloatArray | None
    finite: NDArray[np.bool_]


class _NameMatch(NamedTuple):
    """Where a JointState name list puts the model's joints (cached per name list)."""

    indices: NDArray[np.intp]  # model joint j is entry indices[j] of the message
    gather: NDArray[np.intp]   # indices, indices + m, indices + 2m: q, qd, effort from the
                               # position, velocity, effort fields end to end (m names)


class JointStateDecoder:
    """Matches JointState entries to the model's joints by name.

    The name -> index mapping is cached per name tuple, since a driver sends the same list
    every time. Extra joints (grippers, mimic joints, which the core derives from their
    leaders) are ignored. Bad samples give a :class:`SkipReason` instead of a sample.
    One message (:meth:`decode`, the node's path, kept lean) and a chunk of messages
    (:meth:`decode_arrays`, the replay's) go through the same checks.
    """

    _CACHE_LIMIT = 32  # a publisher that changes its name list every message must not grow memory

    def __init__(self, model: Model) -> None:
        self._joint_names = tuple(model.joint_names)
        self._n = len(self._joint_names)
        self._match_cache: dict[tuple[str, ...], _NameMatch | SkipReason] = {}

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self._joint_names

    def indices(self, names: Sequence[str]) -> NDArray[np.intp] | SkipReason:
        """Positions of the model joints in ``names``, or why they cannot be found."""
        match = self._match(names)
        return match if isinstance(match, SkipReason) else match.indices

    def _match(self, names: Sequence[str]) -> _NameMatch | SkipReason:
        key = tuple(names)
        cached = self._match_cache.get(key)
        if cached is None:
            cached = self._build_match(key)
            if len(self._match_cache) >= self._CACHE_LIMIT:
                self._match_cache.clear()
            self._match_cache[key] = cached
        return cached

    def _build_match(self, names: tuple[str, ...]) -> _NameMatch | SkipReason:
        position = {name: i for i, name in enumerate(names)}
        if len(position) != len(names):
            return SkipReason.DUPLICATE_JOINT
        try:
            idx = np.array([position[j] for j in self._joint_names], dtype=np.intp)
        except KeyError:
            return SkipReason.MISSING_JOINT
        m = len(names)
        return _NameMatch(idx, np.concatenate((idx, idx + m, idx + 2 * m)))

    def missing_joints(self, names: Sequence[str]) -> list[str]:
        """Model joints absent from ``names`` (for warning texts)."""
        present = set(names)
        return [j for j in self._joint_names if j not in present]

    def decode(self, msg: Any) -> JointSample | SkipReason:
        """sensor_msgs/JointState -> :class:`JointSample` in model order, or a skip reason."""
        names, position, velocity, effort = msg.name, msg.position, msg.velocity, msg.effort
        match = self._match(names)
        if isinstance(match, SkipReason):
            return match
        n_effort = len(effort)
        problem = length_problem(len(names), len(position), len(velocity), n_effort)
        if problem is not None:
            return problem
        # One gather gives [q | qd | effort] (the gather's first 2n entries read position and
        # velocity only, so the same indices serve a message without efforts).
        n = self._n
        gather = match.gather if n_effort else match.gather[: 2 * n]
        values = joined_float_arrays(position, velocity, effort).take(gather)
        # A NaN or inf among the model joints' values makes their sum non-finite (so would
        # values near 1e308 whose sum overflows, which no joint state has). Python's sum over
        # a list is cheaper than a numpy reduction at this size.
        if not math.isfinite(sum(values.tolist())):
            return SkipReason.NAN
        header = msg.header
        return JointSample(
            stamp_to_ns(header.stamp), str(header.frame_id), values[:n], values[n : 2 * n],
            values[2 * n :] if n_effort else None,
        )

    def decode_arrays(self, arrays: JointStateArrays) -> JointBlock | SkipReason:
        """Messages sharing one name list -> :class:`JointBlock`, or the reason to skip them
        all (name or length problems are the same for every message of the list)."""
        idx = self.indices(arrays.names)
        if isinstance(idx, SkipReason):
            return idx
        n_effort = arrays.effort.shape[-1]
        problem = length_problem(
            len(arrays.names), arrays.position.shape[-1], arrays.velocity.shape[-1], n_effort
        )
        if problem is not None:
            return problem
        q, qd = arrays.position.take(idx, axis=-1), arrays.velocity.take(idx, axis=-1)
        total = q.sum(axis=-1) + qd.sum(axis=-1)
        effort = None
        if n_effort:
            effort = arrays.effort.take(idx, axis=-1)
            total = total + effort.sum(axis=-1)
        # As in decode: a row with a non-finite model-joint value has a non-finite sum.
        finite = np.asarray(np.isfinite(total), dtype=np.bool_)
        return JointBlock(arrays.stamp_ns, arrays.frame_id, q, qd, effort, finite)


# --------------------------------------------------------------------------------------
# Odometry and reference decoding
# --------------------------------------------------------------------------------------


class BaseState(NamedTuple):
    """Floating-base state from nav_msgs/Odometry: T_world_base and the body twist (omega, v)."""

    stamp_ns: int
    child_frame_id: str
    pose: FloatArray
    twist: FloatArray


def decode_odometry(msg: Any) -> BaseState | SkipReason:
    """nav_msgs/Odometry -> :class:`BaseState`. The twist is reordered angular-first."""
    p = msg.pose.pose.position
    o = msg.pose.pose.orientation
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    # Checked as Python floats: a dozen numbers cost less this way than as numpy arrays.
    position = [float(p.x), float(p.y), float(p.z)]
    quat = [float(o.x), float(o.y), float(o.z), float(o.w)]
    twist = [float(ang.x), float(ang.y), float(ang.z), float(lin.x), float(lin.y), float(lin.z)]
    # A NaN or inf anywhere makes the sum non-finite.
    if not math.isfinite(sum(position) + sum(quat) + sum(twist)):
        return SkipReason.BAD_ODOMETRY
    norm = math.hypot(*quat)
    # Estimators publish quaternions normalised to float precision; anything far off is a bug
    # upstream (for instance an all-zero default quaternion), not rounding.
    if abs(norm - 1.0) > 1e-3:
        return SkipReason.BAD_ODOMETRY
    pose = core.pose_from_position_quaternion(np.array(position), np.array(quat) / norm)
    return BaseState(
        stamp_to_ns(msg.header.stamp), str(msg.child_frame_id), pose, np.array(twist)
    )


def pair_odometry(stamp_ns: int, odom: BaseState | None, max_age_s: float) -> BaseState | SkipReason:
    """The base state to use with a JointState stamped ``stamp_ns``.

    The rule of the node and the replay alike: the latest odometry received, provided its
    stamp is no further than ``max_age_s`` (``odom_max_age``) from the joint state's, on
    either side (an estimator may stamp slightly ahead of the joint states). Pairing with the
    latest message rather than interpolating keeps the node causal and never invents a pose.
    """
    if odom is None:
        return SkipReason.NO_ODOMETRY
    if abs(stamp_ns - odom.stamp_ns) > max_age_s * NS_PER_S:
        return SkipReason.STALE_ODOMETRY
    return odom


@dataclass(frozen=True)
class Reference:
    """First point of a trajectory_msgs/JointTrajectory, in model order."""

    stamp_ns: int
    q: FloatArray
    qd: FloatArray
    qdd: FloatArray


def decode_reference(msg: Any, decoder: JointStateDecoder, stamp_ns: int) -> Reference | SkipReason:
    """JointTrajectory -> :class:`Reference` at its first point.

    Empty ``velocities``/``accelerations`` mean zero (a hold-position point); positions are
    required. ``stamp_ns`` is the stamp used for the age check.
    """
    if len(msg.points) == 0:
        return SkipReason.BAD_REFERENCE
    idx = decoder.indices(msg.joint_names)
    if isinstance(idx, SkipReason):
        return SkipReason.BAD_REFERENCE
    point = msg.points[0]
    n_names = len(msg.joint_names)
    arrays = []
    for name in ("positions", "velocities", "accelerations"):
        values = as_float_array(getattr(point, name))
        if values.shape[0] == 0 and name != "positions":
            values = np.zeros(n_names)
        if values.shape[0] != n_names or not np.isfinite(values).all():
            return SkipReason.BAD_REFERENCE
        arrays.append(values[idx])
    return Reference(stamp_ns, arrays[0], arrays[1], arrays[2])


# --------------------------------------------------------------------------------------
# Acceleration estimation
# --------------------------------------------------------------------------------------


class AccelerationEstimator:
    """Causal velocity differentiation by a least-squares line over a time window.

    At each new sample (t_k, v_k) it fits v = c + a t to the samples with t in
    (t_k - window, t_k] and returns the slope a. Using the actual stamps (not a nominal
    period) makes it insensitive to jitter; the least-squares fit averages out velocity noise.
    The estimate lags by about window / 2. The history is reset when time goes backwards
    (bag loop, sim reset) or jumps by more than the window (a gap would bridge two motions);
    a repeated stamp replaces the previous sample.

    The window lives in preallocated rows ``[start, end)`` of one array, each row the sample's
    time (seconds from ``origin``) followed by its velocity, so one product with the centred
    times gives the slope's numerator and denominator together, and a sample allocates
    nothing beyond the fit's own results. When ``end`` reaches the capacity the live rows move
    to the front (rarely: the capacity holds several windows), doubling it if the window
    outgrew half of it. The exact integer stamps of the window, for the window and reset
    rules, are kept alongside in a deque.
    """

    _INITIAL_CAPACITY = 256

    def __init__(self, window_s: float, min_samples: int = 3) -> None:
        self._window_ns = int(round(window_s * NS_PER_S))
        self._min_samples = min_samples
        self._stamps: deque[int] = deque()
        self._rows = np.empty((0, 0))
        self._origin_ns = 0
        self._start = self._end = 0

    def reset(self) -> None:
        self._stamps.clear()
        self._start = self._end = 0

    def update(self, stamp_ns: int, v: FloatArray) -> FloatArray | None:
        """Add a sample; returns dv/dt, or None while fewer than ``min_samples`` are held."""
        self._append(stamp_ns, v)
        if len(self._stamps) < self._min_samples:
            return None
        window = self._rows[self._start : self._end]
        t = window[:, 0]
        t_centered = t - t.sum() / t.shape[0]  # sum() is cheaper than mean()
        # Slope = t_c @ (v - mean v) / (t_c @ t_c) = t_c @ v / (t_c @ t), since sum(t_c) = 0.
        products = t_centered @ window
        return products[1:] / products[0]

    def _append(self, stamp_ns: int, v: FloatArray) -> None:
        stamps = self._stamps
        if stamps:
            last = stamps[-1]
            if stamp_ns < last or stamp_ns - last > self._window_ns:
                self.reset()
            elif stamp_ns == last:
                stamps.pop()
                self._end -= 1
        if self._end == self._rows.shape[0] or self._rows.shape[1] != 1 + v.shape[-1]:
            self._make_room(v.shape[-1])
        if not stamps:
            self._origin_ns = stamp_ns
        row = self._rows[self._end]
        row[0] = (stamp_ns - self._origin_ns) * 1e-9
        row[1:] = v
        self._end += 1
        stamps.append(stamp_ns)
        while stamp_ns - stamps[0] >= self._window_ns:
            stamps.popleft()
            self._start += 1

    def _make_room(self, nv: int) -> None:
        """Move the live rows to the front, growing the buffer when they fill half of it."""
        if self._rows.shape[1] != 1 + nv:  # first sample, or another velocity size: start over
            self.reset()
        live = self._end - self._start
        capacity = max(self._INITIAL_CAPACITY, self._rows.shape[0])
        if 2 * live > capacity:
            capacity *= 2
        rows = np.empty((capacity, 1 + nv))
        if live:
            rows[:live] = self._rows[self._start : self._end]
            # Times from the oldest live sample keep them small however long the run.
            self._origin_ns = self._stamps[0]
            rows[:live, 0] = (np.fromiter(self._stamps, np.int64, live) - self._origin_ns) * 1e-9
        self._rows = rows
        self._start, self._end = 0, live


def estimate_accelerations(
    stamps_ns: NDArray[np.int64], v: FloatArray, window_s: float, min_samples: int = 3
) -> FloatArray:
    """Batch form of :class:`AccelerationEstimator` (same numbers): (N,) stamps, (N, nv)
    velocities -> (N, nv) accelerations, NaN rows where the estimator is still warming up."""
    estimator = AccelerationEstimator(window_s, min_samples)
    out = np.full(np.shape(v), np.nan)
    for k, (stamp, row) in enumerate(zip(stamps_ns, v)):
        a = estimator.update(int(stamp), row)
        if a is not None:
            out[k] = a
    return out


# --------------------------------------------------------------------------------------
# Dynamics
# --------------------------------------------------------------------------------------


class DynamicsOutputs(NamedTuple):
    """Core results for one sample (shape (n,)) or a batch (shape (N, n)).

    tau_ff: rnea joint torques; tau_g: gravity joint torques; qdd_pred: aba joint
    accelerations from the measured efforts (None without efforts; NaN rows for batch rows
    without efforts). Floating base only: base_wrench = rnea's base part (m, f) in the base
    frame, the wrench the environment must apply to the base for this motion;
    base_acc_pred = aba's base part, dV_base/dt (omega', v') with the base unactuated.
    (A NamedTuple: built once per message in the node, several times cheaper than a frozen
    dataclass.)
    """

    tau_ff: FloatArray
    tau_g: FloatArray
    qdd_pred: FloatArray | None = None
    base_wrench: FloatArray | None = None
    base_acc_pred: FloatArray | None = None

    def row(self, i: int) -> DynamicsOutputs:
        """Sample ``i`` of a batch (the replay builds one message set per row)."""
        def pick(x: FloatArray | None) -> FloatArray | None:
            return None if x is None else x[i]
        return DynamicsOutputs(
            self.tau_ff[i], self.tau_g[i], pick(self.qdd_pred),
            pick(self.base_wrench), pick(self.base_acc_pred),
        )


_NO_BASE_WRENCH = np.zeros(6)  # aba's base part of the generalized force: a free-floating base


def compute_outputs(
    model: Any,
    q: FloatArray,
    v: FloatArray,
    a: FloatArray,
    effort: FloatArray | None,
    base_pose: FloatArray | None = None,
    *,
    ff_state: tuple[FloatArray, FloatArray] | None = None,
) -> DynamicsOutputs:
    """Feedforward, gravity and predicted accelerations, batched over leading dimensions.

    q: (..., n); v, a: (..., nv) with nv = n, or 6 + n with the base twist first (floating
    base, ``base_pose`` (..., 4, 4) required); effort: (..., n) measured joint torques or None
    (rows containing NaN are treated as "no effort" and give NaN predictions).
    ``ff_state = (q_ff, v_ff)`` evaluates the feedforward at another state (the reference
    trajectory) instead of (q, v). Returns joint-space parts of length n; the base parts go
    to ``base_wrench`` / ``base_acc_pred``. A single sample of contiguous float64 vectors
    takes the core's single-sample fast path (the node's case).
    """
    q_ff, v_ff = (q, v) if ff_state is None else ff_state
    tau_ff_full = core.rnea(model, q_ff, v_ff, a, base_pose=base_pose)
    tau_g_full = core.gravity(model, q, base_pose=base_pose)
    acc_full = _predict_accelerations(model, q, v, effort, base_pose)
    if not model.floating_base:
        return DynamicsOutputs(tau_ff_full, tau_g_full, acc_full)
    return DynamicsOutputs(
        tau_ff_full[..., 6:], tau_g_full[..., 6:],
        None if acc_full is None else acc_full[..., 6:],
        tau_ff_full[..., :6],
        None if acc_full is None else acc_full[..., :6],
    )


def _predict_accelerations(
    model: Any, q: FloatArray, v: FloatArray, effort: FloatArray | None, base_pose: FloatArray | None
) -> FloatArray | None:
    """aba with the measured efforts; the floating base gets zero generalized force."""
    if effort is None:
        return None
    if effort.ndim == 1:
        tau = np.concatenate((_NO_BASE_WRENCH, effort)) if model.floating_base else effort
        return core.aba(model, q, v, tau, base_pose=base_pose)
    # Batch: run aba only on rows that have efforts; the core rejects NaN by contract.
    effort = np.asarray(effort, dtype=np.float64)
    if model.floating_base:
        effort = np.concatenate([np.zeros(effort.shape[:-1] + (6,)), effort], axis=-1)
    valid = np.isfinite(effort).all(axis=-1)
    out = np.full(effort.shape, np.nan)
    if valid.any():
        out[valid] = core.aba(
            model, q[valid], v[valid], effort[valid],
            base_pose=None if base_pose is None else base_pose[valid],
        )
    return out


def prepare_kernels(model: Any, *, batch: bool = False) -> float:
    """Run a robot at rest through compute_outputs, so that numba builds the compiled kernels (or
    loads them from its cache) now rather than on the first real sample; returns the seconds taken.

    The node's single samples and the replay's blocks (``batch=True``) use different kernels. The
    first run after an install compiles for about a minute on a 2-core machine; later runs load
    the cache in under a second. A model whose forward dynamics is undefined (a massless link on
    a moving joint) raises SingularInertiaError here, after rnea and gravity are built.
    """
    start = time.perf_counter()
    lead = (1,) if batch else ()
    q, tau = np.zeros(lead + (model.n,)), np.zeros(lead + (model.n,))
    v = np.zeros(lead + (model.nv,))
    pose = np.broadcast_to(np.eye(4), lead + (4, 4)).copy() if model.floating_base else None
    compute_outputs(model, q, v, v, tau, pose)
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------
# The streaming pipeline (one message at a time, as the node receives them)
# --------------------------------------------------------------------------------------


class PipelineOutput(NamedTuple):
    """Everything needed to publish one JointState's outputs."""

    stamp_ns: int
    frame_id: str
    base_frame: str
    sample: JointSample
    outputs: DynamicsOutputs


@dataclass
class PipelineStats:
    """Counters for diagnostics."""

    received: int = 0
    published: int = 0
    skipped: dict[SkipReason, int] = field(default_factory=dict)
    last_compute_s: float = 0.0
    total_compute_s: float = 0.0

    @property
    def mean_compute_s(self) -> float:
        return self.total_compute_s / self.published if self.published else 0.0


class RateLimitedWarner:
    """At most one warning per key per ``period`` seconds, reporting how many were held back."""

    def __init__(self, log: Logger, period: float, clock: Callable[[], float] = time.monotonic):
        self._log, self._period, self._clock = log, period, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warn(self, key: str, text: str) -> None:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._period:
            self._held[key] = self._held.get(key, 0) + 1
            return
        held = self._held.pop(key, 0)
        suffix = f" ({held} more since the last warning)" if held else ""
        self._last[key] = now
        self._log(text + suffix)


class DynamicsPipeline:
    """JointState (+ Odometry, + reference JointTrajectory) -> :class:`PipelineOutput`.

    ``on_joint_state`` returns None for a skipped sample, after counting the reason in
    ``stats.skipped`` and emitting a rate-limited warning through ``log``.
    """

    def __init__(
        self,
        model: Any,
        config: PipelineConfig | None = None,
        *,
        log: Logger = lambda text: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.config = config or PipelineConfig()
        self.decoder = JointStateDecoder(model)
        self.stats = PipelineStats()
        self.base_frame = self.config.base_link or str(model.root_link)
        self._log = log
        self._warner = RateLimitedWarner(log, self.config.warn_period, clock)
        self._estimator = AccelerationEstimator(
            self.config.estimator_window, self.config.estimator_min_samples
        )
        self._floating = bool(model.floating_base)
        self._odom: BaseState | None = None
        self._reference: Reference | None = None
        self._last_stamp_ns: int | None = None
        self._frame_warned = False
        # Set when the model turns out to have no forward dynamics (a massless link on a moving
        # joint): the torques go on, the predicted accelerations stop.
        self._no_forward_dynamics = False
        n_base = 6 if self._floating else 0
        # Inputs the core only reads, made once. (Writable: the core's single-sample fast path
        # refuses read-only arrays.)
        self._zero_acceleration = np.zeros(n_base + len(self.decoder.joint_names))
        # Reference source: a = [0 ; qdd_ref] and v_ff = [measured base twist ; qd_ref], set
        # when a trajectory arrives; per sample only v_ff's base part changes.
        self._reference_a = self._zero_acceleration
        self._reference_v = self._zero_acceleration.copy()

    # -- inputs -----------------------------------------------------------------------

    def on_odometry(self, msg: Any) -> SkipReason | None:
        """Store the latest odometry; returns the skip reason for a rejected message."""
        state = decode_odometry(msg)
        if isinstance(state, SkipReason):
            self._skip(state, "odometry rejected: non-finite values or a non-unit quaternion")
            return state
        if state.child_frame_id != self.base_frame and not self._frame_warned:
            # Warn once: a mismatch usually means the twist is expressed in another frame.
            self._frame_warned = True
            self._log(
                f"odometry child_frame_id '{state.child_frame_id}' differs from the base link "
                f"'{self.base_frame}'; the twist is used as if expressed in '{self.base_frame}'"
            )
        self._odom = state
        return None

    def on_reference(self, msg: Any) -> SkipReason | None:
        """Store the first point of a JointTrajectory for the ``reference`` source."""
        stamp = stamp_to_ns(msg.header.stamp)
        # A zero stamp means "now" in trajectory_msgs; date it by the latest joint state.
        if stamp == 0:
            stamp = self._last_stamp_ns or 0
        reference = decode_reference(msg, self.decoder, stamp)
        if isinstance(reference, SkipReason):
            self._skip(
                reference, "reference trajectory rejected: no points, NaN, a length mismatch "
                f"or missing joints (need {list(self.decoder.joint_names)})"
            )
            return reference
        self._reference = reference
        n_base = 6 if self._floating else 0
        # The reference has no base motion: zero base acceleration (the base twist is the
        # measured one, copied in per sample).
        self._reference_a = np.concatenate((np.zeros(n_base), reference.qdd))
        self._reference_v = np.concatenate((np.zeros(n_base), reference.qd))
        return None

    def on_joint_state(self, msg: Any) -> PipelineOutput | None:
        """Process one JointState; None when the sample is skipped."""
        stats = self.stats
        stats.received += 1
        sample = self.decoder.decode(msg)
        if isinstance(sample, SkipReason):
            self._skip_sample(sample, msg)
            return None
        self._last_stamp_ns = sample.stamp_ns
        started = time.perf_counter()
        result = self._process(sample)
        if isinstance(result, SkipReason):
            self._skip_sample(result, msg)
            return None
        elapsed = time.perf_counter() - started
        stats.published += 1
        stats.last_compute_s = elapsed
        stats.total_compute_s += elapsed
        return result

    # -- processing ---------------------------------------------------------------------

    def _process(self, sample: JointSample) -> PipelineOutput | SkipReason:
        pose = None
        v = sample.qd
        if self._floating:
            base = pair_odometry(sample.stamp_ns, self._odom, self.config.odom_max_age)
            if isinstance(base, SkipReason):
                return base
            pose = base.pose
            v = np.concatenate((base.twist, sample.qd))
        a, ff_state = self._zero_acceleration, None
        source = self.config.acceleration_source
        if source is AccelerationSource.ESTIMATED:
            estimate = self._estimator.update(sample.stamp_ns, v)
            if estimate is None:
                return SkipReason.ESTIMATOR_WARMUP
            a = estimate
        elif source is AccelerationSource.REFERENCE:
            state = self._reference_state(sample.stamp_ns, v)
            if isinstance(state, SkipReason):
                return state
            a, ff_state = state
        try:
            outputs = self._compute(sample, v, a, pose, ff_state)
        except ValueError as exc:
            self._warner.warn("compute_error", f"dynamics rejected the sample: {exc}")
            return SkipReason.COMPUTE_ERROR
        return PipelineOutput(sample.stamp_ns, sample.frame_id, self.base_frame, sample, outputs)

    def _compute(
        self, sample: JointSample, v: FloatArray, a: FloatArray, pose: FloatArray | None,
        ff_state: tuple[FloatArray, FloatArray] | None,
    ) -> DynamicsOutputs:
        """compute_outputs; a model without forward dynamics keeps its torques, not its predictions."""
        if not self._no_forward_dynamics:
            try:
                return compute_outputs(self.model, sample.q, v, a, sample.effort, pose, ff_state=ff_state)
            except SingularInertiaError as exc:  # a property of the model, not of the sample
                self._forget_forward_dynamics(exc)
        return compute_outputs(self.model, sample.q, v, a, None, pose, ff_state=ff_state)

    def _forget_forward_dynamics(self, exc: SingularInertiaError) -> None:
        self._no_forward_dynamics = True
        self._log(f"no predicted accelerations for this model: {exc}")

    def prepare_kernels(self) -> float:
        """prepare_kernels for the node's single samples; returns the seconds it took. A model
        without forward dynamics is found here, logged once, and gives torques only."""
        start = time.perf_counter()
        try:
            prepare_kernels(self.model)
        except SingularInertiaError as exc:
            self._forget_forward_dynamics(exc)
        return time.perf_counter() - start

    def _reference_state(
        self, stamp_ns: int, v: FloatArray
    ) -> tuple[FloatArray, tuple[FloatArray, FloatArray]] | SkipReason:
        """(a, (q_ff, v_ff)) of the computed-torque feedforward at the latest reference."""
        ref = self._reference
        if ref is None:
            return SkipReason.NO_REFERENCE
        max_age = self.config.reference_max_age
        if max_age > 0 and stamp_ns - ref.stamp_ns > max_age * NS_PER_S:
            return SkipReason.STALE_REFERENCE
        v_ff = self._reference_v
        if self._floating:
            v_ff[:6] = v[:6]  # the measured base twist
        return self._reference_a, (ref.q, v_ff)

    # -- bookkeeping --------------------------------------------------------------------

    def _skip(self, reason: SkipReason, text: str) -> None:
        self.stats.skipped[reason] = self.stats.skipped.get(reason, 0) + 1
        self._warner.warn(reason.value, f"skipped ({reason.value}): {text}")

    def _skip_sample(self, reason: SkipReason, msg: Any) -> None:
        self._skip(reason, self._explain(reason, msg))

    def _explain(self, reason: SkipReason, msg: Any) -> str:
        if reason is SkipReason.MISSING_JOINT:
            return f"joint state lacks model joints {self.decoder.missing_joints(msg.name)}"
        texts = {
            SkipReason.DUPLICATE_JOINT: "a joint name appears twice in the joint state",
            SkipReason.LENGTH_MISMATCH: "position/velocity/effort lengths differ from name",
            SkipReason.MISSING_VELOCITY: "joint state has no velocities",
            SkipReason.NAN: "non-finite position, velocity or effort for a model joint",
            SkipReason.NO_ODOMETRY: "floating base and no odometry received yet",
            SkipReason.STALE_ODOMETRY: (
                f"latest odometry is more than odom_max_age={self.config.odom_max_age} s "
                "from the joint state stamp"
            ),
            SkipReason.ESTIMATOR_WARMUP: "acceleration estimator is collecting samples",
            SkipReason.NO_REFERENCE: "acceleration_source=reference and no trajectory yet",
            SkipReason.STALE_REFERENCE: (
                f"reference is older than reference_max_age={self.config.reference_max_age} s"
            ),
        }
        return texts.get(reason, reason.value)


# --------------------------------------------------------------------------------------
# Output messages (the one place that builds them, for rclpy and rosbags classes alike)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageClasses:
    """Message classes to build outputs with, and how to fill a float64[] field.

    rclpy wants ``array.array('d')`` for float64[]; rosbags wants numpy arrays. All messages
    are constructed with every field as a keyword, which both flavours accept.
    """

    Time: Any
    Duration: Any
    Header: Any
    JointState: Any
    JointTrajectory: Any
    JointTrajectoryPoint: Any
    Vector3: Any
    Wrench: Any
    WrenchStamped: Any
    Accel: Any
    AccelStamped: Any
    Float64MultiArray: Any
    MultiArrayLayout: Any
    float_array: Callable[[FloatArray], Any]

    @classmethod
    def from_typestore(cls, typestore: Any) -> MessageClasses:
        """Classes from a rosbags typestore (``rosbags.typesys.get_typestore(...)``)."""
        t = typestore.types
        return cls(
            Time=t["builtin_interfaces/msg/Time"],
            Duration=t["builtin_interfaces/msg/Duration"],
            Header=t["std_msgs/msg/Header"],
            JointState=t["sensor_msgs/msg/JointState"],
            JointTrajectory=t["trajectory_msgs/msg/JointTrajectory"],
            JointTrajectoryPoint=t["trajectory_msgs/msg/JointTrajectoryPoint"],
            Vector3=t["geometry_msgs/msg/Vector3"],
            Wrench=t["geometry_msgs/msg/Wrench"],
            WrenchStamped=t["geometry_msgs/msg/WrenchStamped"],
            Accel=t["geometry_msgs/msg/Accel"],
            AccelStamped=t["geometry_msgs/msg/AccelStamped"],
            Float64MultiArray=t["std_msgs/msg/Float64MultiArray"],
            MultiArrayLayout=t["std_msgs/msg/MultiArrayLayout"],
            float_array=lambda x: np.array(x, dtype=np.float64),
        )

    @classmethod
    def from_modules(
        cls, builtin_interfaces: Any, std_msgs: Any, sensor_msgs: Any,
        trajectory_msgs: Any, geometry_msgs: Any,
    ) -> MessageClasses:
        """Classes from rclpy-style ``<package>.msg`` modules (the node passes the imported
        modules, so this file imports none)."""
        return cls(
            Time=builtin_interfaces.Time,
            Duration=builtin_interfaces.Duration,
            Header=std_msgs.Header,
            JointState=sensor_msgs.JointState,
            JointTrajectory=trajectory_msgs.JointTrajectory,
            JointTrajectoryPoint=trajectory_msgs.JointTrajectoryPoint,
            Vector3=geometry_msgs.Vector3,
            Wrench=geometry_msgs.Wrench,
            WrenchStamped=geometry_msgs.WrenchStamped,
            Accel=geometry_msgs.Accel,
            AccelStamped=geometry_msgs.AccelStamped,
            Float64MultiArray=std_msgs.Float64MultiArray,
            MultiArrayLayout=std_msgs.MultiArrayLayout,
            float_array=double_array,
        )


def double_array(x: FloatArray) -> array.array[float]:
    """float64[] as rclpy stores it: array.array('d'). Copied from the bytes, since rclpy's
    setter checks every element of anything that is not already an array.array (slow)."""
    # tobytes() gives C-order bytes whatever the strides; asarray only converts other dtypes.
    return array.array("d", np.asarray(x, dtype=np.float64).tobytes())


class OutputMessageFactory:
    """Builds the node's output messages from a :class:`PipelineOutput`.

    Keys of :meth:`build`'s result are the topic names of CONVENTIONS.md (relative); which
    ones appear follows the config's ``publish_*`` switches, whether efforts were measured
    (predicted accelerations) and whether the base floats. Every call returns new messages;
    only the empty float64[] value is made once and passed to every message (rclpy copies a
    float64[] into the message and rosbags' empty numpy array holds nothing to change).
    """

    def __init__(self, classes: MessageClasses, model: Any, config: PipelineConfig) -> None:
        self.c = classes
        self.config = config
        self.joint_names = list(model.joint_names)
        self.floating_base = bool(model.floating_base)
        self.command_index = command_indices(model.joint_names, config.command_joints)
        self._empty = classes.float_array(np.zeros(0))

    def build(self, out: PipelineOutput) -> dict[str, Any]:
        cfg, res = self.config, out.outputs
        header = self.header(out.stamp_ns, out.frame_id)
        msgs: dict[str, Any] = {}
        if cfg.publish_feedforward:
            msgs[TOPIC_FEEDFORWARD] = self.torque_state(header, res.tau_ff)
        if cfg.publish_gravity:
            msgs[TOPIC_GRAVITY] = self.torque_state(header, res.tau_g)
        if cfg.publish_predicted_acceleration and res.qdd_pred is not None:
            msgs[TOPIC_PREDICTED_ACCELERATION] = self.acceleration_trajectory(header, res.qdd_pred)
        if self.floating_base and cfg.publish_base_outputs:
            base_header = self.header(out.stamp_ns, out.base_frame)
            if res.base_wrench is not None:
                msgs[TOPIC_BASE_WRENCH] = self.wrench(base_header, res.base_wrench)
            if res.base_acc_pred is not None:
                msgs[TOPIC_BASE_ACCELERATION] = self.accel(base_header, res.base_acc_pred)
        if cfg.publish_effort_command:
            msgs[TOPIC_EFFORT_COMMAND] = self.effort_command(res.tau_ff)
        return msgs

    def header(self, stamp_ns: int, frame_id: str) -> Any:
        sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
        return self.c.Header(stamp=self.c.Time(sec=sec, nanosec=nanosec), frame_id=frame_id)

    def torque_state(self, header: Any, tau: FloatArray) -> Any:
        """sensor_msgs/JointState carrying torques in ``effort`` (position/velocity empty)."""
        empty = self._empty
        return self.c.JointState(
            header=header, name=list(self.joint_names), position=empty, velocity=empty,
            effort=self.c.float_array(tau),
        )

    def acceleration_trajectory(self, header: Any, qdd: FloatArray) -> Any:
        """trajectory_msgs/JointTrajectory with one point whose ``accelerations`` hold qdd."""
        c, empty = self.c, self._empty
        point = c.JointTrajectoryPoint(
            positions=empty, velocities=empty, accelerations=c.float_array(qdd), effort=empty,
            time_from_start=c.Duration(sec=0, nanosec=0),
        )
        return c.JointTrajectory(header=header, joint_names=list(self.joint_names), points=[point])

    def wrench(self, header: Any, wrench: FloatArray) -> Any:
        """geometry_msgs/WrenchStamped from (m, f)."""
        mx, my, mz, fx, fy, fz = wrench.tolist()
        w = self.c.Wrench(force=self.c.Vector3(x=fx, y=fy, z=fz),
                          torque=self.c.Vector3(x=mx, y=my, z=mz))
        return self.c.WrenchStamped(header=header, wrench=w)

    def accel(self, header: Any, acc: FloatArray) -> Any:
        """geometry_msgs/AccelStamped from (omega', v')."""
        wx, wy, wz, vx, vy, vz = acc.tolist()
        a = self.c.Accel(linear=self.c.Vector3(x=vx, y=vy, z=vz),
                         angular=self.c.Vector3(x=wx, y=wy, z=wz))
        return self.c.AccelStamped(header=header, accel=a)

    def effort_command(self, tau: FloatArray) -> Any:
        """std_msgs/Float64MultiArray in ``command_joints`` order (ros2_control effort
        controllers take exactly this, with an empty layout)."""
        layout = self.c.MultiArrayLayout(dim=[], data_offset=0)
        return self.c.Float64MultiArray(
            layout=layout, data=self.c.float_array(np.asarray(tau)[self.command_index])
        )


def command_indices(joint_names: Sequence[str], command_joints: Sequence[str]) -> NDArray[np.intp]:
    """Model indices of ``command_joints`` (all joints in model order when empty)."""
    if not command_joints:
        return np.arange(len(joint_names), dtype=np.intp)
    position = {name: i for i, name in enumerate(joint_names)}
    unknown = [j for j in command_joints if j not in position]
    if unknown:
        raise ValueError(
            f"command_joints: {unknown} are not joints of the model {list(joint_names)}"
        )
    return np.array([position[j] for j in command_joints], dtype=np.intp)
