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
from .fast import OK, fast_model
from .fast.entry import single
from .fast.spatial import jit
from .identification import Friction, friction_torque
from .model import Model

__all__ = ["MomentumObserver"]

_ndarray = np.ndarray
_SCALARS = (float, int, np.float64, np.float32, np.int64)


class MomentumObserver:
    """External generalized force estimate of one robot or a batch of robots of one model.

    gain: K, positive, one value for all coordinates or one per coordinate (nv,) [1/s].
    max_gap [s]: a sample later than this after the previous one starts over (r = 0 there), as
    after `reset`: the integral cannot bridge a stretch without samples. None: never.
    friction: the joints' friction model (`Friction`, issue 13); its torque at the measured joint
    velocities, the part of the motor torque friction takes, is taken off tau. A payload enters
    through the model (`with_payload`). armature: the rotors' inertia on the diagonal of M (n,)
    (core.identification.Drive), so p = (M + diag(armature)) v; C is unchanged (a constant).
    `update` takes the samples in time order; `reset` starts over (say, on a model change). A
    sample whose momentum terms overflow (a velocity of 1e154 is finite, its square is not) raises
    ValueError and leaves the observer as it was: one such sample never poisons the later ones.
    """

    def __init__(self, model: Model, gain, *, max_gap: float | None = None, friction: Friction | None = None,
                 armature=None) -> None:
        K = np.asarray(gain, dtype=float)
        if K.ndim > 1 or (K.ndim == 1 and K.shape != (model.nv,)):
            raise ValueError(f"gain: expected one value or one per coordinate ({model.nv},), got shape {K.shape}")
        if not np.all(np.isfinite(K)) or np.any(K <= 0):
            raise ValueError("gain: must be positive and finite")
        if max_gap is not None and not max_gap > 0:
            raise ValueError(f"max_gap: must be positive or None, got {max_gap}")
        self.model = model
        self.gain = np.broadcast_to(K, (model.nv,)).copy()
        self.max_gap = np.inf if max_gap is None else float(max_gap)
        if friction is not None and friction.coulomb.shape != (model.n,):
            raise ValueError(f"friction: expected parameters for the {model.n} joints, got {friction.coulomb.shape[0]}")
        self.friction = friction
        self.armature = None if armature is None or not np.any(armature) else check_vector("armature", armature, model.n)
        # The compiled step's friction rows (Coulomb, viscous, offset, smoothing) and armature,
        # its state (p, beta, r of the last sample, scratch g, p, beta) and scratch M, C.
        n, nv = model.n, model.nv
        self._friction_table = np.zeros((5, n))
        self._friction_table[3] = 1.0
        if friction is not None:
            self._friction_table[:3] = friction.coulomb, friction.viscous, friction.offset
            self._friction_table[3] = friction.smoothing
        if self.armature is not None:
            self._friction_table[4] = self.armature
        self._state, self._mats = np.zeros((6, nv)), np.empty((2, nv, nv))
        self._rows = (self._state[0], self._state[1], self._state[2])  # p, beta, r: views made once
        self.reset()

    def reset(self) -> None:
        """Forget the past: the next update is a new p(0) and returns zero."""
        self.t: np.ndarray | None = None
        self._p = self._beta = self.residual = None

    def update(self, t, q, v, tau, *, base_pose=None) -> np.ndarray:
        """r at time t [s] (scalar, or one per robot) from q, v, the applied tau, shape (..., nv)."""
        r = self._update_one(t, q, v, tau, base_pose)
        if r is not None:
            return r
        p, beta = self._momentum_terms(q, v, tau, base_pose)
        t = _check_time(t)
        if self.t is None:
            r = np.zeros(p.shape)
        else:
            if p.shape != self._p.shape:
                raise ValueError(f"q: batch shape {p.shape[:-1]} differs from the previous update's "
                                 f"{self._p.shape[:-1]}; call reset() first")
            dt = (t - self.t)[..., None]
            if np.any(dt <= 0):
                raise ValueError(f"t: {t} is not after the previous sample's {self.t}")
            decay = np.exp(-self.gain * dt)
            r = decay * self.residual + (1.0 - decay) * (p - self._p - 0.5 * (beta + self._beta) * dt) / dt
            r = np.where(dt > self.max_gap, 0.0, r)  # those robots start over here
        _check_finite(p, beta, r)
        self.t, self._p, self._beta, self.residual = (t if t.ndim else float(t)), p, beta, r
        return r

    def _update_one(self, t, q, v, tau, base_pose) -> np.ndarray | None:
        """One robot's float64 sample through the compiled step (fast.observer); None when the
        arguments are anything else, or wrong, or t does not follow: `update`'s general path then
        takes them (and words the error). The state lives in self._state, whose rows p, beta and
        r are self._p, self._beta and self.residual after such a step."""
        fm = fast_model(self.model)
        T = fm.identity if base_pose is None else base_pose
        if not (type(q) is _ndarray and type(v) is _ndarray and type(tau) is _ndarray and type(T) is _ndarray
                and q.ndim == 1 and (base_pose is None) is fm.fixed and type(t) in _SCALARS):
            return None
        t = float(t)
        previous = self.t
        state, rows = self._state, self._rows
        if not (previous is None or isinstance(previous, float)):
            return None  # the previous update was a batch of robots
        if previous is None or t - previous > self.max_gap:
            dt = 0.0  # starts over: r = 0 here
        elif t > previous:
            dt = t - previous
            if self._p is not rows[0]:  # the previous update took the general path
                state[0], state[1], state[2] = self._p, self._beta, self.residual
        else:
            return None
        try:
            status = single.observer_one(fm.handle, q, v, tau, T, dt, self.gain, self._friction_table, state,
                                         self._mats)
        except TypeError:  # not float64 vectors: the general path
            return None
        if status != OK:  # the kernel wrote nothing
            return None
        p, beta, r = rows
        if dt == 0.0:
            r[:] = 0.0
        self.t, self._p, self._beta, self.residual = t, p, beta, r
        return r.copy()

    def series(self, t, q, v, tau, *, base_pose=None) -> np.ndarray:
        """r at N consecutive samples of one robot, t (N,), q (N, n), ..., continuing the updates.

        The same as N calls of `update`, with the dynamics computed as one batch (the replay).
        """
        t = _check_time(t).reshape(-1)
        p, beta = self._momentum_terms(q, v, tau, base_pose)
        if p.shape != (len(t), self.model.nv):
            raise ValueError(f"q: expected {len(t)} samples of one robot (one per t), got batch shape {p.shape[:-1]}")
        if self.t is not None and np.shape(self.t) != ():
            raise ValueError("q: the previous updates were a batch of robots; call reset() first")
        before = np.nan if self.t is None else self.t  # NaN: no sample before, start over at t[0]
        dt = np.diff(t, prepend=before)
        restarts = np.flatnonzero(~(dt <= self.max_gap))
        k = restarts[0] if len(restarts) else len(t)
        out = [self._advance(t[:k], p[:k], beta[:k])]
        for a, b in zip(restarts, np.append(restarts[1:], len(t))):
            self.t, self._p, self._beta, self.residual = t[a], p[a], beta[a], np.zeros(self.model.nv)
            out += [self.residual[None], self._advance(t[a + 1:b], p[a + 1:b], beta[a + 1:b])]
        return np.concatenate(out)

    def _advance(self, t: np.ndarray, p: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """The residuals of samples (t, p, beta) that follow the stored one, in time order."""
        if not len(t):
            return p[:0]
        dt = np.diff(t, prepend=self.t)[:, None]
        if np.any(dt <= 0):
            raise ValueError("t: stamps must increase, also from the previous sample")
        beta_before = np.concatenate([self._beta[None], beta[:-1]])
        ds = np.diff(p, axis=0, prepend=self._p[None]) - 0.5 * (beta + beta_before) * dt
        decay = np.exp(-self.gain * dt)
        r = np.empty_like(ds)
        _first_order(decay, (1.0 - decay) * ds / dt, self.residual, r)
        self.t, self._p, self._beta, self.residual = t[-1], p[-1], beta[-1], r[-1].copy()
        return r

    def _momentum_terms(self, q, v, tau, base_pose) -> tuple[np.ndarray, np.ndarray]:
        """p = (M + diag(armature)) v and beta = tau - tau_f(qd) + C^T v - g, each (..., nv)."""
        model = self.model
        tau = check_vector("tau", tau, model.nv)
        v = np.asarray(v, dtype=float)  # checked by coriolis_matrix
        M = mass_matrix(model, q, base_pose=base_pose)
        if self.armature is not None:
            j = np.arange(model.nv - model.n, model.nv)
            M[..., j, j] += self.armature
        C = coriolis_matrix(model, q, v, base_pose=base_pose)
        g = gravity(model, q, base_pose=base_pose)
        if self.friction is not None:
            f = friction_torque(self.friction, v[..., model.nv - model.n:])
            tau = tau - np.concatenate([np.zeros(f.shape[:-1] + (model.nv - model.n,)), f], -1)
        if v.ndim == 1:  # one robot: plain products are several times quicker than einsum
            return M @ v, tau + v @ C - g
        return np.einsum("...ij,...j->...i", M, v), tau + np.einsum("...ji,...j->...i", C, v) - g


def _check_finite(p: np.ndarray, beta: np.ndarray, r: np.ndarray) -> None:
    """Refuse, before the state takes them, momentum terms that overflowed."""
    if not (np.isfinite(p).all() and np.isfinite(beta).all() and np.isfinite(r).all()):
        raise ValueError("q, v, tau: the momentum terms overflow at this state (values too large); "
                         "the observer keeps its previous state")


def _check_time(t) -> np.ndarray:
    t = np.asarray(t, dtype=float)
    if not np.all(np.isfinite(t)):
        raise ValueError("t: contains NaN or infinite values")
    return t


@jit
def _first_order(decay, u, r0, out):
    """out[k] = decay[k] * out[k - 1] + u[k], out[-1] = r0: the filter's recurrence in time order."""
    r = r0.copy()
    for k in range(decay.shape[0]):
        for j in range(r.shape[0]):
            r[j] = decay[k, j] * r[j] + u[k, j]
            out[k, j] = r[j]
