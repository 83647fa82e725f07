"""The node's pipeline against what a robot, a simulator or a bag can send (issue 20, "The node").

Clock resets (stamps going back), repeated and zero stamps, huge but finite values, unexpected
exceptions and unnamed joints, through the ROS-free pipeline the node runs, with rclpy-shaped
messages. The references are physics: gravity torques from Pinocchio, and the momentum
observer's closed form for a robot held still against a constant push (De Luca et al.):
r(t) = (1 - exp(-K (t - t0))) tau_ext; or identities: after a clock reset the pipeline gives what
a new one gives, and a refused sample leaves the outputs of a stream without it.
"""
from __future__ import annotations

import array
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
from arms import ARM, JOINTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liedyn_ros import core
from liedyn_ros.pipeline import (
    DiagnosticsReporter, DynamicsPipeline, Level, PipelineConfig, PipelineOutput, SampleTimes, SkipReason,
    config_from_parameters,
)

# A floating body (a box) with a pendulum: a floating base whose inertia is never singular.
FLOATING = """<robot name="hopper"><link name="body"><inertial><mass value="4.0"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.15"/></inertial></link>
  <link name="leg"><inertial><origin xyz="0 0 -0.2"/><mass value="0.8"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.002"/></inertial></link>
  <joint name="hip" type="revolute"><parent link="body"/><child link="leg"/><origin xyz="0.1 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="10"/></joint></robot>"""
Q = np.array([0.5, -0.3])
GAIN = 50.0  # observer_gain's default
MS = 1_000_000  # ns


@pytest.fixture(scope="module")
def arm() -> Any:
    return core.load_urdf(ARM)


@pytest.fixture(scope="module")
def floating() -> Any:
    return core.load_urdf(FLOATING, floating_base=True)


def pin_gravity(q: np.ndarray) -> np.ndarray:
    """g(q) by Pinocchio, whose continuous joints take (cos, sin) of the angle."""
    model = pin.buildModelFromXML(ARM)
    return pin.computeGeneralizedGravity(model, model.createData(), np.ravel(np.column_stack((np.cos(q), np.sin(q)))))


def joint_state(stamp_ns: int, q: Any, qd: Any, effort: Any = (), names: Any = JOINTS) -> Any:
    """An object shaped like an rclpy JointState: array.array('d') fields."""
    sec, nsec = divmod(stamp_ns, 10**9)
    header = SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=nsec), frame_id="")
    return SimpleNamespace(header=header, name=list(names), position=array.array("d", map(float, q)),
                           velocity=array.array("d", map(float, qd)), effort=array.array("d", map(float, effort)))


def odometry(stamp_ns: int, twist: Any) -> Any:
    """An rclpy-shaped nav_msgs/Odometry at the origin, twist (omega, v) of the base."""
    sec, nsec = divmod(stamp_ns, 10**9)
    xyz = lambda x, y, z: SimpleNamespace(x=x, y=y, z=z)  # noqa: E731
    pose = SimpleNamespace(position=xyz(0.0, 0.0, 1.0), orientation=SimpleNamespace(x=0.0, y=0.0, z=0.0, w=1.0))
    w = [float(x) for x in twist]
    return SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=nsec)), child_frame_id="body",
                           pose=SimpleNamespace(pose=pose),
                           twist=SimpleNamespace(twist=SimpleNamespace(angular=xyz(*w[:3]), linear=xyz(*w[3:]))))


def held_still(stamps_ns: list[int], tau_ext: np.ndarray) -> list[Any]:
    """Joint states of the arm held still at Q against an external torque tau_ext: the motors
    balance gravity and the push, effort = g(q) - tau_ext."""
    effort = pin_gravity(Q) - tau_ext
    return [joint_state(s, Q, np.zeros(2), effort) for s in stamps_ns]


