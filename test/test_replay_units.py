"""Units of the replay: Savitzky-Golay with stamps, streaming, CSV formatting."""

from __future__ import annotations

import numpy as np
import pytest

from liedyn_ros.replay.accel import SavgolSettings, StreamingDifferentiator, differentiate, run_starts
from liedyn_ros.replay.csvfmt import format_rows
from liedyn_ros.replay.samples import SampleBlock


def test_savgol_is_exact_for_cubics_on_even_stamps():
    t = np.arange(300) * 0.002
    v = np.stack([1 + 2 * t - 3 * t**2 + 0.5 * t**3, np.sin(0 * t)], axis=1)
    stamps = (t * 1e9).round().astype(np.int64)
    d = differentiate(stamps, v, SavgolSettings(window=11, polyorder=3))
    np.testing.assert_allclose(d[:, 0], 2 - 6 * t + 1.5 * t**2, atol=1e-9)


def test_irregular_stamps_use_the_stamps():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.003, 0.007, 500))  # heavy jitter around 5 ms
    v = np.sin(2 * t)[:, None]
    d = differentiate((t * 1e9).astype(np.int64), v, SavgolSettings())
    assert np.abs(d[:, 0] - 2 * np.cos(2 * t)).max() < 1e-3
    # A derivative that assumed an even 5 ms step would be far off.
    naive = np.gradient(v[:, 0], 0.005)
    assert np.abs(naive - 2 * np.cos(2 * t)).max() > 0.1


def test_gaps_split_runs_and_isolated_samples_get_nan():
    stamps = np.array([0, 1, 2, 3, 4, 5, 20, 40, 41, 42, 43, 44], dtype=np.int64) * 5_000_000
    assert run_starts(stamps, 5.0).tolist() == [0, 6, 7]
    v = (stamps * 1e-9)[:, None] * np.where(stamps < 100_000_000, 1.0, -2.0)[:, None]
    d = differentiate(stamps, v, SavgolSettings(window=5, polyorder=2))
    np.testing.assert_allclose(d[:6, 0], 1.0, atol=1e-9)
    assert np.isnan(d[6]).all()
    np.testing.assert_allclose(d[7:, 0], -2.0, atol=1e-9)


@pytest.mark.parametrize("block", [7, 40, 1000])
def test_streaming_equals_whole_signal(block):
    n = 523
    t = np.arange(n) * 0.005
    t[300:] += 1.0  # a gap
    stamps = (t * 1e9).round().astype(np.int64)
    v = np.stack([np.sin(3 * t), np.cos(t)], axis=1)
    whole = differentiate(stamps, v, SavgolSettings())
    diff = StreamingDifferentiator(SavgolSettings())
    got = []
    for begin in range(0, n, block):
        sl = slice(begin, begin + block)
        blk = SampleBlock(stamps[sl], stamps[sl], v[sl], v[sl], v[sl], None, ("",) * len(stamps[sl]))
        got += [a for _, a in diff.feed(blk)]
    got += [a for _, a in diff.finish()]
    np.testing.assert_allclose(np.concatenate(got), whole, rtol=1e-12, atol=1e-12)


def test_csv_round_trip():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((200, 5)) * 10.0 ** rng.integers(-200, 200, (200, 5))
    values[0] = [0.0, -0.0, np.nan, np.inf, -np.inf]
    values[1] = [1.0, 10.0, 0.1, 9.999999999999999, 5e-324]
    stamps = np.arange(200, dtype=np.int64) * 3 + 1_700_000_000_000_000_007
    lines = format_rows(stamps, values).decode().splitlines()
    assert [int(line.split(",")[0]) for line in lines] == stamps.tolist()
    back = np.array([[float(x) for x in line.split(",")[1:]] for line in lines])
    np.testing.assert_allclose(back, values, rtol=2e-14, atol=0)
    assert lines[1].split(",")[1:4] == ["1e+00", "1e+01", "1e-01"]


def test_identify_without_cvxpy_says_so_before_the_replay(monkeypatch) -> None:
    """Found live: a ROS venv without cvxpy replayed the whole bag and then failed with a
    ModuleNotFoundError traceback; the arguments are refused at once, naming the package."""
    import importlib.util

    from liedyn_ros import core
    from liedyn_ros.replay.errors import ReplayError
    from liedyn_ros.replay.identify import parse_targets

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cvxpy" else find_spec(name, *a))
    model = core.load_urdf("""<robot name="p"><link name="world"/><link name="bob"><inertial><mass value="1"/>
      <inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
      <joint name="j" type="continuous"><parent link="world"/><child link="bob"/><axis xyz="0 1 0"/></joint></robot>""")
    with pytest.raises(ReplayError, match="pip install cvxpy"):
        parse_targets(model, [["friction"]])
    monkeypatch.undo()  # cvxpy installed: the same arguments make a problem
    assert parse_targets(model, [["friction"]]).friction
