"""DIR/report.html: one self-contained page (plotly.js embedded, no server, opens from disk).

Sections: the fleet at a glance (counts, each robot's residual RMS per joint), the flags with a
link to the per-bag plots of the bag where each began, the damaged bags and what was salvaged,
the pooled identifications, and per robot its trends over time: residual RMS and collision rate
per bag, identified friction and payload per period.
"""

from __future__ import annotations

import html
import json
import os
import statistics
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

REPORT = "report.html"
STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:1300px}table{border-collapse:collapse;font-size:13px}"
         "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#eee}"
         "h2{margin-top:1.6em}.none{color:#666}")


def write_report(out: Path, tables: dict[str, list[dict[str, Any]]]) -> Path:
    """The page from the store's tables (as `store.read_table(...).to_pylist()`)."""
    bags, stats, ident, flags = (tables[t] for t in ("bags", "joint_stats", "identification", "flags"))
    figures = [_overview(stats)] + [_trends(robot, bags, stats, ident) for robot in sorted({b["robot"] for b in bags})]
    body = [f"<h1>Fleet report</h1><p>{_counts(bags, stats)}; written "
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.</p>",
            "<h2>Flags</h2>", _flag_table(out, flags, bags),
            "<h2>Damaged bags</h2>", _damaged_table(out, bags),
            "<h2>Fleet overview</h2>", _html(figures[0], "overview"),
            "<h2>Pooled identification</h2>", _identification_table(out, ident),
            "<h2>Per-robot trends</h2>"]
    body += [_html(fig, f"trend-{i}") for i, fig in enumerate(figures[1:])]
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Fleet report</title><style>{STYLE}</style>"
            f"<script>{get_plotlyjs()}</script></head><body>{''.join(body)}</body></html>")
    path = out / REPORT
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path


def _html(fig: go.Figure, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"responsive": True})


def _counts(bags: Sequence[dict[str, Any]], stats: Sequence[dict[str, Any]]) -> str:
    ok = [b for b in bags if b["status"] == "ok"]
    return (f"{len({b['robot'] for b in bags})} robots, {len(bags)} bags ({len(bags) - len(ok)} failed, "
            f"{sum(b['salvaged'] for b in ok)} salvaged), {sum(b['samples'] for b in ok):,} samples")


def _date(ns: int | None) -> str:
    return "" if ns is None else f"{datetime.fromtimestamp(ns / 1e9, timezone.utc):%Y-%m-%d %H:%M:%S}"


