"""Base (identifiable) parameters, found numerically (Gautier 1990).

Stack the regressor of random samples, W = [Y(x_1); ...; Y(x_N)], and take a QR decomposition
with column pivoting, W E = Q [R1 R2]: the first r pivoted columns are independent, the others
are combinations of them, W_2 = W_1 beta with beta = R1^-1 R2. Then

    Y pi = Y_1 pi_b,      pi_b = pi_1 + beta pi_2,

and the columns that never move the torques (the base's parents, parameters of links that
only turn about their own axis, ...) are those whose whole column is zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import Model
from .parameters import parameter_labels
from .regressor import regressor

__all__ = ["BaseParameters", "base_parameters", "independent_columns"]

ZERO_COLUMN = 1e-11  # relative column norm below which a regressor column is rounding noise


@dataclass(frozen=True)
class BaseParameters:
    """pi_b = K pi with K = [1 beta] on the pivoted columns; Y pi = Y[..., independent] pi_b."""

    independent: np.ndarray  # (r,) columns of Y kept
    dependent: np.ndarray  # (p - r,) the others
    beta: np.ndarray  # (r, p - r)
    labels: tuple[str, ...]  # of the independent columns

    @property
    def K(self) -> np.ndarray:
        """(r, p): pi_b = K pi."""
        r, p = self.independent.size, self.independent.size + self.dependent.size
        K = np.zeros((r, p))
        K[:, self.independent] = np.eye(r)
        K[:, self.dependent] = self.beta
        return K

    def of(self, pi: np.ndarray) -> np.ndarray:
        """pi_b (..., r) of full parameter vectors pi (..., p)."""
        return np.asarray(pi)[..., self.independent] + np.asarray(pi)[..., self.dependent] @ self.beta.T


def base_parameters(model: Model, samples: int = 200, seed: int = 0, tol: float = 1e-8) -> BaseParameters:
    """The base parameters of `model` from `samples` random (q, v, a) within the joint limits."""
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(model.lower), model.lower, -np.pi)
    hi = np.where(np.isfinite(model.upper), model.upper, np.pi)
    q = rng.uniform(lo, hi, (samples, model.n))
    v, a = rng.standard_normal((2, samples, model.nv))
    pose = None
    if model.floating_base:
        from ..spatial import exp_se3

        pose = exp_se3(rng.standard_normal((samples, 6)))
    Y = regressor(model, q, v, a, base_pose=pose).reshape(-1, 10 * (model.nb + model.floating_base))
    independent, dependent, beta = independent_columns(Y, tol)
    labels = parameter_labels(model)
    return BaseParameters(independent, dependent, beta, tuple(labels[i] for i in independent))


def independent_columns(W: np.ndarray, tol: float = 1e-8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(independent, dependent, beta) of the columns of W (rows, p): W[:, dependent] = W[:, independent] beta.

    The rank is decided on the unit-scaled columns (scale-free); zero columns are dependent, and so
    are columns of rounding noise (norm below ZERO_COLUMN x the largest: scaled to unit norm, noise
    would look independent, as Panda's link 2 m c_z did, an exact zero computed as 5e-15).
    """
    import scipy.linalg  # here, not at the top: 0.25 s of every start of the node, which never calls this

    s = np.linalg.norm(W, axis=0)
    s = np.where(s > ZERO_COLUMN * s.max(initial=0.0), s, np.inf)  # noise scaled to exact zeros
    _, R, E = scipy.linalg.qr(W / s, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > tol * d[0]))
    beta = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:])
    # undo the column scaling: W_2 / s_2 = W_1 / s_1 beta  =>  W_2 = W_1 diag(s_1)^-1 beta diag(s_2)
    beta = beta / s[E[:r], None] * np.where(np.isfinite(s), s, 0.0)[None, E[r:]]
    return E[:r].copy(), E[r:].copy(), beta
