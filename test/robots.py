"""Shared helpers of the core tests: robot files, Pinocchio twins, random trees, independent kinematics.

Nothing here calls the algorithms under test: the kinematics (link poses, twists, energies) are
recomputed from the model's constant data (parent, M_i, S_i, J_i, link_frames) with scipy's
matrix exponential, so identities checked with them are independent of `liedyn_ros.core`.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pinocchio as pin
from scipy.linalg import expm

from liedyn_ros import core
from liedyn_ros.robot_data import robots_dir

REL_TOL = 1e-10


# ------------------------------------------------------------------------ example-robot-data


# The only example-robot-data robots the core tests may use (the others are for outside checks).
ROBOT_FILES = {
    "panda": ("panda_description/urdf/panda.urdf", False),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
    "solo12": ("solo_description/robots/solo12.urdf", True),
    "talos": ("talos_data/robots/talos_reduced.urdf", True),
    "talos_mimic": ("talos_data/robots/talos_full_v2.urdf", True),
}


@dataclass
class Twin:
    """Our model and Pinocchio's model of the same URDF, with the map between their vectors."""

    model: core.Model
    pin_model: pin.Model
    joint_order: list[str]

    def to_pin(self, q: np.ndarray, base_pose: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(q_pin, E) with v_pin = E v for every v: E is Pinocchio's velocity as a linear map of ours."""
        eye = np.eye(self.model.nv)
        q_pin, E_rows = core.to_pinocchio(self.model, q, eye, base_pose=base_pose, joint_order=self.joint_order)
        return q_pin.reshape(-1, q_pin.shape[-1])[0], E_rows.T


def urdf_text(name: str) -> str:
    return (robots_dir() / ROBOT_FILES[name][0]).read_text()


def twin_from_xml(xml: str, floating: bool) -> Twin:
    model = core.load_urdf(xml, floating_base=floating)
    pin_model = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromXML(xml)
    return Twin(model, pin_model, list(pin_model.names)[2 if floating else 1:])


@functools.lru_cache(maxsize=None)
def twin(name: str) -> Twin:
    """Cached twin of a robot of ROBOT_FILES, or 'panda_arm': the Panda with its fingers welded."""
    if name == "panda_arm":
        xml = re.sub(r"<mimic[^>]*/>", "", urdf_text("panda")).replace('type="prismatic"', 'type="fixed"')
        return twin_from_xml(xml, False)
    return twin_from_xml(urdf_text(name), ROBOT_FILES[name][1])


# --------------------------------------------------------------------------------- sampling


def random_pose(rng: np.random.Generator) -> np.ndarray:
    """A random T_world_base: uniform rotation (from a random unit quaternion), position in a 2 m cube."""
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    T = np.eye(4)
    T[:3, :3] = pin.Quaternion(quat[3], *quat[:3]).toRotationMatrix()
    T[:3, 3] = rng.uniform(-1.0, 1.0, 3)
    return T


def random_state(model: core.Model, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, v, a) within a few units, joint angles across the full circle."""
    return rng.uniform(-np.pi, np.pi, model.n), rng.normal(size=model.nv), rng.normal(size=model.nv)


def pose_arg(model: core.Model, rng: np.random.Generator) -> np.ndarray | None:
    return random_pose(rng) if model.floating_base else None


def assert_close(got: np.ndarray, want: np.ndarray, rel: float = REL_TOL, what: str = "") -> None:
    """|got - want| <= rel * max(1, |want|_inf) entry-wise, with a readable message."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= rel * scale, f"{what}: max error {err:.3e} > {rel:.1e} * {scale:.3e}"


# ----------------------------------------------------------- SE(3) without liedyn_ros.core


def skew(w: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def twist_hat(V: np.ndarray) -> np.ndarray:
    """[V] in se(3) for V = (omega, v)."""
    out = np.zeros((4, 4))
    out[:3, :3] = skew(V[:3])
    out[:3, 3] = V[3:]
    return out


def exp_twist(V: np.ndarray) -> np.ndarray:
    return expm(twist_hat(V))


def adjoint(T: np.ndarray) -> np.ndarray:
    """Ad_T for twists (omega, v): [[R, 0], [[p] R, R]]."""
    R, p = T[:3, :3], T[:3, 3]
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = R
    out[3:, :3] = skew(p) @ R
    return out


def lie_bracket(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """[U, V] = ad_U V as a twist, read off the matrix commutator."""
    Z = twist_hat(U) @ twist_hat(V) - twist_hat(V) @ twist_hat(U)
    return np.array([Z[2, 1], Z[0, 2], Z[1, 0], Z[0, 3], Z[1, 3], Z[2, 3]])


def vee(Z: np.ndarray) -> np.ndarray:
    return np.array([Z[2, 1], Z[0, 2], Z[1, 0], Z[0, 3], Z[1, 3], Z[2, 3]])


# ------------------------------------------------- independent kinematics from model data


def body_poses(model: core.Model, q: np.ndarray, base_pose: np.ndarray | None = None) -> list[np.ndarray]:
    """World pose of the root link (first) and of every body: T_i = T_lambda(i) M_i exp([S_i] q_i)."""
    root = np.eye(4) if base_pose is None else np.asarray(base_pose, float)
    q_body = model.P @ q + model.q_offset
    poses = [root]
    for i, p in enumerate(model.parent):
        poses.append(poses[p + 1] @ model.M[i] @ exp_twist(model.S[i] * q_body[i]))
    return poses


def inertias(model: core.Model) -> list[np.ndarray]:
    """Spatial inertias in the order of `body_poses` (root link first: zero for a fixed base)."""
    root = model.J_base if model.floating_base else np.zeros((6, 6))
    return [root] + list(model.J)


def link_pose(model: core.Model, link: str, q: np.ndarray, base_pose: np.ndarray | None = None) -> np.ndarray:
    body, T_body_link = model.link_frames[link]
    return body_poses(model, q, base_pose)[body + 1] @ T_body_link


def advance(model: core.Model, q: np.ndarray, v: np.ndarray, base_pose: np.ndarray | None, eps: float
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """The configuration reached after time eps at constant velocity v (base: T exp(eps [V_base]))."""
    if model.floating_base:
        T = np.eye(4) if base_pose is None else base_pose
        return q + eps * v[6:], T @ exp_twist(eps * v[:6])
    return q + eps * v, base_pose


def body_twists(model: core.Model, q: np.ndarray, v: np.ndarray, base_pose: np.ndarray | None = None,
                eps: float = 1e-5) -> list[np.ndarray]:
    """Body twists V_i = (T_i^-1 dT_i/dt)^vee of root and bodies, by central differences."""
    plus = body_poses(model, *advance(model, q, v, base_pose, eps))
    minus = body_poses(model, *advance(model, q, v, base_pose, -eps))
    now = body_poses(model, q, base_pose)
    return [vee(np.linalg.solve(T, (Tp - Tm) / (2 * eps))) for T, Tp, Tm in zip(now, plus, minus)]


def link_jacobian(model: core.Model, link: str, q: np.ndarray, base_pose: np.ndarray | None = None) -> np.ndarray:
    """Body Jacobian of a link (6 x nv): column k is its body twist for a unit generalized velocity."""
    body, _ = model.link_frames[link]
    T_body_link = model.link_frames[link][1]
    cols = []
    for k in range(model.nv):
        V = body_twists(model, q, np.eye(model.nv)[k], base_pose)[body + 1]
        cols.append(np.linalg.solve(adjoint(T_body_link), V))  # body frame -> link frame
    return np.array(cols).T


def center_of_mass(J: np.ndarray) -> tuple[float, np.ndarray]:
    """(mass, com in the inertia's frame) of a spatial inertia J (lower-left block is m [c]^T)."""
    m = J[5, 5]
    if m <= 0:
        return 0.0, np.zeros(3)
    B = J[3:, :3] / m  # = -[c]
    return m, np.array([B[1, 2], B[2, 0], B[0, 1]])


def potential_energy(model: core.Model, q: np.ndarray, base_pose: np.ndarray | None = None) -> float:
    """U = -sum_i m_i g . p_com,i over the moving bodies (and the base when floating)."""
    U = 0.0
    for T, J in zip(body_poses(model, q, base_pose), inertias(model)):
        m, c = center_of_mass(J)
        U -= m * model.gravity @ (T[:3, :3] @ c + T[:3, 3])
    return U


def kinetic_energy(model: core.Model, q: np.ndarray, v: np.ndarray, base_pose: np.ndarray | None = None) -> float:
    """1/2 sum_i V_i^T J_i V_i from differentiated link poses (independent of mass_matrix)."""
    twists = body_twists(model, q, v, base_pose)
    return 0.5 * sum(V @ J @ V for V, J in zip(twists, inertias(model)))


def world_momentum(model: core.Model, q: np.ndarray, v: np.ndarray, base_pose: np.ndarray) -> np.ndarray:
    """Total spatial momentum (angular about the world origin, linear) in the world frame."""
    twists = body_twists(model, q, v, base_pose)
    return sum(np.linalg.inv(adjoint(T)).T @ J @ V
               for T, V, J in zip(body_poses(model, q, base_pose), twists, inertias(model)))


# ----------------------------------------------------------------------------- integrators


Dynamics = Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]


def rk4_step(model: core.Model, q: np.ndarray, v: np.ndarray, base_pose: np.ndarray | None, h: float,
             accel: Dynamics) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One RK4 step of (q, v), with the base pose on SE(3) by Runge-Kutta-Munthe-Kaas.

    The base is T exp([u]) over the step with u' = dexp^-1_{-u}(V) = V + 1/2 [u, V] + 1/12 [u, [u, V]].
    """
    floating = model.floating_base

    def stage(u: np.ndarray, dq: np.ndarray, dv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        qs, vs = q + dq, v + dv
        Ts = base_pose @ exp_twist(u) if floating else None
        a = accel(qs, vs, Ts)
        V = vs[:6] if floating else np.zeros(6)
        du = V + 0.5 * lie_bracket(u, V) + lie_bracket(u, lie_bracket(u, V)) / 12
        return du, (vs[6:] if floating else vs), a

    k1 = stage(np.zeros(6), 0 * q, 0 * v)
    k2 = stage(h / 2 * k1[0], h / 2 * k1[1], h / 2 * k1[2])
    k3 = stage(h / 2 * k2[0], h / 2 * k2[1], h / 2 * k2[2])
    k4 = stage(h * k3[0], h * k3[1], h * k3[2])
    comb = [h / 6 * (a + 2 * b + 2 * c + d) for a, b, c, d in zip(k1, k2, k3, k4)]
    return q + comb[1], v + comb[2], (base_pose @ exp_twist(comb[0]) if floating else None)


# ------------------------------------------------------------------- random URDF trees


def _inertial_xml(rng: np.random.Generator) -> str:
    """A physically valid inertial: principal moments from second moments, rotated, with rpy origin."""
    mass = rng.uniform(0.3, 3.0)
    s = rng.uniform(0.002, 0.05, 3)
    A = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    I = mass * A @ np.diag([s[1] + s[2], s[0] + s[2], s[0] + s[1]]) @ A.T
    xyz, rpy = rng.uniform(-0.2, 0.2, 3), rng.uniform(-np.pi, np.pi, 3)
    return (f'<inertial><origin xyz="{_v(xyz)}" rpy="{_v(rpy)}"/><mass value="{mass!r}"/>'
            f'<inertia ixx="{float(I[0, 0])!r}" ixy="{float(I[0, 1])!r}" ixz="{float(I[0, 2])!r}" iyy="{float(I[1, 1])!r}" '
            f'iyz="{float(I[1, 2])!r}" izz="{float(I[2, 2])!r}"/></inertial>')


def _v(x: np.ndarray) -> str:
    return " ".join(repr(float(e)) for e in x)


def random_tree_urdf(rng: np.random.Generator, n_links: int = 9) -> str:
    """A random URDF tree: branching, revolute/continuous/prismatic/fixed joints, rpy origins.

    Every child of a moving joint carries mass (so forward dynamics is defined); a few fixed
    joints hang extra massive links that must be merged into their moving ancestor.
    """
    links = ['<link name="l0"/>']
    joints = []
    kinds = ["revolute", "continuous", "prismatic", "fixed"]
    for k in range(1, n_links):
        parent = int(rng.integers(0, k))
        kind = kinds[int(rng.choice(4, p=[0.4, 0.2, 0.2, 0.2]))] if k > 1 else "revolute"
        links.append(f'<link name="l{k}">{_inertial_xml(rng)}</link>')
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        limit = '<limit lower="-3" upper="3" effort="100" velocity="10"/>' if kind in ("revolute", "prismatic") else ""
        joints.append(f'<joint name="j{k}" type="{kind}"><parent link="l{parent}"/><child link="l{k}"/>'
                      f'<origin xyz="{_v(rng.uniform(-0.4, 0.4, 3))}" rpy="{_v(rng.uniform(-np.pi, np.pi, 3))}"/>'
                      f'<axis xyz="{_v(axis)}"/>{limit}</joint>')
    return f'<robot name="random_tree">{"".join(links)}{"".join(joints)}</robot>'


@functools.lru_cache(maxsize=None)
def random_tree_twins(seed: int, count: int) -> tuple[Twin, ...]:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        xml = random_tree_urdf(rng)
        t = twin_from_xml(xml, False)
        if t.model.n >= 2:
            out.append(t)
    return tuple(out)


TREE_SEED = 20240611
FIXED_CASES = ("panda", "panda_arm", "ur5", "tree0", "tree1", "tree2")
FLOATING_CASES = ("solo12", "talos", "talos_mimic", "lone_body")

# A quadrotor without arms: one floating rigid body, its rotors welded on (no moving joint at all).
LONE_BODY_URDF = (
    '<robot name="quadrotor"><link name="frame"><inertial><origin xyz="0.01 -0.02 0.03" rpy="0.1 0.2 0.3"/>'
    '<mass value="1.5"/><inertia ixx="0.03" ixy="0.001" ixz="0" iyy="0.031" iyz="0.002" izz="0.058"/></inertial>'
    '</link>' + "".join(
        f'<link name="rotor{k}"><inertial><origin xyz="0 0 0.01"/><mass value="0.05"/>'
        f'<inertia ixx="2e-5" ixy="0" ixz="0" iyy="2e-5" iyz="0" izz="4e-5"/></inertial></link>'
        f'<joint name="mount{k}" type="fixed"><parent link="frame"/><child link="rotor{k}"/>'
        f'<origin xyz="{0.2 * np.cos(k * np.pi / 2 + 0.7):.17g} {0.2 * np.sin(k * np.pi / 2 + 0.7):.17g} 0.02"/></joint>'
        for k in range(4)) + '</robot>')


def case(name: str) -> Twin:
    """A twin by test-case name: a robot of ROBOT_FILES, 'panda_arm', 'lone_body' (LONE_BODY_URDF,
    floating) or 'treeK' (random tree K)."""
    if name.startswith("tree"):
        return random_tree_twins(TREE_SEED, 3)[int(name[4:])]
    if name == "lone_body":
        return twin_from_xml(LONE_BODY_URDF, True)
    return twin(name)


# ------------------------------------------------------ Pinocchio, mapped to our vectors


def pin_frame(t: Twin, link: str) -> int:
    return t.pin_model.getFrameId(link, pin.BODY)


def pin_rnea(t: Twin, q: np.ndarray, v: np.ndarray, a: np.ndarray, base_pose: np.ndarray | None = None,
             f_ext: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Pinocchio's rnea mapped to our generalized forces (tau = E^T tau_pin), minus J^T f for f_ext.

    f_ext: link -> wrench (m, f) in the link frame, applied through Pinocchio's LOCAL frame Jacobian.
    """
    q_pin, E = t.to_pin(q, base_pose)
    data = t.pin_model.createData()
    tau = pin.rnea(t.pin_model, data, q_pin, E @ v, E @ a).copy()
    for link, w in (f_ext or {}).items():
        J = pin.computeFrameJacobian(t.pin_model, data, q_pin, pin_frame(t, link), pin.LOCAL)
        tau -= J.T @ np.concatenate([w[3:], w[:3]])  # Pinocchio's force is (f, m)
    return E.T @ tau


def pin_mass_matrix(t: Twin, q: np.ndarray, base_pose: np.ndarray | None = None) -> np.ndarray:
    q_pin, E = t.to_pin(q, base_pose)
    M = pin.crba(t.pin_model, t.pin_model.createData(), q_pin)
    M = np.triu(M) + np.triu(M, 1).T
    return E.T @ M @ E


def pin_gravity(t: Twin, q: np.ndarray, base_pose: np.ndarray | None = None) -> np.ndarray:
    q_pin, E = t.to_pin(q, base_pose)
    return E.T @ pin.computeGeneralizedGravity(t.pin_model, t.pin_model.createData(), q_pin)


def pin_coriolis(t: Twin, q: np.ndarray, v: np.ndarray, base_pose: np.ndarray | None = None) -> np.ndarray:
    """E^T C_pin E: Pinocchio's Coriolis matrix acting on our velocities."""
    q_pin, E = t.to_pin(q, base_pose)
    return E.T @ pin.computeCoriolisMatrix(t.pin_model, t.pin_model.createData(), q_pin, E @ v) @ E


def pin_aba(t: Twin, q: np.ndarray, v: np.ndarray, tau: np.ndarray, base_pose: np.ndarray | None = None
            ) -> np.ndarray:
    """Pinocchio's aba in our coordinates; with mimic joints (which its aba refuses) M a = tau - b
    with Pinocchio's M and b reduced to our coordinates."""
    q_pin, E = t.to_pin(q, base_pose)
    if t.model.has_mimic:
        b = pin_rnea(t, q, v, np.zeros_like(v), base_pose)
        return np.linalg.solve(pin_mass_matrix(t, q, base_pose), tau - b)
    # Without mimic joints E is invertible (a permutation, and the base's halves swapped).
    a_pin = pin.aba(t.pin_model, t.pin_model.createData(), q_pin, E @ v, np.linalg.solve(E.T, tau))
    return np.linalg.solve(E, a_pin)
