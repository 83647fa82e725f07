"""The fleet's store: a Parquet dataset under DIR/parquet/ (pyarrow), the truth, and
DIR/fleet.duckdb, rebuilt from it after each run with the tables of docs/contract.md.

The per-bag tables (`bags`, `joint_stats`) live in few files: one per table, robot and month of
the bag's start (UTC), DIR/parquet/<table>/part-<robot>-<hash>-<month>.parquet (a bag without a
start, one that failed: month `undated`). A run writes each bag it replays as its own pair of
files under DIR/parquet/incoming/ (its `joint_stats` file, then its `bags` file: a bag is in the
store once its `bags` row is), and `compact`, at the end of the run, moves them into the parts.
A bag's rows are read from the first of: its incoming files, the per-bag files that versions
before compaction wrote into DIR/parquet/<table>/, the parts; so a changed bag replayed again
replaces its rows, and its old rows are dropped from their part when it is compacted.

Compaction writes the new parts under temporary names (skipped by pyarrow and by DuckDB's
`*.parquet`), syncs them, renames them over the old ones, and only then deletes the incoming
files it took (a `bags` file before its `joint_stats` file). Interrupted anywhere, the rows read
are the same before, during and after (an incoming file still there wins over its copy in a
part), and the next compaction takes what is left. DIR/parquet/flags.parquet and
identification.parquet are the fleet's whole analysis, rewritten each run.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from liedyn_ros.replay.errors import ReplayError

from .identification import period_of

SCHEMAS = {
    "bags": pa.schema([
        ("bag", pa.string()), ("robot", pa.string()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
        ("samples", pa.int64()), ("status", pa.string()), ("error", pa.string()), ("salvaged", pa.bool_()),
        ("key", pa.string()), ("name", pa.string()), ("time", pa.string()),
    ]),
    "joint_stats": pa.schema([
        ("bag", pa.string()), ("robot", pa.string()), ("joint", pa.string()),
        ("torque_residual_rms", pa.float64()), ("torque_residual_max_abs", pa.float64()),
        ("effort_rms", pa.float64()), ("collisions", pa.int64()),
    ]),
    # one row per robot, period and joint: the pooled fit of the period's bags (identification.py)
    "identification": pa.schema([
        ("robot", pa.string()), ("period", pa.string()), ("joint", pa.string()), ("coulomb", pa.float64()),
        ("viscous", pa.float64()), ("payload_mass", pa.float64()),
        ("coulomb_std", pa.float64()), ("payload_mass_std", pa.float64()), ("payload_link", pa.string()),
        ("payload_label", pa.float64()), ("validation_rms_before", pa.float64()),
        ("validation_rms_after", pa.float64()), ("fit_bags", pa.int64()), ("validation_bags", pa.int64()),
        ("start_ns", pa.int64()), ("end_ns", pa.int64()), ("status", pa.string()), ("error", pa.string()),
        ("parameter_file", pa.string()),
    ]),
    "flags": pa.schema([
        ("robot", pa.string()), ("joint", pa.string()), ("kind", pa.string()), ("value", pa.float64()),
        ("fleet_median", pa.float64()), ("z", pa.float64()), ("since_ns", pa.int64()),
        ("reference", pa.float64()), ("detail", pa.string()),
        ("explained_by", pa.string()),  # the kind of the same robot's flag that explains this one (analysis.explains)
    ]),
}
PER_BAG = ("bags", "joint_stats")
# path of a bag (or URDF, parameter file) -> its files' signature and content key (tasks.content_key)
CONTENT_KEYS = pa.schema([("path", pa.string()), ("signature", pa.string()), ("key", pa.string())])
# key of a bag -> whether its replay kept its normal equations (identification.pooled)
EQUATIONS_KEPT = pa.schema([("key", pa.string()), ("kept", pa.bool_())])
INCOMING = "incoming"
PART = re.compile(r"part-.*-[0-9a-f]{8}-(\d{4}-\d{2}|undated)\.parquet")
LOCK = ".fleet.lock"


def parquet_dir(out: Path) -> Path:
    return out / "parquet"


@contextmanager
def locked(out: Path) -> Iterator[None]:
    """Holds DIR for one liedyn-fleet at a time: two runs compacting one store would each delete
    incoming files the other had not taken."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / LOCK).open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReplayError(f"{out} is in use by another liedyn-fleet (it holds {out / LOCK})") from None
        yield  # the lock goes with the file's closing


def write_bag(out: Path, name: str, bag: dict[str, Any], joints: Sequence[dict[str, Any]]) -> None:
    """One bag's rows, into DIR/parquet/incoming/ until the next compaction; they replace what an
    earlier run wrote for that bag. The `bags` file last: until it is there, the bag is not in the
    store (a run killed in between replays it again)."""
    for table, rows in (("joint_stats", joints), ("bags", [bag])):
        folder = parquet_dir(out) / INCOMING / table
        folder.mkdir(parents=True, exist_ok=True)
        _write(pa.Table.from_pylist(list(rows), schema=SCHEMAS[table]), folder / f"{name}.parquet")


