"""What a constraint is: contacts and loop closures on named links, compiled once per model.

A constraint holds a frame C still. C sits on a URDF link (any link, also one merged into its
moving ancestor by a fixed joint) at the pose `offset` in that link's frame. Its rows of A(q)
are rows of C's body Jacobian:

    point contact   the velocity of C's origin, in C's axes          3 rows, lam = force f
    flat contact    C's whole body twist V_C = (omega, v)            6 rows, lam = wrench (m, f)
    loop "point"    the velocity of origin a relative to origin b    3 rows, lam = f on link_a
    loop "weld"     V_a - Ad_{T_ab} V_b, the twist of a relative to b 6 rows, lam = (m, f) on link_a

each expressed in the constraint's own frame (C, or frame a of a loop), so lam is what the
constraint applies to the robot there (to link_a for a loop; link_b feels the opposite).
`ConstraintSet` resolves the names once; the algorithms take it (or a plain list, compiled on
the spot) and a per-sample boolean `active` mask over the constraints.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..checks import check_pose
from ..model import Model

__all__ = ["Contact", "LoopClosure", "ConstraintSet", "constraint_set"]

_ROWS = {"point": 3, "flat": 6, "weld": 6}


def _offset(name: str, offset) -> np.ndarray:
    T = np.eye(4) if offset is None else check_pose(name, offset)
    if T.shape != (4, 4):
        raise ValueError(f"{name}: expected one 4x4 pose, got shape {T.shape}")
    return T


@dataclass(frozen=True, eq=False)
class Contact:
    """A contact of `link` with the fixed world at the frame `offset` (4x4 pose in the link's frame).

    kind "point": the contact point stands still (velocity and classical acceleration zero), 3 rows.
    kind "flat": the whole contact frame stands still (body twist and its derivative zero), 6 rows.
    frame "local": rows and lam in the contact frame's axes; "world": in the world's axes at the
    contact point (Pinocchio's LOCAL_WORLD_ALIGNED), handy for a foot whose frame turns with the
    shank. The axes' z is the surface normal pointing into the robot (for `contact_wrench_checks`).
    """

    link: str
    kind: str = "point"
    offset: np.ndarray | None = field(default=None, repr=False)
    frame: str = "local"

    def __post_init__(self) -> None:
        if self.kind not in ("point", "flat"):
            raise ValueError(f"kind: a Contact is 'point' or 'flat', got {self.kind!r}")
        if self.frame not in ("local", "world"):
            raise ValueError(f"frame: a Contact's rows are in its 'local' or the 'world' axes, got {self.frame!r}")
        object.__setattr__(self, "offset", _offset("offset", self.offset))


@dataclass(frozen=True, eq=False)
class LoopClosure:
    """Frame a (on link_a at offset_a) and frame b (on link_b at offset_b) coincide.

    kind "weld": the two frames coincide (6 rows); "point": their origins coincide (3 rows, a ball
    joint). lam is what the closure applies to link_a, in frame a.
    """

    link_a: str
    link_b: str
    kind: str = "weld"
    offset_a: np.ndarray | None = field(default=None, repr=False)
    offset_b: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in ("weld", "point"):
            raise ValueError(f"kind: a LoopClosure is 'weld' or 'point', got {self.kind!r}")
        object.__setattr__(self, "offset_a", _offset("offset_a", self.offset_a))
        object.__setattr__(self, "offset_b", _offset("offset_b", self.offset_b))


@dataclass(frozen=True, eq=False)
class ConstraintSet:
    """The constraints of one model, resolved to bodies (build once, reuse for every sample).

    Per constraint k: rows[k]:rows[k+1] are its rows of A; body_a[k] / body_b[k] the bodies
    carrying frames a and b (-1: the root link; body_b is -2 for a contact, the world); T_a[k] /
    T_b[k] the frames' poses in those bodies; point[k] whether it holds a point (3 rows) or a
    frame (6 rows). `names` label the constraints in messages.
    """

    model: Model
    constraints: tuple
    names: tuple[str, ...]
    rows: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    T_a: np.ndarray
    T_b: np.ndarray
    point: np.ndarray
    is_contact: np.ndarray
    world: np.ndarray

    @property
    def m(self) -> int:
        """Number of rows of A (all constraints active)."""
        return int(self.rows[-1])

    @property
    def k(self) -> int:
        """Number of constraints."""
        return len(self.constraints)

    @functools.cached_property
    def _fast(self):
        """The compiled kernels' arrays (constraints.fast.FastConstraints), or None where they do not apply."""
        from .fast import FastConstraints

        return FastConstraints(self) if FastConstraints.supports(self) else None

    def row_mask(self, active) -> np.ndarray:
        """Per-row activity from a per-constraint mask (..., k) -> (..., m); None means all active."""
        if active is None:
            return np.ones(self.m, dtype=bool)
        mask = np.asarray(active)
        if mask.dtype != bool or mask.ndim == 0 or mask.shape[-1] != self.k:
            raise ValueError(f"active: expected booleans of shape (..., {self.k}), one per constraint, got "
                             f"{mask.dtype} array of shape {mask.shape}")
        return np.repeat(mask, self._row_counts, axis=-1)

    @functools.cached_property
    def _row_counts(self) -> np.ndarray:
        """Rows per constraint, (k,): row_mask runs per sample."""
        return np.diff(self.rows)


def _body(model: Model, link: str, what: str) -> tuple[int, np.ndarray]:
    if link not in model.link_frames:
        raise ValueError(f"{what}: unknown link {link!r} (the model's links: {sorted(model.link_frames)})")
    return model.link_frames[link]


_CACHE: "weakref.WeakKeyDictionary[Model, dict]" = weakref.WeakKeyDictionary()


def constraint_set(model: Model, constraints) -> ConstraintSet:
    """`constraints` resolved on `model`: a ConstraintSet is checked and passed through; a list of
    Contact and LoopClosure is compiled (and remembered per model while it is the same list)."""
    if isinstance(constraints, ConstraintSet):
        if constraints.model is not model:
            raise ValueError("constraints: this ConstraintSet was built for another model")
        return constraints
    if isinstance(constraints, (Contact, LoopClosure)):
        constraints = [constraints]
    if not isinstance(constraints, Sequence) or not constraints:
        raise ValueError("constraints: expected a ConstraintSet or a non-empty list of Contact / LoopClosure")
    key = tuple(id(c) for c in constraints)
    cached = _CACHE.setdefault(model, {}).get(key)
    if cached is not None and all(a is b for a, b in zip(cached.constraints, constraints)):
        return cached
    built = _compile(model, tuple(constraints))
    _CACHE[model] = {key: built}  # one list per model: a loop over samples reuses it, nothing piles up
    return built


def _compile(model: Model, constraints: tuple) -> ConstraintSet:
    names, counts, body_a, body_b, T_a, T_b, point, contact, world = [], [], [], [], [], [], [], [], []
    for k, c in enumerate(constraints):
        if isinstance(c, Contact):
            ba, Tl = _body(model, c.link, f"constraints[{k}].link")
            names.append(f"{c.kind} contact on {c.link!r}")
            body_a.append(ba)
            T_a.append(Tl @ c.offset)
            body_b.append(-2)
            T_b.append(np.eye(4))
            contact.append(True)
            world.append(c.frame == "world")
        elif isinstance(c, LoopClosure):
            ba, Tla = _body(model, c.link_a, f"constraints[{k}].link_a")
            bb, Tlb = _body(model, c.link_b, f"constraints[{k}].link_b")
            names.append(f"{c.kind} loop closure {c.link_a!r}-{c.link_b!r}")
            body_a.append(ba)
            T_a.append(Tla @ c.offset_a)
            body_b.append(bb)
            T_b.append(Tlb @ c.offset_b)
            contact.append(False)
            world.append(False)
        else:
            raise ValueError(f"constraints[{k}]: expected a Contact or a LoopClosure, got {type(c).__name__}")
        point.append(c.kind == "point")
        counts.append(_ROWS[c.kind])
    rows = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ConstraintSet(model, constraints, tuple(names), rows, np.array(body_a, dtype=np.int64),
                         np.array(body_b, dtype=np.int64), np.array(T_a), np.array(T_b), np.array(point),
                         np.array(contact), np.array(world))
