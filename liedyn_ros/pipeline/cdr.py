"""Reading ROS 2 messages' CDR bytes without a middleware: the primitives, nav_msgs/Odometry and
sensor_msgs/JointState.

ROS 2 serializes messages as CDR (XCDR1): a 4-byte encapsulation header (00 01 00 00 little-,
00 00 00 00 big-endian), then the fields in definition order, each aligned to its size counted
from the byte after the header; a string is a uint32 length counting its NUL, the bytes and the
NUL; a sequence a uint32 count and its elements (for float64 elements, padding to 8 only when
the count is not zero, as both Fast-CDR and rosbags do).

The node takes odometry and joint states as these bytes (rclpy's raw subscriptions) and reads
only what it uses: of odometry the stamp, child_frame_id, pose and twist (converting the whole
message, two 36-entry covariances and two headers' strings, into a Python object costs several
times more); of a joint state, whose layout (frame id, names, array lengths) a driver repeats in
every message, numpy views on its three float64 arrays (:class:`JointStateBytes`).
A contact state (std_msgs/UInt8MultiArray without dimensions) is read the same way
(:func:`read_uint8_multiarray`).
"""
from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from liedyn_ros.pipeline.config import NS_PER_S, FloatArray

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


@dataclass(frozen=True)
class JointStateLayout:
    """Where the variable parts of one JointState layout are.

    arrays: (byte offset, count) of position, velocity and effort; runs: (start, end) of each
    run of the other bytes (all but the stamp and the arrays' values), which must be identical
    for a message to share this layout; structure: the offsets of those bytes; order: struct's
    byte order of the message.
    """

    frame_id: str
    names: tuple[str, ...]
    arrays: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    runs: tuple[tuple[int, int], ...]
    order: str = "<"

    @functools.cached_property
    def structure(self) -> NDArray[np.intp]:
        return np.concatenate([np.arange(a, b, dtype=np.intp) for a, b in self.runs] or [np.zeros(0, np.intp)])


def parse_layout(data: Buffer, order: str = "<") -> JointStateLayout | None:
    """The layout of one CDR JointState of byte order ``order`` (little-endian unless told), or
    None if ``data`` is not one."""
    if byte_order(data) != order:
        return None
    pos = BODY + 8  # after header.stamp (int32 sec, uint32 nanosec)
    try:
        frame_id, pos = read_string(data, pos, order)
        count, pos = read_u32(data, pos, order)
        names = []
        for _ in range(count):
            name, pos = read_string(data, pos, order)
            names.append(name)
        arrays = []
        for _ in range(3):
            count, pos = read_u32(data, pos, order)
            if count:
                pos = align(pos, 8)
            arrays.append((pos, count))
            pos += 8 * count
    except (struct.error, UnicodeDecodeError, ValueError):
        return None
    if pos > len(data) or len(data) - pos > 7:  # trailing bytes can only be padding
        return None
    ends = [0, BODY + 8] + [offset + 8 * count for offset, count in arrays]  # of the stamp, each array
    starts = [BODY] + [offset for offset, _ in arrays] + [len(data)]
    runs = tuple((a, b) for a, b in zip(ends, starts) if b > a)
    return JointStateLayout(frame_id, tuple(names), (arrays[0], arrays[1], arrays[2]), runs, order)


def reading_agrees(expected: Any, names: tuple[str, ...], frame_id: str, stamp: tuple[int, int],
                   arrays: tuple[Any, Any, Any]) -> bool:
    """Whether a JointState read from its bytes by a layout (``names``, ``frame_id``, ``stamp``
    (sec, nanosec), ``arrays`` position, velocity, effort) is ``expected``, the middleware's
    deserialization of the same bytes: the strings equal and each array's float64 bytes identical
    (NaN payloads and -0.0 told apart). The check a layout passes once before its messages are read
    from their bytes: the node's (:class:`JointStateBytes`), the replay's (replay.cdr)."""
    return (tuple(expected.name) == names and str(expected.header.frame_id) == frame_id
            and (expected.header.stamp.sec, expected.header.stamp.nanosec) == stamp
            and all(np.asarray(want, dtype=np.float64).tobytes() == np.asarray(have, dtype=np.float64).tobytes()
                    for want, have in zip((expected.position, expected.velocity, expected.effort), arrays)))


class Stamp(NamedTuple):
    sec: int
    nanosec: int


class Header(NamedTuple):
    stamp: Stamp
    frame_id: str


class JointStateFields(NamedTuple):
    """A sensor_msgs/JointState read from its CDR bytes, with the attributes the pipeline reads of
    a message (header.stamp, header.frame_id, name, position, velocity, effort; the arrays are
    read-only views on the bytes).

    ``grid``: when position and velocity have one value per name and effort one or none (and the
    byte order is this machine's), the three as CDR lays them out, on one float64 grid from the first value on, each array one slot (the
    next one's length and padding) after the previous one's end; the decoder gathers a sample's
    values from it in one step (pipeline.decode). None for any other message."""

    header: Header
    name: tuple[str, ...]
    position: FloatArray
    velocity: FloatArray
    effort: FloatArray
    grid: FloatArray | None = None


