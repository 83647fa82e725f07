"""Pooled identification per robot and period (`--identify`, `--period`).

Each bag's task replays it whole as one recording of several (the replay's identify_role "fit")
and keeps what it adds, its normal equations, in DIR/bags/<name>/equations.pkl. Here the bags of
one robot and period are pooled by the replay's own `identify.pool`: their sums merged, the last
recordings by start time held out whole to validate (`identify.validation_bags`, by recording,
never by row), solved, checked for plausibility against the URDF and the recordings' largest
efforts, and only then written as DIR/identified/<robot>/<period>/identified.yaml; a refused fit
writes no file and says why in its rows.
"""

from __future__ import annotations

import json
import pickle
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from liedyn_ros.replay import ReplayError
from liedyn_ros.replay.identify import Identifier, pool, validation_bags

EQUATIONS = "equations.pkl"
POOL_CACHE = "pool.json"  # a period's rows and the content keys of the bags they pooled
PERIODS = ("day", "week", "month", "all")


def save_equations(folder: Path, identifier: Identifier, payload_label: float | None) -> None:
    """A bag's normal equations, with the payload mass its parameters say it carries."""
    (folder / EQUATIONS).write_bytes(pickle.dumps({"identifier": identifier, "payload_label": payload_label}))


def period_of(start_ns: int, period: str) -> str:
    """The period a bag starting at `start_ns` (UTC) belongs to: 2026-11-25, 2026-W48, 2026-11 or all."""
    day = datetime.fromtimestamp(start_ns / 1e9, timezone.utc).date()
    if period == "day":
        return day.isoformat()
    if period == "week":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    if period == "month":
        return f"{day.year}-{day.month:02d}"
    return "all"


def pooled(out: Path, bags: Sequence[dict[str, Any]], period: str, kept: dict[str, bool] | None = None
           ) -> list[dict[str, Any]]:
    """The `identification` rows: one per robot, period and joint, from the bags replayed with
    --identify (status ok, equations kept). `kept`: bag key -> whether its replay kept its
    equations, of earlier runs (store.equations_kept), consulted and updated: only the bags whose
    key it lacks (replayed since) are looked for on disk, not each of a fleet's 240,000 bags every
    run. A period solved again reads its bags' files, and leaves out one gone since (deleted by hand)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for bag in bags:
        if bag["status"] != "ok":
            continue
        has = None if kept is None else kept.get(bag["key"])
        if has is None:
            has = _saved(out, bag)
            if kept is not None:
                kept[bag["key"]] = has
        if has:
            groups[(bag["robot"], period_of(bag["start_ns"], period))].append(bag)
    if kept is not None:  # bags no longer in the store
        for key in kept.keys() - {bag["key"] for bag in bags if bag["status"] == "ok"}:
            del kept[key]
    rows: list[dict[str, Any]] = []
    for (robot, key), members in sorted(groups.items()):
        members.sort(key=lambda b: (b["start_ns"], b["bag"]))
        cached = _cached(out / "identified" / robot / key, members)
        if cached is not None:
            rows += cached
            continue
        present = []
        for bag in members:
            if _saved(out, bag):
                present.append(bag)
            elif kept is not None:
                kept[bag["key"]] = False
        if present:
            rows += _period_rows(out, robot, key, present)
    return rows


def _saved(out: Path, bag: dict[str, Any]) -> bool:
    return (out / "bags" / bag["name"] / EQUATIONS).is_file()


def _cached(folder: Path, members: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The period's rows of an earlier run when its bags (content keys) are the same, else None
    (and the rows computed next are kept for the following run)."""
    cache = folder / POOL_CACHE
    keys = [b["key"] for b in members]
    try:
        kept = json.loads(cache.read_text())
    except (OSError, ValueError):
        return None
    return kept["rows"] if kept.get("keys") == keys else None


def _period_rows(out: Path, robot: str, key: str, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    saved = [pickle.loads((out / "bags" / b["name"] / EQUATIONS).read_bytes()) for b in members]
    parts: list[Identifier] = [s["identifier"] for s in saved]
    names = list(parts[0].problem.model.joint_names)
    labels = {s["payload_label"] for s in saved}
    base = {"robot": robot, "period": key, "start_ns": members[0]["start_ns"],
            "end_ns": max(b["end_ns"] or b["start_ns"] for b in members),
            "payload_label": labels.pop() if len(labels) == 1 else None,
            "payload_link": parts[0].problem.payload_link}
    folder = out / "identified" / robot / key
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if len(parts) < 2:
            raise ReplayError(f"one bag in {robot}'s period {key}: a pooled fit needs two or more (the later ones "
                              "validate); choose a longer --period")
        held = validation_bags(len(parts))
        parts = [p.held_out() if h else p for p, h in zip(parts, held)]
        section = pool(parts, [b["bag"] for b in members], folder, plots=False)
    except (ReplayError, ValueError) as err:  # one recording, or bags of different robots' models
        (folder / "identified.yaml").unlink(missing_ok=True)
        return [base | {"joint": j, "status": "error", "error": str(err), "fit_bags": len(parts),
                        "validation_bags": 0} for j in names]
    rows = _rows(section, base, names, folder)
    (folder / POOL_CACHE).write_text(json.dumps({"keys": [b["key"] for b in members], "rows": rows}))
    return rows


def _rows(section: dict[str, Any], base: dict[str, Any], names: list[str], folder: Path) -> list[dict[str, Any]]:
    """The period's rows, one per joint, from the pool's summary section."""
    value = {p["name"]: (p["value"], p["std"]) for p in section.get("parameters", ())}
    written = folder / "identified.yaml"
    base |= {"status": "refused" if "error" in section else "ok", "error": section.get("error"),
             "fit_bags": len(section["fit_bags"]), "validation_bags": len(section["validation_bags"]),
             "parameter_file": str(written) if written.is_file() else None,
             "payload_mass": value.get("payload.m", (None,))[0], "payload_mass_std": value.get("payload.m", (0, None))[1]}
    before, after = section.get("validation_rms_before", {}), section.get("validation_rms_after", {})
    return [base | {"joint": j, "coulomb": value.get(f"{j}.coulomb", (None,))[0],
                    "coulomb_std": value.get(f"{j}.coulomb", (0, None))[1],
                    "viscous": value.get(f"{j}.viscous", (None,))[0],
                    "validation_rms_before": before.get(j), "validation_rms_after": after.get(j)}
            for j in names]
