"""liedyn-fleet --split-seconds: a bag cut by time into pieces, each replayed as a task of its own
(a warm-up before its cut, events from the cut), merged into the rows of the bag replayed whole.

The bag: a UR5 (test_replay's scenario: 200 Hz, a gap and a NaN sample) whose efforts are the
model's inverse dynamics, dry friction on one joint and noise, plus external torque pulses, two
of them across the cuts. --split-seconds 2.5 on an 8 s bag whose span of receive times is
12.499 s (a message on another topic 4.5 s after the joint states end): five equal pieces of
2.4998 s, the last two with few or no joint states. The warm-up of the second piece starts
after the gap, so its observer starts from zero against the whole replay's running estimate and
must converge within the warm-up."""

from __future__ import annotations

import itertools
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from distributed import LocalCluster  # noqa: E402
from test_replay import T0, scenario, ur5_urdf, write_bag  # noqa: E402

from liedyn_ros import core  # noqa: E402
from liedyn_ros.fleet.cli import main  # noqa: E402
from liedyn_ros.fleet.discover import BagEntry, read_manifest  # noqa: E402
from liedyn_ros.fleet.store import read_table  # noqa: E402
from liedyn_ros.fleet.tasks import (  # noqa: E402
    STAMPS_CSV,
    make_task,
    merge_events,
    merge_pieces,
    piece_tasks,
    run_bag,
    split,
)
from liedyn_ros.replay import ReplayError, ReplayOptions, bagio  # noqa: E402
from liedyn_ros.replay.identify import FIT_ALL  # noqa: E402

SECONDS = 2.5  # --split-seconds
# external torque pulses [s] on shoulder_lift_joint: across the first cut (2.4998 s), inside the
# second piece, across the second cut (4.9996 s; short: it ends just after the cut)
PULSES = ((2.45, 2.75), (3.5, 3.7), (4.9, 5.02))
PULSE_NM = 25.0


@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> Path:
    model = core.load_urdf(str(ur5_urdf()))
    sc = scenario(model, duration=8.0)
    t = (sc["stamps"] - T0) * 1e-9
    tau = np.array([core.rnea(model, q, qd, qdd) for q, qd, qdd in zip(sc["q"], sc["qd"], sc["qdd"])])
    tau[:, 2] += 4.0 * np.tanh(sc["qd"][:, 2] / 0.01)  # elbow friction: the observer and the fit see it
    for a, b in PULSES:
        tau[(t >= a) & (t < b), 1] += PULSE_NM
    sc["effort"] = tau + np.random.default_rng(5).normal(0.0, 0.05, tau.shape)
    return write_bag(tmp_path_factory.mktemp("split") / "long", "mcap", sc,
                     extra=lambda writer, ts: late_note(writer, ts, T0 + 12_499_300_000))


def late_note(writer, ts, receive_ns: int) -> None:
    conn = writer.add_connection("/note", "std_msgs/msg/String", typestore=ts)
    writer.write(conn, receive_ns, ts.serialize_cdr(ts.types["std_msgs/msg/String"](data="end"), "std_msgs/msg/String"))


def csv_stamps(path: Path) -> np.ndarray:
    """The stamps (first column) of a replay's CSV, none for a header alone."""
    return np.array([int(line.split(",", 1)[0]) for line in path.read_text().splitlines()[1:]], dtype=np.int64)


@pytest.fixture(scope="module")
def replays(bag, tmp_path_factory):
    """The bag's task replayed whole, and cut into pieces replayed one by one and merged."""
    out = tmp_path_factory.mktemp("runs")
    options = ReplayOptions(out=out, urdf=ur5_urdf(), plots=False, progress=False, identify=(("friction",),))
    whole_task = make_task(BagEntry(bag, "ur5"), out / "whole", options)
    cut_task = split(make_task(BagEntry(bag, "ur5"), out / "cut", options, split_seconds=SECONDS))
    whole = run_bag(whole_task)
    pieces = [run_bag(task) for task in piece_tasks(cut_task)]
    return whole_task, whole, cut_task, pieces, merge_pieces(cut_task, pieces)


def test_the_pieces_cover_the_bag_exactly_once(replays):
    whole_task, _, cut_task, pieces, _ = replays
    cuts = [p.start_s for p in cut_task.pieces] + [None]
    assert cuts[0] is None and np.allclose(cuts[1:-1], [2.4998, 4.9996, 7.4994, 9.9992])
    assert [(p.start_s, p.end_s) for p in cut_task.pieces] == list(itertools.pairwise(cuts))
    stamps = csv_stamps(whole_task.options.out / STAMPS_CSV)
    parts = [csv_stamps(task.options.out / STAMPS_CSV) for task in piece_tasks(cut_task)]
    # no sample twice (overlap), none missing (gap), in order, each piece on its side of the cuts
    assert np.array_equal(np.concatenate(parts), stamps)
    for k in (1, 2, 3):
        assert parts[k][0] >= T0 + cuts[k] * 1e9 > parts[k - 1][-1]
    assert len(parts[3]) and not len(parts[4])  # the joint states end at 8 s
    assert [p.bag["samples"] for p in pieces] == [len(p) for p in parts]


