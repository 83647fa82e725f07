"""What is wrong with a recording (issue 23): summary.json's "hints". A recording simulated
without gravity (Pinocchio's RNEA, an independent reference, with zero gravity) and replayed
with the URDF's gravity gives `gravity_off`, with --gravity 0 0 0 nothing; a clean recording
gives no hint and no collision event."""

from __future__ import annotations

import json

import numpy as np

from liedyn_ros.replay import ReplayOptions, replay
from test_replay import model, pin, pin_model, scenario, ur5_urdf, write_bag  # noqa: F401


def hints(tmp_path, sc, gravity=None) -> list[dict]:
    """summary.json's hints, each also a line of the printed table."""
    out = tmp_path / "out"
    report = replay([write_bag(tmp_path / "in", "mcap", sc)],
                    ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, plots=False, gravity=gravity))
    found = json.loads((out / "summary.json").read_text())["hints"]
    assert [line for line in report.table.splitlines() if line.startswith("hint ")] == [
        f"hint {h['code']}: {h['message']}" for h in found]
    return found


def efforts(sc, pin_model, gravity: np.ndarray) -> np.ndarray:
    m, d = pin_model
    saved = m.gravity.linear.copy()
    m.gravity.linear = gravity
    try:
        return np.array([pin.rnea(m, d, q, v, a) for q, v, a in zip(sc["q"], sc["qd"], sc["qdd"])])
    finally:
        m.gravity.linear = saved


def test_a_recording_without_gravity_gives_gravity_off(tmp_path, model, pin_model):
    sc = scenario(model)
    sc["effort"] = efforts(sc, pin_model, np.zeros(3))
    (hint,) = hints(tmp_path, sc)
    assert hint["code"] == "gravity_off" and "--gravity 0 0 0" in hint["message"]
    assert abs(hint["evidence"]["slope"] + 1) < 0.05 and hint["evidence"]["r2"] > 0.95


def test_the_same_recording_replayed_without_gravity_gives_no_hint(tmp_path, model, pin_model):
    sc = scenario(model)
    sc["effort"] = efforts(sc, pin_model, np.zeros(3))
    assert hints(tmp_path, sc, gravity=(0.0, 0.0, 0.0)) == []


def test_a_clean_recording_gives_no_hint_and_no_event(tmp_path, model, pin_model):
    sc = scenario(model)
    sc["effort"] = efforts(sc, pin_model, np.array([0.0, 0.0, -9.81]))
    assert hints(tmp_path, sc) == []
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["collisions"] == []
