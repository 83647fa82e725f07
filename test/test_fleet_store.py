"""The fleet store's compaction (fleet/store.py): per-bag Parquet files moved into one file per
table, robot and month, each bag's rows read once whatever was interrupted where. The rows are
made here (no replay); what the store must hold is kept beside them as plain dicts."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from pathlib import Path

import duckdb  # the fleet extra's; without it conftest.py leaves this file out
import pyarrow.parquet as pq
import pytest

from liedyn_ros.fleet import store
from liedyn_ros.replay import ReplayError

DAY_NS = 86_400 * 10**9
T0 = 1_761_955_200 * 10**9  # 2025-11-01 UTC
JOINTS = ("j1", "j2", "j3")


def rows(robot: str, k: int, start_ns: int | None, key: str = "v1") -> tuple[dict, list[dict]]:
    """A bag's `bags` row and `joint_stats` rows; start None: a bag that failed (no joints)."""
    bag = f"/data/{robot}/bag{k:04d}.mcap"
    name = f"bag{k:04d}-{hashlib.sha1(bag.encode()).hexdigest()[:8]}"
    failed = start_ns is None
    row = {"bag": bag, "robot": robot, "start_ns": start_ns, "end_ns": None if failed else start_ns + 3 * 10**9,
           "samples": 0 if failed else 600 + k, "status": "error" if failed else "ok",
           "error": "unreadable" if failed else None, "salvaged": False, "key": f"{key}-{k}", "name": name,
           "time": None}
    joints = [] if failed else [
        {"bag": bag, "robot": robot, "joint": j, "torque_residual_rms": 0.1 * i + k / 1e4 + (key != "v1"),
         "torque_residual_max_abs": 1.0, "effort_rms": None, "collisions": i} for i, j in enumerate(JOINTS)]
    return row, joints


