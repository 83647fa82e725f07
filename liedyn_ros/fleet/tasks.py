"""One Dask task per bag: the replay of that bag alone into DIR/bags/<name>/, read back as rows.

A task runs `liedyn_ros.replay.replay` with the options `liedyn-replay` would use for the bag,
so the per-bag numbers are those of replaying it alone; its rows are read from the summary.json
that replay wrote. A bag whose replay fails returns an error row instead, so the others go on.

With --split-seconds S a bag longer than S is cut by time into equal pieces of at most S, each
a task of its own (replay.Piece: a warm-up before its cut, events from the cut) into
DIR/bags/<name>/piece-NNN/; `merge_pieces` then makes of their summaries one summary.json, one
equations.pkl and one set of rows, as of the bag replayed whole (docs/fleet.md, "Long bags").
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import pickle
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from liedyn_ros.replay import ReplayError, ReplayOptions, outdir, replay
from liedyn_ros.replay.bagio import BagSet
from liedyn_ros.replay.run import Piece, replay_parameters

from .discover import BagEntry
from .identification import EQUATIONS, save_equations

EDGE_BYTES = 1 << 20  # the content key reads this much at each end of each file
STAMPS_CSV = "feedforward_torque.csv"  # one row per processed sample, stamp first: its last row ends the bag


@dataclasses.dataclass(frozen=True)
class BagTask:
    entry: BagEntry
    key: str  # content_key of the bag when the task was made
    name: str  # DIR/bags/<name>/
    options: ReplayOptions
    pieces: tuple[Piece, ...] = ()  # the bag cut by time (split): one task each; (): replayed whole
    split_seconds: float = 0.0  # --split-seconds (the manifest's over the command line's); 0: whole, uncut


class BagRows(NamedTuple):
    """One `bags` row and the bag's `joint_stats` rows (docs/contract.md)."""

    bag: dict[str, Any]
    joints: list[dict[str, Any]]


def content_key(path: Path, known: dict[str, tuple[str, str]] | None = None) -> str:
    """SHA-256 over each file of the bag (a rosbag2 directory's files in name order): its name
    relative to the bag, its size, its first and last MiB. A bag rewritten, grown or truncated
    changes it; one copied or touched (new mtime, same bytes) does not. Cheap on a large bag; a
    change confined to the middle of a file of more than 2 MiB with the same size is missed.
    `known`: path -> (files' signature, key) of earlier runs (store.content_keys), consulted and
    updated: a bag whose files have the names, sizes, modification times and inodes of its
    signature keeps its key unread (reading 2 MiB of each of 240,000 bags was 25 minutes a
    re-run); a rewrite that keeps all four is missed."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    names = [str(file.relative_to(path)) if path.is_dir() else file.name for file in files]
    stats = [file.stat() for file in files]
    signature = hashlib.sha1("\0".join(f"{n}\0{s.st_size}\0{s.st_mtime_ns}\0{s.st_ino}"
                                        for n, s in zip(names, stats)).encode()).hexdigest()
    if known is not None and known.get(str(path), ("",))[0] == signature:
        return known[str(path)][1]
    digest = hashlib.sha256()
    for file, name, stat in zip(files, names, stats):
        size = stat.st_size
        digest.update(f"{name}\0{size}\0".encode())
        with file.open("rb") as f:
            digest.update(f.read(EDGE_BYTES))
            if size > EDGE_BYTES:
                f.seek(max(EDGE_BYTES, size - EDGE_BYTES))
                digest.update(f.read())
    if known is not None:
        known[str(path)] = (signature, digest.hexdigest())
    return digest.hexdigest()


def bag_name(path: Path) -> str:
    """The bag's directory under DIR/bags/: its name and a hash of its full path, the same on
    every run (a changed bag's replay replaces its earlier one) and distinct for two bags of one name."""
    stem = path.name.removesuffix(path.suffix) if path.is_file() else path.name
    return f"{stem}-{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def make_task(entry: BagEntry, out: Path, options: ReplayOptions, known: dict[str, tuple[str, str]] | None = None,
              split_seconds: float | None = None) -> BagTask:
    """The bag's task; the manifest's urdf, params, identify and split_seconds, where given, over the
    command line's (`split_seconds`: --split-seconds). With --identify the bag is replayed whole as one
    recording of a pool (identification.pooled). `known`: content keys of earlier runs (content_key).

    The key holds S (--split-seconds) whether or not the bag turns out long enough to cut (`split`),
    so that what is new is decided without opening a bag: a re-run with another S replays every
    bag again, one with the same S none unchanged."""
    name = bag_name(entry.path)
    identify = entry.identify or options.identify
    bag_options = dataclasses.replace(options, out=out / "bags" / name, urdf=entry.urdf or options.urdf,
                                      params=entry.params or options.params, progress=False, identify=identify,
                                      identify_role="fit" if identify else "split")
    seconds = (split_seconds if entry.split_seconds is None else entry.split_seconds) or 0.0
    key = _key(entry.path, bag_options, known)
    if seconds:  # the formula of the versions that keyed only the bags they cut: those keep their key
        key = hashlib.sha256(f"{key}\0split {seconds!r}".encode()).hexdigest()
    return BagTask(entry, key, name, bag_options, split_seconds=seconds)


