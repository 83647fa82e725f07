"""Readable reference implementations: each reads like the paper's table it cites.

They define the results; the fast path (liedyn_ros.core.fast) is proven equal to them by tests.
"""
from __future__ import annotations

from .coriolis import coriolis_matrix
from .hybrid import aba, hybrid
from .mass_matrix import mass_matrix
from .rnea import gravity, rnea

__all__ = ["rnea", "aba", "gravity", "mass_matrix", "coriolis_matrix", "hybrid"]
