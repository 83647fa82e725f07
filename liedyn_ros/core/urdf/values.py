"""Numbers read from URDF attributes; every refusal names the element and the attribute.

A value must be a number (an unexpanded xacro expression `${...}` or `$(...)` is recognised as
one and refused with the command to run), finite, and plausible: lengths, angles, axis
components and mimic values within MAX_MAGNITUDE, masses and inertias within MAX_MASS. The bounds
are far beyond any machine (a 100,000 km link, a 10^12 kg body) and keep every product the
dynamics forms finite (a spatial inertia is at most MAX_MASS * MAX_MAGNITUDE^2 = 1e28; a chain of
3,000 such links stays far below 1e308); an angle of 1e154 rad would overflow its rotation's
Rodrigues formula. Limits may be infinite (no limit), never NaN.
"""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np

from ..model import URDFError
from ..spatial import rpy_to_matrix

__all__ = ["MAX_MAGNITUDE", "MAX_MASS", "check_name", "limit", "not_xacro", "number", "numbers", "origin"]

MAX_MAGNITUDE = 1e8  # m or rad (origins, mimic offsets), axis components and mimic multipliers
MAX_MASS = 1e12  # kg, and kg m^2 for inertia entries

_XACRO = re.compile(r"\$[({]")


def not_xacro(text: str, what: str) -> None:
    if _XACRO.search(text):
        raise URDFError(f"{what}: {text!r} is an unexpanded xacro expression; expand the file with xacro first "
                        "(`xacro robot.urdf.xacro > robot.urdf`) and load the result")


def check_name(name: str | None, what: str) -> str:
    """A link or joint name: present, not blank, not xacro."""
    if name is None or not name.strip():
        raise URDFError(f"{what} has no name; give it a name=\"...\"")
    not_xacro(name, what)
    return name


def _read(text: str, what: str) -> list[float]:
    not_xacro(text, what)
    try:
        return [float(x) for x in text.split()]
    except ValueError:
        raise URDFError(f"{what}: cannot read numbers from {text!r}") from None


def _checked(text: str | None, default: tuple[float, ...], what: str, bound: float) -> list[float]:
    # Python floats, not numpy: a 3,000-link URDF reads some 50,000 attribute values.
    if text is None:
        return list(default)
    values = _read(text, what)
    if len(values) != len(default) or not all(math.isfinite(x) for x in values):
        raise URDFError(f"{what}: expected {len(default)} finite numbers, got {text!r}")
    if any(abs(x) > bound for x in values):
        raise URDFError(f"{what}: {text!r} is beyond the plausible magnitude {bound:g}; check the units")
    return values


def numbers(text: str | None, default: tuple[float, ...], what: str, bound: float) -> np.ndarray:
    """len(default) finite numbers of magnitude <= bound from `text`; `default` when absent."""
    return np.array(_checked(text, default, what, bound), dtype=float)


def number(text: str | None, default: float, what: str, bound: float) -> float:
    return _checked(text, (default,), what, bound)[0]


def limit(text: str | None, what: str) -> float | None:
    """A joint limit: any number but NaN (infinite: no limit); None when absent."""
    if text is None:
        return None
    values = _read(text, what)
    if len(values) != 1 or math.isnan(values[0]):
        raise URDFError(f"{what}: expected one number (not NaN), got {text!r}")
    return values[0]


def origin(elem: ET.Element | None, what: str) -> np.ndarray:
    """The pose T (4x4) an <origin xyz rpy> gives, identity when absent."""
    T = np.eye(4)
    if elem is None:
        return T
    rpy = _checked(elem.get("rpy"), (0.0, 0.0, 0.0), what + " rpy", MAX_MAGNITUDE)
    if any(rpy):  # rpy_to_matrix(0) is exactly the identity: skip its cost on the common case
        T[:3, :3] = rpy_to_matrix(np.array(rpy))
    T[:3, 3] = _checked(elem.get("xyz"), (0.0, 0.0, 0.0), what + " xyz", MAX_MAGNITUDE)
    return T
