"""The constant robot model and its URDF loader.

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
import os
import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .spatial import Ad_inv, rpy_to_matrix, spatial_inertia

__all__ = ["Model", "URDFError", "URDFWarning", "Flaw", "SingularInertiaError", "load_urdf", "DEFAULT_GRAVITY"]

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
_MOVING = ("revolute", "continuous", "prismatic")


class URDFError(ValueError):
    """The URDF cannot be turned into a model (malformed, or a feature we do not support)."""


class URDFWarning(UserWarning):
    """A flaw the loader accepted (as robot_state_publisher, KDL and Pinocchio do); see Model.flaws."""


class Flaw(NamedTuple):
    """One accepted flaw of a URDF: the element ('link' or 'joint'), its name, what is wrong, how to fix it."""

    kind: str
    name: str
    problem: str
    fix: str

    @property
    def message(self) -> str:
        """The warning: the problem, what the model does with it, the fix."""
        done = "used as given" if self.kind == "link" else "the joint moves on its own (its own coordinate)"
        return f"{self.problem}; {done}. Fix: {self.fix}"


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

    @functools.cached_property
    def _fast(self):
        """The compiled kernels' packed arrays (fast.layout.FastModel), built on first use.

        A cached property: later reads are a plain instance-dictionary hit, which matters at a
        few microseconds per call. Copies made by dataclasses.replace start without it.
        """
        from .fast.layout import FastModel  # the kernels' layout is imported only when used

        return FastModel(self)

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

    def body_q(self, q: np.ndarray) -> np.ndarray:
        """Joint angle of every body, mimic joints included: P q + q_offset, (..., n) -> (..., nb)."""
        return np.asarray(q) @ self.P.T + self.q_offset


# ----------------------------------------------------------------------------------- URDF


_XACRO = re.compile(r"\$[({]")


def _floats(text: str | None, default: tuple[float, ...], what: str) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=float)
    if _XACRO.search(text):
        raise URDFError(f"{what}: {text!r} is an unexpanded xacro expression; expand the file with xacro "
                        "(`xacro robot.urdf.xacro > robot.urdf`) and load the result")
    try:
        values = np.array([float(x) for x in text.split()], dtype=float)
    except ValueError as exc:
        raise URDFError(f"{what}: cannot read numbers from {text!r}") from exc
    if values.shape != (len(default),) or not np.all(np.isfinite(values)):
        raise URDFError(f"{what}: expected {len(default)} finite numbers, got {text!r}")
    return values


def _origin(elem: ET.Element | None, what: str) -> np.ndarray:
    T = np.eye(4)
    if elem is None:
        return T
    T[:3, :3] = rpy_to_matrix(_floats(elem.get("rpy"), (0.0, 0.0, 0.0), what + " rpy"))
    T[:3, 3] = _floats(elem.get("xyz"), (0.0, 0.0, 0.0), what + " xyz")
    return T


def _link_inertia(link: ET.Element, flaws: list[Flaw]) -> np.ndarray:
    """Spatial inertia of a URDF link in its own frame; zero for a link without <inertial>.

    A rotational inertia that is not positive semi-definite is used as given (as Pinocchio and
    KDL do) and recorded in `flaws` with its size.
    """
    name = link.get("name")
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros((6, 6))
    T = _origin(inertial.find("origin"), f"link {name!r} inertial origin")
    mass_el = inertial.find("mass")
    mass = float(_floats(mass_el.get("value") if mass_el is not None else "0", (0.0,), f"link {name!r} mass")[0])
    I_el = inertial.find("inertia")
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    vals = [_floats(I_el.get(k, "0") if I_el is not None else "0", (0.0,), f"link {name!r} inertia {k}")[0]
            for k in keys]
    ixx, ixy, ixz, iyy, iyz, izz = vals
    I_inertial = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if mass < 0:  # no library gives a meaning to it (Pinocchio's torques come out near 1e30)
        raise URDFError(f"link {name!r}: negative mass {mass}; give its <mass value=...> a value >= 0")
    eig = np.linalg.eigvalsh(I_inertial)
    if eig[0] < -1e-9 * max(1.0, abs(eig[-1])):
        flaws.append(Flaw("link", name, f"link {name!r}: inertia matrix is not positive semi-definite (smallest "
                                        f"eigenvalue {eig[0]:.3g} kg m^2, largest {eig[-1]:.3g}, mass {mass:.3g} kg)",
                          "an <inertia> whose eigenvalues are all >= 0"))
    R = T[:3, :3]
    # The inertia is given in the <inertial> frame: rotate it into the link axes (R I R^T).
    return spatial_inertia(mass, T[:3, 3], R @ I_inertial @ R.T)


def _transform_inertia(J: np.ndarray, T_body_link: np.ndarray) -> np.ndarray:
    """Inertia given in {link} expressed in {body}: X^T J X with X = Ad_{T_body_link^-1}."""
    X = Ad_inv(T_body_link)
    return X.T @ J @ X


def _read_xml(source: str | os.PathLike[str]) -> ET.Element:
    text = os.fspath(source)
    if text.lstrip().startswith("<"):
        try:
            return ET.fromstring(text)
        except ET.ParseError as exc:
            raise URDFError(f"source: URDF XML string does not parse: {exc}") from exc
    if not os.path.isfile(text):
        raise URDFError(f"source: {text!r} is neither a URDF XML string nor an existing file")
    try:
        return ET.parse(text).getroot()
    except ET.ParseError as exc:
        raise URDFError(f"source: {text!r} does not parse as XML: {exc}") from exc


def load_urdf(source: str | os.PathLike[str], floating_base: bool = False, *, gravity=DEFAULT_GRAVITY,
              strict: bool = False) -> Model:
    """Build a Model from a URDF file path or XML string (a ROS robot_description).

    The base link is the link that is no joint's child. If the root joint is of type `floating`
    the model has a floating base (its child is the base), whatever `floating_base` says.

    Flaws that robot_state_publisher, KDL and Pinocchio accept are accepted too, each with one
    URDFWarning naming the element and the size of the flaw, and kept in `model.flaws`: a link
    inertia that is not positive semi-definite (used as given; forward dynamics refuses, naming
    the link, where it makes an articulated inertia non-positive), and
    a mimic joint whose leader is missing, not a moving joint or part of a mimic cycle (the
    joint then moves on its own, as in Pinocchio and KDL). `strict=True` refuses them instead.
    What cannot give a model raises URDFError saying what to fix.
    """
    robot = _read_xml(source)
    if robot.tag != "robot":
        raise URDFError(f"source: root element is <{robot.tag}>, expected <robot>")
    links: dict[str, ET.Element] = {}
    for link in robot.findall("link"):
        name = link.get("name")
        if not name:
            raise URDFError("source: a <link> has no name; give every link a name=\"...\"")
        if name in links:
            raise URDFError(f"link {name!r}: defined twice; rename or remove one of them")
        links[name] = link
    if not links:
        raise URDFError("source: the URDF has no <link>; if it came from xacro, check the macro was called "
                        "(an expanded file holds the links)")
    joints = robot.findall("joint")
    children: dict[str, list[ET.Element]] = {name: [] for name in links}
    child_links = set()
    joint_names_seen = set()
    for j in joints:
        jname, jtype = j.get("name"), j.get("type")
        if jname in joint_names_seen:
            raise URDFError(f"joint {jname!r}: defined twice; rename or remove one of them")
        joint_names_seen.add(jname)
        p, c = j.find("parent"), j.find("child")
        if p is None or c is None:
            raise URDFError(f"joint {jname!r}: missing <parent> or <child>")
        pl, cl = p.get("link"), c.get("link")
        for l in (pl, cl):
            if l not in links:
                raise URDFError(f"joint {jname!r}: unknown link {l!r}; add a <link name={l!r}/> or correct the name")
        if cl in child_links:
            raise URDFError(f"joint {jname!r}: link {cl!r} has two parents (closed loops are not URDF); remove one "
                            "of the joints and model the loop as a constraint")
        if jtype not in _MOVING + ("fixed", "floating"):
            raise URDFError(f"joint {jname!r}: joint type {jtype!r} is not supported (use revolute, "
                            "continuous, prismatic, fixed, or a floating root joint)")
        child_links.add(cl)
        children[pl].append(j)
    roots = [name for name in links if name not in child_links]
    if len(roots) != 1:
        hint = ("every link is some joint's child: the joints form a loop" if not roots else
                "connect them with joints (a fixed joint to a common root link), or remove the stray ones")
        raise URDFError(f"source: expected one root link (the link that is no joint's child), found {roots}; {hint}")
    root = roots[0]

    # A floating root joint: its child becomes the base; the world-like root link is dropped.
    root_joints = children[root]
    if any(j.get("type") == "floating" for j in root_joints):
        if len(root_joints) != 1:
            raise URDFError(f"link {root!r}: a floating root joint must be the only joint of the root link")
        floating_base = True
        root = root_joints[0].find("child").get("link")
    for j in joints:
        if j.get("type") == "floating" and j.find("child").get("link") != root:
            raise URDFError(f"joint {j.get('name')!r}: a floating joint is only supported as the root joint")

    flaws: list[Flaw] = []
    by_name = {j.get("name"): j for j in joints}
    bodies: list[dict] = []
    link_frames: dict[str, tuple[int, np.ndarray]] = {root: (-1, np.eye(4))}
    J_base = _link_inertia(links[root], flaws)

    def visit(link: str) -> None:
        body, T_body_link = link_frames[link]
        for j in children[link]:
            jname, jtype = j.get("name"), j.get("type")
            child = j.find("child").get("link")
            T_joint = T_body_link @ _origin(j.find("origin"), f"joint {jname!r} origin")
            if jtype == "fixed":
                link_frames[child] = (body, T_joint)
            else:
                axis = _floats(j.find("axis").get("xyz") if j.find("axis") is not None else None,
                               (1.0, 0.0, 0.0), f"joint {jname!r} axis")
                norm = np.linalg.norm(axis)
                if norm < 1e-12:
                    raise URDFError(f"joint {jname!r}: zero axis; give <axis xyz=\"...\"> a nonzero direction")
                S = np.zeros(6)
                S[(0 if jtype != "prismatic" else 3):][:3] = axis / norm
                limit = j.find("limit")
                lim = {k: float(limit.get(k)) if limit is not None and limit.get(k) is not None else None
                       for k in ("lower", "upper", "velocity", "effort")}
                if jtype == "continuous":
                    lim["lower"], lim["upper"] = None, None
                mimic = j.find("mimic")
                bodies.append(dict(name=child, joint=jname, type=jtype, parent=body, M=T_joint, S=S, lim=lim,
                                   mimic=None if mimic is None else (mimic.get("joint"),
                                                                    float(mimic.get("multiplier", "1")),
                                                                    float(mimic.get("offset", "0")))))
                link_frames[child] = (len(bodies) - 1, np.eye(4))
            visit(child)

    visit(root)
    nb = len(bodies)

    # Lump every link's inertia into the body it is rigidly attached to.
    J = np.zeros((nb, 6, 6))
    for link, (b, T) in link_frames.items():
        if link == root:
            continue  # J_base above
        Jl = _transform_inertia(_link_inertia(links[link], flaws), T)
        if b < 0:
            J_base = J_base + Jl
        else:
            J[b] += Jl

    # A mimic whose leader is no moving joint, or that closes a mimic cycle, is dropped: the
    # joint then moves on its own, as in Pinocchio and KDL.
    body_of_joint = {b["joint"]: i for i, b in enumerate(bodies)}
    for b in bodies:
        if b["mimic"] is None:
            continue
        leader, seen = b["mimic"][0], {b["joint"]}
        while leader in body_of_joint and leader not in seen and bodies[body_of_joint[leader]]["mimic"] is not None:
            seen.add(leader)
            leader = bodies[body_of_joint[leader]]["mimic"][0]
        if leader in body_of_joint and leader not in seen:
            continue
        named = b["mimic"][0]
        why = ("which is not in the URDF" if named not in by_name else
               f"which is a {by_name[named].get('type')} joint" if named not in body_of_joint else
               "and the mimic joints form a cycle")
        flaws.append(Flaw("joint", b["joint"], f"joint {b['joint']!r}: mimics {named!r}, {why}",
                          "name a moving joint in its <mimic joint=...>, or remove the <mimic>"))
        b["mimic"] = None

    # Coordinates: one per non-mimic moving joint, mimic chains resolved to their leader.
    coord_bodies = [i for i, b in enumerate(bodies) if b["mimic"] is None]
    joint_names = tuple(bodies[i]["joint"] for i in coord_bodies)
    coord_of = {name: k for k, name in enumerate(joint_names)}
    P = np.zeros((nb, len(joint_names)))
    q_offset = np.zeros(nb)
    for i, b in enumerate(bodies):
        mult, off, cur = 1.0, 0.0, b
        while cur["mimic"] is not None:
            leader, m, o = cur["mimic"]
            mult, off = mult * m, off * m + o  # q = m (m' q_leader + o') + o
            cur = bodies[body_of_joint[leader]]
        P[i, coord_of[cur["joint"]]] = mult
        q_offset[i] = off

    for flaw in flaws:
        if strict:
            raise URDFError(f"{flaw.problem} (strict=True refuses URDF flaws). Fix: {flaw.fix}")
        warnings.warn(flaw.message, URDFWarning, stacklevel=2)

    def limits(key: str, default: float) -> np.ndarray:
        return np.array([bodies[i]["lim"][key] if bodies[i]["lim"][key] is not None else default
                         for i in coord_bodies], dtype=float)

    g = np.array(gravity, dtype=float)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise ValueError(f"gravity: expected 3 finite numbers, got {gravity!r}")
    return Model(
        name=robot.get("name", ""),
        joint_names=joint_names,
        body_names=tuple(b["name"] for b in bodies),
        body_joints=tuple(b["joint"] for b in bodies),
        body_types=tuple(b["type"] for b in bodies),
        parent=np.array([b["parent"] for b in bodies], dtype=np.int64),
        M=np.array([b["M"] for b in bodies]).reshape(nb, 4, 4),
        S=np.array([b["S"] for b in bodies]).reshape(nb, 6),
        J=J,
        P=P,
        q_offset=q_offset,
        J_base=J_base,
        root_link=root,
        floating_base=bool(floating_base),
        gravity=g,
        lower=limits("lower", -np.inf),
        upper=limits("upper", np.inf),
        velocity_limit=limits("velocity", np.inf),
        effort_limit=limits("effort", np.inf),
        link_frames=link_frames,
        flaws=tuple(flaws),
    )
