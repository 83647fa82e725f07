"""`--effort-delay D` (`effort_delay` in --params): the efforts are D seconds late against the joint
states (the `time_offset` hint's lag), so the effort paired with the joint state stamped s is the
one recorded at s + D.

The efforts are first paired with the joint states as always (a JointState's own, or the latest
command of --effort-topic by receive time); then, on the joint states' stamp axis, each sample's
effort becomes the efforts of its neighbours around s + D, interpolated linearly (exactly a
neighbour's when s + D is its stamp). A sample keeps no effort (NaN, like one without a command)
when a neighbour has none on a joint. When s + D lies before the first joint state, after the last,
or inside a gap between joint states longer than `observer_max_gap` (where nothing was recorded),
the sample is skipped, counted as SKIP_REASON.

It runs over the stream's blocks in bounded memory: with D > 0 a sample waits until a joint state
stamped at least s + D has arrived; the efforts of the last |D| seconds are kept for D < 0.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from numpy.typing import NDArray

    from .block import SampleBlock

SKIP_REASON = "effort_delay_outside_recording"


class EffortDelay:
    """Shifts the efforts of a stream of blocks by `delay_s` (see the module docstring); `skipped`
    counts the samples whose shifted time has no recording around it."""

    def __init__(self, delay_s: float, max_gap_s: float) -> None:
        self.delay_ns = round(delay_s * 1e9)
        self.max_gap_ns = max_gap_s * 1e9
        self.skipped = 0
        self._pending: SampleBlock | None = None  # samples whose shifted effort is not known yet
        self._t = np.zeros(0, dtype=np.int64)  # stamps and efforts of the samples that may still be needed
        self._e: NDArray[np.float64] | None = None

    def blocks(self, source: Iterable[SampleBlock]) -> Iterator[SampleBlock]:
        """The blocks of `source` with shifted efforts (fewer samples when some are skipped)."""
        for block in source:
            if not len(block):
                continue
            self._pending = block if self._pending is None else self._pending.concat(block)
            self._t = np.concatenate([self._t, block.stamp_ns])
            self._e = block.effort if self._e is None else np.concatenate([self._e, block.effort])
            # s + D must not pass the newest stamp: a later joint state could still bracket it
            ready = int(np.searchsorted(self._pending.stamp_ns + self.delay_ns, self._t[-1], side="right"))
            yield from self._emit(ready)
        if self._pending is not None:
            yield from self._emit(len(self._pending))

    def _emit(self, count: int) -> Iterator[SampleBlock]:
        pending = self._pending
        assert pending is not None and self._e is not None
        if not count:
            return
        done = pending.slice(0, count)
        self._pending = pending.slice(count, len(pending)) if count < len(pending) else None
        effort, inside = self._at(done.stamp_ns + self.delay_ns)
        self.skipped += int((~inside).sum())
        # efforts before the next sample's s + D are no longer needed, but for its left neighbour
        upcoming = (done.stamp_ns[-1] if self._pending is None else self._pending.stamp_ns[0]) + self.delay_ns
        cut = max(int(np.searchsorted(self._t, upcoming, side="right")) - 1, 0)
        self._t, self._e = self._t[cut:], self._e[cut:]
        shifted = dataclasses.replace(done, effort=effort)
        if inside.all():
            yield shifted
        elif inside.any():
            yield shifted.slice_rows(inside)

    def _at(self, when: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """(efforts at the stamps `when`, linear between the two samples around each; whether each
        lies inside the recording: between its first and last joint state, not in a gap)."""
        t, e = self._t, self._e
        assert e is not None
        right = np.clip(np.searchsorted(t, when, side="left"), 1, max(len(t) - 1, 1))
        left = right - 1
        if len(t) == 1:  # one joint state: only its own stamp is inside
            exact = when == t[0]
            return np.where(exact[:, None], e[[0]], np.nan), exact
        t0, t1 = t[left], t[right]
        inside = (when >= t0) & (when <= t1) & (t1 - t0 <= self.max_gap_ns)
        inside |= np.isin(when, t)  # a stamp of its own is inside even next to a gap
        w = ((when - t0) / np.maximum(t1 - t0, 1))[:, None]
        lo, hi = e[left], e[right]
        # at a neighbour's stamp its effort exactly (also when the other neighbour has none)
        effort = np.where(w <= 0, lo, np.where(w >= 1, hi, lo + w * (hi - lo)))
        return effort, inside
