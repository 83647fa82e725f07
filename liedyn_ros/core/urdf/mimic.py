"""Mimic joints resolved to their leaders: the map q_body = P q + q_offset.

A mimic whose leader is no moving joint, or that closes a mimic cycle, is dropped (the joint
then moves on its own, as in Pinocchio and KDL) and recorded as a flaw. Along a chain of mimics
the multipliers multiply: the product must stay within the plausible magnitude too.
"""
from __future__ import annotations

import numpy as np

from ..model import Flaw, URDFError
from .joints import Mimic
from .values import MAX_MAGNITUDE

__all__ = ["drop_broken_mimics", "mimic_map"]


def drop_broken_mimics(joints: list[str], types: dict[str, str | None], mimics: list[Mimic | None],
                       flaws: list[Flaw]) -> list[Mimic | None]:
    """`mimics` (one per moving joint in `joints`) without those whose leader chain ends nowhere.

    types: every URDF joint's type, to say what a mimic's leader is.
    """
    index = {name: i for i, name in enumerate(joints)}
    kept = list(mimics)
    for i, mimic in enumerate(mimics):
        if mimic is None:
            continue
        leader, seen = mimic[0], {joints[i]}
        while leader in index and leader not in seen and kept[index[leader]] is not None:
            seen.add(leader)
            leader = kept[index[leader]][0]
        if leader in index and leader not in seen:
            continue
        named = mimic[0]
        why = ("which is not in the URDF" if named not in types else
               f"which is a {types[named]} joint" if named not in index else
               "and the mimic joints form a cycle")
        flaws.append(Flaw("joint", joints[i], f"joint {joints[i]!r}: mimics {named!r}, {why}",
                          "name a moving joint in its <mimic joint=...>, or remove the <mimic>",
                          "the joint moves on its own (its own coordinate)"))
        kept[i] = None
    return kept


def mimic_map(joints: list[str], mimics: list[Mimic | None]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(coordinate joints, P, q_offset): one coordinate per joint that mimics none, in `joints` order."""
    coordinates = tuple(name for name, m in zip(joints, mimics) if m is None)
    column = {name: k for k, name in enumerate(coordinates)}
    index = {name: i for i, name in enumerate(joints)}
    P = np.zeros((len(joints), len(coordinates)))
    q_offset = np.zeros(len(joints))
    for i, name in enumerate(joints):
        mult, off, cur = 1.0, 0.0, i
        while mimics[cur] is not None:
            leader, m, o = mimics[cur]
            mult, off = mult * m, off * m + o  # q = m (m' q_leader + o') + o
            cur = index[leader]
        if not (abs(mult) <= MAX_MAGNITUDE and abs(off) <= MAX_MAGNITUDE):  # NaN too: inf * 0
            raise URDFError(f"joint {name!r}: mimic chain to {joints[cur]!r} gives multiplier {mult:g} and offset "
                            f"{off:g}, beyond the plausible magnitude {MAX_MAGNITUDE:g}")
        P[i, column[joints[cur]]] = mult
        q_offset[i] = off
    return coordinates, P, q_offset