def _key(path: Path, options: ReplayOptions, known: dict[str, tuple[str, str]] | None) -> str:
    """The bag's content key, and the options and the URDF and parameter files it is replayed
    with: a re-run with other settings, or an edited --params, replays it again."""
    digest = hashlib.sha256(content_key(path, known).encode())
    digest.update(repr(options).encode())
    for file in (options.urdf, options.params):
        digest.update(b"\0" if file is None else content_key(file, known).encode())
    return digest.hexdigest()


def split(task: BagTask) -> BagTask:
    """The task cut into the fewest pieces of equal length, at most its `split_seconds`, when the bag
    lasts longer (the span of its receive times; the bag is opened to read it, so only a task to be
    run is split). A bag that cannot be opened, or only by salvage, stays whole."""
    seconds = task.split_seconds
    if not seconds:
        return task
    try:
        with BagSet([task.entry.path]) as bags:
            if any(bag.salvaged for bag in bags.bags):
                return task
            duration = max(bag.reader.duration for bag in bags.bags) * 1e-9
    except Exception:  # noqa: BLE001 -- the whole bag's replay says what is wrong with it
        return task
    count = math.ceil(duration / seconds)
    if count < 2:
        return task
    cuts = [None] + [k * duration / count for k in range(1, count)] + [None]  # equal: no piece last alone
    return dataclasses.replace(task, pieces=tuple(Piece(a, b) for a, b in itertools.pairwise(cuts)))


def piece_tasks(task: BagTask) -> list[BagTask]:
    """One task per piece, replayed into DIR/bags/<name>/piece-NNN/ (DIR/bags/<name>/ claimed
    first, replay.outdir.claim: an earlier replay's or merge's files cleared)."""
    return [dataclasses.replace(task, options=dataclasses.replace(task.options, out=_piece_dir(task, k), piece=piece),
                                pieces=()) for k, piece in enumerate(task.pieces)]


def unsplit(task: BagTask) -> BagTask:
    """The bag's task replayed whole, its pieces' directories removed (a replay claims DIR/bags/<name>/)."""
    for k in range(len(task.pieces)):
        shutil.rmtree(_piece_dir(task, k), ignore_errors=True)
    return dataclasses.replace(task, pieces=())


def _piece_dir(task: BagTask, k: int) -> Path:
    return task.options.out / f"piece-{k:03d}"


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


