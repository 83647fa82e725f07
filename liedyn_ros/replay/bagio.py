"""Reading ROS 1 and rosbag2 (sqlite3, mcap) bags with `rosbags`, no ROS install needed.

Every bag gets its own reader and a typestore that decodes it, so ROS 1 and ROS 2 bags can
be replayed together; their messages are merged by receive time. Message types that cannot be decoded
(for example control_msgs, which is not in the standard type set) are skipped. A bag that
rosbags cannot open, or that breaks while it is read, is read again by a salvage reader
(salvage/), which keeps every intact message and accounts for what was lost.
"""

from __future__ import annotations

import functools
import heapq
import struct
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rosbags.interfaces import Connection, MessageDefinitionFormat
from rosbags.rosbag1 import Reader as Reader1
from rosbags.rosbag2 import Reader as Reader2
from rosbags.rosbag2.reader import DirectoryReader
from rosbags.rosbag2.storage_mcap import McapReader, decompress
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

from .errors import ReplayError
from .salvage import Salvage, known_damage, salvage_reader
from .salvage.mcap import MESSAGE, MESSAGE_HEADER, ChunkHead, chunk_contents

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator

    from rosbags.typesys.store import Typestore

# rosbag2 bags before Iron do not embed message definitions; these stores supply them.
_DISTRO_STORES = {
    "humble": Stores.ROS2_HUMBLE,
    "iron": Stores.ROS2_IRON,
    "jazzy": Stores.ROS2_JAZZY,
}


class RawMessage(NamedTuple):
    """One serialized message, as read from a bag (a NamedTuple: built once per message,
    several times cheaper than a frozen dataclass)."""

    topic: str
    msgtype: str
    receive_ns: int
    data: bytes | memoryview
    bag: BagSource


@dataclass
class BagSource:
    """One open bag: its reader, a typestore that can decode it, and what went wrong."""

    path: Path
    reader: Any  # rosbags' Reader1 or Reader2, or a salvage reader
    typestore: Typestore
    is_ros1: bool
    undecodable: dict[str, str] = field(default_factory=dict)  # msgtype -> reason
    problems: list[str] = field(default_factory=list)
    salvaged: bool = False  # the reader is a salvage reader
    shortfall: Salvage | None = None  # messages the reader skipped without an error

    def connections(self, topics: Collection[str]) -> list[Connection]:
        return [c for c in self.reader.connections if c.topic in topics]

    def topic_types(self) -> dict[str, str]:
        return {c.topic: c.msgtype for c in self.reader.connections}

    def deserialize(self, data: bytes | memoryview, msgtype: str) -> Any:
        if self.is_ros1:
            return self.typestore.deserialize_ros1(data, msgtype)
        return self.typestore.deserialize_cdr(data, msgtype)

    def close(self) -> None:
        self.reader.close()

    def salvages(self) -> list[Salvage]:
        """The accounts of the damaged storage files read so far."""
        storage = getattr(self.reader, "storage", self.reader)
        storages = getattr(storage, "storages", [storage])  # a rosbag2 directory: one per file
        found = [s.salvage for s in storages if getattr(s, "salvage", None) is not None]
        return found + ([self.shortfall] if self.shortfall is not None else [])

    def messages(self, topics: Collection[str], start_ns: int | None = None) -> Iterator[RawMessage]:
        """Messages on `topics` in receive order, from receive time `start_ns` on (None: all). When
        the reader fails on the way, the rest comes from a salvage reader, from where the failure was."""
        seen = _Position()
        try:
            for raw in self._read(topics, start_ns):
                seen.passed(raw)
                yield raw
        except Exception as err:  # noqa: BLE001 - any storage failure means damage here
            if self.salvaged or not self._salvage(err, seen.count):
                self.problems.append(f"{self.path}: damaged after {seen.count} messages on {sorted(topics)}; "
                                     f"kept what came before ({type(err).__name__}: {err})")
                return
            yield from self._resume(topics, seen, start_ns)
            return
        if not self.salvaged and not self.salvages() and start_ns is None:  # a seek reads fewer by design
            self._count_check(topics, seen.topics)

    def _resume(self, topics: Collection[str], seen: _Position, start_ns: int | None) -> Iterator[RawMessage]:
        """The salvage reader's messages after those given; those it has before that point
        beyond the ones given are messages the failed reader never gave: lost, counted."""
        before = 0
        for raw in self._read(topics, start_ns):
            if seen.after(raw.receive_ns):
                yield raw
            else:
                before += 1
        for account in self.salvages()[:1]:
            account.lost_at_least += max(0, before - seen.count)

    def _count_check(self, topics: Collection[str], read: Counter[str]) -> None:
        """Accounts for messages a reader skipped without an error: fewer read than the bag
        counts, or messages counted on no topic (SQLite reads a row whose cell is damaged with
        a topic id of none)."""
        held = Counter[str]()
        for conn in self.connections(topics):
            if conn.msgtype not in self.undecodable:
                held[conn.topic] += conn.msgcount
        nowhere = self.reader.message_count - sum(c.msgcount for c in self.reader.connections)
        missed = sum(held.values()) - sum(read.values())
        if (missed > 0 or nowhere > 0) and self.shortfall is None:
            self.shortfall = Salvage(self.path, self._format(), recovered=read, expected=dict(held),
                                     lost_at_least=max(0, missed) + max(0, nowhere),
                                     cause="the reader skipped messages it could not read")

    def _read(self, topics: Collection[str], start_ns: int | None = None) -> Iterator[RawMessage]:
        conns = [c for c in self.connections(topics) if c.msgtype not in self.undecodable]
        if conns:
            for conn, stamp, data in self.reader.messages(connections=conns, start=start_ns):
                yield RawMessage(conn.topic, conn.msgtype, stamp, data, self)

    def _format(self) -> str:
        if self.is_ros1:
            return "ros1"
        storage = self.reader.storage
        return "mcap" if isinstance(getattr(storage, "storages", [storage])[0], McapReader) else "sqlite3"

    def _salvage(self, err: Exception, count: int) -> bool:
        """Replaces the reader by a salvage reader after it failed; False when none can read."""
        try:
            reader = salvage_reader(self.path, self.is_ros1, f"the reader failed after {count} messages "
                                    f"({type(err).__name__}: {err})")
        except Exception:  # noqa: BLE001 - then the failure stands as it is
            return False
        self.reader.close()
        self.reader, self.salvaged = reader, True
        return True


