"""`--effort-delay` (issue 23): the replay applies the lag the `time_offset` hint finds.

The recording is the one of test_replay_recording_hints: a UR5 simulated by Pinocchio's forward
dynamics under torque commands held at 43 Hz, the commands logged 30 ms after the simulator applied
them. The reference is the simulation itself: Pinocchio's RNEA of the simulated motion (states and
the simulator's accelerations) is the torque that acted at each joint state.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_replay import T0, model, pin, pin_model, ur5_urdf  # noqa: F401
from test_replay_recording_hints import LAG_S, command_bag, held_commands  # noqa: F401

from liedyn_ros.pipeline import ParameterError, check_parameters
from liedyn_ros.replay import ReplayError, ReplayOptions, replay
from liedyn_ros.replay.cli import build_parser, options_from_args
from liedyn_ros.replay.delay import SKIP_REASON, EffortDelay
from liedyn_ros.replay.samples import SampleBlock


def acting_torque(held_commands, pin_model) -> dict[int, np.ndarray]:
    """Per state stamp (ns): Pinocchio's RNEA at the simulated q, v and the simulator's
    acceleration aba(q, v, tau) under the command in force then."""
    m, d = pin_model
    commands, states = held_commands
    applied = np.array([c[0] for c in commands])
    out = {}
    for t, q, v in states:
        tau = commands[int(np.searchsorted(applied, t + 1e-9, side="right")) - 1][1]
        out[T0 + round(t * 1e9)] = pin.rnea(m, d, q, v, pin.aba(m, d, q, v, tau))
    return out


def paired_efforts(out) -> tuple[np.ndarray, np.ndarray]:
    stamps = np.loadtxt(out / "measured_effort.csv", delimiter=",", skiprows=1, usecols=0, dtype=np.int64)
    return stamps, np.loadtxt(out / "measured_effort.csv", delimiter=",", skiprows=1)[:, 1:]


def test_the_suggested_delay_removes_the_lag(tmp_path, model, pin_model, held_commands):
    bag = command_bag(tmp_path, model, held_commands, LAG_S)
    reports = {}
    for name, delay in (("none", None), ("suggested", "from the hint"), ("exact", LAG_S)):
        if delay == "from the hint":
            (hint,) = reports["none"][0].summary["hints"]
            delay = hint["evidence"]["suggested_effort_delay_s"]
            assert hint["code"] == "time_offset" and f"--effort-delay {delay:.4f}" in hint["message"]
        out = tmp_path / name
        parameters = {} if delay is None else {"effort_delay": delay}
        report = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), effort_topic="/cmd", progress=False,
                                             plots=False, parameters=parameters))
        stamps, effort = paired_efforts(out)
        truth = acting_torque(held_commands, pin_model)
        rows = np.isfinite(effort).all(axis=1)
        error = effort[rows] - np.array([truth[s] for s in stamps[rows]])
        rms = np.sqrt((error**2).mean(axis=0))
        residual = [j["torque_residual_Nm"]["rms"] for j in report.summary["joints"].values()]
        print(f"\n{name} (effort_delay {delay}): effort - Pinocchio RNEA RMS {np.round(rms, 3)} N m; "
              f"replay residual RMS {np.round(residual, 3)}; hints {[h['code'] for h in report.summary['hints']]}; "
              f"skipped {report.skipped}")
        reports[name] = (report, rms, residual)
    none, suggested_, exact = reports["none"], reports["suggested"], reports["exact"]
    assert [h["code"] for h in suggested_[0].summary["hints"]] == []
    assert [h["code"] for h in exact[0].summary["hints"]] == []
    # the commands are now paired with the states they acted on: exactly at 30 ms (a whole number of
    # 5 ms periods), interpolated between two states at the suggested 29.5 ms
    np.testing.assert_allclose(exact[1], 0.0, atol=1e-9)
    assert (suggested_[1] < 0.25 * none[1]).all()
    assert (np.array(suggested_[2]) < np.array(none[2])).all()
    # the last states: their efforts would be 30 ms after the recording's last joint state
    _, states = held_commands
    last = states[-1][0]
    expected = sum(1 for t, _, _ in states if t + LAG_S > last + 1e-9)
    assert exact[0].skipped[SKIP_REASON] == expected == 6
    assert exact[0].processed == none[0].processed - expected


def test_the_delay_from_a_parameter_file_and_the_command_line(tmp_path, model, held_commands):
    """`effort_delay` in --params means the same; --effort-delay overrides it; the node refuses it."""
    bag = command_bag(tmp_path, model, held_commands, LAG_S)
    params = tmp_path / "p.yaml"
    params.write_text(f"liedyn_dynamics:\n  ros__parameters:\n    effort_delay: {LAG_S}\n")
    common = [str(bag), "--out", "o", "--urdf", str(ur5_urdf()), "--effort-topic", "/cmd", "--params", str(params),
              "--no-plots"]
    from_file = replay([bag], options_from_args(build_parser().parse_args(common), tmp_path / "file", progress=False))
    assert from_file.skipped[SKIP_REASON] == 6 and from_file.summary["hints"] == []
    args = build_parser().parse_args(common + ["--effort-delay", "0"])
    assert options_from_args(args, tmp_path / "o", progress=False).parameters == {"effort_delay": 0.0}
    with pytest.raises(ParameterError, match=r"^effort_delay: 0.03 is for liedyn-replay only"):
        check_parameters({"effort_delay": 0.03})
    assert check_parameters({"effort_delay": 0.0}).values == {"effort_delay": 0.0}
    with pytest.raises(ReplayError, match=r"effort_delay: 0.7 s is beyond \+-0.5 s"):
        ReplayOptions(out=tmp_path / "x", parameters={"effort_delay": 0.7})


def block(stamps_ns, effort) -> SampleBlock:
    n = len(stamps_ns)
    effort = np.asarray(effort, dtype=float).reshape(n, -1)
    k = effort.shape[1]
    return SampleBlock(np.asarray(stamps_ns, dtype=np.int64), np.asarray(stamps_ns, dtype=np.int64),
                       np.zeros((n, k)), np.zeros((n, k)), effort, None, ("",) * n)


@pytest.mark.parametrize("delay", [0.0123, -0.0071, 0.2])
def test_streamed_shift_is_interpolation_within_the_recording(delay):
    """Any split into blocks gives what np.interp gives on the whole recording; samples whose
    shifted time is before the first state, after the last or in a gap longer than max_gap are
    skipped; a sample next to one without effort has none."""
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.004, 0.006, 400))
    t[200:] += 0.5  # a gap longer than max_gap (0.1 s)
    stamps = np.round(t * 1e9).astype(np.int64)
    effort = np.stack([np.sin(7 * t), np.cos(3 * t)], axis=1)
    effort[300] = np.nan
    cuts = np.sort(rng.choice(np.arange(1, 400), 7, replace=False))
    shifter = EffortDelay(delay, 0.1)
    parts = [block(stamps[a:b], effort[a:b]) for a, b in zip(np.r_[0, cuts], np.r_[cuts, 400])]
    out = list(shifter.blocks(parts))
    got_t = np.concatenate([b.stamp_ns for b in out])
    got_e = np.concatenate([b.effort for b in out])
    when = stamps + round(delay * 1e9)
    j = np.searchsorted(stamps, when)
    inside = (j > 0) & (j < 400) & ~((stamps[np.clip(j, 0, 399)] - stamps[np.clip(j - 1, 0, 399)]) > 1e8)
    inside |= np.isin(when, stamps)
    assert shifter.skipped == (~inside).sum() > 0
    np.testing.assert_array_equal(got_t, stamps[inside])
    involves_300 = (when[inside] > stamps[299]) & (when[inside] < stamps[301])
    assert np.isnan(got_e[involves_300]).all() and np.isfinite(got_e[~involves_300]).all()
    for c in range(2):
        ref = np.interp(when[inside], stamps, effort[:, c])
        np.testing.assert_allclose(got_e[~involves_300, c], ref[~involves_300], rtol=0, atol=1e-12)
