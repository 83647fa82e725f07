"""What is wrong with a recording (issue 23): each mistake on a recording made to show it, and
none on the clean one.

The lag: a UR5 simulated by Pinocchio's forward dynamics (aba, 1 ms steps) under torque commands
held between updates at 43 Hz (a PD controller around a sum of sines plus gravity compensation),
joint states at 200 Hz; the commands go to an effort topic whose receive times are those at which
the simulator applied them (clean) or 30 ms later (a recorder that logs them late: the efforts are
later than the states). The other mistakes: Pinocchio's RNEA torques of a prescribed motion as the
JointState efforts, divided by a gear ratio, one joint's sign flipped, two joints' efforts swapped,
and commands that start late or pause. Last, MuJoCo (an independent simulator) with joint friction
and damping the URDF lacks: no hint, and a gear and a lag found through the friction.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_replay import RATE, T0, model, pin, pin_model, scenario, ur5_urdf, write_bag  # noqa: F401

from liedyn_ros.replay import ReplayOptions, replay

COMMAND_HZ = 43.0
SIM_DT = 0.001
LAG_S = 0.030


def found(tmp_path, bag, **options) -> list[dict]:
    """summary.json's hints of a replay of `bag`, each also a line of the printed table."""
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, plots=False, **options))
    hints = json.loads((out / "summary.json").read_text())["hints"]
    assert [line for line in report.table.splitlines() if line.startswith("hint ")] == [
        f"hint {h['code']}: {h['message']}" for h in hints]
    return hints


def rnea_efforts(sc, pin_model) -> np.ndarray:
    m, d = pin_model
    return np.array([pin.rnea(m, d, q, v, a) for q, v, a in zip(sc["q"], sc["qd"], sc["qdd"])])


@pytest.fixture(scope="module")
def held_commands(pin_model):
    """Forward simulation under commands held for 1/43 s: states every 5 ms from 0.1 s on (the
    first command comes before the first state), and the (apply time, torque) of each command. The
    controller is computed torque (Pinocchio's mass matrix and bias forces) around a sum of sines."""
    m, d = pin_model
    n, seconds = m.nq, 2.1
    amp, w = np.linspace(0.3, 0.6, n), 2 * np.pi * np.linspace(0.5, 1.2, n)
    kp, kd = 100.0, 20.0
    q, v = 0.6 * amp, amp * w  # on the reference
    commands, states, tau = [], [], np.zeros(n)
    for k in range(int(seconds / SIM_DT) + 1):
        t = k * SIM_DT
        if t >= len(commands) / COMMAND_HZ:
            ref = amp * np.sin(w * t + 0.6435)  # sin(0.6435) = 0.6: where q starts
            ref_v = amp * w * np.cos(w * t + 0.6435)
            ref_a = -w * w * ref
            tau = pin.crba(m, d, q) @ (ref_a + kp * (ref - q) + kd * (ref_v - v)) + pin.nle(m, d, q, v)
            commands.append((t, tau.copy()))
        if k % 5 == 0 and t >= 0.1:
            states.append((t, q.copy(), v.copy()))
        v = v + SIM_DT * pin.aba(m, d, q, v, tau)
        q = q + SIM_DT * v
    return commands, states


def command_bag(tmp_path, model, held_commands, delay_s: float):
    commands, states = held_commands
    t = np.array([s[0] for s in states])
    rng = np.random.default_rng(2)
    sc = dict(stamps=T0 + np.round(t * 1e9).astype(np.int64), q=np.array([s[1] for s in states]),
              qd=np.array([s[2] for s in states]), effort=np.zeros((len(t), 6)),  # Gazebo: zeros
              orders=[rng.permutation(6) for _ in t], names=list(model.joint_names))

    def extra(writer, ts):
        conn = writer.add_connection("/cmd", "std_msgs/msg/Float64MultiArray", typestore=ts)
        layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        for when, tau in commands:
            msg = ts.types["std_msgs/msg/Float64MultiArray"](layout=layout, data=tau)
            # write_bag logs a state 0.3 ms after its stamp: a command applied at the same instant is logged first
            writer.write(conn, T0 + round((when + delay_s) * 1e9), ts.serialize_cdr(msg, "std_msgs/msg/Float64MultiArray"))

    return write_bag(tmp_path / "in", "mcap", sc, extra=extra)


def test_commands_applied_as_logged_give_no_hint(tmp_path, model, held_commands):
    assert found(tmp_path, command_bag(tmp_path, model, held_commands, 0.0), effort_topic="/cmd") == []


def test_commands_logged_30_ms_late_give_the_lag(tmp_path, model, held_commands):
    (hint,) = found(tmp_path, command_bag(tmp_path, model, held_commands, LAG_S), effort_topic="/cmd")
    assert hint["code"] == "time_offset"
    assert hint["evidence"]["lag_s"] == pytest.approx(LAG_S, abs=0.003)
    assert "later than the joint states" in hint["message"]


