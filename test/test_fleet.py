"""liedyn-fleet on a small simulated fleet: three UR5s (one with a joint's friction unmodelled and
growing), one unreadable bag, on a local Dask cluster; the store's tables, the numbers of a bag
replayed alone, the pooled identification per robot and day (held-out bags, the parameter files
checked), the flags, a re-run, docs/fleet.md's SQL run against the store, and the HTML report
in a real headless browser."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("distributed")
pytest.importorskip("pyarrow")
pytest.importorskip("plotly")
psutil = pytest.importorskip("psutil")  # distributed's own dependency

from distributed import LocalCluster  # noqa: E402

from liedyn_ros import core, pipeline  # noqa: E402
from liedyn_ros.fleet import analysis, identification  # noqa: E402
from liedyn_ros.fleet.cli import main  # noqa: E402
from liedyn_ros.fleet.discover import discover  # noqa: E402
from liedyn_ros.fleet.store import read_table  # noqa: E402
from liedyn_ros.pipeline.payload import dynamics_from  # noqa: E402
from liedyn_ros.replay import ReplayError  # noqa: E402
from liedyn_ros.replay.cli import main as replay_main  # noqa: E402
from test_replay import scenario, ur5_urdf, write_bag  # noqa: E402

DAY_NS = 86_400 * 1_000_000_000
FRICTION_JOINT = "elbow_joint"
# robot -> Coulomb friction [N m] of FRICTION_JOINT on each day it recorded (the URDF has none);
# two bags a day: one fits, the other validates the day's pooled fit
ROBOTS = {"robot_a": (0.0,), "robot_b": (0.0,), "robot_c": (6.0, 12.0)}
NOISE = 0.05  # N m, the efforts' noise
DOCS = Path(__file__).resolve().parents[1] / "docs" / "fleet.md"
OPTIONS = ["--urdf", str(ur5_urdf()), "--no-plots", "--no-progress"]
IDENTIFY = ["--identify", "friction", "--period", "day"]


def fleet_bag(path: Path, model, day: int, friction: float, seed: int) -> Path:
    """A bag whose effort is the model's inverse dynamics, plus dry friction on FRICTION_JOINT
    and a little noise, recorded `day` days after the first."""
    sc = scenario(model, duration=1.5)
    sc["stamps"] = sc["stamps"] + day * DAY_NS + seed * 10**10  # the bags of a day one after the other
    tau = np.array([core.rnea(model, q, qd, qdd) for q, qd, qdd in zip(sc["q"], sc["qd"], sc["qdd"])])
    j = list(model.joint_names).index(FRICTION_JOINT)
    tau[:, j] += friction * np.tanh(sc["qd"][:, j] / 0.01)
    sc["effort"] = tau + np.random.default_rng(seed).normal(0.0, NOISE, tau.shape)
    return write_bag(path, "mcap", sc)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The bags by (robot, day, k), the fleet run's DIR."""
    root = tmp_path_factory.mktemp("fleet")
    model = core.load_urdf(str(ur5_urdf()))
    bags = {}
    for robot, frictions in ROBOTS.items():
        (root / "bags" / robot).mkdir(parents=True)
        for day, friction in enumerate(frictions):
            for k in range(2):
                bags[(robot, day, k)] = fleet_bag(root / "bags" / robot / f"day{day}_{k}", model, day, friction,
                                                  seed=k + 2 * len(bags))
    broken = root / "bags" / "robot_b" / "broken.mcap"
    broken.write_bytes(b"\x89MCAP0\r\n" + bytes(range(256)) * 8)  # the magic, then nothing readable
    bags[("robot_b", "broken", 0)] = broken
    out = root / "out"
    # A cluster of one worker thread in this process, whose kernels are loaded once (worker
    # processes would each load them: 40 s here instead of 10); the processes of the default
    # local cluster are the same code (--workers N), measured in benchmarks/bench_fleet.py.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        assert main([str(root / "bags"), "--out", str(out), "--scheduler", cluster.scheduler_address, *OPTIONS,
                     *IDENTIFY]) == 0
    return bags, out


