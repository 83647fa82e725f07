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

`Clues` keeps the series these need, the first MAX_ROWS samples with an effort (bounded memory
on a bag of any length), and counts the samples without one over the whole replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .samples import EFFORT_MAX_AGE_NS

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .bagio import BagSet
    from .samples import SampleBlock, Topics
    from .summary import ResidualSummary

MAX_ROWS = 1 << 16  # samples kept for the series diagnoses (5.5 min at 200 Hz)
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
SCALE_RANGE = (0.67, 1.5)  # |k| outside: another unit or a gear ratio, not a model error
MISSING_SHARE = 0.01  # more samples than this without an effort are told


@dataclass
class Clues:
    """The series of the first MAX_ROWS samples with an effort (stamp, effort, torque, gravity
    torque) and the count of samples without one: before the first, after the last, between."""

    joint_names: tuple[str, ...]
    topics: Topics
    effort_delay: float = 0.0  # s, --effort-delay: already applied to the efforts
    stamps: list[NDArray[np.int64]] = field(default_factory=list)
    rows: list[NDArray[np.float64]] = field(default_factory=list)  # (N, 3, n): effort, tau_ff, tau_g
    kept: int = 0
    samples: int = 0
    first_ns: int | None = None  # first sample's stamp
    last_ns: int | None = None
    first_effort: tuple[int, int] | None = None  # (stamp, samples before it)
    last_effort: tuple[int, int] | None = None  # (stamp, samples up to and with it)
    partial: int = 0  # samples with an effort on some joints only
    full: int = 0  # samples with an effort on every joint
    receive_ns: tuple[int, int] | None = None  # first and last receive time

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
        take = with_effort[: MAX_ROWS - self.kept]
        if len(take):
            self.stamps.append(block.stamp_ns[take])
            self.rows.append(np.stack([block.effort[take], out.tau_ff[take], out.tau_g[take]], axis=1))
            self.kept += len(take)

    def series(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(t [s] since the first kept sample, (N, 3, n) effort, torque, gravity torque)."""
        if not self.kept:
            return np.zeros(0), np.zeros((0, 3, len(self.joint_names)))
        stamps = np.concatenate(self.stamps)
        return (stamps - stamps[0]) * 1e-9, np.concatenate(self.rows)


def find(summary: ResidualSummary, clues: Clues, gravity_on: bool, bags: BagSet) -> list[dict[str, Any]]:
    """Every hint about the recording, in the order of the module docstring."""
    t, rows = clues.series()
    found = [h for h in (_gravity_off(summary, gravity_on, rows),) if h is not None]
    effort, torque = rows[:, 0], rows[:, 1] - (rows[:, 2] if found else 0.0)
    grid = _Grid.of(t, effort, torque)
    if grid is not None:
        lag, hint = _time_offset(grid, clues)
        found += [hint] if hint is not None else []
        e, p = grid.shifted(lag)
        order, hint = _joint_order(e, p, clues)
        found += [hint] if hint is not None else []
        found += _sign_and_scale(e, p[:, order], grid.loaded[order], clues)
    missing = _missing_effort(clues, bags)
    return found + ([missing] if missing is not None else [])


def _gravity_off(summary: ResidualSummary, gravity_on: bool, rows: NDArray[np.float64]) -> dict[str, Any] | None:
    """`gravity_off` when the residual is minus the model's gravity torque: r = k g + e with k
    near -1 and k g explaining most of r (R^2 = k r.g / r.r, the fit without intercept), and
    p - g matches the efforts better than any multiple of p (efforts near zero, a gear ratio, also
    leave r near -p)."""
    rg, gg, rr = summary.gravity_sums
    loaded = gg >= LOADED_SHARE**2 * gg.max(initial=0.0)
    if not gravity_on or not loaded.any() or rr[loaded].sum() == 0:
        return None
    e, p, g = rows[:, 0], rows[:, 1], rows[:, 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.nan_to_num((e * e).sum(axis=0) - (e * p).sum(axis=0) ** 2 / (p * p).sum(axis=0))
    if ((e - p + g) ** 2).sum() >= scaled.sum():
        return None
    k = rg[loaded].sum() / gg[loaded].sum()
    r2 = k * rg[loaded].sum() / rr[loaded].sum()
    if abs(k + 1) > GRAVITY_SLOPE_TOLERANCE or r2 < GRAVITY_MIN_R2:
        return None
    joints = [n for n, ok in zip(summary.joint_names, loaded) if ok]
    return {"code": "gravity_off",
            "message": f"the torque residual is minus the gravity torque (slope {k:.3f}, R^2 {r2:.3f}): the "
                       "recording looks made without gravity; replay with --gravity 0 0 0",
            "evidence": {"slope": float(k), "r2": float(r2), "joints": joints}}


@dataclass(frozen=True)
class _Grid:
    """Effort and torque resampled on a uniform grid of the median sample period; `valid`: grid
    points within one period of a sample (no interpolation across gaps); `loaded`: the joints
    whose torque varies."""

    dt: float
    effort: NDArray[np.float64]
    torque: NDArray[np.float64]
    valid: NDArray[np.bool_]
    loaded: NDArray[np.bool_]

    @classmethod
    def of(cls, t: NDArray[np.float64], effort: NDArray[np.float64], torque: NDArray[np.float64]) -> _Grid | None:
        if len(t) < 20:
            return None
        dt = float(np.median(np.diff(t)))
        span = t <= 4 * MAX_ROWS * dt  # efforts spread thinly over hours: the grid stays bounded
        t, effort, torque = t[span], effort[span], torque[span]
        g = np.arange(0.0, t[-1] + dt / 2, dt)
        at = np.clip(np.searchsorted(t, g), 1, len(t) - 1)
        near = np.minimum(np.abs(t[at] - g), np.abs(t[at - 1] - g))
        valid = near <= dt
        interp = [np.stack([np.interp(g, t, x[:, j]) for j in range(x.shape[1])], axis=1) for x in (effort, torque)]
        spread = interp[1][valid].std(axis=0)
        loaded = (spread >= LOADED_SHARE * spread.max(initial=0.0)) & (spread > 0)
        if not loaded.any():
            return None
        return cls(dt, interp[0], interp[1], valid, loaded)

    def shifted(self, lag: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(e(t + lag dt), p(t)) on the grid points where both are valid."""
        n = len(self.valid)
        a, b = (slice(lag, n), slice(0, n - lag)) if lag >= 0 else (slice(0, n + lag), slice(-lag, n))
        ok = self.valid[a] & self.valid[b]
        return self.effort[a][ok], self.torque[b][ok]

    def correlation(self, max_lag: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """(lags, rho (lags, n)): Pearson correlation of e(t + lag dt) with p(t) over the valid
        points, from masked cross-correlations (FFT)."""
        from scipy.signal import correlate, correlation_lags

        m = self.valid.astype(np.float64)
        lags = correlation_lags(len(m), len(m))
        keep = np.abs(lags) <= max_lag

        def xc(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
            return correlate(a, b, method="fft")[keep]

        count = np.maximum(xc(m, m), 1.0)
        rho = np.zeros((int(keep.sum()), self.effort.shape[1]))
        for j in np.flatnonzero(self.loaded):
            e = (self.effort[:, j] - self.effort[self.valid, j].mean()) * m
            p = (self.torque[:, j] - self.torque[self.valid, j].mean()) * m
            se, sp, sep = xc(e, m), xc(m, p), xc(e, p)
            var_e, var_p = xc(e * e, m) - se * se / count, xc(m, p * p) - sp * sp / count
            with np.errstate(invalid="ignore", divide="ignore"):
                # a signal without variance over a lag correlates with nothing (not +-inf)
                rho[:, j] = np.clip(np.nan_to_num((sep - se * sp / count) / np.sqrt(var_e * var_p),
                                                  nan=0.0, posinf=0.0, neginf=0.0), -1.0, 1.0)
        return lags[keep], rho


def _time_offset(grid: _Grid, clues: Clues) -> tuple[int, dict[str, Any] | None]:
    """The lag (grid periods) the diagnoses compare at, and `time_offset` when it is not zero."""
    lags, rho = grid.correlation(max(1, int(MAX_LAG_S / grid.dt)))
    share = (rho[:, grid.loaded] ** 2).mean(axis=1)
    best, zero = int(np.argmax(share)), int(np.flatnonzero(lags == 0)[0])
    gain = share[best] - share[zero]
    if gain < LAG_MIN_GAIN or 1 - share[best] > LAG_MIN_REDUCTION * (1 - share[zero]) or best in (0, len(lags) - 1):
        return 0, None
    y0, y1, y2 = share[best - 1: best + 2]
    curvature = y0 - 2 * y1 + y2
    lag_s = (lags[best] + (0.5 * (y0 - y2) / curvature if curvature < 0 else 0.0)) * grid.dt
    if abs(lag_s) < LAG_MIN_SAMPLES * grid.dt:
        return 0, None
    side = "later" if lag_s > 0 else "earlier"
    source = (f"the commands of {clues.topics.effort} (no header) are aligned by receive time and the joint "
              "states by their stamps: a controller's delay, or simulation time against wall time"
              if clues.topics.effort else "the efforts and positions of the joint states are not sampled together")
    delay = clues.effort_delay + lag_s  # the lag is what remains after the delay already applied
    applied = f" (with --effort-delay {clues.effort_delay:g} applied)" if clues.effort_delay else ""
    return int(lags[best]), {
        "code": "time_offset",
        "message": f"the efforts are {abs(lag_s) * 1e3:.1f} ms {side} than the joint states{applied} (the torque "
                   f"explains {share[best]:.3f} of their variance at that lag, {share[zero]:.3f} at none): {source}; "
                   f"residuals and collision events carry this offset: replay with --effort-delay {delay:.4f}, "
                   f"or shift the efforts by {-delay:+.4f} s at their source",
        "evidence": {"lag_s": float(lag_s), "r2_at_lag": float(share[best]), "r2_at_zero": float(share[zero]),
                     "sample_period_s": grid.dt, "joints": _names(clues, grid.loaded),
                     "effort_delay_s": clues.effort_delay, "suggested_effort_delay_s": round(delay, 4)}}


def _joint_order(e: NDArray[np.float64], p: NDArray[np.float64], clues: Clues
                 ) -> tuple[NDArray[np.intp], dict[str, Any] | None]:
    """The torque each effort follows (model index per effort column), and `joint_order` when
    some effort follows another joint's torque much better than its own."""
    from scipy.optimize import linear_sum_assignment

    n = e.shape[1]
    identity = np.arange(n)
    r2 = _r2_matrix(e, p)
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
                                "r2_own": [float(r2[i, i]) for i in moved]}}


def _r2_matrix(e: NDArray[np.float64], p: NDArray[np.float64]) -> NDArray[np.float64]:
    """corr(e_i, p_k)^2 (n, n); 0 where either does not vary."""
    ec, pc = e - e.mean(axis=0), p - p.mean(axis=0)
    norm = np.sqrt((ec * ec).sum(axis=0))[:, None] * np.sqrt((pc * pc).sum(axis=0))[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num((ec.T @ pc) ** 2 / norm**2)


def _sign_and_scale(e: NDArray[np.float64], p: NDArray[np.float64], loaded: NDArray[np.bool_], clues: Clues
                    ) -> list[dict[str, Any]]:
    """`sign_flip` and `effort_scale` from the line e_j = k_j p_j + c_j of each effort whose
    torque varies, where the line explains most of it (R^2)."""
    ec, pc = e - e.mean(axis=0), p - p.mean(axis=0)
    ep, pp, ee = (ec * pc).sum(axis=0), (pc * pc).sum(axis=0), (ec * ec).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        k, r2 = np.nan_to_num(ep / pp), np.nan_to_num(ep * ep / (pp * ee))
    fits = loaded & (r2 >= FIT_MIN_R2)
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
                         "r2": [float(r2[j]) for j in flipped]}})
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
                         "r2": [float(r2[j]) for j in scaled]}})
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
