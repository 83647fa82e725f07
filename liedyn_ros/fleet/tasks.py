"""One Dask task per bag: the replay of that bag alone into DIR/bags/<name>/, read back as rows.

A task runs `liedyn_ros.replay.replay` with the options `liedyn-replay` would use for the bag,
so the per-bag numbers are those of replaying it alone; its rows are read from the summary.json
that replay wrote. A bag whose replay fails returns an error row instead, so the others go on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from liedyn_ros.replay import ReplayError, ReplayOptions, replay
from liedyn_ros.replay import outdir
from liedyn_ros.replay.run import replay_parameters

from .discover import BagEntry
from .identification import save_equations

EDGE_BYTES = 1 << 20  # the content key reads this much at each end of each file
STAMPS_CSV = "feedforward_torque.csv"  # one row per processed sample, stamp first: its last row ends the bag


@dataclasses.dataclass(frozen=True)
class BagTask:
    entry: BagEntry
    key: str  # content_key of the bag when the task was made
    name: str  # DIR/bags/<name>/
    options: ReplayOptions


class BagRows(NamedTuple):
    """One `bags` row and the bag's `joint_stats` rows (docs/contract.md)."""

    bag: dict[str, Any]
    joints: list[dict[str, Any]]


def content_key(path: Path) -> str:
    """SHA-256 over each file of the bag (a rosbag2 directory's files in name order): its name
    relative to the bag, its size, its first and last MiB. A bag rewritten, grown or truncated
    changes it; one copied or touched (new mtime, same bytes) does not. Cheap on a large bag; a
    change confined to the middle of a file of more than 2 MiB with the same size is missed."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.relative_to(path) if path.is_dir() else file.name}\0{size}\0".encode())
        with file.open("rb") as f:
            digest.update(f.read(EDGE_BYTES))
            if size > EDGE_BYTES:
                f.seek(max(EDGE_BYTES, size - EDGE_BYTES))
                digest.update(f.read())
    return digest.hexdigest()


def bag_name(path: Path) -> str:
    """The bag's directory under DIR/bags/: its name and a hash of its full path, the same on
    every run (a changed bag's replay replaces its earlier one) and distinct for two bags of one name."""
    stem = path.name.removesuffix(path.suffix) if path.is_file() else path.name
    return f"{stem}-{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def make_task(entry: BagEntry, out: Path, options: ReplayOptions) -> BagTask:
    """The bag's task; the manifest's urdf, params and identify, where given, over the command line's. With
    --identify the bag is replayed whole as one recording of a pool (identification.pooled)."""
    name = bag_name(entry.path)
    identify = entry.identify or options.identify
    bag_options = dataclasses.replace(options, out=out / "bags" / name, urdf=entry.urdf or options.urdf,
                                      params=entry.params or options.params, progress=False, identify=identify,
                                      identify_role="fit" if identify else "split")
    return BagTask(entry, _key(entry.path, bag_options), name, bag_options)


def _key(path: Path, options: ReplayOptions) -> str:
    """The bag's content key, and the options and the URDF and parameter files it is replayed
    with: a re-run with other settings, or an edited --params, replays it again."""
    digest = hashlib.sha256(content_key(path).encode())
    digest.update(repr(options).encode())
    for file in (options.urdf, options.params):
        digest.update(b"\0" if file is None else content_key(file).encode())
    return digest.hexdigest()


def run_bag(task: BagTask) -> BagRows:
    """The task on a worker: replay the bag, return its rows (an error row if it fails)."""
    try:
        report = replay([task.entry.path], task.options)
        summary = json.loads((task.options.out / "summary.json").read_text())
        if report.identifier is not None:
            names = report.identifier.problem.model.joint_names
            label = replay_parameters(task.options, names).values.get("payload_mass")
            save_equations(task.options.out, report.identifier, label)
            outdir.record(task.options.out)  # the next replay into it clears the file too
    except ReplayError as err:
        return error_rows(task, str(err))
    except Exception as err:  # noqa: BLE001 -- whatever breaks one bag is that bag's row, not the run's end
        return error_rows(task, f"{type(err).__name__}: {err}")
    return summary_rows(task, summary)


def error_rows(task: BagTask, message: str) -> BagRows:
    return BagRows(_bag_row(task, status="error", error=message), [])


def summary_rows(task: BagTask, summary: dict[str, Any]) -> BagRows:
    """The rows of a replay's summary.json."""
    bag = _bag_row(task, status="ok", start_ns=summary["first_stamp_ns"],
                   end_ns=_last_stamp(task.options.out / STAMPS_CSV), samples=summary["samples"],
                   salvaged=bool(summary.get("salvage")))
    events: dict[str, int] = {}
    for event in summary["collisions"]:
        events[event["joint"]] = events.get(event["joint"], 0) + 1
    joints = [{"bag": bag["bag"], "robot": bag["robot"], "joint": joint,
               "torque_residual_rms": _stat(row, "torque_residual_", "rms"),
               "torque_residual_max_abs": _stat(row, "torque_residual_", "max_abs"),
               "effort_rms": _stat(row, "effort_", "rms"),  # summary.json has it with contacts only
               "collisions": events.get(joint, 0)}
              for joint, row in summary["joints"].items()]
    return BagRows(bag, joints)


def _bag_row(task: BagTask, status: str, error: str | None = None, start_ns: int | None = None,
             end_ns: int | None = None, samples: int = 0, salvaged: bool = False) -> dict[str, Any]:
    return {"bag": str(task.entry.path), "robot": task.entry.robot, "start_ns": start_ns, "end_ns": end_ns,
            "samples": samples, "status": status, "error": error, "salvaged": salvaged,
            "key": task.key, "name": task.name, "time": task.entry.time}


def _stat(row: dict[str, Any], prefix: str, stat: str) -> float | None:
    return next((v[stat] for k, v in row.items() if k.startswith(prefix)), None)


def _last_stamp(csv_path: Path) -> int | None:
    """The stamp of the CSV's last row (its first column), read from the file's end."""
    with csv_path.open("rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 65536))
        last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return None if last.startswith(b"stamp_ns") else int(last.split(b",", 1)[0])
