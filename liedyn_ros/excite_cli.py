"""`liedyn-excite`: design an excitation trajectory for identification, or check a trajectory file.

    liedyn-excite --urdf robot.urdf --joints j1 j2 ... --period 10 --periods 2 --out DIR
    liedyn-excite --urdf robot.urdf --check DIR/trajectory.yaml

The design is `core.identification.excitation`; this module parses arguments and imports it
afterwards, so that --help and argument errors answer at once. Its defaults are repeated here
(test_excitation checks them against excitation_limits' and the writer's).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ACCELERATION, VELOCITY_SCALE, EFFORT_SCALE, POSITION_MARGIN = 5.0, 0.5, 0.8, 0.05
RATE, CSV_RATE, APPROACH = 10.0, 100.0, 5.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="liedyn-excite",
        description="Design an excitation trajectory (finite Fourier series, best-conditioned base regressor "
        "within the URDF's limits) and write it as a trajectory_msgs/JointTrajectory YAML for a "
        "joint_trajectory_controller, a CSV and design.json; or --check a trajectory file.")
    p.add_argument("--urdf", required=True, type=Path, metavar="FILE")
    p.add_argument("--out", type=Path, metavar="DIR", help="output directory (design)")
    p.add_argument("--check", type=Path, metavar="FILE",
                   help="check a trajectory YAML against the URDF and the limit options instead of designing")
    p.add_argument("--joints", nargs="+", metavar="JOINT", help="the joints to move (default: all)")
    p.add_argument("--hold", nargs=2, action="append", default=[], metavar=("JOINT", "POS"),
                   help="where a joint that does not move stands (default: the middle of its range)")
    p.add_argument("--range", nargs=3, action="append", default=[], metavar=("JOINT", "LO", "HI"),
                   help="narrow a joint's position range (e.g. to keep clear of a table)")
    p.add_argument("--identify", nargs="+", default=["inertia", "friction"], choices=("inertia", "friction", "payload"),
                   help="what the trajectory should excite (default: inertia friction)")
    p.add_argument("--payload-link", metavar="LINK", help="link carrying a payload: excited with --identify payload")
    p.add_argument("--payload-mass", type=float, default=0.0, metavar="KG",
                   help="expected payload mass on --payload-link, for the effort limits (default 0)")
    p.add_argument("--payload-com", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("X", "Y", "Z"),
                   help="its centre of mass in the link frame (m)")
    p.add_argument("--period", type=float, default=10.0, metavar="S", help="Fourier period T_f (default 10 s)")
    p.add_argument("--periods", type=int, default=1, metavar="N", help="periods written (default 1)")
    p.add_argument("--harmonics", type=int, default=5, metavar="L",
                   help="harmonics: bandwidth L / T_f Hz (default 5)")
    p.add_argument("--max-acceleration", type=float, nargs="+", default=[ACCELERATION], metavar="A",
                   help=f"joint acceleration limit(s), rad/s^2 or m/s^2, one or one per joint (default {ACCELERATION})")
    p.add_argument("--velocity-scale", type=float, default=VELOCITY_SCALE, metavar="F",
                   help=f"fraction of the URDF velocity limits used (default {VELOCITY_SCALE})")
    p.add_argument("--effort-scale", type=float, default=EFFORT_SCALE, metavar="F",
                   help=f"fraction of the URDF effort limits used (default {EFFORT_SCALE})")
    p.add_argument("--position-margin", type=float, default=POSITION_MARGIN, metavar="D",
                   help=f"distance kept from the URDF position limits, rad or m (default {POSITION_MARGIN})")
    p.add_argument("--rate", type=float, default=RATE, metavar="HZ", help=f"points per second in the YAML "
                   f"(the controller interpolates between them; default {RATE})")
    p.add_argument("--csv-rate", type=float, default=CSV_RATE, metavar="HZ", help=f"CSV rows per second "
                   f"(default {CSV_RATE})")
    p.add_argument("--approach", type=float, default=APPROACH, metavar="S",
                   help=f"time_from_start of the first point: the controller's move to the start pose (default "
                   f"{APPROACH} s)")
    p.add_argument("--restarts", type=int, default=2, metavar="N", help="random starts of the optimiser (default 2)")
    p.add_argument("--iterations", type=int, default=100, metavar="N",
                   help="optimiser iterations per start (default 100)")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.out is None) == (args.check is None):
        parser.error("give either --out DIR (design) or --check FILE")
    if "payload" in args.identify and not args.payload_link:
        parser.error("--identify payload needs --payload-link")
    try:
        return _run(args)
    except (ValueError, OSError) as e:  # TrajectoryRefused is a ValueError
        print(f"liedyn-excite: {' '.join(str(e).split())}", file=sys.stderr)
        return 1


def _run(args) -> int:
    import numpy as np

    from .core import load_urdf
    from .core.identification import with_payload
    from .core.identification.excitation import design_excitation, excitation_limits, excitation_problem
    from .core.identification.excitation.files import load_trajectory, write_trajectory

    model = load_urdf(args.urdf.read_text())
    if args.payload_link and args.payload_mass > 0:
        model = with_payload(model, args.payload_link, args.payload_mass, args.payload_com)
    moving = args.joints or list(model.joint_names)
    acc = args.max_acceleration[0] if len(args.max_acceleration) == 1 else np.array(args.max_acceleration)
    limits = excitation_limits(model, acceleration=acc, velocity_scale=args.velocity_scale,
                               effort_scale=args.effort_scale, position_margin=args.position_margin,
                               ranges={j: (float(lo), float(hi)) for j, lo, hi in args.range}, moving=moving)
    if args.check:
        traj = load_trajectory(args.check, model, limits)
        print(f"{args.check}: OK, {len(traj.t)} points over {traj.t[-1] - traj.t[0]:.3f} s within the limits, "
              "at rest at both ends")
        return 0
    names = list(model.joint_names)
    hold = None
    if args.hold:
        hold = np.where(np.isfinite(limits.lower + limits.upper), (limits.lower + limits.upper) / 2, 0.0)
        for joint, value in args.hold:
            if joint not in names:
                raise ValueError(f"--hold: unknown joint {joint!r}")
            hold[names.index(joint)] = float(value)
    problem = excitation_problem(model, moving, limits, period=args.period, harmonics=args.harmonics,
                                 identify=tuple(args.identify), payload_link=args.payload_link, q_hold=hold,
                                 seed=args.seed)
    result = design_excitation(problem, restarts=args.restarts, seed=args.seed, maxiter=args.iterations)
    paths = write_trajectory(args.out, result, periods=args.periods, rate=args.rate, csv_rate=args.csv_rate,
                             approach=args.approach)
    random = result.random_condition_numbers
    print(f"condition number {result.condition_number:.4g} over {len(problem.columns)} base columns; random "
          f"Fourier (same period and harmonics): median {np.median(random):.4g} (best {random.min():.4g}); "
          f"single sine {result.single_sine_condition_number:.4g}")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
