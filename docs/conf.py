"""Sphinx configuration of liedyn_ros' documentation: Markdown pages through MyST, the API reference
from the docstrings through autodoc. Builds without ROS: the rclpy and message packages are mocked."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "liedyn_ros"
author = "liedyn_ros developers"
copyright = "liedyn_ros developers, Apache-2.0"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.mathjax"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

autodoc_mock_imports = ["rclpy", "sensor_msgs", "nav_msgs", "geometry_msgs", "std_msgs", "trajectory_msgs",
                        "diagnostic_msgs", "lifecycle_msgs", "rcl_interfaces", "builtin_interfaces",
                        "launch", "launch_ros", "launch_testing",
                        # the fleet extra: the reference documents liedyn-fleet without it installed
                        "dask", "distributed", "duckdb", "pyarrow", "plotly"]
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the signatures show the annotations as written; numpy aliases stay short
autosummary_generate = False

html_theme = "alabaster"
html_static_path: list[str] = []


def _docstring_as_written(app, what, name, obj, options, lines):
    """The docstrings are plain text in the papers' notation (|r_j|, indented equations, doctests),
    not reStructuredText: show each one as written, in a literal block."""
    if any(line.strip() for line in lines):
        lines[:] = ["::", ""] + [("    " + line) if line.strip() else "" for line in lines] + [""]


def setup(app):
    app.connect("autodoc-process-docstring", _docstring_as_written)
