"""Pieces every salvage reader shares: a walk over records that resynchronises after damage,
a file seen as bytes through a small window, blocks of messages read lazily in receive-time
order, and the decompressed part of a compressed block that may be cut or corrupt."""

from __future__ import annotations

import bz2
import heapq
import re
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import lz4.frame
from rosbags.rosbag2.storage_mcap import zstd

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    # offset in the walked data, bytes, reason, messages known lost
    OnDamage = Callable[[int, int, str, int], None]

Item = TypeVar("Item")

_FEED = 1 << 16  # compressed bytes fed at a time: damage keeps what came out before it
_WINDOW = 1 << 16  # bytes of a file read at a time by FileView
_SEARCH = 1 << 20  # bytes of a file searched at a time when resynchronising
_OVERLAP = 64  # longer than any mark: one straddling two searched stretches is found


class FileView:
    """A file seen as read-only bytes (len, an index, a slice), read a window at a time: a walk
    over a whole file touches its record headers, and the stretches a resync searches, without
    holding the file. (Not mmap: the kernel maps a file's page cache in large folios, so the
    resident memory of a walk through mmap grows with the file.)"""

    def __init__(self, file: Any, size: int) -> None:
        self.file, self.size = file, size
        self._start, self._data = 0, b""

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, int):
            return self._bytes(key, key + 1)[0]
        return self._bytes(key.start or 0, self.size if key.stop is None else min(key.stop, self.size))

    def _bytes(self, start: int, stop: int) -> bytes:
        if not (self._start <= start and stop <= self._start + len(self._data)):
            self.file.seek(start)
            if stop - start > _WINDOW:
                return self.file.read(stop - start)
            self._start, self._data = start, self.file.read(_WINDOW)
        return self._data[start - self._start : stop - self._start]

    def positions(self, marks: re.Pattern[bytes], start: int) -> Iterator[int]:
        """Where `marks` match from `start` on, searched a stretch at a time."""
        while start < self.size:
            end = min(start + _SEARCH, self.size)
            stretch = self[start : min(end + _OVERLAP, self.size)]
            for match in marks.finditer(stretch):
                if match.start() < end - start or end == self.size:
                    yield start + match.start()
            start = end


class Block(NamedTuple):
    """Where a salvage scan found messages: `key` locates them, `start` is their earliest receive
    time (found by the scan, not taken from a header that may be damaged)."""

    start: int
    key: int


def ignore(pos: int, size: int, reason: str, messages: int) -> None:
    """The damage callback of a walk that reads messages again: the first walk noted it."""


def by_time(blocks: Sequence[Block], load: Callable[[int], Sequence[tuple[int, int, Item]]]) -> Iterator[Item]:
    """The items of every block in (time, order) order; `load(key)` gives a block's
    (time, order, item) triples, `order` unique. A block is loaded only when the merge reaches
    its start time, so memory holds the blocks that overlap in time (one or two in a recording
    written in receive order), not the file."""
    pending = sorted(blocks)
    heap: list[tuple[int, int, Item]] = []
    i = 0
    while i < len(pending) or heap:
        while i < len(pending) and (not heap or pending[i].start <= heap[0][0]):
            for entry in load(pending[i].key):
                heapq.heappush(heap, entry)
            i += 1
        if heap:
            yield heapq.heappop(heap)[2]


def messages_between(blocks: Sequence[Block], load: Callable[[int], Sequence[tuple[int, int, tuple[Any, int, bytes]]]],
                     start: int | None, stop: int | None) -> Iterator[tuple[Any, int, bytes]]:
    """by_time's (connection, time, data) messages with start <= time < stop (None: open)."""
    for conn, time, data in by_time(blocks, load):
        if (start is None or time >= start) and (stop is None or time < stop):
            yield conn, time, data


