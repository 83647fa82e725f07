"""Reading ROS 1 and rosbag2 (sqlite3, mcap) bags with `rosbags`, no ROS install needed.

Every bag gets its own reader and typestore, so ROS 1 and ROS 2 bags can be replayed
together; their messages are merged by receive time. Message types that cannot be decoded
(for example control_msgs, which is not in the standard type set) are skipped, and a bag
that breaks in the middle yields what came before the damage plus a problem note.
"""

from __future__ import annotations

import heapq
import struct
from operator import itemgetter
from contextlib import ExitStack
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rosbags.interfaces import Connection, ConnectionExtRosbag2, MessageDefinitionFormat
from rosbags.rosbag1 import Reader as Reader1
from rosbags.rosbag2 import Reader as Reader2
from rosbags.rosbag2.errors import ReaderError as Reader2Error
from rosbags.rosbag2.reader import DirectoryReader
from rosbags.rosbag2.storage_mcap import (
    McapReader,
    Schema,
    Statistics,
    decompress,
    get_msgdef,
    get_qos,
    read_bytes,
    read_string,
)
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

from .errors import ReplayError

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
    reader: Reader1 | Reader2
    typestore: Typestore
    is_ros1: bool
    undecodable: dict[str, str] = field(default_factory=dict)  # msgtype -> reason
    problems: list[str] = field(default_factory=list)

    def connections(self, topics: Collection[str]) -> list[Connection]:
        return [c for c in self.reader.connections if c.topic in topics]

    def topic_types(self) -> dict[str, str]:
        return {c.topic: c.msgtype for c in self.reader.connections}

    def deserialize(self, data: bytes | memoryview, msgtype: str) -> Any:
        if self.is_ros1:
            return self.typestore.deserialize_ros1(data, msgtype)
        return self.typestore.deserialize_cdr(data, msgtype)

    def messages(self, topics: Collection[str]) -> Iterator[RawMessage]:
        """Messages on `topics` in receive order; stops at damage and notes it."""
        conns = [c for c in self.connections(topics) if c.msgtype not in self.undecodable]
        if not conns:
            return
        count = 0
        try:
            for conn, stamp, data in self.reader.messages(connections=conns):
                yield RawMessage(conn.topic, conn.msgtype, stamp, data, self)
                count += 1
        except Exception as err:  # noqa: BLE001 - any storage failure means damage here
            self.problems.append(
                f"{self.path}: damaged after {count} messages on {sorted(topics)}; "
                f"kept what came before ({type(err).__name__}: {err})"
            )


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


def _typestore_for(reader: Reader1 | Reader2, is_ros1: bool) -> tuple[Typestore, dict[str, str]]:
    """A typestore with every definition the bag embeds, on top of the standard set.

    Returns the store and the message types it cannot decode, with the reason.
    """
    if is_ros1:
        store = get_typestore(Stores.ROS1_NOETIC)
    else:
        distro = (getattr(reader, "ros_distro", None) or "humble").lower()
        store = get_typestore(_DISTRO_STORES.get(distro, Stores.ROS2_HUMBLE))
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


