"""liedyn-fleet --split-seconds on one long bag: the merged pieces against the bag replayed whole,
and the wall time of the fleet command with 2 workers, split and unsplit.

The bag: bench_fleet's Panda (Pinocchio's inverse dynamics with its own friction and a 1 kg
payload on panda_hand, noise) for --seconds at 200 Hz, with a 0.3 s external torque pulse of
25 N m on panda_joint2 every --pulse-every seconds; one more pulse starts 0.05 s before each cut,
so that an event is open at every cut. In this process (no Dask): the bag's task replayed whole,
and its pieces replayed one by one and merged (fleet.tasks), with --identify friction and
payload panda_hand (each solved from its normal equations): every joint_stats column's largest
difference, the identified Coulomb friction and payload mass, the event lists. Then liedyn-fleet
with 2 workers on the bag alone, without and with --split-seconds: on a running cluster of 2 warm
workers (kernels loaded; --rounds times, alternating), and as fresh commands (--pairs; each starts
its own cluster, whose second worker loads its kernels only when a split gives it work).

    python benchmarks/bench_fleet_split.py --seconds 1800 --split-seconds 300
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_fleet as bf  # noqa: E402

from liedyn_ros.core.identification.fit import identify  # noqa: E402
from liedyn_ros.fleet.discover import BagEntry  # noqa: E402
from liedyn_ros.fleet.tasks import make_task, merge_pieces, piece_tasks, run_bag, split  # noqa: E402
from liedyn_ros.replay import ReplayOptions  # noqa: E402
from liedyn_ros.replay.identify import summary_section  # noqa: E402

PULSE_S, PULSE_NM = 0.3, 25.0


def long_bag(out: Path, seconds: float, pulse_every: float, split_s: float) -> tuple[Path, Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    urdf = bf.panda_urdf(out)
    rng = np.random.default_rng(3)
    arm = bf.Arm(urdf, 1.0, np.full(7, 0.8) * rng.uniform(0.85, 1.15, 7), 0.3 * rng.uniform(0.8, 1.2, 7))
    t = np.arange(int(seconds * bf.RATE)) / bf.RATE
    q, qd, tau = arm.recording(t, rng)
    tau = tau + rng.normal(0, 0.05, tau.shape)
    starts = list(np.arange(pulse_every / 2, seconds - 1, pulse_every))
    starts += [k * split_s - 0.05 for k in range(1, int(seconds // split_s))]  # open at each cut
    for s in starts:
        tau[(t >= s) & (t < s + PULSE_S), 1] += PULSE_NM
    bag = out / "long"
    bf.write_bag(bag, bf.T0 + np.round(t * 1e9).astype(np.int64), arm.names, q, qd, tau)
    params = bf.params_file(out / "params.yaml", {
        "payload_link": "panda_hand", "payload_mass": 1.0, "payload_com": [0.0, 0.0, 0.1],
        "payload_inertia": [2e-3, 0.0, 0.0, 2e-3, 0.0, 1e-3]})
    (out / "truth.json").write_text(json.dumps({"coulomb": arm.coulomb.tolist(), "pulses": len(starts)}))
    return bag, urdf, params


def solved(folder: Path) -> dict[str, float]:
    saved = pickle.loads((folder / "equations.pkl").read_bytes())
    ident = saved["identifier"]
    result = identify(ident.problem, ident.fit, ident.fit)
    return {p["name"]: p["value"] for p in summary_section(result, ident.payload)["parameters"]}


def compare(bag: Path, urdf: Path, params: Path, split_s: float, work: Path) -> None:
    options = ReplayOptions(out=work, urdf=urdf, params=params, plots=False, progress=False,
                            identify=(("friction",), ("payload", "panda_hand")))
    whole_task = make_task(BagEntry(bag, "arm"), work / "whole", options)
    cut_task = split(make_task(BagEntry(bag, "arm"), work / "cut", options, split_seconds=split_s))
    run_bag(piece_tasks(cut_task)[0])  # this process's one-time costs (kernels, typestores) before the timings
    started = time.process_time()
    whole = run_bag(whole_task)
    whole_cpu = time.process_time() - started
    pieces, cpu = [], []
    for task in piece_tasks(cut_task):
        started = time.process_time()
        pieces.append(run_bag(task))
        cpu.append(time.process_time() - started)
    started = time.process_time()
    merged = merge_pieces(cut_task, pieces)
    merge_cpu = time.process_time() - started
    assert merged is not None
    cut_cpu = sum(cpu) + merge_cpu
    print(f"bag: {whole.bag['samples']:,} samples; {len(cut_task.pieces)} pieces of {split_s:g} s; CPU in this "
          f"process: whole {whole_cpu:.1f} s, pieces {' + '.join(f'{c:.1f}' for c in cpu)} + merge {merge_cpu:.2f} "
          f"= {cut_cpu:.1f} s ({cut_cpu / whole_cpu:.3f} x)")
    loads = [0.0, 0.0]
    for c in sorted(cpu, reverse=True):  # the pieces on 2 idle workers, longest first to the less loaded
        loads[loads.index(min(loads))] += c
    print(f"on 2 idle cores the pieces' CPU would end after {max(loads):.1f} s against the whole's {whole_cpu:.1f} s "
          f"({max(loads) / whole_cpu:.2f} x; no fixed costs)")
    print(f"bags row: samples {merged.bag['samples']} vs {whole.bag['samples']}, start_ns equal "
          f"{merged.bag['start_ns'] == whole.bag['start_ns']}, end_ns equal {merged.bag['end_ns'] == whole.bag['end_ns']}")
    for column in ("torque_residual_rms", "torque_residual_max_abs", "effort_rms", "collisions"):
        pairs = [(m[column], w[column]) for m, w in zip(merged.joints, whole.joints) if w[column] is not None]
        if not pairs:
            print(f"joint_stats {column:<24} null in both (as in summary.json without contacts)")
            continue
        diff = max(abs(m - w) for m, w in pairs)
        rel = max(abs(m - w) / abs(w) if w else abs(m - w) for m, w in pairs)
        print(f"joint_stats {column:<24} max |split - whole| {diff:.3g} (relative {rel:.3g})")
    a, b = solved(whole_task.options.out), solved(cut_task.options.out)
    coulomb = [k for k in a if k.endswith(".coulomb")]
    print("identified Coulomb friction, max |split - whole|: "
          f"{max(abs(a[k] - b[k]) for k in coulomb):.3g} N m (values {min(a[k] for k in coulomb):.4f}"
          f"..{max(a[k] for k in coulomb):.4f})")
    print(f"identified payload mass: whole {a['payload.m']:.6f} kg, split {b['payload.m']:.6f} kg, "
          f"|difference| {abs(a['payload.m'] - b['payload.m']):.3g} kg")
    events = [json.loads((t.options.out / "summary.json").read_text())["collisions"] for t in (whole_task, cut_task)]
    same = [(e["start_ns"], e["end_ns"], e["joint"], e["kind"]) for e in events[0]] == [
        (e["start_ns"], e["end_ns"], e["joint"], e["kind"]) for e in events[1]]
    peaks = max((abs(x["peak"] - y["peak"]) for x, y in zip(*events)), default=0.0)
    print(f"events: whole {len(events[0])}, split {len(events[1])}; start, end, joint and kind equal: {same}; "
          f"max |peak difference| {peaks:.3g} N m")


def fleet_wall(bag: Path, urdf: Path, params: Path, split_s: float, work: Path, pairs: int) -> None:
    base = [*bf.FLEET, str(bag), "--urdf", str(urdf), "--params", str(params), "--no-plots", "--no-progress",
            "--workers", "2"]
    for k in range(pairs):
        times = {}
        for label, extra in (("unsplit", []), ("split", ["--split-seconds", str(split_s)])):
            out = work / f"fleet_{label}_{k}_{os.getpid()}"
            started = time.perf_counter()
            done = subprocess.run([*base, "--out", str(out), *extra], capture_output=True, text=True, check=False)
            times[label] = time.perf_counter() - started
            if done.returncode:
                raise SystemExit(done.stderr[-2000:])
        print(f"liedyn-fleet --workers 2 as a fresh command, pair {k + 1}: unsplit {times['unsplit']:.1f} s, split {times['split']:.1f} s "
              f"({times['split'] / times['unsplit']:.2f} x)")


def warm_cluster(bag: Path, urdf: Path, params: Path, split_s: float, work: Path, rounds: int) -> None:
    """liedyn-fleet --scheduler on a local cluster of 2 worker processes whose kernels are
    loaded first (a short replay on each), unsplit and split alternating."""
    from distributed import Client, LocalCluster

    from liedyn_ros.fleet.cli import main as fleet_main

    short = work / f"warm_{os.getpid()}"
    bf.write_bag(short, bf.T0 + np.arange(400) * 5_000_000, [f"panda_joint{i}" for i in range(1, 8)],
                 np.tile([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8], (400, 1)), np.zeros((400, 7)), np.zeros((400, 7)))

    def warm(folder: str) -> int:
        from liedyn_ros.replay import ReplayOptions, replay

        replay([short], ReplayOptions(out=Path(folder) / str(os.getpid()), urdf=urdf, params=params, plots=False,
                                      progress=False))
        return os.getpid()

    base = [str(bag), "--urdf", str(urdf), "--params", str(params), "--no-plots", "--no-progress"]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        workers = [psutil.Process(pid) for pid in client.run(warm, str(work / "warm_out")).values()]
        for k in range(rounds):
            times = {}
            for label, extra in (("unsplit", []), ("split", ["--split-seconds", str(split_s)])):
                cpu = [sum(w.cpu_times()[:2]) for w in workers]
                started = time.perf_counter()
                code = fleet_main([*base, "--out", str(work / f"warm_{label}_{k}_{os.getpid()}"), "--scheduler",
                                   cluster.scheduler_address, *extra])
                times[label] = time.perf_counter() - started
                assert code == 0
                used = [sum(w.cpu_times()[:2]) - c for w, c in zip(workers, cpu)]
                print(f"  {label}: the workers' CPU {used[0]:.1f} s and {used[1]:.1f} s, load {os.getloadavg()[0]:.1f}")
            print(f"liedyn-fleet on a running cluster of 2 warm workers, round {k + 1}: unsplit "
                  f"{times['unsplit']:.1f} s, split {times['split']:.1f} s ({times['split'] / times['unsplit']:.2f} x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--split-seconds", type=float, default=300.0)
    parser.add_argument("--pulse-every", type=float, default=23.0)
    parser.add_argument("--pairs", type=int, default=1, help="fresh fleet commands, unsplit and split, this many times")
    parser.add_argument("--rounds", type=int, default=2, help="runs on a warm cluster, unsplit and split, this many times")
    parser.add_argument("--out", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--only-wall", action="store_true",
                        help="only the wall times, on the bag an earlier run left in --out/data")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="bench_fleet_split_"))
    if args.only_wall:
        bag, urdf, params = work / "data" / "long", work / "data" / "panda7.urdf", work / "data" / "params.yaml"
    else:
        bag, urdf, params = long_bag(work / "data", args.seconds, args.pulse_every, args.split_seconds)
        compare(bag, urdf, params, args.split_seconds, work / "compare")
    warm_cluster(bag, urdf, params, args.split_seconds, work, args.rounds)
    fleet_wall(bag, urdf, params, args.split_seconds, work, args.pairs)


if __name__ == "__main__":
    main()
