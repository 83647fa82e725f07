"""The fleet store at scale, before and after compaction (fleet/store.py; docs/fleet.md, "The store").

A synthetic store, its rows made here (no replay): ROBOTS robots (half 7-joint arms, half
12-joint quadrupeds), BAGS bags over the days at 24 a robot-day, 1 % of them failed (an error
row, no joints), a pooled identification row per robot, day and joint and a few flags. The
per-bag tables are first written as liedyn-fleet wrote them before compaction (one Parquet
file per bag and table in parquet/<table>/); then measured, each in the same run and process:

- files and bytes under DIR/parquet/;
- a re-run's "what is new" check: the stored bags' content keys read back (`store.stored_keys`)
  and compared with the bags given (here: the same keys);
- the end of a run: the per-bag tables read back (`store.read_table`) and fleet.duckdb built;
- docs/fleet.md's three SQL questions against fleet.duckdb, and against DuckDB views over the
  Parquet files (`read_parquet('DIR/parquet/<table>/*.parquet')`), with one more over joint_stats;

then `store.compact` (the old per-bag files into one file per table, robot and month), the
same measures again, and a day's worth of new bags (a run's incoming files) compacted into the
store, as a run ends.

    python benchmarks/bench_fleet_store.py --bags 40000 --robots 56 --out /tmp/fleet_store
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from liedyn_ros.fleet import store

DAY_NS = 86_400 * 10**9
T0 = 1_761_955_200 * 10**9  # 2025-11-01 UTC
PER_DAY = 24
DOCS = Path(__file__).resolve().parents[1] / "docs" / "fleet.md"
JOINT_SQL = ("-- (not in the docs) each robot's median torque residual RMS per joint\n"
             "SELECT robot, joint, median(torque_residual_rms) FROM joint_stats GROUP BY robot, joint")


def joints_of(robot: int) -> list[str]:
    return [f"panda_joint{i}" for i in range(1, 8)] if robot % 2 == 0 else [f"leg{i // 3}_j{i % 3}" for i in range(12)]


def bag_rows(robot: int, k: int, day: int, key: str = "v1") -> tuple[dict, list[dict]]:
    """The k-th bag of a robot, recorded on `day`: a `bags` row and its `joint_stats` rows."""
    name = f"r{robot:03d}"
    bag = f"/fleet/{name}/day{day:04d}_{k:02d}.mcap"
    failed = (robot * 7919 + day * 31 + k) % 100 == 0
    start = None if failed else T0 + day * DAY_NS + k * 3_600 * 10**9
    row = {"bag": bag, "robot": name, "start_ns": start, "end_ns": None if failed else start + 1_200 * 10**9,
           "samples": 0 if failed else 600_000, "status": "error" if failed else "ok",
           "error": "Unreadable: bad magic" if failed else None, "salvaged": k == 5 and day % 9 == 0,
           "key": hashlib.sha256(f"{bag}{key}".encode()).hexdigest(),
           "name": f"day{day:04d}_{k:02d}-{hashlib.sha1(bag.encode()).hexdigest()[:8]}", "time": None}
    joints = [] if failed else [
        {"bag": bag, "robot": name, "joint": j, "torque_residual_rms": 0.5 + 0.01 * ((robot + k + i) % 7),
         "torque_residual_max_abs": 2.0, "effort_rms": None, "collisions": int((day + i) % 3 == 0)}
        for i, j in enumerate(joints_of(robot))]
    return row, joints


def generate(out: Path, robots: int, bags: int) -> int:
    """The store as liedyn-fleet wrote it before compaction; returns the days."""
    days = -(-bags // (robots * PER_DAY))
    n = 0
    for table in store.PER_BAG:
        (store.parquet_dir(out) / table).mkdir(parents=True)
    for day in range(days):
        for robot in range(robots):
            for k in range(PER_DAY):
                if n == bags:
                    break
                row, joints = bag_rows(robot, k, day)
                for table, rows in (("joint_stats", joints), ("bags", [row])):
                    pq.write_table(pa.Table.from_pylist(rows, schema=store.SCHEMAS[table]),
                                   store.parquet_dir(out) / table / f"{row['name']}.parquet")
                n += 1
    store.write_table(out, "identification", [
        {"robot": f"r{robot:03d}", "period": f"day{day}", "joint": j, "coulomb": 1.0 + 0.01 * day * (robot == 3),
         "viscous": 0.1, "start_ns": T0 + day * DAY_NS, "end_ns": T0 + (day + 1) * DAY_NS, "status": "ok"}
        for robot in range(robots) for day in range(days) for j in joints_of(robot)])
    store.write_table(out, "flags", [
        {"robot": "r003", "joint": "panda_joint1", "kind": "friction_drift", "value": 1.3, "detail": "drift"},
        {"robot": "r005", "joint": "leg0_j1", "kind": "residual_outlier", "value": 3.0, "detail": "high"}])
    return days


def timed(f, repeat: int = 3):
    """The best of `repeat` wall times of f() (the machine is shared: the least disturbed run), and its result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = f()
        best = min(best, time.perf_counter() - started)
    return best, result


