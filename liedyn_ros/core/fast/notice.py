"""One line on stderr before numba's compiler first runs in a process, with what it costs: the
first call of an algorithm in a fresh install would otherwise wait seconds to a minute in silence.

It listens to numba's "numba:run_pass" event, sent only while a kernel is really compiled: loading
from the cache, and a compilation refused before it starts (`warmup.load_cached`), say nothing.
"""
from __future__ import annotations

import sys
from typing import Any

NOTICE = ("liedyn_ros: compiling numba kernels on first use (10-80 s per algorithm on two cores; "
          "cached, later runs load them in under a second)")


def install() -> None:
    """Print NOTICE once, when this process first compiles a kernel."""
    from numba.core import event

    class FirstCompile(event.Listener):
        shown = False  # stays registered: unregistering inside numba's broadcast loop skips a listener

        def on_start(self, event_: Any) -> None:
            if not self.shown:
                self.shown = True
                print(NOTICE, file=sys.stderr, flush=True)

        def on_end(self, event_: Any) -> None:
            pass

    event.register("numba:run_pass", FirstCompile())