def query(out: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(out / "fleet.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_every_bag_has_a_row_and_the_broken_one_its_error(fleet):
    bags, out = fleet
    rows = {Path(b): (robot, status, error, samples)
            for b, robot, status, error, samples in query(out, "SELECT bag, robot, status, error, samples FROM bags")}
    assert set(rows) == {p.resolve() for p in bags.values()}
    for (robot, day, _), path in bags.items():
        got_robot, status, error, samples = rows[path.resolve()]
        assert got_robot == robot
        if day == "broken":
            assert status == "error" and error
        else:
            assert (status, error, samples) == ("ok", None, 239)
    assert {t for (t,) in query(out, "SELECT table_name FROM information_schema.tables")} == {
        "bags", "joint_stats", "identification", "flags"}
    assert query(out, "SELECT count(*) FROM joint_stats") == [(8 * 6,)]
    assert (out / "parquet" / "joint_stats").is_dir() and (out / "parquet" / "flags.parquet").is_file()


def test_joint_stats_are_those_of_the_bag_replayed_alone(fleet, tmp_path):
    bags, out = fleet
    bag = bags[("robot_c", 1, 0)]
    assert replay_main([str(bag), "--out", str(tmp_path / "alone"), *OPTIONS]) == 0
    alone = json.loads((tmp_path / "alone" / "summary.json").read_text())
    stats = {joint: rms for joint, rms in query(
        out, f"SELECT joint, torque_residual_rms FROM joint_stats WHERE bag = '{bag.resolve()}'")}
    assert stats == {joint: row["torque_residual_Nm"]["rms"] for joint, row in alone["joints"].items()}
    start, end = query(out, f"SELECT start_ns, end_ns FROM bags WHERE bag = '{bag.resolve()}'")[0]
    assert start == alone["first_stamp_ns"] and end > start


def test_the_robot_with_unmodelled_friction_is_flagged(fleet):
    _, out = fleet
    flags = query(out, "SELECT robot, joint, kind, z FROM flags ORDER BY kind")
    # the observer reads the unmodelled friction as external torque: collision events too
    assert [(r, j, k) for r, j, k, _ in flags] == [("robot_c", FRICTION_JOINT, kind) for kind in (
        "collision_outlier", "friction_outlier", "residual_outlier")]
    assert all(z > 3.5 for *_, z in flags)


def test_pooled_identification_per_robot_and_day_validated_on_held_out_bags(fleet):
    bags, out = fleet
    rows = query(out, "SELECT robot, period, joint, coulomb, fit_bags, validation_bags, status, "
                      "validation_rms_before, validation_rms_after, parameter_file FROM identification")
    assert len(rows) == 4 * 6  # robots a and b one day, c two; six joints
    model = core.load_urdf(str(ur5_urdf()))
    days = sorted({period for _, period, *_ in rows})  # every robot's first day is the fleet's
    for robot, period, joint, coulomb, fit, held, status, before, after, file in rows:
        truth = ROBOTS[robot][days.index(period)] if joint == FRICTION_JOINT else 0.0
        assert (fit, held, status) == (1, 1, "ok")
        assert coulomb == pytest.approx(truth, rel=0.05, abs=0.02)
        # the other bag of the day, never seen by the fit, is predicted down to the noise
        assert after < 1.5 * NOISE and (truth == 0 or before > 50 * NOISE)
        values = pipeline.load_parameter_file(Path(file), model.joint_names).values
        friction = dynamics_from(model, values).friction  # the node's own load and its checks
        assert friction.coulomb[model.joint_names.index(joint)] == pytest.approx(coulomb)


def test_an_implausible_pooled_fit_writes_no_parameter_file(fleet, tmp_path):
    """The same equations against a URDF whose elbow delivers 5 N m: the 12 N m of friction
    found is refused with the joint and the bound, and no identified.yaml is written."""
    _, out = fleet
    weak = core.load_urdf(ur5_urdf().read_text().replace(
        '<limit effort="150.0" lower="-3.14159265359" upper="3.14159265359" velocity="3.15"/>',
        '<limit effort="5.0" lower="-3.14159265359" upper="3.14159265359" velocity="3.15"/>'))
    assert weak.effort_limit[weak.joint_names.index(FRICTION_JOINT)] == 5.0
    rows = [b for b in read_table(out, "bags").to_pylist() if b["robot"] == "robot_c" and b["status"] == "ok"]
    for b in rows:
        saved = pickle.loads((out / "bags" / b["name"] / identification.EQUATIONS).read_bytes())
        saved["identifier"].urdf = weak
        (tmp_path / "bags" / b["name"]).mkdir(parents=True)
        (tmp_path / "bags" / b["name"] / identification.EQUATIONS).write_bytes(pickle.dumps(saved))
    result = {r["period"]: r for r in identification.pooled(tmp_path, rows, "day") if r["joint"] == FRICTION_JOINT}
    first, second = sorted(result)
    assert result[first]["status"] == "refused" and result[second]["status"] == "refused"
    assert "elbow_joint: friction torque" in result[second]["error"] and "effort limit 5" in result[second]["error"]
    assert not list(tmp_path.glob("identified/**/identified.yaml"))


def period_rows(robot: str, joint: str, coulombs, payload=None, label=None) -> list[dict]:
    """identification rows of one robot and joint, one period a day."""
    return [{"robot": robot, "joint": joint, "period": f"d{d:02d}", "coulomb": c, "status": "ok",
             "start_ns": d * DAY_NS, "payload_mass": payload, "payload_label": label, "payload_link": "tool0",
             "payload_mass_std": 0.01} for d, c in enumerate(coulombs)]


def test_friction_drift_is_flagged_from_the_day_it_stayed_above_the_baseline():
    rng = np.random.default_rng(3)
    days = np.arange(30)
    drifting = 2.0 * (1 + 0.4 * days / 29) + rng.normal(0, 0.02, 30)  # +40 % in 30 days
    noisy = 2.0 + rng.normal(0, 0.02, 30)
    noisy[10] = 3.0  # one bad period is no drift
    rows = period_rows("r1", "j2", drifting) + period_rows("r2", "j2", noisy) + period_rows("r3", "j2", noisy[::-1])
    flags = analysis.friction_drift(rows)
    assert [(f["robot"], f["joint"], f["kind"]) for f in flags] == [("r1", "j2", "friction_drift")]
    limit = np.median(drifting[:analysis.BASELINE]) * (1 + analysis.DRIFT)
    crossed = next(d for d in days if (drifting[d:] > limit).all())  # from then on above the limit
    assert flags[0]["since_ns"] == crossed * DAY_NS and 12 <= crossed <= 18  # +20 % after about 15 days


def test_a_mislabelled_payload_is_flagged():
    rows = (period_rows("r1", "j1", [1.0] * 5, payload=2.02, label=2.0)
            + period_rows("r2", "j1", [1.0] * 5, payload=4.95, label=2.0)  # carries 5 kg, labelled 2
            + period_rows("r3", "j1", [1.0] * 5, payload=0.05, label=None))
    flags = analysis.payload_mismatch(rows)
    assert [(f["robot"], f["joint"], f["value"], f["reference"]) for f in flags] == [("r2", "tool0", 4.95, 2.0)]


def test_the_symptoms_of_a_mislabelled_payload_name_it():
    """A robot's residual and collision outliers are explained by its payload mismatch; another
    robot's outlier, and the payload robot's friction drift, are not."""
    rows = (period_rows("r1", "j1", [1.0] * 5, payload=2.02, label=2.0)
            + period_rows("r2", "j1", [1.0] * 5, payload=4.95, label=2.0)
            + period_rows("r3", "j1", [1.0] * 5, payload=2.0, label=2.0))
    rows += period_rows("r2", "j3", [1.0, 1.0, 1.0, 2.0, 2.0])  # drifting
    start = {f"b{r}": r for r in range(3)}
    bags = [{"bag": b, "status": "ok", "start_ns": s * DAY_NS, "end_ns": s * DAY_NS + 3.6e12} for b, s in start.items()]
    # residual RMS of j1 and j2: r2's far above r1's and r3's on both, and r3's j2 far above too
    stats = [{"bag": f"b{r}", "robot": f"r{r + 1}", "joint": joint, "torque_residual_rms": rms, "collisions": c}
             for r, (joint, rms, c) in enumerate([("j1", 0.1, 0), ("j1", 3.0, 50), ("j1", 0.11, 0)])]
    stats += [{"bag": "b0", "robot": "r1", "joint": "j2", "torque_residual_rms": 0.1, "collisions": 0},
              {"bag": "b1", "robot": "r2", "joint": "j2", "torque_residual_rms": 0.1, "collisions": 0},
              {"bag": "b2", "robot": "r3", "joint": "j2", "torque_residual_rms": 5.0, "collisions": 0},
              {"bag": "b0", "robot": "r4", "joint": "j2", "torque_residual_rms": 0.1, "collisions": 0}]
    flags = {(f["robot"], f["joint"], f["kind"]): f["explained_by"] for f in analysis.flags(bags, stats, rows)}
    assert flags == {("r2", "tool0", "payload_mismatch"): None, ("r2", "j3", "friction_drift"): None,
                     ("r2", "j1", "residual_outlier"): "payload_mismatch",
                     ("r2", "j1", "collision_outlier"): "payload_mismatch",
                     ("r3", "j2", "residual_outlier"): None}


def test_a_drifting_joints_friction_outlier_names_the_drift():
    """A joint whose friction drifted above the fleet's is a friction outlier because of it; a
    joint whose friction was high from the start is an outlier of its own."""
    rows = [row for r, c in (("r1", 1.0), ("r2", 1.02), ("r3", 0.98)) for row in period_rows(r, "j1", [c] * 7)]
    rows += period_rows("r4", "j1", [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0])  # drifted: +100 % from day 3
    rows += period_rows("r5", "j1", [2.0] * 7)  # high all along
    flags = {(f["robot"], f["kind"]): f["explained_by"] for f in analysis.flags([], [], rows)}
    assert flags == {("r4", "friction_drift"): None, ("r4", "friction_outlier"): "friction_drift",
                     ("r5", "friction_outlier"): None}


def docs_sql() -> dict[str, str]:
    """docs/fleet.md's SQL blocks, by the question in the comment that opens each."""
    blocks = re.findall(r"```sql\n(.*?)```", DOCS.read_text(), flags=re.S)
    return {block.splitlines()[0].removeprefix("-- "): block for block in blocks}


def test_the_docs_sql_answers_its_questions(fleet):
    bags, out = fleet
    sql = docs_sql()
    assert len(sql) == 3
    grew, failed, flagged = sql.values()
    assert [(r, j) for r, j, *_ in query(out, grew)] == [("robot_c", FRICTION_JOINT)]
    assert [Path(b) for b, *_ in query(out, failed)] == [bags[("robot_b", "broken", 0)].resolve()]
    assert [r for r, *_ in query(out, flagged)] == ["robot_c"]


def test_a_rerun_replays_only_new_or_changed_bags(fleet, capsys):
    bags, out = fleet
    pooled = {str(p): p.stat().st_mtime_ns for p in out.glob("identified/*/*/pool.json")}
    assert len(pooled) == 4
    capsys.readouterr()
    assert main([str(bags[("robot_a", 0, 0)].parent), "--out", str(out), "--workers", "1", *OPTIONS,
                 *IDENTIFY]) == 0
    assert "2 bags: 0 replayed (0 failed), 2 unchanged" in capsys.readouterr().out
    assert query(out, "SELECT count(*) FROM bags") == [(9,)]  # the bags not given keep their rows
    # the pooled fits of unchanged bags are kept, not solved again
    assert pooled == {str(p): p.stat().st_mtime_ns for p in out.glob("identified/*/*/pool.json")}
    assert query(out, "SELECT count(*) FROM identification WHERE status = 'ok'") == [(24,)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int, grace_s: float = 20.0) -> list[str]:
    """The command lines of the processes still in group `pgid` once `grace_s` has passed (a
    nanny's worker process and multiprocessing's resource tracker end shortly after it)."""
    deadline = time.monotonic() + grace_s
    while True:
        members = [" ".join(p.info["cmdline"] or [])[:120] for p in psutil.process_iter(["cmdline", "status"])
                   if _pgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE]
        if not members or time.monotonic() > deadline:
            return members
        time.sleep(0.2)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_a_cluster_of_separate_processes_gives_the_local_clusters_numbers(fleet, tmp_path):
    """`dask scheduler` and `dask worker` started as a user would (the environment's `dask`
    command, each its own process group), liedyn-fleet --scheduler on robot_a's bags: the same
    rows as the local cluster's run; afterwards no process of either group is left."""
    bags, out = fleet
    dask = Path(sys.executable).with_name("dask")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    commands = [[str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                [str(dask), "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard"]]
    procs = [subprocess.Popen(c, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in commands]
    try:
        assert main([str(bags[("robot_a", 0, 0)].parent), "--out", str(tmp_path / "out"), "--scheduler", address,
                     *OPTIONS, *IDENTIFY]) == 0
    finally:
        for proc in reversed(procs):  # the worker (its nanny ends its worker process), then the scheduler
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    left = {proc.args[1]: group_members(proc.pid) for proc in procs}
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert left == {"scheduler": [], "worker": []}
    stats = ("SELECT bag, joint, torque_residual_rms, torque_residual_max_abs, collisions FROM joint_stats "
             "WHERE robot = 'robot_a' ORDER BY bag, joint")
    rows = "SELECT bag, start_ns, end_ns, samples, status FROM bags WHERE robot = 'robot_a' ORDER BY bag"
    fits = "SELECT period, joint, coulomb, viscous FROM identification WHERE robot = 'robot_a' ORDER BY period, joint"
    for sql in (stats, rows, fits):
        assert query(tmp_path / "out", sql) == query(out, sql) != []


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
    manifest.write_text("bag,robot,urdf,time,identify\nr1/r1_log.mcap,arm-7,arm.urdf,2026-11-01,friction; payload tool0\n"
                        "r2/r2_log.mcap,arm-8,,,\n")
    entries = discover(bags, manifest=manifest)
    assert [(e.robot, e.urdf, e.time, e.identify) for e in entries] == [
        ("arm-7", tmp_path / "site" / "arm.urdf", "2026-11-01", (("friction",), ("payload", "tool0"))),
        ("arm-8", None, None, None)]
    with pytest.raises(ReplayError, match="has no group"):
        discover(bags, robot_pattern="r1")
    with pytest.raises(ReplayError, match="does not match"):
        discover(bags, robot_pattern=r"(r1)_log")
    manifest.write_text("bag,robot\nr1/r1_log.mcap,arm-7\n")
    with pytest.raises(ReplayError, match="r2_log.mcap: not in --manifest"):
        discover(bags, manifest=manifest)


CHROMIUM = Path("/usr/bin/chromium")  # Debian's chromium package (.ci/run installs it)


def test_the_report_renders_in_a_headless_browser(fleet):
    """DIR/report.html from disk in Chromium: no console errors, every plot drawn, the flag
    table listing the flags of the store, the broken bag among the damaged ones."""
    if not CHROMIUM.is_file():
        print("SKIP reason: no Chromium at /usr/bin/chromium (apt-get install -y chromium)")
        pytest.skip("no Chromium at /usr/bin/chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    bags, out = fleet
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(out.parent / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((out / "report.html").as_uri(), wait_until="load")
            plots = page.locator(".js-plotly-plot")
            robots = len({robot for robot, *_ in bags})
            assert plots.count() == 1 + robots  # the overview and one trend figure per robot
            page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {1 + robots}")
            # drawn: the overview heatmap's image and the trends' lines hold data
            assert page.locator("#overview .hm image, #overview .heatmaplayer image").count() >= 1
            assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 4 * robots
            flag_rows = page.locator("#flags tbody tr").all_inner_texts()
            damaged = page.locator("#damaged tbody tr").all_inner_texts()
            link = page.locator("#flags tbody tr a").first.get_attribute("href")
        finally:
            browser.close()
    assert errors == []
    stored = query(out, "SELECT robot, joint, kind FROM flags ORDER BY robot, joint, kind")
    assert [tuple(row.split("\t")[:3]) for row in flag_rows] == stored
    assert len(damaged) == 1 and "broken.mcap" in damaged[0] and "error" in damaged[0]
    assert (out / link).exists()  # the per-bag folder of the bag where the flag began
