"""Tests of the ROS-free pipeline (liedyn_ros.pipeline) with both message flavours.

Every torque and acceleration is checked against the core and against Pinocchio (independent).
Flavours: rosbags typestore classes (the real ROS 2 Humble definitions, numpy fields) and
plain objects shaped like rclpy messages (array.array fields).
"""
from __future__ import annotations

import array
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pinocchio as pin
import pytest
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.pipeline import (
    AccelerationEstimator,
    AccelerationSource,
    BaseState,
    DynamicsPipeline,
    JointSample,
    JointStateArrays,
    JointStateDecoder,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
    SkipReason,
    command_indices,
    compute_outputs,
    config_from_parameters,
    estimate_accelerations,
    pair_odometry,
    prepare_kernels,
)
from liedyn_ros.pipeline.payload import DYNAMICS_PARAMETERS
from liedyn_ros.robot_data import robots_dir

# example-robot-data ships its URDFs in the cmeel prefix of site-packages.
ROBOTS = robots_dir()
PANDA_URDF = ROBOTS / "panda_description/urdf/panda.urdf"
ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
T = TYPESTORE.types
RNG = np.random.default_rng(7)


def arm_only_urdf() -> str:
    """Panda with the fingers welded: a 7-DoF arm, the same model in Pinocchio and the core."""
    xml = PANDA_URDF.read_text()
    xml = re.sub(r"<mimic[^>]*/>", "", xml)
    return xml.replace('type="prismatic"', 'type="fixed"')


ARM_XML = arm_only_urdf()


@pytest.fixture(scope="module")
def arm() -> Any:
    return core.load_urdf(ARM_XML)


@pytest.fixture(scope="module")
def arm_pin() -> tuple[Any, Any]:
    model = pin.buildModelFromXML(ARM_XML)
    return model, model.createData()


# ---------------------------------------------------------------------------- messages


def ros_joint_state(stamp_ns: int, names: list[str], q: Any, qd: Any, effort: Any = ()) -> Any:
    """sensor_msgs/JointState from the rosbags typestore (numpy fields)."""
    sec, nsec = divmod(stamp_ns, 10**9)
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="")
    return T["sensor_msgs/msg/JointState"](
        header=header, name=list(names), position=np.asarray(q, float),
        velocity=np.asarray(qd, float), effort=np.asarray(effort, float),
    )


def rclpy_joint_state(stamp_ns: int, names: list[str], q: Any, qd: Any, effort: Any = ()) -> Any:
    """An object shaped like an rclpy JointState: array.array('d') fields."""
    sec, nsec = divmod(stamp_ns, 10**9)
    header = SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=nsec), frame_id="")
    return SimpleNamespace(
        header=header, name=list(names), position=array.array("d", list(map(float, q))),
        velocity=array.array("d", list(map(float, qd))), effort=array.array("d", list(map(float, effort))),
    )


FLAVOURS = {"rosbags": ros_joint_state, "rclpy": rclpy_joint_state}
MakeJS = Callable[..., Any]


@pytest.fixture(params=sorted(FLAVOURS))
def make_js(request: pytest.FixtureRequest) -> MakeJS:
    return FLAVOURS[request.param]


def trajectory(names: list[str], q: Any, qd: Any = (), qdd: Any = (), stamp_ns: int = 0) -> Any:
    sec, nsec = divmod(stamp_ns, 10**9)
    point = T["trajectory_msgs/msg/JointTrajectoryPoint"](
        positions=np.asarray(q, float), velocities=np.asarray(qd, float),
        accelerations=np.asarray(qdd, float), effort=np.zeros(0),
        time_from_start=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
    )
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="")
    return T["trajectory_msgs/msg/JointTrajectory"](header=header, joint_names=list(names), points=[point])


def shuffled_with_extra(q: np.ndarray, qd: np.ndarray, effort: np.ndarray | None = None):
    """Message arrays in a shuffled order with two extra joints, as a driver may send them."""
    names = list(ARM) + ["gripper_left", "gripper_right"]
    pos = np.concatenate([q, [0.01, np.nan]])      # NaN on an extra joint must not matter
    vel = np.concatenate([qd, [0.0, np.nan]])
    eff = None if effort is None else np.concatenate([effort, [1.0, np.nan]])
    perm = RNG.permutation(len(names))
    return (
        [names[i] for i in perm], pos[perm], vel[perm], () if eff is None else eff[perm],
    )