def test_the_merged_rows_are_those_of_the_bag_replayed_whole(replays):
    _, whole, _, _, merged = replays
    for key in ("start_ns", "end_ns", "samples", "status", "salvaged"):
        assert merged.bag[key] == whole.bag[key], key
    assert [j["joint"] for j in merged.joints] == [j["joint"] for j in whole.joints]
    # equal to rounding: the derivative's time axis starts at another sample in a piece, and the
    # sums of squares add up in another order
    for got, want in zip(merged.joints, whole.joints):
        assert got["torque_residual_max_abs"] == pytest.approx(want["torque_residual_max_abs"], rel=1e-9)
        assert got["torque_residual_rms"] == pytest.approx(want["torque_residual_rms"], rel=1e-9)
        assert got["collisions"] == want["collisions"]
    assert sum(j["collisions"] for j in whole.joints) == len(PULSES)


def test_the_events_across_the_cuts_are_the_whole_replays(replays):
    whole_task, _, cut_task, _, _ = replays
    want = json.loads((whole_task.options.out / "summary.json").read_text())["collisions"]
    got = json.loads((cut_task.options.out / "summary.json").read_text())["collisions"]
    assert len(want) == len(PULSES)
    assert [(e["start_ns"], e["end_ns"], e["joint"], e["kind"]) for e in got] == [
        (e["start_ns"], e["end_ns"], e["joint"], e["kind"]) for e in want]
    # the observer's estimate after the warm-up: the whole replay's to within 1e-9 of its value
    assert np.allclose([e["peak"] for e in got], [e["peak"] for e in want], rtol=0, atol=1e-7)
    for (a, b), event in zip(PULSES, want):  # each event is its pulse
        assert a <= (event["start_ns"] - T0) * 1e-9 < b < (event["end_ns"] - T0) * 1e-9 < b + 0.2


def test_the_normal_equations_are_summed_over_the_pieces(replays):
    whole_task, _, cut_task, _, _ = replays
    whole, cut = (pickle.loads((task.options.out / "equations.pkl").read_bytes())["identifier"]
                  for task in (whole_task, cut_task))
    assert whole.split_ns == cut.split_ns == FIT_ALL
    assert np.array_equal(cut.fit.rows, whole.fit.rows) and whole.fit.rows.min() > 0
    for attr in ("A", "b", "c"):
        assert np.allclose(getattr(cut.fit, attr), getattr(whole.fit, attr), rtol=1e-9, atol=1e-9), attr


def test_events_open_across_several_cuts_are_joined():
    """merge_events alone: an event open at the end of piece 0, above the release all through
    piece 1 (no quiet sample) and ending in piece 2 is one event; piece 2's own event starting
    before that quiet sample is part of it, a later one is not."""
    threshold = {"a": 10.0, "b": 20.0}

    def part(events, quiet):
        return {"collisions": events, "piece": {"first_quiet_ns": quiet, "thresholds": threshold}}

    def event(start, end, joint, peak, kind="collision"):
        return {"start_ns": start, "end_ns": end, "joint": joint, "peak": peak, "kind": kind}

    merged = merge_events([
        part([event(1, 5, "a", 12.0), event(8, None, "a", 11.0, "limit")], None),
        part([event(10, None, "b", 30.0)], None),  # 30 / 20 > 11 / 10: the peak is b's
        part([event(21, 24, "a", 13.0), event(30, 31, "a", -40.0)], 24),
    ])
    assert merged == [event(1, 5, "a", 12.0), event(8, 24, "b", 30.0, "limit"), event(30, 31, "a", -40.0)]
    # an open event whose next piece is quiet at once, with no event of its own: it ends there
    assert merge_events([part([event(1, None, "a", 12.0)], None), part([], 7)]) == [event(1, 7, "a", 12.0)]
    # the last piece's open event stays open, as at the end of a bag replayed whole
    assert merge_events([part([event(1, None, "a", 12.0)], None), part([], None)]) == [event(1, None, "a", 12.0)]


