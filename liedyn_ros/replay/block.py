"""A block of joint samples in model order: what the replay's stages pass along (samples.py
makes them, delay.py shifts their efforts, the outputs, plots and identification read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray


@dataclass(frozen=True)
class SampleBlock:
    """Consecutive joint samples in model order.

    stamp_ns: (N,) header stamps; receive_ns: (N,) bag receive times; q: (N, n);
    v: (N, nv) generalized velocities (base twist (omega, v) first for a floating base);
    effort: (N, n) measured torques, NaN rows where none was measured;
    base_pose: (N, 4, 4) T_world_base or None; frame_id: (N,) header frame ids;
    contact_active: (N, k) contacts in contact per the contact topic or sensors, else None;
    contact_wrench: (N, k, 6) the sensors' wrenches (m, f) at the contact points, else None.
    """

    stamp_ns: NDArray[np.int64]
    receive_ns: NDArray[np.int64]
    q: NDArray[np.float64]
    v: NDArray[np.float64]
    effort: NDArray[np.float64]
    base_pose: NDArray[np.float64] | None
    frame_id: tuple[str, ...]
    contact_active: NDArray[np.bool_] | None = None
    contact_wrench: NDArray[np.float64] | None = None

    def __len__(self) -> int:
        return len(self.stamp_ns)

    def slice(self, begin: int, end: int) -> SampleBlock:
        return self._rows(slice(begin, end), self.frame_id[begin:end])

    def slice_rows(self, rows: NDArray[np.bool_]) -> SampleBlock:
        """The samples where `rows` is True."""
        return self._rows(rows, tuple(f for f, keep in zip(self.frame_id, rows) if keep))

    def _rows(self, rows: Any, frame_id: tuple[str, ...]) -> SampleBlock:
        def pick(x: Any) -> Any:
            return None if x is None else x[rows]
        return SampleBlock(
            self.stamp_ns[rows], self.receive_ns[rows], self.q[rows], self.v[rows], self.effort[rows],
            pick(self.base_pose), frame_id, pick(self.contact_active), pick(self.contact_wrench),
        )

    def concat(self, other: SampleBlock) -> SampleBlock:
        def join(x: Any, y: Any) -> Any:
            return None if x is None or y is None else np.concatenate([x, y])
        return SampleBlock(
            np.concatenate([self.stamp_ns, other.stamp_ns]),
            np.concatenate([self.receive_ns, other.receive_ns]),
            np.concatenate([self.q, other.q]), np.concatenate([self.v, other.v]),
            np.concatenate([self.effort, other.effort]), join(self.base_pose, other.base_pose),
            self.frame_id + other.frame_id, join(self.contact_active, other.contact_active),
            join(self.contact_wrench, other.contact_wrench),
        )
