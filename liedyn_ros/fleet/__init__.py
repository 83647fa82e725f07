"""Fleet analysis (issue 22): many robots' bags replayed on Dask, results in Parquet and DuckDB.

One module per stage: `discover` (which bags, which robot), `tasks` (one Dask task per bag: the
replay of that bag alone), `store` (Parquet dataset and fleet.duckdb), `analysis` (flags against
the fleet), `cli` (`liedyn-fleet`). Needs the "fleet" extra (dask[distributed], duckdb, pyarrow);
nothing outside this subpackage imports it, so the node runs without them.
"""
