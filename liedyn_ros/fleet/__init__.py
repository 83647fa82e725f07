"""Fleet analysis (issue 22): many robots' bags replayed on Dask, results in Parquet and DuckDB.

One module per stage: `discover` (which bags, which robot), `tasks` (one Dask task per bag: the
replay of that bag alone), `identification` (pooled fits per robot and period from the bags'
normal equations), `analysis` (flags against the fleet and against a robot's own history),
`store` (Parquet dataset and fleet.duckdb), `report` (DIR/report.html), `cli` (`liedyn-fleet`).
Needs the "fleet" extra (dask[distributed], duckdb, pyarrow, plotly); nothing outside this
subpackage imports it, so the node runs without them.
"""
