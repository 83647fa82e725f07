"""Salvaging MCAP files: a recording killed before its summary was written, a file cut short
by a full disk, a record damaged on disk.

MCAP (mcap.dev/spec): the magic, then records of an opcode byte, a uint64 body length and the
body. Chunks (opcode 0x06: start and end time, uncompressed size, CRC, compression, records)
hold Schema (0x03), Channel (0x04) and Message (0x05: channel, sequence, log time, publish
time, payload) records. `Walk` checks each record (a known opcode, a length that fits, a known
channel, a schema or channel that parses exactly, a chunk whose lengths agree) and
resynchronises after damage (blocks.RecordWalk). `SalvageMcapReader`
walks the file once to find its chunks (reading record headers only, through blocks.FileView),
then
serves messages in log-time order a chunk at a time, so memory stays bounded.
"""

from __future__ import annotations

import os
import re
import struct
from binascii import crc32
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rosbags.interfaces import Connection, ConnectionExtRosbag2
from rosbags.rosbag2.errors import ReaderError
from rosbags.rosbag2.metadata import ReaderMetadata
from rosbags.rosbag2.storage_mcap import McapReader, Schema, Statistics, get_msgdef, get_qos

from .blocks import Block, Checked, FileView, RecordWalk, decompressed, ignore, messages_between
from .report import Salvage

if TYPE_CHECKING:
    from collections.abc import Collection, Generator, Iterator

    from .blocks import OnDamage

MAGIC = b"\x89MCAP0\r\n"
FOOTER, SCHEMA, CHANNEL, MESSAGE, CHUNK, DATA_END = 0x02, 0x03, 0x04, 0x05, 0x06, 0x0F
MESSAGE_HEADER = 2 + 4 + 8 + 8  # channel, sequence, log time, publish time
_CHUNK_HEAD = struct.Struct("<QQQII")  # start, end, uncompressed size, CRC, compression length
_COMPRESSIONS = {b"", b"zstd", b"lz4"}
_IN_CHUNK = re.compile(rb"[\x03-\x05]")
_TOP_LEVEL = re.compile(rb"[\x02-\x0f]")
_LOOSE_RUN = 1 << 20  # bytes of messages outside chunks read as one block
_DEFINITION = 1 << 24  # a schema or channel is smaller: a longer one is damage, not read


class Walk(RecordWalk):
    """MCAP records: in a chunk (`top` False) schemas, channels and messages; at the top level
    chunks, the summary's records and the data end too. `channels` are the channel ids known
    so far (the caller adds those it meets)."""

    CHUNK, MESSAGE = CHUNK, MESSAGE

    def __init__(self, data: Any, channels: set[int], *, top: bool, cut: bool, on_damage: OnDamage) -> None:
        super().__init__(data, _TOP_LEVEL if top else _IN_CHUNK, top=top, cut=cut, on_damage=on_damage)
        self.channels = channels

    def _check(self, pos: int) -> Checked | None:
        data, n = self.data, self.size
        if pos + 9 > n:
            return None
        op, length = data[pos], int.from_bytes(data[pos + 1 : pos + 9], "little")
        end = pos + 9 + length
        if op == MESSAGE:
            known = pos + 11 <= n and int.from_bytes(data[pos + 9 : pos + 11], "little") in self.channels
            return Checked(op, end, False) if known and length >= MESSAGE_HEADER else None
        if op in (SCHEMA, CHANNEL):
            ok = length < _DEFINITION and end <= n and _parses(bytes(data[pos + 9 : end]), op)
            return Checked(op, end, True) if ok else None
        if not self.top:
            return None
        if op == CHUNK:
            return Checked(op, end, True) if chunk_head(data, pos) is not None else None
        if op in (DATA_END, FOOTER):
            return Checked(op, end, False) if length == (4 if op == DATA_END else 20) else None
        return Checked(op, end, False) if FOOTER < op < DATA_END else None


def _parses(body: bytes, op: int) -> bool:
    """A Schema (id, name, encoding, data) or Channel (id, schema id, topic, encoding, metadata)
    body whose length prefixes add up to exactly its size."""
    return _prefixed_end(body, 2 if op == SCHEMA else 4, 3) == len(body)


def _prefixed_end(body: bytes, pos: int, count: int) -> int | None:
    """Where `count` uint32-length-prefixed fields from `pos` end; None past the body."""
    for _ in range(count):
        if pos + 4 > len(body):
            return None
        pos += 4 + int.from_bytes(body[pos : pos + 4], "little")
    return pos if pos <= len(body) else None


class ChunkHead(NamedTuple):
    """A chunk record's header; `records` is the file offset of its (compressed) records."""

    uncompressed: int
    crc: int
    compression: str
    records: int
    size: int


