"""Which bags a fleet run takes and which robot recorded each (docs/contract.md, "Fleet command")."""

from __future__ import annotations

import csv
import glob
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from liedyn_ros.replay.errors import ReplayError

BAG_SUFFIXES = (".bag", ".mcap", ".db3")


@dataclass(frozen=True)
class BagEntry:
    """One bag and what the manifest or the path says about it."""

    path: Path
    robot: str
    urdf: Path | None = None
    params: Path | None = None
    time: str | None = None  # the manifest's time column, as written
    identify: tuple[tuple[str, ...], ...] | None = None  # the manifest's identify column, over --identify
    split_seconds: float | None = None  # the manifest's split_seconds column, over --split-seconds (0: whole)


def bag_paths(inputs: Sequence[Path]) -> list[Path]:
    """Bags named by `inputs`: bag files, rosbag2 directories, directory trees searched for both,
    and glob patterns (for shells that do not expand them). Sorted, each once."""
    found: set[Path] = set()
    for given in inputs:
        matches = [Path(p) for p in sorted(glob.glob(str(given), recursive=True))] if not given.exists() else [given]
        if not matches:
            raise ReplayError(f"{given}: no such bag, directory or match")
        for path in matches:
            found.update(_bags_in(path))
    return sorted(p.resolve() for p in found)


def _bags_in(path: Path) -> list[Path]:
    if path.is_file() or _is_rosbag2(path):
        return [path]
    bags: list[Path] = []
    for child in sorted(path.iterdir()):
        # a rosbag2 directory's .mcap/.db3 files are parts of that bag, not bags of their own
        if child.is_dir() or child.suffix in BAG_SUFFIXES:
            bags += _bags_in(child)
    return bags


def _is_rosbag2(path: Path) -> bool:
    return path.is_dir() and (path / "metadata.yaml").is_file()


def discover(inputs: Sequence[Path], manifest: Path | None = None, robot_pattern: str | None = None
             ) -> list[BagEntry]:
    """The bags of `inputs` with their robot: the manifest's row, else the first group of
    `robot_pattern` searched in the path, else the name of the bag's parent directory."""
    rows = read_manifest(manifest) if manifest is not None else {}
    pattern = _compile(robot_pattern)
    entries = []
    for path in bag_paths(inputs):
        if path in rows:
            entries.append(rows[path])
        elif manifest is not None:
            raise ReplayError(f"{path}: not in --manifest {manifest}")
        else:
            entries.append(BagEntry(path, _robot_from_path(path, pattern, robot_pattern)))
    return entries


def _compile(robot_pattern: str | None) -> re.Pattern[str] | None:
    if robot_pattern is None:
        return None
    try:
        pattern = re.compile(robot_pattern)
    except re.error as err:
        raise ReplayError(f"--robot-pattern {robot_pattern!r}: {err}") from None
    if pattern.groups < 1:
        raise ReplayError(f"--robot-pattern {robot_pattern!r} has no group: the first group is the robot id")
    return pattern


def _robot_from_path(path: Path, pattern: re.Pattern[str] | None, text: str | None) -> str:
    if pattern is None:
        return path.parent.name
    match = pattern.search(str(path))
    if match is None or not match.group(1):
        raise ReplayError(f"{path}: --robot-pattern {text!r} does not match it")
    return match.group(1)


def _seconds(value: str | None, where: str) -> float | None:
    """A manifest's split_seconds: None when empty, else a number of seconds >= 0 (0: whole)."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ReplayError(f"{where}: split_seconds must be a number of seconds >= 0 (0: whole), got {value!r}")
    return seconds


def read_manifest(manifest: Path) -> dict[Path, BagEntry]:
    """CSV with columns bag, robot and optionally urdf, params, time, identify, split_seconds;
    relative paths are taken from the manifest's directory (so a manifest moves with its bags).
    identify: the bag's --identify targets separated by ';', e.g. "friction; payload tool0" (a
    fleet of several kinds of robot: each its payload link). split_seconds: the bag's
    --split-seconds (0: replayed whole; empty: the command line's)."""
    try:
        with manifest.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ReplayError(f"--manifest {manifest}: {err}") from None
    missing = {"bag", "robot"} - set(rows[0] if rows else {})
    if missing:
        raise ReplayError(f"--manifest {manifest}: needs the columns bag and robot (missing {', '.join(sorted(missing))})")
    base = manifest.resolve().parent

    def path(value: str | None) -> Path | None:
        return (base / value).resolve() if value else None

    entries = {}
    for line, row in enumerate(rows, start=2):
        bag = path(row["bag"])
        if bag is None or not row["robot"]:
            raise ReplayError(f"--manifest {manifest}, line {line}: bag and robot must not be empty")
        targets = tuple(tuple(t.split()) for t in (row.get("identify") or "").split(";") if t.strip())
        entries[bag] = BagEntry(bag, row["robot"], path(row.get("urdf")), path(row.get("params")),
                                row.get("time") or None, targets or None,
                                _seconds(row.get("split_seconds"), f"--manifest {manifest}, line {line}"))
    return entries
