"""Identification: regressor, inertial parameters, base parameters, friction, payloads, fits.

    regressor(model, q, v, a, *, base_pose=None) -> Y,  Y @ parameters(model) = rnea
    parameters(model) -> pi;  with_parameters(model, pi), with_payload(model, link, ...) -> Model
    base_parameters(model) -> BaseParameters (pi_b = K pi, Y pi = Y[:, independent] pi_b)
    friction_torque(Friction, qd), friction_regressor(qd)
    Drive: joint torques tau = G^T (k * e) + o of published efforts e, and the armature
    implausible(model, friction=, inertial_parameters=, payload_mass=, recorded=) -> what a robot cannot have
"""
from __future__ import annotations

from .base_parameters import BaseParameters, base_parameters
from .drive import Drive
from .friction import DEFAULT_SMOOTHING, Friction, friction_regressor, friction_torque
from .parameters import (PARAMETER_NAMES, inertia_from_parameters, parameter_labels, parameters,
                         parameters_from_inertia, payload_map, pseudo_inertia, with_parameters, with_payload)
from .plausibility import ARMATURE_FACTOR, MASS_FACTOR, PAYLOAD_FACTOR, SCALE_FACTOR, Recorded, implausible
from .regressor import regressor

__all__ = ["regressor", "parameters", "parameter_labels", "PARAMETER_NAMES", "inertia_from_parameters",
           "parameters_from_inertia", "pseudo_inertia", "with_parameters", "with_payload", "payload_map",
           "BaseParameters", "base_parameters", "Friction", "friction_regressor", "friction_torque",
           "DEFAULT_SMOOTHING", "Drive", "implausible", "Recorded", "MASS_FACTOR", "PAYLOAD_FACTOR",
           "ARMATURE_FACTOR", "SCALE_FACTOR"]