class OwnedFile:
    """A reader's open file, closed once (close() may come after a failed open)."""

    _file: Any = None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def decompressed(data: bytes, compression: str, size: int) -> tuple[bytes, str | None]:
    """`data` decompressed, or as much of it as can be (what came out before the stream was
    cut or broke), and then why it fell short of `size` bytes."""
    decoder = _decoders[compression]()
    out = []
    problem = None
    try:
        for i in range(0, len(data), _FEED):
            out.append(decoder.decompress(data[i : i + _FEED]))
    except Exception as err:  # noqa: BLE001 - every decoder raises its own kind on bad data
        problem = f"{compression} data broken ({err})"
    result = b"".join(out)
    if problem is None and (not getattr(decoder, "eof", True) or len(result) < size):
        problem = f"{compression} data cut"
    return result, problem


_decoders: dict[str, Callable[[], Any]] = {
    "zstd": zstd.ZstdDecompressor,
    "lz4": lz4.frame.LZ4FrameDecompressor,
    "bz2": bz2.BZ2Decompressor,
}


class Checked(NamedTuple):
    """A plausible record: its opcode, where it ends, and whether its content proved it (a
    length that agrees with another field, a body that parsed exactly), so that the next
    record need not vouch for it."""

    op: int
    end: int
    proven: bool


class RecordWalk:
    """The records of `data` (a chunk's records, or a whole file at the `top` level), each
    checked (`_check`, per format) and vouched for by the next one unless proven. After damage
    the walk resynchronises at the next position where a record checks out (trying only where
    `marks` match) and reports the bytes it skipped to `on_damage`. `cut`: `data` may end
    inside a record (a cut file or chunk) rather than end cleanly."""

    CHUNK = MESSAGE = -1  # the format's opcodes of a chunk and of a message

    def __init__(self, data: Any, marks: re.Pattern[bytes], *, top: bool, cut: bool, on_damage: OnDamage) -> None:
        self.data, self.marks, self.top, self.cut, self.on_damage = data, marks, top, cut, on_damage
        self.size = len(data)
        self._last: tuple[int, Checked | None] = (-1, None)

    def records(self, pos: int = 0) -> Iterator[tuple[int, int, int]]:
        """(opcode, start, end) of every record kept, from `pos`. At the top level a chunk that
        runs past the end of the data is yielded too: the caller reads what is there."""
        n = self.size
        while pos < n:
            rec = self.check(pos)
            if rec is not None:
                if rec.end <= n and (rec.proven or rec.end == n or self.check(rec.end) is not None):
                    yield rec.op, pos, rec.end
                    pos = rec.end
                    continue
                if rec.end > n and self.top and rec.op == self.CHUNK:
                    yield rec.op, pos, rec.end
                    return
            nxt = resync(self.data, pos + 1, self.marks, self._resync_point)
            if rec is not None and rec.end <= n and (nxt is None or nxt >= rec.end):
                yield rec.op, pos, rec.end  # a sound record; the damage follows it
                pos = rec.end
                continue
            stop = n if nxt is None else nxt
            self.on_damage(pos, stop - pos, self._why(nxt), int(rec is not None and rec.op == self.MESSAGE))
            pos = stop

    def _why(self, nxt: int | None) -> str:
        if nxt is not None:
            return "unreadable records"
        return "incomplete record at the end (cut)" if self.cut else "unreadable bytes up to the end"

    def _resync_point(self, pos: int) -> bool:
        """A record that checks out at `pos`, proven or vouched for by the next one."""
        rec = self.check(pos)
        if rec is None or rec.end > self.size:
            return False
        return rec.proven or rec.end == self.size or self.check(rec.end) is not None

    def check(self, pos: int) -> Checked | None:
        """The plausible record at `pos`, or None (the last answer is kept: each record is
        checked as the successor of one record and then as itself)."""
        if self._last[0] != pos:
            self._last = (pos, self._check(pos))
        return self._last[1]

    def _check(self, pos: int) -> Checked | None:
        raise NotImplementedError


def resync(data: Any, start: int, marks: re.Pattern[bytes], accept: Callable[[int], bool]) -> int | None:
    """The first position from `start` on where a record starts by `accept`, trying only where
    `marks` matches (what a record begins with); None when there is none."""
    if isinstance(data, FileView):
        positions = data.positions(marks, start)
    else:
        positions = (match.start() for match in marks.finditer(data, start))
    return next((pos for pos in positions if accept(pos)), None)