def files_and_bytes(out: Path) -> tuple[int, int, int]:
    files = [p for p in store.parquet_dir(out).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files), sum(p.stat().st_blocks * 512 for p in files)


def read_before(out: Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """A table read as the version before compaction read it: every file of its directory at once."""
    path = store.parquet_dir(out) / (table if table in store.PER_BAG else f"{table}.parquet")
    return ds.dataset(path, schema=store.SCHEMAS[table], format="parquet").to_table(columns=columns)


def measure(out: Path, label: str, given: dict[str, str], read=store.read_table) -> None:
    files, size, disk = files_and_bytes(out)
    print(f"\n{label}: {files:,} files under parquet/, {size / 2**20:.1f} MiB ({disk / 2**20:.1f} MiB on disk)")

    def what_is_new():
        bags = read(out, "bags", ["bag", "key"])
        stored = dict(zip(bags.column("bag").to_pylist(), bags.column("key").to_pylist()))
        return [bag for bag, key in given.items() if stored.get(bag) != key]
    seconds, new = timed(what_is_new)
    print(f"  what is new (stored keys read, {len(given):,} bags compared): {seconds:8.3f} s, {len(new)} new")
    seconds, tables = timed(lambda: {t: read(out, t) for t in store.SCHEMAS}, repeat=2)
    print(f"  per-bag tables read back: {seconds:8.3f} s ({tables['bags'].num_rows:,} bags, "
          f"{tables['joint_stats'].num_rows:,} joint rows)")
    seconds, _ = timed(lambda: store.build_duckdb(out, tables), repeat=2)
    print(f"  fleet.duckdb built:       {seconds:8.3f} s")
    questions = [*re.findall(r"```sql\n(.*?)```", DOCS.read_text(), flags=re.DOTALL), JOINT_SQL]
    parquet = store.parquet_dir(out)
    for where in ("fleet.duckdb", "views over the Parquet files"):
        with duckdb.connect(str(out / "fleet.duckdb") if where == "fleet.duckdb" else ":memory:",
                            read_only=where == "fleet.duckdb") as con:
            if where != "fleet.duckdb":
                for table in store.SCHEMAS:
                    source = f"{parquet}/{table}/*.parquet" if table in store.PER_BAG else f"{parquet}/{table}.parquet"
                    con.execute(f"CREATE VIEW {table} AS FROM read_parquet('{source}', union_by_name = true)")
            for sql in questions:
                seconds, rows = timed(lambda sql=sql: con.execute(sql).fetchall())
                print(f"  {where:<29} {sql.splitlines()[0][3:60]:<58} {seconds:8.3f} s, {len(rows)} rows")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bags", type=int, default=40_000)
    p.add_argument("--robots", type=int, default=56)
    p.add_argument("--out", type=Path, default=Path("/tmp/fleet_store"))
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    started = time.perf_counter()
    days = generate(args.out, args.robots, args.bags)
    print(f"{args.bags:,} bags of {args.robots} robots over {days} days written in {time.perf_counter() - started:.0f} s "
          f"(load {os.getloadavg()[0]:.1f})")
    given = store.stored_keys(args.out)
    measure(args.out, "before compaction (one file per bag and table, read as before)", given, read_before)
    seconds, done = timed(lambda: store.compact(args.out), repeat=1)
    print(f"\ncompaction: {seconds:.1f} s, {done.bags:,} bags into {done.written} files (load {os.getloadavg()[0]:.1f})")
    measure(args.out, "after compaction (one file per table, robot and month)", given)
    # a run's worth: the next day's bags of every robot, and one bag of each robot recorded again
    for robot in range(args.robots):
        for k in range(PER_DAY):
            row, joints = bag_rows(robot, k, days)
            store.write_bag(args.out, row["name"], row, joints)
        row, joints = bag_rows(robot, 0, 0, key="v2")
        store.write_bag(args.out, row["name"], row, joints)
    seconds, done = timed(lambda: store.compact(args.out), repeat=1)
    print(f"\na day's new bags ({args.robots * PER_DAY:,}) and {args.robots} changed ones compacted into the store: "
          f"{seconds:.2f} s, {done.written} files rewritten (load {os.getloadavg()[0]:.1f})")
    bags = store.read_table(args.out, "bags", ["bag"]).num_rows
    print(f"  bags in the store: {bags:,} (expected {args.bags + args.robots * PER_DAY:,})")


if __name__ == "__main__":
    main()
