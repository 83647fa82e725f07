"""The compiled fast path: numba kernels equal to `liedyn_ros.core.reference` (proven by tests).

Each algorithm has a single-sample kernel (`*_one`, which also checks lengths, NaN and the pose
and returns a status instead of raising) and a batch kernel (`*_many`, a range of samples, spread
over threads by `threads.run_batch`).
Kernels return OK, BAD_INPUT or SINGULAR; `liedyn_ros.core.dynamics` turns anything but OK into
the reference's precise ValueError.
"""
from __future__ import annotations

from .entry import drop_stale_cache
from .notice import install as _install_compile_notice

_install_compile_notice()  # a line before the first compilation, not a silent minute
drop_stale_cache()  # before any kernel of this package (or one built on its steps) loads from the cache

from .kinematics import BAD_INPUT, OK, SINGULAR  # noqa: E402
from .layout import FastModel, fast_model  # noqa: E402

__all__ = ["FastModel", "fast_model", "OK", "BAD_INPUT", "SINGULAR"]
