"""Physically consistent least squares of friction, a payload and the inertial parameters.

The measured joint torques are linear in what is identified (Atkeson et al. 1986):

    tau = Y(q, v, a) (pi_0 + dpi) + Y_k(q, v, a) X pi_p + Y_f(qd) phi

with pi_0 the model's parameters, dpi their corrections (`inertia`), pi_p a payload's ten
parameters about a link's frame (`payload`, X = payload_map) and phi the friction (`friction`).
With x the unknowns stacked and G their columns, the fit minimises |G x - r|^2, r = tau - Y pi_0,
from the normal equations A = G^T G, b = G^T r, c = r^T r, summed block by block (memory
independent of the recording's length), per joint so that every joint's residual RMS follows too.

Physical consistency (Wensing, Kim and Slotine 2017): every body's pseudo-inertia
P(pi_0,j + dpi_j) and the payload's P(pi_p) are positive semidefinite (a convex LMI, solved by
cvxpy's CLARABEL), masses are positive, Coulomb and viscous friction non-negative. Directions
of x the data cannot see (near-zero eigenvalues of the column-scaled A) are reported, held at
the prior by a small Tikhonov term (zero correction, zero payload), and get no standard
deviation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg.blas import dsyrk

from ..model import Model
from .friction import DEFAULT_SMOOTHING, Friction, friction_regressor
from .parameters import PARAMETER_NAMES, inertia_from_parameters, parameter_labels, parameters, payload_map, pseudo_inertia
from .regressor import regressor

__all__ = ["IdentificationProblem", "NormalEquations", "IdentificationResult", "identify"]

# eigenvalue ratio of the column-scaled A below which a direction counts as unexcited: the
# scaled regressor's condition number would exceed 1e3 in it (well-excited recordings stay
# below 100; beyond 1e3 a fit follows the noise, and the held-back part shows it)
UNEXCITED = 1e-6
REGULARIZATION = 1e-9  # Tikhonov weight towards the prior, against A's unit diagonal
MIN_MASS = 1e-6  # kg, a body's mass stays positive
SCALE_FLOOR = 1e-6  # smallest column scale, relative to the largest


@dataclass(frozen=True)
class IdentificationProblem:
    """What to identify on `model`: any of friction, a payload on `payload_link`, all inertias."""

    model: Model
    friction: bool = False
    payload_link: str | None = None
    inertia: bool = False
    smoothing: float = DEFAULT_SMOOTHING
    min_speed: float = 5 * DEFAULT_SMOOTHING
    _payload: tuple[int, np.ndarray] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not (self.friction or self.payload_link or self.inertia):
            raise ValueError("identify: choose at least one of friction, payload LINK, inertia")
        if self.payload_link is not None:
            object.__setattr__(self, "_payload", payload_map(self.model, self.payload_link))

    @property
    def k(self) -> int:
        return self.model.nb + self.model.floating_base

    @property
    def slices(self) -> dict[str, slice]:
        """Where inertia (10 k), payload (10) and friction (3 n) sit in x."""
        out, start = {}, 0
        for name, size, on in (("inertia", 10 * self.k, self.inertia), ("payload", 10, self.payload_link),
                               ("friction", 3 * self.model.n, self.friction)):
            if on:
                out[name] = slice(start, start + size)
                start += size
        return out

    @property
    def size(self) -> int:
        return max(s.stop for s in self.slices.values())

    @property
    def labels(self) -> list[str]:
        labels: list[str] = []
        if self.inertia:
            labels += parameter_labels(self.model)
        if self.payload_link:
            labels += [f"payload.{p}" for p in PARAMETER_NAMES]
        if self.friction:
            labels += [f"{j}.{p}" for j in self.model.joint_names for p in ("coulomb", "viscous", "offset")]
        return labels

    def columns(self, q, v, a, tau, *, base_pose=None) -> tuple[np.ndarray, np.ndarray]:
        """(G (N, n, p), r = tau - Y pi_0 (N, n)) of measured joint torques tau (N, n).

        Only the joint rows: a floating base's wrench rows carry unmeasured contact forces.
        A joint's row is NaN (left out) while it moves slower than min_speed: a joint at rest
        holds whatever static friction it needs, which no velocity function describes.
        """
        n = self.model.n
        qd = np.asarray(v, dtype=float).reshape(-1, self.model.nv)[:, -n:]
        Y = regressor(self.model, q, v, a, base_pose=base_pose)[..., -n:, :]
        Y = Y.reshape((-1,) + Y.shape[-2:])
        parts = []
        if self.inertia:
            parts.append(Y)
        if self._payload is not None:
            body, X = self._payload
            parts.append(Y[..., 10 * body:10 * body + 10] @ X)
        if self.friction:
            parts.append(friction_regressor(qd, self.smoothing))
        r = np.asarray(tau, dtype=float).reshape(-1, n) - Y @ parameters(self.model)
        return np.concatenate(parts, -1), np.where(np.abs(qd) >= self.min_speed, r, np.nan)


class NormalEquations:
    """Per-joint sums A_i = G_i^T G_i (n, p, p), b_i = G_i^T r_i, c_i = r_i^T r_i and row counts."""

    def __init__(self, n: int, p: int) -> None:
        self._upper = np.zeros((n, p, p))  # A_i's upper triangles (dsyrk fills one half)
        self.b = np.zeros((n, p))
        self.c, self.rows = np.zeros(n), np.zeros(n, dtype=np.int64)

    @property
    def A(self) -> np.ndarray:
        U = self._upper
        return U + np.triu(U, 1).transpose(0, 2, 1)

    def add(self, G: np.ndarray, r: np.ndarray) -> None:
        """Add samples G (N, n, p), r (N, n); a row whose residual is NaN is left out.

        Each joint's sums run over the columns that are nonzero in its row (a joint's torque
        sees only the bodies beyond it and its own friction): a 7-DoF arm's fit costs a
        quarter of the full products, and a symmetric rank-N update (BLAS dsyrk) half of that.
        """
        if not len(r):
            return
        ok = np.isfinite(r)
        r = np.where(ok, r, 0.0)
        support = np.any(G != 0, axis=0)  # (n, p)
        for i in range(self.c.size):
            s = np.flatnonzero(support[i])
            Gi = G[:, i, s]  # a copy, C-contiguous (N, |s|): its transpose is Fortran-ordered
            Gi[~ok[:, i]] = 0.0
            self._upper[i][np.ix_(s, s)] += dsyrk(1.0, Gi.T)
            self.b[i, s] += Gi.T @ r[:, i]
            self.c[i] += r[:, i] @ r[:, i]
            self.rows[i] += int(ok[:, i].sum())

    def rss(self, x: np.ndarray) -> np.ndarray:
        """Per-joint residual sum of squares |G_i x - r_i|^2."""
        return np.maximum(np.einsum("p,ipq,q->i", x, self.A, x) - 2 * self.b @ x + self.c, 0.0)

    def rms(self, x: np.ndarray) -> np.ndarray:
        """Per-joint residual RMS, NaN for a joint without rows."""
        return np.where(self.rows > 0, np.sqrt(self.rss(x) / np.maximum(self.rows, 1)), np.nan)


@dataclass
class IdentificationResult:
    """The fit: x and its standard deviations (NaN where not identifiable), diagnostics, and the
    physically meaningful values (friction, payload, corrected parameters)."""

    problem: IdentificationProblem
    x: np.ndarray
    std: np.ndarray
    identifiable: np.ndarray  # (p,) bool
    condition_number: float  # of the column-scaled regressor on its excited directions
    unexcited: list[str]  # the directions the data cannot see, as combinations of labels
    rms_before: np.ndarray  # (n,) on the validation part, model without corrections
    rms_after: np.ndarray
    rows: tuple[int, int]  # (fit, validation) samples

    def part(self, name: str) -> np.ndarray:
        return self.x[self.problem.slices[name]]

    @property
    def friction(self) -> Friction | None:
        if not self.problem.friction:
            return None
        phi = self.part("friction").reshape(-1, 3)
        return Friction(phi[:, 0], phi[:, 1], phi[:, 2], smoothing=self.problem.smoothing)

    @property
    def payload(self) -> dict[str, object] | None:
        """mass, com (link frame) and inertia (ixx, ixy, ixz, iyy, iyz, izz) about the com."""
        if not self.problem.payload_link:
            return None
        pi = self.part("payload")
        m = pi[0]
        c = pi[1:4] / m if m > 0 else np.zeros(3)
        Ibar = inertia_from_parameters(pi)[:3, :3]
        I_c = Ibar - m * (c @ c * np.eye(3) - np.outer(c, c))
        return {"link": self.problem.payload_link, "mass": float(m), "com": c.tolist(),
                "inertia": I_c[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]].tolist()}

    @property
    def parameters(self) -> np.ndarray | None:
        """The model's corrected inertial parameters pi_0 + dpi (inertia only)."""
        return parameters(self.problem.model) + self.part("inertia") if self.problem.inertia else None


