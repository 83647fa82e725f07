"""Excitation design: the Fourier coefficients that make the base regressor best conditioned.

The fit (`fit.IdentificationProblem.columns`) sees the joint torques through columns G(q, qd, qdd)
of the inertial parameters, a payload and friction. Stacked over one period of the trajectory,
on the rows of the moving joints (the fit leaves out joints at rest) and on the base columns
(those independent for any motion of the moving joints: `independent_columns` of random samples,
so every trajectory is judged on the same columns), each column scaled to unit norm, the matrix W
has condition number kappa = s_max / s_min: the factor by which torque noise can grow into
parameter error (Gautier and Khalil 1992; Swevers et al. 1997). `design_excitation` minimises
log kappa over q0, a, b of the moving joints with scipy's L-BFGS-B, in a parametrisation in which
every point keeps the position, velocity and acceleration limits by their analytic bounds
(fourier.py; along the whole trajectory): q0 = centre + half-range tanh(z), each joint's
harmonics scaled to what its limits allow around q0. Efforts (limits.effort_bound on
`effort_samples` samples per period) enter as a penalty, and the result is shrunk until they hold.
It starts from the best of several random Fourier trajectories grown to the limits
(`random_fourier`, also the baseline the result is compared with, as is `single_sine`: one sine
per joint).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from ...model import Model
from ..base_parameters import independent_columns
from ..fit import IdentificationProblem
from .fourier import FourierTrajectory, at_rest
from .limits import Limits, effort_bound, one_blas_thread

__all__ = ["ExcitationProblem", "Excitation", "excitation_problem", "condition_number", "violations",
           "random_fourier", "single_sine", "design_excitation"]

TARGETS = ("inertia", "friction", "payload")


@dataclass(frozen=True)
class ExcitationProblem:
    """What to excite on `model` (its efforts include the expected payload) with which joints."""

    model: Model
    moving: np.ndarray  # (m,) joint indices, model order
    limits: Limits
    q_hold: np.ndarray  # (n,) where the other joints stand
    period: float  # T_f, s
    harmonics: int  # L
    fit: IdentificationProblem  # whose columns are conditioned
    columns: np.ndarray = field(repr=False)  # (r,) the base columns of fit's
    samples: int = 0  # per period, for kappa (default 20 per period of the highest harmonic)
    effort_samples: int = 0  # per period, for the effort bound (default 32 per highest-harmonic period)

    @property
    def w_f(self) -> float:
        return 2 * np.pi / self.period

    @property
    def labels(self) -> tuple[str, ...]:
        labels = self.fit.labels
        return tuple(labels[i] for i in self.columns)

    def trajectory(self, q0, a, b) -> FourierTrajectory:
        return FourierTrajectory(self.moving, self.q_hold, np.asarray(q0, dtype=float), np.asarray(a, dtype=float),
                                 np.asarray(b, dtype=float), self.w_f)

    def times(self, samples: int) -> np.ndarray:
        return np.arange(samples) * self.period / samples


def excitation_problem(model: Model, moving, limits: Limits, *, period: float, harmonics: int = 5,
                       identify=("inertia", "friction"), payload_link: str | None = None,
                       q_hold=None, seed: int = 0) -> ExcitationProblem:
    """The problem of exciting `identify` (any of 'inertia', 'friction', 'payload' on payload_link)
    with the joints `moving` (names), the others at q_hold (n,; default mid-range, 0 unbounded)."""
    names = list(model.joint_names)
    unknown = [j for j in moving if j not in names]
    if unknown or not len(moving):
        raise ValueError(f"moving: unknown joints {unknown}" if unknown else "moving: no joint to move")
    if len(set(moving)) != len(moving):
        raise ValueError("moving: a joint is named twice")
    bad = [t for t in identify if t not in TARGETS]
    if bad or not identify:
        raise ValueError(f"identify: expected some of {TARGETS}, got {list(identify)}")
    if ("payload" in identify) != (payload_link is not None):
        raise ValueError("identify: 'payload' and payload_link go together")
    if not (np.isfinite(period) and period > 0) or int(harmonics) < 2:
        raise ValueError(f"period {period!r} must be > 0 and harmonics {harmonics!r} at least 2")
    idx = np.array(sorted(names.index(j) for j in moving))
    mid = np.where(np.isfinite(limits.lower + limits.upper), (limits.lower + limits.upper) / 2, 0.0)
    hold = mid if q_hold is None else np.asarray(q_hold, dtype=float).reshape(model.n)
    still = np.setdiff1d(np.arange(model.n), idx)
    outside = [names[j] for j in still if not limits.lower[j] <= hold[j] <= limits.upper[j]]
    if outside:
        raise ValueError(f"q_hold: {', '.join(outside)} held outside the position limits")
    fit = IdentificationProblem(model, friction="friction" in identify, payload_link=payload_link,
                                inertia="inertia" in identify)
    # base columns: from random motions of the moving joints only (held joints still)
    rng = np.random.default_rng(seed)
    N = 40 * idx.size + 100
    lo = np.where(np.isfinite(limits.lower), limits.lower, hold - np.pi)[idx]
    hi = np.where(np.isfinite(limits.upper), limits.upper, hold + np.pi)[idx]
    q, v, a = np.tile(hold, (N, 1)), np.zeros((N, model.n)), np.zeros((N, model.n))
    q[:, idx] = rng.uniform(lo, hi, (N, idx.size))
    v[:, idx] = rng.standard_normal((N, idx.size))
    a[:, idx] = rng.standard_normal((N, idx.size))
    W = _rows(fit, idx, q, v, a)
    columns, _, _ = independent_columns(W)
    L = int(harmonics)
    return ExcitationProblem(model, idx, limits, hold, float(period), L, fit, np.sort(columns), 20 * L, 32 * L)


def _rows(fit: IdentificationProblem, moving: np.ndarray, q, v, a) -> np.ndarray:
    """The fit's columns on the moving joints' rows, stacked (N m, p)."""
    G, _ = fit.columns(q, v, a, np.zeros_like(q))
    return G[:, moving, :].reshape(-1, G.shape[-1])


def condition_number(problem: ExcitationProblem, trajectory: FourierTrajectory, samples: int | None = None) -> float:
    """kappa of the column-scaled base regressor over one period (module docstring)."""
    q, qd, qdd = trajectory.derivatives(problem.times(samples or problem.samples), 2)
    W = _rows(problem.fit, problem.moving, q, qd, qdd)[:, problem.columns]
    # from the Gram matrix (small, p x p): kappa^2 = its eigenvalue ratio, resolved up to kappa ~ 1e7
    G = W.T @ W
    d = np.sqrt(np.diag(G))
    if not np.all(d > 0):
        return float("inf")
    lam = np.linalg.eigvalsh(G / d[:, None] / d[None, :])
    return float(np.sqrt(lam[-1] / lam[0])) if lam[0] > 0 else float("inf")


def violations(problem: ExcitationProblem, trajectory: FourierTrajectory) -> list[str]:
    """The limits the trajectory breaks anywhere in time, one line each; empty when none.

    Position, velocity and acceleration of the moving joints by their analytic bounds, the held
    joints' positions, and efforts by the grid bound."""
    lim, m = problem.limits, problem.moving
    names = problem.model.joint_names
    P, V, A = trajectory.bounds()
    out = []
    for k, j in enumerate(m):
        for what, value, bound in (("lowest position", trajectory.q0[k] - P[k], lim.lower[j]),
                                   ("highest position", -(trajectory.q0[k] + P[k]), -lim.upper[j]),
                                   ("speed bound", -V[k], -lim.velocity[j]), ("acceleration bound", -A[k],
                                                                               -lim.acceleration[j])):
            if value < bound:
                out.append(f"{names[j]}: {what} {abs(value):.6g} beyond its limit {abs(bound):.6g}")
    still = np.setdiff1d(np.arange(len(names)), m)
    out += [f"{names[j]}: held at {trajectory.q_hold[j]:.6g} outside [{lim.lower[j]:.6g}, {lim.upper[j]:.6g}]"
            for j in still if not lim.lower[j] <= trajectory.q_hold[j] <= lim.upper[j]]
    bound = _effort(problem, trajectory)
    worst = bound.max(0)
    out += [f"{names[j]}: effort bound {worst[j]:.6g} beyond its limit {lim.effort[j]:.6g}"
            for j in np.flatnonzero(worst > lim.effort)]
    return out


