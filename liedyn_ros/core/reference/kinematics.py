"""Forward kinematics shared by the reference algorithms (Kim 2012, Table 2, forward pass).

Everything here works on a flattened batch: arrays of shape (B, ...).
"""
from __future__ import annotations

import numpy as np

from ..checks import Batch
from ..model import Model
from ..spatial import Ad_inv, ad, exp_se3


def joint_transforms(model: Model, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """f_{lambda(i),i} = M_i exp([S_i] q_i) and X_i = Ad_{f^-1}, shapes (B, nb, 4, 4) and (B, nb, 6, 6).

    q are the coordinates (B, n); mimic bodies get P q + q_offset.
    """
    q_body = model.body_q(q)
    f = model.M @ exp_se3(model.S * q_body[..., None])
    return f, Ad_inv(f)


def split(model: Model, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Generalized vector -> (base part (B, 6), joint part of every body (B, nb)).

    The base part is zero for a fixed base; mimic bodies get P qd (no offset: it is a rate).
    """
    if model.floating_base:
        return v[:, :6], v[:, 6:] @ model.P.T
    return np.zeros((v.shape[0], 6)), v @ model.P.T


def join(model: Model, base: np.ndarray, body: np.ndarray) -> np.ndarray:
    """(base wrench (B, 6), body torques (B, nb)) -> generalized force: [base; P^T tau_body]."""
    tau = body @ model.P
    return np.concatenate([base, tau], axis=1) if model.floating_base else tau


def gravity_acceleration(model: Model, batch: Batch) -> np.ndarray:
    """The base acceleration that stands for gravity: (0, -R^T g) in the base frame, (B, 6).

    Adding it to the base acceleration adds the fictitious upward acceleration of Featherstone's
    trick, so every body's inertial force includes its weight.
    """
    R = batch.base_pose[:, :3, :3]  # (B or 1, 3, 3)
    out = np.zeros((batch.q.shape[0], 6))
    out[:, 3:] = -np.einsum("bji,j->bi", R, model.gravity)
    return out


def velocities(model: Model, X: np.ndarray, V0: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """V_i = Ad_{f_i^-1} V_lambda(i) + S_i qd_i, (B, nb, 6)."""
    V = np.zeros(X.shape[:2] + (6,))
    for i, p in enumerate(model.parent):
        Vp = V0 if p < 0 else V[:, p]
        V[:, i] = np.einsum("bij,bj->bi", X[:, i], Vp) + model.S[i] * qd[:, i, None]
    return V


def bias_accelerations(model: Model, V: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """eta_i = ad_{V_i} S_i qd_i, the velocity-product acceleration of Kim Table 3, (B, nb, 6)."""
    return np.einsum("bnij,nj->bni", ad(V), model.S) * qd[..., None]
