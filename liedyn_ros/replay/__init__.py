"""Rosbag replay through the liedyn dynamics, without a ROS install.

`replay(paths, ReplayOptions(out=...))` reads the bags (ROS 1, rosbag2 sqlite3/mcap, merged
in time), runs every joint state through the shared pipeline (`liedyn_ros.pipeline`) in
blocks, and writes an mcap bag with the /liedyn/... outputs, CSV files, a per-joint
residual summary (summary.json) and PNG plots. `liedyn-replay` is its command line.
"""

from __future__ import annotations

from .accel import SavgolSettings, differentiate
from .errors import ReplayError
from .run import ReplayOptions, ReplayReport, replay

__all__ = ["ReplayError", "ReplayOptions", "ReplayReport", "SavgolSettings", "differentiate", "replay"]
