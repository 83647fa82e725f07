"""Compiled kernels without the wait: numba builds them in a child process, the caller goes on.

Compiling the kernels a program needs takes half a minute or more on the first run after an
install (numba then caches them, next to the sources or in ``NUMBA_CACHE_DIR``, where later runs
load them in under a second). A long-running program (the ROS node) starts a `KernelWarmup`,
computes its first samples with the readable reference implementation
(`liedyn_ros.core.reference`, the same results: the tests prove the kernels equal to it) and
switches to the kernels when `ready()` says so. The child process uses another core and leaves
the caller's interpreter lock alone.

Whether the kernels are cached is asked of numba's cache itself, never of a record of an
earlier run that could disagree with it: `load_cached` loads what the cache holds and refuses to
compile the rest (numba's "numba:compile" event is turned into an exception), so the calling
thread never compiles, whatever the cache holds.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any

__all__ = ["CONTACT_KERNELS", "LOOP_CONTACT_KERNELS", "LOOP_KERNELS", "NODE_KERNELS", "KernelWarmup", "load_cached"]

# The kernels of one sample of rnea, gravity and aba (the node without contacts; its momentum
# observer adds "observer_one").
NODE_KERNELS = ("rnea_one", "gravity_one", "hybrid_one")
# With contacts: the whole contact sample (the node's, with the checks of its outputs: contact_sample_one;
# the replay's blocks: constrained_terms_one), the general path's constrained rnea and aba (the reference
# source, flight), the contact frames and Jacobian (flight, the kinematic contact source, foot sensors'
# forces) and the momentum observer's fit of the contact forces (pipeline.observed).
CONTACT_KERNELS = ("constrained_terms_one", "contact_sample_one", "constrained_rnea_one", "constrained_aba_one",
                   "contact_kinematics_many", "contact_fit_many")
# With loop closures (pipeline.routes.loops, the core's readable constrained paths): two batch
# kernels of core.dynamics' general path, rnea_many (core.constrained_rnea of the motion and the
# robot at rest, one stacked call) and hybrid_many (core.constrained_aba's M^-1 A^T, m solves in one
# call, whatever the batch), and the constraints' A, c, A v and e (constraint_terms_many, a locked
# single-sample kernel of core.fast.entry, batch-capable), the least-norm minimisers of constrained_rnea and
# constrained_aba (least_norm_forces_many, psd_solve_many: rank-deficient loops), the loop forces in flight
# (closest_forces_many), and the node's whole sample in one call (loop_sample_one: the others serve blocks and
# the samples it declines); with contacts too, their frames and Jacobian (checks, the kinematic contact source) and
# the observer's fit of the contact forces.
BATCH_KERNELS = ("rnea_many", "hybrid_many")
LOOP_KERNELS = BATCH_KERNELS + ("constraint_terms_many", "least_norm_forces_many", "psd_solve_many",
                                "closest_forces_many", "loop_sample_one")
LOOP_CONTACT_KERNELS = ("contact_kinematics_many", "contact_fit_many")


def _batch_signature(name: str) -> tuple:
    """(batch kernel, the one signature core.dynamics' general path calls it with) by name. Unlike
    the single-sample kernels these are not locked (any caller may compile them for other arrays):
    the warm-up builds this signature (checks.prepare's C-contiguous float64 batches, the model's
    mf/mi tables, Python ints for sizes and ranges), so that the cache entry the child writes is
    the one the caller's first call finds."""
    from numba import types

    from . import aba, rnea

    vecs, tables, poses, flags, i = types.float64[:, ::1], types.int64[:, ::1], types.float64[:, :, ::1], \
        types.boolean[::1], types.int64
    # (mf, mi, ws_size, q, v, a or u, [prescribed,] T, f_body, f_base, out..., start, stop)
    return {
        "rnea_many": (rnea.rnea_many, (vecs, tables, i, vecs, vecs, vecs, poses, poses, vecs, vecs, i, i)),
        "hybrid_many": (aba.hybrid_many, (vecs, tables, i, vecs, vecs, vecs, flags, poses, poses, vecs, vecs, vecs, i, i)),
    }[name]


def _load(name: str) -> None:
    """Compile the named kernel (a single-sample one of core.fast.entry.single or a batch one of
    _batch_signature), or load it from numba's cache."""
    from .entry import single

    if name in BATCH_KERNELS:
        kernel, signature = _batch_signature(name)
        kernel.compile(signature)
    else:
        getattr(single, name)


def _dispatcher(name: str) -> Any:
    """The named kernel's numba dispatcher (nothing compiled or loaded)."""
    from .entry import _signature

    return (_batch_signature(name) if name in BATCH_KERNELS else _signature(name))[0]


class _NotCached(Exception):
    """Raised in place of a compilation while `load_cached` runs."""


def _refusing_listener() -> Any:
    """A numba event listener that stops every compilation before it starts."""
    from numba.core import event

    class RefuseCompilation(event.Listener):
        def on_start(self, event: Any) -> None:
            raise _NotCached(getattr(event.data.get("dispatcher"), "__name__", "a kernel"))

        def on_end(self, event: Any) -> None:
            pass

    return RefuseCompilation()


def load_cached(names: tuple[str, ...]) -> tuple[str, ...]:
    """Load the named kernels (single-sample ones of core.fast.entry.single, batch ones of
    BATCH_KERNELS) from numba's cache into this process, compiling none of them; returns the names
    the cache does not hold (loaded: ``()``).

    A kernel already in the process counts as loaded. Takes well under a second for the node's
    kernels (numba's own start-up included), however many are missing.
    """
    from numba.core import event

    missing = []
    with event.install_listener("numba:compile", _refusing_listener()):
        for name in names:
            try:
                _load(name)
            except _NotCached:
                missing.append(name)
    return tuple(missing)


def _may_be_cached(names: tuple[str, ...]) -> bool:
    """False when numba's cache has no index file for any of the kernels: nothing to load, so the
    start of numba's compiler that any load costs (half a second) is left to later. True when it
    may hold some of them (or numba's internals are not the ones read here)."""
    try:
        return any(os.path.exists(_dispatcher(name)._cache._cache_file._index_path) for name in names)
    except AttributeError:
        return True


def _compile(names: tuple[str, ...]) -> None:
    """Compile (or load from numba's cache) the named kernels in this process."""
    for name in names:
        _load(name)


def _last_line(log: IO[bytes]) -> str:
    """The last non-empty line of the child's error output."""
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - 4096))
    lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