class SalvageMcapReader(McapReader):
    """Reads an MCAP file whose end is missing (a recording that was killed): no footer, no
    summary, a cut record. Every complete record is used, including those at the start of a
    cut uncompressed chunk; schemas and channels may sit inside chunks (rosbag2's writer)."""

    def _open(self) -> None:
        assert self.bio
        data = self.bio.read()
        if data[:9] != b"\x89MCAP0\r\n\x01":
            raise Reader2Error("not an MCAP file")
        self._records = list(_mcap_records(data, 17 + int.from_bytes(data[9:17], "little")))
        for op, body in self._records:
            if op == 0x03:
                sid, rest = int.from_bytes(body[:2], "little"), BytesIO(body[2:])
                self.schemas[sid] = Schema(sid, read_string(rest), read_string(rest), read_string(rest))
        for op, body in self._records:
            if op == 0x04:
                self._add_channel(body)
        self.statistics = Statistics(0, 0, 0, 0, 0, 0, 0, 0, {})

    def _add_channel(self, body: bytes) -> None:
        rec = BytesIO(body)
        cid, sid = int.from_bytes(rec.read(2), "little"), int.from_bytes(rec.read(2), "little")
        topic, encoding, meta = read_string(rec), read_string(rec), read_bytes(rec)
        schema = self.schemas.get(sid)
        self.connections.append(Connection(
            cid, topic, schema.name if schema else "", get_msgdef(schema), "", 0,
            ConnectionExtRosbag2(encoding, get_qos(meta)), self,
        ))

    def messages(self, connections: Any, start: int | None = None, stop: int | None = None) -> Any:
        wanted = {c.id: c for c in connections}
        found = []
        for op, body in self._records:
            if op == 0x05:
                cid, log_time = int.from_bytes(body[:2], "little"), int.from_bytes(body[6:14], "little")
                if cid in wanted:
                    found.append((log_time, cid, body[22:]))
        found.sort(key=lambda m: m[0])
        return ((wanted[cid], t, data) for t, cid, data in found)


_MESSAGE = struct.Struct("<HIQ")  # Message record after opcode and length: channel, sequence, log time


class IndexedMcapReader(McapReader):
    """rosbags' MCAP reader with a leaner message loop for indexed files (the usual case).

    rosbags walks each chunk through a BytesIO with three reads and a NamedTuple per
    message, about 3 us a message and the largest Python cost left in the replay. Here a
    chunk is decompressed once and its records are walked with `struct.unpack_from` on the
    bytes. As in rosbags, chunks are merged by log time, each one decompressed only when the
    merge reaches its start time (a sentinel comes first), so memory stays bounded.
    """

    def messages(self, connections: Any, start: int | None = None, stop: int | None = None) -> Any:
        if not self.chunks or start is not None or stop is not None:
            yield from super().messages(connections, start, stop)
            return
        wanted = {c.id: c for c in connections}
        sources = [self._chunk_messages(chunk, wanted) for chunk in self.chunks
                   if any(chunk.channel_count.get(cid, 0) for cid in wanted)]
        # Ties in log time between chunks go by chunk offset (never equal), as in rosbags.
        for log_time, _, conn, data in heapq.merge(*sources):
            if conn is not None:
                yield conn, log_time, data

    def _chunk_messages(self, chunk: Any, wanted: dict[int, Connection]) -> Iterator[tuple[int, int, Connection | None, bytes]]:
        yield chunk.message_start_time, 0, None, b""
        assert self.bio
        self.bio.seek(chunk.chunk_start_offset + 9 + 24)  # record header, 3 uint64 -> CRC
        (crc,) = struct.unpack("<I", self.bio.read(4))
        self.bio.seek(chunk.chunk_start_offset + 9 + 40 + len(chunk.compression))
        data = decompress(self.bio.read(chunk.compressed_size), chunk.compression, chunk.uncompressed_size, crc)
        found = []
        pos, end = 0, len(data)
        while pos < end:
            length = int.from_bytes(data[pos + 1 : pos + 9], "little")
            if data[pos] == 0x05:  # Message
                cid, _, log_time = _MESSAGE.unpack_from(data, pos + 9)
                conn = wanted.get(cid)
                if conn is not None:
                    found.append((log_time, chunk.chunk_start_offset, conn, data[pos + 31 : pos + 9 + length]))
            pos += 9 + length
        found.sort(key=itemgetter(0))  # stable: equal log times keep the file order
        yield from found


def _indexed_mcap(reader: Reader2) -> Reader2:
    """`reader` (not yet open) reading its MCAP storage through `IndexedMcapReader`; the
    override is per instance, rosbags itself is left alone."""
    storage = reader.storage
    if isinstance(storage, DirectoryReader):
        storage.STORAGE_PLUGINS = {**DirectoryReader.STORAGE_PLUGINS, "mcap": IndexedMcapReader}  # type: ignore[misc]
    elif type(storage) is McapReader:
        reader.storage = IndexedMcapReader(storage.path)
    return reader