def _effort(problem: ExcitationProblem, trajectory: FourierTrajectory) -> np.ndarray:
    """The effort bound (N, n) on the effort grid of one period."""
    N = problem.effort_samples
    q, *derivs = trajectory.derivatives(problem.times(N), 4)
    return effort_bound(problem.model, q, derivs, problem.period / N)


def _filled(problem: ExcitationProblem, q0, a, b, fill: float = 1 - 1e-9, grow: bool = True):
    """(a, b) scaled, per joint, to `fill` of what the position, velocity and acceleration limits
    allow around q0 (only down unless `grow`)."""
    lim, m = problem.limits, problem.moving
    P, V, A = problem.trajectory(q0, a, b).bounds()
    room = np.minimum(q0 - lim.lower[m], lim.upper[m] - q0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = fill * np.min([room / P, lim.velocity[m] / V, lim.acceleration[m] / A], axis=0)
    s = np.where(np.isfinite(s), s, 1.0) if grow else np.minimum(np.nan_to_num(s, nan=1.0), 1.0)
    return a * s[:, None], b * s[:, None]


def _grown(problem: ExcitationProblem, q0, a, b, grow: bool = True) -> FourierTrajectory:
    """`_filled`, then all joints together shrunk until the effort bound holds."""
    a, b = _filled(problem, q0, a, b, grow=grow)
    shrink = 1.0
    for _ in range(60):
        traj = problem.trajectory(q0, a * shrink, b * shrink)
        if np.all(_effort(problem, traj).max(0) <= problem.limits.effort):
            return traj
        shrink *= 0.9
    raise ValueError("effort limits: even a tiny motion exceeds them (the held pose alone?)")


def random_fourier(problem: ExcitationProblem, rng: np.random.Generator) -> FourierTrajectory:
    """A random Fourier trajectory of the problem's period and harmonics, starting at rest, centred
    in the position ranges and grown to the limits."""
    m, L = problem.moving.size, problem.harmonics
    a, b = at_rest(rng.standard_normal((m, L)), rng.standard_normal((m, L)))
    return _grown(problem, _centre(problem), a, b)


def single_sine(problem: ExcitationProblem) -> FourierTrajectory:
    """One sine per moving joint, joint k on harmonic 1 + k mod L, centred and grown to the limits."""
    m, L = problem.moving.size, problem.harmonics
    a = np.zeros((m, L))
    a[np.arange(m), np.arange(m) % L] = 1.0
    return _grown(problem, _centre(problem), a, np.zeros((m, L)))


def _centre(problem: ExcitationProblem) -> np.ndarray:
    lim, m = problem.limits, problem.moving
    return np.where(np.isfinite(lim.lower + lim.upper), (lim.lower + lim.upper) / 2, problem.q_hold)[m]


@dataclass(frozen=True)
class Excitation:
    """The designed trajectory, its kappa and those of the baselines (same period and harmonics)."""

    problem: ExcitationProblem
    trajectory: FourierTrajectory
    condition_number: float
    random_condition_numbers: np.ndarray  # (R,) of random Fourier trajectories
    single_sine_condition_number: float


def design_excitation(problem: ExcitationProblem, *, restarts: int = 2, baselines: int = 10, seed: int = 0,
                      maxiter: int = 100) -> Excitation:
    """The best-conditioned trajectory found from the `restarts` best of `baselines` random Fourier
    trajectories (module docstring), checked against every limit and compared with those.

    BLAS and LAPACK run on one thread meanwhile: on matrices this small (a few hundred rows,
    dozens of columns) their thread pools cost 10-100x the work on a busy machine."""
    with one_blas_thread():
        return _design(problem, restarts, baselines, seed, maxiter)


def _design(problem: ExcitationProblem, restarts: int, baselines: int, seed: int, maxiter: int) -> Excitation:
    rng = np.random.default_rng(seed)
    m, L = problem.moving.size, problem.harmonics
    lim, idx = problem.limits, problem.moving
    finite_effort = np.isfinite(lim.effort)
    centre = _centre(problem)
    half = np.where(np.isfinite(lim.upper - lim.lower), (lim.upper - lim.lower) / 2, np.pi)[idx]

    # Every x is a trajectory within the position, velocity and acceleration limits: q0 =
    # centre + half tanh(z) stays in range, and each joint's harmonics (a, b), made to start at
    # rest, are scaled to what its limits allow around q0. Only the effort limits remain, as a
    # penalty here and by shrinking the result.
    def unpack(x):
        q0 = centre + half * np.tanh(x[:m])
        a, b = at_rest(np.pad(x[m:m + m * (L - 1)].reshape(m, L - 1), ((0, 0), (0, 1))),
                       np.pad(x[m + m * (L - 1):].reshape(m, L - 1), ((0, 0), (0, 1))))
        return problem.trajectory(q0, *_filled(problem, q0, a, b))

    def objective(x):
        traj = unpack(x)
        over = _effort(problem, traj).max(0)[finite_effort] / lim.effort[finite_effort] - 1
        return np.log(min(condition_number(problem, traj), 1e300)) + 10 * np.sum(np.maximum(over, 0) ** 2)

    # the random baselines double as starts: the optimiser begins from the best-conditioned ones
    randoms = [random_fourier(problem, rng) for _ in range(max(baselines, restarts))]
    random_kappa = np.array([condition_number(problem, traj) for traj in randoms])
    best, best_kappa = None, np.inf
    for k in np.argsort(random_kappa)[:restarts]:
        start = randoms[k]
        z = np.arctanh(np.clip((start.q0 - centre) / half, -0.999, 0.999))
        x0 = np.concatenate([z, start.a[:, :-1].ravel() / lim.velocity[idx].max(),
                             start.b[:, :-1].ravel() / lim.velocity[idx].max()])
        res = scipy.optimize.minimize(objective, x0, method="L-BFGS-B", options={"maxiter": maxiter})
        for traj in (unpack(res.x), start):
            traj = _grown(problem, traj.q0, traj.a, traj.b, grow=False)  # shrunk to the effort limits
            kappa = condition_number(problem, traj)
            if kappa < best_kappa and not violations(problem, traj):
                best, best_kappa = traj, kappa
    if best is None:
        raise ValueError("design_excitation: no start led to a trajectory within the limits")
    return Excitation(problem, best, best_kappa, random_kappa[:baselines],
                      condition_number(problem, single_sine(problem)))
