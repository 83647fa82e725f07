"""Decoding sensor_msgs/JointState into model order, one message or a chunk at a time."""
from __future__ import annotations

import array
import math
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import numpy as np
from numpy.typing import NDArray

from liedyn_ros.pipeline.cdr import JointStateFields
from liedyn_ros.pipeline.config import NS_PER_S, FloatArray, Model, SkipReason

if TYPE_CHECKING:
    from liedyn_ros.core.identification import Drive


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
    cdr_gather: NDArray[np.intp]  # the same from the three as CDR lays them out (JointStateFields.grid):
                                  # each one slot (the next one's length) after the previous one


class JointStateDecoder:
    """Matches JointState entries to the model's joints by name.

    The name -> index mapping is cached per name tuple, since a driver sends the same list
    every time. Extra joints (grippers, mimic joints, which the core derives from their
    leaders) and entries without a name are ignored. Bad samples give a :class:`SkipReason`
    instead of a sample.
    One message (:meth:`decode`, the node's path, kept lean) and a chunk of messages
    (:meth:`decode_arrays`, the replay's) go through the same checks.
    """

    _CACHE_LIMIT = 32  # a publisher that changes its name list every message must not grow memory

    def __init__(self, model: Model, drive: Drive | None = None) -> None:
        self._joint_names = tuple(model.joint_names)
        self._n = len(self._joint_names)
        self._match_cache: dict[tuple[str, ...], _NameMatch | SkipReason] = {}
        # published efforts -> joint torques (motor currents, gear ratios, coupled joints): the
        # one place where node and replay convert them; None: they are joint torques
        self.drive = drive

    def joint_torques(self, effort: FloatArray) -> FloatArray:
        """Published efforts (..., n), model order, as joint torques (core.identification.Drive)."""
        return effort if self.drive is None else self.drive.joint_torque(effort)

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
        # An empty name matches no joint: such entries are extras, not duplicates of each other.
        position = {name: i for i, name in enumerate(names) if name}
        if len(position) + names.count("") != len(names):
            return SkipReason.DUPLICATE_JOINT
        try:
            idx = np.array([position[j] for j in self._joint_names], dtype=np.intp)
        except KeyError:
            return SkipReason.UNNAMED_JOINT if "" in names else SkipReason.MISSING_JOINT
        m = len(names)
        return _NameMatch(idx, np.concatenate((idx, idx + m, idx + 2 * m)),
                          np.concatenate((idx, idx + m + 1, idx + 2 * m + 2)))

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
        # velocity only, so the same indices serve a message without efforts): from the message's
        # bytes when it was read from them (the node's), else from the three fields end to end.
        n = self._n
        grid = msg.grid if type(msg) is JointStateFields else None
        if grid is not None:
            values = grid.take(match.cdr_gather if n_effort else match.cdr_gather[: 2 * n])
        else:
            values = joined_float_arrays(position, velocity, effort).take(match.gather if n_effort else match.gather[: 2 * n])
        # A NaN or inf among the model joints' values makes their sum non-finite (so would
        # values near 1e308 whose sum overflows, which no joint state has). Python's sum over
        # a list is cheaper than a numpy reduction at this size.
        if not math.isfinite(sum(values.tolist())):
            return SkipReason.NAN
        header = msg.header
        effort = values[2 * n :] if n_effort else None
        if effort is not None and self.drive is not None:  # (inline: a call per message costs 0.1 us)
            effort = self.drive.joint_torque(effort)
        return JointSample(stamp_to_ns(header.stamp), str(header.frame_id), values[:n], values[n : 2 * n], effort)

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
            effort = self.joint_torques(effort)
        # As in decode: a row with a non-finite model-joint value has a non-finite sum.
        finite = np.asarray(np.isfinite(total), dtype=np.bool_)
        return JointBlock(arrays.stamp_ns, arrays.frame_id, q, qd, effort, finite)
