"""The global matrix form of the dynamics (Park et al. section 5, Ploen & Park), for trees.

Stacking the twists of all bodies, V = G S qd with
    Gamma  the block matrix with Gamma[i, lambda(i)] = Ad_{f_i^-1} (zero elsewhere),
    G      = (I - Gamma)^-1, so G[i, j] = Ad_{T_ji^-1} when j is an ancestor of i (or i itself),
    S      = diag(S_1, ..., S_N),  J = diag(J_1, ..., J_N),
and M = S^T G^T J G S (Park et al. eq. 51). For a tree Gamma has one block per row, at the
parent's column instead of the sub-diagonal of a chain. A floating base is body 0 with S_0 = 1_6.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import Batch
from ..model import Model
from .kinematics import joint_transforms


@dataclass
class GlobalForm:
    Gamma: np.ndarray  # (B, 6N, 6N)
    G: np.ndarray  # (B, 6N, 6N)
    S: np.ndarray  # (6N, N_dof) body screws, 1_6 for a floating base
    J: np.ndarray  # (6N, 6N) block-diagonal spatial inertias
    J_blocks: np.ndarray  # (N, 6, 6) the same, one block per body
    P: np.ndarray  # (N_dof, nv) generalized coordinates -> body joint rates (the mimic map)


def global_form(model: Model, batch: Batch) -> GlobalForm:
    _, X = joint_transforms(model, batch.q)
    B, nb = batch.q.shape[0], model.nb
    base = 1 if model.floating_base else 0
    N = nb + base
    Gamma = np.zeros((B, N, 6, N, 6))
    for i, p in enumerate(model.parent):
        if p >= 0 or base:
            Gamma[:, i + base, :, p + base, :] = X[:, i]
    Gamma = Gamma.reshape(B, 6 * N, 6 * N)
    G = np.linalg.inv(np.eye(6 * N) - Gamma)
    ndof = nb + 6 * base
    S = np.zeros((6 * N, ndof))
    J = np.zeros((6 * N, 6 * N))
    P = np.zeros((ndof, model.nv))
    if base:
        S[:6, :6] = np.eye(6)
        J[:6, :6] = model.J_base
        P[:6, :6] = np.eye(6)
    for i in range(nb):
        k = 6 * (i + base)
        S[k:k + 6, 6 * base + i] = model.S[i]
        J[k:k + 6, k:k + 6] = model.J[i]
    P[6 * base:, 6 * base:] = model.P
    J_blocks = np.concatenate([model.J_base[None], model.J]) if base else model.J
    return GlobalForm(Gamma, G, S, J, J_blocks, P)
