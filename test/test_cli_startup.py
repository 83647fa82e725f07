"""`liedyn-replay --help` and argument errors answer at once: the parser imports none of the
replay's heavy modules (they are imported once the arguments are parsed). Checked from inside
the subprocess, by what it holds in sys.modules, not by a timing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from liedyn_ros.pipeline.parameters import PARAMETERS
from liedyn_ros.replay import cli
from liedyn_ros.replay.accel import SavgolSettings
from liedyn_ros.replay.identify import MIN_SPEED

HEAVY = ("numpy", "numba", "scipy", "matplotlib", "cvxpy", "rosbags", "tqdm")
ROOT = Path(__file__).resolve().parents[1]

# Runs the console script's main with ARGV and prints the heavy modules it imported.
PROBE = textwrap.dedent("""
    import atexit, sys
    atexit.register(lambda: print("loaded:", *[m for m in {heavy!r} if m in sys.modules], file=sys.stderr))
    from liedyn_ros.replay.cli import main
    sys.exit(main({argv!r}))
""")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, argv=argv)], env=env, text=True,
                          capture_output=True, timeout=120)


def test_help_imports_nothing_heavy():
    proc = _run(["--help"])
    assert proc.returncode == 0, proc.stderr
    assert "usage: liedyn-replay" in proc.stdout
    assert proc.stderr.strip() == "loaded:"


@pytest.mark.parametrize("argv", [["--out", "x"], ["bag", "--out", "x", "--sg-window", "many"]])
def test_argument_error_imports_nothing_heavy(argv):
    proc = _run(argv)
    assert proc.returncode == 2
    *_, error, loaded = proc.stderr.strip().splitlines()
    assert error.startswith("liedyn-replay: error: ")
    assert loaded == "loaded:"


def test_parser_defaults_are_the_replays():
    """The defaults cli repeats (to stay light) are those of the modules it stands for."""
    args = cli.build_parser().parse_args(["bag", "--out", "x"])
    assert (args.sg_window, args.sg_order) == (SavgolSettings.window, SavgolSettings.polyorder)
    assert args.identify_min_speed == MIN_SPEED
    assert cli.PARAMETER_DEFAULTS == {name: PARAMETERS[name][0] for name in cli.PARAMETER_OPTIONS}
