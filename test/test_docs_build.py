"""The documentation (docs/, Sphinx with MyST pages and the API reference from the docstrings)
builds with warnings as errors, without ROS: a broken link target, a missing page in the index,
an unreadable image or a docstring autodoc cannot import fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_without_warnings(tmp_path):
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(ROOT / "docs"), str(tmp_path / "html"), "-d", str(tmp_path / "doctrees")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    html = (tmp_path / "html" / "reference.html").read_text()
    for name in ("liedyn_ros.core.rnea", "liedyn_ros.core.aba", "liedyn_ros.replay.replay",
                 "liedyn_ros.fleet.cli.main", "liedyn_ros.pipeline.DynamicsPipeline"):
        assert f'id="{name}"' in html, f"{name} missing from the API reference"