def identify(problem: IdentificationProblem, fit: NormalEquations, validation: NormalEquations,
             solver: str = "CLARABEL") -> IdentificationResult:
    """The physically consistent least-squares fit of `fit`'s equations, checked on `validation`'s."""
    import cvxpy as cp  # a solver library, imported when a fit is asked for

    A, b = fit.A.sum(0), fit.b.sum(0)
    p = A.shape[0]
    d = np.sqrt(np.diag(A))
    # Column scales, floored: a column of rounding noise (a joint held still) would otherwise be
    # blown up to unit size and wreck the conditioning of the consistency constraints.
    D = 1.0 / np.maximum(d, SCALE_FLOOR * max(d.max(initial=0.0), 1e-300))
    As, bs = D[:, None] * A * D[None, :], D * b  # column-scaled: unit diagonal where excited
    s, U = np.linalg.eigh(As)
    s, U = s[::-1], U[:, ::-1]
    seen = s > UNEXCITED * max(s[0], 1e-300)
    # |R z - e|^2 = z^T As z - 2 bs^T z + const, with As = U S U^T restricted to its range
    R = np.sqrt(s[seen])[:, None] * U[:, seen].T
    e = (U[:, seen].T @ bs) / np.sqrt(s[seen])
    z = cp.Variable(p)
    x = cp.multiply(D, z)
    constraints = _consistency(problem, x)
    objective = cp.sum_squares(R @ z - e) + REGULARIZATION * cp.sum_squares(cp.multiply(_prior_weights(problem), z))
    cp.Problem(cp.Minimize(objective), constraints).solve(solver=solver)
    if z.value is None:
        raise ValueError(f"identify: the solver found no solution ({solver})")
    xv = D * z.value

    rows = int(fit.rows.sum())
    rank = int(seen.sum())
    sigma2 = fit.rss(xv).sum() / max(rows - rank, 1)
    cov = sigma2 * (D[:, None] * (U[:, seen] / s[seen]) @ U[:, seen].T * D[None, :])
    hidden = U[:, ~seen]
    identifiable = np.linalg.norm(hidden, axis=1) < 1e-3 if hidden.size else np.ones(p, dtype=bool)
    std = np.where(identifiable, np.sqrt(np.maximum(np.diag(cov), 0.0)), np.nan)
    cond = float(np.sqrt(s[seen][0] / s[seen][-1])) if rank else float("inf")
    return IdentificationResult(
        problem, xv, std, identifiable, cond, _directions(problem.labels, D[:, None] * hidden),
        validation.rms(np.zeros(p)), validation.rms(xv), (rows, int(validation.rows.sum())))