class Fleet:
    """A store being written, and what it must hold: bag -> (bags row, joint_stats rows)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.truth: dict[str, tuple[dict, list[dict]]] = {}

    def write(self, robot: str, k: int, start_ns: int | None, key: str = "v1") -> None:
        bag, joints = rows(robot, k, start_ns, key)
        store.write_bag(self.out, bag["name"], bag, joints)
        self.truth[bag["bag"]] = (bag, joints)

    def check(self) -> None:
        """read_table holds each bag once, with its latest rows, joints in the order written."""
        bags = store.read_table(self.out, "bags").to_pylist()
        assert sorted(bags, key=lambda b: b["bag"]) == [self.truth[b][0] for b in sorted(self.truth)]
        stats = store.read_table(self.out, "joint_stats").to_pylist()
        assert sorted(stats, key=lambda j: j["bag"]) == [j for b in sorted(self.truth) for j in self.truth[b][1]]

    def check_parts(self) -> None:
        """After a finished compaction: no per-bag file left, and DuckDB over the parts' files
        (docs/fleet.md) counts each bag once."""
        assert not list(store.parquet_dir(self.out).rglob("*.tmp"))
        assert not list((store.parquet_dir(self.out) / store.INCOMING).rglob("*.parquet"))
        parquet = store.parquet_dir(self.out)
        with duckdb.connect() as con:
            got = con.execute(f"SELECT bag, key FROM read_parquet('{parquet}/bags/*.parquet') ORDER BY bag").fetchall()
            joints = con.execute(f"SELECT count(*) FROM read_parquet('{parquet}/joint_stats/*.parquet')").fetchone()
        assert got == sorted((b, r["key"]) for b, (r, _) in self.truth.items())
        assert store.stored_keys(self.out) == dict(got)
        assert joints == (sum(len(j) for _, j in self.truth.values()),)


def grown_fleet(out: Path) -> Fleet:
    """Two robots over two months, compacted, then a run's worth of incoming files: new bags,
    a bag changed in place, one changed into another month, one that failed now, one that failed
    before and is read now."""
    fleet = Fleet(out)
    for k in range(8):
        fleet.write("arm_1" if k % 2 else "go2/a", k, T0 + k * 6 * DAY_NS)  # over 42 days: two months
    fleet.write("arm_1", 8, None)
    store.compact(out)
    fleet.write("arm_1", 1, T0 + 4 * DAY_NS, key="v2")  # same month
    fleet.write("go2/a", 2, T0 + 40 * DAY_NS, key="v2")  # into the next month
    fleet.write("arm_1", 3, None, key="v2")  # failed now
    fleet.write("arm_1", 8, T0 + 5 * DAY_NS, key="v2")  # read now
    fleet.write("go2/a", 9, T0 + 50 * DAY_NS)  # new
    return fleet


def test_compaction_keeps_each_bags_latest_rows_in_few_files(tmp_path):
    fleet = Fleet(tmp_path)
    for k in range(12):
        fleet.write("arm_1" if k % 2 else "go2/a", k, T0 + k * 4 * DAY_NS)
    fleet.write("arm_1", 12, None)
    fleet.check()
    assert len(list((tmp_path / "parquet" / "incoming").rglob("*.parquet"))) == 2 * 13
    done = store.compact(tmp_path)
    fleet.check()
    fleet.check_parts()
    # per robot and month (2025-11, 2025-12), and arm_1's failed bag undated; joint_stats has no
    # rows for that one
    names = {p.name for p in (tmp_path / "parquet" / "bags").iterdir()}
    assert names == {store.part_name(r, s) for r, s in (("arm_1", T0), ("arm_1", T0 + 40 * DAY_NS), ("go2/a", T0),
                                                       ("go2/a", T0 + 40 * DAY_NS), ("arm_1", None))}
    assert len(names) == 5 and all("-undated" in n or "-2025-1" in n for n in names)
    assert len(list((tmp_path / "parquet" / "joint_stats").iterdir())) == 4
    assert (done.bags, done.written, done.removed) == (13, 9, 0)
    assert store.compact(tmp_path) == store.Compaction(0, 0, 0)


def test_a_changed_bag_replaces_its_rows_wherever_they_were(tmp_path):
    fleet = grown_fleet(tmp_path)
    fleet.check()  # before compaction: the incoming rows win over the parts'
    assert store.stored_keys(tmp_path) == {b: r["key"] for b, (r, _) in fleet.truth.items()}
    store.compact(tmp_path)
    fleet.check()
    fleet.check_parts()
    # the changed go2 bag left its first month's part for the next month's
    first = pq.read_table(tmp_path / "parquet" / "bags" / store.part_name("go2/a", T0)).column("bag").to_pylist()
    assert "/data/go2/a/bag0002.mcap" not in first


def test_a_store_written_before_compaction_is_read_and_moved(tmp_path):
    """Per-bag files in parquet/<table>/ (the layout of earlier versions), one of them also
    replayed again since (incoming)."""
    fleet = Fleet(tmp_path)
    for k in range(4):
        bag, joints = rows("arm_1", k, T0 + k * DAY_NS)
        for table, written in (("joint_stats", joints), ("bags", [bag])):
            (tmp_path / "parquet" / table).mkdir(parents=True, exist_ok=True)
            pq.write_table(store.pa.Table.from_pylist(written, schema=store.SCHEMAS[table]),
                           tmp_path / "parquet" / table / f"{bag['name']}.parquet")
        fleet.truth[bag["bag"]] = (bag, joints)
    fleet.write("arm_1", 2, T0 + 2 * DAY_NS, key="v2")
    fleet.check()
    store.compact(tmp_path)
    fleet.check()
    fleet.check_parts()
    assert [p.name for p in (tmp_path / "parquet" / "bags").iterdir()] == [store.part_name("arm_1", T0)]


class Interrupted(Exception):
    pass


class Stopper:
    """Counts the file operations it wraps; the one after the first `stop` raises Interrupted."""

    def __init__(self, stop: int) -> None:
        self.stop, self.count = stop, 0

    def wrap(self, operation):
        def step(*args, **kwargs):
            self.count += 1
            if self.count > self.stop:
                raise Interrupted(operation.__name__)
            return operation(*args, **kwargs)
        return step


def test_a_compaction_interrupted_at_any_step_loses_and_repeats_nothing(tmp_path, monkeypatch):
    """Stopped before each of its file operations in turn (write, rename, delete): the rows read
    are those of the store before it; the next compaction finishes the job."""
    real = {"write": store._write_file, "replace": os.replace, "unlink": Path.unlink}
    grown = grown_fleet(tmp_path / "grown")
    monkeypatch.setattr(store.os, "fsync", lambda fd: None)  # against a killed process, not a power cut
    for stop in range(100):
        out = tmp_path / f"stop{stop}"
        shutil.copytree(grown.out, out)
        fleet = Fleet(out)
        fleet.truth = grown.truth
        stopper = Stopper(stop)
        monkeypatch.setattr(store, "_write_file", stopper.wrap(real["write"]))
        monkeypatch.setattr(store.os, "replace", stopper.wrap(real["replace"]))
        monkeypatch.setattr(Path, "unlink", stopper.wrap(real["unlink"]))
        try:
            store.compact(out)
            finished = True
        except Interrupted:
            finished = False
        monkeypatch.setattr(store, "_write_file", real["write"])
        monkeypatch.setattr(store.os, "replace", real["replace"])
        monkeypatch.setattr(Path, "unlink", real["unlink"])
        fleet.check()
        store.compact(out)
        fleet.check()
        fleet.check_parts()
        if finished:
            break
    # 4 parts of bags and 3 of joint_stats written and renamed, the 5 bags' 10 files deleted
    assert (finished, stop) == (True, 7 + 7 + 10)


def test_a_compaction_killed_midway_loses_and_repeats_nothing(tmp_path):
    """SIGKILL at two times of a compaction's duration (a forked child compacting a store of
    120 incoming bags): the rows read afterwards are the store's, and the next compaction ends."""
    written = Fleet(tmp_path / "written")
    for k in range(120):
        written.write(f"r{k % 4}", k, T0 + k * DAY_NS)

    def grown(out: Path) -> Fleet:
        shutil.copytree(written.out, out)
        fleet = Fleet(out)
        fleet.truth = written.truth
        return fleet

    def compact_in_child(out: Path) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                store.compact(out)
            finally:
                os._exit(0)
        return pid

    started = time.perf_counter()
    os.waitpid(compact_in_child(grown(tmp_path / "timed").out), 0)
    duration = time.perf_counter() - started
    midway = 0
    for i, fraction in enumerate((0.7, 0.95)):  # the files change in its last part
        fleet = grown(tmp_path / f"kill{i}")
        pid = compact_in_child(fleet.out)
        time.sleep(duration * fraction)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        left = len(list((fleet.out / "parquet" / "incoming").rglob("*.parquet")))
        midway += 0 < left < 2 * 120 or any((fleet.out / "parquet").rglob("*.tmp"))
        fleet.check()
        store.compact(fleet.out)
        fleet.check_parts()
    print(f"compaction of 120 bags {duration:.2f} s; {midway} of 2 kills midway")


def test_one_run_at_a_time_holds_a_store(tmp_path):
    with store.locked(tmp_path), pytest.raises(ReplayError, match="in use by another liedyn-fleet"), \
            store.locked(tmp_path):
        pass
    with store.locked(tmp_path):  # released
        pass


def test_liedyn_fleet_compact(tmp_path, capsys):
    from liedyn_ros.fleet.cli import main

    fleet = Fleet(tmp_path)
    for k in range(3):
        fleet.write("arm_1", k, T0 + k * DAY_NS)
    assert main(["--compact", "--out", str(tmp_path)]) == 0
    assert "3 bags' rows compacted into 2 files" in capsys.readouterr().out
    fleet.check()
    fleet.check_parts()
    assert main(["--compact", "--out", str(tmp_path), "/data"]) == 2
    assert main(["--out", str(tmp_path)]) == 2
    assert main(["--compact", "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "--compact takes no BAG_OR_DIR" in err and "no BAG_OR_DIR given" in err and "no fleet store" in err


def test_the_docs_sql_runs_unchanged_over_views_of_the_parquet_files(tmp_path):
    """docs/fleet.md's three questions give over DuckDB views of the compacted Parquet files
    (the views the page gives) what they give over fleet.duckdb."""
    import re

    fleet = grown_fleet(tmp_path)
    store.compact(tmp_path)
    store.write_table(tmp_path, "identification", [
        {"robot": robot, "period": f"day{d}", "joint": "j1", "coulomb": c, "start_ns": T0 + d * DAY_NS, "status": "ok"}
        for robot, values in (("arm_1", (1.0, 1.5)), ("go2/a", (1.0, 1.0))) for d, c in enumerate(values)])
    store.write_table(tmp_path, "flags", [{"robot": "arm_1", "joint": "j1", "kind": "friction_drift"}])
    store.build_duckdb(tmp_path, {t: store.read_table(tmp_path, t) for t in store.SCHEMAS})
    docs = (Path(__file__).resolve().parents[1] / "docs" / "fleet.md").read_text()
    views = re.search(r"```text\n(CREATE VIEW .*?)```", docs, flags=re.DOTALL).group(1)
    questions = re.findall(r"```sql\n(.*?)```", docs, flags=re.DOTALL)
    assert len(questions) == 3
    with duckdb.connect(str(tmp_path / "fleet.duckdb"), read_only=True) as copy, duckdb.connect() as con:
        con.execute(views.replace("'fleet/", f"'{tmp_path}/"))
        for sql in questions:
            assert con.execute(sql).fetchall() == copy.execute(sql).fetchall() != []
    assert len(fleet.truth) == 10


def test_a_bags_content_key_is_read_again_only_when_its_files_stat_changes(tmp_path):
    """tasks.content_key with the keys of earlier runs (kept in the store): an unchanged bag is
    not read (shown by a rewrite that keeps size, mtime and inode: its old key comes back, the
    documented blind spot); once touched it is read again, and its new bytes give their key.
    (A touch alone keeps the key: test_fleet.py's re-run after os.utime replays nothing.)"""
    from liedyn_ros.fleet.tasks import content_key

    bag = tmp_path / "bags" / "day0"  # a rosbag2 directory
    bag.mkdir(parents=True)
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information: {}\n")
    data = bag / "day0_0.mcap"
    data.write_bytes(b"a" * 3_000_000)
    known: dict = {}
    first = content_key(bag, known)
    assert first == content_key(bag) and set(known) == {str(bag)}
    store.write_content_keys(tmp_path, known)
    known = store.content_keys(tmp_path)
    stat = data.stat()
    with data.open("r+b") as f:  # same size, same inode, then the old mtime put back
        f.write(b"b" * 1000)
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert content_key(bag, known) == first != content_key(bag)
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: read again
    assert content_key(bag, known) == content_key(bag) != first
    assert known[str(bag)][1] == content_key(bag)


def test_a_bags_equations_are_looked_for_only_when_its_key_is_new(tmp_path, monkeypatch):
    """identification.pooled with the record of earlier runs (store.equations_kept): a bag whose
    key it holds is not looked for on disk; a new key is, once; a bag gone from the store leaves
    it; a period solved again looks for its bags' files and leaves out one deleted since."""
    import json

    from liedyn_ros.fleet import identification

    looked: list[str] = []
    saved = identification._saved
    monkeypatch.setattr(identification, "_saved", lambda out, bag: looked.append(bag["key"]) or saved(out, bag))
    bags = [rows("r1", k, T0 + k * DAY_NS)[0] for k in range(4)] + [rows("r1", 4, None)[0]]  # the last failed
    day = identification.period_of(T0, "day")
    for bag in bags[:2]:  # two bags of the first day kept their equations, and their period was pooled
        (tmp_path / "bags" / bag["name"]).mkdir(parents=True)
        (tmp_path / "bags" / bag["name"] / identification.EQUATIONS).write_bytes(b"")
    pooled_rows = [{"robot": "r1", "period": day, "joint": "j1", "status": "ok"}]
    bags[1]["start_ns"] = T0 + 3600 * 10**9
    cache = tmp_path / "identified" / "r1" / day / identification.POOL_CACHE
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"keys": [bags[0]["key"], bags[1]["key"]], "rows": pooled_rows}))

    kept: dict[str, bool] = {}
    assert identification.pooled(tmp_path, bags, "day", kept) == pooled_rows
    assert sorted(looked) == sorted(b["key"] for b in bags[:4])  # the failed bag is never looked for
    assert kept == {bags[0]["key"]: True, bags[1]["key"]: True, bags[2]["key"]: False, bags[3]["key"]: False}
    store.write_equations_kept(tmp_path, kept)
    kept = store.equations_kept(tmp_path)

    looked.clear()
    new = rows("r1", 5, T0 + 5 * DAY_NS)[0]
    (tmp_path / "bags" / bags[1]["name"] / identification.EQUATIONS).unlink()  # deleted by hand
    # bag 0 gone from the store: its period is solved again (other keys), from the files there
    assert identification.pooled(tmp_path, bags[1:] + [new], "day", kept) == []
    assert looked == [new["key"], bags[1]["key"]]  # the new bag; bag 1's file, for the period solved again
    assert bags[0]["key"] not in kept and kept[bags[1]["key"]] is False and kept[new["key"]] is False
    looked.clear()
    assert identification.pooled(tmp_path, bags[1:] + [new], "day", kept) == [] and looked == []
