"""Floating-base helpers for the ROS boundary and for comparisons with Pinocchio.

Our generalized velocity of a floating-base model is v = [V_base (omega, v) in the base frame;
qd], the base pose a 4x4 T_world_base. Pinocchio's free-flyer uses q = [p, quaternion (x, y, z,
w), joints] and v = [linear, angular, joints], both in the base (local) frame, and stores a
continuous joint as (cos, sin). Pinocchio's URDF parser may order the joints differently and
treats mimic joints as independent joints unless asked otherwise, hence `joint_order`.
A URDF's floating root joint becomes Pinocchio's free-flyer placed at the joint's <origin> O, so
its configuration is the joint's: T_world_base = O T(q_pin); ours stays T_world_base.
"""
from __future__ import annotations

import math

from collections.abc import Sequence

import numpy as np

from .checks import check_pose, check_vector
from .model import Model
from .spatial import inv_se3, log_so3

__all__ = [
    "pose_from_position_quaternion",
    "position_quaternion_from_pose",
    "velocity_from_twist",
    "to_pinocchio",
    "from_pinocchio",
]


def pose_from_position_quaternion(position, quaternion_xyzw) -> np.ndarray:
    """T_world_base from a position (..., 3) and a ROS quaternion (..., 4) ordered (x, y, z, w).

    The quaternion is normalised; a zero or non-finite quaternion raises ValueError.
    """
    if (type(position) is np.ndarray and type(quaternion_xyzw) is np.ndarray
            and position.shape == (3,) and quaternion_xyzw.shape == (4,)):
        # One pose (a node's odometry message): Python floats, a tenth of the numpy path's time.
        (px, py, pz), (x, y, z, w) = position.tolist(), quaternion_xyzw.tolist()
        n = math.sqrt(x * x + y * y + z * z + w * w)
        if n >= 1e-9 and math.isfinite(n + px + py + pz):
            x, y, z, w = x / n, y / n, z / n, w / n
            return np.array([
                [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w), px],
                [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w), py],
                [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y), pz],
                [0.0, 0.0, 0.0, 1.0]])
    p = check_vector("position", position, 3)
    quat = check_vector("quaternion", quaternion_xyzw, 4)
    norm = np.sqrt(np.einsum("...i,...i->...", quat, quat))
    if np.any(norm < 1e-9):
        raise ValueError("quaternion: zero quaternion is not a rotation")
    x, y, z, w = np.moveaxis(quat / norm[..., None], -1, 0)
    T = np.zeros(np.broadcast_shapes(p.shape[:-1], quat.shape[:-1]) + (4, 4))
    # Entry by entry: one node callback converts one odometry message, so this path must be cheap.
    T[..., 0, 0] = 1 - 2 * (y * y + z * z)
    T[..., 0, 1] = 2 * (x * y - z * w)
    T[..., 0, 2] = 2 * (x * z + y * w)
    T[..., 1, 0] = 2 * (x * y + z * w)
    T[..., 1, 1] = 1 - 2 * (x * x + z * z)
    T[..., 1, 2] = 2 * (y * z - x * w)
    T[..., 2, 0] = 2 * (x * z - y * w)
    T[..., 2, 1] = 2 * (y * z + x * w)
    T[..., 2, 2] = 1 - 2 * (x * x + y * y)
    T[..., :3, 3] = p
    T[..., 3, 3] = 1.0
    return T


def position_quaternion_from_pose(base_pose) -> tuple[np.ndarray, np.ndarray]:
    """(position, quaternion (x, y, z, w) with w >= 0) of a pose (..., 4, 4)."""
    T = check_pose("base_pose", base_pose)
    w = log_so3(T[..., :3, :3])
    theta = np.linalg.norm(w, axis=-1, keepdims=True)
    axis = np.where(theta > 1e-12, w / np.where(theta > 1e-12, theta, 1.0), 0.0)
    quat = np.concatenate([axis * np.sin(theta / 2), np.cos(theta / 2)], -1)
    return T[..., :3, 3].copy(), quat


