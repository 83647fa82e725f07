"""Whether friction, inertial parameters and a payload are plausible for a robot.

A parameter file the node compensates with commands its values as torques: friction the motors
could not deliver, or a body several times heavier or lighter than the robot's URDF says, is
a fit gone wrong (a recording that did not excite it, a solver adrift), never a robot. The
same rules refuse such values before `liedyn-replay --identify` writes them and when the node
or the replay's --params loads them:

- friction: Coulomb f_c and viscous f_v >= 0; the friction torque at the URDF velocity limit,
  f_c + |f_o| + f_v v_max, at most the URDF effort limit (a joint whose friction there exceeds
  what its motor delivers could not reach that speed); when the recording is known, the
  friction at low speed, f_c + |f_o|, at most the largest recorded |effort| (the joint moved, so
  its motor overcame it; the viscous part is not bounded by the recording, as gravity and
  inertia can help the motor at the fastest samples);
- a body's mass within [1 / MASS_FACTOR, MASS_FACTOR] times the URDF's (a massless body stays
  massless), its pseudo-inertia positive semidefinite (Wensing, Kim and Slotine 2017);
- a payload's mass at most PAYLOAD_FACTOR times the robot's (moving bodies of the URDF);
- a drive (core.identification.drive): torque constants nonzero with |k| in [MIN_SCALE, MAX_SCALE]
  and transmission entries at most MAX_SCALE (a zero constant would read every effort as no
  torque; 1e9 is a unit mistake), a transmission whose condition number is at most MAX_SCALE;
  a joint-side offset within the URDF effort limit; armature >= 0 and at most ARMATURE_FACTOR times
  the largest diagonal entry of the URDF's mass matrix at the middle of the joint ranges (a
  rotor reflects more than its link, but not ten times the whole arm); when the recording is
  known, each torque constant within [1 / SCALE_FACTOR, SCALE_FACTOR] times the one it was
  replayed with (the datasheet's: a fit that moves it further found a wrong unit, not a motor);
- everything finite.
Friction on a joint without an effort limit (absent, zero or infinite in the URDF, and no
``effort_limit`` parameter: Model.with_effort_limit) is refused: nothing could bound it. Other
unset limits bound nothing. An ``effort_limit`` given for such a joint (by hand, or written by
`liedyn-replay --identify friction`) is itself bounded by the model (effort_bound): at most
EFFORT_FACTOR times the torque of the robot's weight and the largest payload, (1 + PAYLOAD_FACTOR)
m g, at the robot's largest extent (the force alone on a prismatic joint). No static load on any
joint of the robot in any configuration, a legged robot on one foot included, exceeds m g times
the longest path through the tree, and EFFORT_FACTOR leaves room for accelerations of several g:
so a value beyond it is a unit mistake or a tampered file (1e9), never a motor.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import Model, urdf_limit
from .drive import PARAMETER_OF, Drive
from .friction import Friction
from .parameters import parameter_labels, parameters, pseudo_inertia

__all__ = ["MASS_FACTOR", "PAYLOAD_FACTOR", "ARMATURE_FACTOR", "SCALE_FACTOR", "EFFORT_FACTOR", "Recorded",
           "implausible", "friction_at_velocity_limit", "effort_bound"]

MASS_FACTOR = 3.0  # a body's mass may differ from its URDF mass by this factor either way
PAYLOAD_FACTOR = 1.0  # a payload may weigh up to the robot's moving bodies together
ARMATURE_FACTOR = 10.0  # armature up to this times the largest diagonal entry of the URDF's M
SCALE_FACTOR = 3.0  # an identified torque constant within this factor of the one replayed with
EFFORT_FACTOR = 10.0  # effort_limit up to this times the static torque bound of effort_bound
STANDARD_GRAVITY = 9.80665  # the weight that sizes a robot's motors, whatever model.gravity is
MIN_SCALE, MAX_SCALE = 1e-6, 1e6  # |torque constant|, |transmission entries|, its condition number
_PSD_TOL = 1e-9  # pseudo-inertia eigenvalues, relative to the largest


@dataclass(frozen=True)
class Recorded:
    """Per joint (model order): the largest |effort| of a recording's samples (joint torques);
    the drive its efforts were converted with (None: none)."""

    max_effort: np.ndarray
    drive: Drive | None = None


def implausible(model: Model, *, friction: Friction | None = None, inertial_parameters: np.ndarray | None = None,
                payload_mass: float | None = None, recorded: Recorded | None = None,
                drive: Drive | None = None, effort_limit: np.ndarray | None = None) -> list[str]:
    """What is implausible in the given values for `model` (the URDF's), each naming the joint or
    body and the bound; empty when all is plausible. `effort_limit` (n,) is the parameter as given
    (0: the URDF's), checked where the URDF sets none."""
    problems: list[str] = []
    if effort_limit is not None:
        problems += _effort_limit(model, np.asarray(effort_limit, dtype=float))
    if drive is not None:
        problems += _drive(model, drive, None if recorded is None else recorded.drive)
    if friction is not None:
        problems += _friction(model, friction, recorded)
    if inertial_parameters is not None:
        problems += _bodies(model, np.asarray(inertial_parameters, dtype=float))
    if payload_mass is not None and not 0.0 <= payload_mass <= PAYLOAD_FACTOR * model.mass:
        problems.append(f"payload_mass: {payload_mass:.4g} kg is outside [0, {PAYLOAD_FACTOR:g} x the robot's "
                        f"{model.mass:.4g} kg]")
    return problems


def friction_at_velocity_limit(model: Model, friction: Friction) -> np.ndarray:
    """f_c + |f_o| + f_v v_max per joint: the friction torque at the URDF velocity limit (at low
    speed where the URDF gives none)."""
    return friction.coulomb + np.abs(friction.offset) + friction.viscous * urdf_limit(model.velocity_limit, 0.0)


def effort_bound(model: Model) -> np.ndarray:
    """EFFORT_FACTOR (1 + PAYLOAD_FACTOR) m g D per joint (N m; without D on a prismatic joint, N):
    the largest effort_limit a joint the URDF leaves unbounded may be given. m is the robot's mass,
    g standard gravity and D the longest path through the kinematic tree: body origins (M_i, and
    the offset of a revolute axis, S_i's linear part), centres of mass and every URDF link frame.
    Any two points of the robot are at most D apart in every configuration, so no weight or
    contact force of the size of the robot's weight has a longer lever about any joint axis."""
    nb = model.nb
    leaves = np.zeros(nb + 1)  # longest offset to a centre of mass or link frame; [-1]: the root
    for body, T in model.link_frames.values():
        leaves[body] = max(leaves[body], float(np.linalg.norm(T[:3, 3])))
    for body, J in [*enumerate(model.J), (-1, model.J_base)]:
        if J[5, 5] > 0:  # J = [[., m [c]], [., m 1]]: the centre of mass c
            c = np.array([J[2, 4], J[0, 5], J[1, 3]]) / J[5, 5]
            leaves[body] = max(leaves[body], float(np.linalg.norm(c)))
    edge = np.linalg.norm(model.M[:, :3, 3], axis=1) + np.linalg.norm(model.S[:, 3:], axis=1)
    down = leaves.copy()  # longest path from each body's origin into its subtree
    second = np.zeros(nb + 1)  # the longest through another child (or leaf), for paths turning here
    for i in range(nb - 1, -1, -1):  # parent[i] < i: children come first
        p, reach = model.parent[i], edge[i] + down[i]
        down[p], second[p] = (reach, down[p]) if reach > down[p] else (down[p], max(second[p], reach))
    D = float(np.max(down + second))
    revolute = np.linalg.norm(model.S[model.leader_bodies, :3], axis=1) > 0
    weight = (1 + PAYLOAD_FACTOR) * model.mass * STANDARD_GRAVITY
    return EFFORT_FACTOR * weight * np.where(revolute, D, 1.0)


def _effort_limit(model: Model, limit: np.ndarray) -> list[str]:
    unset, bound = np.isinf(urdf_limit(model.effort_limit)), effort_bound(model)
    return [f"{name}: effort_limit {limit[j]:.4g} exceeds {bound[j]:.4g}, {EFFORT_FACTOR:g} x the robot's weight "
            f"with the largest payload at its full extent (core.identification.plausibility.effort_bound): a unit "
            "mistake, not a motor" for j, name in enumerate(model.joint_names) if unset[j] and limit[j] > bound[j]]


def _friction(model: Model, friction: Friction, recorded: Recorded | None) -> list[str]:
    out = []
    f_c, f_v, f_o = friction.coulomb, friction.viscous, friction.offset
    limits, speeds = urdf_limit(model.effort_limit), urdf_limit(model.velocity_limit, 0.0)
    at_limit = friction_at_velocity_limit(model, friction)
    for j, name in enumerate(model.joint_names):
        if f_c[j] < 0 or f_v[j] < 0:
            out.append(f"{name}: negative friction (Coulomb {f_c[j]:.4g}, viscous {f_v[j]:.4g}); both must be >= 0")
            continue
        static = f_c[j] + abs(f_o[j])
        limit, speed = limits[j], speeds[j]
        if np.isinf(limit) and (static > 0 or f_v[j] > 0):
            out.append(f"{name}: friction (Coulomb {f_c[j]:.4g}, viscous {f_v[j]:.4g}, offset {f_o[j]:.4g}) cannot be "
                       "checked: the URDF sets no effort limit for this joint; give its effort_limit [N m]")
        elif at_limit[j] > limit:
            out.append(f"{name}: friction torque {at_limit[j]:.4g} at the URDF velocity limit {speed:.4g} "
                       f"(Coulomb {f_c[j]:.4g} + |offset| {abs(f_o[j]):.4g} + viscous {f_v[j]:.4g} x {speed:.4g}) "
                       f"exceeds the effort limit {limit:.4g}")
        elif recorded is not None and static > recorded.max_effort[j] * (1 + 1e-9):
            out.append(f"{name}: friction at low speed {static:.4g} (Coulomb {f_c[j]:.4g} + |offset| "
                       f"{abs(f_o[j]):.4g}) exceeds the largest recorded |effort| {recorded.max_effort[j]:.4g}")
    return out


def _bodies(model: Model, pi: np.ndarray) -> list[str]:
    pi0 = parameters(model)
    if pi.shape != pi0.shape:
        return [f"inertial_parameters: expected {pi0.size} values (10 per body), got {pi.size}"]
    if not np.all(np.isfinite(pi)):
        return ["inertial_parameters: contains NaN or infinite values"]
    names = parameter_labels(model)[::10]
    out = []
    for name, body, body0 in zip(names, pi.reshape(-1, 10), pi0.reshape(-1, 10)):
        if np.array_equal(body, body0):  # the URDF's own (a flaw in it was reported when it loaded)
            continue
        name, m, m0 = name.rpartition(".")[0], body[0], body0[0]
        if m0 > 0 and not m0 / MASS_FACTOR <= m <= MASS_FACTOR * m0:
            out.append(f"{name}: mass {m:.4g} kg is outside [1/{MASS_FACTOR:g}, {MASS_FACTOR:g}] x the URDF's "
                       f"{m0:.4g} kg")
        elif m0 <= 0 and m != 0:
            out.append(f"{name}: mass {m:.4g} kg on a body the URDF makes massless")
        eig = np.linalg.eigvalsh(pseudo_inertia(body))
        if eig[0] < -_PSD_TOL * max(eig[-1], 1e-300):
            out.append(f"{name}: not a physical rigid body (pseudo-inertia eigenvalue {eig[0]:.3g} < 0: "
                       "negative mass or an inertia violating the triangle inequality)")
    return out


def _drive(model: Model, drive: Drive, prior: Drive | None) -> list[str]:
    out = []
    k, G = drive.torque_constant, drive.transmission
    limits = urdf_limit(model.effort_limit)
    for j, name in enumerate(model.joint_names):
        if not MIN_SCALE <= abs(k[j]) <= MAX_SCALE:
            out.append(f"{name}: {PARAMETER_OF['torque_constant']} {k[j]:.4g} is outside +-[{MIN_SCALE:g}, "
                       f"{MAX_SCALE:g}] (zero reads every effort as no torque; beyond, a unit mistake)")
        elif prior is not None and not 1 / SCALE_FACTOR <= k[j] / prior.torque_constant[j] <= SCALE_FACTOR:
            out.append(f"{name}: {PARAMETER_OF['torque_constant']} {k[j]:.4g} is outside [1/{SCALE_FACTOR:g}, "
                       f"{SCALE_FACTOR:g}] x the {prior.torque_constant[j]:.4g} the recording was replayed with")
        if abs(drive.offset[j]) > limits[j]:
            out.append(f"{name}: {PARAMETER_OF['offset']} {drive.offset[j]:.4g} exceeds the effort limit "
                       f"{limits[j]:.4g}")
    ratios = np.abs(G)[np.abs(G) > 0]
    if ratios.size and not ratios.max() <= MAX_SCALE:
        out.append(f"{PARAMETER_OF['transmission']}: an entry of {ratios.max():.4g} exceeds {MAX_SCALE:g}")
    if np.linalg.cond(G) > MAX_SCALE:
        out.append(f"{PARAMETER_OF['transmission']}: condition number {np.linalg.cond(G):.3g} exceeds {MAX_SCALE:g} "
                   "(nearly singular: some joint torques would come from noise)")
    out += _armature(model, drive.armature)
    return out


def _armature(model: Model, armature: np.ndarray) -> list[str]:
    from ..reference import mass_matrix  # no compiled kernel at a parameter file's load

    if not armature.any():
        return []
    lo, hi = model.lower, model.upper
    q = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2, 0.0)
    pose = np.eye(4) if model.floating_base else None
    largest = float(np.diag(mass_matrix(model, q, base_pose=pose))[-model.n:].max(initial=0.0))
    out = []
    for name, a in zip(model.joint_names, armature):
        if a < 0:
            out.append(f"{name}: armature {a:.4g} is negative (a rotor inertia is >= 0)")
        elif a > ARMATURE_FACTOR * largest:
            out.append(f"{name}: armature {a:.4g} exceeds {ARMATURE_FACTOR:g} x the largest diagonal entry of the "
                       f"URDF's mass matrix, {largest:.4g} at the middle of the joint ranges")
    return out
