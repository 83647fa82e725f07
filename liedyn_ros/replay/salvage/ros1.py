"""Salvaging ROS 1 bags (format 2.0): a recording killed before its index was written (the
bag header's index_pos is still 0), a file cut short, a record damaged on disk.

A bag (wiki.ros.org/Bags/Format/2.0) is the line "#ROSBAG V2.0", then records: a uint32
header length, the header (fields of a uint32 length and "name=value", among them the opcode
"op"), a uint32 data length and the data. Chunks (op 0x05: compression none, bz2 or lz4, and
the uncompressed size) hold Connection (0x07: connection id and topic; its data is another
header with type, md5sum, message_definition, callerid, latching) and Message data (0x02:
connection id and receive time; its data is the serialized message) records. The index (index
data, chunk info, the connections again) follows each chunk or ends the file; rosbags needs it,
this reader does not.
"""

from __future__ import annotations

import os
import re
import struct
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple

from rosbags.interfaces import Connection, ConnectionExtRosbag1, MessageDefinition, MessageDefinitionFormat
from rosbags.rosbag1.reader import ReaderError, normalize
from rosbags.typesys.msg import normalize_msgtype

from .blocks import Block, Checked, FileView, OwnedFile, RecordWalk, decompressed, ignore, messages_between
from .report import Salvage

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from pathlib import Path

    from .blocks import OnDamage

MAGIC = b"#ROSBAG V2.0\n"
MESSAGE, BAG_HEADER, INDEX_DATA, CHUNK, CHUNK_INFO, CONNECTION = 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
_MAX_HEADER = 1 << 16  # record headers hold a few short fields; the definitions are in the data
_MAX_CONNECTION = 1 << 24  # a connection's data (type, definition) is smaller: longer is damage
_LOOSE_RUN = 1 << 20  # bytes of messages outside chunks read as one block
# Where a record may begin: a header length below 64 KiB, then a field of fewer than 256 bytes.
_MARKS = re.compile(rb"(?s)..\x00\x00.\x00\x00\x00[a-z_]{1,32}=")
_UINT32 = struct.Struct("<I")


def fields(data: Any, pos: int, end: int) -> dict[str, bytes] | None:
    """The name=value fields of a header in data[pos:end], or None unless they fill it exactly."""
    out = {}
    while pos < end:
        if pos + 4 > end:
            return None
        size = int.from_bytes(data[pos : pos + 4], "little")
        name, sep, value = bytes(data[pos + 4 : pos + 4 + size]).partition(b"=")
        if pos + 4 + size > end or not sep or not name:
            return None
        out[name.decode("latin-1")] = value
        pos += 4 + size
    return out


class Record(NamedTuple):
    fields: dict[str, bytes]
    data: int  # where the data begins
    end: int


class Walk(RecordWalk):
    """ROS 1 records: in a chunk (`top` False) connections and messages; at the top level the
    bag header, chunks and the index records. `connections` are the connection ids known so
    far (the caller adds those it meets)."""

    CHUNK, MESSAGE = CHUNK, MESSAGE

    def __init__(self, data: Any, connections: set[int], *, top: bool, cut: bool, on_damage: OnDamage) -> None:
        super().__init__(data, _MARKS, top=top, cut=cut, on_damage=on_damage)
        self.connections = connections

    def record(self, pos: int) -> Record | None:
        """The record at `pos` whose header parses, or None."""
        data, n = self.data, self.size
        if pos + 4 > n:
            return None
        hlen = int.from_bytes(data[pos : pos + 4], "little")
        if not 4 <= hlen <= _MAX_HEADER or pos + 8 + hlen > n:
            return None
        found = fields(data, pos + 4, pos + 4 + hlen)
        if found is None or len(found.get("op", b"")) != 1:
            return None
        start = pos + 8 + hlen
        return Record(found, start, start + int.from_bytes(data[start - 4 : start], "little"))

    def _check(self, pos: int) -> Checked | None:
        rec = self.record(pos)
        if rec is None:
            return None
        op, f, size = rec.fields["op"][0], rec.fields, rec.end - rec.data
        if op == MESSAGE:
            ok = len(f.get("time", b"")) == 8 and _uint(f, "conn") in self.connections
            return Checked(op, rec.end, False) if ok else None
        if op == CONNECTION:
            ok = _uint(f, "conn") >= 0 and "topic" in f and rec.end <= min(self.size, rec.data + _MAX_CONNECTION)
            return Checked(op, rec.end, True) if ok and fields(self.data, rec.data, rec.end) is not None else None
        if not self.top:
            return None
        if op == CHUNK:
            compression = f.get("compression")
            ok = compression in _DECODERS and (compression != b"none" or _uint(f, "size") == size)
            return Checked(op, rec.end, True) if ok else None
        if op in (INDEX_DATA, CHUNK_INFO):  # entries of 12 and of 8 bytes
            count = _uint(f, "count")
            entry = 12 if op == INDEX_DATA else 8
            return Checked(op, rec.end, True) if count >= 0 and entry * count == size else None
        return Checked(op, rec.end, False) if op == BAG_HEADER else None


