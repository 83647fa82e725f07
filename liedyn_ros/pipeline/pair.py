"""Odometry and reference trajectories: decoded, then paired with a joint state by stamp."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from liedyn_ros import core
from liedyn_ros.pipeline.cdr import read_odometry
from liedyn_ros.pipeline.config import NS_PER_S, FloatArray, SkipReason
from liedyn_ros.pipeline.decode import JointStateDecoder, as_float_array, stamp_to_ns


class BaseState(NamedTuple):
    """Floating-base state from nav_msgs/Odometry: T_world_base and the body twist (omega, v)."""

    stamp_ns: int
    child_frame_id: str
    pose: FloatArray
    twist: FloatArray


def decode_odometry(msg: Any) -> BaseState | SkipReason:
    """nav_msgs/Odometry, a message or its CDR bytes (rclpy's raw subscription), ->
    :class:`BaseState`. The twist is reordered angular-first."""
    if isinstance(msg, (bytes, bytearray, memoryview)):
        try:
            fields = read_odometry(msg)
        except ValueError:
            return SkipReason.BAD_ODOMETRY
        return base_state(fields.stamp_ns, fields.child_frame_id, list(fields.position), list(fields.orientation),
                          list(fields.angular + fields.linear))
    p = msg.pose.pose.position
    o = msg.pose.pose.orientation
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    return base_state(stamp_to_ns(msg.header.stamp), str(msg.child_frame_id),
                      [float(p.x), float(p.y), float(p.z)], [float(o.x), float(o.y), float(o.z), float(o.w)],
                      [float(ang.x), float(ang.y), float(ang.z), float(lin.x), float(lin.y), float(lin.z)])


def base_state(stamp_ns: int, child_frame_id: str, position: list[float], quat: list[float],
               twist: list[float]) -> BaseState | SkipReason:
    """:class:`BaseState` of an odometry's numbers (twist (omega, v)), or why they are refused."""
    # Checked as Python floats: a dozen numbers cost less this way than as numpy arrays.
    # A NaN or inf anywhere makes the sum non-finite.
    if not math.isfinite(sum(position) + sum(quat) + sum(twist)):
        return SkipReason.BAD_ODOMETRY
    norm = math.hypot(*quat)
    # Estimators publish quaternions normalised to float precision; anything far off is a bug
    # upstream (for instance an all-zero default quaternion), not rounding.
    if abs(norm - 1.0) > 1e-3:
        return SkipReason.BAD_ODOMETRY
    pose = core.pose_from_position_quaternion(np.array(position), np.array(quat) / norm)
    return BaseState(stamp_ns, child_frame_id, pose, np.array(twist))


def pair_odometry(stamp_ns: int, odom: BaseState | None, max_age_s: float) -> BaseState | SkipReason:
    """The base state to use with a JointState stamped ``stamp_ns``.

    The rule of the node and the replay alike: the latest odometry received, provided its
    stamp is no further than ``max_age_s`` (``odom_max_age``) from the joint state's, on
    either side (an estimator may stamp slightly ahead of the joint states). Pairing with the
    latest message rather than interpolating keeps the node causal and never invents a pose.
    """
    if odom is None:
        return SkipReason.NO_ODOMETRY
    if abs(stamp_ns - odom.stamp_ns) > max_age_s * NS_PER_S:
        return SkipReason.STALE_ODOMETRY
    return odom


@dataclass(frozen=True)
class Reference:
    """First point of a trajectory_msgs/JointTrajectory, in model order."""

    stamp_ns: int
    q: FloatArray
    qd: FloatArray
    qdd: FloatArray


def decode_reference(msg: Any, decoder: JointStateDecoder, stamp_ns: int) -> Reference | SkipReason:
    """JointTrajectory -> :class:`Reference` at its first point.

    Empty ``velocities``/``accelerations`` mean zero (a hold-position point); positions are
    required. ``stamp_ns`` is the stamp used for the age check.
    """
    if len(msg.points) == 0:
        return SkipReason.BAD_REFERENCE
    idx = decoder.indices(msg.joint_names)
    if isinstance(idx, SkipReason):
        return SkipReason.BAD_REFERENCE
    point = msg.points[0]
    n_names = len(msg.joint_names)
    arrays = []
    for name in ("positions", "velocities", "accelerations"):
        values = as_float_array(getattr(point, name))
        if values.shape[0] == 0 and name != "positions":
            values = np.zeros(n_names)
        if values.shape[0] != n_names or not np.isfinite(values).all():
            return SkipReason.BAD_REFERENCE
        arrays.append(values[idx])
    return Reference(stamp_ns, arrays[0], arrays[1], arrays[2])
