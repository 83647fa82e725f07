"""The replay's external torques and collision events (issue 14) on a bag whose measured
torques are Pinocchio's RNEA of the recorded motion minus a known torque pulse: the pulse is the
external torque, so the observer must find it, and nothing else."""

from __future__ import annotations

import json

import numpy as np
import pytest

from liedyn_ros.replay import ReplayOptions, replay
from test_replay import RATE, model, pin, pin_model, read_csv, read_outputs, scenario, ur5_urdf, write_bag  # noqa: F401

PULSE = (0.4, 0.7)  # s after the first sample
PULSE_TORQUE = np.array([0.0, -15.0, 8.0, 0.0, 0.0, 0.0])
GAIN = 50.0  # 1/s


def test_replay_finds_the_torque_pulse(tmp_path, model, pin_model):
    sc = scenario(model)
    m, d = pin_model
    t = (sc["stamps"] - sc["stamps"][0]) * 1e-9
    on = (t >= PULSE[0]) & (t < PULSE[1])
    sc["effort"] = np.array([pin.rnea(m, d, sc["q"][i], sc["qd"][i], sc["qdd"][i]) for i in range(len(t))])
    sc["effort"][on] -= PULSE_TORQUE
    out = tmp_path / "out"
    observer = {"observer_gain": GAIN, "collision_threshold": [3.0]}  # as --observer-gain, --collision-threshold
    report = replay([write_bag(tmp_path / "in", "mcap", sc)], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False,
                                                                           parameters=observer))
    stamps, r = read_csv(out / "external_torque.csv")
    t = (stamps - sc["stamps"][0]) * 1e-9
    settled = (t >= PULSE[0] + 5 / GAIN) & (t < PULSE[1])
    quiet = (t < PULSE[0]) | (t >= PULSE[1] + 0.2)
    print(f"\nsettled error {np.abs(r[settled] - PULSE_TORQUE).max():.4f} N m, "
          f"outside the pulse max |r| {np.abs(r[quiet]).max():.4f} N m")
    assert np.abs(r[settled] - PULSE_TORQUE).max() < 0.02 * np.abs(PULSE_TORQUE).max()
    assert np.abs(r[quiet]).max() < 0.1

    (event,) = json.loads((out / "summary.json").read_text())["collisions"]
    start, end = (event["start_ns"] - sc["stamps"][0]) * 1e-9, (event["end_ns"] - sc["stamps"][0]) * 1e-9
    assert 0 < (start - PULSE[0]) * RATE <= 3 and end > PULSE[1]
    assert event["joint"] == model.joint_names[1] and event["peak"] == pytest.approx(-15.0, rel=0.03)
    assert "collisions: 1" in report.table
    # The printed event is on the plots' time axis: seconds since the first joint state.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["first_stamp_ns"] == int(sc["stamps"][0])
    assert f"{start:>10.3f} {end:>10.3f}" in report.table

    rows = read_outputs(out)["/liedyn/external_torque"]
    assert [row[1] for row in rows] == stamps.tolist()
    np.testing.assert_allclose(np.array([row[3] for row in rows]), r, rtol=1e-13, atol=1e-300)
    assert (out / "external_torque.png").stat().st_size > 10_000
