"""Reading ROS 2 messages' CDR bytes without a middleware: the primitives, and nav_msgs/Odometry.

ROS 2 serializes messages as CDR (XCDR1): a 4-byte encapsulation header (00 01 00 00 little-,
00 00 00 00 big-endian), then the fields in definition order, each aligned to its size counted
from the byte after the header; a string is a uint32 length counting its NUL, the bytes and the
NUL; a sequence a uint32 count and its elements (for float64 elements, padding to 8 only when
the count is not zero, as both Fast-CDR and rosbags do).

The node takes odometry as these bytes (rclpy's raw subscription) and reads only what it uses,
the stamp, child_frame_id, pose and twist: converting the whole message (two 36-entry
covariances, two headers' strings) into a Python object costs several times more.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from liedyn_ros.pipeline.config import NS_PER_S

CDR_LE = b"\x00\x01"  # the encapsulation of little-endian CDR (ROS 2's on every common host)
CDR_BE = b"\x00\x00"
Buffer = bytes | bytearray | memoryview
BODY = 4  # encapsulation header size; alignment counts from here
BYTE_ORDER = {CDR_LE: "<", CDR_BE: ">"}


def byte_order(data: Buffer) -> str | None:
    """struct's byte order of CDR ``data`` ("<" or ">"), None when it is not plain CDR."""
    return BYTE_ORDER.get(bytes(data[:2]))


def align(pos: int, size: int) -> int:
    return BODY + -(-(pos - BODY) // size) * size


def read_u32(data: Buffer, pos: int, order: str = "<") -> tuple[int, int]:
    """(the uint32 at ``pos`` aligned to 4, the position after it)."""
    pos = align(pos, 4)
    return struct.unpack_from(order + "I", data, pos)[0], pos + 4


def read_string(data: Buffer, pos: int, order: str = "<") -> tuple[str, int]:
    """(the string at ``pos``, the position after it); ValueError if there is none."""
    length, pos = read_u32(data, pos, order)
    raw = data[pos : pos + length]
    if length == 0 or len(raw) != length or raw[-1] != 0:
        raise ValueError("not a CDR string")
    return bytes(raw[:-1]).decode(), pos + length


class OdometryFields(NamedTuple):
    """What the dynamics use of a nav_msgs/Odometry: stamp, child_frame_id, the pose's position
    (x, y, z) and orientation (x, y, z, w), the twist's linear and angular parts."""

    stamp_ns: int
    child_frame_id: str
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    linear: tuple[float, float, float]
    angular: tuple[float, float, float]


_POSE_AND_COVARIANCE = 7 + 36  # doubles from the pose to the twist


def read_odometry(data: Buffer) -> OdometryFields:
    """The fields of nav_msgs/Odometry (Humble to Jazzy: header, child_frame_id, pose with
    covariance, twist with covariance) from its CDR bytes; ValueError when ``data`` is not one."""
    order = byte_order(data)
    if order is None:
        raise ValueError(f"not CDR (encapsulation {bytes(data[:4]).hex()})")
    try:
        sec, nanosec = struct.unpack_from(order + "iI", data, BODY)
        _, pos = read_string(data, BODY + 8, order)  # header.frame_id
        child, pos = read_string(data, pos, order)
        pos = align(pos, 8)
        pose = struct.unpack_from(order + "7d", data, pos)
        twist = struct.unpack_from(order + "6d", data, pos + 8 * _POSE_AND_COVARIANCE)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"not a nav_msgs/Odometry: {exc}") from exc
    end = pos + 8 * (2 * _POSE_AND_COVARIANCE - 1)  # the twist's covariance ends the message
    if not end <= len(data) <= end + 7:  # after it, padding only
        raise ValueError(f"not a nav_msgs/Odometry: {len(data)} bytes")
    return OdometryFields(sec * NS_PER_S + nanosec, child, pose[:3], pose[3:7], twist[:3], twist[3:])
