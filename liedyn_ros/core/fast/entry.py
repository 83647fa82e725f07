"""Single-sample kernels locked to one signature, so that a call with anything else is cheap to refuse.

The public functions hand the caller's arrays straight to these kernels. Locked to float64
C-contiguous arrays, the numba dispatcher raises TypeError for lists, other dtypes, strided or
read-only arrays and batches, and the caller then takes the general path; lengths, NaN and the
pose are checked inside the kernel. Compiling (or loading from numba's cache) happens once per
process, when the first model is prepared.
"""
from __future__ import annotations

from numba import types

__all__ = ["compile_single_kernels"]

_VEC = types.float64[::1]
_MAT = types.float64[:, ::1]
_INT = types.int64[:, ::1]
_done = False


def _signatures() -> list:
    from . import rnea

    model = (_MAT, _INT, _VEC)  # mf, mi, ws
    return [
        (rnea.rnea_one, types.int64(*model, _VEC, _VEC, _VEC, _MAT, _VEC)),
        (rnea.gravity_one, types.int64(*model, _VEC, _MAT, _VEC)),
    ]


def compile_single_kernels() -> None:
    """Compile every single-sample kernel for its one signature and forbid other signatures."""
    global _done
    if _done:
        return
    for kernel, signature in _signatures():
        kernel.compile(signature)
        kernel.disable_compile()
    _done = True
