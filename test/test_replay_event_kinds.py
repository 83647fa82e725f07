"""What a replay's collision events were (issue 23): a torque pulse on a free arm is a
`collision`, the same pulse while a joint sits at its URDF position limit is `limit` (a
simulator's stop pushes like an external torque), an offset in commands that start after a while
without any is `command_step`; all-zero efforts give no event at all. The efforts are Pinocchio's
RNEA of the recorded motion (an independent reference) with the external torque taken off."""

from __future__ import annotations

import json

import numpy as np

from liedyn_ros.replay import ReplayOptions, replay
from test_replay import model, pin, pin_model, scenario, ur5_urdf, write_bag  # noqa: F401

PULSE = (0.4, 0.7)  # s after the first sample
PULSE_TORQUE = np.array([0.0, -15.0, 8.0, 0.0, 0.0, 0.0])
OBSERVER = {"observer_gain": 50.0, "collision_threshold": [3.0]}


def events(tmp_path, sc) -> list[dict]:
    out = tmp_path / "out"
    replay([write_bag(tmp_path / "in", "mcap", sc)],
           ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, plots=False, parameters=OBSERVER))
    return json.loads((out / "summary.json").read_text())["collisions"]


def rnea_efforts(sc, pin_model) -> np.ndarray:
    m, d = pin_model
    return np.array([pin.rnea(m, d, q, v, a) for q, v, a in zip(sc["q"], sc["qd"], sc["qdd"])])


def seconds(sc) -> np.ndarray:
    return (sc["stamps"] - sc["stamps"][0]) * 1e-9


def pulse(sc) -> np.ndarray:
    t = seconds(sc)
    return ((t >= PULSE[0]) & (t < PULSE[1]))[:, None] * PULSE_TORQUE


def test_a_pulse_on_a_free_arm_is_a_collision(tmp_path, model, pin_model):
    sc = scenario(model)
    sc["effort"] = rnea_efforts(sc, pin_model) - pulse(sc)
    (event,) = events(tmp_path, sc)
    assert event["kind"] == "collision" and event["joint"] == model.joint_names[1]


def test_a_pulse_while_a_joint_sits_at_its_position_limit_is_a_limit(tmp_path, model, pin_model):
    """Joint 0 held at its URDF upper limit the whole time: the stop's torque is the pulse."""
    sc = scenario(model)
    sc["q"][:, 0], sc["qd"][:, 0], sc["qdd"][:, 0] = model.upper[0], 0.0, 0.0
    sc["effort"] = rnea_efforts(sc, pin_model) - pulse(sc)
    (event,) = events(tmp_path, sc)
    assert event["kind"] == "limit"


def test_an_offset_at_the_first_command_is_a_command_step(tmp_path, model, pin_model):
    """No effort during the first 0.5 s, then efforts 6 N m off on joint 1 (a command that
    starts with a step): the event starts as the commands do."""
    sc = scenario(model)
    late = seconds(sc) >= 0.5
    sc["effort"] = rnea_efforts(sc, pin_model) + np.array([0.0, 6.0, 0.0, 0.0, 0.0, 0.0])
    sc["effort"][~late] = np.nan
    found = events(tmp_path, sc)
    first = sc["stamps"][late][0]
    assert found and found[0]["kind"] == "command_step"
    assert 0 <= (found[0]["start_ns"] - first) * 1e-9 < 0.1


def test_all_zero_efforts_give_no_event(tmp_path, model):
    """Gazebo's JointState.effort is all zeros: the estimate is minus the model's torques."""
    sc = scenario(model)
    sc["effort"] = np.zeros_like(sc["effort"])
    assert events(tmp_path, sc) == []


def test_the_observer_switched_off_in_the_parameter_file_finds_nothing(tmp_path, model, pin_model):
    """`external_torque_observer: false` in --params: as live, no external torque (topic, CSV,
    figure, summary column) and no collision event, where the same file with true finds the pulse."""
    sc = scenario(model)
    sc["effort"] = rnea_efforts(sc, pin_model) - pulse(sc)
    bag = write_bag(tmp_path / "in", "mcap", sc)
    found = {}
    for on in (True, False):
        params = tmp_path / f"{on}.yaml"
        params.write_text("liedyn_dynamics:\n  ros__parameters:\n    collision_threshold: [3.0]\n"
                          f"    external_torque_observer: {str(on).lower()}\n")
        out = tmp_path / str(on)
        report = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, params=params, plots=not on))
        found[on] = (report, out, json.loads((out / "summary.json").read_text()))
    report, out, summary = found[True]
    assert [e["kind"] for e in summary["collisions"]] == ["collision"]
    assert (out / "external_torque.csv").exists() and "external_torque" in report.published
    report, out, summary = found[False]
    assert summary["collisions"] == [] and summary["external_torque_observer"] is False
    assert "collisions: not looked for (external_torque_observer: false)" in report.table
    assert not (out / "external_torque.csv").exists() and "external_torque" not in report.published
    assert not any(k.startswith("external_torque") for joint in summary["joints"].values() for k in joint)
    assert {p.split("/")[-1] for p in report.files} == {"torques.png", "torque_residuals.png", "accelerations.png"}
