"""The replay's figures (issue 23), read from the matplotlib figures as they are saved: zoomed to
where the robot moves and saying so, residual scales not set by a spike at a run's start, the
collision threshold and the event kinds in the legend, an empty panel saying why, identical curves
said to coincide. A synthetic recording: 6 s, two joints, moving from 2.0 s to 2.5 s only."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_replay_messages import Figures

from liedyn_ros.replay.plots import PlotRecorder

RATE = 200.0
T0_NS = 1_000_000_000_000


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    """{file name: what the saved figure shows} (test_replay_messages.Figures)."""
    t = np.arange(int(6 * RATE)) / RATE
    moving = (t >= 2.0) & (t <= 2.5)
    qd = np.where(moving, np.sin(2 * np.pi * (t - 2.0) / 0.5), 0.0)[:, None] * [1.0, 0.5]
    tau = 5 * qd + [1.0, 2.0]
    effort = tau + 0.3 * np.sin(20 * t)[:, None]
    effort[:, 1] = np.nan  # the second joint has no effort at all
    effort[t < 1.95, 0] = np.nan  # the first joint's efforts start at 1.95 s, with a spike
    effort[(t >= 1.95) & (t < 1.97), 0] += 80.0
    rec = PlotRecorder(("j1", "j2"), ("revolute", "revolute"), effort_label="measured")
    rec.t0 = T0_NS * 1e-9
    stamps = T0_NS + np.round(t * 1e9).astype(np.int64)
    block = SimpleNamespace(stamp_ns=stamps, effort=effort, v=qd)
    out = SimpleNamespace(qdd_pred=np.gradient(qd, axis=0) * RATE, tau_ff=tau, tau_g=np.zeros_like(tau))
    ext = np.where(np.isfinite(effort), 0.0, np.nan)
    at_limit = np.zeros((len(t), 2), dtype=bool)
    at_limit[(t >= 2.1) & (t < 2.2), 0] = True  # j1 held at its URDF limit (a simulator's stop)
    rec.add_block(block, out, np.gradient(qd, axis=0) * RATE, None, ext, at_limit)
    event = {"start_ns": int(stamps[440]), "end_ns": int(stamps[460]), "joint": "j1", "peak": 12.0, "kind": "limit"}
    with pytest.MonkeyPatch.context() as patch:
        seen = Figures(patch)
        rec.save(tmp_path_factory.mktemp("plots"), [event], np.array([10.0, 10.0]))
    return {name: SimpleNamespace(**fig) for name, fig in seen.seen.items()}


def test_every_figure_is_zoomed_to_the_motion_and_says_so(figures):
    assert set(figures) == {"torques.png", "torque_residuals.png", "accelerations.png", "external_torque.png"}
    for fig in figures.values():
        assert "zoomed to the motion" in fig.title
        low, high = fig.xlims[0]
        assert 1.7 <= low <= 2.0 and 2.5 <= high <= 2.8


def test_a_spike_at_the_start_of_the_efforts_does_not_set_the_residual_scale(figures):
    """An 80 N m spike in the first 20 ms of the efforts: the residual's scale is that of the
    0.3 N m residual after it, and the title says the spike is clipped."""
    low, high = figures["torque_residuals.png"].ylims[0]
    assert -0.5 < low < -0.25 and 0.25 < high < 0.5
    assert "spikes there are clipped" in figures["torque_residuals.png"].title
    assert figures["torques.png"].ylims[0][1] > 80  # the efforts themselves are not clipped


def test_the_threshold_and_the_event_kind_are_in_the_legend(figures):
    assert figures["external_torque.png"].legend == ["estimate", "+-collision threshold", "event: limit",
                                                     "joint at its URDF limit"]


def test_an_empty_panel_says_why(figures):
    texts = figures["torque_residuals.png"].texts[1]
    assert texts == ["nothing to show: no measured effort"]
    assert figures["external_torque.png"].texts[1] == ["nothing to show: the observer needs a measured effort"]


def test_identical_curves_are_said_to_coincide(figures):
    assert figures["torques.png"].texts[0] == []  # 0.3 N m apart
    assert figures["accelerations.png"].texts[0] == ["predicted (ABA) coincides with estimated (Savitzky-Golay)"]


def test_a_joint_at_its_limit_is_hatched_and_a_late_start_is_said(figures):
    """Hatched where j1 sits at its URDF limit on the torque figures (not on the accelerations), in
    j1's panel only; the efforts that start 0.25 s into the window are said in the title."""
    for name in ("torques.png", "torque_residuals.png", "external_torque.png"):
        assert "joint at its URDF limit" in figures[name].legend
    assert "joint at its URDF limit" not in figures["accelerations.png"].legend
    assert "nothing before 1.95 s: no measured effort" in figures["torque_residuals.png"].title
    assert "nothing before" not in figures["torques.png"].title  # the torques start with the window


def test_a_base_event_has_its_panel(tmp_path):
    """With contacts on a floating base the events also watch the force on the base beyond the
    feet: external_torque.png gets that force's panel with its threshold, so an event on the base
    is not shaded over joint panels that never cross theirs."""
    t = np.arange(2000) / RATE
    stamps = T0_NS + np.round(t * 1e9).astype(np.int64)
    qd = np.sin(2 * np.pi * t)[:, None] * [1.0, 0.5]
    push = np.where((t >= 1.0) & (t < 1.2), 40.0, 0.5)
    rec = PlotRecorder(("j1", "j2"), ("revolute", "revolute"), base_link="base")
    rec.t0 = T0_NS * 1e-9
    out = SimpleNamespace(qdd_pred=np.zeros_like(qd), tau_ff=qd, tau_g=np.zeros_like(qd))
    rec.add_block(SimpleNamespace(stamp_ns=stamps, effort=qd, v=qd), out, np.zeros_like(qd), None, np.zeros_like(qd),
                  None, push)
    event = {"start_ns": int(stamps[1000]), "end_ns": int(stamps[1200]), "joint": "base", "peak": 40.0,
             "kind": "collision"}
    with pytest.MonkeyPatch.context() as patch:
        seen = Figures(patch)
        rec.save(tmp_path, [event], np.array([10.0, 10.0, 15.0]))
    figure = SimpleNamespace(**seen.seen["external_torque.png"])
    assert figure.ylabels == ["j1\n[N m]", "j2\n[N m]", "base\n|force beyond the feet|\n[N]"]
    assert figure.ylims[2][1] > 40.0  # the push is drawn
