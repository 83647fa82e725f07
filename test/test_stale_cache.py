"""A source change drops the compiled kernels numba cached from the old sources wherever numba
keeps them, NUMBA_CACHE_DIR included (before: only __pycache__ was cleaned, so a node run with
NUMBA_CACHE_DIR could load kernels that inline an old step: silently wrong torques).

numba is asked where it caches a kernel of each folder (its dispatcher's cache path) in a fresh
interpreter, since NUMBA_CACHE_DIR is read once at numba's import.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Imports the package (which drops stale caches at import) and prints numba's own cache folder of
# a kernel of fast/, of derivatives/ and of constraints/fast.py.
WHERE = """
import json
from liedyn_ros.core.fast.entry import _signature
print(json.dumps([_signature(k)[0]._cache._cache_path
                  for k in ("gravity_one", "derivatives_one", "constrained_aba_one")]))
"""


def numba_cache_paths(env: dict[str, str]) -> list[Path]:
    out = subprocess.run([sys.executable, "-c", WHERE], env=env, capture_output=True, text=True, check=True)
    return [Path(p) for p in json.loads(out.stdout.strip().splitlines()[-1])]


def test_a_stale_stamp_drops_the_kernels_cached_in_numba_cache_dir(tmp_path: Path) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    caches = numba_cache_paths(env)
    assert all(str(c).startswith(str(tmp_path)) for c in caches), caches  # numba does cache there
    stamps = [c / "liedyn_fast.stamp" for c in caches]
    assert all(s.is_file() for s in stamps)  # stamped before numba writes its first kernel there
    digest = stamps[0].read_text()
    kernels = [c / f"old_kernel-{i}.py311.nbi" for i, c in enumerate(caches)]
    for k in kernels:
        k.write_bytes(b"compiled from the old sources")
    numba_cache_paths(env)  # sources unchanged: the cached kernels stay
    assert all(k.exists() for k in kernels)
    for s in stamps:
        s.write_text("the digest of other sources")
    numba_cache_paths(env)
    assert not any(k.exists() for k in kernels)
    assert all(s.read_text() == digest for s in stamps)