def chunk_head(data: Any, pos: int) -> ChunkHead | None:
    """The header of the chunk record at `pos` when its fields agree with each other."""
    fixed = pos + 9 + _CHUNK_HEAD.size
    if fixed > len(data):
        return None
    start, end, usize, crc, clen = _CHUNK_HEAD.unpack(data[pos + 9 : fixed])
    compression = bytes(data[fixed : fixed + min(clen, 8)])
    if clen > 8 or compression not in _COMPRESSIONS or fixed + clen + 8 > len(data) or start > end:
        return None
    size = int.from_bytes(data[fixed + clen : fixed + clen + 8], "little")
    length = int.from_bytes(data[pos + 1 : pos + 9], "little")
    if length != _CHUNK_HEAD.size + clen + 8 + size or (not compression and size != usize):
        return None
    return ChunkHead(usize, crc, compression.decode(), fixed + clen + 8, size)


def chunk_records(head: ChunkHead, stored: bytes) -> tuple[bytes, list[tuple[int, str]]]:
    """A chunk's records from its `stored` bytes (all of them, or what a cut file holds), and
    what is wrong with them: (bytes of decompressed data lost, reason)."""
    data, problems = stored, []
    if head.compression:
        data, problem = decompressed(stored, head.compression, head.uncompressed)
        if problem:
            problems.append((max(0, head.uncompressed - len(data)), f"{problem} in the chunk"))
    if head.crc and len(data) == head.uncompressed and crc32(data) != head.crc:
        problems.append((0, "chunk checksum mismatch: its messages were kept but may hold corrupt bytes"))
    return data, problems


def chunk_messages(data: bytes, channels: set[int], cut: bool, on_damage: OnDamage
                   ) -> Iterator[tuple[int, memoryview]]:
    """(opcode, body) of the schema, channel and message records of a chunk's `data` that
    check out; channels defined on the way are added to `channels`."""
    view = memoryview(data)
    walk = Walk(view, channels, top=False, cut=cut, on_damage=on_damage)
    for op, pos, end in walk.records():
        body = view[pos + 9 : end]
        if op == CHANNEL:
            channels.add(int.from_bytes(body[:2], "little"))
        yield op, body


def chunk_contents(head: ChunkHead, stored: bytes, offset: int, channels: set[int], salvage: Salvage | None
                   ) -> Iterator[tuple[int, memoryview]]:
    """(opcode, body) of the records that check out in the chunk record at file `offset`,
    from its `stored` bytes (all, or what a cut file holds); its damage is noted in `salvage`."""
    data, problems = chunk_records(head, stored)
    cut = len(stored) < head.size or len(data) < head.uncompressed
    if salvage is None:
        return chunk_messages(data, channels, cut, ignore)
    for size, reason in problems:
        salvage.note(offset, size, f"{reason} at byte {offset}")
    if head.compression:
        where = f" in the {head.compression} chunk at byte {offset} (offsets in its decompressed data)"
        return chunk_messages(data, channels, cut, salvage.at(offset, where))
    return chunk_messages(data, channels, cut, salvage.at(head.records))


class _Span(NamedTuple):
    """Records the scan found: a chunk, or a run of messages outside chunks (`head` None)."""

    offset: int              # file offset of the chunk record, or of the first message
    records: int             # file offset of the (possibly compressed) records
    size: int                # their bytes present in the file
    head: ChunkHead | None
    known: frozenset[int]    # channels known before it (the walk's check needs them)
    channels: frozenset[int]  # channels of its messages


