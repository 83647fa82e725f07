"""Coriolis matrix with Mdot - 2C skew-symmetric (Ploen & Park, Propositions 1 and 2, for trees)."""
from __future__ import annotations

import numpy as np

from ..checks import prepare
from ..model import Model
from ..spatial import ad, ad_star_bar
from .global_form import global_form


def coriolis_matrix(model: Model, q, v, *, base_pose=None) -> np.ndarray:
    """C(q, v) with C v = rnea(q, v, 0) - g(q) and Mdot - 2C skew-symmetric, shape (..., nv, nv).

        C = S^T G^T (J dG/dt + Cbar G) S,   dG/dt = -G ad_{S qd} Gamma G,
        Cbar_i = 1/2 (J_i ad_{V_i} - ad*_{V_i} J_i - ad*bar(J_i V_i)),   ad*_V F = ad*bar(F) V.

    Each Cbar_i is skew-symmetric and Cbar_i V_i = -ad*_{V_i} J_i V_i, which is Proposition 1's
    modified body term; the skew-symmetry of Mdot - 2C follows as in Proposition 2. Among the
    skew choices this one makes C equal to Pinocchio's computeCoriolisMatrix (models without
    mimic joints); with mimic joints C = P^T C_bodies P keeps the skew-symmetry.
    """
    batch = prepare(model, q, {"v": v}, base_pose=base_pose, needs_pose=False)
    g = global_form(model, batch)
    (v,) = batch.vectors
    B, N6 = g.G.shape[:2]
    SP = g.S @ g.P
    rates = v @ g.P.T  # joint rate of every body (and the base twist)
    Sqd = (g.S[None] * rates[:, None, :]).reshape(B, N6 // 6, 6, -1).sum(-1)  # S_i qd_i per body
    V = (g.G @ (SP @ v.T).T[..., None])[..., 0].reshape(B, -1, 6)
    ad_Sqd = _block_diag(ad(Sqd))
    Cbar = _block_diag(body_coriolis(g.J_blocks, V))
    dG = -g.G @ ad_Sqd @ g.Gamma @ g.G
    GSP = g.G @ SP
    C = np.swapaxes(GSP, -1, -2) @ (g.J @ dG @ SP + Cbar @ GSP)
    return batch.restore(C)


def body_coriolis(J: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Cbar_i = 1/2 (J_i ad_{V_i} - ad*_{V_i} J_i - ad*bar(J_i V_i)): skew, Cbar_i V_i = -ad*_{V_i} J_i V_i."""
    adV = ad(V)
    JadV = J @ adV
    return 0.5 * (JadV - np.swapaxes(JadV, -1, -2) - ad_star_bar(np.einsum("...ij,...j->...i", J, V)))


def _block_diag(blocks: np.ndarray) -> np.ndarray:
    """(B, N, 6, 6) -> (B, 6N, 6N) block-diagonal."""
    B, N = blocks.shape[:2]
    out = np.zeros((B, N, 6, N, 6))
    idx = np.arange(N)
    out[:, idx, :, idx, :] = np.moveaxis(blocks, 1, 0)
    return out.reshape(B, 6 * N, 6 * N)