def _mcap_records(data: bytes, pos: int, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(opcode, body) of every complete record from `pos`; descends into chunks, and into
    the complete part of a cut uncompressed chunk."""
    end = len(data) if end is None else end
    while pos + 9 <= end:
        op, size = data[pos], int.from_bytes(data[pos + 1 : pos + 9], "little")
        body = data[pos + 9 : min(pos + 9 + size, end)]
        if op == 0x06:
            yield from _chunk_records(body)
        elif len(body) == size:
            yield op, body
        if len(body) < size:
            return
        pos += 9 + size


def _chunk_records(body: bytes) -> Iterator[tuple[int, bytes]]:
    rec = BytesIO(body)
    rec.seek(24)  # start time, end time, uncompressed size
    (crc,) = struct.unpack("<I", rec.read(4))
    compression = read_string(rec)
    (size,) = struct.unpack("<Q", rec.read(8))
    payload = rec.read(size)
    if compression:
        if len(payload) < size:
            return  # a cut compressed chunk cannot be decoded
        payload = decompress(payload, compression, int.from_bytes(body[16:24], "little"), crc)
    yield from _mcap_records(payload, 0)


def _single_mcap(path: Path) -> Path | None:
    if path.is_file():
        return path if path.suffix == ".mcap" else None
    files = sorted(path.glob("*.mcap")) if path.is_dir() else []
    return files[0] if len(files) == 1 else None


def _open_reader(path: Path, is_ros1: bool) -> tuple[Reader1 | Reader2, str | None]:
    """An open reader, and a problem note when only a salvage read was possible."""
    try:
        reader: Reader1 | Reader2 = Reader1(path) if is_ros1 else _indexed_mcap(Reader2(_storage_path(path)))
        reader.open()
        return reader, None
    except ReplayError:
        raise
    except Exception as err:  # noqa: BLE001 - rosbags raises many kinds; all mean unreadable
        mcap = None if is_ros1 else _single_mcap(path)
        if mcap is None:
            raise ReplayError(f"{path}: cannot open bag ({type(err).__name__}: {err})") from err
        salvage = Reader2(mcap)
        salvage.storage = SalvageMcapReader(mcap)
        try:
            salvage.open()
        except Exception:  # noqa: BLE001
            raise ReplayError(f"{path}: cannot open bag ({type(err).__name__}: {err})") from err
        return salvage, f"{mcap}: damaged MCAP ({err}); read by scanning the file"


def open_bag(path: Path, stack: ExitStack) -> BagSource:
    """Open one bag (a .bag file, a rosbag2 directory, or a bare .mcap/.db3 file)."""
    if not path.exists():
        raise ReplayError(f"{path}: no such bag")
    is_ros1 = path.is_file() and path.suffix == ".bag"
    reader, problem = _open_reader(path, is_ros1)
    stack.callback(reader.close)
    store, undecodable = _typestore_for(reader, is_ros1)
    bag = BagSource(path, reader, store, is_ros1, undecodable)
    if problem:
        bag.problems.append(problem)
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
        return [p for bag in self.bags for p in bag.problems]

    def message_count(self, topics: Collection[str]) -> int:
        return sum(c.msgcount for bag in self.bags for c in bag.connections(topics))

    def messages(self, topics: Collection[str]) -> Iterator[RawMessage]:
        """Messages on `topics` from every bag, merged by receive time."""
        streams = [bag.messages(topics) for bag in self.bags]
        if len(streams) == 1:
            return streams[0]  # nothing to merge; heapq.merge costs a microsecond per message
        return heapq.merge(*streams, key=lambda m: m.receive_ns)

    def first(self, topic: str) -> Any | None:
        """The first decodable message on `topic`, or None."""
        for raw in self.messages([topic]):
            return raw.bag.deserialize(raw.data, raw.msgtype)
        return None
