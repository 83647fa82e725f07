"""The node's payload, friction and inertial-parameter settings turned into a model and friction.

The parameters (CONVENTIONS.md) are those `liedyn-replay --identify` writes to identified.yaml:

    payload_link, payload_mass, payload_com [x, y, z], payload_inertia [ixx, ixy, ixz, iyy, iyz, izz]
    friction_coulomb, friction_viscous, friction_offset  (one value per joint, or one for all)
    friction_smoothing (velocity of the tanh sign), friction_compensation (add it to feedforward)
    inertial_parameters (parameters(model) order; [0.0]: the URDF's)

`dynamics_from` builds the complete (model, friction) pair from the URDF model, so that the
pipeline can swap both in one assignment: no sample ever sees half of a change. Values no robot
can have (core.identification.plausibility: friction beyond the URDF's effort limits, a body
mass far from the URDF's, a non-physical body) are refused with the joint or body and the bound.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from liedyn_ros.core.identification import DEFAULT_SMOOTHING, Friction, Recorded, implausible, with_parameters, with_payload

# name -> (default, description); ROS needs a typed default, so "not set" is "" or [0.0].
DYNAMICS_PARAMETERS: dict[str, tuple[Any, str]] = {
    "payload_link": ("", "link holding a payload; empty: no payload"),
    "payload_mass": (0.0, "payload mass [kg]"),
    "payload_com": ([0.0, 0.0, 0.0], "payload centre of mass in the payload_link frame [m]"),
    "payload_inertia": ([0.0] * 6, "payload inertia about its centre of mass [ixx, ixy, ixz, iyy, iyz, izz]"),
    "friction_coulomb": ([0.0], "Coulomb friction per joint (model order), or one value for all"),
    "friction_viscous": ([0.0], "viscous friction per joint, or one value for all"),
    "friction_offset": ([0.0], "constant torque offset per joint, or one value for all"),
    "friction_smoothing": (DEFAULT_SMOOTHING, "velocity [rad/s] of the smooth Coulomb sign tanh(qd / v)"),
    "friction_compensation": (False, "add the friction torque to feedforward_torque"),
    "inertial_parameters": ([0.0], "corrected inertial parameters (10 per body); [0.0]: the URDF's"),
}


class Dynamics(NamedTuple):
    """The model the pipeline computes with and the friction it compensates (None: off)."""

    model: Any
    friction: Friction | None


def _per_joint(name: str, values: Any, n: int) -> np.ndarray:
    try:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected numbers ({exc})") from None
    if x.size == 1:
        return np.full(n, x[0])
    if x.size != n:
        raise ValueError(f"{name}: expected 1 or {n} values (one per joint), got {x.size}")
    return x


def dynamics_from(model: Any, values: dict[str, Any], recorded: Recorded | None = None) -> Dynamics:
    """(model with corrected parameters and payload, friction) from parameter values on the URDF's
    `model`; raises ValueError naming the bad parameter, or the joints and bodies whose values are
    implausible (`recorded`: also against a recording's largest efforts). Missing keys
    take their defaults."""
    get = {k: values.get(k, default) for k, (default, _) in DYNAMICS_PARAMETERS.items()}
    urdf = model
    pi = np.asarray(get["inertial_parameters"], dtype=np.float64).reshape(-1)
    corrected = not (pi.size == 1 and pi[0] == 0.0)
    if corrected:
        try:
            model = with_parameters(model, pi)
        except ValueError as exc:
            raise ValueError(f"inertial_parameters: {exc}") from None
    link = str(get["payload_link"])
    if link:
        try:
            model = with_payload(model, link, float(get["payload_mass"]), get["payload_com"], get["payload_inertia"])
        except ValueError as exc:
            raise ValueError(f"payload_{exc}") from None
    elif float(get["payload_mass"]) != 0.0:
        raise ValueError("payload_mass: set payload_link too (the link the payload is attached to)")
    try:  # checked even while compensation is off, so that a bad value is refused when it is set
        coulomb, viscous, offset = (_per_joint(f"friction_{k}", get[f"friction_{k}"], model.n)
                                    for k in ("coulomb", "viscous", "offset"))
        friction = Friction(coulomb, viscous, offset, smoothing=float(get["friction_smoothing"]))
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc) if str(exc).startswith("friction_") else f"friction_{exc}") from None
    problems = implausible(urdf, friction=friction, inertial_parameters=pi if corrected else None,
                           payload_mass=float(get["payload_mass"]) if link else None, recorded=recorded)
    if problems:
        raise ValueError("implausible values (refused: a fit gone wrong, not a robot): " + "; ".join(problems))
    return Dynamics(model, friction if bool(get["friction_compensation"]) else None)
