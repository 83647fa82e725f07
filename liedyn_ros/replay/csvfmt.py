"""Fast CSV text for numeric blocks.

Python's float formatting costs about a microsecond per number, more than the dynamics
itself, so the replay formats whole blocks with numpy: 15 significant digits in scientific
notation (relative error about 1e-15), trailing zeros dropped, `nan`/`inf` spelled as
Python does. Every row is laid out at a fixed width padded with NUL bytes, which are
then removed in one pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

_SIG = 15  # significant digits
_PAD = 0
_ZERO = ord("0")


def _ascii(text: str) -> NDArray[np.uint8]:
    return np.frombuffer(text.encode(), dtype=np.uint8)


# ASCII of 0000..9999: four digits per integer division instead of one.
_QUADS = np.array([list(f"{i:04d}".encode()) for i in range(10_000)], dtype=np.uint8)
_QUADS_U32 = _QUADS.view(np.uint32).ravel()


def _digits(values: NDArray[np.int64], count: int) -> NDArray[np.uint8]:
    """(…,) non-negative integers -> (…, count) ASCII digits, most significant first."""
    groups = -(-count // 4)
    powers = 10_000 ** np.arange(groups - 1, -1, -1, dtype=np.int64)
    quads = (values[..., None] // powers) % 10_000
    # Gather each group's four characters as one uint32: a quarter of the indexing work.
    chars = _QUADS_U32[quads].view(np.uint8)
    return chars.reshape(values.shape + (4 * groups,))[..., 4 * groups - count :]


def format_ints(values: NDArray[np.int64]) -> NDArray[np.uint8]:
    """(N,) int64 -> (N, 20) padded ASCII (sign, then up to 19 digits)."""
    values = np.asarray(values, dtype=np.int64)
    out = np.full(values.shape + (20,), _PAD, dtype=np.uint8)
    out[..., 1:] = _digits(np.abs(values), 19)
    leading = np.cumsum(out[..., 1:] != _ZERO, axis=-1) == 0
    leading[..., -1] = False  # keep one digit for 0
    out[..., 1:][leading] = _PAD
    out[..., 0] = np.where(values < 0, ord("-"), _PAD)
    return out


def format_floats(values: NDArray[np.float64]) -> NDArray[np.uint8]:
    """(…,) float64 -> (…, 22) padded ASCII like `-1.23456789012345e-05`."""
    x = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(x)
    mag = np.where(finite & (x != 0), np.abs(x), 1.0)
    exp = np.floor(np.log10(mag)).astype(np.int64)
    # log10 may be off by one at exact powers of ten; the mantissa check fixes it.
    # Subnormals: 10.0**exp underflows below 1e-308, so scale them up first.
    tiny = exp < -290
    mag = mag * np.where(tiny, 1e300, 1.0)
    shift = np.where(tiny, exp + 300, exp)
    mant = mag / 10.0**shift
    step = (mant >= 10.0).astype(np.int64) - (mant < 1.0).astype(np.int64)
    exp += step
    shift += step
    mant = mag / 10.0**shift
    digits = np.rint(mant * 10.0 ** (_SIG - 1)).astype(np.int64)
    carry = digits >= 10 ** _SIG  # 9.99…95 rounded up to 10
    digits = np.where(carry, 10 ** (_SIG - 1), digits)
    exp += carry

    out = np.full(x.shape + (22,), _PAD, dtype=np.uint8)
    out[..., 0] = np.where(np.signbit(x) & (x != 0), ord("-"), _PAD)
    d = _digits(digits, _SIG)
    out[..., 1] = d[..., 0]
    out[..., 2] = ord(".")
    frac = d[..., 1:]
    # Drop trailing zeros of the fraction, and the point when nothing is left.
    nonzero = frac != _ZERO
    last = _SIG - 2 - np.argmax(nonzero[..., ::-1], axis=-1)
    last = np.where(nonzero.any(axis=-1), last, -1)
    keep = np.arange(_SIG - 1) <= last[..., None]
    out[..., 3 : 3 + _SIG - 1] = np.where(keep, frac, _PAD)
    out[..., 2] = np.where(keep[..., 0], ord("."), _PAD)
    out[..., 17] = ord("e")
    out[..., 18] = np.where(exp < 0, ord("-"), ord("+"))
    e3 = _digits(np.abs(exp), 3)
    out[..., 19] = np.where(np.abs(exp) >= 100, e3[..., 0], _PAD)
    out[..., 20:22] = e3[..., 1:]

    _spell(out, x == 0, "0")
    _spell(out, np.isnan(x), "nan")
    _spell(out, np.isposinf(x), "inf")
    _spell(out, np.isneginf(x), "-inf")
    return out


def _spell(out: NDArray[np.uint8], mask: NDArray[np.bool_], word: str) -> None:
    if mask.any():
        row = np.full(out.shape[-1], _PAD, dtype=np.uint8)
        row[: len(word)] = _ascii(word)
        out[mask] = row


def format_rows(stamps_ns: NDArray[np.int64], values: NDArray[np.float64]) -> bytes:
    """CSV lines `stamp,v0,v1,…\\n` for (N,) stamps and (N, k) values."""
    n, k = values.shape
    width = 20 + 23 * k + 1
    line = np.empty((n, width), dtype=np.uint8)
    line[:, :20] = format_ints(stamps_ns)
    cells = line[:, 20:-1].reshape(n, k, 23)
    cells[:, :, 0] = ord(",")
    cells[:, :, 1:] = format_floats(values)
    line[:, -1] = ord("\n")
    flat = line.reshape(-1)
    return flat[flat != _PAD].tobytes()