def observer_closed_form(t_s: np.ndarray, t0_s: float, tau_ext: np.ndarray) -> np.ndarray:
    return (1.0 - np.exp(-GAIN * (t_s - t0_s)))[:, None] * tau_ext


def all_finite(out: PipelineOutput) -> bool:
    arrays = [x for x in out.outputs if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
    if out.external_torque is not None:
        arrays.append(out.external_torque)
    return all(np.isfinite(x).all() for x in arrays)


def counted(pipe: DynamicsPipeline) -> bool:
    """Every joint state received was published or skipped with a reason."""
    return pipe.stats.received == pipe.stats.published + sum(pipe.stats.skipped.values())


class Clock:
    """A settable clock for the diagnostics reporter."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


# ------------------------------------------------------------------------------ clock resets


def test_a_clock_reset_restarts_the_observer_and_outputs_flow_on(arm: Any) -> None:
    """200 samples from t = 100 s, then the simulator resets to t = 5 s: every sample after the
    jump is published, and the external torque follows the closed form from the jump on (before
    the fix: 0 of 200 published, all compute_error)."""
    tau_ext = np.array([2.0, -1.0])
    before = [100 * 10**9 + k * MS for k in range(200)]
    after = [5 * 10**9 + k * MS for k in range(200)]
    pipe = DynamicsPipeline(arm, PipelineConfig())
    reporter = DiagnosticsReporter(Clock())
    outs = [pipe.on_joint_state(msg) for msg in held_still(before, tau_ext)]
    reporter.report(pipe, "ok")
    outs += [pipe.on_joint_state(msg) for msg in held_still(after, tau_ext)]
    assert all(o is not None for o in outs), pipe.stats.skipped
    external = np.array([o.external_torque for o in outs])
    np.testing.assert_allclose(external[:200], observer_closed_form(np.array(before) * 1e-9, 100.0, tau_ext),
                               atol=1e-9)
    np.testing.assert_allclose(external[200:], observer_closed_form(np.array(after) * 1e-9, 5.0, tau_ext), atol=1e-9)
    np.testing.assert_allclose(outs[-1].outputs.tau_g, pin_gravity(Q), atol=1e-12)
    assert pipe.stats.clock_resets == 1 and pipe.stats.clock_reset == (before[-1], after[0])
    first, second = reporter.report(pipe, "ok"), reporter.report(pipe, "ok")
    assert first.level is Level.WARN and "clock reset" in first.message and "100.199 s to 5.000 s" in first.message
    assert ("clock_resets", "1") in first.values
    assert second.level is Level.OK and "clock reset" not in second.message  # named once, not a lasting WARN


def test_a_clock_reset_ends_the_collision_of_the_old_timeline(arm: Any) -> None:
    """A push above the threshold before a reset, none after: the collision under way belongs to
    the old timeline; after the reset the observer starts from zero and finds none."""
    pipe = DynamicsPipeline(arm, PipelineConfig(collision_threshold=(5.0,)))
    for msg in held_still([10 * 10**9 + k * MS for k in range(100)], np.array([15.0, 0.0])):
        pipe.on_joint_state(msg)
    assert pipe.collision is not None and pipe.stats.collisions == 1
    outs = [pipe.on_joint_state(msg) for msg in held_still([k * MS + 1 for k in range(50)], np.zeros(2))]
    assert all(o is not None and o.collision is None for o in outs)
    assert pipe.collision is None and pipe.stats.collisions == 1
    np.testing.assert_allclose([o.external_torque for o in outs], 0.0, atol=1e-9)


def test_a_clock_reset_forgets_a_reference_that_would_never_age(arm: Any) -> None:
    """reference_max_age ages a reference forward only: one stamped at 100 s would be used for a
    minute and a half after a reset to 5 s. It is forgotten: the samples say no_reference."""
    pipe = DynamicsPipeline(arm, PipelineConfig(acceleration_source="reference"))
    point = SimpleNamespace(positions=[0.1, 0.2], velocities=[], accelerations=[])
    stamp = SimpleNamespace(sec=100, nanosec=0)
    pipe.on_reference(SimpleNamespace(header=SimpleNamespace(stamp=stamp), joint_names=JOINTS, points=[point]))
    assert pipe.on_joint_state(joint_state(100 * 10**9, Q, np.zeros(2))) is not None
    assert pipe.on_joint_state(joint_state(5 * 10**9, Q, np.zeros(2))) is None
    assert pipe.stats.skipped == {SkipReason.NO_REFERENCE: 1}


STEPS = st.one_of(st.integers(1, 20).map(lambda k: k * MS),  # forward, the usual
                  st.just(0),  # a repeated stamp
                  st.integers(-3000, -1).map(lambda k: k * MS))  # back: a reset


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEPS, min_size=5, max_size=60), source=st.sampled_from(["zero", "estimated"]))
def test_after_any_clock_reset_the_pipeline_gives_what_a_new_one_gives(arm: Any, steps: list[int], source: str) -> None:
    """Any stream of stamps going forward, repeating and going back: nothing raises or is skipped
    as an error, and each stretch after a jump back gives exactly the outputs of a new pipeline fed
    that stretch alone."""
    rng = np.random.default_rng(len(steps))
    stamps = list(10**12 + np.cumsum(steps))  # positive throughout
    msgs = [joint_state(int(s), rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2), rng.uniform(-5, 5, 2)) for s in stamps]
    config = PipelineConfig(acceleration_source=source)
    pipe = DynamicsPipeline(arm, config)
    outs = [pipe.on_joint_state(msg) for msg in msgs]
    assert counted(pipe) and set(pipe.stats.skipped) <= {SkipReason.ESTIMATOR_WARMUP}
    starts = [0] + [k for k in range(1, len(stamps)) if stamps[k] < stamps[k - 1]]
    assert pipe.stats.clock_resets == len(starts) - 1
    for a, b in zip(starts, starts[1:] + [len(stamps)]):
        fresh = DynamicsPipeline(arm, config)
        for out, msg in zip(outs[a:b], msgs[a:b]):
            expected = fresh.on_joint_state(msg)
            assert (out is None) == (expected is None)
            if out is not None and expected is not None:
                np.testing.assert_array_equal(out.outputs.tau_ff, expected.outputs.tau_ff)
                assert (out.external_torque is None) == (expected.external_torque is None)
                if out.external_torque is not None:
                    np.testing.assert_allclose(out.external_torque, expected.external_torque, rtol=1e-12, atol=1e-12)


def test_a_floating_base_resumes_with_the_odometry_of_the_new_timeline(floating: Any) -> None:
    """Odometry pairs within odom_max_age on either side: after a reset the old odometry pairs
    with nothing, and the first odometry of the new timeline brings the outputs back."""
    pipe = DynamicsPipeline(floating, PipelineConfig())
    for k in range(20):
        pipe.on_odometry(odometry(50 * 10**9 + k * MS, np.zeros(6)))
        assert pipe.on_joint_state(joint_state(50 * 10**9 + k * MS, [0.1], [0.0], [0.3], ["hip"])) is not None
    assert pipe.on_joint_state(joint_state(10**9, [0.1], [0.0], [0.3], ["hip"])) is None  # no odometry yet
    pipe.on_odometry(odometry(10**9 + MS, np.zeros(6)))
    outs = [pipe.on_joint_state(joint_state(10**9 + k * MS, [0.1], [0.0], [0.3], ["hip"])) for k in range(1, 20)]
    assert all(o is not None for o in outs) and pipe.stats.clock_resets == 1
    assert pipe.stats.skipped == {SkipReason.STALE_ODOMETRY: 1}


# ------------------------------------------------------------------- repeated and zero stamps


def test_repeated_stamps_are_computed_and_leave_the_observer_alone(arm: Any) -> None:
    """Each stamp sent twice (two publishers, a driver republishing): every sample is published
    with its torques; the repeats carry no external torque, and the others are those of the
    stream without the repeats (before the fix: every repeat skipped as compute_error)."""
    tau_ext = np.array([1.0, 0.5])
    stamps = [10**9 + k * MS for k in range(100)]
    pipe = DynamicsPipeline(arm, PipelineConfig())
    reporter = DiagnosticsReporter(Clock())
    outs = [pipe.on_joint_state(msg) for msg in held_still([s for s in stamps for _ in (0, 1)], tau_ext)]
    assert all(o is not None for o in outs) and not pipe.stats.skipped
    assert all(o.external_torque is None for o in outs[1::2]) and pipe.stats.repeated_stamps == 100
    np.testing.assert_allclose([o.external_torque for o in outs[::2]],
                               observer_closed_form(np.array(stamps) * 1e-9, 1.0, tau_ext), atol=1e-9)
    np.testing.assert_allclose([o.outputs.tau_g for o in outs], np.tile(pin_gravity(Q), (200, 1)), atol=1e-12)
    report = reporter.report(pipe, "ok")
    assert report.level is Level.WARN and "100 joint states repeated the previous stamp" in report.message


def test_zero_stamps_give_what_needs_no_time_and_say_what_is_missing(arm: Any) -> None:
    """A driver that never fills the header: torques for every sample, no external torque after the
    first (a first 0 may be a simulation starting at t = 0: the observer starts there, at zero), and
    the diagnostics say why (before the fix: 1 of 1000 published, the rest compute_error)."""
    pipe = DynamicsPipeline(arm, PipelineConfig())
    reporter = DiagnosticsReporter(Clock())
    outs = [pipe.on_joint_state(msg) for msg in held_still([0] * 50, np.array([1.0, 0.5]))]
    assert all(o is not None for o in outs) and not pipe.stats.skipped
    np.testing.assert_array_equal(outs[0].external_torque, 0.0)
    assert all(o.external_torque is None for o in outs[1:])
    np.testing.assert_allclose(outs[-1].outputs.tau_g, pin_gravity(Q), atol=1e-12)
    report = reporter.report(pipe, "ok")
    assert pipe.stats.unstamped == 49 and ("unstamped", "49") in report.values
    assert report.level is Level.WARN and "49 joint states stamped 0: no external torque" in report.message


def test_a_simulation_starting_at_zero_is_timed_from_its_first_sample(arm: Any) -> None:
    tau_ext = np.array([1.0, 0.5])
    stamps = [k * MS for k in range(50)]
    pipe = DynamicsPipeline(arm, PipelineConfig())
    outs = [pipe.on_joint_state(msg) for msg in held_still(stamps, tau_ext)]
    assert pipe.stats.unstamped == 0 and all(o is not None for o in outs)
    np.testing.assert_allclose([o.external_torque for o in outs],
                               observer_closed_form(np.array(stamps) * 1e-9, 0.0, tau_ext), atol=1e-9)


def test_zero_stamps_with_estimated_accelerations_are_skipped_as_unstamped(arm: Any) -> None:
    lines: list[str] = []
    pipe = DynamicsPipeline(arm, PipelineConfig(acceleration_source="estimated"), log=lines.append)
    assert all(pipe.on_joint_state(msg) is None for msg in held_still([0] * 10, np.zeros(2)))
    assert pipe.stats.skipped == {SkipReason.ESTIMATOR_WARMUP: 1, SkipReason.UNSTAMPED: 9}
    assert any("stamped 0" in line for line in lines)
    report = DiagnosticsReporter(Clock()).report(pipe, "ok")
    assert "skipped, as estimated accelerations differentiate over time" in report.message


def test_stamps_nanoseconds_apart_are_not_rounded_together(arm: Any) -> None:
    """At epoch times (1.7e9 s) a float64 of seconds cannot tell 100 ns apart: the observer's time
    must come from the integer stamps (before the fix: every other sample compute_error)."""
    stamps = [1_700_000_000 * 10**9 + k * 100 for k in range(20)]
    pipe = DynamicsPipeline(arm, PipelineConfig())
    outs = [pipe.on_joint_state(msg) for msg in held_still(stamps, np.array([1.0, 0.5]))]
    assert all(o is not None and o.external_torque is not None for o in outs), pipe.stats.skipped


# ---------------------------------------------------------------- huge but finite values


def stream(n: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(q, qd, effort) of n samples of a swinging arm (values of a real magnitude)."""
    return [(rng.uniform(-1, 1, 2), rng.uniform(-2, 2, 2), rng.uniform(-10, 10, 2)) for _ in range(n)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(3, 40), joint=st.integers(0, 1), size=st.floats(160, 308.2), sign=st.sampled_from([-1.0, 1.0]),
       source=st.sampled_from(["zero", "estimated"]))
def test_one_overflowing_velocity_costs_one_sample_and_poisons_nothing(
        arm: Any, at: int, joint: int, size: float, sign: float, source: str) -> None:
    """A velocity of 1e160-1e308, finite, whose dynamics overflow (its square does): that sample is
    skipped as non_finite_output, and every later output equals that of the stream without it
    (before the fix: NaN published, then the observer at 1e306 for the rest of the run)."""
    rng = np.random.default_rng(at)
    samples = stream(50, rng)
    stamps = [10**9 + k * MS for k in range(50)]
    spiked = [list(map(np.copy, s)) for s in samples]
    spiked[at][1][joint] = sign * 10.0**size
    config = PipelineConfig(acceleration_source=source, collision_threshold=(1e9,))
    pipe, clean = DynamicsPipeline(arm, config), DynamicsPipeline(arm, config)
    outs = [pipe.on_joint_state(joint_state(s, *x)) for s, x in zip(stamps, spiked)]
    assert outs[at] is None and pipe.stats.skipped.get(SkipReason.NON_FINITE_OUTPUT) == 1
    expected = [clean.on_joint_state(joint_state(s, *x)) for k, (s, x) in enumerate(zip(stamps, samples)) if k != at]
    for out, ref in zip(outs[:at] + outs[at + 1:], expected):
        assert (out is None) == (ref is None)
        if out is not None and ref is not None:
            assert all_finite(out)
            np.testing.assert_allclose(out.outputs.tau_ff, ref.outputs.tau_ff, rtol=1e-12)
            np.testing.assert_allclose(out.external_torque, ref.external_torque, rtol=1e-9, atol=1e-9)
    assert pipe.collision is None and clean.collision is None


def test_the_issues_spike_of_1e154_on_the_panda_is_skipped() -> None:
    """The issue's case: the Panda moving, one velocity of 1e154 (finite) whose torques overflow.
    Before the fix that sample published NaN and the observer kept 1e306 (a collision for the rest
    of the run); now it is skipped and the rest is the stream without it."""
    from robots import twin
    model = twin("panda_arm").model
    rng = np.random.default_rng(1)
    q, qd = rng.uniform(-1, 1, model.n), rng.uniform(-1, 1, model.n)
    effort = core.rnea(model, q, qd, np.zeros(model.n))
    pipe, clean = DynamicsPipeline(model, PipelineConfig()), DynamicsPipeline(model, PipelineConfig())
    outs, refs = [], []
    for k in range(100):
        v = qd.copy()
        if k == 10:
            v[0] = 1e154
        msg = joint_state(10**9 + k * MS, q, v, effort, model.joint_names)
        outs.append(pipe.on_joint_state(msg))
        if k != 10:
            refs.append(clean.on_joint_state(msg))
    assert outs[10] is None and pipe.stats.skipped == {SkipReason.NON_FINITE_OUTPUT: 1}
    assert all(all_finite(o) for o in outs if o is not None) and pipe.collision is None
    np.testing.assert_allclose([o.external_torque for o in outs[11:]], [r.external_torque for r in refs[10:]],
                               rtol=1e-9, atol=1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(3, 30), component=st.integers(0, 5), size=st.floats(200, 308.2))
def test_one_huge_odometry_twist_poisons_nothing(floating: Any, at: int, component: int, size: float) -> None:
    """An odometry twist of 1e200-1e308 (the issue's second case): nothing non-finite is ever
    published; a sample whose dynamics or observer overflow is skipped as non_finite_output and the
    later samples are those of a stream without it; so is one whose torque is finite but beyond
    effort_limit_factor x the hip's effort limit (a linear velocity along the hip axis; before,
    published: finite, if absurd)."""
    pipe, clean = DynamicsPipeline(floating, PipelineConfig()), DynamicsPipeline(floating, PipelineConfig())
    outs, refs = [], []
    for k in range(40):
        stamp, twist = 10**9 + k * MS, np.full(6, 0.1)
        msg = joint_state(stamp, [0.1 * k], [0.2], [0.5], ["hip"])
        if k == at:
            twist[component] = 10.0**size
        pipe.on_odometry(odometry(stamp, twist))
        outs.append(pipe.on_joint_state(msg))
        if k != at:
            clean.on_odometry(odometry(stamp, twist))
            refs.append(clean.on_joint_state(msg))
    assert all(out is not None and all_finite(out) for k, out in enumerate(outs) if k != at) and counted(pipe)
    assert outs[at] is None  # overflowing, or finite and far beyond the hip's effort limit
    assert pipe.stats.skipped in ({SkipReason.NON_FINITE_OUTPUT: 1}, {SkipReason.EFFORT_OUT_OF_RANGE: 1})
    for out, ref in zip(outs[at + 1:], refs[at:]):
        np.testing.assert_allclose(out.external_torque, ref.external_torque, rtol=1e-9, atol=1e-9)


def test_the_observer_refuses_an_overflowing_sample_and_keeps_its_state(arm: Any) -> None:
    """core.MomentumObserver (compiled and general paths): an overflowing sample raises ValueError
    and the next sample continues from the one before it."""
    effort = pin_gravity(Q) - np.array([1.0, 0.5])
    for batch in (False, True):
        obs, ref = core.MomentumObserver(arm, GAIN), core.MomentumObserver(arm, GAIN)
        lead = (1,) if batch else ()
        def update(o: Any, t: float, v: np.ndarray) -> np.ndarray:
            return o.update(np.full(lead, t) if batch else t, np.broadcast_to(Q, lead + (2,)).copy(),
                            np.broadcast_to(v, lead + (2,)).copy(), np.broadcast_to(effort, lead + (2,)).copy())
        for k in range(5):
            update(obs, k * 1e-3, np.zeros(2))
            update(ref, k * 1e-3, np.zeros(2))
        with pytest.raises(ValueError, match="overflow"):
            update(obs, 5e-3, np.array([1e200, 0.0]))
        np.testing.assert_allclose(update(obs, 6e-3, np.zeros(2)), update(ref, 6e-3, np.zeros(2)), rtol=1e-12)


# --------------------------------------------------------------- exceptions and joint names


def test_an_unexpected_exception_costs_one_sample(arm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any exception in a sample (here a RecursionError from the dynamics) is one skipped sample,
    counted as internal_error and logged with its traceback; the estimator forgets that sample."""
    lines: list[str] = []
    config = PipelineConfig(acceleration_source="estimated")
    pipe, clean = DynamicsPipeline(arm, config, log=lines.append), DynamicsPipeline(arm, config)
    compute = pipe._compute
    def fail_once(*args: Any) -> Any:
        monkeypatch.setattr(pipe, "_compute", compute)
        raise RecursionError("maximum recursion depth exceeded")
    samples = stream(30, np.random.default_rng(3))
    outs = []
    for k, x in enumerate(samples):
        if k == 10:
            monkeypatch.setattr(pipe, "_compute", fail_once)
        outs.append(pipe.on_joint_state(joint_state(10**9 + k * MS, *x)))
    assert outs[10] is None and pipe.stats.skipped[SkipReason.INTERNAL_ERROR] == 1 and counted(pipe)
    assert any("RecursionError" in line and "Traceback" in line for line in lines)
    refs = [clean.on_joint_state(joint_state(10**9 + k * MS, *x)) for k, x in enumerate(samples) if k != 10]
    for out, ref in zip(outs[11:], refs[10:]):
        assert out is not None and ref is not None
        np.testing.assert_allclose(out.outputs.tau_ff, ref.outputs.tau_ff, rtol=1e-12)


def test_a_message_that_is_not_a_joint_state_is_one_skipped_sample(arm: Any) -> None:
    pipe = DynamicsPipeline(arm, PipelineConfig())
    assert pipe.on_joint_state(SimpleNamespace(name=None)) is None
    assert pipe.stats.skipped == {SkipReason.INTERNAL_ERROR: 1}
    assert pipe.on_joint_state(joint_state(MS, Q, np.zeros(2))) is not None


def test_unnamed_entries_are_extras_not_duplicates(arm: Any) -> None:
    """Empty names match no joint: with the model's joints named they are ignored like a
    gripper; without, the sample says the names are missing (before: duplicate_joint)."""
    lines: list[str] = []
    pipe = DynamicsPipeline(arm, PipelineConfig(), log=lines.append)
    out = pipe.on_joint_state(joint_state(MS, [0.0, *Q, 9.0], [0.0, 0.0, 0.0, 9.0], names=["", *JOINTS, ""]))
    assert out is not None
    np.testing.assert_allclose(out.outputs.tau_g, pin_gravity(Q), atol=1e-12)
    assert pipe.on_joint_state(joint_state(2 * MS, [*Q, 0.0], [0.0] * 3, names=["", "", "elbow"])) is None
    assert pipe.stats.skipped == {SkipReason.UNNAMED_JOINT: 1}
    assert "without a name" in lines[0] and "shoulder" in lines[0]
    assert pipe.on_joint_state(joint_state(3 * MS, [*Q, 0.0], [0.0] * 3, names=[*JOINTS, "elbow"])) is None
    assert pipe.stats.skipped[SkipReason.DUPLICATE_JOINT] == 1


@pytest.mark.parametrize("period", [0.0, -1.0, math.inf, math.nan])
def test_a_diagnostics_period_that_is_not_positive_and_finite_is_refused(period: float) -> None:
    with pytest.raises(ValueError, match="diagnostics_period"):
        config_from_parameters({"diagnostics_period": period})
    config_from_parameters({"diagnostics_period": 0.5})


# ------------------------------------------------------------------------- fuzzing the fields

FLOATS = st.one_of(st.floats(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([1e154, -1e154, 1e200, 1.7e308, 0.0]))
NAMES = st.lists(st.sampled_from(JOINTS + ["", "gripper"]), min_size=0, max_size=4)


@st.composite
def joint_states(draw: Any) -> Any:
    names = draw(st.one_of(st.just(JOINTS), NAMES))
    n = len(names)
    lengths = draw(st.one_of(st.just((n, n, n)), st.tuples(*[st.integers(0, 4)] * 3)))
    fields = [draw(st.lists(FLOATS, min_size=m, max_size=m)) for m in lengths]
    stamp = draw(st.one_of(st.integers(0, 2 * 10**9), st.just(0)))
    return joint_state(stamp, *fields, names=names)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(joint_states(), min_size=1, max_size=25), source=st.sampled_from(["zero", "estimated"]))
def test_no_joint_state_makes_the_pipeline_raise_or_publish_garbage(arm: Any, msgs: list[Any], source: str) -> None:
    pipe = DynamicsPipeline(arm, PipelineConfig(acceleration_source=source))
    for msg in msgs:
        out = pipe.on_joint_state(msg)
        assert out is None or all_finite(out)
    assert counted(pipe) and SkipReason.INTERNAL_ERROR not in pipe.stats.skipped
    assert pipe.collision is None or math.isfinite(pipe.collision.peak)


@st.composite
def odometries(draw: Any) -> Any:
    """nav_msgs/Odometry with any values in its pose and twist (NaN, inf, 1e308, a zero quaternion)."""
    xyz = lambda: SimpleNamespace(x=draw(FLOATS), y=draw(FLOATS), z=draw(FLOATS))  # noqa: E731
    quaternion = draw(st.one_of(st.just((0.0, 0.0, 0.0, 1.0)), st.tuples(FLOATS, FLOATS, FLOATS, FLOATS)))
    pose = SimpleNamespace(position=xyz(), orientation=SimpleNamespace(**dict(zip("xyzw", quaternion))))
    stamp = SimpleNamespace(sec=draw(st.integers(0, 2)), nanosec=0)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp), child_frame_id="body", pose=SimpleNamespace(pose=pose),
                           twist=SimpleNamespace(twist=SimpleNamespace(angular=xyz(), linear=xyz())))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(odoms=st.lists(odometries(), min_size=1, max_size=10), stamps=st.lists(st.integers(0, 2), min_size=10, max_size=10))
def test_no_odometry_makes_the_pipeline_raise_or_publish_garbage(floating: Any, odoms: list[Any], stamps: list[int]
                                                                 ) -> None:
    pipe = DynamicsPipeline(floating, PipelineConfig(odom_max_age=10.0))
    for odom, stamp in zip(odoms, stamps):
        assert pipe.on_odometry(odom) in (None, SkipReason.BAD_ODOMETRY)
        out = pipe.on_joint_state(joint_state(stamp * 10**9, [0.3], [0.1], [0.5], ["hip"]))
        assert out is None or all_finite(out)
    assert SkipReason.INTERNAL_ERROR not in pipe.stats.skipped  # every joint state published or skipped:
    assert pipe.stats.received == pipe.stats.published + sum(
        c for r, c in pipe.stats.skipped.items() if r is not SkipReason.BAD_ODOMETRY)


def test_sample_times_report_each_periods_own_tail(arm: Any) -> None:
    """The node's own time per sample in /diagnostics: p50, p99 and max of the samples since the
    previous report (numpy's percentiles of what was added), then none until more come; beyond
    its capacity the latest samples are the ones kept, and all are counted."""
    pipe = DynamicsPipeline(arm, PipelineConfig())
    assert pipe.on_joint_state(held_still([10**9], np.zeros(2))[0]) is not None
    reporter, times = DiagnosticsReporter(Clock()), SampleTimes(capacity=1000)
    microseconds = np.random.default_rng(3).exponential(80.0, 1500) + 20.0
    for us in microseconds:
        times.add(us * 1e-6)
    values = dict(reporter.report(pipe, "ok", times=times).values)
    kept = microseconds[500:]  # the latest 1000
    assert float(values["sample_time_us_p50"]) == pytest.approx(np.median(kept), abs=0.05)
    assert float(values["sample_time_us_p99"]) == pytest.approx(np.percentile(kept, 99), abs=0.05)
    assert float(values["sample_time_us_max"]) == pytest.approx(kept.max(), abs=0.05)
    assert values["sample_time_samples"] == "1500"
    again = dict(reporter.report(pipe, "ok", times=times).values)
    assert math.isnan(float(again["sample_time_us_p99"])) and again["sample_time_samples"] == "0"
    times.add(300e-6)
    assert dict(reporter.report(pipe, "ok", times=times).values)["sample_time_us_max"] == "300.0"
    assert "sample_time_us_p99" not in dict(reporter.report(pipe, "ok").values)  # the node's, not the replay's
