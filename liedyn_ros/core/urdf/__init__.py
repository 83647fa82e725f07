"""URDF loading: the XML read as ROS' own parser reads it, checked, and turned into a Model.

document  the XML (a file or a robot_description string) -> element tree, names as written
values    numeric attributes: numbers, finite, of plausible magnitude; refusals name the element
tree      links and joints: named, one parent each, one root, no loop; iterative depth-first walk
inertia   link inertias, lumped through fixed joints
joints    a moving joint's screw axis, limits and mimic
mimic     mimic joints resolved to their leaders (q_body = P q + q_offset)
build     load_urdf
"""
from __future__ import annotations

from .build import load_urdf
from .values import MAX_MAGNITUDE, MAX_MASS

__all__ = ["load_urdf", "MAX_MAGNITUDE", "MAX_MASS"]
