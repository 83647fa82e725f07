"""Fast CSV text for numeric blocks.

Python's float formatting costs about a microsecond per number, and a numpy formulation
still about half of that (many passes over (N, k, 22) byte arrays), more than the dynamics
itself for the 35 numbers a 7-DoF sample writes. So one numba kernel writes whole blocks:
15 significant digits in scientific notation (relative error about 1e-15), trailing zeros
dropped, `nan`/`inf` spelled as Python does, zero as `0`. The kernel is cached on disk
like the core's kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

_SIG = 15  # significant digits
_INT_WIDTH = 20  # sign and up to 19 digits of an int64
_FLOAT_WIDTH = 22  # sign, d.dddddddddddddd, e, exponent sign, up to 3 digits
# Powers of ten as constants (numba freezes global arrays): integer ones up to 10**18, and
# the float ones numpy's power gives for exponents -310..310.
_POW10_INT = np.array([10**i for i in range(19)], dtype=np.int64)
_POW10_MIN = -310
with np.errstate(over="ignore"):  # 10**309 and 10**310 are inf, and never used
    _POW10 = 10.0 ** np.arange(_POW10_MIN, 311, dtype=np.float64)


def format_rows(stamps_ns: NDArray[np.int64], values: NDArray[np.float64]) -> bytes:
    """CSV lines `stamp,v0,v1,…\\n` for (N,) stamps and (N, k) values."""
    stamps = np.ascontiguousarray(stamps_ns, dtype=np.int64)
    vals = np.ascontiguousarray(values, dtype=np.float64)
    n, k = vals.shape
    out = np.empty(n * (_INT_WIDTH + k * (1 + _FLOAT_WIDTH) + 1), dtype=np.uint8)
    used = _format_block(stamps, vals, out)
    return out[:used].tobytes()


@numba.njit(cache=True)
def _format_block(stamps: NDArray[np.int64], values: NDArray[np.float64], out: NDArray[np.uint8]) -> int:
    pos = 0
    for i in range(values.shape[0]):
        pos = _write_int(out, pos, stamps[i])
        for j in range(values.shape[1]):
            out[pos] = 44  # ','
            pos = _write_float(out, pos + 1, values[i, j])
        out[pos] = 10  # '\n'
        pos += 1
    return pos


@numba.njit(cache=True)
def _write_digits(out: NDArray[np.uint8], pos: int, value: int | np.uint64, count: int) -> int:
    """Exactly `count` decimal digits of non-negative `value`, most significant first.
    Unsigned arithmetic: numba's signed // and % carry Python's floor semantics, four
    times slower here."""
    v = np.uint64(value)
    ten = np.uint64(10)
    for d in range(count - 1, -1, -1):
        out[pos + d] = np.uint8(48 + v % ten)
        v //= ten
    return pos + count


@numba.njit(cache=True)
def _write_int(out: NDArray[np.uint8], pos: int, value: int) -> int:
    if value < 0:
        out[pos] = 45  # '-'
        pos += 1
        value = -value
    count = 1
    while count < 19 and value >= _POW10_INT[count]:
        count += 1
    return _write_digits(out, pos, value, count)


@numba.njit(cache=True)
def _write_word(out: NDArray[np.uint8], pos: int, word: bytes) -> int:
    for c in word:
        out[pos] = c
        pos += 1
    return pos


@numba.njit(cache=True)
def _write_float(out: NDArray[np.uint8], pos: int, x: float) -> int:
    if np.isnan(x):
        return _write_word(out, pos, b"nan")
    if np.isinf(x):
        return _write_word(out, pos, b"inf" if x > 0 else b"-inf")
    if x == 0.0:
        out[pos] = 48
        return pos + 1
    if x < 0:
        out[pos] = 45
        pos += 1
    mag = abs(x)
    exp = int(np.floor(np.log10(mag)))
    # Subnormals: 10.0**exp underflows below 1e-308, so scale them up first.
    scale = 1e300 if exp < -290 else 1.0
    shift = exp + 300 if exp < -290 else exp
    mant = mag * scale / _POW10[shift - _POW10_MIN]
    # log10 may be off by one at exact powers of ten; the mantissa check fixes it.
    step = (1 if mant >= 10.0 else 0) - (1 if mant < 1.0 else 0)
    exp += step
    shift += step
    mant = mag * scale / _POW10[shift - _POW10_MIN]
    digits = np.uint64(np.rint(mant * _POW10[_SIG - 1 - _POW10_MIN]))
    if digits >= np.uint64(_POW10_INT[_SIG]):  # 9.99…95 rounded up to 10
        digits = np.uint64(_POW10_INT[_SIG - 1])
        exp += 1
    # Drop trailing zeros of the fraction, and the point when nothing is left.
    ten = np.uint64(10)
    count = _SIG
    while count > 1 and digits % ten == 0:
        digits //= ten
        count -= 1
    unit = np.uint64(_POW10_INT[count - 1])
    lead = digits // unit
    out[pos] = np.uint8(48 + lead)
    pos += 1
    if count > 1:
        out[pos] = 46  # '.'
        pos = _write_digits(out, pos + 1, digits - lead * unit, count - 1)
    out[pos] = 101  # 'e'
    out[pos + 1] = 45 if exp < 0 else 43
    return _write_digits(out, pos + 2, abs(exp), 3 if abs(exp) >= 100 else 2)