def random_state(n: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return RNG.uniform(-1.5, 1.5, n), RNG.uniform(-1, 1, n), RNG.uniform(-5, 5, n)


class LogSink:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        self.lines.append(text)


# ---------------------------------------------------------------------------- decoding


def test_decoder_reorders_shuffled_joints_and_ignores_extra(arm: Any, make_js: MakeJS) -> None:
    q, qd, tau = random_state()
    names, pos, vel, eff = shuffled_with_extra(q, qd, tau)
    sample = JointStateDecoder(arm).decode(make_js(1_500_000_123, names, pos, vel, eff))
    assert isinstance(sample, JointSample)
    assert sample.stamp_ns == 1_500_000_123
    np.testing.assert_array_equal(sample.q, q)
    np.testing.assert_array_equal(sample.qd, qd)
    assert sample.effort is not None
    np.testing.assert_array_equal(sample.effort, tau)


def test_decoder_reads_list_fields_and_float32_arrays_by_value(arm: Any) -> None:
    """Fields that are not rclpy's array('d') (lists, float32 arrays) are converted, never
    reinterpreted as bytes."""
    q, qd, tau = random_state()
    names, pos, vel, eff = shuffled_with_extra(q, qd, tau)
    msg = rclpy_joint_state(0, names, pos, vel, eff)
    msg.position = list(msg.position)
    msg.effort = array.array("f", msg.effort)
    sample = JointStateDecoder(arm).decode(msg)
    assert isinstance(sample, JointSample) and sample.effort is not None
    np.testing.assert_array_equal(sample.q, q)
    np.testing.assert_array_equal(sample.qd, qd)
    np.testing.assert_allclose(sample.effort, tau, rtol=1e-6)


def test_decoder_caches_mapping_per_name_tuple(arm: Any) -> None:
    decoder = JointStateDecoder(arm)
    names = list(reversed(ARM))
    first = decoder.indices(names)
    assert decoder.indices(list(names)) is first  # same tuple -> cached array, no rebuild
    assert isinstance(first, np.ndarray)
    np.testing.assert_array_equal(first, np.arange(6, -1, -1))


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda n, p, v, e: (n[1:], p[1:], v[1:], e[1:]), SkipReason.MISSING_JOINT),
        (lambda n, p, v, e: (n, p[:-1], v, e), SkipReason.LENGTH_MISMATCH),
        (lambda n, p, v, e: (n, p, v[:-1], e), SkipReason.LENGTH_MISMATCH),
        (lambda n, p, v, e: (n, p, v, e[:-1]), SkipReason.LENGTH_MISMATCH),
        (lambda n, p, v, e: (n, p, v[:0], e), SkipReason.MISSING_VELOCITY),
        (lambda n, p, v, e: (n, np.where(np.arange(len(p)) == 2, np.nan, p), v, e), SkipReason.NAN),
        (lambda n, p, v, e: (n, p, np.where(np.arange(len(v)) == 0, np.inf, v), e), SkipReason.NAN),
        (lambda n, p, v, e: (n, p, v, np.where(np.arange(len(e)) == 4, np.nan, e)), SkipReason.NAN),
        (lambda n, p, v, e: (n[:-1] + [n[0]], p, v, e), SkipReason.DUPLICATE_JOINT),
    ],
    ids=["missing", "short_position", "short_velocity", "short_effort", "no_velocity",
         "nan_position", "inf_velocity", "nan_effort", "duplicate"],
)
def test_bad_samples_are_skipped_with_reason(arm: Any, make_js: MakeJS, mutate: Any, reason: SkipReason) -> None:
    q, qd, tau = random_state()
    names, pos, vel, eff = mutate(list(ARM), q, qd, tau)
    log = LogSink()
    pipe = DynamicsPipeline(arm, log=log)
    assert JointStateDecoder(arm).decode(make_js(0, names, pos, vel, eff)) is reason
    assert pipe.on_joint_state(make_js(0, names, pos, vel, eff)) is None
    assert pipe.stats.skipped == {reason: 1}
    assert pipe.stats.published == 0
    assert len(log.lines) == 1 and reason.value in log.lines[0]


def test_decode_arrays_equals_decode_per_message(arm: Any, make_js: MakeJS) -> None:
    """A chunk decoded at once gives the rows decode() gives one by one, NaN rows flagged."""
    decoder = JointStateDecoder(arm)
    names = list(reversed(ARM)) + ["gripper"]
    rows = RNG.uniform(-2, 2, (40, 3, len(names)))
    rows[5, 0, 2] = np.nan     # position of a model joint
    rows[9, 2, 0] = np.inf     # effort of a model joint
    rows[12, 1, -1] = np.nan   # velocity of the extra joint: not a reason to skip
    stamps = 10**9 + 2_000_000 * np.arange(40)
    arrays = JointStateArrays(tuple(names), stamps, ("base",) * 40, rows[:, 0], rows[:, 1], rows[:, 2])
    block = decoder.decode_arrays(arrays)
    assert not isinstance(block, SkipReason) and block.effort is not None
    assert np.flatnonzero(~block.finite).tolist() == [5, 9]
    for i in range(40):
        one = decoder.decode(make_js(int(stamps[i]), names, rows[i, 0], rows[i, 1], rows[i, 2]))
        if i in (5, 9):
            assert one is SkipReason.NAN
            continue
        assert isinstance(one, JointSample) and one.effort is not None
        assert one.stamp_ns == block.stamp_ns[i]
        np.testing.assert_array_equal(block.q[i], one.q)
        np.testing.assert_array_equal(block.qd[i], one.qd)
        np.testing.assert_array_equal(block.effort[i], one.effort)
    np.testing.assert_array_equal(block.q, rows[:, 0, 6::-1])  # model order = reversed names


def test_decode_arrays_skips_a_whole_chunk_for_name_or_length_problems(arm: Any) -> None:
    decoder = JointStateDecoder(arm)
    z = lambda m: np.zeros((4, m))  # noqa: E731
    stamps = np.arange(4)
    chunk = lambda names, p, v, e: JointStateArrays(tuple(names), stamps, ("",) * 4, z(p), z(v), z(e))  # noqa: E731
    assert decoder.decode_arrays(chunk(ARM[1:], 6, 6, 6)) is SkipReason.MISSING_JOINT
    assert decoder.decode_arrays(chunk(ARM, 7, 6, 7)) is SkipReason.LENGTH_MISMATCH
    assert decoder.decode_arrays(chunk(ARM, 7, 0, 7)) is SkipReason.MISSING_VELOCITY
    no_effort = decoder.decode_arrays(chunk(ARM, 7, 7, 0))
    assert not isinstance(no_effort, SkipReason) and no_effort.effort is None and no_effort.finite.all()


def test_pair_odometry_rule() -> None:
    state = BaseState(10**9, "base", np.eye(4), np.zeros(6))
    assert pair_odometry(10**9, None, 0.02) is SkipReason.NO_ODOMETRY
    assert pair_odometry(10**9 + 20_000_000, state, 0.02) is state     # exactly odom_max_age later
    assert pair_odometry(10**9 - 20_000_000, state, 0.02) is state     # odometry slightly ahead
    assert pair_odometry(10**9 + 20_000_001, state, 0.02) is SkipReason.STALE_ODOMETRY
    assert pair_odometry(10**9 - 20_000_001, state, 0.02) is SkipReason.STALE_ODOMETRY
    assert pair_odometry(10**9 + 90_000_000, state, 0.1) is state


