"""A moving joint's own data: its screw axis, its limits and its <mimic>."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from ..model import Flaw, URDFLimitWarning
from ..model import URDFError
from .values import MAX_MAGNITUDE, limit, number, numbers

__all__ = ["Mimic", "joint_limits", "mimic_of", "screw"]

Mimic = tuple[str, float, float]  # (leader joint, multiplier, offset): q = multiplier * q_leader + offset


def screw(joint: ET.Element, name: str) -> np.ndarray:
    """S in the child frame: (axis, 0) for a revolute or continuous joint, (0, axis) for a prismatic one."""
    axis_el = joint.find("axis")
    axis = numbers(axis_el.get("xyz") if axis_el is not None else None, (1.0, 0.0, 0.0), f"joint {name!r} axis xyz",
                   MAX_MAGNITUDE)
    norm = np.linalg.norm(axis)
    if norm < 1e-12:
        raise URDFError(f"joint {name!r}: zero axis; give <axis xyz=\"...\"> a nonzero direction")
    S = np.zeros(6)
    S[(3 if joint.get("type") == "prismatic" else 0):][:3] = axis / norm
    return S


def joint_limits(joint: ET.Element, name: str, flaws: list[Flaw]) -> dict[str, float | None]:
    """lower, upper, velocity and effort from <limit> (None when absent; a continuous joint has no position limit).

    A negative velocity or effort limit loads as its magnitude (a limit bounds |qd| and |tau|),
    with a flaw: urdfdom accepts it, Pinocchio refuses it.
    """
    el = joint.find("limit")
    lim = {k: limit(el.get(k) if el is not None else None, f"joint {name!r} limit {k}")
           for k in ("lower", "upper", "velocity", "effort")}
    if joint.get("type") == "continuous":
        lim["lower"], lim["upper"] = None, None
    for k in ("velocity", "effort"):
        if lim[k] is not None and lim[k] < 0:
            flaws.append(Flaw("joint", name, f"joint {name!r}: negative {k} limit {lim[k]:g}",
                              f"give <limit {k}=...> a value >= 0", f"its magnitude {-lim[k]:g} is used",
                              URDFLimitWarning))
            lim[k] = -lim[k]
    return lim


def mimic_of(joint: ET.Element, name: str) -> Mimic | None:
    el = joint.find("mimic")
    if el is None:
        return None
    what = f"joint {name!r} mimic"
    return (el.get("joint"), number(el.get("multiplier"), 1.0, what + " multiplier", MAX_MAGNITUDE),
            number(el.get("offset"), 0.0, what + " offset", MAX_MAGNITUDE))
