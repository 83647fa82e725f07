"""Reading whole chunks of sensor_msgs/JointState CDR bytes with numpy.

rosbags' `deserialize_cdr` builds a message object per sample (about 18 us for a 7-DoF
JointState), more than the whole replay budget of 50 us. A recording repeats one layout in
every message: the same frame id, names and array lengths; only the stamp and the float64
payloads change. So `JointStateReader` parses the layout of one message, checks it once
against rosbags' own deserialisation, and then reads every message whose structure bytes
(all bytes except the stamp and the payloads) are identical in a single numpy gather.
Messages it cannot read that way (big-endian CDR, a layout that failed the check) go
through rosbags, one by one.

Humble and Jazzy define JointState identically (header, name, position, velocity, effort).
CDR (little-endian, encapsulation header 00 01 00 00): alignment is relative to the byte
after the 4-byte encapsulation header; a string is a uint32 length counting its NUL, the
bytes and the NUL; a float64 sequence is a uint32 count, then (only when the count is not
zero, as both Fast-CDR and rosbags do) padding to 8 and the doubles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from liedyn_ros.pipeline import NS_PER_S, JointStateArrays
from liedyn_ros.pipeline.cdr import JointStateLayout, parse_layout, reading_agrees

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

Deserialize = Callable[["bytes | memoryview"], Any]


class JointStateReader:
    """CDR JointState bytes -> :class:`JointStateArrays` groups, one per layout.

    `deserialize` is rosbags' deserialisation of one message; it checks each new layout and
    reads what the vectorised path cannot (everything when `cdr` is False: ROS 1 bags).
    """

    _CACHE_LIMIT = 64  # verified layouts kept; a recording normally has one

    def __init__(self, deserialize: Deserialize, *, cdr: bool = True) -> None:
        self.deserialize = deserialize
        self.cdr = cdr
        self._verified: dict[bytes, JointStateLayout | None] = {}

    def read(self, datas: Sequence[bytes | memoryview]) -> tuple[list[tuple[NDArray[np.intp], JointStateArrays]], NDArray[np.intp]]:
        """Groups of (row indices into `datas`, arrays), and the rows nothing could decode."""
        sizes = np.fromiter(map(len, datas), dtype=np.intp, count=len(datas))
        groups: list[tuple[NDArray[np.intp], JointStateArrays]] = []
        failed: list[int] = []
        for size in np.unique(sizes):
            rows = np.flatnonzero(sizes == size)
            buf = np.frombuffer(b"".join(datas[i] for i in rows.tolist()), dtype=np.uint8).reshape(len(rows), size)
            todo = np.ones(len(rows), dtype=bool)
            while todo.any():
                first = int(np.argmax(todo))
                layout = self._layout(buf[first]) if self.cdr else None
                if layout is None:
                    todo[first] = False
                    group = self._one_by_one(datas[rows[first]])
                    if group is None:
                        failed.append(int(rows[first]))
                    else:
                        groups.append((rows[first : first + 1], group))
                    continue
                same = todo & (buf[:, layout.structure] == buf[first, layout.structure]).all(axis=1)
                todo &= ~same
                groups.append((rows[same], _gather(buf[same], layout)))
        return groups, np.array(sorted(failed), dtype=np.intp)

    def _layout(self, row: NDArray[np.uint8]) -> JointStateLayout | None:
        data = row.tobytes()
        layout = parse_layout(data)
        if layout is None:
            return None
        key = bytes(row[layout.structure])
        if key not in self._verified:
            if len(self._verified) >= self._CACHE_LIMIT:
                self._verified.clear()
            self._verified[key] = layout if self._agrees(data, layout) else None
        return self._verified[key]

    def _agrees(self, data: bytes, layout: JointStateLayout) -> bool:
        """Whether the vectorised read of `data` is rosbags' message (pipeline.cdr.reading_agrees,
        the node's check too)."""
        try:
            expected = self.deserialize(data)
        except Exception:  # noqa: BLE001 - rosbags disagrees with the parse: do not trust it
            return False
        got = _gather(np.frombuffer(data, dtype=np.uint8)[None, :], layout)
        sec, nanosec = divmod(int(got.stamp_ns[0]), NS_PER_S)  # _gather's stamp: sec * NS_PER_S + nanosec
        return reading_agrees(expected, got.names, got.frame_id[0], (sec, nanosec),
                              (got.position[0], got.velocity[0], got.effort[0]))

    def _one_by_one(self, data: bytes | memoryview) -> JointStateArrays | None:
        try:
            return _chunk_of_one(self.deserialize(data))
        except Exception:  # noqa: BLE001 - a corrupt message is skipped and counted
            return None


def _chunk_of_one(msg: Any) -> JointStateArrays:
    """A message object as a chunk of one (from_message gives no leading dimension)."""
    one = JointStateArrays.from_message(msg)
    return one._replace(stamp_ns=one.stamp_ns[None], position=one.position[None, :],
                        velocity=one.velocity[None, :], effort=one.effort[None, :])


def _gather(buf: NDArray[np.uint8], layout: JointStateLayout) -> JointStateArrays:
    """The stamps and float64 payloads of rows `buf` (N, size) that share `layout`."""
    n = len(buf)
    sec = np.ascontiguousarray(buf[:, 4:8]).view("<i4").ravel().astype(np.int64)
    nanosec = np.ascontiguousarray(buf[:, 8:12]).view("<u4").ravel().astype(np.int64)
    fields = [
        np.ascontiguousarray(buf[:, off : off + 8 * count]).view("<f8").reshape(n, count).astype(np.float64)
        for off, count in layout.arrays
    ]
    return JointStateArrays(
        layout.names, sec * NS_PER_S + nanosec, (layout.frame_id,) * n, *fields
    )

