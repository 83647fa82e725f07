"""`liedyn-fleet`: many robots' bags, each replayed alone by a Dask task, into one store
(docs/contract.md, "Fleet command"). A thin command line over `run_fleet`."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import dask
from distributed import Client, LocalCluster, as_completed
from tqdm import tqdm

from liedyn_ros.replay import ReplayError, ReplayOptions
from liedyn_ros.replay import cli as replay_cli
from liedyn_ros.replay import outdir

from . import analysis, identification, store
from .report import write_report
from .discover import BagEntry, discover
from .tasks import BagRows, BagTask, error_rows, make_task, merge_pieces, piece_tasks, run_bag, split, unsplit


def build_parser() -> argparse.ArgumentParser:
    """liedyn-replay's per-bag options, and the fleet's own."""
    p = replay_cli.build_parser()
    p.prog = "liedyn-fleet"
    p.description = ("Replay many robots' bags, each on its own, on Dask; per-bag and per-joint results in "
                     "DIR/parquet/ and DIR/fleet.duckdb, flags against the fleet; a re-run replays only new "
                     "or changed bags.")
    for action in p._actions:  # the replay's wording of two of its options does not hold here
        if action.dest == "bags":
            action.help = "bag, rosbag2 directory, directory tree of bags, or glob; each replayed alone"
            action.metavar = "BAG_OR_DIR"
            action.nargs = "*"  # none with --compact
        elif action.dest == "jobs":
            action.help = argparse.SUPPRESS
    p.add_argument("--manifest", type=Path, metavar="FILE",
                   help="CSV with columns bag,robot and optional urdf,params,time,identify,split_seconds (paths "
                   "relative to it)")
    p.add_argument("--robot-pattern", metavar="REGEX",
                   help="the robot id is the first group of REGEX searched in the bag's path "
                   "(default: the bag's parent directory name)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="an existing Dask scheduler, e.g. tcp://host:8786 (default: a local cluster)")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="worker processes of the local cluster (default %(default)s)")
    p.add_argument("--period", choices=identification.PERIODS, default="week",
                   help="with --identify: one pooled fit per robot and period of the bags' start (UTC) "
                   "(default %(default)s)")
    p.add_argument("--compact", action="store_true",
                   help="only compact DIR's store (no bags): move the per-bag Parquet files a run left "
                   "(every run compacts at its end) into one file per table, robot and month")
    p.add_argument("--split-seconds", type=float, metavar="S",
                   help="cut each bag lasting more than S seconds into the fewest equal pieces of at most S, each "
                   "a task of its own, merged into the bag's one set of rows: for a few long bags on many workers "
                   "(default: off, every bag one task; docs/fleet.md, 'Long bags')")
    return p


@dataclass
class FleetRun:
    """What a fleet run did."""

    bags: int
    replayed: int
    failed: int
    flags: list[dict[str, Any]]
    elapsed_s: float


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.jobs is not None:
            raise ReplayError("--jobs is liedyn-replay's; give --workers N")
        if args.workers < 1:
            raise ReplayError(f"--workers must be >= 1, got {args.workers}")
        if args.split_seconds is not None and not 0 < args.split_seconds < float("inf"):
            raise ReplayError(f"--split-seconds must be a positive number of seconds, got {args.split_seconds}")
        if args.split_seconds is not None and (args.start is not None or args.end is not None):
            raise ReplayError("--split-seconds cuts whole bags: give it without --start/--end")
        if args.compact:
            return _compact(args.out, args.bags)
        if not args.bags:
            raise ReplayError("no BAG_OR_DIR given (only --compact takes none)")
        entries = discover(args.bags, args.manifest, args.robot_pattern)
        options = replay_cli.options_from_args(args, args.out, progress=False)
        with store.locked(args.out):  # one run at a time on a store
            run = run_fleet(entries, args.out, options, args.scheduler, args.workers, not args.no_progress,
                            args.period, args.split_seconds)
    except (ReplayError, OSError) as err:  # a message, never a traceback
        print(f"liedyn-fleet: error: {err}", file=sys.stderr)
        return 2
    print(f"{run.bags} bags: {run.replayed} replayed ({run.failed} failed), {run.bags - run.replayed} unchanged, "
          f"in {run.elapsed_s:.1f} s; store {args.out / 'fleet.duckdb'}")
    for flag in run.flags:  # the flags a cause explains under it
        if flag["explained_by"] is None:
            print(f"flag {flag['kind']}: {flag['robot']} {flag['joint']}: {flag['detail']}")
            for symptom in run.flags:
                if symptom["robot"] == flag["robot"] and symptom["explained_by"] == flag["kind"]:
                    print(f"  explains {symptom['kind']}: {symptom['joint']}: {symptom['detail']}")
    return 0


def _compact(out: Path, bags: Sequence[Path]) -> int:
    """`liedyn-fleet --compact --out DIR`."""
    if bags:
        raise ReplayError("--compact takes no BAG_OR_DIR: it compacts the store of --out")
    if not store.parquet_dir(out).is_dir():
        raise ReplayError(f"{out}: no fleet store (no {store.parquet_dir(out)})")
    with store.locked(out):
        done = store.compact(out)
    print(f"{out}: {done.bags} bags' rows compacted into {done.written} files ({done.removed} emptied files removed)")
    return 0


def run_fleet(entries: Sequence[BagEntry], out: Path, options: ReplayOptions, scheduler: str | None = None,
              workers: int = 2, progress: bool = True, period: str = "week", split_seconds: float | None = None
              ) -> FleetRun:
    """Replays the bags new or changed since the last run into `out` (those lasting more than
    `split_seconds` cut into pieces), then the analysis and the store."""
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    stored = store.stored_keys(out)
    known = store.content_keys(out)  # a bag whose files' stat is unchanged is not read again
    tasks = [make_task(entry, out, options, known, split_seconds) for entry in entries]
    store.write_content_keys(out, known)
    # new or changed: decided on the keys (they hold S); only those bags are opened to be cut
    todo = [split(t) for t in tasks if stored.get(str(t.entry.path)) != t.key]
    failed = 0
    if todo:
        with _client(scheduler, workers) as client:
            for task, replayed in _replayed(client, todo, progress):
                store.write_bag(out, task.name, replayed.bag, replayed.joints)
                failed += replayed.bag["status"] == "error"
    store.compact(out)  # the per-bag files of this run (and of any interrupted one) into the parts
    # The per-bag tables read once: the analysis, fleet.duckdb and the report all take them.
    tables = {table: store.read_table(out, table) for table in store.PER_BAG}
    bags = tables["bags"].to_pylist()
    kept = store.equations_kept(out)  # the bags' equations.pkl looked for only where the key is new
    tables["identification"] = store.write_table(out, "identification", identification.pooled(out, bags, period, kept))
    store.write_equations_kept(out, kept)
    tables["flags"] = store.write_table(out, "flags", analysis.flags(
        bags, tables["joint_stats"].to_pylist(), tables["identification"].to_pylist()))
    store.build_duckdb(out, tables)
    rows = {table: tables[table].to_pylist() for table in store.SCHEMAS}
    write_report(out, rows)
    return FleetRun(len(tasks), len(todo), failed, rows["flags"], time.perf_counter() - started)


# Dask's periodic work goes on however fast the bags go: system monitors every 0.5 s, event-loop
# checks every 20 ms, the workers' profiler sampling every 10 ms. An idle local cluster of 2
# workers took 0.115 of a core with the defaults (0.03 s of CPU per 3 s bag at load 18), 0.040
# with these rates; the dashboard keeps its views.
QUIET = {"distributed.admin.system-monitor.interval": "2s", "distributed.admin.tick.interval": "200ms",
         "distributed.worker.profile.interval": "100ms"}


@contextmanager
def _client(scheduler: str | None, workers: int) -> Iterator[Client]:
    """A client of the cluster at `scheduler`, or of a local one of `workers` single-threaded
    processes (one bag at a time per process: memory bounded by one replay's)."""
    with dask.config.set(QUIET):
        if scheduler is not None:
            with Client(scheduler) as client:
                yield client
            return
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                          silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            yield client


def _replayed(client: Client, tasks: Sequence[BagTask], progress: bool) -> Iterator[tuple[BagTask, BagRows]]:
    """Each bag's rows as it completes; a task whose worker died twice (retries=1) is an error row.
    A bag cut into pieces is done when its last piece is, its rows merged (tasks.merge_pieces);
    when a piece failed, the bag is replayed whole instead."""
    futures: dict[Any, tuple[BagTask, int | None]] = {}
    for task in tasks:
        if not task.pieces:
            futures[client.submit(run_bag, task, key=f"bag-{task.name}-{task.key[:16]}", retries=1)] = (task, None)
            continue
        try:
            outdir.claim(task.options.out)
            parts = piece_tasks(task)
        except ReplayError as err:
            yield task, error_rows(task, str(err))
            continue
        for k, piece in enumerate(parts):
            futures[client.submit(run_bag, piece, key=f"bag-{task.name}-{task.key[:16]}-{k}", retries=1)] = (task, k)
    if progress:
        print(f"dashboard: {client.dashboard_link}", file=sys.stderr)
    pieces: dict[str, dict[int, BagRows]] = {}
    done = as_completed(futures)
    bar = tqdm(total=len(futures), unit="task", disable=not progress)
    for future in done:
        bar.update()
        task, index = futures[future]
        try:
            rows = future.result()
        except Exception as err:  # noqa: BLE001 -- KilledWorker and the like: that bag's row, the run goes on
            rows = error_rows(task, f"{type(err).__name__}: {err}")
        if index is None:
            yield task, rows
            continue
        got = pieces.setdefault(task.name, {})
        got[index] = rows
        if len(got) < len(task.pieces):
            continue
        try:
            merged = merge_pieces(task, [got[i] for i in range(len(task.pieces))])
        except (OSError, ValueError, KeyError) as err:
            merged = error_rows(task, f"merging its pieces: {type(err).__name__}: {err}")
        if merged is None:  # a piece failed or met damage: the bag replayed whole gives its rows
            whole = unsplit(task)
            future = client.submit(run_bag, whole, key=f"bag-{task.name}-{task.key[:16]}-whole", retries=1)
            futures[future] = (whole, None)
            done.add(future)
            bar.total += 1
            continue
        yield task, merged
    bar.close()