def write_table(out: Path, table: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """A whole-fleet table (not per bag) written anew; returns it as written."""
    parquet_dir(out).mkdir(parents=True, exist_ok=True)
    written = pa.Table.from_pylist(list(rows), schema=SCHEMAS[table])
    _write(written, parquet_dir(out) / f"{table}.parquet")
    return written


def read_table(out: Path, table: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A table of the Parquet dataset (`columns` of it, default all); empty (with its columns)
    before anything was written. A per-bag table holds each bag once (module docstring)."""
    if table not in PER_BAG:
        path = parquet_dir(out) / f"{table}.parquet"
        return _read([path] if path.exists() else [], table, columns)
    newest, taken = _newest(_loose(out), [table], columns)
    parts = _read(_parts(out, table), table, _with_bag(columns))
    parts = parts.filter(pc.invert(pc.is_in(parts["bag"], value_set=taken)))
    return pa.concat_tables([parts.select(columns) if columns else parts, newest[table]])


def stored_keys(out: Path) -> dict[str, str]:
    """bag path -> content key of the bags already in the store."""
    bags = read_table(out, "bags", ["bag", "key"])
    return dict(zip(bags.column("bag").to_pylist(), bags.column("key").to_pylist()))


def content_keys(out: Path) -> dict[str, tuple[str, str]]:
    """The content keys of earlier runs (DIR/parquet/content_keys.parquet), for tasks.content_key."""
    path = parquet_dir(out) / "content_keys.parquet"
    if not path.exists():
        return {}
    known = pq.read_table(path, schema=CONTENT_KEYS)
    return dict(zip(known["path"].to_pylist(), zip(known["signature"].to_pylist(), known["key"].to_pylist())))


def write_content_keys(out: Path, known: Mapping[str, tuple[str, str]]) -> None:
    parquet_dir(out).mkdir(parents=True, exist_ok=True)
    _write(pa.table({"path": list(known), "signature": [s for s, _ in known.values()],
                     "key": [k for _, k in known.values()]}, schema=CONTENT_KEYS),
           parquet_dir(out) / "content_keys.parquet")


def equations_kept(out: Path) -> dict[str, bool]:
    """Which bags' replays kept their equations, by key, as of the last run (DIR/parquet/equations_kept.parquet)."""
    path = parquet_dir(out) / "equations_kept.parquet"
    if not path.exists():
        return {}
    kept = pq.read_table(path, schema=EQUATIONS_KEPT)
    return dict(zip(kept["key"].to_pylist(), kept["kept"].to_pylist()))


def write_equations_kept(out: Path, kept: Mapping[str, bool]) -> None:
    parquet_dir(out).mkdir(parents=True, exist_ok=True)
    _write(pa.table({"key": list(kept), "kept": list(kept.values())}, schema=EQUATIONS_KEPT),
           parquet_dir(out) / "equations_kept.parquet")


@dataclass(frozen=True)
class Compaction:
    """What `compact` did: bags moved into parts, part files written and removed (emptied)."""

    bags: int
    written: int
    removed: int


def compact(out: Path) -> Compaction:
    """The incoming per-bag files (and per-bag files of stores written before compaction) moved
    into the parts of their robot and month, replacing the rows the parts held for those bags.
    Safe to interrupt anywhere and to run again (module docstring); call it under `locked`."""
    for table in PER_BAG:  # new parts of a compaction interrupted before its renames
        for stale in (parquet_dir(out) / table).glob("_*.tmp"):
            stale.unlink()
    layers = _loose(out)
    if not any(layer[t] for layer in layers for t in PER_BAG):
        return Compaction(0, 0, 0)
    newest, taken = _newest(layers)
    new = newest["bags"]
    part_of = {bag: part_name(robot, start) for bag, robot, start in
               zip(*(new[c].to_pylist() for c in ("bag", "robot", "start_ns")))}
    # and the parts holding earlier rows of these bags (a changed bag may move to another month),
    # in either table: an interrupted compaction may have renamed one table's part and not the other's
    touched = set(part_of.values())
    for table in PER_BAG:
        for path in _parts(out, table):
            if pc.any(pc.is_in(pq.read_table(path, columns=["bag"])["bag"], value_set=taken)).as_py():
                touched.add(path.name)
    renames: list[tuple[Path, Path]] = []
    removals: list[Path] = []
    for table, incoming in newest.items():
        folder = parquet_dir(out) / table
        folder.mkdir(parents=True, exist_ok=True)
        target = pa.array([part_of[b] for b in incoming["bag"].to_pylist()], pa.string())
        for name in sorted(touched):
            final = folder / name
            kept = _read([final] if final.exists() else [], table)
            kept = kept.filter(pc.invert(pc.is_in(kept["bag"], value_set=taken)))
            rows = pa.concat_tables([kept, incoming.filter(pc.equal(target, name))]).sort_by("bag")
            if rows.num_rows:
                tmp = folder / f"_{name}.tmp"
                _write_file(rows, tmp, sync=True)
                renames.append((tmp, final))
            elif final.exists():
                removals.append(final)
    for tmp, final in renames:
        os.replace(tmp, final)
    for path in removals:
        path.unlink()
    for table in PER_BAG:  # the parts' new names on disk before the incoming files go
        _sync_dir(parquet_dir(out) / table)
    for layer in layers:
        for table in PER_BAG:  # bags first: a bag without its bags file is read from the parts
            for path in layer[table].values():
                path.unlink()
    return Compaction(new.num_rows, len(renames), len(removals))


def part_name(robot: str, start_ns: int | None) -> str:
    """The part of a robot's bags that started in one month (UTC): the robot's name made safe for
    a file name, a hash of it (two robots whose names differ in unsafe characters), the month."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", robot)[:60]
    month = "undated" if start_ns is None else period_of(start_ns, "month")
    return f"part-{slug}-{hashlib.sha1(robot.encode()).hexdigest()[:8]}-{month}.parquet"


def _loose(out: Path) -> list[dict[str, dict[str, Path]]]:
    """The per-bag files, newest layer first: incoming, then those of a store written before
    compaction; each layer table -> bag name -> file."""
    root = parquet_dir(out)
    return [{table: {p.stem: p for p in sorted((folder / table).glob("*.parquet")) if not PART.fullmatch(p.name)}
             for table in PER_BAG} for folder in (root / INCOMING, root)]


def _parts(out: Path, table: str) -> list[Path]:
    return sorted(p for p in (parquet_dir(out) / table).glob("part-*.parquet") if PART.fullmatch(p.name))


def _newest(layers: Sequence[Mapping[str, Mapping[str, Path]]], tables: Sequence[str] = PER_BAG,
            columns: Sequence[str] | None = None) -> tuple[dict[str, pa.Table], pa.Array]:
    """The loose layers' rows of `tables` (`columns` of them), each bag's from the newest layer
    that has its `bags` file, and the bags they hold."""
    taken = pa.array([], pa.string())
    pieces: dict[str, list[pa.Table]] = {table: [] for table in tables}
    for layer in layers:
        rows = _read(layer["bags"].values(), "bags")
        rows = rows.filter(pc.invert(pc.is_in(rows["bag"], value_set=taken)))
        taken = pa.concat_arrays([taken, rows["bag"].combine_chunks()])
        for table in tables:
            if table == "bags":
                pieces[table].append(rows.select(list(columns)) if columns else rows)
            else:
                files = layer[table]
                pieces[table].append(_read([files[n] for n in rows["name"].to_pylist() if n in files], table, columns))
    return {table: pa.concat_tables(p) for table, p in pieces.items()}, taken


def _with_bag(columns: Sequence[str] | None) -> list[str] | None:
    return None if columns is None else ["bag", *(c for c in columns if c != "bag")]


def _read(files: Iterable[Path], table: str, columns: Sequence[str] | None = None) -> pa.Table:
    paths = [str(f) for f in files]
    if not paths:
        empty = SCHEMAS[table].empty_table()
        return empty.select(list(columns)) if columns else empty
    return ds.dataset(paths, schema=SCHEMAS[table], format="parquet").to_table(columns=columns)


def _write(table: pa.Table, path: Path) -> None:
    """`table` as `path`, whole or not at all: written beside it, then renamed over it."""
    tmp = path.with_name(f"_{path.name}.tmp")
    _write_file(table, tmp)
    os.replace(tmp, path)


def _write_file(table: pa.Table, path: Path, sync: bool = False) -> None:
    """`sync`: on the disk when this returns (a part, which replaces many bags' rows, before the
    incoming files go; a bag's own file, written per bag, is not worth 10 ms: after a power cut
    its bag may be replayed again)."""
    with path.open("wb") as f:
        pq.write_table(table, f)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def build_duckdb(out: Path, tables: Mapping[str, pa.Table]) -> Path:
    """DIR/fleet.duckdb made anew from the tables of the Parquet dataset as read or written (a
    copy, so it is queried without pyarrow and without the Parquet files)."""
    path = out / "fleet.duckdb"
    tmp = path.with_suffix(".duckdb.tmp")
    tmp.unlink(missing_ok=True)
    with duckdb.connect(str(tmp)) as con:
        for table in SCHEMAS:
            con.register("incoming", tables[table])
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM incoming")
            con.unregister("incoming")
    tmp.replace(path)
    return path
