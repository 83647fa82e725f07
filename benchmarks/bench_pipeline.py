"""Per-sample time of the ROS-free pipeline, as the node runs it (target <= 100 us per sample).

For each acceleration source (zero, estimated, reference) and base kind (the 7-DoF Panda arm,
fixed; Solo12 on odometry, floating) it times what the node does for one JointState, without
rclpy: ``DynamicsPipeline.on_joint_state`` (decode, pairing, accelerations, RNEA, gravity, ABA)
plus ``OutputMessageFactory.build`` (the three messages; five for a floating base). Messages
in and out are shaped like rclpy's (see :func:`rclpy_like`). Each sample is timed on its own;
the table gives the median and 90th percentile over ``--samples`` samples after a warm-up, from
the best of ``--repeats`` runs, the medians of on_joint_state and build alone, and the part
spent in the core's rnea/gravity/aba calls (the same calls replayed alone). With rclpy's
classes most of build is their constructors (each builds its default sub-messages, then
type-checks every field), as with the stand-ins here.

The main table runs without the momentum observer; a second table times the same cases with
the observer on and off (on: its update and the external_torque message; thresholds above
the residual, as in normal operation without collisions), median and 99th percentile (of
each sample's fastest run, so that a preemption by another process in one run does not
count), and their ratio (issue 14's budget: at most 1.2).

Run: python benchmarks/bench_pipeline.py [--samples N] [--repeats R]
"""
from __future__ import annotations

import argparse
import array
import re
import time
from typing import Any, Callable, NamedTuple

import numpy as np

import liedyn_ros.pipeline.compute as compute_stage
from liedyn_ros import core
from liedyn_ros.pipeline import (
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
)
from liedyn_ros.robot_data import robots_dir

ROBOTS = robots_dir()
TARGET_S = 100e-6
OBSERVER_BUDGET = 1.2  # the observer may add 20 % to the per-sample time
WARMUP = 200


def seven_dof_panda() -> str:
    """The Panda URDF with its fingers welded: the 7-DoF arm."""
    xml = re.sub(r"<mimic[^>]*/>", "", (ROBOTS / "panda_description/urdf/panda.urdf").read_text())
    return xml.replace('type="prismatic"', 'type="fixed"')


# Solo12's knees-bent stance, front left leg (right legs: HAA mirrored; hind legs: HFE and KFE mirrored)
STANDING = {"HAA": 0.1, "HFE": 0.8, "KFE": -1.6}


