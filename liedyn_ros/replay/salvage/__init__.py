"""Reading what is intact in a damaged bag: a recording killed mid-write, a file cut by a full
disk, a block damaged on disk. One reader per format (mcap, sqlite, ros1), each walking the
file once to find its readable messages and their damage, then serving them in receive-time
order a block at a time; `Salvage` accounts for what was read and what was lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rosbags.rosbag2 import Reader as Reader2

from .mcap import SalvageMcapReader
from .report import Salvage
from .ros1 import SalvageRos1Reader
from .sqlite import SalvageSqliteReader, bytes_short

__all__ = ["Salvage", "known_damage", "salvage_reader"]


def known_damage(path: Path) -> str | None:
    """Why a rosbag2 bag must be salvaged before any reader tries it: a .db3 cut short, which
    SQLite would read with zeros in place of the missing bytes."""
    try:
        storage = _storage_file(path)
    except ValueError:
        return None
    short = bytes_short(storage) if storage.suffix == ".db3" else 0
    return f"the file is cut: {short} bytes short of its pages" if short else None


def salvage_reader(path: Path, is_ros1: bool, cause: str) -> Any:
    """An open salvage reader of the bag at `path` (a ROS 1 .bag, a .mcap or .db3 file, or a
    rosbag2 directory of one such file), with the interface of rosbags' reader; `cause` says
    why it is needed. Raises when even it cannot read the file (not a bag, no topics table)."""
    if is_ros1:
        reader: Any = SalvageRos1Reader(path)
        accounts = reader
    else:
        storage = _storage_file(path)
        reader = Reader2(storage)
        plugin = SalvageMcapReader if storage.suffix == ".mcap" else SalvageSqliteReader
        reader.storage = accounts = plugin(storage, expected_counts(storage))
    accounts.salvage.cause = cause
    reader.open()
    return reader


def _storage_file(path: Path) -> Path:
    if path.is_file():
        return path
    files = sorted(p for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
    if len(files) != 1:
        raise ValueError(f"{path}: {len(files)} storage files; a salvage reads one")
    return files[0]


def expected_counts(storage: Path) -> dict[str, int] | None:
    """Messages by topic that the bag's metadata.yaml says `storage` holds (rosbag2 writes it
    when a recording ends), when it describes that one file."""
    from ruamel.yaml import YAML

    try:
        info = YAML(typ="safe", pure=True).load((storage.parent / "metadata.yaml").read_text())
        info = info["rosbag2_bagfile_information"]
        if [Path(p).name for p in info["relative_file_paths"]] != [storage.name]:
            return None
        return {t["topic_metadata"]["name"]: int(t["message_count"]) for t in info["topics_with_message_count"]}
    except Exception:  # noqa: BLE001 - no metadata, or not one that can be trusted: counts unknown
        return None
