"""The replay's hints read the whole recording, in bounded memory (issue 23): a robot that stands
still for the first 80,000 samples and then moves under commands held at 43 Hz, its efforts
behind a 1:50 gear and 6 ms late,
gives both hints from the motion it only shows after the samples the hints once stopped at (65,536).
The lag sums are checked against a direct computation on the whole series."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from liedyn_ros.replay.hints import CHUNK_ROWS, Clues, find
from liedyn_ros.replay.samples import SampleBlock, Topics
from liedyn_ros.replay.summary import ResidualSummary

RATE = 500.0
NAMES = ("j1", "j2", "j3")


def torques(count: int, still: int) -> np.ndarray:
    """Joint torques (count, 3): constant while still, then a sum of sines per joint, held for
    1/43 s at a time (commands)."""
    t = np.floor(np.arange(count) / RATE * 43.0) / 43.0
    moving = np.clip(t - still / RATE, 0.0, None)[:, None]
    w = 2 * np.pi * np.array([0.7, 1.1, 1.9])
    return np.array([5.0, -3.0, 1.0]) + np.where(moving > 0, 4 * np.sin(w * moving) + np.sin(3.3 * w * moving), 0.0)


def feed(effort: np.ndarray, torque: np.ndarray, block: int = 4096) -> Clues:
    clues = Clues(NAMES, Topics())
    stamps = 1_000_000_000 + np.round(np.arange(len(effort)) / RATE * 1e9).astype(np.int64)
    for a in range(0, len(effort), block):
        rows = slice(a, a + block)
        m = len(stamps[rows])
        samples = SampleBlock(stamps[rows], stamps[rows], np.zeros((m, 3)), np.zeros((m, 3)), effort[rows], None,
                              ("",) * m)
        clues.add(samples, SimpleNamespace(tau_ff=torque[rows], tau_g=np.zeros_like(torque[rows])))
    return clues


def test_a_recording_that_moves_late_is_read_to_its_end():
    count, still, late = 120_000, 80_000, 3  # 3 samples at 500 Hz: 6 ms
    p = torques(count + late, still)
    e = p[:count] / 50.0  # the effort at t is the torque at t - 6 ms, through the gear
    p = p[late:]
    clues = feed(e, p)
    hints = {h["code"]: h for h in find(ResidualSummary(NAMES), clues, False, None)}
    assert set(hints) == {"time_offset", "effort_scale"}
    assert hints["time_offset"]["evidence"]["lag_s"] == pytest.approx(late / RATE, abs=0.5 / RATE)
    np.testing.assert_allclose(hints["effort_scale"]["evidence"]["scale"], 1 / 50, rtol=1e-3)
    assert hints["effort_scale"]["evidence"]["samples_compared"] == count
    assert clues.lags is not None and clues.lags.rows == count
    assert clues._buffered < CHUNK_ROWS  # what is held between chunks stays bounded


def test_lag_sums_match_a_direct_correlation():
    """The Pearson correlation and the slope per lag from the chunked sums equal np.corrcoef and
    np.polyfit on the shifted series, over the same pairs: those within one chunk (blocks of
    1000 samples are correlated 5000 at a time, the first 5 blocks to pass CHUNK_ROWS)."""
    rng = np.random.default_rng(1)
    count = 3 * CHUNK_ROWS + 123
    p = torques(count, 0) + 0.3 * rng.standard_normal((count, 3))
    e = 0.8 * np.roll(p, 2, axis=0) + 0.5 * rng.standard_normal((count, 3))
    clues = feed(e, p, block=1000)
    clues.flush()
    assert clues.lags is not None
    pairs = clues.lags.pairs(gravity_off=False)
    rho = pairs.correlation()
    chunk = np.arange(count) // 5000
    for lag in (-40, -2, 0, 2, 17):
        i = int(np.flatnonzero(pairs.lags == lag)[0])
        t = np.arange(max(0, -lag), min(count, count - lag))  # pairs (t + lag, t)
        t = t[chunk[t + lag] == chunk[t]]
        direct = [np.corrcoef(e[t + lag, j], p[t, j])[0, 1] for j in range(3)]
        np.testing.assert_allclose(rho[i], direct, rtol=1e-9)
        r2, slope = pairs.fits(i)
        for j in range(3):
            assert slope[j, j] == pytest.approx(np.polyfit(p[t, j], e[t + lag, j], 1)[0], rel=1e-9)
            assert r2[j, (j + 1) % 3] == pytest.approx(np.corrcoef(e[t + lag, j], p[t, (j + 1) % 3])[0, 1] ** 2,
                                                       rel=1e-6, abs=1e-12)
