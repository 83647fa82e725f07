"""Turning bag messages into blocks of joint samples, through the shared pipeline.

The pipeline's `JointStateDecoder` does all name matching and checking; this module only
adds what exists offline: measured torques from a separate effort topic aligned by receive
time, odometry pairing for a floating base, and collecting samples into numpy blocks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from liedyn_ros import pipeline

from .errors import ReplayError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from numpy.typing import NDArray

    from .bagio import BagSet, RawMessage

# An effort command older than this (receive time) no longer describes the motion.
EFFORT_MAX_AGE_NS = 500_000_000


@dataclass(frozen=True)
class SampleBlock:
    """Consecutive joint samples in model order.

    stamp_ns: (N,) header stamps; receive_ns: (N,) bag receive times; q: (N, n);
    v: (N, nv) generalized velocities (base twist (omega, v) first for a floating base);
    effort: (N, n) measured torques, NaN rows where none was measured;
    base_pose: (N, 4, 4) T_world_base or None; frame_id: (N,) header frame ids.
    """

    stamp_ns: NDArray[np.int64]
    receive_ns: NDArray[np.int64]
    q: NDArray[np.float64]
    v: NDArray[np.float64]
    effort: NDArray[np.float64]
    base_pose: NDArray[np.float64] | None
    frame_id: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.stamp_ns)

    def slice(self, begin: int, end: int) -> SampleBlock:
        return SampleBlock(
            self.stamp_ns[begin:end], self.receive_ns[begin:end], self.q[begin:end],
            self.v[begin:end], self.effort[begin:end],
            None if self.base_pose is None else self.base_pose[begin:end],
            self.frame_id[begin:end],
        )

    def slice_rows(self, rows: NDArray[np.bool_]) -> SampleBlock:
        """The samples where `rows` is True."""
        return SampleBlock(
            self.stamp_ns[rows], self.receive_ns[rows], self.q[rows], self.v[rows],
            self.effort[rows], None if self.base_pose is None else self.base_pose[rows],
            tuple(f for f, keep in zip(self.frame_id, rows) if keep),
        )

    def concat(self, other: SampleBlock) -> SampleBlock:
        pose = None
        if self.base_pose is not None and other.base_pose is not None:
            pose = np.concatenate([self.base_pose, other.base_pose])
        return SampleBlock(
            np.concatenate([self.stamp_ns, other.stamp_ns]),
            np.concatenate([self.receive_ns, other.receive_ns]),
            np.concatenate([self.q, other.q]), np.concatenate([self.v, other.v]),
            np.concatenate([self.effort, other.effort]), pose,
            self.frame_id + other.frame_id,
        )


@dataclass(frozen=True)
class Topics:
    joint_states: str = "/joint_states"
    odom: str | None = None
    effort: str | None = None
    effort_joints: tuple[str, ...] = ()


class SampleStream:
    """Reads joint states (and effort/odometry topics) and yields blocks of samples.

    Skipped messages are counted in `skipped` by reason (pipeline reasons, plus
    `non_increasing_stamp`, `undecodable_message`, `bad_effort_command`).
    """

    def __init__(self, bags: BagSet, model: Any, topics: Topics, config: pipeline.PipelineConfig) -> None:
        self.bags, self.model, self.topics, self.config = bags, model, topics, config
        self.decoder = pipeline.JointStateDecoder(model)
        self.skipped: Counter[str] = Counter()
        self.received = 0
        self._effort_index = _effort_index(model, topics) if topics.effort else None
        self._last_effort: tuple[int, NDArray[np.float64]] | None = None
        self._odom: pipeline.BaseState | None = None
        self._last_stamp: int | None = None

    def topic_names(self) -> list[str]:
        names = [self.topics.joint_states]
        names += [t for t in (self.topics.effort, self.topics.odom) if t]
        return names

    def blocks(self, size: int, progress: Any = None) -> Iterator[SampleBlock]:
        rows: list[tuple[int, int, Any, Any, Any, Any, str]] = []
        for raw in self.bags.messages(self.topic_names()):
            if progress is not None:
                progress.update(1)
            row = self._handle(raw)
            if row is not None:
                rows.append(row)
                if len(rows) == size:
                    yield self._block(rows)
                    rows = []
        if rows:
            yield self._block(rows)

    def _handle(self, raw: RawMessage) -> tuple[int, int, Any, Any, Any, Any, str] | None:
        try:
            msg = raw.bag.deserialize(raw.data, raw.msgtype)
        except Exception:  # noqa: BLE001 - one corrupt message must not end the replay
            self.skipped["undecodable_message"] += 1
            return None
        if raw.topic == self.topics.joint_states:
            return self._joint_state(msg, raw.receive_ns)
        if raw.topic == self.topics.effort:
            self._effort_command(msg, raw.receive_ns)
        elif raw.topic == self.topics.odom:
            self._odometry(msg)
        return None

    def _joint_state(self, msg: Any, receive_ns: int) -> tuple[int, int, Any, Any, Any, Any, str] | None:
        self.received += 1
        sample = self.decoder.decode(msg)
        if isinstance(sample, pipeline.SkipReason):
            self.skipped[sample.value] += 1
            return None
        if self._last_stamp is not None and sample.stamp_ns <= self._last_stamp:
            # The derivative needs increasing stamps; repeats and reordering are dropped.
            self.skipped["non_increasing_stamp"] += 1
            return None
        base = self._base_state(sample.stamp_ns)
        if isinstance(base, pipeline.SkipReason):
            self.skipped[base.value] += 1
            return None
        self._last_stamp = sample.stamp_ns
        effort = self._measured_effort(sample, receive_ns)
        pose, v = (None, sample.qd) if base is None else (base.pose, np.concatenate([base.twist, sample.qd]))
        return sample.stamp_ns, receive_ns, sample.q, v, effort, pose, sample.frame_id

    def _measured_effort(self, sample: pipeline.JointSample, receive_ns: int) -> NDArray[np.float64] | None:
        if self._effort_index is None:
            return sample.effort
        last = self._last_effort
        if last is None or receive_ns - last[0] > EFFORT_MAX_AGE_NS:
            return None
        return last[1]

    def _effort_command(self, msg: Any, receive_ns: int) -> None:
        data = np.asarray(msg.data, dtype=np.float64)
        assert self._effort_index is not None
        if data.shape[0] != len(self._effort_index) or not np.isfinite(data).all():
            self.skipped["bad_effort_command"] += 1
            return
        # Joints the command does not cover stay NaN: no residual, no prediction for them.
        tau = np.full(self.model.n, np.nan)
        tau[self._effort_index] = data
        self._last_effort = (receive_ns, tau)

    def _odometry(self, msg: Any) -> None:
        state = pipeline.decode_odometry(msg)
        if isinstance(state, pipeline.SkipReason):
            self.skipped[state.value] += 1
        else:
            self._odom = state

    def _base_state(self, stamp_ns: int) -> pipeline.BaseState | pipeline.SkipReason | None:
        # Same rule as the node: the latest odometry, no further than odom_max_age away.
        if not self.model.floating_base:
            return None
        if self._odom is None:
            return pipeline.SkipReason.NO_ODOMETRY
        if abs(stamp_ns - self._odom.stamp_ns) > self.config.odom_max_age * pipeline.NS_PER_S:
            return pipeline.SkipReason.STALE_ODOMETRY
        return self._odom

    def _block(self, rows: Sequence[tuple[int, int, Any, Any, Any, Any, str]]) -> SampleBlock:
        stamps, receives, qs, vs, efforts, poses, frames = zip(*rows)
        n = self.model.n
        nan_row = np.full(n, np.nan)
        effort = np.stack([nan_row if e is None else e for e in efforts])
        pose = np.stack(poses) if self.model.floating_base else None
        return SampleBlock(
            np.fromiter(stamps, np.int64, len(rows)), np.fromiter(receives, np.int64, len(rows)),
            np.stack(qs), np.stack(vs), effort, pose, tuple(frames),
        )


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