class KernelWarmup:
    """The named kernels: loaded from numba's cache at once when it holds them,
    else compiled in a child process while the caller goes on.

    ``ready()`` is False until they are loaded in this process; it never compiles (it loads from
    the cache, under a second, once the child has finished). When the kernels cannot be had
    (the child failed, or what it compiled is not in the cache this process reads) ``failure``
    says why and ``ready()`` stays False: the caller keeps its reference path. ``close()`` stops
    a child still compiling; a child also stops by itself when the caller's process ends.
    """

    def __init__(self, names: tuple[str, ...] = NODE_KERNELS) -> None:
        self.names = tuple(names)
        self.failure: str | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._missing = load_cached(self.names) if _may_be_cached(self.names) else self.names
        if self._missing:
            self._start_child()

    def _start_child(self) -> None:
        # The child imports this package from where the caller found it (its sys.path, not the
        # working directory, which `python -c` would put first). Its own session keeps a
        # terminal's Ctrl-C for the caller, which stops the child in close().
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        code = f"import sys; del sys.path[0]; from {__name__} import main; main(int(sys.argv[1]), sys.argv[2:])"
        self._log = tempfile.TemporaryFile()
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-c", code, str(os.getpid()), *self._missing], env=env, start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            )
        except OSError as exc:
            self.failure = f"cannot start the compiling process: {exc}"

    @property
    def compiling(self) -> bool:
        """True while the child process is compiling."""
        return self._child is not None and self._child.poll() is None

    def ready(self) -> bool:
        """True once the kernels are loaded here; loads them from the cache when the child has
        just finished (never compiling them here)."""
        if not self._missing:
            return True
        if self.failure is not None or self.compiling:
            return False
        self._finish()
        return not self._missing

    def _finish(self) -> None:
        """After the child: load what it cached, or say why the kernels cannot be had."""
        assert self._child is not None and self._log is not None
        code, self._child = self._child.returncode, None
        if code != 0:
            self.failure = f"the compiling process failed (exit code {code}): {_last_line(self._log)}"
        else:
            self._missing = load_cached(self._missing)
            if self._missing:
                self.failure = (f"numba's cache does not hold {', '.join(self._missing)} after the compiling "
                                "process built them (is the cache writable, NUMBA_CACHE_DIR the same?)")
        self._log.close()
        self._log = None

    def close(self) -> None:
        """Stop a child still compiling (its partial work is not cached)."""
        child, self._child = self._child, None
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def _exit_with(parent: int) -> None:
    """End this process as soon as ``parent`` is gone (killed, crashed, exited without close())."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


BACKGROUND_NICE = 10  # the child's niceness above the node's own: compiling is background work


def _background() -> None:
    """Make this process background work: out of a real-time policy it inherited (a node started
    with `chrt -f` on a robot would otherwise compile for minutes at real-time priority, starving
    what shares its cores) and BACKGROUND_NICE nicer. Before any thread starts: Linux sets the
    policy per thread, and threads inherit it from the one that creates them."""
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    os.nice(BACKGROUND_NICE)


def main(parent: int, names: list[str]) -> None:
    """The child: compile the kernels into numba's cache (loading those it already holds), as
    background work (_background)."""
    _background()
    _exit_with(parent)
    _compile(tuple(names))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
