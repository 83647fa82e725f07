"""The replay never passes a meaningless result off as a success (issue 16): each mistake a new
user makes on a real recording gives a one-line error, or a warning in the printed report and in
summary.json, saying what to do instead. Bags are built here (test_replay's writers)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from liedyn_ros import core, pipeline
from liedyn_ros.replay import ReplayError, ReplayOptions, replay
from liedyn_ros.replay import run as replay_run
from liedyn_ros.replay.cli import main
from test_replay import scenario, ur5_urdf, write_bag


@pytest.fixture(scope="module")
def model():
    return core.load_urdf(str(ur5_urdf()))


@pytest.fixture(scope="module")
def bag(tmp_path_factory, model):
    """Half a second of UR5 joint states (mcap) with efforts."""
    return write_bag(tmp_path_factory.mktemp("bag") / "in", "mcap", scenario(model, duration=0.5))


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args] + ["--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    """The error output, checked to be one message line and no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("liedyn-replay: error: "), err
    return lines[0]


# --------------------------------------------------------------- 6. a reused --out


def test_reused_out_keeps_nothing_of_an_earlier_run(tmp_path, bag):
    out = tmp_path / "out"
    first = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False))
    assert {Path(f).name for f in first.files} == {"torques.png", "torque_residuals.png", "accelerations.png"}
    second = replay([bag], ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, plots=False))
    assert second.files == [] and not list(out.glob("*.png"))  # no stale plots of the first run
    assert json.loads((out / "summary.json").read_text())["files"] == []


def test_out_with_foreign_files_is_refused_untouched(tmp_path, bag, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = run_cli(capsys, bag, "--out", out, "--urdf", ur5_urdf())
    assert code == 2 and "notes.txt" in one_line_error(err) and "new or empty directory" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


# ------------------------------------------------------- 7. messages, not tracebacks


def test_out_naming_a_file(tmp_path, bag, capsys):
    target = tmp_path / "results.txt"
    target.write_text("x")
    code, _, err = run_cli(capsys, bag, "--out", target, "--urdf", ur5_urdf())
    assert code == 2 and "is a file; give a directory" in one_line_error(err)


def test_gravity_nan(tmp_path, bag, capsys):
    code, _, err = run_cli(capsys, bag, "--out", tmp_path / "o", "--urdf", ur5_urdf(), "--gravity", "0", "0", "nan")
    assert code == 2 and "--gravity needs three finite numbers" in one_line_error(err)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------- 8. messages


def test_xacro_file_says_how_to_expand_it(tmp_path, bag, capsys):
    xacro = tmp_path / "arm.urdf"  # the suffix does not give it away; the content does
    xacro.write_text('<robot name="arm" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                     '<xacro:property name="l" value="0.3"/><xacro:include filename="links.xacro"/></robot>')
    code, _, err = run_cli(capsys, bag, "--out", tmp_path / "o", "--urdf", xacro)
    line = one_line_error(err)
    assert code == 2 and "is a xacro file" in line and "xacro FILE > robot.urdf" in line


def test_expanded_urdf_with_the_xacro_namespace_loads(tmp_path, bag):
    """xacro leaves xmlns:xacro on the robot element of the URDF it writes: that is no xacro file."""
    assert "xmlns:xacro" in ur5_urdf().read_text()
    assert replay([bag], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf(), progress=False, plots=False)).processed > 0


def test_empty_directory_is_not_a_bag(tmp_path):
    empty = tmp_path / "recording"
    empty.mkdir()
    with pytest.raises(ReplayError, match=r"recording: not a bag \(a directory without metadata.yaml"):
        replay([empty], ReplayOptions(out=tmp_path / "o", urdf=ur5_urdf()))


def test_jobs_name_a_failing_bag_once(tmp_path, bag, capsys):
    missing = tmp_path / "missing_bag"
    code, out, err = run_cli(capsys, bag, missing, "--out", tmp_path / "o", "--urdf", ur5_urdf(),
                             "--jobs", "1", "--no-plots")
    assert code == 1 and "tau res RMS" in out
    assert one_line_error(err).count("missing_bag") == 1


def test_core_functions_name_a_non_model_argument(model):
    q = np.zeros(model.n)
    for call in (lambda: core.rnea(str(ur5_urdf()), q, q, q), lambda: core.aba(None, q, q, q),
                 lambda: core.rnea_derivatives("panda.urdf", q, q, q),
                 lambda: core.rnea_time_derivatives("panda.urdf", q, [q, q])):
        with pytest.raises(TypeError, match=r"^model: expected a liedyn_ros.core.Model \(from load_urdf\), got"):
            call()


# -------------------------------------------------- 9. the compile notice only when slow


def test_compile_notice_only_when_preparing_takes_long(tmp_path, bag, capsys, monkeypatch):
    replay([bag], ReplayOptions(out=tmp_path / "warm", urdf=ur5_urdf(), plots=False))  # kernels loaded
    assert "compiling" not in capsys.readouterr().err
    real = pipeline.prepare_kernels

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(replay_run.pipeline, "prepare_kernels", slow)
    monkeypatch.setattr(replay_run, "PREPARE_NOTICE_S", 0.1)
    replay([bag], ReplayOptions(out=tmp_path / "cold", urdf=ur5_urdf(), plots=False))
    assert "compiling the dynamics kernels" in capsys.readouterr().err
