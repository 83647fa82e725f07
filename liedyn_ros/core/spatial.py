"""SE(3) / se(3) toolkit in the notation of Park, Bobrow & Ploen (1995).

Twists are V = (omega, v), wrenches F = (m, f): angular part first. Every function accepts
leading batch dimensions: a (..., 6) twist gives (..., 4, 4) or (..., 6, 6) results.

Naming follows the papers:
    Ad(T)            adjoint of T in SE(3):          Ad_T V  = T [V] T^-1
    ad(V)            adjoint of V in se(3):          ad_V W  = [V, W]
    ad_star(V)       coadjoint (dual):               ad*_V   = ad_V^T
    ad_star_bar(F)   the same map read as linear in V:  ad*_V F = ad_star_bar(F) V
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "hat",
    "exp_so3",
    "exp_se3",
    "log_so3",
    "log_se3",
    "inv_se3",
    "compose",
    "Ad",
    "Ad_inv",
    "ad",
    "ad_star",
    "ad_star_bar",
    "rpy_to_matrix",
    "spatial_inertia",
]


def hat(w: np.ndarray) -> np.ndarray:
    """[w]: the 3x3 skew-symmetric matrix with [w] x = w x x, shape (..., 3) -> (..., 3, 3)."""
    w = np.asarray(w, dtype=float)
    z = np.zeros(w.shape[:-1])
    return np.stack(
        [
            np.stack([z, -w[..., 2], w[..., 1]], -1),
            np.stack([w[..., 2], z, -w[..., 0]], -1),
            np.stack([-w[..., 1], w[..., 0], z], -1),
        ],
        -2,
    )


def _exp_coefficients(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sin(t)/t, (1-cos t)/t^2, (t - sin t)/t^3 with Taylor series near t = 0."""
    small = theta < 1e-4
    t = np.where(small, 1.0, theta)
    t2 = theta * theta
    a = np.where(small, 1 - t2 / 6 + t2 * t2 / 120, np.sin(t) / t)
    b = np.where(small, 0.5 - t2 / 24 + t2 * t2 / 720, (1 - np.cos(t)) / (t * t))
    c = np.where(small, 1 / 6 - t2 / 120 + t2 * t2 / 5040, (t - np.sin(t)) / (t * t * t))
    return a, b, c


def exp_so3(w: np.ndarray) -> np.ndarray:
    """Rodrigues' formula (Park et al. eq. 15): exp([w]) = I + sin|w|/|w| [w] + (1-cos|w|)/|w|^2 [w]^2."""
    w = np.asarray(w, dtype=float)
    a, b, _ = _exp_coefficients(np.linalg.norm(w, axis=-1))
    W = hat(w)
    return np.eye(3) + a[..., None, None] * W + b[..., None, None] * (W @ W)


def exp_se3(xi: np.ndarray) -> np.ndarray:
    """Closed-form exp of a twist xi = (omega, v) (Park et al. eqs. 16-17), (..., 6) -> (..., 4, 4).

    exp([xi]) = [[exp([w]), A v], [0, 1]],  A = I + (1-cos t)/t^2 [w] + (t - sin t)/t^3 [w]^2.
    """
    xi = np.asarray(xi, dtype=float)
    w, v = xi[..., :3], xi[..., 3:]
    a, b, c = _exp_coefficients(np.linalg.norm(w, axis=-1))
    W = hat(w)
    W2 = W @ W
    R = np.eye(3) + a[..., None, None] * W + b[..., None, None] * W2
    A = np.eye(3) + b[..., None, None] * W + c[..., None, None] * W2
    T = np.zeros(xi.shape[:-1] + (4, 4))
    T[..., :3, :3] = R
    T[..., :3, 3] = np.einsum("...ij,...j->...i", A, v)
    T[..., 3, 3] = 1.0
    return T


