"""Batches spread over threads: each `*_many` kernel releases the GIL and computes a range of samples.

numba's `parallel=True` hands even a one-sample batch to its thread pool, which costs tens of
microseconds on a quiet machine and milliseconds on a loaded one, where a single sample with
external wrenches takes the batch path too. Here a small batch runs on the calling thread alone,
and a large one is split over `numba.config.NUMBA_NUM_THREADS` threads (the CPU count, or the
NUMBA_NUM_THREADS environment variable) of a pool kept for the process.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from numba import config

__all__ = ["run_batch", "SAMPLES_PER_THREAD"]

# Fewer samples than this per thread are not worth a hand-over (tens of microseconds).
SAMPLES_PER_THREAD = 64

_pool: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    """A forked child has none of the parent's threads: it starts a pool of its own when needed."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def run_batch(kernel: Callable[..., int], B: int, *args) -> int:
    """kernel(*args, start, stop) over the samples [0, B), on up to NUMBA_NUM_THREADS threads.

    Returns the worst (largest) status the calls report.
    """
    global _pool
    threads = max(1, min(config.NUMBA_NUM_THREADS, B // SAMPLES_PER_THREAD))
    if threads == 1:
        return kernel(*args, 0, B)
    if _pool is None:
        _pool = ThreadPoolExecutor(config.NUMBA_NUM_THREADS - 1, thread_name_prefix="liedyn")
    bounds = [B * k // threads for k in range(threads + 1)]
    others = [_pool.submit(kernel, *args, bounds[k], bounds[k + 1]) for k in range(1, threads)]
    status = kernel(*args, 0, bounds[1])  # the calling thread takes the first share
    return max([status] + [f.result() for f in others])
