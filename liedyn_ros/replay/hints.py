"""What is wrong with a recording: summary.json's "hints", one line each under the table.

Each hint is {"code", "message", "evidence"} (docs/contract.md). They compare the measured effort e
with the model's torque p (the RNEA torque at the estimated acceleration, tau_ff) on the joints
whose torque varies:

- `gravity_off`: the residual e - p is minus the gravity torque (a simulation without gravity);
  the diagnoses below then compare e with p - g.
- `time_offset`: e(t) matches p(t - lag) better than p(t): the lag maximises the mean over the
  joints of corr(e(t), p(t - lag))^2 (cross-correlation on a uniform grid, refined by a parabola
  through the peak); "lag_s" > 0: the efforts are later than the states. The diagnoses below
  compare them at that lag.
- `joint_order`: the effort named after joint i follows joint k's torque (the assignment of
  efforts to torques with the largest total corr^2, scipy's linear_sum_assignment).
- `sign_flip`, `effort_scale`: e_j = k_j p_j + c_j with k_j near -1, or |k_j| far from 1 (a gear
  ratio, a current): the slope of the least-squares line, when it explains most of e_j.
- `missing_effort`: many samples without a measured effort, and why (before the first command,
  after the last, a pause longer than the commands' age limit, joints no command names).

`Clues` reads every sample once, as the replay streams them, in bounded memory: it counts the
samples without an effort, sums what `gravity_off` needs, and resamples the samples with an effort a
chunk at a time onto a uniform grid whose cross-correlation sums (per lag, FFT) add up over the
whole recording (`LagSums`); the diagnoses read those sums at the end.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import fft as sp_fft

from .samples import EFFORT_MAX_AGE_NS

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .bagio import BagSet
    from .samples import SampleBlock, Topics
    from .summary import ResidualSummary

CHUNK_ROWS = 1 << 12  # samples with an effort resampled and correlated together
GRID_MAX = 1 << 13  # grid points per FFT (memory: about GRID_MAX x (2 n^2 + 7 n) x 24 bytes)
LOADED_SHARE = 0.1  # a joint counts when its torque's spread is 10% of the largest joint's
# gravity_off: the residual regressed on the gravity torque, over the joints gravity loads
GRAVITY_SLOPE_TOLERANCE = 0.15  # |k + 1| below this: the residual is minus the gravity torque
GRAVITY_MIN_R2 = 0.8  # share of the residual's energy the gravity torque explains
# time_offset
MAX_LAG_S = 0.3  # beyond the motion's own time scale a correlation peak means nothing
# the share of the efforts' variance the torque leaves unexplained falls to this part of its value
# at zero lag, and by at least LAG_MIN_GAIN
LAG_MIN_REDUCTION = 0.9
LAG_MIN_GAIN = 0.01
LAG_MIN_SAMPLES = 0.5  # and the lag is at least half a sample period
# joint_order, sign_flip, effort_scale: how well a line explains an effort
FIT_MIN_R2 = 0.8
# joint_order: another joint's torque leaves at most this part of what its own leaves unexplained
ORDER_MAX_UNEXPLAINED = 0.25
ROUND_OFF = 1e-9  # a variance below this share of the sum of squares is round-off: zero
SCALE_RANGE = (0.67, 1.5)  # |k| outside: another unit or a gear ratio, not a model error
MISSING_SHARE = 0.01  # more samples than this without an effort are told


@dataclass
class Clues:
    """What the hints need, sample by sample over the whole recording: the count of samples
    without an effort (before the first, after the last, between), the sums of `gravity_off`,
    and the lag sums of the samples with an effort (`LagSums`, CHUNK_ROWS at a time)."""

    joint_names: tuple[str, ...]
    topics: Topics
    effort_delay: float = 0.0  # s, --effort-delay: already applied to the efforts
    samples: int = 0
    first_ns: int | None = None  # first sample's stamp
    last_ns: int | None = None
    first_effort: tuple[int, int] | None = None  # (stamp, samples before it)
    last_effort: tuple[int, int] | None = None  # (stamp, samples up to and with it)
    partial: int = 0  # samples with an effort on some joints only
    full: int = 0  # samples with an effort on every joint
    receive_ns: tuple[int, int] | None = None  # first and last receive time
    # gravity_off over the samples with an effort, per joint: e.e, e.p, p.p, and (e - p + g).(e - p + g)
    products: NDArray[np.float64] = field(init=False)
    lags: LagSums | None = None  # from the first chunk on
    _stamps: list[NDArray[np.int64]] = field(default_factory=list)  # the chunk being filled
    _rows: list[NDArray[np.float64]] = field(default_factory=list)  # (N, 3, n): effort, tau_ff, tau_g
    _buffered: int = 0

    def __post_init__(self) -> None:
        self.products = np.zeros((4, len(self.joint_names)))

    def add(self, block: SampleBlock, out: Any) -> None:
        """A block's samples and outputs (pipeline.DynamicsOutputs)."""
        if not len(block):
            return
        finite = np.isfinite(block.effort)
        full, some = finite.all(axis=1), finite.any(axis=1)
        self.partial += int((some & ~full).sum())
        if self.first_ns is None:
            self.first_ns = int(block.stamp_ns[0])
        self.last_ns = int(block.stamp_ns[-1])
        first_receive = int(block.receive_ns[0]) if self.receive_ns is None else self.receive_ns[0]
        self.receive_ns = (first_receive, int(block.receive_ns[-1]))
        self.full += int(full.sum())
        with_effort = np.flatnonzero(full)
        if len(with_effort):
            if self.first_effort is None:
                self.first_effort = (int(block.stamp_ns[with_effort[0]]), self.samples + int(with_effort[0]))
            self.last_effort = (int(block.stamp_ns[with_effort[-1]]), self.samples + int(with_effort[-1]) + 1)
        self.samples += len(block)
        if not len(with_effort):
            return
        e, p, g = block.effort[with_effort], out.tau_ff[with_effort], out.tau_g[with_effort]
        r = e - p + g
        self.products += np.stack([(e * e).sum(axis=0), (e * p).sum(axis=0), (p * p).sum(axis=0), (r * r).sum(axis=0)])
        self._stamps.append(block.stamp_ns[with_effort])
        self._rows.append(np.stack([e, p, g], axis=1))
        self._buffered += len(with_effort)
        if self._buffered >= CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        """Adds the samples kept so far to the lag sums (the first chunk of at least 20 samples
        fixes the grid's period and offsets)."""
        if not self._buffered:
            return
        stamps, rows = np.concatenate(self._stamps), np.concatenate(self._rows)
        if self.lags is None:
            if len(stamps) < 20:
                return  # too few to tell a sample period: wait for more (or nothing to compare)
            self.lags = LagSums.start(stamps, rows)
        self.lags.add(stamps, rows)
        self._stamps, self._rows, self._buffered = [], [], 0


