"""The constant robot model (built from a URDF by `liedyn_ros.core.urdf.load_urdf`).

A model is a parent-ordered tree of rigid bodies (Kim 2012, section 2): body i hangs from body
lambda(i) = parent[i] (-1 is the root link: the fixed world for a fixed base, the floating base
otherwise) through a 1-DoF joint

    f_{lambda(i), i}(q_i) = M_i exp([S_i] q_i)          (Park et al. eq. 22)

with S_i expressed in the child frame {i}, and carries the spatial inertia J_i in frame {i}
(Park et al. eq. 21). Fixed joints are merged: a link rigidly attached to a moving ancestor
adds its inertia to that body.

Mimic joints are bodies too, but they have no coordinate of their own: the joint angles of the
bodies are q_body = P q + q_offset, with the constant matrix P (n_bodies x n) holding a 1 (own
coordinate) or the mimic multiplier in each row. Generalized forces are tau = P^T tau_body. With
that map every algorithm runs on bodies and accounts for mimic joints without special cases.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .spatial import Ad_inv

__all__ = ["Model", "urdf_limit", "URDFError", "URDFWarning", "URDFLimitWarning", "Flaw", "SingularInertiaError", "DEFAULT_GRAVITY"]

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)


class URDFError(ValueError):
    """The URDF cannot be turned into a model (malformed, or a feature we do not support)."""


class URDFWarning(UserWarning):
    """A flaw the loader accepted (as robot_state_publisher, KDL and Pinocchio do); see Model.flaws."""


class URDFLimitWarning(URDFWarning):
    """A negative velocity or effort limit (urdfdom accepts it): the model uses its magnitude."""


class Flaw(NamedTuple):
    """One accepted flaw of a URDF: the element ('link' or 'joint'), its name, what is wrong, how to
    fix it, what the model does with it, and the warning category it is reported with."""

    kind: str
    name: str
    problem: str
    fix: str
    done: str
    category: type[URDFWarning] = URDFWarning

    @property
    def message(self) -> str:
        """The warning: the problem, what the model does with it, the fix."""
        return f"{self.problem}; {self.done}. Fix: {self.fix}"


class SingularInertiaError(ValueError):
    """Forward dynamics is undefined: the articulated inertia about a moving joint is singular.

    A massless subtree on a moving joint does this, and so can a link inertia that is not
    positive semi-definite (a URDF flaw, named in the message). rnea, gravity and the mass
    matrix stay defined; aba, hybrid and their derivatives raise this error.
    """

    def __init__(self, joint: str, flaws: tuple[Flaw, ...] = ()) -> None:
        if flaws:
            cause = "; ".join(f.problem for f in flaws)
            why = f"the URDF's inertia flaw below it: {cause}"
        else:
            why = "a massless subtree on a moving joint"
        super().__init__(f"model: articulated inertia about {joint} is singular or indefinite ({why}); forward dynamics is "
                         "undefined")


@dataclass(frozen=True, eq=False)
class Model:
    """Constant description of a robot: never changed by an algorithm.

    Attributes (nb bodies, n coordinates):
        joint_names   the n coordinate joints in depth-first order (mimic joints excluded)
        body_names    link name of each body (nb); body_joints: the joint that moves it;
                      body_types: its type, 'revolute', 'continuous' or 'prismatic'
        parent        lambda(i), shape (nb,), -1 for the root link; parent[i] < i
        M             M_i, home pose of {i} in {lambda(i)}, (nb, 4, 4)
        S             S_i, joint screw in {i}, (nb, 6)
        J             J_i, spatial inertia in {i}, (nb, 6, 6)
        P, q_offset   q_body = P q + q_offset (mimic map), (nb, n) and (nb,)
        J_base        spatial inertia of the root link (used when floating_base), (6, 6)
        link_frames   every URDF link -> (body index or -1, pose of the link in that body frame)
        gravity       world-frame gravity vector (3,)
        flaws         the URDF's flaws the loader accepted (load_urdf warned about each once)
        root_joint_origin  the <origin> of a floating root joint (4x4; identity without one): where
                      Pinocchio places its free-flyer. base_pose stays the base link's pose; only
                      the map to Pinocchio's configuration (to_pinocchio) goes through it.
    """

    name: str
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    body_joints: tuple[str, ...]
    body_types: tuple[str, ...]
    parent: np.ndarray
    M: np.ndarray
    S: np.ndarray
    J: np.ndarray
    P: np.ndarray
    q_offset: np.ndarray
    J_base: np.ndarray
    root_link: str
    floating_base: bool
    gravity: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    link_frames: dict[str, tuple[int, np.ndarray]] = field(repr=False)
    flaws: tuple[Flaw, ...] = ()
    root_joint_origin: np.ndarray = field(default_factory=lambda: np.eye(4), repr=False)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def n(self) -> int:
        """Number of joint coordinates."""
        return len(self.joint_names)

    @property
    def nb(self) -> int:
        """Number of moving bodies (mimic-driven ones included)."""
        return len(self.body_names)

    @property
    def nv(self) -> int:
        """Length of v, a and tau: n, or 6 + n for a floating base."""
        return self.n + 6 * self.floating_base

    @property
    def has_mimic(self) -> bool:
        return self.nb != self.n

    @property
    def leader_bodies(self) -> np.ndarray:
        """The body each coordinate belongs to (the joint named joint_names[k])."""
        return np.array([self.body_joints.index(name) for name in self.joint_names], dtype=np.int64)

    @property
    def coordinate(self) -> np.ndarray:
        """Coordinate index driving each body (its own, or its mimic leader's)."""
        if not self.n:  # no coordinate, so no moving body (a lone rigid body, a drone)
            return np.zeros(self.nb, dtype=np.int64)
        return np.argmax(self.P != 0, axis=1)

    @property
    def mimic_multiplier(self) -> np.ndarray:
        return self.P[np.arange(self.nb), self.coordinate]

    @property
    def mass(self) -> float:
        """Total mass of the moving bodies and, for a floating base, the base."""
        return float(self.J[:, 5, 5].sum() + (self.J_base[5, 5] if self.floating_base else 0.0))

    def __getstate__(self) -> dict:
        """The fields only: the kernels' cached arrays hold memory addresses valid in this process alone."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    @functools.cached_property
    def _wrench_maps(self) -> dict[str, tuple[int, np.ndarray | None]]:
        """Per link L: (the body L is merged into, -1 for the root link; X, None for the identity).

        A wrench F on L acts on that body as Ad_{T_body_L^-1}^T F, as a row vector F X with
        X = Ad_{T_body_L^-1}.
        """
        return {link: (body, None if np.array_equal(T, np.eye(4)) else Ad_inv(T))
                for link, (body, T) in self.link_frames.items()}

    def inertia_flaws_below(self, body: int) -> tuple[Flaw, ...]:
        """The inertia flaws on links carried by body `body` or its descendants (-1: the whole robot)."""
        flawed = [f for f in self.flaws if f.kind == "link"]
        if not flawed or body < 0:
            return tuple(flawed)
        below = {body}
        for i in range(body + 1, self.nb):  # parent[i] < i: one pass finds the subtree
            if self.parent[i] in below:
                below.add(i)
        return tuple(f for f in flawed if self.link_frames[f.name][0] in below)

    def with_gravity(self, gravity: np.ndarray) -> "Model":
        """A copy of the model with another world-frame gravity vector."""
        g = np.array(gravity, dtype=float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity: expected 3 finite numbers, got {gravity!r}")
        return dataclasses.replace(self, gravity=g)

    def with_effort_limit(self, limit: np.ndarray) -> "Model":
        """A copy of the model whose effort limits are ``limit`` (n,) [N m] where the URDF gives none
        (urdf_limit: absent or zero), the smaller of the two where both are set; a zero in
        ``limit`` leaves the joint's as it is."""
        limit = np.asarray(limit, dtype=float).reshape(-1)
        if limit.shape != (self.n,) or not np.all(np.isfinite(limit)) or np.any(limit < 0):
            raise ValueError(f"effort_limit: expected {self.n} finite values >= 0 (one per joint), got {limit!r}")
        own = urdf_limit(self.effort_limit)
        given = np.where(limit > 0, limit, np.inf)
        merged = np.minimum(own, given)
        return dataclasses.replace(self, effort_limit=np.where(np.isfinite(merged), merged, self.effort_limit))

    def body_q(self, q: np.ndarray) -> np.ndarray:
        """Joint angle of every body, mimic joints included: P q + q_offset, (..., n) -> (..., nb)."""
        return np.asarray(q) @ self.P.T + self.q_offset


def urdf_limit(values, unset: float = np.inf) -> np.ndarray:
    """The URDF's limits (model.effort_limit, model.velocity_limit: magnitudes), ``unset`` where it
    gives none: absent (inf) or zero, a common placeholder."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values) & (values > 0), values, unset)