def log_so3(R: np.ndarray) -> np.ndarray:
    """Inverse of exp_so3 for rotation angles in [0, pi], (..., 3, 3) -> (..., 3)."""
    R = np.asarray(R, dtype=float)
    cos_t = np.clip((np.trace(R, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0)
    theta = np.arccos(cos_t)
    vee = np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    a, _, _ = _exp_coefficients(theta)
    w = vee / (2 * a[..., None])
    # Near theta = pi, sin t -> 0 and the skew part vanishes: read the axis off R + I instead.
    near_pi = theta > np.pi - 1e-6
    if np.any(near_pi):
        B = (R + np.eye(3)) / 2
        k = np.argmax(np.diagonal(B, axis1=-2, axis2=-1), axis=-1)
        col = np.take_along_axis(B, k[..., None, None].repeat(3, -1).swapaxes(-1, -2), -1)[..., 0]
        axis = col / np.linalg.norm(col, axis=-1, keepdims=True)
        axis = axis * np.where(np.einsum("...i,...i->...", axis, vee) < 0, -1.0, 1.0)[..., None]
        w = np.where(near_pi[..., None], axis * theta[..., None], w)
    return w


def log_se3(T: np.ndarray) -> np.ndarray:
    """Inverse of exp_se3: T -> xi = (omega, v) with exp([xi]) = T, (..., 4, 4) -> (..., 6)."""
    T = np.asarray(T, dtype=float)
    w = log_so3(T[..., :3, :3])
    theta = np.linalg.norm(w, axis=-1)
    a, b, _ = _exp_coefficients(theta)
    small = theta < 1e-4
    t2 = np.where(small, 1.0, theta * theta)
    # A^-1 = I - [w]/2 + (1 - a / (2 b)) / t^2 [w]^2
    d = np.where(small, 1 / 12 + theta * theta / 720, (1 - a / (2 * b)) / t2)
    W = hat(w)
    A_inv = np.eye(3) - W / 2 + d[..., None, None] * (W @ W)
    v = np.einsum("...ij,...j->...i", A_inv, T[..., :3, 3])
    return np.concatenate([w, v], -1)


def inv_se3(T: np.ndarray) -> np.ndarray:
    """T^-1 = [[R^T, -R^T p], [0, 1]]."""
    T = np.asarray(T, dtype=float)
    Rt = np.swapaxes(T[..., :3, :3], -1, -2)
    out = np.zeros(T.shape)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", Rt, T[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def compose(*Ts: np.ndarray) -> np.ndarray:
    """T_1 T_2 ... T_k (batched matrix product)."""
    out = np.asarray(Ts[0], dtype=float)
    for T in Ts[1:]:
        out = out @ T
    return out


def Ad(T: np.ndarray) -> np.ndarray:
    """Ad_T = [[R, 0], [[p] R, R]] for twists (omega, v), (..., 4, 4) -> (..., 6, 6)."""
    T = np.asarray(T, dtype=float)
    R, p = T[..., :3, :3], T[..., :3, 3]
    out = np.zeros(T.shape[:-2] + (6, 6))
    out[..., :3, :3] = R
    out[..., 3:, 3:] = R
    out[..., 3:, :3] = hat(p) @ R
    return out


def Ad_inv(T: np.ndarray) -> np.ndarray:
    """Ad_{T^-1} = [[R^T, 0], [-R^T [p], R^T]] without forming T^-1."""
    T = np.asarray(T, dtype=float)
    Rt = np.swapaxes(T[..., :3, :3], -1, -2)
    out = np.zeros(T.shape[:-2] + (6, 6))
    out[..., :3, :3] = Rt
    out[..., 3:, 3:] = Rt
    out[..., 3:, :3] = -Rt @ hat(T[..., :3, 3])
    return out


def ad(V: np.ndarray) -> np.ndarray:
    """ad_V = [[[w], 0], [[v], [w]]], so that ad_V W is the Lie bracket [V, W]."""
    V = np.asarray(V, dtype=float)
    W, Vh = hat(V[..., :3]), hat(V[..., 3:])
    out = np.zeros(V.shape[:-1] + (6, 6))
    out[..., :3, :3] = W
    out[..., 3:, 3:] = W
    out[..., 3:, :3] = Vh
    return out


def ad_star(V: np.ndarray) -> np.ndarray:
    """ad*_V = ad_V^T, acting on wrenches (m, f); Newton-Euler reads F = J dV - ad*_V J V."""
    return np.swapaxes(ad(V), -1, -2)


def ad_star_bar(F: np.ndarray) -> np.ndarray:
    """The skew-symmetric matrix with ad*_V F = ad_star_bar(F) V: [[[m], [f]], [[f], 0]].

    Ploen & Park's Proposition 1 needs a skew per-body Coriolis term C_i with C_i V_i = -ad*_{V_i} J_i V_i;
    -ad_star_bar(J_i V_i) is one.
    """
    F = np.asarray(F, dtype=float)
    M, Fh = hat(F[..., :3]), hat(F[..., 3:])
    out = np.zeros(F.shape[:-1] + (6, 6))
    out[..., :3, :3] = M
    out[..., :3, 3:] = Fh
    out[..., 3:, :3] = Fh
    return out


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = np.asarray(rpy, dtype=float)
    Rx = exp_so3(np.array([r, 0.0, 0.0]))
    Ry = exp_so3(np.array([0.0, p, 0.0]))
    Rz = exp_so3(np.array([0.0, 0.0, y]))
    return Rz @ Ry @ Rx


def spatial_inertia(mass: float, com: np.ndarray, I_com: np.ndarray) -> np.ndarray:
    """J = [[I_c - m [r]^2, m [r]], [-m [r], m 1]] in a frame where the centre of mass is at r.

    I_com is the rotational inertia about the centre of mass, in the axes of that frame
    (Park et al. eq. 21, written for twists (omega, v)).
    """
    r = hat(np.asarray(com, dtype=float))
    J = np.zeros((6, 6))
    J[:3, :3] = I_com - mass * r @ r
    J[:3, 3:] = mass * r
    J[3:, :3] = -mass * r
    J[3:, 3:] = mass * np.eye(3)
    return J
