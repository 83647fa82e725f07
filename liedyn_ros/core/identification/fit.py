"""Physically consistent least squares of friction, a payload and the inertial parameters.

The measured joint torques are linear in what is identified (Atkeson et al. 1986):

    tau = Y(q, v, a) (pi_0 + dpi) + Y_k(q, v, a) X pi_p + Y_f(qd) phi

with pi_0 the model's parameters, dpi their corrections (`inertia`), pi_p a payload's ten
parameters about a link's frame (`payload`, X = payload_map) and phi the friction (`friction`).
With a drive (core.identification.drive: tau = G^T (k * e) + o from published efforts e), two
more terms are linear too: the rotor inertia (`armature`), + (armature_0 + da) * qdd, and each
motor's torque constant (`effort_scale`), k_i (1 + s_i): the measured tau gains
sum_i s_i G[i, :] k_i e_i, a column of the motor torques k * e = G^-T (tau - o).
With x the unknowns stacked and G their columns, the fit minimises |G x - r|^2, r = tau - Y pi_0,
from the normal equations A = G^T G, b = G^T r, c = r^T r, summed block by block (memory
independent of the recording's length), per joint so that every joint's residual RMS follows too.

Physical consistency (Wensing, Kim and Slotine 2017): every body's pseudo-inertia
P(pi_0,j + dpi_j) and the payload's P(pi_p) are positive semidefinite (a convex LMI, solved by
cvxpy's CLARABEL), masses are positive, Coulomb and viscous friction and armature non-negative.

What the data do not determine keeps the prior (zero correction, zero payload, zero friction)
and gets no standard deviation: a parameter whose column no fit row excites (the friction of a
joint held still, a body only still joints carry) is not fitted at all and stays exactly at the
prior; a combination the data cannot separate (a near-zero eigenvalue of the column-scaled A)
is reported and taken as near the prior as physical consistency allows, the data fixing the
rest. The unconstrained least squares is taken as it is when it is physically consistent (no
solver then).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg.blas import dsyrk

from ..model import Model
from .drive import Drive
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
SCALE_FLOOR = 1e-6  # a column smaller than this, relative to the largest, is not excited


@dataclass(frozen=True)
class IdentificationProblem:
    """What to identify on `model`: any of friction, a payload on `payload_link`, all inertias,
    the joints' rotor inertia (`armature`), the motors' torque constants (`effort_scale`,
    relative to `drive`'s, the drive the measured torques were converted with; its armature is
    the prior)."""

    model: Model
    friction: bool = False
    payload_link: str | None = None
    inertia: bool = False
    smoothing: float = DEFAULT_SMOOTHING
    min_speed: float = 5 * DEFAULT_SMOOTHING
    armature: bool = False
    effort_scale: bool = False
    drive: Drive | None = None
    _payload: tuple[int, np.ndarray] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not (self.friction or self.payload_link or self.inertia or self.armature or self.effort_scale):
            raise ValueError("identify: choose at least one of friction, payload LINK, inertia, armature, effort_scale")
        if self.payload_link is not None:
            object.__setattr__(self, "_payload", payload_map(self.model, self.payload_link))
        if self.drive is None:
            object.__setattr__(self, "drive", Drive.of(self.model.n))
        elif self.drive.offset.shape != (self.model.n,):
            raise ValueError(f"drive: expected {self.model.n} joints, got {self.drive.offset.size}")

    @property
    def k(self) -> int:
        return self.model.nb + self.model.floating_base

    @property
    def slices(self) -> dict[str, slice]:
        """Where inertia (10 k), payload (10), friction (3 n), armature (n) and effort_scale (n) sit in x."""
        out, start = {}, 0
        n = self.model.n
        for name, size, on in (("inertia", 10 * self.k, self.inertia), ("payload", 10, self.payload_link),
                               ("friction", 3 * n, self.friction), ("armature", n, self.armature),
                               ("effort_scale", n, self.effort_scale)):
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
        for part in ("armature", "effort_scale"):
            if getattr(self, part):
                labels += [f"{j}.{part}" for j in self.model.joint_names]
        return labels

    def columns(self, q, v, a, tau, *, base_pose=None) -> tuple[np.ndarray, np.ndarray]:
        """(G (N, n, p), r = tau - Y pi_0 (N, n)) of measured joint torques tau (N, n).

        Only the joint rows: a floating base's wrench rows carry unmeasured contact forces.
        A joint's row is NaN (left out) while it moves slower than min_speed: a joint at rest
        holds whatever static friction it needs, which no velocity function describes.
        """
        n, drive = self.model.n, self.drive
        assert drive is not None  # set by __post_init__
        qd = np.asarray(v, dtype=float).reshape(-1, self.model.nv)[:, -n:]
        qdd = np.asarray(a, dtype=float).reshape(-1, self.model.nv)[:, -n:]
        tau = np.asarray(tau, dtype=float).reshape(-1, n)
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
        if self.armature:
            parts.append(qdd[:, :, None] * np.eye(n))
        if self.effort_scale:  # joint j's row, motor i's column: -G[i, j] k_i e_i
            parts.append(-np.swapaxes(drive.motor_torque(tau)[:, :, None] * drive.transmission, 1, 2))
        r = tau - Y @ parameters(self.model) - drive.armature * qdd
        return np.concatenate(parts, -1), np.where(np.abs(qd) >= self.min_speed, r, np.nan)


class NormalEquations:
    """Per-joint sums A_i = G_i^T G_i (n, p, p), b_i = G_i^T r_i, c_i = r_i^T r_i and row counts.

    Sums over rows, so they add up over blocks and over recordings: `merge` pools what several
    recordings (replayed one by one, or on other machines) accumulated into one fit.
    """

    def __init__(self, n: int, p: int) -> None:
        self._upper = np.zeros((n, p, p))  # A_i's upper triangles (dsyrk fills one half)
        self.b = np.zeros((n, p))
        self.c, self.rows = np.zeros(n), np.zeros(n, dtype=np.int64)

    def merge(self, other: NormalEquations) -> None:
        """Add `other`'s sums (the same problem's, from other rows) to these."""
        if other.b.shape != self.b.shape:
            raise ValueError(f"merge: equations of shape {other.b.shape}, expected {self.b.shape}")
        self._upper += other._upper
        self.b += other.b
        self.c += other.c
        self.rows += other.rows

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
    at_prior: np.ndarray  # (p,) bool: not fitted (never excited, or a massless body), exactly the prior

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

    @property
    def drive(self) -> Drive:
        """The problem's drive with the identified armature (armature_0 + da) and torque constants
        (k_0 (1 + s)); what was not identified stays as it was."""
        drive = self.problem.drive
        assert drive is not None
        armature = drive.armature + self.part("armature") if self.problem.armature else drive.armature
        scale = 1.0 + self.part("effort_scale") if self.problem.effort_scale else np.ones(drive.armature.size)
        return Drive(drive.torque_constant * scale, drive.transmission, drive.offset, armature)


def identify(problem: IdentificationProblem, fit: NormalEquations, validation: NormalEquations,
             solver: str = "CLARABEL") -> IdentificationResult:
    """The physically consistent least-squares fit of `fit`'s equations, checked on `validation`'s."""
    A, b = fit.A.sum(0), fit.b.sum(0)
    p = A.shape[0]
    held = _held(problem)
    scaled = _ScaledProblem.of(problem, A, b, held)
    z = scaled.least_squares()
    if not _is_consistent(problem, scaled.x(z), scaled.checked):
        z = _constrained(problem, scaled, solver)
    xv = scaled.x(z)

    rows = int(fit.rows.sum())
    rank = scaled.s.size
    sigma2 = fit.rss(xv).sum() / max(rows - rank, 1)
    D, free = scaled.D, scaled.free
    std = np.full(p, np.nan)
    identifiable = np.zeros(p, dtype=bool)
    identifiable[free] = np.linalg.norm(scaled.U_h, axis=1) < 1e-3
    var = sigma2 * D ** 2 * np.einsum("ik,k,ik->i", scaled.U_s, 1.0 / scaled.s, scaled.U_s)
    std[free] = np.where(identifiable[free], np.sqrt(np.maximum(var, 0.0)), np.nan)
    cond = float(np.sqrt(scaled.s[0] / scaled.s[-1])) if rank else float("inf")
    labels = problem.labels
    unexcited = (_never_excited(labels, ~free & ~held)
                 + _directions([labels[i] for i in np.flatnonzero(free)], D[:, None] * scaled.U_h))
    return IdentificationResult(problem, xv, std, identifiable, cond, unexcited, validation.rms(np.zeros(p)),
                                validation.rms(xv), (rows, int(validation.rows.sum())), ~free)


@dataclass(frozen=True)
class _ScaledProblem:
    """The fit on the excited columns (`free`), column-scaled: x[free] = D z, x = 0 elsewhere.

    With the scaled normal matrix D A D = U S U^T split into the directions the data see
    (U_s, eigenvalues s above UNEXCITED times the largest) and the hidden ones (U_h),
    |G x - r|^2 = |S^1/2 U_s^T z - e|^2 + const. The data fix U_s^T z; U_h^T z is free for the
    data, and is taken as near the prior (z = 0, weighted by w) as physical consistency allows.
    """

    free: np.ndarray  # (p,) bool: the columns some fit row excites
    D: np.ndarray  # (f,) column scales of the free columns
    U_s: np.ndarray  # (f, r)
    s: np.ndarray  # (r,)
    U_h: np.ndarray  # (f, f - r)
    e: np.ndarray  # (r,) = S^-1/2 U_s^T D b
    w: np.ndarray  # (f,) prior weights
    checked: tuple[tuple[slice, float], ...]  # parameter blocks kept physically consistent, min mass

    @classmethod
    def of(cls, problem: IdentificationProblem, A: np.ndarray, b: np.ndarray, held: np.ndarray) -> _ScaledProblem:
        d = np.sqrt(np.maximum(np.diag(A), 0.0))
        # A column no fit row excites (a joint held still: its friction, the bodies only it
        # carries) is not fitted at all: scaled up to unit size it would be rounding noise
        # that the solver's tolerance lets wander arbitrarily far from the prior.
        free = (d > SCALE_FLOOR * d.max(initial=0.0)) & ~held
        D = 1.0 / d[free]
        s, U = np.linalg.eigh(D[:, None] * A[np.ix_(free, free)] * D[None, :])
        s, U = s[::-1], U[:, ::-1]
        seen = s > UNEXCITED * s[0] if s.size else np.zeros(0, dtype=bool)
        e = U[:, seen].T @ (D * b[free]) / np.sqrt(s[seen])
        checked = tuple((sl, m) for sl, m in _consistent_blocks(problem) if free[sl].any())
        return cls(free, D, U[:, seen], s[seen], U[:, ~seen], e, _prior_weights(problem)[free], checked)

    def x(self, z: np.ndarray) -> np.ndarray:
        x = np.zeros(self.free.size)
        x[self.free] = self.D * z
        return x

    def least_squares(self) -> np.ndarray:
        """The unconstrained minimiser nearest to the prior."""
        return self.nearest_prior(self.U_s @ (self.e / np.sqrt(self.s)))

    def nearest_prior(self, z: np.ndarray) -> np.ndarray:
        """z with the same seen part U_s^T z and the hidden part minimising |w z|."""
        z_s = self.U_s @ (self.U_s.T @ z)
        if not self.U_h.size:
            return z_s
        W2U = self.w[:, None] ** 2 * self.U_h
        return z_s - self.U_h @ np.linalg.solve(self.U_h.T @ W2U, W2U.T @ z_s)


def _held(problem: IdentificationProblem) -> np.ndarray:
    """(p,) the parameters kept at the prior whatever the data: a massless body (a frame holder)."""
    held = np.zeros(problem.size, dtype=bool)
    if "inertia" in problem.slices:
        massless = parameters(problem.model).reshape(-1, 10)[:, 0] <= 0
        held[problem.slices["inertia"]] = np.repeat(massless, 10)
    return held


def _consistent_blocks(problem: IdentificationProblem) -> list[tuple[slice, float]]:
    """(where in x, smallest mass) of every body's and the payload's ten parameters."""
    sl, out = problem.slices, []
    if "inertia" in sl:
        start = sl["inertia"].start
        massive = parameters(problem.model).reshape(-1, 10)[:, 0] > 0
        out += [(slice(start + 10 * j, start + 10 * j + 10), MIN_MASS) for j in np.flatnonzero(massive)]
    if "payload" in sl:
        out.append((sl["payload"], 0.0))
    return out


def _prior_value(problem: IdentificationProblem, sl: slice) -> np.ndarray:
    """The model's parameters under x's block `sl` (zero for a payload: x is all of it)."""
    if "inertia" in problem.slices and sl.start < problem.slices["inertia"].stop:
        return parameters(problem.model)[sl.start - problem.slices["inertia"].start:][:10]
    return np.zeros(10)


def _is_consistent(problem: IdentificationProblem, x: np.ndarray, checked) -> bool:
    """The constraints of _consistency, checked on a value (to rounding)."""
    for sl, min_mass in checked:
        pi = _prior_value(problem, sl) + x[sl]
        eig = np.linalg.eigvalsh(pseudo_inertia(pi))
        if pi[0] < min_mass or eig[0] < -1e-12 * max(eig[-1], 1e-300):
            return False
    if "armature" in problem.slices and np.any(problem.drive.armature + x[problem.slices["armature"]] < 0):
        return False
    if "friction" in problem.slices:
        phi = x[problem.slices["friction"]]
        return bool(np.all(phi[0::3] >= 0) and np.all(phi[1::3] >= 0))
    return True


def _cvxpy():
    """The solver library, imported when a fit needs it (the "identify" extra)."""
    try:
        import cvxpy
    except ImportError as err:
        raise ImportError("the consistent fit needs cvxpy: pip install 'liedyn_ros[identify]'") from err
    return cvxpy


def _constrained(problem: IdentificationProblem, scaled: _ScaledProblem, solver: str) -> np.ndarray:
    """The consistent least-squares z. A tiny pull to the prior keeps the hidden part where
    consistency puts it (the data are blind to it); where consistency does not need it, it is
    then set exactly to the nearest to the prior."""
    cp = _cvxpy()
    f = scaled.D.size
    z = cp.Variable(f)
    E = np.zeros((scaled.free.size, f))
    E[np.flatnonzero(scaled.free), np.arange(f)] = scaled.D
    R = np.sqrt(scaled.s)[:, None] * scaled.U_s.T
    objective = cp.sum_squares(R @ z - scaled.e) + REGULARIZATION * cp.sum_squares(cp.multiply(scaled.w, z))
    cp.Problem(cp.Minimize(objective), _consistency(problem, E @ z, scaled.checked)).solve(solver=solver)
    if z.value is None:
        raise ValueError(f"identify: the solver found no solution ({solver})")
    nearest = scaled.nearest_prior(z.value)
    return nearest if _is_consistent(problem, scaled.x(nearest), scaled.checked) else z.value


def _prior_weights(problem: IdentificationProblem) -> np.ndarray:
    """Weights of the pull towards the prior: a joint that never reverses sees only Coulomb plus
    offset, and then the offset (rarely large on a real joint) is the one held at zero."""
    w = np.ones(problem.size)
    if "friction" in problem.slices:
        w[problem.slices["friction"]][2::3] = 1e3
    return w


def _consistency(problem: IdentificationProblem, x, checked) -> list:
    """Pseudo-inertias PSD and masses positive on the `checked` blocks, Coulomb and viscous friction >= 0."""
    cp = _cvxpy()

    basis = pseudo_inertia(np.eye(10)).reshape(10, 16).T  # vec P(pi) = basis pi
    out = []
    for sl, min_mass in checked:
        pi = _prior_value(problem, sl) + x[sl]
        P = cp.Variable((4, 4), PSD=True)
        out.extend([cp.vec(P, order="C") == basis @ pi, pi[0] >= min_mass])
    if "friction" in problem.slices:
        phi = x[problem.slices["friction"]]
        out += [phi[0::3] >= 0, phi[1::3] >= 0]
    if "armature" in problem.slices:
        out.append(problem.drive.armature + x[problem.slices["armature"]] >= 0)
    return out


def _never_excited(labels: list[str], fixed: np.ndarray) -> list[str]:
    """The parameters no fit row excites, one entry per joint or body, e.g. 'j1.coulomb, j1.viscous,
    j1.offset: never excited, kept at the prior'."""
    groups: dict[str, list[str]] = {}
    for i in np.flatnonzero(fixed):
        groups.setdefault(labels[i].rpartition(".")[0], []).append(labels[i])
    return [f"{', '.join(names)}: never excited, kept at the prior" for names in groups.values()]


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