@dataclass
class LagSums:
    """Sums over the pairs of valid grid points (t + l dt, t), per lag l in -L..L, of the effort e
    at t + l dt and the torque p and gravity torque g at t: the count N, e, e^2, p, p^2, g, g^2,
    p g per joint and e_i p_k, e_i g_k per pair of joints; so the Pearson correlation of e(t + l dt)
    with p(t) or p(t) - g(t) over the whole recording, at any lag, for any pair of joints.

    The samples are resampled (linear) on a uniform grid of period `dt` (the first chunk's median
    sample period); a grid point counts when a sample is within dt of it (no interpolation across
    gaps). Runs of samples more than MAX_LAG_S apart are correlated apart (no pair spans such a
    gap); pairs across the boundary of two chunks are not counted (L of CHUNK_ROWS per lag at
    most). `offset` (the first chunk's means, subtracted) keeps the sums well conditioned."""

    dt: float
    half: int  # L
    offset: NDArray[np.float64]  # (3, n)
    count: NDArray[np.float64] = field(init=False)  # (2L + 1,)
    single: NDArray[np.float64] = field(init=False)  # (7, 2L + 1, n): e, ee, p, pp, g, gg, pg
    cross: NDArray[np.float64] = field(init=False)  # (2, 2L + 1, n, n): e_i p_k, e_i g_k
    rows: int = 0  # samples with an effort added
    span_ns: tuple[int, int] | None = None  # first and last of their stamps

    @classmethod
    def start(cls, stamps: NDArray[np.int64], rows: NDArray[np.float64]) -> LagSums:
        dt = float(np.median(np.diff(stamps))) * 1e-9
        return cls(dt, max(1, int(MAX_LAG_S / dt)), rows.mean(axis=0))

    def __post_init__(self) -> None:
        lags, n = 2 * self.half + 1, self.offset.shape[1]
        self.count, self.single, self.cross = np.zeros(lags), np.zeros((7, lags, n)), np.zeros((2, lags, n, n))

    def add(self, stamps: NDArray[np.int64], rows: NDArray[np.float64]) -> None:
        self.rows += len(stamps)
        self.span_ns = (int(stamps[0]) if self.span_ns is None else self.span_ns[0], int(stamps[-1]))
        rows = rows - self.offset
        t = (stamps - stamps[0]) * 1e-9
        for a, b in self._groups(t):
            self._correlate(t[a:b], rows[a:b])

    def _groups(self, t: NDArray[np.float64]) -> list[tuple[int, int]]:
        """Row ranges correlated apart: runs split where samples are more than MAX_LAG_S apart,
        and cut so that none spans more than GRID_MAX grid points."""
        cuts = [0]
        for i in (np.flatnonzero(np.diff(t) > MAX_LAG_S) + 1).tolist() + [len(t)]:
            while (t[i - 1] - t[cuts[-1]]) / self.dt >= GRID_MAX:
                cuts.append(int(np.searchsorted(t, t[cuts[-1]] + (GRID_MAX - 1) * self.dt, side="right")))
            cuts.append(i)
        return [(a, b) for a, b in itertools.pairwise(cuts) if b - a >= 2]

    def _correlate(self, t: NDArray[np.float64], rows: NDArray[np.float64]) -> None:
        """Adds one run's sums, from masked cross-correlations of its grid: sum_t a(t + l dt) b(t)
        is the inverse transform of A conj(B) at l (zero-padded: no wrap-around within +-L); all
        series go through one forward and one inverse transform."""
        dt, half, n = self.dt, self.half, rows.shape[2]
        grid = np.arange(t[0], t[-1] + dt / 2, dt)
        at = np.clip(np.searchsorted(t, grid), 1, len(t) - 1)
        m = (np.minimum(np.abs(t[at] - grid), np.abs(t[at - 1] - grid)) <= dt).astype(np.float64)
        flat = rows.reshape(len(t), 3 * n)
        x = np.stack([np.interp(grid, t, flat[:, c]) for c in range(3 * n)]) * m  # (3n, grid): e, p, g rows
        e, p, g = x[:n], x[n:2 * n], x[2 * n:]
        size = sp_fft.next_fast_len(len(grid) + half + 1, real=True)
        spec = np.fft.rfft(np.concatenate([m[None], x, e * e, p * p, g * g, p * g]), size, axis=-1)
        M, E, P, G = spec[0], spec[1:n + 1], spec[n + 1:2 * n + 1], spec[2 * n + 1:3 * n + 1]
        squares = spec[3 * n + 1:]  # e^2, p^2, g^2, p g
        # (count, e, e^2) pair the effort at t + l dt with the mask at t; (p, p^2, g, g^2, p g) the other way
        single = np.concatenate([(M * np.conj(M))[None], E * np.conj(M), squares[:n] * np.conj(M),
                                 M * np.conj(np.concatenate([P, squares[n:2 * n], G, squares[2 * n:]]))])
        cross = (E[:, None, :] * np.conj(np.concatenate([P, G]))[None, :, :]).reshape(2 * n * n, -1)
        full = np.fft.irfft(np.concatenate([single, cross]), size, axis=-1)
        lagged = np.concatenate([full[:, size - half:], full[:, : half + 1]], axis=1)  # lags -L..L
        self.count += lagged[0]
        # single rows: e, e^2, p, p^2, g, g^2, p g (n each) -> (7, lags, n)
        self.single += lagged[1:7 * n + 1].reshape(7, n, -1).transpose(0, 2, 1)
        self.cross += lagged[7 * n + 1:].reshape(n, 2, n, -1).transpose(1, 3, 0, 2)

    def pairs(self, gravity_off: bool) -> _Pairs:
        """The sums of e against the model's torque p, or p - g when the recording was made
        without gravity."""
        se, see, sp, spp, sg, sgg, spg = self.single
        ep, eg = self.cross
        if gravity_off:
            sp, spp, ep = sp - sg, spp - 2 * spg + sgg, ep - eg
        lags = np.arange(-self.half, self.half + 1)
        return _Pairs(self.dt, lags, self.count, se, see, sp, spp, ep)