def _prior_weights(problem: IdentificationProblem) -> np.ndarray:
    """Weights of the pull towards the prior: a joint that never reverses sees only Coulomb plus
    offset, and then the offset (rarely large on a real joint) is the one held at zero."""
    w = np.ones(problem.size)
    if "friction" in problem.slices:
        w[problem.slices["friction"]][2::3] = 1e3
    return w


def _consistency(problem: IdentificationProblem, x) -> list:
    """Pseudo-inertias PSD, masses positive, Coulomb and viscous friction >= 0."""
    import cvxpy as cp

    basis = pseudo_inertia(np.eye(10)).reshape(10, 16).T  # vec P(pi) = basis pi
    out = []

    def consistent(pi, min_mass: float) -> None:
        P = cp.Variable((4, 4), PSD=True)
        out.extend([cp.vec(P, order="C") == basis @ pi, pi[0] >= min_mass])

    sl = problem.slices
    if "inertia" in sl:
        pi0 = parameters(problem.model).reshape(-1, 10)
        for j in range(problem.k):
            if pi0[j, 0] > 0:  # a massless body (a frame holder) stays massless
                consistent(pi0[j] + x[sl["inertia"]][10 * j:10 * j + 10], MIN_MASS)
            else:
                out.append(x[sl["inertia"]][10 * j:10 * j + 10] == 0)
    if "payload" in sl:
        consistent(x[sl["payload"]], 0.0)
    if "friction" in sl:
        phi = x[sl["friction"]]
        out += [phi[0::3] >= 0, phi[1::3] >= 0]
    return out


def _directions(labels: list[str], hidden: np.ndarray, most: int = 20) -> list[str]:
    """Each unexcited direction as its largest components, e.g. '0.71 a.m - 0.71 b.m'."""
    out = []
    for u in hidden.T[:most]:
        u = u / np.abs(u).max()
        keep = np.argsort(-np.abs(u))[:4]
        keep = keep[np.abs(u[keep]) > 0.05]
        out.append(" ".join(f"{'-' if u[k] < 0 else '+'}{abs(u[k]):.2f} {labels[k]}" for k in keep).lstrip("+"))
    if hidden.shape[1] > most:
        out.append(f"... and {hidden.shape[1] - most} more")
    return out
