"""Rosbag replay through the liedyn dynamics, without a ROS install.

`replay(paths, ReplayOptions(out=...))` reads the bags (ROS 1, rosbag2 sqlite3/mcap, merged
in time), runs every joint state through the shared pipeline (`liedyn_ros.pipeline`) in
blocks, and writes an mcap bag with the /liedyn/... outputs, CSV files, a per-joint
residual summary (summary.json) and PNG plots. `liedyn-replay` is its command line.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ReplayError

# Where each name lives; imported on first use (PEP 562), so that `liedyn-replay --help`, which
# imports this package, does not wait for numpy, scipy and numba.
_LAZY = {"SavgolSettings": "accel", "differentiate": "accel",
         "ReplayOptions": "run", "ReplayReport": "run", "replay": "run"}

__all__ = ["ReplayError", "ReplayOptions", "ReplayReport", "SavgolSettings", "differentiate", "replay"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
