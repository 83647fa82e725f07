"""`liedyn-replay` (also `ros2 run liedyn_ros replay`): a thin command line over `run.replay`."""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .errors import ReplayError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .run import ReplayOptions, ReplayReport

# The replay's modules (numpy, scipy, numba) are imported once the arguments are parsed, so that
# --help and argument errors answer at once. Their defaults are therefore repeated here;
# test_cli_startup checks them against SavgolSettings, identify.MIN_SPEED and PARAMETERS.
SG_WINDOW, SG_ORDER, MIN_SPEED = 15, 3, 0.05
# Options that set the node parameter of their name (--observer-gain: observer_gain), over --params'.
PARAMETER_DEFAULTS: dict[str, Any] = {
    "observer_gain": 50.0, "collision_threshold": [10.0], "collision_release": 0.5, "observer_max_gap": 0.1,
    "effort_delay": 0.0,
}
PARAMETER_OPTIONS = tuple(PARAMETER_DEFAULTS)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="liedyn-replay",
        description="Replay ROS 1 / rosbag2 bags through the liedyn dynamics (no ROS install needed): "
        "feedforward, gravity and predicted-acceleration outputs, external torques (momentum observer) "
        "and collision events, residual summary and plots.",
    )
    p.add_argument("bags", nargs="+", type=Path, metavar="BAG",
                   help="rosbag2 directory, .mcap, .db3 or ROS 1 .bag; several are merged in time")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    p.add_argument("--urdf", type=Path, metavar="FILE", help="URDF (default: /robot_description in the bag)")
    p.add_argument("--joint-states-topic", default="/joint_states", metavar="TOPIC")
    p.add_argument("--odom-topic", metavar="TOPIC",
                   help="nav_msgs/Odometry of a floating base (default /odom when the URDF floats)")
    p.add_argument("--acceleration-source", choices=("estimated", "zero"), default="estimated",
                   help="qdd fed to RNEA: Savitzky-Golay derivative of the velocities, or zero")
    p.add_argument("--gravity", nargs=3, type=float, metavar=("GX", "GY", "GZ"),
                   help="world gravity override, e.g. 0 0 0 for a simulation without gravity")
    p.add_argument("--effort-topic", metavar="TOPIC",
                   help="std_msgs/Float64MultiArray of measured/commanded torques, aligned by receive time")
    p.add_argument("--effort-joints", metavar="J1,J2,...",
                   help="joint order of --effort-topic entries (default: the model's joint order)")
    p.add_argument("--effort-delay", type=float, metavar="SECONDS",
                   help="the efforts are SECONDS late against the joint states (negative: early), as the "
                   "time_offset hint suggests: each sample takes the effort recorded SECONDS after its stamp, "
                   "interpolated (default: --params' effort_delay, else 0)")
    p.add_argument("--start", type=float, metavar="S",
                   help="replay from S seconds after the first joint state (its stamp; the plots' time axis)")
    p.add_argument("--end", type=float, metavar="S", help="replay up to S seconds after the first joint state")
    p.add_argument("--params", type=Path, metavar="FILE",
                   help="the node's parameter file (ros__parameters YAML): contacts, gravity, ... as live")
    p.add_argument("--contact-state-topic", default="/contact_state", metavar="TOPIC",
                   help="contact_source topic: the std_msgs array of contact flags (default %(default)s)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="replay each BAG on its own, N in parallel, into DIR/<bag name>/")
    p.add_argument("--sg-window", type=int, default=SG_WINDOW, metavar="W",
                   help="Savitzky-Golay window in samples (odd, default %(default)s)")
    p.add_argument("--sg-order", type=int, default=SG_ORDER, metavar="P",
                   help="Savitzky-Golay polynomial order (default %(default)s)")
    p.add_argument("--identify", action="append", nargs="+", default=[], metavar="WHAT",
                   help="fit 'friction', 'payload LINK', 'inertia', 'armature' (rotor inertia) or 'effort_scale' "
                   "(torque constants, relative to --params' effort_torque_constant) (repeatable) on the first 70%% of "
                   "the samples within --start/--end, validate on the rest; writes DIR/identified.yaml for the node")
    p.add_argument("--identify-min-speed", type=float, default=MIN_SPEED, metavar="V",
                   help="--identify leaves out a joint's rows while it moves slower than V rad/s or m/s "
                   "(at rest it holds any static friction; default %(default)s)")
    p.add_argument("--observer-gain", type=float, metavar="K",
                   help="momentum observer gain [1/s]: the estimate follows the external torque with "
                   f"time constant 1/K (default: --params' observer_gain, else {PARAMETER_DEFAULTS['observer_gain']})")
    p.add_argument("--collision-threshold", type=float, nargs="+", metavar="T",
                   help="external torque [N m] that starts a collision event: one for all joints or one per "
                   "joint in model order (default: --params' collision_threshold, "
                   f"else {PARAMETER_DEFAULTS['collision_threshold']})")
    p.add_argument("--collision-release", type=float, metavar="F",
                   help="an event ends when every joint is below F times its threshold "
                   f"(default: --params' collision_release, else {PARAMETER_DEFAULTS['collision_release']})")
    p.add_argument("--observer-max-gap", type=float, metavar="S",
                   help="the observer starts over after a gap of more than S seconds "
                   f"(default: --params' observer_max_gap, else {PARAMETER_DEFAULTS['observer_max_gap']})")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def options_from_args(args: argparse.Namespace, out: Path, progress: bool, identify_role: str = "split"
                      ) -> ReplayOptions:
    from .accel import SavgolSettings
    from .run import ReplayOptions

    try:
        savgol = SavgolSettings(window=args.sg_window, polyorder=args.sg_order)
    except ValueError as err:
        raise ReplayError(f"--sg-window/--sg-order: {err}") from err
    if args.identify and importlib.util.find_spec("cvxpy") is None:  # before the replay, not after it
        raise ReplayError("--identify needs cvxpy, the consistent fit's solver: pip install 'liedyn_ros[identify]'")
    parameters = {name: getattr(args, name) for name in PARAMETER_OPTIONS if getattr(args, name) is not None}
    joints = tuple(j.strip() for j in args.effort_joints.split(",") if j.strip()) if args.effort_joints else ()
    return ReplayOptions(
        out=out, urdf=args.urdf, joint_states_topic=args.joint_states_topic, odom_topic=args.odom_topic,
        acceleration_source=args.acceleration_source,
        gravity=None if args.gravity is None else tuple(args.gravity),
        effort_topic=args.effort_topic, effort_joints=joints, savgol=savgol, parameters=parameters,
        progress=progress, plots=not args.no_plots, identify=tuple(tuple(w) for w in args.identify),
        identify_min_speed=args.identify_min_speed, identify_role=identify_role,
        start_s=args.start, end_s=args.end, params=args.params, contact_state_topic=args.contact_state_topic,
    )


def print_report(report: ReplayReport, stream: TextIO | None = None) -> None:
    lines = [
        f"replayed {', '.join(report.bags)} -> {report.out}",
        f"joint states: {report.received} read, {report.processed} processed in {report.elapsed_s:.2f} s",
    ]
    if report.skipped:
        lines.append("skipped samples: " + ", ".join(f"{k}={v}" for k, v in sorted(report.skipped.items())))
    for msgtype, why in sorted(report.skipped_types.items()):
        lines.append(f"skipped message type {msgtype}: {why}")
    lines.append("published: " + ", ".join(f"/liedyn/{k}={v}" for k, v in report.published.items()))
    lines += ["", report.table, ""]
    if report.identification is not None:
        from .identify import format_report

        lines += [format_report(report.identification), ""]
    # Last, where the eye lands: what makes the table above mean less than it seems.
    lines += [f"WARNING: {problem}" for problem in report.problems]
    print("\n".join(lines), file=stream or sys.stdout)


def _replay_one(bag: Path, options: ReplayOptions) -> ReplayReport:
    from .run import replay

    return replay([bag], options)


def _separate_outputs(bags: Sequence[Path], out: Path) -> list[Path]:
    """DIR/<bag name>, made unique when two bags share a name."""
    names: list[str] = []
    for bag in bags:
        name = bag.resolve().name.removesuffix(".bag")
        names.append(name if name not in names else f"{name}_{len(names)}")
    return [out / n for n in names]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.jobs is None:
            from .run import replay

            print_report(replay(args.bags, options_from_args(args, args.out, not args.no_progress)))
            return 0
        if args.jobs < 1:
            raise ReplayError(f"--jobs must be >= 1, got {args.jobs}")
        return _run_parallel(args)
    except (ReplayError, OSError) as err:  # a message, never a traceback
        print(f"liedyn-replay: error: {err}", file=sys.stderr)
        return 2


def _run_parallel(args: argparse.Namespace) -> int:
    """Each BAG on its own into DIR/<bag name>/; with --identify, one fit of all of them (the last
    bags validate), written to DIR."""
    from .identify import validation_bags

    outs = _separate_outputs(args.bags, args.out)
    roles = (["validation" if v else "fit" for v in validation_bags(len(args.bags))] if args.identify
             else ["split"] * len(args.bags))
    jobs = [(bag, options_from_args(args, out, progress=False, identify_role=role))
            for bag, out, role in zip(args.bags, outs, roles)]
    reports: list[ReplayReport] = []
    failed = 0
    # spawn, not fork: the parent may already run OpenMP threads (numba, BLAS), and a
    # forked child of such a process aborts.
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_replay_one, bag, opts) for bag, opts in jobs]
        for (bag, _), future in zip(jobs, futures):
            try:
                reports.append(future.result())
                print_report(reports[-1])
            except (ReplayError, OSError, ValueError) as err:
                failed += 1
                where = "" if str(bag) in str(err) else f"{bag}: "  # most messages name their bag
                print(f"liedyn-replay: error: {where}{err}", file=sys.stderr)
    if args.identify and not failed:
        return _pool(args, reports)
    return 1 if failed else 0


def _pool(args: argparse.Namespace, reports: Sequence[ReplayReport]) -> int:
    """The fit of all the bags' normal equations, into DIR (identified.yaml, summary.json)."""
    from .identify import format_report, pool

    parts = [r.identifier for r in reports if r.identifier is not None]
    section = pool(parts, [str(b) for b in args.bags], args.out, plots=not args.no_plots)
    (args.out / "summary.json").write_text(json.dumps({"bags": [str(b) for b in args.bags],
                                                       "identification": section}, indent=2) + "\n")
    print(format_report(section))
    if "error" in section:
        print(f"liedyn-replay: error: {section['error']}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
