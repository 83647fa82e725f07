"""The end of a fleet run's pooled identification (fleet/identification.py `pooled`) at scale: which
bags' replays kept their normal equations (DIR/bags/<name>/equations.pkl), looked for on disk
for every bag (before: one stat per bag, every run) or taken from the record of earlier runs
(DIR/parquet/equations_kept.parquet, read and written back, the stat only for a key it lacks).

A synthetic store, rows made here (bench_fleet_store's: ROBOTS robots, 24 bags a robot-day, 1 %
failed) and a directory DIR/bags/<name>/ per bag as a run leaves them, here with a few files each
and no equations (a fleet run without --identify, the common case: no period to pool, so what is
measured is the looking alone). Measured in one process, alternating, best of REPEAT:

- before: pooled without a record (each ok bag's equations.pkl stat'ed);
- after: the record read, pooled with it, the record written back;
- after, a day's new bags (one key each not in the record yet).

    python benchmarks/bench_fleet_pooled.py --bags 30000 --robots 50 --out /tmp/fleet_pooled
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_fleet_store as bs

from liedyn_ros.fleet import identification, store

REPLAY_FILES = ("summary.json", "feedforward_torque.csv", "outputs.mcap")  # a few of a replay's files


def generate(out: Path, robots: int, bags: int) -> list[dict]:
    """The bags' rows, each with its replay's directory (no equations)."""
    days = -(-bags // (robots * bs.PER_DAY))
    rows = [bs.bag_rows(robot, k, day)[0] for day in range(days) for robot in range(robots) for k in range(bs.PER_DAY)]
    for row in rows[:bags]:
        folder = out / "bags" / row["name"]
        folder.mkdir(parents=True)
        for name in REPLAY_FILES:
            (folder / name).touch()
    return rows[:bags]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bags", type=int, default=30_000)
    p.add_argument("--robots", type=int, default=50)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path("/tmp/fleet_pooled"))
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    started = time.perf_counter()
    bags = generate(args.out, args.robots, args.bags)
    print(f"{len(bags):,} bags' rows and directories written in {time.perf_counter() - started:.0f} s "
          f"(load {os.getloadavg()[0]:.1f})")
    kept: dict[str, bool] = {}
    identification.pooled(args.out, bags, "week", kept)  # the first run with a record: every bag looked for once
    store.write_equations_kept(args.out, kept)

    def after(rows: list[dict]) -> None:
        record = store.equations_kept(args.out)
        identification.pooled(args.out, rows, "week", record)
        store.write_equations_kept(args.out, record)

    day = -(-args.bags // (args.robots * bs.PER_DAY))
    new = [bs.bag_rows(robot, k, day + 1, key="new")[0] for robot in range(args.robots) for k in range(bs.PER_DAY)]
    best = {"before": float("inf"), "after": float("inf")}
    for _ in range(args.repeat):  # alternating: the load drifts
        for label, run in (("before", lambda: identification.pooled(args.out, bags, "week")),
                           ("after", lambda: after(bags))):
            t = time.perf_counter()
            run()
            best[label] = min(best[label], time.perf_counter() - t)
    t = time.perf_counter()
    after(bags + new)
    new_s = time.perf_counter() - t
    size = (store.parquet_dir(args.out) / "equations_kept.parquet").stat().st_size
    print(f"pooled's look for equations over {len(bags):,} bags, best of {args.repeat} (load {os.getloadavg()[0]:.1f}):")
    print(f"  before, every bag's equations.pkl stat'ed:       {best['before']:.3f} s")
    print(f"  after, the record read, used and written back:  {best['after']:.3f} s "
          f"({best['after'] / best['before']:.2f} x; record {size / 1e6:.1f} MB)")
    print(f"  after, with a day's {len(new):,} new bags looked for:  {new_s:.3f} s (one run)")


if __name__ == "__main__":
    main()