_DECODERS = {b"none", b"bz2", b"lz4"}


def _uint(f: dict[str, bytes], name: str) -> int:
    """A uint32 field; -1 when it is missing or not 4 bytes."""
    value = f.get(name, b"")
    return _UINT32.unpack(value)[0] if len(value) == 4 else -1


class _Chunk(NamedTuple):
    offset: int              # of the chunk record
    data: int                # of its (compressed) data
    size: int                # data bytes present in the file
    declared: int            # data bytes the record declares
    compression: str
    uncompressed: int
    known: frozenset[int]    # connections known before it
    connections: frozenset[int]


class SalvageRos1Reader(OwnedFile):
    """Reads a ROS 1 bag without its index: every record that checks out, in receive-time
    order a chunk at a time. The attributes the replay uses are those of rosbags' Reader
    (connections, messages, start_time, end_time); `salvage` tells what was read and lost."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connections: list[Connection] = []
        self.salvage = Salvage(path, "ros1")
        self._chunks: list[_Chunk] = []
        self._blocks: list[Block] = []
        self.start_time, self.end_time = 2**63 - 1, 0

    def open(self) -> None:
        self._file = self.path.open("rb")
        try:
            self._scan()
        except BaseException:
            self.close()
            raise

    def _read(self, offset: int, size: int) -> bytes:
        self._file.seek(offset)
        return self._file.read(size)

    def _scan(self) -> None:
        """Walks the top-level records: connections, chunks, the bag header's index position."""
        if self._read(0, len(MAGIC)) != MAGIC:
            raise ReaderError("not a ROS 1 bag (format 2.0)")
        with self.path.open("rb") as file:  # its own: the chunks are read through self._file
            self._walk_top(FileView(file, os.fstat(file.fileno()).st_size))

    def _walk_top(self, top: FileView) -> None:
        size = len(top)
        counts: Counter[int] = Counter()
        known: set[int] = set()
        walk = Walk(top, known, top=True, cut=True, on_damage=self.salvage.at(0))
        run = (0, 0)  # messages outside a chunk (its header damaged), not yet scanned
        for op, pos, end in walk.records(len(MAGIC)):
            if op == MESSAGE and run[1] == pos and run[1] - run[0] < _LOOSE_RUN:
                run = (run[0], end)
                continue
            self._scan_run(run, known, counts)
            run = (pos, end) if op == MESSAGE else (0, 0)
            rec = walk.record(pos)
            assert rec is not None
            if op == BAG_HEADER:
                index = rec.fields.get("index_pos", b"")
                if len(index) == 8:  # 0 while recording: the index is written last
                    self.salvage.cut_off(int.from_bytes(index, "little") - size)
            elif op == CONNECTION:
                self._define(rec.fields, top[rec.data : rec.end], known)
            elif op == CHUNK:
                present = max(0, min(rec.end, size) - rec.data)
                chunk = _Chunk(pos, rec.data, present, rec.end - rec.data, rec.fields["compression"].decode(),
                               max(0, _uint(rec.fields, "size")), frozenset(known), frozenset())
                self.salvage.cut_off(chunk.declared - present)
                self._scan_chunk(chunk, known, counts)
        self._scan_run(run, known, counts)
        self.connections = [c._replace(msgcount=counts[c.id]) for c in self.connections]
        for conn in self.connections:
            self.salvage.recovered[conn.topic] += counts[conn.id]

    def _scan_run(self, run: tuple[int, int], known: set[int], counts: Counter[int]) -> None:
        """Messages found outside chunks, read as an uncompressed chunk of their own."""
        size = run[1] - run[0]
        if size:
            self._scan_chunk(_Chunk(run[0], run[0], size, size, "none", size, frozenset(known), frozenset()),
                             known, counts)

    def _scan_chunk(self, chunk: _Chunk, known: set[int], counts: Counter[int]) -> None:
        found: Counter[int] = Counter()
        first = None
        for rec, data in self._records(chunk, known, note=True):
            if rec.fields["op"][0] == CONNECTION:
                self._define(rec.fields, data[rec.data : rec.end], known)
                continue
            time = _time(rec.fields["time"])
            found[_uint(rec.fields, "conn")] += 1
            first = time if first is None else min(first, time)
            self.start_time, self.end_time = min(self.start_time, time), max(self.end_time, time + 1)
        counts.update(found)
        if first is not None:
            self._blocks.append(Block(first, len(self._chunks)))
        self._chunks.append(chunk._replace(connections=frozenset(found)))

    def _records(self, chunk: _Chunk, known: set[int], note: bool) -> Iterator[tuple[Record, Any]]:
        """The connection and message records of a chunk that check out, with the chunk's data."""
        data = self._read(chunk.data, chunk.size)
        cut = chunk.size < chunk.declared
        where = ""
        if chunk.compression != "none":
            data, problem = decompressed(data, chunk.compression, chunk.uncompressed)
            cut = cut or problem is not None
            if note and problem:
                self.salvage.note(chunk.offset, max(0, chunk.uncompressed - len(data)),
                                  f"{problem} in the chunk at byte {chunk.offset} (bytes of its decompressed data)")
            where = f" in the {chunk.compression} chunk at byte {chunk.offset} (offsets in its decompressed data)"
        base = chunk.offset if where else chunk.data
        on_damage = self.salvage.at(base, where) if note else ignore
        walk = Walk(memoryview(data), known, top=False, cut=cut, on_damage=on_damage)
        for op, pos, _ in walk.records():
            rec = walk.record(pos)
            assert rec is not None
            if op == CONNECTION:
                known.add(_uint(rec.fields, "conn"))
            yield rec, walk.data

    def _define(self, head: dict[str, bytes], data: Any, known: set[int]) -> None:
        """Registers a connection (once), as rosbags' reader names it (ROS 2 type names)."""
        cid = _uint(head, "conn")
        known.add(cid)
        info = fields(data, 0, len(data))
        if info is None or any(c.id == cid for c in self.connections):
            return
        text = {k: v.decode(errors="replace") for k, v in info.items()}
        latching = text.get("latching", "")
        ext = ConnectionExtRosbag1(text.get("callerid"), int(latching) if latching.isdigit() else None)
        self.connections.append(Connection(
            cid, normalize(head["topic"].decode(errors="replace")), normalize_msgtype(text.get("type", "")),
            MessageDefinition(MessageDefinitionFormat.MSG, text.get("message_definition", "")),
            text.get("md5sum", ""), 0, ext, self,
        ))

    def messages(self, connections: Collection[Connection] = (), start: int | None = None,
                 stop: int | None = None) -> Iterator[tuple[Connection, int, bytes]]:
        wanted = {c.id: c for c in (connections or self.connections)}
        blocks = [b for b in self._blocks if wanted.keys() & self._chunks[b.key].connections]
        yield from messages_between(blocks, lambda key: self._load(key, wanted), start, stop)

    def _load(self, key: int, wanted: dict[int, Connection]) -> list[tuple[int, int, tuple[Connection, int, bytes]]]:
        """The wanted messages of a chunk as (receive time, file order, message)."""
        chunk = self._chunks[key]
        found = []
        for order, (rec, data) in enumerate(self._records(chunk, set(chunk.known), note=False)):
            conn = wanted.get(_uint(rec.fields, "conn"))
            if rec.fields["op"][0] == MESSAGE and conn is not None:
                time = _time(rec.fields["time"])
                found.append((time, (key << 32) | order, (conn, time, bytes(data[rec.data : rec.end]))))
        return found


def _time(value: bytes) -> int:
    sec, nsec = struct.unpack("<II", value)
    return sec * 1_000_000_000 + nsec