def test_efforts_through_a_gear_ratio_give_their_scale(tmp_path, model, pin_model):
    """Motor torques behind a 1:50 gear: every effort is the joint torque / 50."""
    sc = scenario(model)
    tau = rnea_efforts(sc, pin_model)
    sc["effort"] = tau / 50.0
    (hint,) = found(tmp_path, write_bag(tmp_path / "in", "mcap", sc))
    assert hint["code"] == "effort_scale"
    spread = tau.std(axis=0)  # the last wrist joint's torque hardly varies: no scale to tell there
    assert hint["evidence"]["joints"] == [j for j, s in zip(model.joint_names, spread) if s > 0.1 * spread.max()]
    assert len(hint["evidence"]["joints"]) == 5
    np.testing.assert_allclose(hint["evidence"]["scale"], 1 / 50, rtol=0.02)


def test_a_flipped_joint_gives_its_sign(tmp_path, model, pin_model):
    sc = scenario(model)
    sc["effort"] = rnea_efforts(sc, pin_model) * np.array([1, 1, -1, 1, 1, 1])
    (hint,) = found(tmp_path, write_bag(tmp_path / "in", "mcap", sc))
    assert hint["code"] == "sign_flip" and hint["evidence"]["joints"] == [model.joint_names[2]]
    assert hint["evidence"]["slope"][0] == pytest.approx(-1, abs=0.05)


def test_swapped_efforts_give_the_order(tmp_path, model, pin_model):
    """The driver writes joint 2's effort under joint 1's name and the other way round."""
    sc = scenario(model)
    sc["effort"] = rnea_efforts(sc, pin_model)[:, [0, 2, 1, 3, 4, 5]]
    (hint,) = found(tmp_path, write_bag(tmp_path / "in", "mcap", sc))
    names = model.joint_names
    assert hint["code"] == "joint_order"
    assert hint["evidence"]["joints"] == [names[1], names[2]] and hint["evidence"]["torque_of"] == [names[2], names[1]]


def test_commands_that_start_late_and_pause_are_told(tmp_path, model, held_commands):
    """No command in the first 0.4 s of states nor for 0.6 s (longer than the 0.5 s a command
    stays valid) in the middle: the samples without one are counted where they are."""
    commands, states = held_commands
    t = np.array([s[0] for s in states])
    late = [(when, tau) for when, tau in commands if 0.5 <= when < 1.0 or when >= 1.6]
    bag = command_bag(tmp_path, model, (late, states), 0.0)
    hints = {h["code"]: h for h in found(tmp_path, bag, effort_topic="/cmd")}
    e = hints["missing_effort"]["evidence"]
    last_before_pause = max(when for when, _ in late if when < 1.0)
    first_after_pause = min(when for when, _ in late if when >= 1.0)
    received = t + 0.0003  # write_bag logs a state 0.3 ms after its stamp
    expected_before = int((t < late[0][0]).sum()) - (t[50] < late[0][0])  # write_bag's NaN sample is skipped
    assert e["before_first"] == expected_before and e["after_last"] == 0
    assert e["in_pauses"] == int(((received > last_before_pause + 0.5) & (received < first_after_pause)).sum())
    assert e["with_effort"] + e["before_first"] + e["in_pauses"] == e["samples"] == len(t) - 1
    assert f"{e['with_effort']} of {e['samples']} joint states carry a command of /cmd" in hints["missing_effort"]["message"]


@pytest.fixture(scope="module")
def mujoco_arm(model):
    """4 s of a UR5 simulated by MuJoCo with joint damping and dry friction the URDF does not
    have (test/simulated.py): the efforts are the applied torques, the residual is the friction."""
    pytest.importorskip("mujoco")
    from simulated import arm_urdf, simulate

    names = model.joint_names
    urdf = arm_urdf(ur5_urdf().read_text(), dict(zip(names, [0.5, 0.5, 0.3, 0.1, 0.1, 0.05])),
                    dict(zip(names, [1.0, 1.0, 0.6, 0.2, 0.2, 0.1])))
    rec = simulate(urdf, names, model, seconds=4.0, rate=RATE)
    rng = np.random.default_rng(0)
    return dict(stamps=T0 + np.round(rec.t * 1e9).astype(np.int64), q=rec.q, qd=rec.qd, effort=rec.effort,
                orders=[rng.permutation(6) for _ in rec.t], names=list(names))


def test_a_mujoco_arm_with_unmodelled_friction_gives_no_hint(tmp_path, mujoco_arm):
    assert found(tmp_path, write_bag(tmp_path / "in", "mcap", mujoco_arm)) == []


def test_a_mujoco_arm_through_a_gear_and_late_gives_scale_and_lag(tmp_path, model, mujoco_arm):
    """The same recording with motor torques behind a 1:80 gear, then with efforts 20 ms late."""
    geared = mujoco_arm | {"effort": mujoco_arm["effort"] / 80.0}
    (hint,) = found(tmp_path / "gear", write_bag(tmp_path / "geared", "mcap", geared))
    assert hint["code"] == "effort_scale" and set(model.joint_names[:3]) <= set(hint["evidence"]["joints"])
    np.testing.assert_allclose(hint["evidence"]["scale"], 1 / 80, rtol=0.05)  # friction is not geared
    e = mujoco_arm["effort"]
    late = mujoco_arm | {"effort": np.concatenate([e[:4], e[:-4]])}  # 4 samples at 200 Hz
    (hint,) = found(tmp_path / "late", write_bag(tmp_path / "lagged", "mcap", late))
    assert hint["code"] == "time_offset" and hint["evidence"]["lag_s"] == pytest.approx(0.020, abs=0.005)
