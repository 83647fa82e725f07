"""Turning bag messages into blocks of joint samples, through the shared pipeline.

The pipeline's `JointStateDecoder` does all name matching and checking, and its
`pair_odometry` pairs each joint state with odometry (the node's rule); this module only
adds what exists offline: reading whole chunks of joint states from their CDR bytes (cdr),
measured torques from a separate effort topic aligned by receive time, and collecting
samples into numpy blocks.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from liedyn_ros import pipeline

from .block import SampleBlock
from .cdr import JointStateReader
from .delay import SKIP_REASON, EffortDelay
from .errors import ReplayError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from numpy.typing import NDArray

    from .bagio import BagSet, BagSource, RawMessage

# An effort command older than this (receive time) no longer describes the motion.
EFFORT_MAX_AGE_NS = 500_000_000
# Joint states after a stamp that may show it to be an outlier (a flipped bit, a clock glitch).
LOOKAHEAD = 8
# Above this speed (rad/s, m/s) v * v overflows float64: the sample has no finite dynamics.
MAX_VELOCITY = 1e150


@dataclass(frozen=True)
class Topics:
    joint_states: str = "/joint_states"
    odom: str | None = None
    effort: str | None = None
    effort_joints: tuple[str, ...] = ()
    contact_state: str | None = None           # contact_source topic: the flags' topic
    contact_wrenches: tuple[str, ...] = ()     # contact_source wrench: one topic per contact


class SampleStream:
    """Reads joint states (and effort/odometry topics) and yields blocks of samples.

    Joint states are decoded a chunk at a time: `JointStateReader` turns the CDR bytes into
    arrays and the pipeline's `JointStateDecoder.decode_arrays` does all name matching and
    checking. Effort commands and odometry are applied in receive order, so each joint
    state sees the latest of them received before it. Skipped messages are counted in
    `skipped` by reason (pipeline reasons, plus `stamp_outlier`, `non_increasing_stamp`,
    `velocity_out_of_range`, `undecodable_message`, `bad_effort_command`). A chunk is decided once LOOKAHEAD more joint
    states have arrived: they tell a stamp off in the future from a jump of the clock. `effort_delay` [s]:
    the efforts are that late against the joint states and are shifted back (delay.EffortDelay; samples
    whose shifted time is outside the recording are counted as `effort_delay_outside_recording`).
    """

    def __init__(self, bags: BagSet, model: Any, topics: Topics, config: pipeline.PipelineConfig,
                 drive: Any = None, effort_delay: float = 0.0, start_ns: int | None = None) -> None:
        self.bags, self.model, self.topics, self.config = bags, model, topics, config
        self.effort_delay = effort_delay
        self.start_ns = start_ns  # receive time the reading starts at (a piece of a bag, run.Piece); None: the start
        self.first_stamp_ns: int | None = None  # the first joint state kept (time zero of the replay)
        self.decoder = pipeline.JointStateDecoder(model, drive)  # efforts as joint torques, as in the node
        self.skipped: Counter[str] = Counter()
        self.received = 0
        self._effort_index = _effort_index(model, topics) if topics.effort else None
        self._last_effort: tuple[int, NDArray[np.float64]] | None = None
        self._odom: pipeline.BaseState | None = None
        self._last_stamp = np.iinfo(np.int64).min
        self._readers: dict[int, JointStateReader] = {}
        self.contacts = pipeline.resolve_contacts(model, config)
        self._flags: pipeline.ContactState | None = None
        self._sensors: pipeline.WrenchSensors | None = None
        self._sensor_snapshot: pipeline.WrenchSensors | None = None
        if self.contacts is not None and topics.contact_wrenches:
            self._sensors = pipeline.WrenchSensors(self.contacts, config.contact_force_threshold)
        self._wrench_index = {topic: i for i, topic in enumerate(topics.contact_wrenches)}

    def topic_names(self) -> list[str]:
        names = [self.topics.joint_states]
        names += [t for t in (self.topics.effort, self.topics.odom, self.topics.contact_state) if t]
        return names + list(self.topics.contact_wrenches)

    def blocks(self, size: int) -> Iterator[SampleBlock]:
        """Blocks of about `size` samples (fewer when messages were skipped; with an effort delay,
        up to its length more)."""
        if not self.effort_delay:
            yield from self._paired(size)
            return
        delay, told = EffortDelay(self.effort_delay, self.config.observer_max_gap), 0
        for block in delay.blocks(self._paired(size)):
            self._count(SKIP_REASON, delay.skipped - told)
            told = delay.skipped
            yield block
        self._count(SKIP_REASON, delay.skipped - told)

    def _paired(self, size: int) -> Iterator[SampleBlock]:
        """Blocks of at most `size` samples, each with the effort received with it."""
        joint_states: list[_Pending] = []
        for raw in self.bags.messages(self.topic_names(), self.start_ns):
            if raw.topic == self.topics.joint_states:
                # Effort and odometry as they stand when this joint state was received.
                joint_states.append(_Pending(raw, self._last_effort, self._odom, self._contact_now()))
                if len(joint_states) == size + LOOKAHEAD:
                    yield from self._emit(joint_states, size)
                    joint_states = joint_states[size:]
            elif raw.topic == self.topics.effort:
                self._effort_command(raw)
            elif raw.topic == self.topics.odom:
                self._odometry(raw)
            else:
                self._contact_message(raw)
        if joint_states:
            yield from self._emit(joint_states, len(joint_states))

    def _emit(self, pending: list[_Pending], decide: int) -> Iterator[SampleBlock]:
        block = self._block(pending, decide)
        if len(block):
            if self.first_stamp_ns is None:
                self.first_stamp_ns = int(block.stamp_ns[0])
            yield block

    def _block(self, pending: Sequence[_Pending], decide: int) -> SampleBlock:
        """Decodes and checks a chunk of joint states, in receive order; the rows after the
        first `decide` are only looked at (they come again in the next chunk)."""
        self.received += decide
        m, n = len(pending), self.model.n
        stamp = np.zeros(m, dtype=np.int64)
        q, qd, effort = np.zeros((m, n)), np.zeros((m, n)), np.full((m, n), np.nan)
        frame = [""] * m
        valid = np.zeros(m, dtype=bool)
        for rows, arrays in self._decode(pending, decide):
            decoded = self.decoder.decode_arrays(arrays)
            if isinstance(decoded, pipeline.SkipReason):
                self._count(decoded.value, int((rows < decide).sum()))
                continue
            self._count(pipeline.SkipReason.NAN.value, int((~decoded.finite & (rows < decide)).sum()))
            stamp[rows], q[rows], qd[rows], valid[rows] = decoded.stamp_ns, decoded.q, decoded.qd, decoded.finite
            if decoded.effort is not None:
                effort[rows] = decoded.effort
            for row, frame_id in zip(rows.tolist(), decoded.frame_id):
                frame[row] = frame_id
        receive = np.fromiter((p.raw.receive_ns for p in pending), dtype=np.int64, count=m)
        base = self._base_states(pending, stamp, valid)
        contact = self._contact_states(pending, stamp, valid & base.ok)
        v = qd if base.twist is None else np.concatenate([base.twist, qd], axis=1)
        keep = self._checked(stamp, v, valid, base, contact, decide)
        if self._effort_index is not None:
            effort = self.decoder.joint_torques(self._commanded_effort(pending, receive))
        return SampleBlock(
            stamp[keep], receive[keep], q[keep], v[keep], effort[keep],
            None if base.pose is None else base.pose[keep], tuple(frame[i] for i in keep),
            None if contact.active is None else contact.active[keep],
            None if contact.wrench is None else contact.wrench[keep],
        )

    def _checked(self, stamp: NDArray[np.int64], v: NDArray[np.float64], valid: NDArray[np.bool_],
                 base: _BaseRows, contact: _ContactRows, decide: int) -> NDArray[np.intp]:
        """The decided rows kept by the checks after decoding, the others counted by reason in
        the node's order of checks: stamp (outlier, order), odometry, contacts, velocity range."""
        paired = valid & base.ok & contact.ok
        # A velocity this large has no finite dynamics (v * v overflows) nor derivative.
        too_fast = paired & (np.abs(v) > MAX_VELOCITY).any(axis=1)
        candidate = paired & ~too_fast
        outlier = _stamp_outliers(stamp, candidate, self._last_stamp)
        increasing = _increasing(stamp, candidate & ~outlier, self._last_stamp) & ~outlier
        decided = np.arange(len(stamp)) < decide
        self._count("stamp_outlier", int((outlier & decided).sum()))
        self._count("non_increasing_stamp", int((valid & ~increasing & ~outlier & decided).sum()))
        for row, reason in (base.reasons | contact.reasons).items():
            if increasing[row] and row < decide:
                self.skipped[reason.value] += 1
        self._count("velocity_out_of_range", int((too_fast & increasing & decided).sum()))
        keep = np.flatnonzero(candidate & increasing & decided)
        if len(keep):
            self._last_stamp = int(stamp[keep[-1]])
        return keep

    def _decode(self, pending: Sequence[_Pending], decide: int
                ) -> Iterator[tuple[NDArray[np.intp], pipeline.JointStateArrays]]:
        """(rows, arrays) groups of the chunk; decided rows nothing can decode are counted."""
        by_bag: dict[int, list[int]] = {}
        for i, p in enumerate(pending):
            by_bag.setdefault(id(p.raw.bag), []).append(i)
        for rows in by_bag.values():
            index = np.array(rows, dtype=np.intp)
            bag = pending[rows[0]].raw.bag
            datas = [pending[i].raw.data for i in rows]
            groups, failed = self._reader(bag).read(datas)
            self._count("undecodable_message", int((index[failed] < decide).sum()))
            for group_rows, arrays in groups:
                yield index[group_rows], arrays

    def _reader(self, bag: BagSource) -> JointStateReader:
        reader = self._readers.get(id(bag))
        if reader is None:
            msgtype = bag.topic_types()[self.topics.joint_states]
            # ROS 1 bags are not CDR: rosbags reads them, one message at a time.
            reader = JointStateReader(lambda data: bag.deserialize(data, msgtype), cdr=not bag.is_ros1)
            self._readers[id(bag)] = reader
        return reader

    def _base_states(self, pending: Sequence[_Pending], stamp: NDArray[np.int64], valid: NDArray[np.bool_]) -> _BaseRows:
        """The odometry paired with each valid row by the pipeline's rule (floating base)."""
        m = len(stamp)
        if not self.model.floating_base:
            return _BaseRows(np.ones(m, dtype=bool), {}, None, None)
        ok, reasons = np.zeros(m, dtype=bool), {}
        twist, pose = np.zeros((m, 6)), np.tile(np.eye(4), (m, 1, 1))
        for row in np.flatnonzero(valid).tolist():
            state = pipeline.pair_odometry(int(stamp[row]), pending[row].odom, self.config.odom_max_age)
            if isinstance(state, pipeline.SkipReason):
                reasons[row] = state
            else:
                ok[row], twist[row], pose[row] = True, state.twist, state.pose
        return _BaseRows(ok, reasons, twist, pose)

    def _contact_states(self, pending: Sequence[_Pending], stamp: NDArray[np.int64],
                        valid: NDArray[np.bool_]) -> _ContactRows:
        """The contact state paired with each valid row by the pipeline's rule (topic / wrench)."""
        m = len(stamp)
        if self.contacts is None or not (self.topics.contact_state or self.topics.contact_wrenches):
            return _ContactRows(np.ones(m, dtype=bool), {}, None, None)
        k, max_age = self.contacts.k, self.config.contact_max_age
        ok, reasons = np.zeros(m, dtype=bool), {}
        active, wrench = np.zeros((m, k), dtype=bool), np.zeros((m, k, 6))
        for row in np.flatnonzero(valid).tolist():
            now = pending[row].contact
            if isinstance(now, pipeline.WrenchSensors):
                state = now.state(int(stamp[row]), max_age)
            else:
                state = pipeline.pair_contact_state(int(stamp[row]), now, max_age)
            if isinstance(state, pipeline.SkipReason):
                reasons[row] = state
                continue
            ok[row], active[row] = True, state.active
            if state.wrench is not None:
                wrench[row] = state.wrench
        return _ContactRows(ok, reasons, active, wrench if self._sensors is not None else None)

    def _contact_now(self) -> pipeline.ContactState | pipeline.WrenchSensors | None:
        """The contact state as it stands (the sensors copied once per change, not per sample)."""
        if self._sensors is None:
            return self._flags
        if self._sensor_snapshot is None:
            self._sensor_snapshot = copy.deepcopy(self._sensors)
        return self._sensor_snapshot

    def _contact_message(self, raw: RawMessage) -> None:
        msg = self._deserialize(raw)
        if msg is None or self.contacts is None:
            return
        if raw.topic == self.topics.contact_state:
            state = pipeline.decode_contact_flags(msg, self.contacts.k, raw.receive_ns)
            if isinstance(state, pipeline.SkipReason):
                self.skipped[state.value] += 1
            else:
                self._flags = state
            return
        assert self._sensors is not None
        reason = self._sensors.update(self._wrench_index[raw.topic], msg)
        if reason is not None:
            self.skipped[reason.value] += 1
        self._sensor_snapshot = None

    def _commanded_effort(self, pending: Sequence[_Pending], receive: NDArray[np.int64]) -> NDArray[np.float64]:
        """Measured torques from the effort topic: the latest command received, if recent."""
        effort = np.full((len(pending), self.model.n), np.nan)
        for row, p in enumerate(pending):
            if p.effort is not None and receive[row] - p.effort[0] <= EFFORT_MAX_AGE_NS:
                effort[row] = p.effort[1]
        return effort

    def _count(self, reason: str, count: int) -> None:
        if count:  # the report lists only reasons that happened
            self.skipped[reason] += count

    def _deserialize(self, raw: RawMessage) -> Any | None:
        try:
            return raw.bag.deserialize(raw.data, raw.msgtype)
        except Exception:  # noqa: BLE001 - one corrupt message must not end the replay
            self.skipped["undecodable_message"] += 1
            return None

    def _effort_command(self, raw: RawMessage) -> None:
        msg = self._deserialize(raw)
        if msg is None:
            return
        data = np.asarray(msg.data, dtype=np.float64)
        assert self._effort_index is not None
        if data.shape[0] != len(self._effort_index) or not np.isfinite(data).all():
            self.skipped["bad_effort_command"] += 1
            return
        # Joints the command does not cover stay NaN: no residual, no prediction for them.
        tau = np.full(self.model.n, np.nan)
        tau[self._effort_index] = data
        self._last_effort = (raw.receive_ns, tau)

    def _odometry(self, raw: RawMessage) -> None:
        msg = self._deserialize(raw)
        if msg is None:
            return
        state = pipeline.decode_odometry(msg)
        if isinstance(state, pipeline.SkipReason):
            self.skipped[state.value] += 1
        else:
            self._odom = state