@dataclass(frozen=True)
class _Pairs:
    """Per lag (index along the first axis, `lags` in grid periods): count N, sums of e, e^2, p,
    p^2 per joint, of e_i p_k per pair; the statistics of e(t + l dt) against p(t) they give."""

    dt: float
    lags: NDArray[np.int64]
    count: NDArray[np.float64]
    e: NDArray[np.float64]
    ee: NDArray[np.float64]
    p: NDArray[np.float64]
    pp: NDArray[np.float64]
    ep: NDArray[np.float64]

    def moments(self, at: int | slice) -> tuple[NDArray[np.float64], ...]:
        """(cov(e_i, p_k) (.., n, n), var e_i (.., n), var p_k (.., n)) at lag index `at`, as sums
        (N times the moments); a variance within round-off of zero is zero."""
        n = np.maximum(self.count[at], 1.0)[..., None]
        cov = self.ep[at] - self.e[at][..., :, None] * self.p[at][..., None, :] / n[..., None]
        var_e = self.ee[at] - self.e[at] ** 2 / n
        var_p = self.pp[at] - self.p[at] ** 2 / n
        var_e = np.where(var_e > ROUND_OFF * self.ee[at], var_e, 0.0)
        var_p = np.where(var_p > ROUND_OFF * self.pp[at], var_p, 0.0)
        return cov, var_e, var_p

    def zero(self) -> int:
        return int(np.flatnonzero(self.lags == 0)[0])

    def loaded(self) -> NDArray[np.bool_]:
        """The joints whose torque varies: spread at least LOADED_SHARE of the largest one's."""
        _, _, var_p = self.moments(self.zero())
        return (var_p >= LOADED_SHARE**2 * var_p.max(initial=0.0)) & (var_p > 0)

    def fits(self, at: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(corr(e_i, p_k)^2, slope of e_i on p_k) (n, n) at lag index `at`; 0 where either does
        not vary."""
        cov, var_e, var_p = self.moments(at)
        with np.errstate(invalid="ignore", divide="ignore"):
            r2 = np.nan_to_num(cov**2 / (var_e[:, None] * var_p[None, :]), posinf=0.0)
            slope = np.nan_to_num(cov / var_p[None, :], posinf=0.0, neginf=0.0)
        return np.clip(r2, 0.0, 1.0), slope

    def correlation(self) -> NDArray[np.float64]:
        """rho (lags, n): Pearson correlation of e_j(t + l dt) with p_j(t), per lag."""
        cov, var_e, var_p = self.moments(slice(None))
        diagonal = np.diagonal(cov, axis1=1, axis2=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            # a signal without variance over a lag correlates with nothing (not +-inf)
            return np.clip(np.nan_to_num(diagonal / np.sqrt(var_e * var_p), nan=0.0, posinf=0.0, neginf=0.0), -1, 1)


def find(summary: ResidualSummary, clues: Clues, gravity_on: bool, bags: BagSet) -> list[dict[str, Any]]:
    """Every hint about the recording, in the order of the module docstring."""
    clues.flush()
    found = [h for h in (_gravity_off(summary, gravity_on, clues),) if h is not None]
    if clues.lags is not None:
        pairs = clues.lags.pairs(gravity_off=bool(found))
        loaded = pairs.loaded()
        if loaded.any():
            lag, hint = _time_offset(pairs, loaded, clues)
            found += [hint] if hint is not None else []
            r2, slope = pairs.fits(lag)
            order, hint = _joint_order(r2, clues)
            found += [hint] if hint is not None else []
            found += _sign_and_scale(r2, slope, order, loaded, clues)
    missing = _missing_effort(clues, bags)
    return found + ([missing] if missing is not None else [])


def _gravity_off(summary: ResidualSummary, gravity_on: bool, clues: Clues) -> dict[str, Any] | None:
    """`gravity_off` when the residual is minus the model's gravity torque: r = k g + e with k
    near -1 and k g explaining most of r (R^2 = k r.g / r.r, the fit without intercept), and
    p - g matches the efforts better than any multiple of p (efforts near zero, a gear ratio, also
    leave r near -p)."""
    rg, gg, rr = summary.gravity_sums
    loaded = gg >= LOADED_SHARE**2 * gg.max(initial=0.0)
    if not gravity_on or not loaded.any() or rr[loaded].sum() == 0:
        return None
    ee, ep, pp, without = clues.products
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.nan_to_num(ee - ep**2 / pp)  # e's residual from its best multiple of p
    if without.sum() >= scaled.sum():
        return None
    k = rg[loaded].sum() / gg[loaded].sum()
    r2 = k * rg[loaded].sum() / rr[loaded].sum()
    if abs(k + 1) > GRAVITY_SLOPE_TOLERANCE or r2 < GRAVITY_MIN_R2:
        return None
    joints = [n for n, ok in zip(summary.joint_names, loaded) if ok]
    return {"code": "gravity_off",
            "message": f"the torque residual is minus the gravity torque (slope {k:.3f}, R^2 {r2:.3f}): the "
                       "recording looks made without gravity; replay with --gravity 0 0 0",
            "evidence": {"slope": float(k), "r2": float(r2), "joints": joints, "samples_compared": clues.full}}


def _time_offset(pairs: _Pairs, loaded: NDArray[np.bool_], clues: Clues) -> tuple[int, dict[str, Any] | None]:
    """The lag (index into pairs.lags) the diagnoses compare at, and `time_offset` when it is not zero."""
    share = (pairs.correlation()[:, loaded] ** 2).mean(axis=1)
    best, zero = int(np.argmax(share)), pairs.zero()
    gain = share[best] - share[zero]
    if gain < LAG_MIN_GAIN or 1 - share[best] > LAG_MIN_REDUCTION * (1 - share[zero]) or best in (0, len(share) - 1):
        return zero, None
    y0, y1, y2 = share[best - 1: best + 2]
    curvature = y0 - 2 * y1 + y2
    lag_s = (pairs.lags[best] + (0.5 * (y0 - y2) / curvature if curvature < 0 else 0.0)) * pairs.dt
    if abs(lag_s) < LAG_MIN_SAMPLES * pairs.dt:
        return zero, None
    side = "later" if lag_s > 0 else "earlier"
    source = (f"the commands of {clues.topics.effort} (no header) are aligned by receive time and the joint "
              "states by their stamps: a controller's delay, or simulation time against wall time"
              if clues.topics.effort else "the efforts and positions of the joint states are not sampled together")
    delay = clues.effort_delay + lag_s  # the lag is what remains after the delay already applied
    applied = f" (with --effort-delay {clues.effort_delay:g} applied)" if clues.effort_delay else ""
    return best, {
        "code": "time_offset",
        "message": f"the efforts are {abs(lag_s) * 1e3:.1f} ms {side} than the joint states{applied} (the torque "
                   f"explains {share[best]:.3f} of their variance at that lag, {share[zero]:.3f} at none): {source}; "
                   f"residuals and collision events carry this offset: replay with --effort-delay {delay:.4f}, "
                   f"or shift the efforts by {-delay:+.4f} s at their source",
        "evidence": {"lag_s": float(lag_s), "r2_at_lag": float(share[best]), "r2_at_zero": float(share[zero]),
                     "sample_period_s": pairs.dt, "joints": _names(clues, loaded),
                     "effort_delay_s": clues.effort_delay, "suggested_effort_delay_s": round(delay, 4),
                     "samples_compared": clues.full}}


def _joint_order(r2: NDArray[np.float64], clues: Clues) -> tuple[NDArray[np.intp], dict[str, Any] | None]:
    """The torque each effort follows (model index per effort column), and `joint_order` when
    some effort follows another joint's torque much better than its own; r2[i, k] = corr(e_i, p_k)^2."""
    from scipy.optimize import linear_sum_assignment

    n = r2.shape[0]
    identity = np.arange(n)
    _, follows = linear_sum_assignment(-r2)
    moved = [i for i in range(n) if follows[i] != i and r2[i, follows[i]] >= FIT_MIN_R2
             and 1 - r2[i, follows[i]] <= ORDER_MAX_UNEXPLAINED * (1 - r2[i, i])]
    if not moved:
        return identity, None
    order = identity.copy()
    order[moved] = follows[moved]
    names = clues.joint_names
    pairs = ", ".join(f"the effort of {names[i]} is {names[order[i]]}'s torque (R^2 {r2[i, order[i]]:.3f} "
                      f"against {r2[i, i]:.3f})" for i in moved)
    # the entries named after joint i carry joint order[i]'s effort: name them so
    named = clues.topics.effort_joints or names
    index = {name: i for i, name in enumerate(names)}
    fix = (f"give --effort-joints {','.join(names[order[index[j]]] for j in named)}" if clues.topics.effort else
           "the driver publishes the effort array in another order than the names")
    return order, {"code": "joint_order",
                   "message": f"the efforts do not follow their joint names: {pairs}; {fix}",
                   "evidence": {"joints": [names[i] for i in moved], "torque_of": [names[order[i]] for i in moved],
                                "r2": [float(r2[i, order[i]]) for i in moved],
                                "r2_own": [float(r2[i, i]) for i in moved], "samples_compared": clues.full}}


def _sign_and_scale(r2: NDArray[np.float64], slope: NDArray[np.float64], order: NDArray[np.intp],
                    loaded: NDArray[np.bool_], clues: Clues) -> list[dict[str, Any]]:
    """`sign_flip` and `effort_scale` from the line e_j = k_j p + c_j of each effort against the
    torque it follows (`order`), where that torque varies and the line explains most of e_j (R^2)."""
    j_all = np.arange(len(order))
    k, r2 = slope[j_all, order], r2[j_all, order]
    fits = loaded[order] & (r2 >= FIT_MIN_R2)
    flipped = np.flatnonzero(fits & (k < 0))
    scaled = np.flatnonzero(fits & ((np.abs(k) < SCALE_RANGE[0]) | (np.abs(k) > SCALE_RANGE[1])))
    names, found = clues.joint_names, []
    if len(flipped):
        found.append({
            "code": "sign_flip",
            "message": "the effort has the opposite sign of the model's torque on " + ", ".join(
                f"{names[j]} (slope {k[j]:.3g}, R^2 {r2[j]:.2f})" for j in flipped) + ": the driver's sign "
                "convention or the joint's axis differs from the URDF's; flip it at the source",
            "evidence": {"joints": [names[j] for j in flipped], "slope": [float(k[j]) for j in flipped],
                         "r2": [float(r2[j]) for j in flipped], "samples_compared": clues.full}})
    if len(scaled):
        scale = np.abs(k[scaled])
        found.append({
            "code": "effort_scale",
            "message": "the efforts are a multiple of the model's torque: " + ", ".join(
                f"{names[j]} {s:.4g} x (R^2 {r2[j]:.2f})" for j, s in zip(scaled, scale)) + ": another unit or "
                "a gear ratio (motor torques, currents); give the conversion to joint torques in --params "
                "(effort_gear_ratio, effort_torque_constant: joint torque = " + ", ".join(
                f"{1 / s:.4g}" for s in scale) + " x effort)",
            "evidence": {"joints": [names[j] for j in scaled], "scale": [float(s) for s in scale],
                         "r2": [float(r2[j]) for j in scaled], "samples_compared": clues.full}})
    return found


def _names(clues: Clues, mask: NDArray[np.bool_]) -> list[str]:
    return [n for n, ok in zip(clues.joint_names, mask) if ok]


def _missing_effort(clues: Clues, bags: BagSet) -> dict[str, Any] | None:
    """`missing_effort` when more than MISSING_SHARE of the samples have no effort on some joint
    (no residual, predicted acceleration nor external torque for them), saying where they are."""
    n, full = clues.samples, clues.full
    if clues.first_effort is None or clues.last_effort is None or n - full <= MISSING_SHARE * n:
        return None
    assert clues.first_ns is not None and clues.last_ns is not None and clues.receive_ns is not None
    before, after = clues.first_effort[1], n - clues.last_effort[1]
    pauses = n - full - before - after
    topic = clues.topics.effort
    source = f"a command of {topic}" if topic else f"an effort in {clues.topics.joint_states}"
    why = []
    if before:
        why.append(f"{before} come before the first ({(clues.first_effort[0] - clues.first_ns) * 1e-9:.3f} s after "
                   "the first joint state)")
    if after:
        why.append(f"{after} after the last ({(clues.last_ns - clues.last_effort[0]) * 1e-9:.3f} s before the last "
                   "joint state)")
    if pauses:
        why.append(f"{pauses} in pauses of the commands longer than {EFFORT_MAX_AGE_NS * 1e-9:g} s (an older command "
                   "is not used)" if topic else f"{pauses} in between without an effort (an empty effort field)")
    if clues.partial:
        why.append(f"{clues.partial} of them with efforts on some joints only (--effort-joints names fewer joints "
                   "than the model has)" if topic else f"{clues.partial} of them with NaN efforts on some joints")
    evidence: dict[str, Any] = {"samples": n, "with_effort": full, "before_first": before, "after_last": after,
                                "in_pauses": pauses, "partial": clues.partial,
                                "state_rate_hz": _rate(n, clues.last_ns - clues.first_ns),
                                "state_rate_receive_hz": _rate(n, clues.receive_ns[1] - clues.receive_ns[0])}
    rates = ""
    if topic:
        received = [raw.receive_ns for raw in bags.messages([topic])]
        evidence |= {"commands": len(received), "command_rate_hz": _rate(len(received), max(received) - min(received))}
        rates = (f"; {len(received)} commands at {evidence['command_rate_hz']:.0f} Hz of receive time, joint states "
                 f"at {evidence['state_rate_hz']:.0f} Hz of stamp time ({evidence['state_rate_receive_hz']:.0f} Hz of "
                 "receive time)")
    return {"code": "missing_effort",
            "message": f"{full} of {n} joint states carry {source}: " + "; ".join(why) + ": they have no residual, "
                       "predicted acceleration nor external torque" + rates,
            "evidence": evidence}


def _rate(count: int, span_ns: int) -> float:
    """Samples per second over a span of receive or stamp times (0 when it has no length)."""
    return (count - 1) / (span_ns * 1e-9) if count > 1 and span_ns > 0 else 0.0
