"""The fleet's store: a Parquet dataset under DIR/parquet/ (pyarrow), the truth, and
DIR/fleet.duckdb, rebuilt from it after each run with the tables of docs/contract.md.

DIR/parquet/bags/<name>.parquet and DIR/parquet/joint_stats/<name>.parquet hold one bag each, so
a re-run writes only the bags it replayed (a changed bag replaces its files) and a bag no longer
given keeps its history; DIR/parquet/flags.parquet and identification.parquet are the fleet's
whole analysis, rewritten each run (the pooled fits from the bags' kept normal equations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

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


def parquet_dir(out: Path) -> Path:
    return out / "parquet"


def write_bag(out: Path, name: str, bag: dict[str, Any], joints: Sequence[dict[str, Any]]) -> None:
    """One bag's rows, replacing what an earlier run wrote for it."""
    for table, rows in (("bags", [bag]), ("joint_stats", joints)):
        folder = parquet_dir(out) / table
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(list(rows), schema=SCHEMAS[table]), folder / f"{name}.parquet")


def write_table(out: Path, table: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """A whole-fleet table (not per bag) written anew; returns it as written."""
    parquet_dir(out).mkdir(parents=True, exist_ok=True)
    written = pa.Table.from_pylist(list(rows), schema=SCHEMAS[table])
    pq.write_table(written, parquet_dir(out) / f"{table}.parquet")
    return written


def read_table(out: Path, table: str) -> pa.Table:
    """A table of the Parquet dataset; empty (with its columns) before anything was written."""
    path = parquet_dir(out) / (table if table in PER_BAG else f"{table}.parquet")
    if not path.exists():
        return SCHEMAS[table].empty_table()
    return ds.dataset(path, schema=SCHEMAS[table], format="parquet").to_table()


def stored_keys(out: Path) -> dict[str, str]:
    """bag path -> content key of the bags already in the store."""
    bags = read_table(out, "bags")
    return dict(zip(bags.column("bag").to_pylist(), bags.column("key").to_pylist()))


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
    tmp.replace(path)  # readers never see a half-built file
    return path
