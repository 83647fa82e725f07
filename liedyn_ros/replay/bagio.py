"""Reading ROS 1 and rosbag2 (sqlite3, mcap) bags with `rosbags`, no ROS install needed.

Every bag gets its own reader and typestore, so ROS 1 and ROS 2 bags can be replayed
together; their messages are merged by receive time. Message types that cannot be decoded
(for example control_msgs, which is not in the standard type set) are skipped, and a bag
that breaks in the middle yields what came before the damage plus a problem note.
"""

from __future__ import annotations

import heapq
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rosbags.interfaces import MessageDefinitionFormat
from rosbags.rosbag1 import Reader as Reader1
from rosbags.rosbag2 import Reader as Reader2
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

from .errors import ReplayError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator

    from rosbags.interfaces import Connection
    from rosbags.typesys.store import Typestore

# rosbag2 bags before Iron do not embed message definitions; these stores supply them.
_DISTRO_STORES = {
    "humble": Stores.ROS2_HUMBLE,
    "iron": Stores.ROS2_IRON,
    "jazzy": Stores.ROS2_JAZZY,
}


@dataclass(frozen=True)
class RawMessage:
    """One serialized message, as read from a bag."""

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
        raise ReplayError(
            f"{path}: no metadata.yaml and {len(files)} storage files; pass the files instead"
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


def open_bag(path: Path, stack: ExitStack) -> BagSource:
    """Open one bag (a .bag file, a rosbag2 directory, or a bare .mcap/.db3 file)."""
    if not path.exists():
        raise ReplayError(f"{path}: no such bag")
    is_ros1 = path.is_file() and path.suffix == ".bag"
    try:
        reader: Reader1 | Reader2 = Reader1(path) if is_ros1 else Reader2(_storage_path(path))
        reader.open()
    except ReplayError:
        raise
    except Exception as err:  # noqa: BLE001 - rosbags raises many kinds; all mean unreadable
        raise ReplayError(f"{path}: cannot open bag ({type(err).__name__}: {err})") from err
    stack.callback(reader.close)
    store, undecodable = _typestore_for(reader, is_ros1)
    return BagSource(path, reader, store, is_ros1, undecodable)


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
        return heapq.merge(*streams, key=lambda m: m.receive_ns)

    def first(self, topic: str) -> Any | None:
        """The first decodable message on `topic`, or None."""
        for raw in self.messages([topic]):
            return raw.bag.deserialize(raw.data, raw.msgtype)
        return None