def joint_states(model: core.Model, efforts: str, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One second of joint states (q, v, tau), each (rate, n), that bench_ros_latency's probe sends
    in a cycle (efforts ``consistent``), or one state (``random``).

    ``consistent``: what a robot in normal operation sends, so that the node's momentum observer
    sees no collision. A fixed-base arm moves every joint on a 1 Hz sine about the middle of its
    range (it ends where it starts) with tau = rnea(q, v, a); a floating-base robot (odometry at
    rest) stands still on its four feet in STANDING with tau the joint part of constrained_rnea at
    a = 0: the torques that carry its weight through the feet (without a contact model, as in
    the ``solo12`` case, the node sees the ground's reaction as an external wrench on the base:
    that is what it is).
    ``random``: one random state (to repeat), efforts drawn independently of it: the observer's
    residual stays above its threshold and a collision stays open for the whole run (the worst
    case for the node's collision bookkeeping, not the usual one)."""
    count = max(round(rate), 1)
    if efforts == "random":
        rng = np.random.default_rng(0)
        q, v, tau = rng.uniform(-1, 1, model.n), rng.normal(size=model.n), rng.normal(size=model.n)
        return q[None], v[None], tau[None]
    if not model.floating_base:
        t = np.arange(count)[:, None] / count
        w, phase = 2 * np.pi, np.arange(model.n) * 0.9
        middle = np.where(np.isfinite(model.lower + model.upper), (model.lower + model.upper) / 2, 0.0)
        amplitude = np.minimum(0.3, np.where(np.isfinite(model.upper - model.lower),
                                             (model.upper - model.lower) / 4, 0.3))
        q = middle + amplitude * np.sin(w * t + phase)
        v = amplitude * w * np.cos(w * t + phase)
        a = -amplitude * w**2 * np.sin(w * t + phase)
        return q, v, core.rnea(model, q, v, a)
    q = np.zeros(model.n)
    for j, name in enumerate(model.joint_names):
        leg, part = name.split("_")
        side, front = (1.0 if leg[1] == "L" else -1.0), (1.0 if leg[0] == "F" else -1.0)
        q[j] = STANDING[part] * (side if part == "HAA" else front)
    feet = [core.Contact(f"{leg}_FOOT") for leg in ("FL", "FR", "HL", "HR")]
    zero = np.zeros(model.nv)
    tau, _ = core.constrained_rnea(model, q, zero, zero, feet, base_pose=np.eye(4))
    return q[None], np.zeros((1, model.n)), tau[None, 6:]


# ------------------------------------------------------------------ rclpy-shaped messages


def _check(kind: str, value: Any) -> Any:
    """What rosidl's generated setters assert (they run unless Python runs with -O)."""
    if kind == "float":
        assert isinstance(value, float) and not (value < -1.79e308 or value > 1.79e308)
    elif kind == "int":
        assert isinstance(value, int) and -(2**31) <= value < 2**32
    elif kind == "str":
        assert isinstance(value, str)
    elif kind == "float[]":
        # The generated __init__ copies into array.array('d'), which is cheap from one.
        value = array.array("d", value)
    elif kind == "str[]":
        assert not isinstance(value, str) and all(isinstance(v, str) for v in value)
    return value


def rclpy_like(msg_name: str, /, **fields: str | Callable[[], Any]) -> type:
    """A class shaped like rosidl's generated Python message: ``__slots__``, keyword fields
    whose defaults are built on every call (as in ``kwargs.get('header', Header())``), and the
    checks of the generated setters run on every field, so that building output messages
    costs about what it costs in rclpy (a Time() here takes about as long as one written
    like rosidl's generated code, properties and all)."""
    defaults = {"float": float, "int": int, "str": str, "float[]": list, "str[]": list, "list": list}

    def __init__(self: Any, **kwargs: Any) -> None:
        assert set(kwargs) <= set(fields), f"{msg_name}: unknown fields {set(kwargs) - set(fields)}"
        for key, kind in fields.items():
            default = kind if callable(kind) else defaults[kind]
            value = kwargs.get(key, default())
            setattr(self, key, value if callable(kind) else _check(kind, value))

    return type(msg_name, (), {"__slots__": tuple(fields), "__init__": __init__})


Time = rclpy_like("Time", sec="int", nanosec="int")
Duration = rclpy_like("Duration", sec="int", nanosec="int")
Header = rclpy_like("Header", stamp=Time, frame_id="str")
JointState = rclpy_like("JointState", header=Header, name="str[]", position="float[]",
                        velocity="float[]", effort="float[]")
Vector3 = rclpy_like("Vector3", x="float", y="float", z="float")
Point = rclpy_like("Point", x="float", y="float", z="float")
Quaternion = rclpy_like("Quaternion", x="float", y="float", z="float", w="float")
Pose = rclpy_like("Pose", position=Point, orientation=Quaternion)
PoseWithCovariance = rclpy_like("PoseWithCovariance", pose=Pose, covariance="float[]")
Twist = rclpy_like("Twist", linear=Vector3, angular=Vector3)
TwistWithCovariance = rclpy_like("TwistWithCovariance", twist=Twist, covariance="float[]")
Odometry = rclpy_like("Odometry", header=Header, child_frame_id="str", pose=PoseWithCovariance,
                      twist=TwistWithCovariance)
JointTrajectoryPoint = rclpy_like("JointTrajectoryPoint", positions="float[]", velocities="float[]",
                                  accelerations="float[]", effort="float[]", time_from_start=Duration)
JointTrajectory = rclpy_like("JointTrajectory", header=Header, joint_names="str[]", points="list")
Wrench = rclpy_like("Wrench", force=Vector3, torque=Vector3)
WrenchStamped = rclpy_like("WrenchStamped", header=Header, wrench=Wrench)
Accel = rclpy_like("Accel", linear=Vector3, angular=Vector3)
AccelStamped = rclpy_like("AccelStamped", header=Header, accel=Accel)
MultiArrayLayout = rclpy_like("MultiArrayLayout", dim="list", data_offset="int")
Float64MultiArray = rclpy_like("Float64MultiArray", layout=MultiArrayLayout, data="float[]")


def rclpy_like_classes() -> MessageClasses:
    """The node's MessageClasses (``from_modules``), with the stand-ins above."""
    ns = argparse.Namespace
    return MessageClasses.from_modules(
        ns(Time=Time, Duration=Duration),
        ns(Header=Header, Float64MultiArray=Float64MultiArray, MultiArrayLayout=MultiArrayLayout),
        ns(JointState=JointState),
        ns(JointTrajectory=JointTrajectory, JointTrajectoryPoint=JointTrajectoryPoint),
        ns(Vector3=Vector3, Wrench=Wrench, WrenchStamped=WrenchStamped, Accel=Accel,
           AccelStamped=AccelStamped),
    )


def header(stamp_ns: int, frame_id: str) -> Any:
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id)


def floats(values: np.ndarray) -> array.array[float]:
    return array.array("d", values.tolist())


# ------------------------------------------------------------------ inputs


class Inputs(NamedTuple):
    """What the node receives per sample: a JointState, and an Odometry for a floating base."""

    joint_states: list[Any]
    odometry: list[Any] | None


def make_inputs(model: Any, count: int, period_ns: int = 1_000_000) -> Inputs:
    """Smooth joint motion at 1 kHz (the estimator sees a real slope), names reversed plus a
    gripper joint the model lacks (matched by name), efforts present."""
    rng = np.random.default_rng(0)
    n = model.n
    names = list(reversed(model.joint_names)) + ["gripper"]
    t = np.arange(count) * (period_ns * 1e-9)
    phase, amp = rng.uniform(0, np.pi, n + 1), rng.uniform(0.2, 1.0, n + 1)
    q = amp * np.sin(t[:, None] + phase)
    qd = amp * np.cos(t[:, None] + phase)
    effort = rng.uniform(-5, 5, (count, n + 1))
    joint_states = [
        JointState(header=header(k * period_ns, ""), name=names, position=floats(q[k, ::-1]),
                   velocity=floats(qd[k, ::-1]), effort=floats(effort[k, ::-1]))
        for k in range(count)
    ]
    if not model.floating_base:
        return Inputs(joint_states, None)
    zero36 = array.array("d", bytes(36 * 8))
    odometry = []
    for k in range(count):
        w, v = 0.1 * np.sin(t[k] + np.arange(3)), 0.2 * np.cos(t[k] + np.arange(3))
        half = 0.05 * t[k]
        pose = Pose(position=Point(x=0.1 * t[k], y=0.0, z=0.3),
                    orientation=Quaternion(x=0.0, y=0.0, z=float(np.sin(half)), w=float(np.cos(half))))
        twist = Twist(linear=Vector3(x=float(v[0]), y=float(v[1]), z=float(v[2])),
                      angular=Vector3(x=float(w[0]), y=float(w[1]), z=float(w[2])))
        odometry.append(Odometry(
            header=header(k * period_ns, "odom"), child_frame_id=str(model.root_link),
            pose=PoseWithCovariance(pose=pose, covariance=zero36),
            twist=TwistWithCovariance(twist=twist, covariance=zero36)))
    return Inputs(joint_states, odometry)


def reference_trajectory(model: Any) -> Any:
    rng = np.random.default_rng(1)
    n = model.n
    point = JointTrajectoryPoint(positions=floats(rng.uniform(-1, 1, n)),
                                 velocities=floats(rng.uniform(-1, 1, n)),
                                 accelerations=floats(rng.uniform(-1, 1, n)))
    return JointTrajectory(header=header(0, ""), joint_names=list(model.joint_names), points=[point])


# ------------------------------------------------------------------ timing


class CoreRecorder:
    """Stands in for ``liedyn_ros.core`` in the pipeline's compute stage: forwards every call
    and keeps it, so that the core's share can be timed on exactly the calls the pipeline makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        function = getattr(core, name)

        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((function, args, kwargs))
            return function(*args, **kwargs)

        return record


class Timing(NamedTuple):
    median_s: float       # on_joint_state + build
    p90_s: float
    p99_s: float          # of each sample's best total over the repeats (see time_case)
    pipeline_median_s: float  # on_joint_state alone
    build_median_s: float     # build alone
    core_median_s: float      # the core calls of on_joint_state, replayed alone


def time_case(model: Any, source: str, inputs: Inputs, classes: MessageClasses, repeats: int,
              observer: bool = False) -> Timing:
    """Per-sample on_joint_state + build, best of ``repeats``; then the core calls alone."""
    config = PipelineConfig(acceleration_source=source, reference_max_age=0.0, external_torque_observer=observer,
                            collision_threshold=(1e9,))
    factory = OutputMessageFactory(classes, model, config)
    odometry = inputs.odometry
    best: np.ndarray | None = None  # (samples, 2): on_joint_state, build
    totals = []  # per run, each sample's total
    for _ in range(repeats):
        pipe = DynamicsPipeline(model, config)
        pipe.on_reference(reference_trajectory(model))
        per_sample = np.zeros((len(inputs.joint_states), 2))
        clock = time.perf_counter
        for k, msg in enumerate(inputs.joint_states):
            if odometry is not None:
                pipe.on_odometry(odometry[k])  # its own callback in the node: not timed
            started = clock()
            out = pipe.on_joint_state(msg)
            decoded = clock()
            if out is not None:
                factory.build(out)
                per_sample[k] = decoded - started, clock() - decoded
            else:
                per_sample[k, 0] = decoded - started
        expected_outputs = len(per_sample) - config.estimator_min_samples
        if pipe.stats.published < expected_outputs:
            raise RuntimeError(f"{source}: {pipe.stats.published} outputs, skipped {pipe.stats.skipped}")
        per_sample = per_sample[WARMUP:]
        totals.append(per_sample.sum(axis=1))
        if best is None or np.median(per_sample.sum(axis=1)) < np.median(best.sum(axis=1)):
            best = per_sample
    assert best is not None
    total = best.sum(axis=1)
    # p99 of each sample's fastest run: on a shared machine a sample that another process
    # preempted in one run (milliseconds) is not the pipeline's time; one slow in every run is.
    return Timing(float(np.median(total)), float(np.percentile(total, 90)),
                  float(np.percentile(np.min(totals, axis=0), 99)),
                  float(np.median(best[:, 0])), float(np.median(best[:, 1])),
                  time_core_calls(model, config, inputs, repeats))


def time_core_calls(model: Any, config: PipelineConfig, inputs: Inputs, repeats: int) -> float:
    """Median per-sample time of the pipeline's core calls replayed on their own."""
    recorder = CoreRecorder()
    real = compute_stage.core
    compute_stage.core = recorder  # type: ignore[assignment]
    try:
        pipe = DynamicsPipeline(model, config)
        pipe.on_reference(reference_trajectory(model))
        per_sample_calls = []
        for k, msg in enumerate(inputs.joint_states):
            if inputs.odometry is not None:
                pipe.on_odometry(inputs.odometry[k])
            recorder.calls.clear()
            if pipe.on_joint_state(msg) is not None:
                per_sample_calls.append([c for c in recorder.calls if c[0] is not core.pose_from_position_quaternion])
    finally:
        compute_stage.core = real
    per_sample_calls = per_sample_calls[WARMUP:]
    clock, medians = time.perf_counter, []
    for _ in range(repeats):
        per_sample = np.empty(len(per_sample_calls))
        for k, calls in enumerate(per_sample_calls):
            started = clock()
            for function, args, kwargs in calls:
                function(*args, **kwargs)
            per_sample[k] = clock() - started
        medians.append(float(np.median(per_sample)))
    return min(medians)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000, help="samples per run (after warm-up)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; the best is kept")
    parser.add_argument("--outputs", choices=("rclpy", "rosbags"), default="rclpy",
                        help="output message classes: rclpy-shaped stand-ins (the node's) or the "
                             "rosbags typestore's (the replay's)")
    args = parser.parse_args()
    if args.outputs == "rclpy":
        classes = rclpy_like_classes()
    else:
        from rosbags.typesys import Stores, get_typestore
        classes = MessageClasses.from_typestore(get_typestore(Stores.ROS2_HUMBLE))
    robots = {
        "fixed (Panda 7)": core.load_urdf(seven_dof_panda()),
        "floating (Solo12 6+12)": core.load_urdf(
            (ROBOTS / "solo_description/robots/solo12.urdf").read_text(), floating_base=True),
    }
    print(f"per-sample on_joint_state + build ({args.outputs} output classes, rclpy-shaped "
          f"inputs); {args.samples} samples after "
          f"{WARMUP} warm-up, best of {args.repeats}; target <= {TARGET_S * 1e6:.0f} us")
    print(f"{'source':<10} {'base':<24} {'median us':>9} {'p90 us':>7} {'on_js us':>8} "
          f"{'build us':>8} {'core us':>7} {'core %':>6}")
    worst = 0.0
    for base, model in robots.items():
        inputs = make_inputs(model, WARMUP + args.samples)
        for source in ("zero", "estimated", "reference"):
            t = time_case(model, source, inputs, classes, args.repeats)
            worst = max(worst, t.p90_s)
            print(f"{source:<10} {base:<24} {t.median_s * 1e6:9.1f} {t.p90_s * 1e6:7.1f} "
                  f"{t.pipeline_median_s * 1e6:8.1f} {t.build_median_s * 1e6:8.1f} "
                  f"{t.core_median_s * 1e6:7.1f} {100 * t.core_median_s / t.median_s:5.0f}%")
    verdict = "OK" if worst <= TARGET_S else "ABOVE the target"
    print(f"worst p90: {worst * 1e6:.1f} us ({verdict})")
    print_observer_overhead(robots, classes, args)