def lagged_bag(path: Path, sc: dict) -> Path:
    """The scenario's joint states received 3 s after their stamps at first, then ever less late
    (0.5 s a second), and a late message on another topic (9 s of receive times: 4 pieces of
    2.25 s): the seek of the piece from 4.5 s, from the first message's lag, starts reading
    after its warm-up."""
    ts = get_typestore(Stores.ROS2_HUMBLE)
    with Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for i, stamp in enumerate(sc["stamps"]):
            sec, nsec = divmod(int(stamp), 1_000_000_000)
            header = ts.types["std_msgs/msg/Header"](
                stamp=ts.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="base")
            msg = ts.types["sensor_msgs/msg/JointState"](header=header, name=sc["names"], position=sc["q"][i],
                                                        velocity=sc["qd"][i], effort=sc["effort"][i])
            lag = 3_000_000_000 - (int(stamp) - T0) // 2
            writer.write(conn, int(stamp) + lag, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
        late_note(writer, ts, T0 + 12_000_000_000)
    return path


def test_the_fleet_splits_merges_and_stores_one_bag(bag, replays, tmp_path, monkeypatch):
    """liedyn-fleet --split-seconds on a cluster of one in-process worker: one bags row with the
    whole replay's numbers; a bag too short to cut stays one task; a bag whose piece refuses (its
    receive times lag its stamps by more than the seek allows) is replayed whole. Run again with a
    bag rewritten: only that bag is opened (what is new is decided on the keys, before any bag is
    opened to be cut) and replayed."""
    _, whole, _, _, _ = replays
    short = bag.parent / "short"
    short.mkdir(exist_ok=True)
    model = core.load_urdf(str(ur5_urdf()))
    sc = scenario(model, duration=2.0)
    write_bag(short / "bag", "mcap", sc)
    lagged = lagged_bag(short / "lagged", scenario(model, duration=9.0))
    out = tmp_path / "fleet"
    argv = [str(bag), str(short / "bag"), str(lagged), "--out", str(out), "--urdf", str(ur5_urdf()), "--no-plots",
            "--no-progress", "--split-seconds", str(SECONDS)]
    opened: list[str] = []
    counted = bagio.open_bag

    def open_bag(path, stack):  # every bag opened, by the main process (to cut it) or a replay
        opened.append(Path(path).name)
        return counted(path, stack)

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        assert main(argv + ["--scheduler", cluster.scheduler_address]) == 0
        first = {r["bag"]: r for r in read_table(out, "bags").to_pylist()}
        shutil.rmtree(short / "bag")
        shorter = scenario(model, duration=1.5)
        write_bag(short / "bag", "mcap", shorter)
        monkeypatch.setattr(bagio, "open_bag", open_bag)
        assert main(argv + ["--scheduler", cluster.scheduler_address]) == 0
        monkeypatch.undo()
    again = {r["bag"]: r for r in read_table(out, "bags").to_pylist()}
    assert opened and set(opened) == {"bag"}  # the long and lagged bags: never opened
    assert again[str(short / "bag")]["samples"] == len(shorter["stamps"]) - 1 != first[str(short / "bag")]["samples"]
    assert again[str(bag)] == first[str(bag)] and again[str(lagged)] == first[str(lagged)]
    rows = {Path(r["bag"]).name: r for r in first.values()}
    assert (rows["lagged"]["status"], rows["lagged"]["samples"]) == ("ok", 9 * 200 - 60)  # less the gap
    cut = split(make_task(BagEntry(lagged, "ur5"), out, ReplayOptions(out=out, urdf=ur5_urdf()), split_seconds=SECONDS))
    assert len(cut.pieces) == 4  # it was cut, and replayed whole after its piece from 4.5 s refused
    assert not list((out / "bags" / rows["lagged"]["name"]).glob("piece-*"))
    assert json.loads((out / "bags" / rows["lagged"]["name"] / "summary.json").read_text())["samples"] == 9 * 200 - 60
    assert rows["long"]["samples"] == whole.bag["samples"] and rows["long"]["end_ns"] == whole.bag["end_ns"]
    assert rows["bag"]["samples"] == len(sc["stamps"]) - 1  # the NaN sample left out
    stats = {j["joint"]: j for j in read_table(out, "joint_stats").to_pylist() if Path(j["bag"]).name == "long"}
    for want in whole.joints:
        assert stats[want["joint"]]["torque_residual_rms"] == pytest.approx(want["torque_residual_rms"], rel=1e-9)
        assert stats[want["joint"]]["collisions"] == want["collisions"]
    folder = out / "bags" / rows["long"]["name"]
    assert sorted(p.name for p in folder.glob("piece-*")) == [f"piece-{k:03d}" for k in range(5)]
    assert not list((out / "bags" / rows["bag"]["name"]).glob("piece-*"))


def test_the_manifest_sets_a_bags_split_seconds(tmp_path):
    """split_seconds per bag: a number over --split-seconds, 0 for whole, empty for the command line's."""
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.mcap").write_bytes(b"")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("bag,robot,split_seconds\na.mcap,r,600\nb.mcap,r,0\nc.mcap,r,\n")
    got = {e.path.name: e.split_seconds for e in read_manifest(manifest).values()}
    assert got == {"a.mcap": 600.0, "b.mcap": 0.0, "c.mcap": None}
    manifest.write_text("bag,robot,split_seconds\na.mcap,r,-5\n")
    with pytest.raises(ReplayError, match="line 2: split_seconds must be a number of seconds >= 0"):
        read_manifest(manifest)