class SalvageMcapReader(McapReader):
    """Reads an MCAP file without trusting its end: no footer, no summary, a cut or damaged
    record. Every record that checks out is used, including those of a cut chunk (and of a cut
    compressed chunk as far as it decompresses); schemas and channels may sit inside chunks
    (rosbag2's writer). `salvage` tells what was read and what was lost."""

    def __init__(self, path: Any, expected: dict[str, int] | None = None) -> None:
        super().__init__(path)
        self.salvage = Salvage(Path(str(path)), "mcap", expected=expected)
        self._spans: list[_Span] = []
        self._blocks: list[Block] = []

    def _open(self) -> None:
        assert self.bio
        if self.bio.read(8) != MAGIC:
            raise ReaderError("not an MCAP file")
        with self.salvage.path.open("rb") as file:  # its own: the chunks are read through self.bio
            self._walk_top(FileView(file, os.fstat(file.fileno()).st_size))

    def _walk_top(self, view: FileView) -> None:
        scan = _Scan()
        walk = Walk(view, scan.channels, top=True, cut=True, on_damage=self.salvage.at(0))
        run = (0, 0)  # messages outside chunks, not yet scanned
        for op, pos, end in walk.records(_after_header(view)):
            if op == MESSAGE and run[1] == pos and run[1] - run[0] < _LOOSE_RUN:
                run = (run[0], end)
                continue
            self._scan_run(run, scan)
            run = (pos, end) if op == MESSAGE else (0, 0)
            if op in (SCHEMA, CHANNEL):
                self._define(op, view[pos + 9 : end], scan.channels)
            elif op == CHUNK:
                head = chunk_head(view, pos)
                assert head is not None
                present = max(0, min(head.size, len(view) - head.records))
                self.salvage.cut_off(head.size - present)
                self._scan(_Span(pos, head.records, present, head, frozenset(scan.channels), frozenset()), scan)
            elif op in (DATA_END, FOOTER):
                break
        self._scan_run(run, scan)
        self._finish(scan)

    def _scan_run(self, run: tuple[int, int], scan: _Scan) -> None:
        if run[1] > run[0]:
            self._scan(_Span(run[0], run[0], run[1] - run[0], None, frozenset(scan.channels), frozenset()), scan)

    def _scan(self, span: _Span, scan: _Scan) -> None:
        """Walks a span once: schemas and channels, message counts, log times, damage."""
        found: Counter[int] = Counter()
        first = None
        for op, body in self._records(span, scan.channels, note=True):
            if op == MESSAGE:
                log_time = int.from_bytes(body[6:14], "little")
                found[int.from_bytes(body[:2], "little")] += 1
                first = log_time if first is None else min(first, log_time)
                scan.last = max(scan.last, log_time)
            else:
                self._define(op, body, scan.channels)
        scan.counts.update(found)
        if first is not None:
            self._blocks.append(Block(first, len(self._spans)))
        self._spans.append(span._replace(channels=frozenset(found)))

    def _records(self, span: _Span, channels: set[int], note: bool) -> Iterator[tuple[int, memoryview]]:
        """(opcode, body) of the records of a span that check out; `note`: report the damage."""
        assert self.bio is not None
        self.bio.seek(span.records)
        stored = self.bio.read(span.size)
        salvage = self.salvage if note else None
        if span.head is not None:
            return chunk_contents(span.head, stored, span.offset, channels, salvage)
        return chunk_messages(stored, channels, False, self.salvage.at(span.records) if note else ignore)

    def _define(self, op: int, body: Any, channels: set[int]) -> None:
        """Registers a schema, or a channel as a connection (once)."""
        body = bytes(body)
        if op == SCHEMA:
            sid = int.from_bytes(body[:2], "little")
            name, encoding, data = _fields(body, 2, 3)[0]
            self.schemas[sid] = Schema(sid, name, encoding, data)
            return
        cid, sid = int.from_bytes(body[:2], "little"), int.from_bytes(body[2:4], "little")
        channels.add(cid)
        if any(c.id == cid for c in self.connections):
            return
        (topic, encoding), end = _fields(body, 4, 2)
        metadata = body[end + 4 :]  # the map's bytes, after their length
        schema = self.schemas.get(sid)
        self.connections.append(Connection(
            cid, topic, schema.name if schema else "", get_msgdef(schema), "", 0,
            ConnectionExtRosbag2(encoding, get_qos(metadata)), self,
        ))

    def _finish(self, scan: _Scan) -> None:
        self.connections = [c._replace(msgcount=scan.counts[c.id]) for c in self.connections]
        for conn in self.connections:
            self.salvage.recovered[conn.topic] += scan.counts[conn.id]
        total = sum(scan.counts.values())
        start = min(b.start for b in self._blocks) if self._blocks else 2**63 - 1
        self.statistics = Statistics(total, len(self.schemas), len(self.connections), 0, 0, len(self._spans),
                                     start, scan.last, dict(scan.counts))
        duration = scan.last + 1 - start if total else 0
        self.metadata = ReaderMetadata(duration, start, scan.last + 1 if total else 0, total,
                                       None, None, None, None)

    def messages(self, connections: Collection[Connection], start: int | None = None,
                 stop: int | None = None) -> Generator[tuple[Connection, int, bytes], None, None]:
        wanted = {c.id: c for c in connections}
        blocks = [b for b in self._blocks if wanted.keys() & self._spans[b.key].channels]
        yield from messages_between(blocks, lambda key: self._load(key, wanted), start, stop)

    def _load(self, key: int, wanted: dict[int, Connection]) -> list[tuple[int, int, tuple[Connection, int, bytes]]]:
        """The wanted messages of a span as (log time, file order, message)."""
        span = self._spans[key]
        found = []
        for order, (op, body) in enumerate(self._records(span, set(span.known), note=False)):
            if op == MESSAGE and (conn := wanted.get(int.from_bytes(body[:2], "little"))) is not None:
                log_time = int.from_bytes(body[6:14], "little")
                found.append((log_time, (key << 32) | order, (conn, log_time, bytes(body[MESSAGE_HEADER:]))))
        return found


def _after_header(view: FileView) -> int:
    """Where the records after the Header record (profile, library) begin; right after the
    magic when that record is damaged."""
    end = 17 + int.from_bytes(view[9:17], "little")
    if view[8:9] == b"\x01" and end <= len(view) and _prefixed_end(view[17:end], 0, 2) == end - 17:
        return end
    return 8


class _Scan:
    """What the scan of a file collects: channels known, messages per channel, last log time."""

    def __init__(self) -> None:
        self.channels: set[int] = set()
        self.counts: Counter[int] = Counter()
        self.last = 0


def _fields(body: bytes, pos: int, count: int) -> tuple[list[str], int]:
    """`count` length-prefixed strings from `pos`, and where they end."""
    out = []
    for _ in range(count):
        size = int.from_bytes(body[pos : pos + 4], "little")
        out.append(body[pos + 4 : pos + 4 + size].decode(errors="replace"))
        pos += 4 + size
    return out, pos
