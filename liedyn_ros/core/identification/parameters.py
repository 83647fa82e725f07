"""The inertial parameter vector pi of a model and models built from parameters.

Per body, about the body frame's origin and in its axes (Pinocchio's dynamic-parameter order):

    pi_j = (m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz),   h = m c,
    J_j  = [[Ibar, [h]], [-[h], m 1]],       Ibar = I_c - m [c]^2 (rotational inertia at the origin)

Bodies: the root link first for a floating base, then `model.body_names`. pi is physically
consistent when the pseudo-inertia P(pi) = [[Ibar_trace/2 1 - Ibar, h], [h^T, m]] is positive
semidefinite (Wensing, Kim, Slotine 2017): m >= 0, and a mass distribution has these moments.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..checks import check_vector
from ..model import Model
from ..spatial import Ad_inv, spatial_inertia

__all__ = ["PARAMETER_NAMES", "parameters", "parameter_labels", "inertia_from_parameters",
           "parameters_from_inertia", "pseudo_inertia", "with_parameters", "with_payload", "payload_map"]

PARAMETER_NAMES = ("m", "mc_x", "mc_y", "mc_z", "I_xx", "I_xy", "I_yy", "I_xz", "I_yz", "I_zz")
_UPPER = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))  # Ibar entries in Pinocchio's order


def parameters_from_inertia(J: np.ndarray) -> np.ndarray:
    """pi (..., 10) of spatial inertias J (..., 6, 6)."""
    J = np.asarray(J, dtype=float)
    h = np.stack([J[..., 2, 4], J[..., 0, 5], J[..., 1, 3]], -1)  # [h] = J[:3, 3:]
    I = np.stack([J[..., r, c] for r, c in _UPPER], -1)
    return np.concatenate([J[..., 5, 5][..., None], h, I], -1)


def inertia_from_parameters(pi: np.ndarray) -> np.ndarray:
    """J (..., 6, 6) of parameter vectors pi (..., 10): [[Ibar, [h]], [-[h], m 1]]."""
    pi = np.asarray(pi, dtype=float)
    m, (hx, hy, hz) = pi[..., 0], np.moveaxis(pi[..., 1:4], -1, 0)
    J = np.zeros(pi.shape[:-1] + (6, 6))
    for k, (r, c) in enumerate(_UPPER):
        J[..., r, c] = J[..., c, r] = pi[..., 4 + k]
    z = np.zeros_like(m)
    H = np.stack([np.stack([z, -hz, hy], -1), np.stack([hz, z, -hx], -1), np.stack([-hy, hx, z], -1)], -2)
    J[..., :3, 3:] = H
    J[..., 3:, :3] = -H
    J[..., 3:, 3:] = m[..., None, None] * np.eye(3)
    return J


def pseudo_inertia(pi: np.ndarray) -> np.ndarray:
    """P(pi) (..., 4, 4) = [[tr(Ibar)/2 1 - Ibar, h], [h^T, m]]; PSD iff pi is physically consistent."""
    J = inertia_from_parameters(pi)
    Ibar = J[..., :3, :3]
    P = np.zeros(J.shape[:-2] + (4, 4))
    P[..., :3, :3] = 0.5 * np.trace(Ibar, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - Ibar
    P[..., :3, 3] = P[..., 3, :3] = np.asarray(pi)[..., 1:4]
    P[..., 3, 3] = np.asarray(pi)[..., 0]
    return P


def _inertias(model: Model) -> np.ndarray:
    return np.concatenate([model.J_base[None], model.J]) if model.floating_base else model.J


def parameters(model: Model) -> np.ndarray:
    """pi (10 k,): the model's inertial parameters, k = nb (+ 1 for a floating base's root first)."""
    return parameters_from_inertia(_inertias(model)).reshape(-1)


def parameter_labels(model: Model) -> list[str]:
    """'link.m', 'link.mc_x', ... in the order of `parameters(model)`."""
    bodies = ([model.root_link] if model.floating_base else []) + list(model.body_names)
    return [f"{b}.{p}" for b in bodies for p in PARAMETER_NAMES]


def with_parameters(model: Model, pi) -> Model:
    """A copy of the model whose bodies have the inertial parameters pi (10 k,)."""
    k = model.nb + model.floating_base
    pi = check_vector("pi", pi, 10 * k)
    if pi.ndim != 1:
        raise ValueError(f"pi: expected one parameter vector of length {10 * k}, got shape {pi.shape}")
    J = inertia_from_parameters(pi.reshape(k, 10))
    if model.floating_base:
        return dataclasses.replace(model, J_base=J[0], J=J[1:])
    return dataclasses.replace(model, J=J)


def payload_map(model: Model, link: str) -> tuple[int, np.ndarray]:
    """(k, X): a payload with parameters pi_p about `link`'s frame adds X pi_p (10,) to body k's.

    k indexes the bodies of `parameters(model)`; the map is linear since inertias move by
    congruence, J_body = Ad^T J_link Ad with Ad = Ad_{T_body_link^-1}.
    """
    if link not in model.link_frames:
        raise ValueError(f"link: unknown link {link!r}")
    body, T = model.link_frames[link]
    if body < 0 and not model.floating_base:
        raise ValueError(f"link: {link!r} is fixed to the world; a payload there changes no torque")
    Ad = Ad_inv(T)
    J_unit = inertia_from_parameters(np.eye(10))
    X = parameters_from_inertia(np.swapaxes(Ad, -1, -2) @ J_unit @ Ad).T
    return body + model.floating_base, X


def with_payload(model: Model, link: str, mass: float, com=(0.0, 0.0, 0.0), inertia=(0.0,) * 6) -> Model:
    """The model with a rigid payload attached to `link`.

    mass (kg) >= 0; com (3,) the payload's centre of mass in the link frame; inertia
    (ixx, ixy, ixz, iyy, iyz, izz) about that centre of mass, in the link's axes (the node's
    parameters payload_mass, payload_com, payload_inertia).
    """
    if not np.isfinite(mass) or mass < 0:
        raise ValueError(f"mass: expected a finite mass >= 0, got {mass!r}")
    c = check_vector("com", com, 3)
    ixx, ixy, ixz, iyy, iyz, izz = check_vector("inertia", inertia, 6)
    I_c = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if np.linalg.eigvalsh(I_c)[0] < -1e-12 * max(1.0, np.abs(I_c).max()):
        raise ValueError("inertia: not positive semidefinite")
    k, X = payload_map(model, link)
    pi = parameters(model)
    pi[10 * k:10 * k + 10] += X @ parameters_from_inertia(spatial_inertia(float(mass), c, I_c))
    return with_parameters(model, pi)
