"""load_urdf: the checked tree walked once into a Model (Kim 2012, section 2; Park et al. eqs. 21-22)."""
from __future__ import annotations

import os
import warnings
from typing import NamedTuple

import numpy as np

from ..model import DEFAULT_GRAVITY, Flaw, Model, URDFError
from .document import read_robot
from .inertia import link_inertia, transform_inertia
from .joints import Mimic, joint_limits, mimic_of, screw
from .mimic import drop_broken_mimics, mimic_map
from .tree import Tree, child_of, depth_first, parent_of, read_tree
from .values import origin

__all__ = ["load_urdf"]


class _Body(NamedTuple):
    """A moving joint and the link it moves: f_{parent, i}(q) = M exp([S] q)."""

    link: str
    joint: str
    type: str
    parent: int
    M: np.ndarray
    S: np.ndarray
    limits: dict[str, float | None]
    mimic: Mimic | None


def load_urdf(source: str | os.PathLike[str], floating_base: bool = False, *, gravity=DEFAULT_GRAVITY,
              strict: bool = False) -> Model:
    """Build a Model from a URDF file path or XML string (a ROS robot_description).

    The base link is the link that is no joint's child. If the root joint is of type `floating`
    the model has a floating base (its child is the base), whatever `floating_base` says.

    Flaws that robot_state_publisher, KDL and Pinocchio accept are accepted too, each with one
    URDFWarning naming the element and the size of the flaw, and kept in `model.flaws`: a link
    inertia that is not positive semi-definite (used as given; forward dynamics refuses, naming
    the link, where it makes an articulated inertia non-positive), a mimic joint whose leader is
    missing, not a moving joint or part of a mimic cycle (the joint then moves on its own, as in
    Pinocchio and KDL), and a negative velocity or effort limit (URDFLimitWarning; its magnitude
    is used). `strict=True` refuses them instead. What cannot give a model (see `values` for the
    plausible magnitudes, `tree` for the structure) raises URDFError naming the element.
    """
    robot = read_robot(source)
    tree = read_tree(robot)
    base, root_joint_origin, floating_base = _base(tree, floating_base)
    flaws: list[Flaw] = []
    bodies, link_frames = _bodies(tree, base, flaws)
    J_base, J = _inertias(tree, link_frames, len(bodies), flaws)
    names = [b.joint for b in bodies]
    types = {j.get("name"): j.get("type") for j in tree.joints}
    mimics = drop_broken_mimics(names, types, [b.mimic for b in bodies], flaws)
    joint_names, P, q_offset = mimic_map(names, mimics)
    _report(flaws, strict)
    coordinates = [b for b, m in zip(bodies, mimics) if m is None]

    def limits(key: str, default: float) -> np.ndarray:
        return np.array([default if b.limits[key] is None else b.limits[key] for b in coordinates], dtype=float)

    nb = len(bodies)
    return Model(
        name=robot.get("name", ""),
        joint_names=joint_names,
        body_names=tuple(b.link for b in bodies),
        body_joints=tuple(names),
        body_types=tuple(b.type for b in bodies),
        parent=np.array([b.parent for b in bodies], dtype=np.int64),
        M=np.array([b.M for b in bodies]).reshape(nb, 4, 4),
        S=np.array([b.S for b in bodies]).reshape(nb, 6),
        J=J,
        P=P,
        q_offset=q_offset,
        J_base=J_base,
        root_link=base,
        floating_base=bool(floating_base),
        gravity=_gravity(gravity),
        lower=limits("lower", -np.inf),
        upper=limits("upper", np.inf),
        velocity_limit=limits("velocity", np.inf),
        effort_limit=limits("effort", np.inf),
        link_frames=link_frames,
        flaws=tuple(flaws),
        root_joint_origin=root_joint_origin,
    )


def _base(tree: Tree, floating_base: bool) -> tuple[str, np.ndarray, bool]:
    """(base link, the floating root joint's origin, whether the base floats).

    A floating root joint makes its child the base; the world-like root link is dropped.
    """
    root_joints = tree.children[tree.root]
    floating = [j for j in tree.joints if j.get("type") == "floating"]
    if not floating:
        return tree.root, np.eye(4), floating_base
    if any(j in root_joints for j in floating) and len(root_joints) != 1:
        raise URDFError(f"link {tree.root!r}: a floating root joint must be the only joint of the root link")
    for j in floating:
        if j not in root_joints:
            raise URDFError(f"joint {j.get('name')!r}: a floating joint is only supported as the root joint")
    joint = root_joints[0]
    return child_of(joint), origin(joint.find("origin"), f"joint {joint.get('name')!r} origin"), True


def _bodies(tree: Tree, base: str, flaws: list[Flaw]) -> tuple[list[_Body], dict[str, tuple[int, np.ndarray]]]:
    """The moving bodies in depth-first order, and every link's (body, pose in that body's frame).

    A fixed joint adds no body: its child link rides on the parent's body at the composed pose.
    """
    link_frames: dict[str, tuple[int, np.ndarray]] = {base: (-1, np.eye(4))}
    bodies: list[_Body] = []
    for j in depth_first(tree, base):
        name, child = j.get("name"), child_of(j)
        body, T_body_link = link_frames[parent_of(j)]
        T_joint = T_body_link @ origin(j.find("origin"), f"joint {name!r} origin")
        if j.get("type") == "fixed":
            link_frames[child] = (body, T_joint)
            continue
        bodies.append(_Body(child, name, j.get("type"), body, T_joint, screw(j, name),
                            joint_limits(j, name, flaws), mimic_of(j, name)))
        link_frames[child] = (len(bodies) - 1, np.eye(4))
    return bodies, link_frames


def _inertias(tree: Tree, link_frames: dict[str, tuple[int, np.ndarray]], nb: int, flaws: list[Flaw]
              ) -> tuple[np.ndarray, np.ndarray]:
    """(J_base, J): every link's inertia lumped into the body it is rigidly attached to."""
    J = np.zeros((nb + 1, 6, 6))  # row 0: the base link (body -1)
    for link, (body, T) in link_frames.items():
        J[body + 1] += transform_inertia(link_inertia(tree.links[link], flaws), T)
    return J[0], J[1:]


def _report(flaws: list[Flaw], strict: bool) -> None:
    for flaw in flaws:
        if strict:
            raise URDFError(f"{flaw.problem} (strict=True refuses URDF flaws). Fix: {flaw.fix}")
        warnings.warn(flaw.message, flaw.category, stacklevel=3)  # at load_urdf's caller


def _gravity(gravity) -> np.ndarray:
    g = np.array(gravity, dtype=float)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise ValueError(f"gravity: expected 3 finite numbers, got {gravity!r}")
    return g