def test_missing_joint_warning_names_the_joint_and_is_rate_limited(arm: Any) -> None:
    now = [100.0]
    log = LogSink()
    pipe = DynamicsPipeline(arm, PipelineConfig(warn_period=5.0), log=log, clock=lambda: now[0])
    q, qd, _ = random_state()
    msg = ros_joint_state(0, list(ARM[:-1]), q[:-1], qd[:-1])
    for _ in range(10):
        assert pipe.on_joint_state(msg) is None
    assert len(log.lines) == 1 and "panda_joint7" in log.lines[0]
    now[0] += 5.1
    pipe.on_joint_state(msg)
    assert len(log.lines) == 2 and "9 more" in log.lines[1]
    assert pipe.stats.skipped[SkipReason.MISSING_JOINT] == 11


# ---------------------------------------------------------------------------- fixed base


def test_zero_source_matches_core_and_pinocchio(arm: Any, arm_pin: Any, make_js: MakeJS) -> None:
    pm, pd = arm_pin
    pipe = DynamicsPipeline(arm)
    for k in range(5):
        q, qd, tau = random_state()
        names, pos, vel, eff = shuffled_with_extra(q, qd, tau)
        out = pipe.on_joint_state(make_js(10**9 + k, names, pos, vel, eff))
        assert out is not None
        res = out.outputs
        zero = np.zeros(7)
        # against the core
        np.testing.assert_allclose(res.tau_ff, core.rnea(arm, q, qd, zero), atol=1e-12)
        np.testing.assert_allclose(res.tau_g, core.gravity(arm, q), atol=1e-12)
        assert res.qdd_pred is not None
        np.testing.assert_allclose(res.qdd_pred, core.aba(arm, q, qd, tau), atol=1e-9)
        # against Pinocchio
        np.testing.assert_allclose(res.tau_ff, pin.rnea(pm, pd, q, qd, zero), atol=1e-9)
        np.testing.assert_allclose(res.tau_g, pin.computeGeneralizedGravity(pm, pd, q), atol=1e-9)
        np.testing.assert_allclose(res.qdd_pred, pin.aba(pm, pd, q, qd, tau), rtol=1e-7, atol=1e-7)
        assert out.stamp_ns == 10**9 + k
    assert pipe.stats.published == 5 and not pipe.stats.skipped


def test_missing_effort_gives_no_prediction(arm: Any, make_js: MakeJS) -> None:
    q, qd, _ = random_state()
    pipe = DynamicsPipeline(arm)
    out = pipe.on_joint_state(make_js(0, list(ARM), q, qd))
    assert out is not None and out.outputs.qdd_pred is None
    msgs = OutputMessageFactory(MessageClasses.from_typestore(TYPESTORE), arm, pipe.config).build(out)
    assert set(msgs) == {"feedforward_torque", "gravity_torque"}


def massless_tip_urdf() -> str:
    """A 2-joint arm whose second link has no inertial: rnea is defined, forward dynamics is not."""
    inertial = ('<inertial><origin xyz="0.2 0 0"/><mass value="1"/>'
                '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')
    return (f'<robot name="tipless"><link name="base"/><link name="arm">{inertial}</link><link name="tip"/>'
            '<joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>'
            '<limit lower="-3" upper="3" effort="9" velocity="9"/></joint>'
            '<joint name="j2" type="revolute"><parent link="arm"/><child link="tip"/><origin xyz="0.4 0 0"/>'
            '<axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="9" velocity="9"/></joint></robot>')


def test_a_model_without_forward_dynamics_keeps_its_torques(make_js: MakeJS) -> None:
    """aba is undefined (massless tip on a moving joint): the pipeline says so once, at
    prepare_kernels, and goes on publishing rnea and gravity without predictions."""
    model = core.load_urdf(massless_tip_urdf())
    with pytest.raises(core.SingularInertiaError, match="joint 'j2'"):
        prepare_kernels(model, batch=True)
    logs: list[str] = []
    pipe = DynamicsPipeline(model, log=logs.append)
    assert pipe.prepare_kernels() >= 0.0
    assert len(logs) == 1 and "no predicted accelerations" in logs[0] and "'j2'" in logs[0]
    for k in range(3):
        q, qd = np.array([0.3, -0.2 * k]), np.array([0.5, 1.0])
        out = pipe.on_joint_state(make_js(k, ["j1", "j2"], q, qd, [1.0, 0.0]))
        assert out is not None and out.outputs.qdd_pred is None
        np.testing.assert_allclose(out.outputs.tau_ff, core.rnea(model, q, qd, np.zeros(2)), atol=1e-12)
        np.testing.assert_allclose(out.outputs.tau_g, core.gravity(model, q), atol=1e-12)
    assert len(logs) == 1 and pipe.stats.published == 3 and not pipe.stats.skipped


def test_first_sample_finds_a_model_without_forward_dynamics(make_js: MakeJS) -> None:
    """Without prepare_kernels, the first sample with efforts finds the singular inertia itself."""
    logs: list[str] = []
    pipe = DynamicsPipeline(core.load_urdf(massless_tip_urdf()), log=logs.append)
    out = pipe.on_joint_state(make_js(0, ["j1", "j2"], [0.1, 0.2], [0.0, 0.0], [1.0, 0.0]))
    assert out is not None and out.outputs.qdd_pred is None and out.outputs.tau_g is not None
    assert len(logs) == 1 and not pipe.stats.skipped


@pytest.mark.parametrize("floating", [False, True])
def test_prepare_kernels_runs_a_robot_at_rest(arm: Any, floating: bool) -> None:
    """Fixed and floating bases (a base pose, single or batched) pass without an error or a log."""
    model = core.load_urdf(str(ROBOTS / "solo_description/robots/solo12.urdf"), floating_base=True) if floating else arm
    logs: list[str] = []
    for batch in (False, True):
        assert prepare_kernels(model, batch=batch) >= 0.0
    assert DynamicsPipeline(model, log=logs.append).prepare_kernels() >= 0.0 and not logs


