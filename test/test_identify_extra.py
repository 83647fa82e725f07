"""cvxpy is the "identify" extra: without it, `liedyn-replay --identify` stops before the replay
with one line saying what to install (exit code 2), and a replay without --identify needs nothing."""
from __future__ import annotations

import importlib.util

from liedyn_ros.replay import cli


def test_identify_without_cvxpy_says_what_to_install(monkeypatch, tmp_path, capsys):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cvxpy" else find_spec(name, *a))
    code = cli.main([str(tmp_path / "no_bag_read"), "--out", str(tmp_path / "out"), "--identify", "friction"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "pip install 'liedyn_ros[identify]'" in err
    assert not (tmp_path / "out").exists()  # stopped before the replay wrote anything