class _Pending(NamedTuple):
    """A joint state waiting for its chunk, with the effort command and odometry that were
    the latest when it was received. (A NamedTuple: one is built per message.)"""

    raw: RawMessage
    effort: tuple[int, NDArray[np.float64]] | None
    odom: pipeline.BaseState | None
    contact: pipeline.ContactState | pipeline.WrenchSensors | None


@dataclass(frozen=True)
class _BaseRows:
    """Per row of a chunk: paired odometry found (ok), why not (reasons), twist and pose."""

    ok: NDArray[np.bool_]
    reasons: dict[int, pipeline.SkipReason]
    twist: NDArray[np.float64] | None
    pose: NDArray[np.float64] | None


@dataclass(frozen=True)
class _ContactRows:
    """Per row of a chunk: contact state found (ok), why not (reasons), flags and wrenches."""

    ok: NDArray[np.bool_]
    reasons: dict[int, pipeline.SkipReason]
    active: NDArray[np.bool_] | None
    wrench: NDArray[np.float64] | None


def _stamp_outliers(stamp: NDArray[np.int64], candidate: NDArray[np.bool_], last: int) -> NDArray[np.bool_]:
    """Candidate rows to drop because their stamp lies ahead of more than one of the next
    LOOKAHEAD candidates' that are above every earlier stamp: kept, such a stamp (a day ahead,
    a flipped bit) would make those samples, and all later ones, look out of order; dropped,
    it costs one sample. A clock that jumps back is no outlier (the samples after the jump
    fall below the earlier ones), nor is a sample followed by one stamp off in the past.

    Only the few rows whose stamp exceeds a later one are checked one by one.
    """
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    later = np.lib.stride_tricks.sliding_window_view(
        np.concatenate([np.where(candidate, stamp, high)[1:], np.full(LOOKAHEAD, high)]), LOOKAHEAD)
    kept = np.where(candidate, stamp, low)
    outlier = np.zeros(len(stamp), dtype=bool)
    for row in np.flatnonzero(candidate & (stamp > later.min(axis=1))).tolist():
        floor = int(kept[:row].max(initial=last))
        if ((later[row] > floor) & (later[row] < stamp[row])).sum() > 1:
            outlier[row], kept[row] = True, low
    return outlier


def _increasing(stamp: NDArray[np.int64], candidate: NDArray[np.bool_], last: int) -> NDArray[np.bool_]:
    """Rows whose stamp is above `last` and every earlier `candidate` row's stamp.

    The derivative needs increasing stamps; repeats and reordering are dropped. A candidate
    that fails this test never raises the running maximum, so taking the maximum over all
    candidates equals the one-by-one rule "above the last accepted stamp".
    """
    floor = np.iinfo(np.int64).min
    prior = np.maximum.accumulate(np.concatenate([[last], np.where(candidate, stamp, floor)]))
    return stamp > prior[:-1]


def _effort_index(model: Any, topics: Topics) -> NDArray[np.intp]:
    """Model index of each entry of the effort command (default: model order)."""
    names = topics.effort_joints or tuple(model.joint_names)
    position = {name: i for i, name in enumerate(model.joint_names)}
    unknown = [j for j in names if j not in position]
    if unknown:
        raise ReplayError(f"--effort-joints: {unknown} are not joints of the model {list(model.joint_names)}")
    if len(set(names)) != len(names):
        raise ReplayError(f"--effort-joints names a joint twice: {list(names)}")
    return np.array([position[j] for j in names], dtype=np.intp)
