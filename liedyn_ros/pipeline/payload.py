"""The node's payload, friction and inertial-parameter settings turned into a model and friction.

The parameters (docs/contract.md) are those `liedyn-replay --identify` writes to identified.yaml:

    payload_link, payload_mass, payload_com [x, y, z], payload_inertia [ixx, ixy, ixz, iyy, iyz, izz]
    friction_coulomb, friction_viscous, friction_offset  (one value per joint, or one for all)
    friction_smoothing (velocity of the tanh sign), friction_compensation (add it to feedforward)
    inertial_parameters (parameters(model) order; [0.0]: the URDF's)
    effort_limit (one per joint, or one for all; 0: the URDF's): where the URDF sets no effort
    limit, the one friction and the published torques are checked against
    effort_gear_ratio, effort_torque_constant, effort_offset (one per joint, or one for all),
    effort_transmission (n x n row by row; [0.0]: diag(effort_gear_ratio)), armature (one per
    joint, or one for all): published efforts e -> joint torques G^T (k * e) + o, and the
    rotor inertia on the mass matrix's diagonal (core.identification.drive)

`dynamics_from` builds the complete (model, friction) pair from the URDF model, so that the
pipeline can swap both in one assignment: no sample ever sees half of a change. Values no robot
can have (core.identification.plausibility: friction beyond the URDF's effort limits, a body
mass far from the URDF's, a non-physical body) are refused with the joint or body and the bound.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from liedyn_ros.core.identification import (DEFAULT_SMOOTHING, Drive, Friction, Recorded, implausible, with_parameters,
                                            with_payload)

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
    "effort_gear_ratio": ([1.0], "gear ratio N per joint (motor angle = N q), or one for all"),
    "effort_torque_constant": ([1.0], "motor torque per published effort unit (e.g. N m/A for currents; "
                               "1: motor torques), per joint or one for all"),
    "effort_offset": ([0.0], "joint torque added to the converted effort [N m], per joint or one for all"),
    "effort_transmission": ([0.0], "motor angles = G q: G (n x n, row by row), replacing effort_gear_ratio "
                            "(coupled joints); [0.0]: diag(effort_gear_ratio)"),
    "armature": ([0.0], "rotor inertia reflected to each joint (I_rotor N^2) [kg m^2], per joint or one for all"),
    "effort_limit": ([0.0], "effort limit [N m] per joint (or one for all) where the URDF sets none (absent or "
                     "0), the smaller where both do; bounds friction and effort_limit_factor. 0: the URDF's"),
}
DRIVE_PARAMETERS = ("effort_gear_ratio", "effort_torque_constant", "effort_offset", "effort_transmission", "armature")


class Dynamics(NamedTuple):
    """The model the pipeline computes with, the friction it compensates (None: off) and the
    drive (published efforts -> joint torques, armature; None: efforts are joint torques and
    no armature)."""

    model: Any
    friction: Friction | None
    drive: Drive | None = None


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
    limit = _per_joint("effort_limit", get["effort_limit"], model.n)
    bad = [name for name, x in zip(model.joint_names, limit) if not (np.isfinite(x) and x >= 0)]
    if bad:
        raise ValueError(f"effort_limit: must be finite and >= 0 (0: the URDF's) for {bad}")
    problems = implausible(model, effort_limit=limit)
    urdf = model = model.with_effort_limit(limit) if limit.any() else model
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
    drive = drive_from(get, model.joint_names)
    problems += implausible(urdf, friction=friction, inertial_parameters=pi if corrected else None,
                           payload_mass=float(get["payload_mass"]) if link else None, recorded=recorded,
                           drive=drive)
    if problems:
        raise ValueError("implausible values (refused: a fit gone wrong, not a robot): " + "; ".join(problems))
    used = drive if drive is not None and (drive.converts or drive.armature.any()) else None
    return Dynamics(model, friction if bool(get["friction_compensation"]) else None, used)


def drive_from(values: dict[str, Any], joint_names: Any) -> Drive | None:
    """The Drive of the effort_* and armature values (None when all are at their defaults);
    raises ValueError naming the parameter (and the joint) of a value that makes no drive."""
    n = len(joint_names)
    get = {k: values.get(k, DYNAMICS_PARAMETERS[k][0]) for k in DRIVE_PARAMETERS}
    if all(np.array_equal(np.asarray(get[k], dtype=float).reshape(-1), DYNAMICS_PARAMETERS[k][0])
           for k in DRIVE_PARAMETERS):
        return None
    for name in ("effort_gear_ratio", "effort_torque_constant"):
        zero = np.flatnonzero(_per_joint(name, get[name], n) == 0.0)
        if zero.size:
            raise ValueError(f"{name}: 0 for {[joint_names[j] for j in zero]} must be nonzero (it would read every "
                             "effort as no torque)")
    G = np.asarray(get["effort_transmission"], dtype=np.float64).reshape(-1)
    if G.size == 1 and G[0] == 0.0:
        transmission = None
    elif G.size == n * n:
        transmission = G.reshape(n, n)
    else:
        raise ValueError(f"effort_transmission: expected {n} x {n} = {n * n} values (row by row), got {G.size}")
    return Drive.of(n, gear_ratio=_per_joint("effort_gear_ratio", get["effort_gear_ratio"], n),
                    torque_constant=_per_joint("effort_torque_constant", get["effort_torque_constant"], n),
                    offset=_per_joint("effort_offset", get["effort_offset"], n), transmission=transmission,
                    armature=_per_joint("armature", get["armature"], n))