def summary_rows(task: BagTask, summary: dict[str, Any], stamps_csv: Path | None = None) -> BagRows:
    """The rows of a replay's summary.json (`stamps_csv`: the CSV whose last row ends the bag,
    by default the replay's own)."""
    bag = _bag_row(task, status="ok", start_ns=summary["first_stamp_ns"],
                   end_ns=_last_stamp(stamps_csv or task.options.out / STAMPS_CSV), samples=summary["samples"],
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


def merge_pieces(task: BagTask, rows: Sequence[BagRows]) -> BagRows | None:
    """The rows of the bag from its pieces' (in order), and its summary.json and equations.pkl in
    DIR/bags/<name>/, as of the bag replayed whole; None when a piece failed or was salvaged
    (the bag is then replayed whole)."""
    if any(r.bag["status"] != "ok" or r.bag["salvaged"] for r in rows):
        return None
    folders = [_piece_dir(task, k) for k in range(len(task.pieces))]
    summaries = [json.loads((f / "summary.json").read_text()) for f in folders]
    summary = merge_summaries(summaries)
    summary["pieces"] = [{"folder": f.name, "start_ns": s["piece"]["start_ns"], "end_ns": s["piece"]["end_ns"],
                          "samples": s["samples"], "elapsed_s": s["elapsed_s"]} for f, s in zip(folders, summaries)]
    (task.options.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    saved = [f / EQUATIONS for f in folders]
    if all(path.is_file() for path in saved):
        parts = [pickle.loads(path.read_bytes()) for path in saved]
        pooled = parts[0]["identifier"]
        for part in parts[1:]:
            pooled.merge(part["identifier"])  # the normal equations summed
        save_equations(task.options.out, pooled, parts[0]["payload_label"])
    outdir.record(task.options.out)  # a later whole replay into it clears the pieces too
    last = max((k for k, s in enumerate(summaries) if s["samples"]), default=0)  # later ones: no joint states
    return summary_rows(task, summary, folders[last] / STAMPS_CSV)


def merge_summaries(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One bag's summary from its pieces' (in time order): counts and extremes added up, RMS and
    means weighted by their counts, the events joined across the cuts (merge_events), the
    contacts' counts added, the hints and problems of every piece with samples, each once (a
    piece without any, after the joint states ended, would only say so)."""
    first = parts[0]
    held = [p for p in parts if p["samples"]]
    joints = {name: {key: stat if key == "type" else _merge_stat([p["joints"][name][key] for p in parts])
                     for key, stat in row.items()}
              for name, row in first["joints"].items()}
    merged = {"samples": sum(p["samples"] for p in parts), "first_stamp_ns": first["first_stamp_ns"],
              "joints": joints, "external_torque_observer": first["external_torque_observer"],
              "collisions": merge_events(parts),
              "hints": _each_once(h for p in held for h in p["hints"]),
              "problems": _each_once(m for p in held for m in p["problems"]),
              "elapsed_s": sum(p["elapsed_s"] for p in parts)}
    if "contacts" in first:
        merged["contacts"] = {
            "links": {link: {key: sum(p["contacts"]["links"][link][key] for p in parts) for key in counts}
                      for link, counts in first["contacts"]["links"].items()},
            "unbalanced_samples": sum(p["contacts"]["unbalanced_samples"] for p in parts)}
    return merged


def _merge_stat(stats: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """summary.Running's statistics of consecutive pieces as of one pass over all: RMS from the
    sums of squares (count x RMS^2), the mean from the sums, the largest magnitude."""
    counted = [s for s in stats if s["count"]]
    n = sum(s["count"] for s in counted)
    if not n:
        return {"count": 0, "rms": None, "mean": None, "max_abs": None}
    return {"count": n, "rms": math.sqrt(sum(s["count"] * s["rms"] ** 2 for s in counted) / n),
            "mean": sum(s["count"] * s["mean"] for s in counted) / n,
            "max_abs": max(s["max_abs"] for s in counted)}


def merge_events(parts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The collision events of consecutive pieces as of one pass over all. Each piece looks for
    events from its cut on, with its observer warmed up; an event still open at a piece's end
    goes on in the whole replay until the first sample of the next pieces with every watched
    coordinate below the release (its "piece" first_quiet_ns), and the next piece's own event
    that starts before that sample is the same event (it ends there too): joined, its peak the
    larger against the thresholds, its start and kind the first piece's."""
    merged: list[dict[str, Any]] = []
    open_event: dict[str, Any] | None = None
    for part in parts:
        events = list(part["collisions"])
        threshold = part["piece"]["thresholds"]
        if open_event is not None:
            quiet = part["piece"]["first_quiet_ns"]
            while events and (quiet is None or events[0]["start_ns"] < quiet):
                event = events.pop(0)
                if abs(event["peak"]) / threshold[event["joint"]] > abs(open_event["peak"]) / threshold[open_event["joint"]]:
                    open_event = open_event | {"joint": event["joint"], "peak": event["peak"]}
            if quiet is None:  # above the release all through this piece: it goes on into the next
                continue
            merged.append(open_event | {"end_ns": quiet})
            open_event = None
        if events and events[-1]["end_ns"] is None:
            open_event = events.pop()
        merged += events
    return merged + ([open_event] if open_event is not None else [])


def _each_once(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
