"""Finite Fourier series joint trajectories (Swevers, Ganseman, Tukel, De Schutter, Van Brussel 1997).

Joint i of the moving joints follows, with fundamental pulsation w_f = 2 pi / T_f and L harmonics,

    q_i(t)   = q0_i + sum_l  a_il / (w_f l) sin(w_f l t) - b_il / (w_f l) cos(w_f l t)
    qd_i(t)  =        sum_l  a_il cos(w_f l t) + b_il sin(w_f l t)
    qdd_i(t) =        sum_l  w_f l (-a_il sin(w_f l t) + b_il cos(w_f l t))

Harmonic l has amplitude c_il = sqrt(a_il^2 + b_il^2) in qd, so for every t (triangle inequality)

    |q_i - q0_i| <= sum_l c_il / (w_f l),   |qd_i| <= sum_l c_il,   |qdd_i| <= sum_l w_f l c_il,

bounds that hold along the whole trajectory, not only at samples. The series is T_f-periodic;
it starts and ends (after whole periods) at rest when qd(0) = sum_l a_il = 0 and
qdd(0) = w_f sum_l l b_il = 0: `at_rest` makes a_iL and b_iL so. The other joints are held still.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FourierTrajectory", "at_rest"]


@dataclass(frozen=True)
class FourierTrajectory:
    """The moving joints (indices into the model's joints) follow the series, the others q_hold."""

    joints: np.ndarray  # (m,) indices in model joint order
    q_hold: np.ndarray  # (n,) every joint's still position (the moving joints' entries unused)
    q0: np.ndarray  # (m,)
    a: np.ndarray  # (m, L)
    b: np.ndarray  # (m, L)
    w_f: float  # fundamental pulsation, rad/s

    @property
    def period(self) -> float:
        return 2 * np.pi / self.w_f

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    def derivatives(self, t, order: int = 2) -> list[np.ndarray]:
        """[q, qd, ..., q^(order)] at times t (N,), each (N, n)."""
        t = np.asarray(t, dtype=float).reshape(-1)
        wl = self.w_f * np.arange(1, self.harmonics + 1)  # (L,)
        phase = t[:, None] * wl[None, :]  # (N, L)
        s, c = np.sin(phase), np.cos(phase)
        out = []
        for k in range(order + 1):
            full = np.zeros((t.size, self.q_hold.size))
            if k == 0:
                full[:] = self.q_hold
                full[:, self.joints] = self.q0 + (s / wl) @ self.a.T - (c / wl) @ self.b.T
            else:
                # d^k/dt^k of (a sin - b cos)/(wl): the pair (sin, cos) turns by k quarter periods
                sk, ck = np.sin(phase + k * np.pi / 2), np.cos(phase + k * np.pi / 2)
                scale = wl ** (k - 1)
                full[:, self.joints] = (sk * scale) @ self.a.T - (ck * scale) @ self.b.T
            out.append(full)
        return out

    def amplitude(self, eps: float = 0.0) -> np.ndarray:
        """c_il = sqrt(a^2 + b^2 + eps^2) (m, L): eps > 0 makes it smooth at 0 and only larger."""
        return np.sqrt(self.a ** 2 + self.b ** 2 + eps ** 2)

    def bounds(self, eps: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(max |q - q0|, max |qd|, max |qdd|) per moving joint (m,), over all t (module docstring)."""
        c = self.amplitude(eps)
        wl = self.w_f * np.arange(1, self.harmonics + 1)
        return (c / wl).sum(1), c.sum(1), (c * wl).sum(1)


def at_rest(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) with their last harmonic set so that qd(0) = 0 and qdd(0) = 0: a_L = -sum_{l<L} a_l,
    b_L = -sum_{l<L} l b_l / L. Needs L >= 2."""
    a, b = np.array(a, dtype=float), np.array(b, dtype=float)
    L = a.shape[-1]
    if L < 2:
        raise ValueError(f"harmonics: a trajectory that starts at rest needs at least 2, got {L}")
    a[..., -1] = -a[..., :-1].sum(-1)
    b[..., -1] = -(b[..., :-1] * np.arange(1, L)).sum(-1) / L
    return a, b
