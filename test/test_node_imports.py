"""The node's start-up imports only what its samples need: importing liedyn_ros.pipeline (the whole
computation the node runs, ROS-free) loads none of the libraries of identification, plots, bags,
storage or fleet work. scipy.linalg alone was 0.25 s of the node's 1.2-1.5 s of imports, and the
issue's first output is due within 2 s of the start. Checked by sys.modules in a fresh interpreter,
not by a timing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_FOR_THE_NODE = ("scipy.linalg", "scipy.optimize", "scipy.special", "scipy.signal", "cvxpy", "matplotlib",
                    "rosbags", "tqdm", "duckdb", "pyarrow", "dask")


def test_the_pipeline_imports_nothing_the_node_does_not_use():
    probe = f"import sys, liedyn_ros.pipeline; print(*[m for m in {NOT_FOR_THE_NODE!r} if m in sys.modules])"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", probe], check=False, env=env, text=True, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []
