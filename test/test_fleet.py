"""liedyn-fleet on a small simulated fleet: three UR5s (one with a joint's friction unmodelled and
growing), one unreadable bag, on a local Dask cluster; the store's tables, the numbers of a bag
replayed alone, a re-run, and the README's SQL run against the store."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from distributed import LocalCluster  # noqa: E402

from liedyn_ros import core  # noqa: E402
from liedyn_ros.fleet.cli import main  # noqa: E402
from liedyn_ros.fleet.discover import discover  # noqa: E402
from liedyn_ros.replay import ReplayError  # noqa: E402
from liedyn_ros.replay.cli import main as replay_main  # noqa: E402
from test_replay import scenario, ur5_urdf, write_bag  # noqa: E402

DAY_NS = 86_400 * 1_000_000_000
FRICTION_JOINT = "elbow_joint"
# robot -> Coulomb friction [N m] of FRICTION_JOINT on its day 0 and day 1 (the model has none)
ROBOTS = {"robot_a": (0.0, 0.0), "robot_b": (0.0, 0.0), "robot_c": (6.0, 12.0)}
README = Path(__file__).resolve().parents[1] / "README.md"
OPTIONS = ["--urdf", str(ur5_urdf()), "--no-plots", "--no-progress"]


def fleet_bag(path: Path, model, day: int, friction: float, seed: int) -> Path:
    """A bag whose effort is the model's inverse dynamics, plus dry friction on FRICTION_JOINT
    and a little noise, recorded `day` days after the first."""
    sc = scenario(model, duration=1.5)
    sc["stamps"] = sc["stamps"] + day * DAY_NS
    tau = np.array([core.rnea(model, q, qd, qdd) for q, qd, qdd in zip(sc["q"], sc["qd"], sc["qdd"])])
    j = list(model.joint_names).index(FRICTION_JOINT)
    tau[:, j] += friction * np.tanh(sc["qd"][:, j] / 0.01)
    sc["effort"] = tau + np.random.default_rng(seed).normal(0.0, 0.05, tau.shape)
    return write_bag(path, "mcap", sc)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The bags (robot/day<d>), the fleet run's DIR and what it printed."""
    root = tmp_path_factory.mktemp("fleet")
    model = core.load_urdf(str(ur5_urdf()))
    bags = {}
    for r, (robot, frictions) in enumerate(ROBOTS.items()):
        (root / "bags" / robot).mkdir(parents=True)
        for day, friction in enumerate(frictions):
            bags[(robot, day)] = fleet_bag(root / "bags" / robot / f"day{day}", model, day, friction, seed=10 * r + day)
    broken = root / "bags" / "robot_b" / "broken.mcap"
    broken.write_bytes(b"\x89MCAP0\r\n" + bytes(range(256)) * 8)  # the magic, then nothing readable
    bags[("robot_b", "broken")] = broken
    out = root / "out"
    # A cluster of one worker thread in this process, whose kernels are loaded once (worker
    # processes would each load them: 40 s here instead of 10); the processes of the default
    # local cluster are the same code (--workers N), measured in the README.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        assert main([str(root / "bags"), "--out", str(out), "--scheduler", cluster.scheduler_address, *OPTIONS]) == 0
    return bags, out


def query(out: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(out / "fleet.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_every_bag_has_a_row_and_the_broken_one_its_error(fleet):
    bags, out = fleet
    rows = {Path(b): (robot, status, error, samples)
            for b, robot, status, error, samples in query(out, "SELECT bag, robot, status, error, samples FROM bags")}
    assert set(rows) == {p.resolve() for p in bags.values()}
    for (robot, day), path in bags.items():
        got_robot, status, error, samples = rows[path.resolve()]
        assert got_robot == robot
        if day == "broken":
            assert status == "error" and error
        else:
            assert (status, error, samples) == ("ok", None, 239)
    assert {t for (t,) in query(out, "SELECT table_name FROM information_schema.tables")} == {
        "bags", "joint_stats", "identification", "flags"}
    assert query(out, "SELECT count(*) FROM joint_stats") == [(6 * 6,)]
    assert (out / "parquet" / "joint_stats").is_dir() and (out / "parquet" / "flags.parquet").is_file()


def test_joint_stats_are_those_of_the_bag_replayed_alone(fleet, tmp_path):
    bags, out = fleet
    bag = bags[("robot_c", 1)]
    assert replay_main([str(bag), "--out", str(tmp_path / "alone"), *OPTIONS]) == 0
    alone = json.loads((tmp_path / "alone" / "summary.json").read_text())
    stats = {joint: rms for joint, rms in query(
        out, f"SELECT joint, torque_residual_rms FROM joint_stats WHERE bag = '{bag.resolve()}'")}
    assert stats == {joint: row["torque_residual_Nm"]["rms"] for joint, row in alone["joints"].items()}
    start, end = query(out, f"SELECT start_ns, end_ns FROM bags WHERE bag = '{bag.resolve()}'")[0]
    assert start == alone["first_stamp_ns"] and end > start


def test_the_robot_with_unmodelled_friction_is_flagged(fleet):
    _, out = fleet
    flags = query(out, "SELECT robot, joint, kind, z FROM flags")
    assert [(r, j, k) for r, j, k, _ in flags] == [("robot_c", FRICTION_JOINT, "residual_outlier")]
    assert flags[0][3] > 3.5


def readme_sql() -> dict[str, str]:
    """The Fleet section's SQL blocks, by the question in the comment that opens each."""
    section = README.read_text().split("### Fleet", 1)[1]
    blocks = re.findall(r"```sql\n(.*?)```", section, flags=re.S)
    return {block.splitlines()[0].removeprefix("-- "): block for block in blocks}


def test_the_readme_sql_answers_its_questions(fleet):
    bags, out = fleet
    sql = readme_sql()
    assert len(sql) == 3
    grew, failed, flagged = sql.values()
    assert [(r, j) for r, j, *_ in query(out, grew)] == [("robot_c", FRICTION_JOINT)]
    assert [Path(b) for b, *_ in query(out, failed)] == [bags[("robot_b", "broken")].resolve()]
    assert [r for r, *_ in query(out, flagged)] == ["robot_c"]


def test_a_rerun_replays_only_new_or_changed_bags(fleet, capsys):
    bags, out = fleet
    capsys.readouterr()
    assert main([str(bags[("robot_a", 0)].parent), "--out", str(out), "--workers", "1", *OPTIONS]) == 0
    assert "2 bags: 0 replayed (0 failed), 2 unchanged" in capsys.readouterr().out
    assert query(out, "SELECT count(*) FROM bags") == [(7,)]  # the bags not given keep their rows


def test_a_bag_is_replayed_again_when_its_content_changes_not_its_mtime(tmp_path, capsys):
    model = core.load_urdf(str(ur5_urdf()))
    bag = fleet_bag(tmp_path / "robot_a" / "day0", model, 0, 0.0, seed=1)
    out = tmp_path / "out"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        run = [str(tmp_path / "robot_a"), "--out", str(out), "--scheduler", cluster.scheduler_address, *OPTIONS]
        assert main(run) == 0
        for file in bag.iterdir():
            os.utime(file, (0, 0))  # a copy or a touch: same bytes, another mtime
        assert main(run) == 0
        shutil.rmtree(bag)
        fleet_bag(bag, model, 0, 0.0, seed=2)  # recorded again: other bytes
        assert main(run) == 0
    printed = capsys.readouterr().out
    assert [line.split(",")[0] for line in printed.splitlines() if " bags: " in line] == [
        "1 bags: 1 replayed (0 failed)", "1 bags: 0 replayed (0 failed)", "1 bags: 1 replayed (0 failed)"]
    assert query(out, "SELECT count(*) FROM bags") == [(1,)]


def test_the_robot_comes_from_the_manifest_the_pattern_or_the_directory(tmp_path):
    for robot in ("r1", "r2"):
        (tmp_path / "site" / robot).mkdir(parents=True)
        (tmp_path / "site" / robot / f"{robot}_log.mcap").write_bytes(b"")
    (tmp_path / "site" / "r1" / "notes.txt").write_text("not a bag")
    bags = [tmp_path / "site"]
    assert [(e.path.name, e.robot) for e in discover(bags)] == [("r1_log.mcap", "r1"), ("r2_log.mcap", "r2")]
    assert [e.robot for e in discover(bags, robot_pattern=r"/(r\d)_log")] == ["r1", "r2"]
    assert [e.path.name for e in discover([tmp_path / "site" / "*" / "r2_*.mcap"])] == ["r2_log.mcap"]
    manifest = tmp_path / "site" / "fleet.csv"
    manifest.write_text("bag,robot,urdf,time\nr1/r1_log.mcap,arm-7,arm.urdf,2026-11-01\nr2/r2_log.mcap,arm-8,,\n")
    entries = discover(bags, manifest=manifest)
    assert [(e.robot, e.urdf, e.time) for e in entries] == [
        ("arm-7", tmp_path / "site" / "arm.urdf", "2026-11-01"), ("arm-8", None, None)]
    with pytest.raises(ReplayError, match="has no group"):
        discover(bags, robot_pattern="r1")
    with pytest.raises(ReplayError, match="does not match"):
        discover(bags, robot_pattern=r"(r1)_log")
    manifest.write_text("bag,robot\nr1/r1_log.mcap,arm-7\n")
    with pytest.raises(ReplayError, match="r2_log.mcap: not in --manifest"):
        discover(bags, manifest=manifest)
