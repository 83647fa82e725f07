"""Compiled kernels without the wait: numba builds them in a child process, the caller goes on.

Compiling the single-sample kernels takes half a minute or more on the first run after an
install (numba then caches them next to the sources, where later runs load them in under a
second). A long-running program (the ROS node) starts a `KernelWarmup`, computes its first
samples with the readable reference implementation (`liedyn_ros.core.reference`, the same
results: the tests prove the kernels equal to it) and switches to the kernels when `ready()`
says so. The child process uses another core and leaves the caller's interpreter lock alone.

A marker next to numba's cache records that the child finished for these sources, this
Python, numba and CPU: a later start finds it and loads the cached kernels at once.
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

__all__ = ["KernelWarmup", "NODE_KERNELS", "CONTACT_KERNELS", "MARKER"]

# The kernels of one sample of rnea, gravity and aba (the node without contacts; its momentum
# observer adds "observer_one").
NODE_KERNELS = ("rnea_one", "gravity_one", "hybrid_one")
# With contacts: the whole contact sample, the general path's constrained rnea and aba (the
# reference source, flight) and the contact frames (flight, the kinematic contact source).
CONTACT_KERNELS = ("constrained_terms_one", "constrained_rnea_one", "constrained_aba_one", "contact_frames_many")

_HERE = Path(__file__).parent
MARKER = _HERE / "__pycache__" / "liedyn_fast.warm"


def _environment(names: tuple[str, ...]) -> str:
    """What a cached build depends on: the sources (as drop_stale_cache stamps them), the
    interpreter, numba and the CPU, and the kernel names."""
    import llvmlite.binding as llvm
    import numba

    try:
        stamp = (_HERE / "__pycache__" / "liedyn_fast.stamp").read_text()
    except OSError:
        stamp = "no stamp"
    parts = [stamp, sys.version, numba.__version__, llvm.get_host_cpu_name(), platform.machine(), *sorted(names)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _compile(names: tuple[str, ...]) -> None:
    """Compile (or load from numba's cache) the named single-sample kernels in this process."""
    from .entry import single

    for name in names:
        getattr(single, name)


class KernelWarmup:
    """The named single-sample kernels, compiled in a child process while the caller goes on.

    ``ready()`` is False until they are loaded in this process; it never blocks for the
    compilation itself (only for loading from the cache, under a second, once). ``close()``
    stops a child still compiling.
    """

    def __init__(self, names: tuple[str, ...] = NODE_KERNELS, *, marker: Path = MARKER) -> None:
        self.names = tuple(names)
        self._ready = False
        self._child: subprocess.Popen[bytes] | None = None
        try:
            cached = marker.read_text() == _environment(self.names)
        except OSError:
            cached = False
        if cached:
            self._load()
        else:
            # The child imports this package from where the caller found it (its sys.path, not
            # the working directory, which `python -c` would put first). Its own session keeps a
            # terminal's Ctrl-C for the caller, which stops the child in close().
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            code = f"import sys; del sys.path[0]; from {__name__} import main; main(sys.argv[1], sys.argv[2:])"
            self._child = subprocess.Popen(
                [sys.executable, "-c", code, str(marker), *self.names], env=env, start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )

    @property
    def compiling(self) -> bool:
        """True while the child process is compiling."""
        return self._child is not None and self._child.poll() is None

    def ready(self) -> bool:
        """True once the kernels are loaded here; loads them when the child has just finished.

        A child that failed (no writable cache, a crash) leaves the compilation to this
        process, as without a warm-up.
        """
        if self._ready:
            return True
        if self.compiling:
            return False
        self._load()
        return True

    def _load(self) -> None:
        _compile(self.names)
        self._ready = True
        self._child = None

    def close(self) -> None:
        """Stop a child still compiling (its partial work is not cached)."""
        if self.compiling and self._child is not None:
            self._child.terminate()
            self._child.wait()
        self._child = None


def main(marker: str, names: list[str]) -> None:
    """The child: compile, then mark the cache as holding these kernels."""
    _compile(tuple(names))
    try:
        Path(marker).write_text(_environment(tuple(names)))
    except OSError:  # a read-only install: numba caches elsewhere, the marker is only a shortcut
        pass


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
