"""Single-sample kernels locked to one signature, so that a call with anything else is cheap to refuse.

The public functions hand the caller's arrays straight to these kernels. Locked to float64
C-contiguous arrays, the numba dispatcher raises TypeError for lists, other dtypes, strided or
read-only arrays and batches, and the caller then takes the general path; lengths, NaN and the
pose are checked inside the kernel. Compiling (or loading from numba's cache) happens once per
process, when the first model is prepared.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from numba import types

__all__ = ["compile_single_kernels"]

_VEC = types.float64[::1]
_MAT = types.float64[:, ::1]
_INT = types.int64[:, ::1]
_done = False


def _signatures() -> list:
    from . import aba, coriolis, crba, rnea

    model = (_MAT, _INT, _VEC)  # mf, mi, ws
    return [
        (rnea.rnea_one, types.int64(*model, _VEC, _VEC, _VEC, _MAT, _VEC)),
        (rnea.gravity_one, types.int64(*model, _VEC, _MAT, _VEC)),
        (crba.mass_matrix_one, types.int64(*model, _VEC, _MAT, _MAT)),
        (coriolis.coriolis_one, types.int64(*model, _VEC, _VEC, _MAT, _MAT)),
        (aba.hybrid_one, types.int64(*model, _VEC, _VEC, _VEC, types.boolean[::1], _MAT, _VEC, _VEC)),
    ]


def _drop_stale_cache() -> None:
    """Delete numba's cached kernels when any source file of this package changed.

    Numba keys a cached function on its own file only: a kernel in rnea.py would keep an old
    inlined step of spatial.py. A stamp of all sources in __pycache__ catches that.
    """
    here = Path(__file__).parent
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in sorted(here.glob("*.py")))).hexdigest()
    cache = here / "__pycache__"
    stamp = cache / "liedyn_fast.stamp"
    try:
        if stamp.read_text() == digest:
            return
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for f in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
            f.unlink()
        stamp.write_text(digest)
    except OSError:  # a read-only install: numba caches elsewhere (NUMBA_CACHE_DIR) or not at all
        pass


def compile_single_kernels() -> None:
    """Compile every single-sample kernel for its one signature and forbid other signatures."""
    global _done
    if _done:
        return
    _drop_stale_cache()
    for kernel, signature in _signatures():
        kernel.compile(signature)
        kernel.disable_compile()
    _done = True
