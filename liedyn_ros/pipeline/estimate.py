"""Joint accelerations estimated from measured velocities (causal, windowed least squares)."""
from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray

from liedyn_ros.pipeline.config import NS_PER_S, FloatArray


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

    def discard(self, stamp_ns: int) -> None:
        """Forget the latest sample if it is stamped ``stamp_ns`` (one whose outputs were refused,
        say a velocity of 1e154): later estimates are then those of a stream without it. (Older
        samples it moved out of the window stay out: the next, later sample would drop them too.)"""
        if self._stamps and self._stamps[-1] == stamp_ns:
            self._stamps.pop()
            self._end -= 1

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