def test_estimated_source_differentiates_jittered_velocities(arm: Any, arm_pin: Any, make_js: MakeJS) -> None:
    pm, pd = arm_pin
    q0, qd0, _ = random_state()
    qdd = RNG.uniform(-2, 2, 7)
    cfg = PipelineConfig(acceleration_source="estimated", estimator_window=0.05, estimator_min_samples=3)
    pipe = DynamicsPipeline(arm, cfg)
    stamps = (np.arange(12) * 0.01 + RNG.uniform(-0.003, 0.003, 12)) + 3.0
    outputs = []
    for t in stamps:
        dt = t - stamps[0]
        q, qd = q0 + qd0 * dt + 0.5 * qdd * dt**2, qd0 + qdd * dt
        outputs.append(pipe.on_joint_state(make_js(int(round(t * 1e9)), list(ARM), q, qd)))
    assert outputs[0] is None and outputs[1] is None  # warming up: fewer than 3 samples
    assert pipe.stats.skipped == {SkipReason.ESTIMATOR_WARMUP: 2}
    last = outputs[-1]
    assert last is not None
    dt = stamps[-1] - stamps[0]
    q, qd = q0 + qd0 * dt + 0.5 * qdd * dt**2, qd0 + qdd * dt
    # A least-squares slope is exact on a linear velocity whatever the stamp spacing.
    np.testing.assert_allclose(last.outputs.tau_ff, pin.rnea(pm, pd, q, qd, qdd), atol=1e-6)
    np.testing.assert_allclose(last.outputs.tau_ff, core.rnea(arm, q, qd, qdd), atol=1e-6)


def test_estimator_filters_noise_and_resets_on_time_going_backwards() -> None:
    est = AccelerationEstimator(window_s=0.1, min_samples=3)
    rng = np.random.default_rng(1)
    a = None
    for k in range(50):
        t = 0.01 * k
        a = est.update(int(t * 1e9), np.array([2.0 * t + rng.normal(0, 1e-4)]))
    assert a is not None and abs(a[0] - 2.0) < 0.05
    assert est.update(int(0.1e9), np.array([0.0])) is None  # bag looped: history dropped
    assert est.update(int(0.1e9), np.array([5.0])) is None  # repeated stamp replaces, no slope


def test_estimator_equals_a_direct_least_squares_fit_over_long_runs() -> None:
    """The preallocated window (rows moved to the front, buffer grown, repeated stamps, resets)
    gives the textbook slope over the samples of the window, sample after sample."""
    rng = np.random.default_rng(3)
    window_ns, est = 20_000_000, AccelerationEstimator(0.02, 3)
    stamps: list[int] = []
    values: list[np.ndarray] = []
    t = 10**9
    for k in range(3000):
        if k == 700:
            step = -5_000_000                       # time goes backwards: reset
        elif k == 1500:
            step = 50_000_000                       # a gap wider than the window: reset
        elif 2000 <= k < 2600:
            step = int(rng.integers(10_000, 40_000))  # a fast burst: ~900 samples per window
        else:
            step = int(rng.choice([0, 1_000_000, 1_200_000]))  # 0: a repeated stamp
        t += step
        v = rng.normal(size=4)
        if stamps and (t < stamps[-1] or t - stamps[-1] > window_ns):
            stamps, values = [], []
        elif stamps and t == stamps[-1]:
            stamps.pop(), values.pop()
        stamps.append(t), values.append(v)
        while t - stamps[0] >= window_ns:
            stamps.pop(0), values.pop(0)
        got = est.update(t, v)
        if len(stamps) < 3:
            assert got is None
            continue
        ts = (np.array(stamps) - t) * 1e-9
        expected = np.polyfit(ts, np.array(values), 1)[0]
        assert got is not None
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-6)


def test_estimate_accelerations_batch_equals_streaming() -> None:
    stamps = np.cumsum(RNG.uniform(0.008, 0.012, 40)).astype(float)
    stamps_ns = (stamps * 1e9).astype(np.int64)
    v = np.sin(stamps)[:, None] * np.array([1.0, -2.0])
    batch = estimate_accelerations(stamps_ns, v, 0.05, 3)
    est = AccelerationEstimator(0.05, 3)
    for k in range(40):
        a = est.update(int(stamps_ns[k]), v[k])
        if a is None:
            assert np.isnan(batch[k]).all()
        else:
            np.testing.assert_array_equal(batch[k], a)
    ok = ~np.isnan(batch[:, 0])
    assert ok.sum() >= 35
    # Lags by half the window, so compare with the derivative ~25 ms earlier, coarsely.
    np.testing.assert_allclose(batch[ok, 0], np.cos(stamps[ok] - 0.02), atol=0.05)


def test_reference_source_is_computed_torque_feedforward(arm: Any, arm_pin: Any, make_js: MakeJS) -> None:
    pm, pd = arm_pin
    cfg = PipelineConfig(acceleration_source=AccelerationSource.REFERENCE, reference_max_age=0.5)
    pipe = DynamicsPipeline(arm, cfg)
    q, qd, tau = random_state()
    assert pipe.on_joint_state(make_js(10**9, list(ARM), q, qd, tau)) is None
    assert pipe.stats.skipped == {SkipReason.NO_REFERENCE: 1}

    q_ref, qd_ref, qdd_ref = random_state()
    perm = RNG.permutation(7)
    names = [ARM[i] for i in perm] + ["gripper"]
    pipe.on_reference(trajectory(names, np.append(q_ref[perm], 0.0), np.append(qd_ref[perm], 0.0),
                                 np.append(qdd_ref[perm], 0.0)))
    out = pipe.on_joint_state(make_js(10**9 + 1000, list(ARM), q, qd, tau))
    assert out is not None
    np.testing.assert_allclose(out.outputs.tau_ff, pin.rnea(pm, pd, q_ref, qd_ref, qdd_ref), atol=1e-9)
    # Gravity and the prediction stay at the measured state.
    np.testing.assert_allclose(out.outputs.tau_g, pin.computeGeneralizedGravity(pm, pd, q), atol=1e-9)
    np.testing.assert_allclose(out.outputs.qdd_pred, pin.aba(pm, pd, q, qd, tau), rtol=1e-7, atol=1e-7)

    # The zero-stamped reference was dated by the last joint state (1 s); 0.6 s later it is stale.
    assert pipe.on_joint_state(make_js(int(1.6e9), list(ARM), q, qd, tau)) is None
    assert pipe.stats.skipped[SkipReason.STALE_REFERENCE] == 1