def print_observer_overhead(robots: dict[str, Any], classes: MessageClasses, args: argparse.Namespace) -> None:
    """Per-sample time with the momentum observer off and on (target: on / off <= 1.2)."""
    print(f"\nmomentum observer: per-sample on_joint_state + build, off vs on; target on/off <= {OBSERVER_BUDGET}")
    print(f"{'source':<10} {'base':<24} {'off med':>8} {'on med':>7} {'ratio':>6} "
          f"{'off p99':>8} {'on p99':>7} {'ratio':>6}")
    worst = 0.0
    for base, model in robots.items():
        inputs = make_inputs(model, WARMUP + args.samples)
        for source in ("zero", "estimated"):
            off, on = (time_case(model, source, inputs, classes, args.repeats, observer=flag) for flag in (False, True))
            ratios = on.median_s / off.median_s, on.p99_s / off.p99_s
            worst = max(worst, *ratios)
            print(f"{source:<10} {base:<24} {off.median_s * 1e6:8.1f} {on.median_s * 1e6:7.1f} {ratios[0]:6.2f} "
                  f"{off.p99_s * 1e6:8.1f} {on.p99_s * 1e6:7.1f} {ratios[1]:6.2f}")
    print(f"worst ratio: {worst:.2f} ({'OK' if worst <= OBSERVER_BUDGET else 'ABOVE the budget'})")


if __name__ == "__main__":
    main()