def _when(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def _table(table_id: str, header: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    if not rows:
        return f"<p class='none' id='{table_id}'>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bag_link(out: Path, bag: dict[str, Any]) -> str:
    """A link (relative to the page) to the bag's residual plot, else to its replay's folder."""
    folder = out / "bags" / bag["name"]
    target = folder / "torque_residuals.png"
    href = os.path.relpath(target if target.is_file() else folder, out)
    return f"<a href='{html.escape(href)}'>{html.escape(Path(bag['bag']).name)}</a>"


def _flag_table(out: Path, flags: Sequence[dict[str, Any]], bags: Sequence[dict[str, Any]]) -> str:
    ok = sorted((b for b in bags if b["status"] == "ok"), key=lambda b: b["start_ns"])
    rows = []
    for f in sorted(flags, key=lambda f: (f["robot"], f["joint"], f["kind"])):
        # the robot's first bag from the flag's start on: where it shows first
        first = next((b for b in ok if b["robot"] == f["robot"] and b["start_ns"] >= (f["since_ns"] or 0)), None)
        rows.append([html.escape(f["robot"]), html.escape(f["joint"]), html.escape(f["kind"]), _num(f["value"]),
                     _num(f["reference"]), _num(f["z"]), _date(f["since_ns"]), html.escape(f["detail"] or ""),
                     html.escape(f["explained_by"] or ""), _bag_link(out, first) if first else ""])
    return _table("flags", ["robot", "joint", "kind", "value", "reference", "z", "since (UTC)", "detail",
                            "explained by", "per-bag plots"], rows, "No flags.")


def _damaged_table(out: Path, bags: Sequence[dict[str, Any]]) -> str:
    rows = []
    for b in sorted(bags, key=lambda b: b["bag"]):
        if b["status"] == "error" or b["salvaged"]:
            what = (f"salvaged {b['samples']:,} samples ({_date(b['start_ns'])} to {_date(b['end_ns'])})"
                    if b["status"] == "ok" else "nothing")
            rows.append([html.escape(b["robot"]), _bag_link(out, b) if b["status"] == "ok" else html.escape(b["bag"]),
                         html.escape(b["status"]), html.escape(b["error"] or _salvage(out, b)), what])
    return _table("damaged", ["robot", "bag", "status", "problem", "what was used"], rows, "No damaged bags.")


def _salvage(out: Path, bag: dict[str, Any]) -> str:
    """What the replay's salvage says of a damaged bag (summary.json): why, what it read and lost."""
    try:
        parts = json.loads((out / "bags" / bag["name"] / "summary.json").read_text())["salvage"]
    except (OSError, ValueError, KeyError):
        return "damaged (the replay's summary.json is gone)"
    return "; ".join(f"{Path(p['bag']).name}: {p['reason']}, {p['messages_recovered']:,} messages read, "
                     f"{p['messages_lost']:,} lost" for p in parts)


def _identification_table(out: Path, ident: Sequence[dict[str, Any]]) -> str:
    periods: dict[tuple[str, str], dict[str, Any]] = {}
    for row in ident:
        periods.setdefault((row["robot"], row["period"]), row)
    rows = []
    for (robot, period), row in sorted(periods.items()):
        file = row["parameter_file"]
        link = (f"<a href='{html.escape(os.path.relpath(file, out))}'>identified.yaml</a>" if file
                else html.escape(row["error"] or ""))
        rows.append([html.escape(robot), html.escape(period), str(row["fit_bags"]), str(row["validation_bags"]),
                     html.escape(row["status"]), _num(row["payload_mass"]), link])
    return _table("identification", ["robot", "period", "bags fit", "bags validating", "status", "payload [kg]",
                                     "parameter file or why none"], rows, "No identification (run with --identify).")


def _overview(stats: Sequence[dict[str, Any]]) -> go.Figure:
    """Each robot's median residual RMS per joint, the joints in the order the store lists them."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    joints: dict[str, None] = {}
    for s in stats:
        if s["torque_residual_rms"] is not None:
            values[(s["robot"], s["joint"])].append(s["torque_residual_rms"])
            joints.setdefault(s["joint"])
    robots = sorted({r for r, _ in values})
    z = [[statistics.median(values[(r, j)]) if (r, j) in values else None for j in joints] for r in robots]
    fig = go.Figure(go.Heatmap(z=z, x=list(joints), y=robots, colorscale="Viridis",
                               colorbar={"title": "N m"}))
    fig.update_layout(title="Median torque residual RMS per robot and joint", height=200 + 22 * len(robots),
                      margin={"l": 120, "r": 20, "t": 50, "b": 120})
    return fig


def _trends(robot: str, bags: Sequence[dict[str, Any]], stats: Sequence[dict[str, Any]],
            ident: Sequence[dict[str, Any]]) -> go.Figure:
    start = {b["bag"]: b for b in bags if b["robot"] == robot and b["status"] == "ok"}
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=("torque residual RMS per bag [N m]", "collisions per hour per bag",
                                        "identified Coulomb friction per period [N m]",
                                        "identified payload per period [kg]"))
    per_joint: dict[str, list[tuple[datetime, float, float]]] = defaultdict(list)
    for s in stats:
        b = start.get(s["bag"])
        if b is not None and s["torque_residual_rms"] is not None:
            hours = max((b["end_ns"] or b["start_ns"]) - b["start_ns"], 1) / 3.6e12
            per_joint[s["joint"]].append((_when(b["start_ns"]), s["torque_residual_rms"], s["collisions"] / hours))
    for k, (joint, points) in enumerate(sorted(per_joint.items())):
        points.sort()
        t, rms, rate = zip(*points)
        color = _color(k)
        fig.add_trace(go.Scatter(x=t, y=rms, name=joint, mode="lines+markers", legendgroup=joint,
                                 line={"color": color}), row=1, col=1)
        fig.add_trace(go.Scatter(x=t, y=rate, name=joint, mode="markers", legendgroup=joint, showlegend=False,
                                 marker={"color": color}), row=2, col=1)
    mine = sorted((r for r in ident if r["robot"] == robot and r["status"] == "ok"), key=lambda r: r["start_ns"])
    for k, joint in enumerate(sorted({r["joint"] for r in mine if r["coulomb"] is not None})):
        rows = [r for r in mine if r["joint"] == joint]
        fig.add_trace(go.Scatter(x=[_when(r["start_ns"]) for r in rows], y=[r["coulomb"] for r in rows], name=joint,
                                 mode="lines+markers", legendgroup=joint, showlegend=joint not in per_joint,
                                 line={"color": _color(sorted(per_joint).index(joint) if joint in per_joint else k)}),
                      row=3, col=1)
    payload = {r["period"]: r for r in mine if r["payload_mass"] is not None}
    if payload:
        rows = sorted(payload.values(), key=lambda r: r["start_ns"])
        fig.add_trace(go.Scatter(x=[_when(r["start_ns"]) for r in rows], y=[r["payload_mass"] for r in rows],
                                 name="payload (identified)", mode="lines+markers", line={"color": "black"}), row=4, col=1)
        if rows[0]["payload_label"] is not None:
            fig.add_trace(go.Scatter(x=[_when(rows[0]["start_ns"]), _when(rows[-1]["start_ns"])],
                                     y=[rows[0]["payload_label"]] * 2, name="payload (labelled)", mode="lines",
                                     line={"color": "black", "dash": "dash"}), row=4, col=1)
    fig.update_layout(title=f"{robot}", height=900, margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


def _color(k: int) -> str:
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf")
    return palette[k % len(palette)]