def velocity_from_twist(angular, linear, qd) -> np.ndarray:
    """v = [omega; v; qd] from an odometry twist expressed in the base frame (child_frame_id)."""
    w = check_vector("angular", angular, 3)
    lin = check_vector("linear", linear, 3)
    qd = np.asarray(qd, dtype=float)
    shape = np.broadcast_shapes(w.shape[:-1], lin.shape[:-1], qd.shape[:-1])
    parts = [np.broadcast_to(x, shape + x.shape[-1:]) for x in (w, lin, qd)]
    return np.concatenate(parts, -1)


def _pin_layout(model: Model, joint_order: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """Bodies in Pinocchio's order, and where each one's configuration starts in Pinocchio's q."""
    order = list(joint_order) if joint_order is not None else list(model.body_joints)
    if sorted(order) != sorted(model.body_joints):
        raise ValueError(f"joint_order: must list the {model.nb} moving joints {model.body_joints} exactly once")
    bodies = np.array([model.body_joints.index(name) for name in order], dtype=np.int64)
    nq = np.array([2 if model.body_types[b] == "continuous" else 1 for b in bodies])
    start = np.empty(model.nb, dtype=np.int64)
    start[bodies] = np.cumsum(nq) - nq + (7 if model.floating_base else 0)
    return bodies, start


def to_pinocchio(model: Model, q, v=None, *, base_pose=None, joint_order: Sequence[str] | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """(q_pin, v_pin) for a Pinocchio model of the same URDF (free-flyer root if floating).

    joint_order: the moving joints in Pinocchio's order (`list(pin_model.names)[1:]`, or [2:] after a
    free-flyer); mimic joints appear there as independent joints (Pinocchio's default, mimic=False).
    """
    bodies, _ = _pin_layout(model, joint_order)
    q_body = model.body_q(check_vector("q", q, model.n))
    parts = []
    for b in bodies:
        x = q_body[..., b:b + 1]
        parts.append(np.concatenate([np.cos(x), np.sin(x)], -1) if model.body_types[b] == "continuous" else x)
    if model.floating_base:
        if base_pose is None:
            raise ValueError("base_pose: required for a floating-base model")
        joint_pose = inv_se3(model.root_joint_origin) @ check_pose("base_pose", base_pose)
        parts = list(position_quaternion_from_pose(joint_pose)) + parts
    q_pin = _concat(parts) if parts else q_body  # no part: a fixed base without moving joints
    if v is None:
        return q_pin, None
    v = check_vector("v", v, model.nv)
    if not model.floating_base:
        return q_pin, (v @ model.P.T)[..., bodies]
    return q_pin, _concat([v[..., 3:6], v[..., 0:3], (v[..., 6:] @ model.P.T)[..., bodies]])


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate along the last axis after broadcasting the leading (batch) dimensions."""
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in parts))
    return np.concatenate([np.broadcast_to(x, shape + x.shape[-1:]) for x in parts], -1)


def from_pinocchio(model: Model, q_pin, v_pin=None, *, joint_order: Sequence[str] | None = None):
    """Inverse of `to_pinocchio`: (q, v, base_pose) from Pinocchio's q and v (v may be None).

    Mimic joints are read from their leaders' entries; base_pose is None for a fixed base.
    """
    bodies, start = _pin_layout(model, joint_order)
    q_pin = np.asarray(q_pin, dtype=float)
    leaders = model.leader_bodies
    cols = []
    for b in leaders:
        s = start[b]
        continuous = model.body_types[b] == "continuous"
        cols.append(np.arctan2(q_pin[..., s + 1], q_pin[..., s]) if continuous else q_pin[..., s])
    q = np.stack(cols, -1) if cols else q_pin[..., :0]
    base_pose = None
    if model.floating_base:
        base_pose = model.root_joint_origin @ pose_from_position_quaternion(q_pin[..., :3], q_pin[..., 3:7])
    if v_pin is None:
        return q, None, base_pose
    v_pin = np.asarray(v_pin, dtype=float)
    off = 6 if model.floating_base else 0
    slot = np.empty(model.nb, dtype=np.int64)
    slot[bodies] = np.arange(model.nb) + off
    qd = v_pin[..., slot[leaders]]
    v = np.concatenate([v_pin[..., 3:6], v_pin[..., 0:3], qd], -1) if model.floating_base else qd
    return q, v, base_pose
