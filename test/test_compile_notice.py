"""A line on stderr before numba's first compilation in a process, and none when the kernels come
from the cache or a compilation is refused (the node's load_cached)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from liedyn_ros.core.fast.notice import NOTICE

KERNEL = "import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
RUN = ("import sys; sys.path.insert(0, sys.argv[1]); import liedyn_ros.core; import kernel; "
       "print('before', file=sys.stderr, flush=True); kernel.twice(1); kernel.twice(2.0); kernel.twice(3)")


def _stderr(code: str, *args: str, cache: Path) -> str:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stderr


def test_notice_once_before_compiling_and_not_for_cached_kernels(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL)
    first = _stderr(RUN, str(tmp_path), cache=tmp_path / "cache")
    assert first.count(NOTICE) == 1, first               # two signatures compiled, one line
    assert first.index("before") < first.index(NOTICE)   # printed when compiling starts
    again = _stderr(RUN, str(tmp_path), cache=tmp_path / "cache")
    assert NOTICE not in again                            # loaded from the cache


def test_no_notice_when_compilation_is_refused(tmp_path):
    code = ("from liedyn_ros.core.fast.warmup import load_cached; "
            "print(load_cached(('gravity_one',)))")
    out = _stderr(code, cache=tmp_path / "empty")
    assert NOTICE not in out
