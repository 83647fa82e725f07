"""Collision events from a residual series: per-coordinate thresholds with hysteresis.

An event starts at the first sample where some |r_j| exceeds its threshold_j, and ends at the
first later sample where every |r_j| is below release * threshold_j. Between the two the
residual may dip under the threshold and cross it again without starting a second event: one
contact, one event. Pure: the caller keeps the open event between blocks of samples.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .checks import check_vector

__all__ = ["Collision", "collision_events", "collision_step"]


class Collision(NamedTuple):
    """One event: stamps of its first sample and of the first quiet sample after it (None while
    it lasts), the coordinate whose |r_j| / threshold_j peaked, and r_j there (signed)."""

    start_ns: int
    end_ns: int | None
    joint: int
    peak: float


def collision_events(stamps_ns, r, threshold, *, release: float = 0.5, ongoing: Collision | None = None
                     ) -> tuple[list[Collision], Collision | None]:
    """(events finished in this block, the event still open at its end or None).

    stamps_ns (N,), r (N, m) residuals in time order, threshold (m,) or one value, positive;
    release in (0, 1]; `ongoing`: the open event returned for the previous block.
    """
    r = np.atleast_2d(np.asarray(r, dtype=float))
    stamps = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
    if r.ndim != 2 or len(stamps) != len(r):
        raise ValueError(f"r: expected shape (N, m) with N = len(stamps_ns) = {len(stamps)}, got {r.shape}")
    thr = check_vector("threshold", np.broadcast_to(np.asarray(threshold, dtype=float), r.shape[1:]), r.shape[1])
    if np.any(thr <= 0):
        raise ValueError("threshold: must be positive")
    if not 0.0 < release <= 1.0:
        raise ValueError(f"release: must be in (0, 1], got {release}")
    ratio = np.abs(r) / thr
    starts = np.flatnonzero((ratio > 1.0).any(axis=1))
    quiet = np.flatnonzero((ratio < release).all(axis=1))
    events, current, i = [], ongoing, 0
    while True:
        if current is None:
            k = int(np.searchsorted(starts, i))
            if k == len(starts):
                return events, None
            i = int(starts[k])
            current = Collision(int(stamps[i]), None, -1, 0.0)
        k = int(np.searchsorted(quiet, i))
        end = int(quiet[k]) if k < len(quiet) else len(r)
        if end > i:
            row, j = np.unravel_index(int(np.argmax(ratio[i:end])), (end - i, r.shape[1]))
            if current.joint < 0 or ratio[i + row, j] > abs(current.peak) / thr[current.joint]:
                current = current._replace(joint=int(j), peak=float(r[i + row, j]))
        if end == len(r):
            return events, current
        events.append(current._replace(end_ns=int(stamps[end])))
        current, i = None, end


def collision_step(stamp_ns: int, r, threshold, release: float, ongoing: Collision | None) -> Collision | None:
    """The event open after one more sample: ``collision_events([stamp_ns], r[None], threshold,
    release=release, ongoing=ongoing)[1]`` without the block's bookkeeping (a running stream's
    step, at every sample while an event lasts). r (m,) float64; threshold (m,) float64, positive,
    and release in (0, 1], both checked by the caller once."""
    ratio = np.abs(r) / threshold
    if not len(ratio):  # nothing watched: no event starts, an open one ends (every |r_j| is quiet)
        return None
    j = int(ratio.argmax())
    top = float(ratio[j])
    if not math.isfinite(top):  # NaN or inf: the block's rule says what they do
        return collision_events([stamp_ns], np.asarray(r)[None], threshold, release=release, ongoing=ongoing)[1]
    if ongoing is None:
        return Collision(int(stamp_ns), None, j, float(r[j])) if top > 1.0 else None
    if top < release:  # every |r_j| below release * threshold_j: the event ends here
        return None
    if ongoing.joint < 0 or top > abs(ongoing.peak) / threshold[ongoing.joint]:
        return ongoing._replace(joint=j, peak=float(r[j]))
    return ongoing
