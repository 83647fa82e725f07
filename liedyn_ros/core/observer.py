"""The generalized-momentum observer of external torques (De Luca et al.; Haddadin et al. 2017).

With the momentum p = M(q) v and Mdot = C + C^T (C from `coriolis_matrix`), the equations of
motion M vdot + C v + g = tau + tau_ext give

    dp/dt = tau + C^T v - g + tau_ext                                   (beta = tau + C^T v - g)

so the residual r = K (p(t) - p(0) - int_0^t (beta + r) ds) obeys dr/dt = K (tau_ext - r):
a first-order low-pass of tau_ext with time constant 1/K_j per coordinate, needing no
acceleration. The same holds for a floating base with v = [V_base (omega, v) in the base frame;
qd]: M depends on the joint angles only and C keeps Mdot = C + C^T, so the first six entries
of r estimate the external wrench (m, f) on the base in the base frame.

Discretisation, exact whatever the sample intervals: between samples k and k+1 (dt apart)
tau_ext is taken constant, equal to the momentum it explains, ds / dt with
ds = p_{k+1} - p_k - (beta_k + beta_{k+1}) dt / 2 (trapezoid), and the filter is solved exactly:

    r_{k+1} = exp(-K dt) r_k + (1 - exp(-K dt)) ds / dt.

A constant tau_ext therefore gives r(t_k) = (1 - exp(-K (t_k - t_0))) tau_ext at every sample,
however the stamps jitter.
"""
from __future__ import annotations

import numpy as np

from .checks import check_vector
from .dynamics import coriolis_matrix, gravity, mass_matrix
from .model import Model

__all__ = ["MomentumObserver"]


class MomentumObserver:
    """External generalized force estimate of one robot or a batch of robots of one model.

    gain: K, positive, one value for all coordinates or one per coordinate (nv,) [1/s].
    `update` takes the samples in time order; `reset` starts over (a model change, a gap).
    """

    def __init__(self, model: Model, gain) -> None:
        K = np.asarray(gain, dtype=float)
        if K.ndim > 1 or (K.ndim == 1 and K.shape != (model.nv,)):
            raise ValueError(f"gain: expected one value or one per coordinate ({model.nv},), got shape {K.shape}")
        if not np.all(np.isfinite(K)) or np.any(K <= 0):
            raise ValueError("gain: must be positive and finite")
        self.model = model
        self.gain = np.broadcast_to(K, (model.nv,)).copy()
        self.reset()

    def reset(self) -> None:
        """Forget the past: the next update is a new p(0) and returns zero."""
        self.t: np.ndarray | None = None
        self._p = self._beta = self.residual = None

    def update(self, t, q, v, tau, *, base_pose=None, tau_friction=None) -> np.ndarray:
        """r at time t [s] (scalar, or one per robot) from q, v, the applied tau, shape (..., nv).

        tau_friction (..., n): the joints' friction torque in model joint order, the part of the
        motor torque that friction takes (tau = M vdot + C v + g + tau_friction - tau_ext); it is
        taken off tau when given (identified friction, issue 13).
        """
        model = self.model
        tau = check_vector("tau", tau, model.nv)
        v = np.asarray(v, dtype=float)  # checked by coriolis_matrix
        M = mass_matrix(model, q, base_pose=base_pose)
        C = coriolis_matrix(model, q, v, base_pose=base_pose)
        g = gravity(model, q, base_pose=base_pose)
        if tau_friction is not None:
            f = check_vector("tau_friction", tau_friction, model.n)
            tau = tau - np.concatenate([np.zeros(f.shape[:-1] + (model.nv - model.n,)), f], -1)
        if v.ndim == 1:  # one robot: plain products are several times quicker than einsum
            p, beta = M @ v, tau + v @ C - g
        else:
            p = np.einsum("...ij,...j->...i", M, v)
            beta = tau + np.einsum("...ji,...j->...i", C, v) - g
        t = np.asarray(t, dtype=float)
        if not np.all(np.isfinite(t)):
            raise ValueError("t: contains NaN or infinite values")
        if self.t is None:
            r = np.zeros(np.broadcast_shapes(p.shape, beta.shape))
        else:
            if np.shape(p) != np.shape(self._p):
                raise ValueError(f"q: batch shape {p.shape[:-1]} differs from the previous update's "
                                 f"{np.shape(self._p)[:-1]}; call reset() first")
            dt = (t - self.t)[..., None]
            if np.any(dt <= 0):
                raise ValueError(f"t: {t} is not after the previous sample's {self.t}")
            ds = p - self._p - 0.5 * (beta + self._beta) * dt
            decay = np.exp(-self.gain * dt)
            r = decay * self.residual + (1.0 - decay) * (ds / dt)
        self.t, self._p, self._beta, self.residual = t, p, beta, r
        return r