class JointStateBytes:
    """CDR bytes of sensor_msgs/JointState -> :class:`JointStateFields`, for the node's raw joint
    state subscription.

    A driver sends one layout (frame id, names, array lengths) again and again: a message of a
    layout other than the last one's is parsed (:func:`parse_layout`, either byte order) and
    its reading checked against ``deserialize`` (the middleware's own deserialization, rclpy's in
    the node); while the messages keep every byte but the stamp and the arrays' values, each is
    read by one numpy view on its float64 values, sliced into the three arrays. Whatever cannot be read that way is ``deserialize``'d and returned
    as that message: bytes that are not plain CDR (another encapsulation), and a layout the check
    refuses (then every message of it).
    """

    def __init__(self, deserialize: Callable[[bytes], Any]) -> None:
        self.deserialize = deserialize
        self._size = -1  # of the last layout's messages (-1: none yet)
        # The runs of bytes outside the stamp and the arrays' values, cut out of a message in one
        # call, and those of the last layout's first message.
        self._runs: Callable[[bytes], Any] = lambda data: None
        self._same: Any = None
        self._layout: JointStateLayout | None = None  # the last layout, if its reading agreed
        self._dtype = np.dtype("<f8")
        self._stamp = struct.Struct("<iI")
        # The arrays' values lie on one grid of float64 (each non-empty array starts 8-aligned
        # after the encapsulation header): one view of it from the first value to the last,
        # (offset, count), and each array's slice of it.
        self._grid = (0, 0)
        self._slices = ((0, 0), (0, 0), (0, 0))
        self._cdr_grid = False  # the layout's arrays lie as JointStateFields.grid says

    def read(self, data: bytes) -> Any:
        """The message of ``data``: :class:`JointStateFields`, or ``deserialize(data)``."""
        if len(data) != self._size or self._runs(data) != self._same:
            return self._learn(data)
        layout = self._layout
        return self.deserialize(data) if layout is None else self._fields(data, layout)

    def _fields(self, data: bytes, layout: JointStateLayout) -> JointStateFields:
        sec, nanosec = self._stamp.unpack_from(data, BODY)
        offset, count = self._grid
        grid = np.frombuffer(data, self._dtype, count, offset)
        (p, p_end), (v, v_end), (e, e_end) = self._slices
        return JointStateFields(Header(Stamp(sec, nanosec), layout.frame_id), layout.names,
                                grid[p:p_end], grid[v:v_end], grid[e:e_end], grid if self._cdr_grid else None)

    def _learn(self, data: bytes) -> Any:
        """``data``, of a layout other than the last one's: its message, which also decides whether
        this layout's messages are read from their bytes from now on."""
        expected = self.deserialize(data)  # a message it refuses is refused all the same
        order = byte_order(data)
        layout = None if order is None else parse_layout(data, order)
        self._size, self._layout = -1, None
        if layout is None:  # not plain CDR, or not a JointState CDR layout: the message as deserialized
            return expected
        self._dtype, self._stamp = np.dtype(layout.order + "f8"), struct.Struct(layout.order + "iI")
        filled = [(offset, count) for offset, count in layout.arrays if count]
        first = filled[0][0] if filled else BODY
        last = max((offset + 8 * count for offset, count in filled), default=first)
        self._grid = (first, (last - first) // 8)
        position, velocity, effort = (((offset - first) // 8, (offset - first) // 8 + count) if count else (0, 0)
                                      for offset, count in layout.arrays)
        self._slices = (position, velocity, effort)
        m = len(layout.names)
        self._cdr_grid = self._dtype == np.float64 and m > 0 and position == (0, m) and velocity == (m + 1, 2 * m + 1) and \
            effort in ((2 * m + 2, 3 * m + 2), (0, 0))
        fields = self._fields(data, layout)
        agrees = reading_agrees(expected, fields.name, fields.header.frame_id, fields.header.stamp,
                                (fields.position, fields.velocity, fields.effort))
        # (one run or several: the getter gives a bytes or a tuple of them, compared alike)
        self._runs = operator.itemgetter(*(slice(a, b) for a, b in layout.runs))
        self._size, self._same = len(data), self._runs(data)
        self._layout = layout if agrees else None
        return fields if agrees else expected


def read_uint8_multiarray(data: Buffer) -> NDArray[np.uint8] | None:
    """The ``data`` of a std_msgs/UInt8MultiArray read from its CDR bytes (a view) when its layout
    has no dimension, as the node's contact states have; None for anything else (dimensions,
    which are strings to parse; not plain CDR; too short), which the caller deserializes. After the
    4-byte header: the layout's dimension count and data_offset, then data's length and bytes,
    each count a uint32."""
    order = byte_order(data)
    if order is None or len(data) < BODY + 12:
        return None
    dims, _, n = struct.unpack_from(order + "3I", data, BODY)
    if dims or len(data) < BODY + 12 + n:
        return None
    return np.frombuffer(data, dtype=np.uint8, count=n, offset=BODY + 12)