class _Position:
    """How far a stream of messages in receive order went: a resumed stream skips what came
    before, and as many messages of the last receive time as were already given."""

    def __init__(self) -> None:
        self.count, self.last, self.at_last = 0, -(2**63), 0
        self.topics = Counter[str]()

    def passed(self, raw: RawMessage) -> None:
        self.count += 1
        self.topics[raw.topic] += 1
        self.at_last = self.at_last + 1 if raw.receive_ns == self.last else 1
        self.last = raw.receive_ns

    def after(self, stamp: int) -> bool:
        if stamp == self.last and self.at_last:
            self.at_last -= 1
            return False
        return stamp >= self.last


def _storage_path(path: Path) -> Path:
    """The path rosbags should open: a rosbag2 directory without metadata.yaml (a
    recording that was killed) is opened through its single storage file."""
    if path.is_dir() and not (path / "metadata.yaml").exists():
        files = sorted(p for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
        if len(files) == 1:
            return files[0]
        if not files:
            raise ReplayError(f"{path}: not a bag (a directory without metadata.yaml or any .mcap/.db3 file)")
        raise ReplayError(
            f"{path}: no metadata.yaml and {len(files)} storage files (a split recording): "
            f"pass the files themselves, in order: {' '.join(str(f) for f in files)}"
        )
    return path


@functools.cache
def standard_typestore(name: Stores) -> Typestore:
    """rosbags' typestore of a distribution's standard types, one per process and never
    registered into. A Typestore generates and compiles (exec) the (de)serializers of each
    message type on its first use and keeps them: a new store for every bag compiled them again
    for every bag, a third of the replay of a 3 s bag in a fleet worker (py-spy)."""
    return get_typestore(name)


def _typestore_for(reader: Reader1 | Reader2, is_ros1: bool) -> tuple[Typestore, dict[str, str]]:
    """A typestore with every definition the bag embeds, on top of the standard set: the
    process's standard store when the bag has no type beyond it, else a store of its own.

    Returns the store and the message types it cannot decode, with the reason.
    """
    if is_ros1:
        name = Stores.ROS1_NOETIC
    else:
        distro = (getattr(reader, "ros_distro", None) or "humble").lower()
        name = _DISTRO_STORES.get(distro, Stores.ROS2_HUMBLE)
    shared = standard_typestore(name)
    if all(conn.msgtype in shared.types for conn in reader.connections):
        return shared, {}
    store = get_typestore(name)
    undecodable: dict[str, str] = {}
    for conn in reader.connections:
        if conn.msgtype in store.types:
            continue
        try:
            store.register(_embedded_types(conn))
        except Exception as err:  # noqa: BLE001 - a bad definition only loses its topic
            undecodable[conn.msgtype] = f"unparsable definition ({err})"
        if conn.msgtype not in store.types and conn.msgtype not in undecodable:
            undecodable[conn.msgtype] = "type not in the bag nor in the standard ROS types"
    return store, undecodable


def _embedded_types(conn: Connection) -> dict[str, Any]:
    fmt, text = conn.msgdef.format, conn.msgdef.data
    if not text.strip():
        return {}  # an empty definition would register an empty, wrong message type
    if fmt == MessageDefinitionFormat.MSG:
        return dict(get_types_from_msg(text, conn.msgtype))
    if fmt == MessageDefinitionFormat.IDL:
        sep = "=" * 80 + "\n"
        types: dict[str, Any] = {}
        parts = text.split(sep)[1:] if text.startswith(f"{sep}IDL: ") else [text]
        for part in parts:
            types.update(get_types_from_idl(part.split("\n", 1)[1] if part.startswith("IDL: ") else part))
        return types
    return {}


_MESSAGE = struct.Struct("<HIQ")  # Message record after opcode and length: channel, sequence, log time


class IndexedMcapReader(McapReader):
    """rosbags' MCAP reader with a leaner message loop for indexed files (the usual case).

    rosbags walks each chunk through a BytesIO with three reads and a NamedTuple per
    message, about 3 us a message and the largest Python cost left in the replay. Here a
    chunk is decompressed once and its records are walked with `struct.unpack_from` on the
    bytes. As in rosbags, chunks are merged by log time, each one decompressed only when the
    merge reaches its start time (a sentinel comes first), so memory stays bounded. A chunk
    whose walk disagrees with the index (a damaged record) is read by the salvage walk, which
    keeps every record that checks out; `salvage` then accounts for the loss.
    """

    def __init__(self, path: Any) -> None:
        super().__init__(path)
        self.salvage: Salvage | None = None  # made at the first damaged chunk
        self._accounted: set[int] = set()    # chunks whose loss is in `salvage`

    def messages(self, connections: Any, start: int | None = None, stop: int | None = None) -> Any:
        if not self.chunks or stop is not None:
            yield from super().messages(connections, start, stop)
            return
        wanted = {c.id: c for c in connections}
        # From `start` on (a seek, liedyn-fleet's pieces of a bag): the chunks that end before it are not read.
        sources = [self._chunk_messages(chunk, wanted) for chunk in self.chunks
                   if any(chunk.channel_count.get(cid, 0) for cid in wanted)
                   and (start is None or chunk.message_end_time >= start)]
        # Ties in log time between chunks go by chunk offset (never equal), as in rosbags.
        for log_time, _, conn, data in heapq.merge(*sources):
            if conn is not None and (start is None or log_time >= start):
                yield conn, log_time, data

    def _chunk_messages(self, chunk: Any, wanted: dict[int, Connection]) -> Iterator[tuple[int, int, Connection | None, bytes]]:
        yield chunk.message_start_time, 0, None, b""
        head, stored = self._stored(chunk)
        found = self._walk(chunk, head, stored, wanted)
        if found is None:
            found = self._salvage_chunk(chunk, head, stored, wanted)
        found.sort(key=itemgetter(0))  # stable: equal log times keep the file order
        yield from found

    def _stored(self, chunk: Any) -> tuple[ChunkHead, bytes]:
        """The chunk's header as the index and the record give it, and its stored records."""
        assert self.bio
        self.bio.seek(chunk.chunk_start_offset + 9 + 24)  # record header, 3 uint64 -> CRC
        (crc,) = struct.unpack("<I", self.bio.read(4))
        records = chunk.chunk_start_offset + 9 + 40 + len(chunk.compression)
        self.bio.seek(records)
        head = ChunkHead(chunk.uncompressed_size, crc, chunk.compression, records, chunk.compressed_size)
        return head, self.bio.read(chunk.compressed_size)

    def _walk(self, chunk: Any, head: ChunkHead, stored: bytes, wanted: dict[int, Connection]) -> list[Any] | None:
        """The wanted messages by a plain walk over the records; None when the walk does not
        end where the chunk does or finds other counts than the index (damage)."""
        try:
            data = decompress(stored, head.compression, head.uncompressed, head.crc)
            found = []
            pos, end = 0, len(data)
            while pos < end:
                length = int.from_bytes(data[pos + 1 : pos + 9], "little")
                if data[pos] == MESSAGE:
                    cid, _, log_time = _MESSAGE.unpack_from(data, pos + 9)
                    conn = wanted.get(cid)
                    if conn is not None:
                        found.append((log_time, chunk.chunk_start_offset, conn,
                                      data[pos + 9 + MESSAGE_HEADER : pos + 9 + length]))
                pos += 9 + length
        except Exception:  # noqa: BLE001 - rosbags' size and CRC checks, a record cut by damage
            return None
        expected = sum(chunk.channel_count.get(cid, 0) for cid in wanted)
        return found if pos == end and len(found) == expected else None

    def _salvage_chunk(self, chunk: Any, head: ChunkHead, stored: bytes, wanted: dict[int, Connection]) -> list[Any]:
        """The wanted messages of a damaged chunk by the salvage walk (salvage.mcap), which
        resynchronises after a damaged record; the chunk's loss is accounted once."""
        topics = {c.id: c.topic for c in self.connections}
        if self.salvage is None:
            expected = Counter[str]()
            for c in self.connections:
                expected[c.topic] += c.msgcount
            self.salvage = Salvage(Path(str(self.path)), "mcap", recovered=Counter(expected), expected=dict(expected),
                                   cause="a chunk does not match the file's index")
        offset = chunk.chunk_start_offset
        account = offset not in self._accounted
        self._accounted.add(offset)
        found, counts = [], Counter[int]()
        for op, body in chunk_contents(head, stored, offset, set(topics), self.salvage if account else None):
            if op == MESSAGE:
                cid = int.from_bytes(body[:2], "little")
                counts[cid] += 1
                if (conn := wanted.get(cid)) is not None:
                    found.append((int.from_bytes(body[6:14], "little"), offset, conn, bytes(body[MESSAGE_HEADER:])))
        if account:
            for cid, count in chunk.channel_count.items():
                self.salvage.recovered[topics.get(cid, str(cid))] -= max(0, count - counts[cid])
        return found


def _indexed_mcap(reader: Reader2) -> Reader2:
    """`reader` (not yet open) reading its MCAP storage through `IndexedMcapReader`; the
    override is per instance, rosbags itself is left alone."""
    storage = reader.storage
    if isinstance(storage, DirectoryReader):
        storage.STORAGE_PLUGINS = {**DirectoryReader.STORAGE_PLUGINS, "mcap": IndexedMcapReader}  # type: ignore[misc]
    elif type(storage) is McapReader:
        reader.storage = IndexedMcapReader(storage.path)
    return reader


def _open_reader(path: Path, is_ros1: bool) -> tuple[Any, bool]:
    """An open reader, and whether only a salvage reader could open it."""
    cause = None if is_ros1 else known_damage(path)
    if cause is None:
        try:
            reader: Reader1 | Reader2 = Reader1(path) if is_ros1 else _indexed_mcap(Reader2(_storage_path(path)))
            reader.open()
            if not isinstance(reader, Reader1) or _index_agrees(reader):
                return reader, False
            reader.close()
            cause = "its index of messages disagrees with its chunk counts"
        except ReplayError:
            raise
        except Exception as err:  # noqa: BLE001 - rosbags raises many kinds; all mean unreadable
            cause = f"rosbags cannot open it: {type(err).__name__}: {err}"
    try:
        return salvage_reader(path, is_ros1, cause), True
    except Exception as err:  # noqa: BLE001 - the salvage reader cannot read it either
        raise ReplayError(f"{path}: cannot open bag ({cause}; no salvage: {err})") from err


def _index_agrees(reader: Reader1) -> bool:
    """Whether a ROS 1 bag's message index (rosbags reads messages through it) agrees with its
    chunk infos: as many entries as they count, each within its chunk's time span. A damaged
    index record silently loses its chunk, or puts a message out of order."""
    counted = sum(sum(info.connection_counts.values()) for info in reader.chunk_infos)
    if counted != sum(len(index) for index in reader.indexes.values()):
        return False
    spans = {info.pos: (info.start_time, info.end_time) for info in reader.chunk_infos}
    for index in reader.indexes.values():
        for entry in index:
            start, end = spans.get(entry.chunk_pos, (1, 0))  # no chunk: an empty span
            if not start <= entry.time < end:
                return False
    return True


def _regular(path: Path) -> None:
    """ReplayError for a FIFO, socket or device given as a bag (or inside a bag directory):
    reading one would block or never end."""
    odd = [path] if not (path.is_file() or path.is_dir()) else []
    if path.is_dir():
        odd = [p for p in sorted(path.iterdir()) if (p.name == "metadata.yaml" or p.suffix in (".mcap", ".db3"))
               and not p.is_file()]
    if odd:
        raise ReplayError(f"{odd[0]}: not a regular file (a FIFO, socket or device); give a bag file or directory")


def open_bag(path: Path, stack: ExitStack) -> BagSource:
    """Open one bag (a .bag file, a rosbag2 directory, or a bare .mcap/.db3 file)."""
    if not path.exists():
        raise ReplayError(f"{path}: no such bag")
    _regular(path)
    is_ros1 = path.is_file() and path.suffix == ".bag"
    reader, salvaged = _open_reader(path, is_ros1)
    try:
        store, undecodable = _typestore_for(reader, is_ros1)
    except BaseException:
        reader.close()
        raise
    bag = BagSource(path, reader, store, is_ros1, undecodable, salvaged=salvaged)
    stack.callback(bag.close)  # whichever reader it has then: a salvage may replace the first
    return bag


class BagSet:
    """Several bags read as one stream, merged by receive time."""

    def __init__(self, paths: list[Path]) -> None:
        if not paths:
            raise ReplayError("no bag given")
        self._stack = ExitStack()
        try:
            self.bags = [open_bag(Path(p), self._stack) for p in paths]
        except BaseException:
            self._stack.close()
            raise

    def __enter__(self) -> BagSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def topic_types(self) -> dict[str, str]:
        types: dict[str, str] = {}
        for bag in self.bags:
            types.update(bag.topic_types())
        return types

    def undecodable(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for bag in self.bags:
            found.update(bag.undecodable)
        return found

    def problems(self) -> list[str]:
        return [p for bag in self.bags for p in bag.problems] + [s.describe() for s in self._salvages()]

    def salvage(self) -> list[dict[str, Any]]:
        """What each damaged bag file gave and lost (summary.json's "salvage")."""
        return [s.as_dict() for s in self._salvages()]

    def _salvages(self) -> list[Salvage]:
        return [s for bag in self.bags for s in bag.salvages()]

    def message_count(self, topics: Collection[str]) -> int:
        return sum(c.msgcount for bag in self.bags for c in bag.connections(topics))

    def messages(self, topics: Collection[str], start_ns: int | None = None) -> Iterator[RawMessage]:
        """Messages on `topics` from every bag, merged by receive time, from `start_ns` on (None: all)."""
        streams = [bag.messages(topics, start_ns) for bag in self.bags]
        if len(streams) == 1:
            return streams[0]  # nothing to merge; heapq.merge costs a microsecond per message
        return heapq.merge(*streams, key=lambda m: m.receive_ns)

    def first(self, topic: str) -> Any | None:
        """The first decodable message on `topic`, or None."""
        for raw in self.messages([topic]):
            return raw.bag.deserialize(raw.data, raw.msgtype)
        return None
