"""Stopping the node's process by Ctrl-C or SIGTERM, at any moment, is quiet and exits 0.

ROS-free: liedyn_ros.node_main's StopSignals, in processes of their own. While the heavy
imports run a signal ends the process at once; once armed, signals (repeated ones too) only
record a request that the spin loop polls. The stops of the real node under ROS 2 are measured
by the launch tests and by the trials described in the README.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PYTHONPATH = os.pathsep.join(p for p in sys.path if p)


def _start(code: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    return proc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_imports_ends_the_process_quietly(signum: int) -> None:
    proc = _start("""
        from liedyn_ros.node_main import StopSignals
        StopSignals.install()
        print("started", flush=True)
        import numpy, scipy.linalg, numba  # the node's heavy imports (seconds), then more work
        import time
        time.sleep(60)
    """)
    time.sleep(0.3)  # inside the imports
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err


def test_once_armed_signals_are_a_request_polled_by_the_loop() -> None:
    proc = _start("""
        import os, signal, time
        from liedyn_ros.node_main import StopSignals
        stop = StopSignals.install()
        stop.arm()
        print("started", flush=True)
        deadline = time.monotonic() + 30
        while stop.requested is None and time.monotonic() < deadline:
            sum(range(1000))  # a callback at work: no exception is raised into it
        os.kill(os.getpid(), signal.SIGTERM)  # a second signal while stopping changes nothing
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        print(signal.Signals(stop.requested).name, flush=True)
    """)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err
    assert out.strip() == "SIGINT"


def test_signals_while_the_process_ends_are_ignored() -> None:
    """After the node's release, a late signal (launch's own SIGINT right after a terminal's
    Ctrl-C) must not kill the interpreter while it finalizes (exit code -2)."""
    proc = _start("""
        import os, signal, time
        from liedyn_ros.node_main import StopSignals
        stop = StopSignals.install()
        stop.arm()
        print("started", flush=True)
        stop.ignore()

        class Late:  # deleted while the interpreter finalizes its modules, its handlers reset by then
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)

        late = Late()
    """)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err