def test_reference_positions_only_means_zero_velocity_and_acceleration(arm: Any, arm_pin: Any) -> None:
    pm, pd = arm_pin
    pipe = DynamicsPipeline(arm, PipelineConfig(acceleration_source="reference"))
    q, qd, _ = random_state()
    pipe.on_reference(trajectory(list(ARM), q))
    out = pipe.on_joint_state(ros_joint_state(5, list(ARM), q, qd))
    assert out is not None
    np.testing.assert_allclose(out.outputs.tau_ff, pin.computeGeneralizedGravity(pm, pd, q), atol=1e-9)


@pytest.mark.parametrize(
    "msg",
    [
        trajectory(list(ARM[:-1]), np.zeros(6)),                     # missing joint
        trajectory(list(ARM), np.zeros(7), np.zeros(3)),              # length mismatch
        trajectory(list(ARM), np.full(7, np.nan)),                    # NaN
    ],
    ids=["missing", "length", "nan"],
)
def test_bad_reference_is_rejected_and_counted(arm: Any, msg: Any) -> None:
    pipe = DynamicsPipeline(arm, PipelineConfig(acceleration_source="reference"))
    assert pipe.on_reference(msg) is SkipReason.BAD_REFERENCE
    assert pipe.stats.skipped == {SkipReason.BAD_REFERENCE: 1}
    q, qd, _ = random_state()
    assert pipe.on_joint_state(ros_joint_state(0, list(ARM), q, qd)) is None  # never a stale torque
    assert pipe.stats.skipped[SkipReason.NO_REFERENCE] == 1


def test_core_rejection_is_a_counted_skip_not_a_crash(arm: Any) -> None:
    log = LogSink()
    pipe = DynamicsPipeline(arm, log=log)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("q: out of this world")

    import liedyn_ros.pipeline.compute as pipeline_module
    original = pipeline_module.core
    pipeline_module.core = SimpleNamespace(rnea=refuse, gravity=refuse, aba=refuse)  # type: ignore[assignment]
    try:
        q, qd, _ = random_state()
        assert pipe.on_joint_state(ros_joint_state(0, list(ARM), q, qd)) is None
    finally:
        pipeline_module.core = original
    assert pipe.stats.skipped == {SkipReason.COMPUTE_ERROR: 1}
    assert "out of this world" in log.lines[0]


# ---------------------------------------------------------------------------- batch


def test_compute_outputs_batch_equals_per_sample_and_handles_missing_efforts(arm: Any, arm_pin: Any) -> None:
    pm, pd = arm_pin
    N = 6
    q, qd = RNG.uniform(-1, 1, (N, 7)), RNG.uniform(-1, 1, (N, 7))
    a, effort = RNG.uniform(-1, 1, (N, 7)), RNG.uniform(-3, 3, (N, 7))
    effort[2] = np.nan  # a sample without efforts
    res = compute_outputs(arm, q, qd, a, effort)
    assert res.tau_ff.shape == (N, 7) and res.qdd_pred is not None
    for i in range(N):
        row = res.row(i)
        np.testing.assert_allclose(row.tau_ff, pin.rnea(pm, pd, q[i], qd[i], a[i]), atol=1e-9)
        np.testing.assert_allclose(row.tau_g, pin.computeGeneralizedGravity(pm, pd, q[i]), atol=1e-9)
        single = compute_outputs(arm, q[i], qd[i], a[i], None if i == 2 else effort[i])
        np.testing.assert_allclose(row.tau_ff, single.tau_ff, atol=1e-12)
        if i == 2:
            assert np.isnan(row.qdd_pred).all() and single.qdd_pred is None
        else:
            np.testing.assert_allclose(row.qdd_pred, pin.aba(pm, pd, q[i], qd[i], effort[i]), rtol=1e-7, atol=1e-7)
    assert compute_outputs(arm, q, qd, a, None).qdd_pred is None


def test_mimic_joints_follow_their_leader(make_js: MakeJS) -> None:
    """Full Panda: finger_joint2 mimics finger_joint1. The message may carry it (ignored)."""
    model = core.load_urdf(str(PANDA_URDF))
    assert "panda_finger_joint2" not in model.joint_names and model.n == 8
    pm = pin.buildModelFromUrdf(str(PANDA_URDF))  # treats the mimic joint as independent
    pd = pm.createData()
    pin_names = [pm.names[i] for i in range(1, pm.njoints)]
    q, qd, _ = random_state(8)
    q[7] = 0.02
    names = list(model.joint_names) + ["panda_finger_joint2"]
    out = DynamicsPipeline(model).on_joint_state(
        make_js(0, names, np.append(q, 123.0), np.append(qd, -5.0))  # bogus follower values
    )
    assert out is not None
    # Pinocchio with the follower set from its leader; the follower's force adds to the leader's.
    idx = {name: i for i, name in enumerate(model.joint_names)}
    leader = [idx.get(name, idx["panda_finger_joint1"]) for name in pin_names]
    tau_pin = pin.rnea(pm, pd, q[leader], qd[leader], np.zeros(9))
    expected = np.zeros(8)
    np.add.at(expected, leader, tau_pin)
    np.testing.assert_allclose(out.outputs.tau_ff, expected, atol=1e-9)
    np.testing.assert_allclose(out.outputs.tau_ff, core.rnea(model, q, qd, np.zeros(8)), atol=1e-12)


