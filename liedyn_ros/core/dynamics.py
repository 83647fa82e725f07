"""The public algorithms: validate the inputs, run the fastest implementation, restore shapes.

The readable reference implementations live in `liedyn_ros.core.reference`.
"""
from __future__ import annotations

from .reference.coriolis import coriolis_matrix
from .reference.hybrid import aba, hybrid
from .reference.mass_matrix import mass_matrix
from .reference.rnea import gravity, rnea

__all__ = ["rnea", "aba", "gravity", "mass_matrix", "coriolis_matrix", "hybrid"]
