"""Offline acceleration estimate: Savitzky-Golay derivative of the recorded velocities.

Offline means non-causal: every sample sees `window // 2` samples on each side, so the
estimate has no lag. The stamps drive the derivative: a run of evenly spaced samples is
filtered directly (`scipy.signal.savgol_filter`, exact Savitzky-Golay); a run with jitter or
dropped samples is resampled on an even grid at its median step with a cubic spline,
filtered, and interpolated back to the stamps. A step longer than `gap_factor` times the
median starts a new run, so no derivative is taken across a gap.

`StreamingDifferentiator` does the same over a stream of blocks with bounded memory: it
holds back the last half window of samples until their right-hand neighbours arrive, and
keeps a window of already emitted samples as left context, so the result equals one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.signal import savgol_filter

if TYPE_CHECKING:
    from collections.abc import Iterator

    from numpy.typing import NDArray

    from .samples import SampleBlock

# Steps within this fraction of the median count as evenly spaced.
_EVEN_TOLERANCE = 1e-3


@dataclass(frozen=True)
class SavgolSettings:
    """window: samples in the fit (odd); polyorder: degree of the local polynomial;
    gap_factor: a step longer than this times the median step starts a new run."""

    window: int = 15
    polyorder: int = 3
    gap_factor: float = 5.0

    def __post_init__(self) -> None:
        if self.window < 3 or self.window % 2 == 0:
            raise ValueError(f"window must be odd and >= 3, got {self.window}")
        if not 1 <= self.polyorder < self.window:
            raise ValueError(f"polyorder must be in [1, window), got {self.polyorder}")
        if self.gap_factor <= 1.0:
            raise ValueError(f"gap_factor must be > 1, got {self.gap_factor}")

    @property
    def half(self) -> int:
        return self.window // 2


def run_starts(stamps_ns: NDArray[np.int64], gap_factor: float) -> NDArray[np.intp]:
    """Indices where a run of samples without a gap begins (always includes 0)."""
    if len(stamps_ns) < 2:
        return np.zeros(min(len(stamps_ns), 1), dtype=np.intp)
    steps = np.diff(stamps_ns)
    typical = np.median(steps)
    gaps = np.flatnonzero(steps > gap_factor * typical) + 1
    return np.concatenate(([0], gaps)).astype(np.intp)


def differentiate(
    stamps_ns: NDArray[np.int64], values: NDArray[np.float64], settings: SavgolSettings
) -> NDArray[np.float64]:
    """d(values)/dt at every stamp, run by run; NaN for a run of one sample, and for an uneven
    run whose slopes overflow float64 (values near 1e308: the splines refuse them).

    stamps_ns: (N,) strictly increasing; values: (N, k). Returns (N, k).
    """
    out = np.full(values.shape, np.nan)
    bounds = list(run_starts(stamps_ns, settings.gap_factor)) + [len(stamps_ns)]
    for begin, end in zip(bounds[:-1], bounds[1:]):
        t = (stamps_ns[begin:end] - stamps_ns[begin]) * 1e-9
        out[begin:end] = _run_derivative(t, values[begin:end], settings)
    return out


def _run_derivative(
    t: NDArray[np.float64], v: NDArray[np.float64], settings: SavgolSettings
) -> NDArray[np.float64]:
    m = len(t)
    if m == 1:
        return np.full(v.shape, np.nan)
    if m <= settings.polyorder + 1:
        # Too short for a smoothing fit: plain differences are the honest estimate.
        return np.gradient(v, t, axis=0)
    steps = np.diff(t)
    step = float(np.median(steps))
    if np.max(np.abs(steps - step)) <= _EVEN_TOLERANCE * step:
        return _savgol(v, step, settings)
    grid = t[0] + step * np.arange(int(round((t[-1] - t[0]) / step)) + 1)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            on_grid = CubicSpline(t, v, axis=0)(grid)
            return CubicSpline(grid, _savgol(on_grid, step, settings), axis=0)(t)
    except ValueError:  # CubicSpline refuses slopes that overflow: values too large to differentiate
        return np.full(v.shape, np.nan)


def _savgol(v: NDArray[np.float64], step: float, settings: SavgolSettings) -> NDArray[np.float64]:
    m = len(v)
    window = min(settings.window, m if m % 2 else m - 1)
    order = min(settings.polyorder, window - 1)
    return savgol_filter(v, window, order, deriv=1, delta=step, axis=0, mode="interp")


class StreamingDifferentiator:
    """Feeds blocks of samples and yields (block, acceleration) once they are final."""

    def __init__(self, settings: SavgolSettings) -> None:
        self.settings = settings
        self._pending: SampleBlock | None = None
        self._context = 0  # leading samples of _pending that were already emitted

    def feed(self, block: SampleBlock) -> Iterator[tuple[SampleBlock, NDArray[np.float64]]]:
        buf = block if self._pending is None else self._pending.concat(block)
        self._pending = buf
        end = len(buf) - self.settings.half
        # The first samples of a run are fitted over the run's first window: hold the
        # newest run back until a full window of it has arrived.
        newest = int(run_starts(buf.stamp_ns, self.settings.gap_factor)[-1])
        if len(buf) - newest < self.settings.window:
            end = min(end, newest)
        if end > self._context:
            yield from self._emit(end)

    def finish(self) -> Iterator[tuple[SampleBlock, NDArray[np.float64]]]:
        if self._pending is not None and len(self._pending) > self._context:
            yield from self._emit(len(self._pending))
        self._pending = None
        self._context = 0

    def _emit(self, end: int) -> Iterator[tuple[SampleBlock, NDArray[np.float64]]]:
        buf = self._pending
        assert buf is not None
        accel = differentiate(buf.stamp_ns, buf.v, self.settings)
        yield buf.slice(self._context, end), accel[self._context : end]
        # Keep a full window before the held samples: at the end of the stream they are
        # fitted over the last `window` samples, exactly as in one pass over everything.
        keep_from = max(0, end - 2 * self.settings.half)
        self._pending = buf.slice(keep_from, len(buf))
        self._context = end - keep_from