# ---------------------------------------------------------------------------- output messages


def rclpy_like_classes() -> MessageClasses:
    """Stand-ins enforcing what rclpy's generated setters enforce: array.array('d') or a
    sequence of Python floats for float64[], float for float64, all fields as keywords."""

    def make(name: str, fields: dict[str, Any]) -> type:
        def __init__(self: Any, **kwargs: Any) -> None:
            assert set(kwargs) <= set(fields), f"{name}: unknown fields {set(kwargs) - set(fields)}"
            for key, kind in fields.items():
                value = kwargs.get(key)
                if kind == "float[]":
                    assert isinstance(value, array.array) and value.typecode == "d", f"{name}.{key}"
                elif kind == "float":
                    assert type(value) is float, f"{name}.{key} must be a Python float"
                setattr(self, key, value)
        return type(name, (), {"__init__": __init__})

    any_ = "any"
    return MessageClasses.from_modules(
        SimpleNamespace(Time=make("Time", {"sec": any_, "nanosec": any_}),
                        Duration=make("Duration", {"sec": any_, "nanosec": any_})),
        SimpleNamespace(Header=make("Header", {"stamp": any_, "frame_id": any_}),
                        Float64MultiArray=make("Float64MultiArray", {"layout": any_, "data": "float[]"}),
                        MultiArrayLayout=make("MultiArrayLayout", {"dim": any_, "data_offset": any_})),
        SimpleNamespace(JointState=make("JointState", {"header": any_, "name": any_, "position": "float[]",
                                                       "velocity": "float[]", "effort": "float[]"})),
        SimpleNamespace(JointTrajectory=make("JointTrajectory", {"header": any_, "joint_names": any_, "points": any_}),
                        JointTrajectoryPoint=make("JointTrajectoryPoint", {
                            "positions": "float[]", "velocities": "float[]", "accelerations": "float[]",
                            "effort": "float[]", "time_from_start": any_})),
        SimpleNamespace(Vector3=make("Vector3", {"x": "float", "y": "float", "z": "float"}),
                        Wrench=make("Wrench", {"force": any_, "torque": any_}),
                        WrenchStamped=make("WrenchStamped", {"header": any_, "wrench": any_}),
                        Accel=make("Accel", {"linear": any_, "angular": any_}),
                        AccelStamped=make("AccelStamped", {"header": any_, "accel": any_})),
    )


