"""The contact-aware momentum observer and contact_source observer on a Go2 simulated by MuJoCo
(test/go2_sim.py): standing, pushed on the trunk, trotting in place, pushed again.

Every sample goes through the replay's observer path (ExternalTorque, contacts at the four feet,
contact_source observer, no foot sensors), the first --node-samples also through the node's
(DynamicsPipeline: the same states and events); printed:
- each push: the first event after it starts (delay, its coordinate) and the estimated base force
  beyond the feet against MuJoCo's J^T F (mean over the push's second half);
- events other than the pushes (the ground must give none);
- per touch-down and lift-off of MuJoCo's feet, the delay of the observer's state;
- the contact-consistent torques with the observer's states (forces closest to the efforts,
  MuJoCo's accelerations) against the efforts, away from the switches and the pushes.

    python benchmarks/bench_legged_observer.py [--duration 8]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
import go2_sim  # noqa: E402
from legged_eval import Evaluation, evaluate, run_node, run_replay  # noqa: E402

# (the trunk pushes and the contact check: see test/legged_eval.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--gain", type=float, default=200.0)
    parser.add_argument("--node-samples", type=int, default=4000, help="samples also run through the node's pipeline")
    args = parser.parse_args()
    d = args.duration
    pushes = (go2_sim.Push(1.5, 0.15, (0.0, 60.0, 0.0)), go2_sim.Push(d - 2.0, 0.15, (50.0, 0.0, 0.0)))
    trot = (2.5, d - 0.5)
    started = time.perf_counter()
    rec = go2_sim.simulate(d, pushes, trot=trot)
    print(f"MuJoCo: {len(rec.t)} steps ({d} s at {1 / go2_sim.TIMESTEP:.0f} Hz) in {time.perf_counter() - started:.1f} s; "
          f"trot in place {trot[0]}-{trot[1]} s; pushes {[(p.start, p.force) for p in pushes]}")
    started = time.perf_counter()
    replay = run_replay(rec, args.gain)
    print(f"replay's observer path (ExternalTorque, blocks of 1000 samples): {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    node = run_node(rec, args.gain, args.node_samples)
    k = len(node.state)
    print(f"node's pipeline on the first {k} samples ({time.perf_counter() - started:.1f} s): contact states identical "
          f"to the replay's: {np.array_equal(node.state, replay.state[:k])}; base force beyond the feet max |diff| "
          f"{np.abs(node.base - replay.base[:k]).max():.1e} N; events {[e[:2] for e in node.events]} vs "
          f"{[e[:2] for e in replay.events if e[0] < rec.t[k - 1]]}")
    report(evaluate(rec, replay, pushes))


def report(ev: Evaluation) -> None:
    for p in ev.pushes:
        print(f"push {p.force} N at {p.start:.3f} s: event '{p.name}' after {p.delay_ms:.1f} ms; "
              f"|f| estimated {p.estimated:.2f} N vs J^T F {p.applied:.2f} N ({p.error_pct:+.1f} %); "
              f"wrench error {p.wrench_error_pct:.1f} % of |J^T F|")
    print(f"other events: {ev.other_events}")
    for kind, delays in (("touch-down", ev.touchdown_ms), ("lift-off", ev.liftoff_ms)):
        d = np.abs(np.asarray(delays))
        print(f"{kind}: {len(d)} switches, observer state delay |dt| mean {d.mean():.1f} ms, max {d.max():.1f} ms, "
              f"within 10 ms: {(d <= 10).mean() * 100:.0f} %")
    print(f"spurious switches of the observer's state: {ev.spurious}")
    print(f"contact-consistent torques vs efforts away from switches (+-{ev.margin_ms:.0f} ms) and pushes: "
          f"{ev.samples} samples, |tau - effort| / |effort| median {ev.torque_median_pct:.3f} %, "
          f"99th percentile {ev.torque_p99_pct:.3f} %, max {ev.torque_max_pct:.3f} %, within 1 %: {ev.within_1pct:.1f} % "
          "of the samples")


if __name__ == "__main__":
    main()