@pytest.mark.parametrize("flavour", ["rosbags", "rclpy"])
def test_output_messages_carry_the_results(arm: Any, arm_pin: Any, flavour: str) -> None:
    pm, pd = arm_pin
    cfg = PipelineConfig(publish_effort_command=True, command_joints=("panda_joint7", "panda_joint1"))
    classes = MessageClasses.from_typestore(TYPESTORE) if flavour == "rosbags" else rclpy_like_classes()
    factory = OutputMessageFactory(classes, arm, cfg)
    q, qd, tau = random_state()
    stamp = 1_700_000_000_123_456_789
    out = DynamicsPipeline(arm, cfg).on_joint_state(FLAVOURS[flavour](stamp, list(ARM), q, qd, tau))
    assert out is not None
    msgs = factory.build(out)
    assert set(msgs) == {"feedforward_torque", "gravity_torque", "predicted_acceleration", "effort_command",
                         "external_torque"}  # zero at the first sample: the observer starts there
    assert not np.any(msgs["external_torque"].effort)
    ff, grav, acc, cmd = (msgs[k] for k in ("feedforward_torque", "gravity_torque",
                                            "predicted_acceleration", "effort_command"))
    for m in (ff, grav, acc):
        assert (m.header.stamp.sec, m.header.stamp.nanosec) == (1_700_000_000, 123_456_789)
    assert list(ff.name) == list(ARM) and list(acc.joint_names) == list(ARM)
    np.testing.assert_allclose(ff.effort, pin.rnea(pm, pd, q, qd, np.zeros(7)), atol=1e-9)
    np.testing.assert_allclose(grav.effort, pin.computeGeneralizedGravity(pm, pd, q), atol=1e-9)
    assert len(ff.position) == 0 and len(ff.velocity) == 0
    assert len(acc.points) == 1
    np.testing.assert_allclose(acc.points[0].accelerations, pin.aba(pm, pd, q, qd, tau), rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(cmd.data, np.asarray(ff.effort)[[6, 0]], atol=0)
    if flavour == "rosbags":  # the typestore can serialize exactly what the replay writes
        for m in msgs.values():
            raw = TYPESTORE.serialize_cdr(m, m.__msgtype__)
            back = TYPESTORE.deserialize_cdr(raw, m.__msgtype__)
            assert type(back) is type(m)


def test_publish_switches(arm: Any) -> None:
    cfg = PipelineConfig(publish_feedforward=False, publish_predicted_acceleration=False,
                         external_torque_observer=False)
    q, qd, tau = random_state()
    out = DynamicsPipeline(arm, cfg).on_joint_state(ros_joint_state(0, list(ARM), q, qd, tau))
    assert out is not None
    assert set(OutputMessageFactory(MessageClasses.from_typestore(TYPESTORE), arm, cfg).build(out)) == {
        "gravity_torque"
    }


# ---------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"acceleration_source": "measured"}, "acceleration_source: 'measured' is not one of zero"),
        ({"odom_max_age": 0.0}, "odom_max_age"),
        ({"odom_max_age": float("nan")}, "odom_max_age"),
        ({"estimator_window": -1.0}, "estimator_window"),
        ({"estimator_min_samples": 1}, "estimator_min_samples"),
        ({"reference_max_age": float("inf")}, "reference_max_age"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PipelineConfig(**kwargs)


def test_unknown_command_joint_is_an_error(arm: Any) -> None:
    with pytest.raises(ValueError, match=r"command_joints: \['elbow'\]"):
        command_indices(arm.joint_names, ["panda_joint1", "elbow"])
    with pytest.raises(ValueError, match="command_joints"):
        OutputMessageFactory(MessageClasses.from_typestore(TYPESTORE), arm,
                             PipelineConfig(command_joints=("nope",)))


# ---------------------------------------------------------------------------- floating base


@pytest.fixture(scope="module")
def floating() -> Any:
    return core.load_urdf(ARM_XML, floating_base=True)


@pytest.fixture(scope="module")
def floating_pin() -> tuple[Any, Any]:
    model = pin.buildModelFromXML(ARM_XML, pin.JointModelFreeFlyer())
    return model, model.createData()


def odometry(flavour: str, stamp_ns: int, p: Any, quat_xyzw: Any, twist: Any, child: str = "panda_link0") -> Any:
    """nav_msgs/Odometry; ``twist`` is (omega, v) as in CONVENTIONS, the message has linear first."""
    sec, nsec = divmod(stamp_ns, 10**9)
    if flavour == "rosbags":
        V3, Pt, Q = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Point"], T["geometry_msgs/msg/Quaternion"]
        header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="odom")
        pose = T["geometry_msgs/msg/PoseWithCovariance"](
            pose=T["geometry_msgs/msg/Pose"](position=Pt(x=p[0], y=p[1], z=p[2]),
                                             orientation=Q(x=quat_xyzw[0], y=quat_xyzw[1], z=quat_xyzw[2], w=quat_xyzw[3])),
            covariance=np.zeros(36))
        tw = T["geometry_msgs/msg/TwistWithCovariance"](
            twist=T["geometry_msgs/msg/Twist"](linear=V3(x=twist[3], y=twist[4], z=twist[5]),
                                               angular=V3(x=twist[0], y=twist[1], z=twist[2])),
            covariance=np.zeros(36))
        return T["nav_msgs/msg/Odometry"](header=header, child_frame_id=child, pose=pose, twist=tw)
    ns = SimpleNamespace
    return ns(
        header=ns(stamp=ns(sec=sec, nanosec=nsec), frame_id="odom"), child_frame_id=child,
        pose=ns(pose=ns(position=ns(x=p[0], y=p[1], z=p[2]),
                        orientation=ns(x=quat_xyzw[0], y=quat_xyzw[1], z=quat_xyzw[2], w=quat_xyzw[3])),
                covariance=array.array("d", [0.0] * 36)),
        twist=ns(twist=ns(linear=ns(x=twist[3], y=twist[4], z=twist[5]),
                          angular=ns(x=twist[0], y=twist[1], z=twist[2])),
                 covariance=array.array("d", [0.0] * 36)),
    )


def random_base() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    quat = RNG.normal(size=4)
    return RNG.uniform(-1, 1, 3), quat / np.linalg.norm(quat), RNG.uniform(-1, 1, 6)


@pytest.mark.parametrize("flavour", ["rosbags", "rclpy"])
def test_floating_base_matches_pinocchio_free_flyer(floating: Any, floating_pin: Any, flavour: str) -> None:
    pm, pd = floating_pin
    cfg = PipelineConfig(odom_max_age=0.02)
    pipe = DynamicsPipeline(floating, cfg)
    factory = OutputMessageFactory(
        MessageClasses.from_typestore(TYPESTORE) if flavour == "rosbags" else rclpy_like_classes(), floating, cfg)
    p, quat, twist = random_base()
    q, qd, tau = random_state()
    assert pipe.on_odometry(odometry(flavour, 2 * 10**9 - 5_000_000, p, quat, twist)) is None
    names, pos, vel, eff = shuffled_with_extra(q, qd, tau)
    out = pipe.on_joint_state(FLAVOURS[flavour](2 * 10**9, names, pos, vel, eff))
    assert out is not None
    res = out.outputs

    # Pinocchio free-flyer: q = [p, quat xyzw, q], v = [v, omega, qd], forces (f, m).
    q_pin = np.concatenate([p, quat, q])
    v_pin = np.concatenate([twist[3:], twist[:3], qd])
    tau_pin = pin.rnea(pm, pd, q_pin, v_pin, np.zeros(13))
    np.testing.assert_allclose(res.tau_ff, tau_pin[6:], atol=1e-9)
    np.testing.assert_allclose(res.base_wrench, np.concatenate([tau_pin[3:6], tau_pin[:3]]), atol=1e-9)
    g_pin = pin.computeGeneralizedGravity(pm, pd, q_pin)
    np.testing.assert_allclose(res.tau_g, g_pin[6:], atol=1e-9)
    acc_pin = pin.aba(pm, pd, q_pin, v_pin, np.concatenate([np.zeros(6), tau]))
    np.testing.assert_allclose(res.qdd_pred, acc_pin[6:], rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(res.base_acc_pred, np.concatenate([acc_pin[3:6], acc_pin[:3]]), rtol=1e-7, atol=1e-7)

    # and against the core with the pose helper
    pose = core.pose_from_position_quaternion(p, quat)
    v = np.concatenate([twist, qd])
    full = core.rnea(floating, q, v, np.zeros(13), base_pose=pose)
    np.testing.assert_allclose(np.concatenate([res.base_wrench, res.tau_ff]), full, atol=1e-12)

    msgs = factory.build(out)
    assert set(msgs) == {"feedforward_torque", "gravity_torque", "predicted_acceleration",
                         "base_wrench", "predicted_base_acceleration", "external_torque"}
    w, a = msgs["base_wrench"], msgs["predicted_base_acceleration"]
    assert w.header.frame_id == "panda_link0" and a.header.frame_id == "panda_link0"
    assert (w.header.stamp.sec, w.header.stamp.nanosec) == (2, 0)
    f, m = w.wrench.force, w.wrench.torque
    np.testing.assert_allclose([m.x, m.y, m.z, f.x, f.y, f.z], res.base_wrench, atol=0)
    ang, lin = a.accel.angular, a.accel.linear
    np.testing.assert_allclose([ang.x, ang.y, ang.z, lin.x, lin.y, lin.z], res.base_acc_pred, atol=0)


def test_floating_base_needs_fresh_odometry(floating: Any) -> None:
    pipe = DynamicsPipeline(floating, PipelineConfig(odom_max_age=0.02))
    q, qd, _ = random_state()
    js = lambda t: ros_joint_state(t, list(ARM), q, qd)  # noqa: E731
    assert pipe.on_joint_state(js(10**9)) is None
    p, quat, twist = random_base()
    pipe.on_odometry(odometry("rosbags", 10**9, p, quat, twist))
    assert pipe.on_joint_state(js(10**9 + 20_000_000)) is not None   # exactly odom_max_age
    assert pipe.on_joint_state(js(10**9 + 20_000_001)) is None       # older than that
    assert pipe.on_joint_state(js(10**9 - 30_000_000)) is None       # odometry far ahead
    assert pipe.stats.skipped == {SkipReason.NO_ODOMETRY: 1, SkipReason.STALE_ODOMETRY: 2}


def test_odometry_frame_mismatch_warns_once(floating: Any) -> None:
    log = LogSink()
    pipe = DynamicsPipeline(floating, log=log)
    p, quat, twist = random_base()
    for _ in range(3):
        assert pipe.on_odometry(odometry("rclpy", 0, p, quat, twist, child="base_footprint")) is None
    assert len(log.lines) == 1 and "base_footprint" in log.lines[0] and "panda_link0" in log.lines[0]
    # base_link overrides the expected frame
    log2 = LogSink()
    pipe2 = DynamicsPipeline(floating, PipelineConfig(base_link="base_footprint"), log=log2)
    pipe2.on_odometry(odometry("rclpy", 0, p, quat, twist, child="base_footprint"))
    assert log2.lines == []


@pytest.mark.parametrize("quat, twist", [
    ((0.0, 0.0, 0.0, 0.0), np.zeros(6)),          # default-constructed quaternion
    ((0.0, 0.0, 0.0, 1.0), np.full(6, np.nan)),   # NaN twist
])
def test_bad_odometry_is_rejected(floating: Any, quat: Any, twist: Any) -> None:
    pipe = DynamicsPipeline(floating)
    assert pipe.on_odometry(odometry("rosbags", 0, np.zeros(3), quat, twist)) is SkipReason.BAD_ODOMETRY
    assert pipe.stats.skipped == {SkipReason.BAD_ODOMETRY: 1}
    q, qd, _ = random_state()
    assert pipe.on_joint_state(ros_joint_state(0, list(ARM), q, qd)) is None
    assert pipe.stats.skipped[SkipReason.NO_ODOMETRY] == 1


def test_floating_base_estimated_acceleration_includes_the_base(floating: Any, floating_pin: Any) -> None:
    """The estimator differentiates the whole v = [V_base ; qd] component-wise (CONVENTIONS)."""
    pm, pd = floating_pin
    pipe = DynamicsPipeline(floating, PipelineConfig(acceleration_source="estimated", odom_max_age=0.02))
    p, quat, twist0 = random_base()
    q, qd0, _ = random_state()
    acc = RNG.uniform(-1, 1, 13)
    out = None
    for k in range(6):
        t = 0.01 * k
        v = np.concatenate([twist0, qd0]) + acc * t
        pipe.on_odometry(odometry("rosbags", 10**9 + int(t * 1e9), p, quat, v[:6]))
        out = pipe.on_joint_state(ros_joint_state(10**9 + int(t * 1e9), list(ARM), q, v[6:]))
    assert out is not None
    v_pin = np.concatenate([v[3:6], v[:3], v[6:]])
    a_pin = np.concatenate([acc[3:6], acc[:3], acc[6:]])
    tau_pin = pin.rnea(pm, pd, np.concatenate([p, quat, q]), v_pin, a_pin)
    np.testing.assert_allclose(out.outputs.tau_ff, tau_pin[6:], atol=1e-6)
    np.testing.assert_allclose(out.outputs.base_wrench, np.concatenate([tau_pin[3:6], tau_pin[:3]]), atol=1e-6)


# ---------------------------------------------------------------------------- shipped config

REPO = Path(__file__).resolve().parents[1]
NODE_ONLY = {"robot_description", "floating_base", "strict_urdf", "gravity", "diagnostics_period"} | set(DYNAMICS_PARAMETERS)


def read_ros_parameters(path: Path) -> dict[str, Any]:
    """The ros__parameters of a node parameter file, read as the replay's --params reads it."""
    from liedyn_ros.pipeline import load_parameter_file
    return load_parameter_file(path).values


@pytest.mark.parametrize("name", ["dynamics.yaml", "floating_base.yaml", "solo12_contacts.yaml"])
def test_config_files_are_valid_pipeline_configs(name: str) -> None:
    values = read_ros_parameters(REPO / "config" / name)
    pipeline_keys = set(PipelineConfig.__dataclass_fields__)
    assert set(values) <= pipeline_keys | NODE_ONLY, set(values) - pipeline_keys - NODE_ONLY
    config = config_from_parameters({k: v for k, v in values.items() if k in pipeline_keys})  # raises on a bad value
    assert len(values["gravity"]) == 3 and all(isinstance(g, float) for g in values["gravity"])
    if name == "dynamics.yaml":  # the documented defaults are the pipeline's defaults
        assert config == PipelineConfig()
        assert {k: values[k] for k in DYNAMICS_PARAMETERS} == {k: d for k, (d, _) in DYNAMICS_PARAMETERS.items()}
