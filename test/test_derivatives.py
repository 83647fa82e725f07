"""Tests of liedyn_ros.core.derivatives against outside references.

- Pinocchio's computeRNEADerivatives / computeABADerivatives (Panda, Solo12 of example-robot-data).
- Central finite differences of the reference rnea / aba / hybrid (liedyn_ros.core.reference), on
  SE(3) for the base.
- Complex-step derivatives of a small complex-capable Newton-Euler written here from the model's
  constant data with scipy's expm (independent of the code under test; checked against reference.rnea).
- Time derivatives against 4th-order finite differences along smooth motions integrated here
  (fixed and floating base, orders 1-4), and ID/FD consistency of the time derivatives.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from liedyn_ros import core
from liedyn_ros.core import reference  # finite differences of the readable algorithms
from liedyn_ros.core.spatial import exp_se3, hat
from liedyn_ros.robot_data import robots_dir
from robots import LONE_BODY_URDF

ROBOTS = robots_dir()
PANDA = ROBOTS / "panda_description/urdf/panda.urdf"
SOLO12 = ROBOTS / "solo_description/robots/solo12.urdf"
RTOL_PIN = 1e-9

# A branched tree: revolute and prismatic joints, rpy origins, a mimic joint with offset, an
# off-axis inertial frame, a fixed link. `floating` puts a floating root joint above `base`.
TREE = """<robot name="tree">{world}
  <link name="base"><inertial><origin xyz="0.01 0.02 -0.03" rpy="0.1 0.2 0.3"/><mass value="3"/>
    <inertia ixx="0.3" ixy="0.01" ixz="0.02" iyy="0.25" iyz="0.03" izz="0.2"/></inertial></link>
  <link name="a"><inertial><origin xyz="0.1 0 0.2" rpy="0.3 -0.2 0.1"/><mass value="1.2"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.01"/></inertial></link>
  <link name="b"><inertial><origin xyz="0 0.15 0.05"/><mass value="0.8"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.012" iyz="0" izz="0.008"/></inertial></link>
  <link name="c"><inertial><origin xyz="0.05 0.05 0.1"/><mass value="0.6"/>
    <inertia ixx="0.005" ixy="0" ixz="0.001" iyy="0.006" iyz="0" izz="0.004"/></inertial></link>
  <link name="d"><inertial><origin xyz="0 -0.1 0.05"/><mass value="0.5"/>
    <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.005" iyz="0" izz="0.003"/></inertial></link>
  <link name="e"><inertial><origin xyz="0.02 0 -0.1"/><mass value="0.4"/>
    <inertia ixx="0.003" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.003"/></inertial></link>
  <link name="tool"><inertial><mass value="0.3"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/>
    <origin xyz="0 0 0.3" rpy="0.2 0 0.1"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="j2" type="continuous"><parent link="a"/><child link="b"/>
    <origin xyz="0.2 0 0.1" rpy="0 0.4 0"/><axis xyz="0 1 1"/></joint>
  <joint name="j3" type="prismatic"><parent link="b"/><child link="c"/>
    <origin xyz="0 0.3 0" rpy="0.3 0 0"/><axis xyz="1 0 0.5"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j4" type="revolute"><parent link="a"/><child link="d"/>
    <origin xyz="-0.2 0.1 0" rpy="0 0 -0.5"/><axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="j5" type="revolute"><parent link="d"/><child link="e"/>
    <origin xyz="0 -0.2 0.1"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/>{mimic}</joint>
  <joint name="weld" type="fixed"><parent link="e"/><child link="tool"/><origin xyz="0 0 -0.2" rpy="0.5 0 0"/></joint>
</robot>"""
FLOAT_ROOT = '<link name="world"/><joint name="root" type="floating"><parent link="world"/><child link="base"/></joint>'


def tree_xml(floating: bool, mimic: bool) -> str:
    return TREE.format(world=FLOAT_ROOT if floating else "",
                       mimic='<mimic joint="j4" multiplier="-1.5" offset="0.2"/>' if mimic else "")


def arm_xml() -> str:
    """Panda with the fingers welded (no mimic): Pinocchio and the core see the same model."""
    return re.sub(r"<mimic[^>]*/>", "", PANDA.read_text()).replace('type="prismatic"', 'type="fixed"')


MODELS = {
    "tree": lambda: core.load_urdf(tree_xml(False, False)),
    "tree_mimic": lambda: core.load_urdf(tree_xml(False, True)),
    "tree_float": lambda: core.load_urdf(tree_xml(True, False)),
    "tree_float_mimic": lambda: core.load_urdf(tree_xml(True, True)),
    "panda": lambda: core.load_urdf(str(PANDA)),
    "solo12": lambda: core.load_urdf(str(SOLO12), floating_base=True),
}
_cache: dict[str, core.Model] = {}


def model_of(name: str) -> core.Model:
    if name not in _cache:
        _cache[name] = MODELS[name]()
    return _cache[name]


def random_state(model: core.Model, rng: np.random.Generator, batch: tuple[int, ...] = ()):
    q = rng.uniform(-1.5, 1.5, batch + (model.n,))
    v, a = rng.normal(size=(2,) + batch + (model.nv,))
    T = None
    if model.floating_base:
        T = core.pose_from_position_quaternion(rng.normal(size=batch + (3,)), rng.normal(size=batch + (4,)))
    return q, v, a, T


def rel_err(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-300))


# ------------------------------------------------------------------------------ Pinocchio


def pin_twin(model: core.Model, xml: str):
    pm = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer()) if model.floating_base else pin.buildModelFromXML(xml)
    pm.gravity.linear[:] = model.gravity
    order = list(pm.names)[2:] if model.floating_base else list(pm.names)[1:]
    return pm, pm.createData(), order


def pin_map(model: core.Model, q, T, order) -> np.ndarray:
    """E with v_pin = E v (columns: to_pinocchio of unit vectors); permutes the base to (linear, angular)."""
    eye = np.eye(model.nv)
    return np.stack([core.to_pinocchio(model, q, e, base_pose=T, joint_order=order)[1] for e in eye], 1)


@pytest.mark.parametrize("name,xml_of,floating", [
    ("panda", lambda: PANDA.read_text(), False),
    ("solo12", lambda: SOLO12.read_text(), True),
    ("lone_body", lambda: LONE_BODY_URDF, True),
])
@pytest.mark.parametrize("fast", [True, False])
def test_rnea_derivatives_match_pinocchio(name, xml_of, floating, fast):
    """Panda keeps its mimic finger: Pinocchio sees it as independent, so ours = E^T D_pin E."""
    xml = xml_of()
    model = core.load_urdf(xml, floating_base=floating)
    pm, pd, order = pin_twin(model, xml)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, v, a, T = random_state(model, rng)
        E = pin_map(model, q, T, order)
        qp, _ = core.to_pinocchio(model, q, base_pose=T, joint_order=order)
        pin.computeRNEADerivatives(pm, pd, qp, E @ v, E @ a)
        ours = core.rnea_derivatives(model, q, v, a, base_pose=T, fast=fast)
        for mine, theirs in zip(ours, (pd.dtau_dq, pd.dtau_dv, pd.M)):
            theirs = np.triu(theirs) + np.triu(theirs, 1).T if theirs is pd.M else np.array(theirs)
            assert rel_err(mine, E.T @ theirs @ E) < RTOL_PIN


@pytest.mark.parametrize("name,xml_of,floating", [
    ("panda_arm", arm_xml, False),
    ("solo12", lambda: SOLO12.read_text(), True),
    ("lone_body", lambda: LONE_BODY_URDF, True),
])
@pytest.mark.parametrize("fast", [True, False])
def test_aba_derivatives_match_pinocchio(name, xml_of, floating, fast):
    xml = xml_of()
    model = core.load_urdf(xml, floating_base=floating)
    pm, pd, order = pin_twin(model, xml)
    rng = np.random.default_rng(2)
    for _ in range(3):
        q, v, tau, T = random_state(model, rng)
        E = pin_map(model, q, T, order)  # a permutation here: E^T = E^-1
        qp, _ = core.to_pinocchio(model, q, base_pose=T, joint_order=order)
        pin.computeABADerivatives(pm, pd, qp, E @ v, E @ tau)
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        ours = core.aba_derivatives(model, q, v, tau, base_pose=T, fast=fast)
        for mine, theirs in zip(ours, (pd.ddq_dq, pd.ddq_dv, Minv)):
            assert rel_err(mine, E.T @ np.array(theirs) @ E) < RTOL_PIN


# -------------------------------------------------------------------- finite differences


def perturb(model: core.Model, q, T, k: int, h: float):
    """Move coordinate k of (xi_base, q) by h: T exp([h e_k]) for the base (on the manifold)."""
    if model.floating_base and k < 6:
        return q, T @ exp_se3(h * np.eye(6)[k])
    q = q.copy()
    q[k - 6 * model.floating_base] += h
    return q, T


def central(f, model: core.Model, q, T, h: float = 1e-6) -> np.ndarray:
    """Columns d f / d(xi_base, q) by 4th-order central differences."""
    cols = []
    for k in range(model.nv):
        vals = [f(*perturb(model, q, T, k, s * h)) for s in (-2, -1, 1, 2)]
        cols.append((vals[0] - 8 * vals[1] + 8 * vals[2] - vals[3]) / (12 * h))
    return np.stack(cols, -1)


def central_vec(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    cols = []
    for k in range(len(x)):
        e = np.zeros_like(x)
        e[k] = h
        cols.append((f(x - 2 * e) - 8 * f(x - e) + 8 * f(x + e) - f(x + 2 * e)) / (12 * h))
    return np.stack(cols, -1)


@pytest.mark.parametrize("name", ["tree", "tree_mimic", "tree_float", "tree_float_mimic", "panda"])
def test_rnea_and_aba_derivatives_against_finite_differences(name):
    model = model_of(name)
    q, v, a, T = random_state(model, np.random.default_rng(3))
    dq, dv, da = core.rnea_derivatives(model, q, v, a, base_pose=T)
    kw = lambda T_: {"base_pose": T_} if model.floating_base else {}  # noqa: E731
    assert rel_err(dq, central(lambda q_, T_: reference.rnea(model, q_, v, a, **kw(T_)), model, q, T)) < 1e-7
    assert rel_err(dv, central_vec(lambda v_: reference.rnea(model, q, v_, a, **kw(T)), v)) < 1e-7
    assert rel_err(da, central_vec(lambda a_: reference.rnea(model, q, v, a_, **kw(T)), a)) < 1e-7
    tau = a  # any torque
    fq, fv, ft = core.aba_derivatives(model, q, v, tau, base_pose=T)
    assert rel_err(fq, central(lambda q_, T_: reference.aba(model, q_, v, tau, **kw(T_)), model, q, T)) < 1e-7
    assert rel_err(fv, central_vec(lambda v_: reference.aba(model, q, v_, tau, **kw(T)), v)) < 1e-7
    assert rel_err(ft, central_vec(lambda t_: reference.aba(model, q, v, t_, **kw(T)), tau)) < 1e-7


@pytest.mark.parametrize("name", ["tree", "tree_mimic", "tree_float", "solo12"])
def test_hybrid_derivatives_against_finite_differences(name):
    model = model_of(name)
    rng = np.random.default_rng(4)
    q, v, u, T = random_state(model, rng)
    kw = lambda T_: {"base_pose": T_} if model.floating_base else {}  # noqa: E731
    masks = [rng.random(model.nv) < 0.5, np.zeros(model.nv, bool), np.ones(model.nv, bool)]
    if model.floating_base:
        masks.append(np.r_[np.ones(6, bool), rng.random(model.n) < 0.5])
    for mask in masks:
        def unknowns(q_, v_, u_, T_):
            tau, acc = reference.hybrid(model, q_, v_, u_, mask, **kw(T_))
            return np.where(mask, tau, acc)
        dq, dv, du = core.hybrid_derivatives(model, q, v, u, mask, base_pose=T)
        assert rel_err(dq, central(lambda q_, T_: unknowns(q_, v, u, T_), model, q, T)) < 1e-7
        assert rel_err(dv, central_vec(lambda v_: unknowns(q, v_, u, T), v)) < 1e-7
        assert rel_err(du, central_vec(lambda u_: unknowns(q, v, u_, T), u)) < 1e-7
    aba_d = core.aba_derivatives(model, q, v, u, base_pose=T)
    rnea_d = core.rnea_derivatives(model, q, v, u, base_pose=T)
    for mine, ref in zip(core.hybrid_derivatives(model, q, v, u, masks[1], base_pose=T), aba_d):
        assert rel_err(mine, ref) < 1e-12
    for mine, ref in zip(core.hybrid_derivatives(model, q, v, u, masks[2], base_pose=T), rnea_d):
        assert rel_err(mine, ref) < 1e-12


# ---------------------------------------------------------------------------- complex step


def complex_ne(model: core.Model, q, v, a, T=None) -> np.ndarray:
    """Newton-Euler written here for complex inputs (scipy expm, 4x4 algebra): tau, (nv,)."""
    def se3(x):
        m = np.zeros((4, 4), complex)
        m[:3, :3] = hat_c(x[:3])
        m[:3, 3] = x[3:]
        return m

    def ad_c(x):
        out = np.zeros((6, 6), complex)
        out[:3, :3] = out[3:, 3:] = hat_c(x[:3])
        out[3:, :3] = hat_c(x[3:])
        return out

    def Ad_inv_c(f):
        R, p = f[:3, :3], f[:3, 3]
        out = np.zeros((6, 6), complex)
        out[:3, :3] = out[3:, 3:] = R.T
        out[3:, :3] = -R.T @ hat_c(p)
        return out

    qb = np.asarray(q) @ model.P.T + model.q_offset
    base = 6 if model.floating_base else 0
    V0 = np.asarray(v[:6], complex) if base else np.zeros(6, complex)
    Rt = (T[:3, :3].T if base else np.eye(3))
    A0 = (np.asarray(a[:6], complex) if base else np.zeros(6, complex)) + np.r_[np.zeros(3), -Rt @ model.gravity]
    qd, qdd = np.asarray(v[base:]) @ model.P.T, np.asarray(a[base:]) @ model.P.T
    X, V, A, F = [], [], [], []
    for i, p in enumerate(model.parent):
        X.append(Ad_inv_c(model.M[i] @ expm(se3(model.S[i] * qb[i]))))
        Vp, Ap = (V0, A0) if p < 0 else (V[p], A[p])
        V.append(X[i] @ Vp + model.S[i] * qd[i])
        A.append(X[i] @ Ap + ad_c(V[i]) @ model.S[i] * qd[i] + model.S[i] * qdd[i])
        F.append(model.J[i] @ A[i] - ad_c(V[i]).T @ model.J[i] @ V[i])
    F0 = model.J_base @ A0 - ad_c(V0).T @ model.J_base @ V0
    tau = np.zeros(model.nb, complex)
    for i in reversed(range(model.nb)):
        tau[i] = model.S[i] @ F[i]
        if model.parent[i] < 0:
            F0 = F0 + X[i].T @ F[i]
        else:
            F[model.parent[i]] = F[model.parent[i]] + X[i].T @ F[i]
    joint = tau @ model.P
    return np.r_[F0, joint] if base else joint


def hat_c(w):
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]], dtype=complex)


@pytest.mark.parametrize("name", ["tree_mimic", "tree_float_mimic"])
def test_derivatives_against_complex_step(name):
    """Complex step (exact to rounding, no cancellation) through an independent Newton-Euler."""
    model = model_of(name)
    q, v, a, T = random_state(model, np.random.default_rng(5))
    kw = {"base_pose": T} if model.floating_base else {}
    assert rel_err(complex_ne(model, q, v, a, T).real, reference.rnea(model, q, v, a, **kw)) < 1e-12
    h = 1e-30
    base = 6 * model.floating_base
    cols_q = []
    for k in range(model.nv):
        if k < base:  # T exp([i h e_k]): expm of a complex twist is analytic
            Tk = T @ expm(np.block([[hat_c(1j * h * np.eye(6)[k][:3]), (1j * h * np.eye(6)[k][3:, None])],
                                    [np.zeros((1, 4))]]))
            cols_q.append(complex_ne(model, q, v, a, Tk).imag / h)
        else:
            qc = q.astype(complex)
            qc[k - base] += 1j * h
            cols_q.append(complex_ne(model, qc, v, a, T).imag / h)
    eye = np.eye(model.nv)
    cs_q = np.stack(cols_q, 1)
    cs_v = np.stack([complex_ne(model, q, v + 1j * h * e, a, T).imag / h for e in eye], 1)
    cs_a = np.stack([complex_ne(model, q, v, a + 1j * h * e, T).imag / h for e in eye], 1)
    for fast in (True, False):
        dq, dv, da = core.rnea_derivatives(model, q, v, a, fast=fast, **kw)
        assert rel_err(dq, cs_q) < 1e-12 and rel_err(dv, cs_v) < 1e-12 and rel_err(da, cs_a) < 1e-12
    # Forward and hybrid dynamics by complex linear algebra on the independent M and bias.
    mask = np.zeros(model.nv, bool)
    mask[base + 1] = True

    def hybrid_c(q_, v_, u_, T_):
        b = complex_ne(model, q_, v_, np.zeros(model.nv), T_)
        M = np.stack([complex_ne(model, q_, v_, e, T_) - b for e in eye], 1)
        f, p = ~mask, mask
        acc = np.where(p, u_, 0).astype(complex)
        acc[f] = np.linalg.solve(M[np.ix_(f, f)], u_[f] - b[f] - M[np.ix_(f, p)] @ u_[p])
        return np.where(p, M @ acc + b, acc)

    u = a
    cs_u = np.stack([hybrid_c(q, v, u + 1j * h * e, T).imag / h for e in eye], 1)
    cs_v = np.stack([hybrid_c(q, v + 1j * h * e, u, T).imag / h for e in eye], 1)
    _, dyv, dyu = core.hybrid_derivatives(model, q, v, u, mask, **kw)
    assert rel_err(dyu, cs_u) < 1e-11 and rel_err(dyv, cs_v) < 1e-11


# ---------------------------------------------------------------------- time derivatives


def smooth_motion(model: core.Model, rng: np.random.Generator, degree: int = 7):
    """v(t) a polynomial; q(t) and T(t) integrated from q' = qd, T' = T [V_0] (DOP853, tight)."""
    C = rng.normal(size=(degree + 1, model.nv)) * 0.6
    q0 = rng.uniform(-1, 1, model.n)
    T0 = (core.pose_from_position_quaternion(rng.normal(size=3), rng.normal(size=4))
          if model.floating_base else None)

    def v_der(t: float, k: int) -> np.ndarray:
        return sum(C[j] * t ** (j - k) / math.factorial(j - k) for j in range(k, degree + 1))

    def state(t: float):
        base = 6 * model.floating_base
        if not base:  # q(t) in closed form
            return q0 + sum(C[j] * t ** (j + 1) / math.factorial(j + 1) for j in range(degree + 1)), None
        if t == 0:
            return q0, T0

        def rhs(s, y):
            V = v_der(s, 0)
            Vh = np.zeros((4, 4))
            Vh[:3, :3], Vh[:3, 3] = hat(V[:3]), V[3:6]
            return np.r_[V[6:], (y[model.n:].reshape(4, 4) @ Vh).ravel()]

        y = solve_ivp(rhs, (0, t), np.r_[q0, T0.ravel()], method="DOP853", rtol=1e-13, atol=1e-14).y[:, -1]
        T = y[model.n:].reshape(4, 4)
        U, _, Wt = np.linalg.svd(T[:3, :3])
        T[:3, :3] = U @ Wt
        return y[:model.n], T

    return v_der, state


@pytest.mark.parametrize("name", ["tree_mimic", "tree_float", "tree_float_mimic", "solo12"])
def test_time_derivatives_against_finite_differences(name):
    """tau^(k+1) = d/dt tau^(k) (4th-order central differences), k = 0..3; then ID/FD round trip."""
    model = model_of(name)
    r = 4
    v_der, state = smooth_motion(model, np.random.default_rng(6))
    h = 1e-3

    def taus(t):
        q, T = state(t)
        return core.rnea_time_derivatives(model, q, [v_der(t, k) for k in range(r + 2)], base_pose=T)

    samples = {s: taus(s * h) for s in (-2, -1, 0, 1, 2)}
    mid = samples[0]
    q0, T0 = state(0.0)
    kw = {"base_pose": T0} if model.floating_base else {}
    assert rel_err(mid[0], reference.rnea(model, q0, v_der(0, 0), v_der(0, 1), **kw)) < 1e-12
    for k in range(r):
        fd = (samples[-2][k] - 8 * samples[-1][k] + 8 * samples[1][k] - samples[2][k]) / (12 * h)
        assert rel_err(mid[k + 1], fd) < 1e-8, k
    acc = core.aba_time_derivatives(model, q0, v_der(0, 0), mid, **kw)
    assert len(acc) == r + 1
    for k in range(r + 1):
        assert rel_err(acc[k], v_der(0, k + 1)) < 1e-8, k  # solo12: light legs, M ill-conditioned


def test_aba_time_derivatives_against_finite_differences_of_aba():
    """Integrate the forward dynamics for a torque polynomial; a^(k+1) = d/dt a^(k) along it."""
    model = model_of("tree_float")
    rng = np.random.default_rng(8)
    Ct = rng.normal(size=(5, model.nv))
    tau_der = lambda t, k: sum(Ct[j] * t ** (j - k) / math.factorial(j - k) for j in range(k, 5))  # noqa: E731
    q0, v0 = rng.uniform(-1, 1, model.n), rng.normal(size=model.nv) * 0.5
    T0 = core.pose_from_position_quaternion(rng.normal(size=3), rng.normal(size=4))

    def rhs(t, y):
        q, v, T = y[:model.n], y[model.n:model.n + model.nv], y[model.n + model.nv:].reshape(4, 4)
        Vh = np.zeros((4, 4))
        Vh[:3, :3], Vh[:3, 3] = hat(v[:3]), v[3:6]
        a = reference.aba(model, q, v, tau_der(t, 0), base_pose=_orthonormal(T))
        return np.r_[v[6:], a, (T @ Vh).ravel()]

    y0 = np.r_[q0, v0, T0.ravel()]
    h, r = 2e-3, 3

    def acc_derivs(t):
        y = y0 if t == 0 else solve_ivp(rhs, (0, t), y0, method="DOP853", rtol=1e-13, atol=1e-14).y[:, -1]
        q, v, T = y[:model.n], y[model.n:model.n + model.nv], _orthonormal(y[model.n + model.nv:].reshape(4, 4))
        return core.aba_time_derivatives(model, q, v, [tau_der(t, k) for k in range(r + 1)], base_pose=T)

    s = {k: acc_derivs(k * h) for k in (-2, -1, 0, 1, 2)}
    for k in range(r):
        fd = (s[-2][k] - 8 * s[-1][k] + 8 * s[1][k] - s[2][k]) / (12 * h)
        assert rel_err(s[0][k + 1], fd) < 1e-6, k


def _orthonormal(T: np.ndarray) -> np.ndarray:
    T = T.copy()
    U, _, Wt = np.linalg.svd(T[:3, :3])
    T[:3, :3] = U @ Wt
    return T


# ------------------------------------------------------------------- identities, shapes, errors


@pytest.mark.parametrize("name", ["tree_float_mimic", "tree_mimic", "solo12", "panda"])
def test_fast_equals_reference_and_identities(name):
    model = model_of(name)
    q, v, a, T = random_state(model, np.random.default_rng(9), batch=(2, 3))
    kw = {"base_pose": T} if model.floating_base else {}
    fast = core.rnea_derivatives(model, q, v, a, **kw)
    ref = core.rnea_derivatives(model, q, v, a, fast=False, **kw)
    for x, y in zip(fast, ref):
        assert x.shape == (2, 3, model.nv, model.nv)
        assert rel_err(x, y) < 1e-12
    assert rel_err(fast[2], reference.mass_matrix(model, q, **kw)) < 1e-12
    f_fast = core.aba_derivatives(model, q, v, a, **kw)
    f_ref = core.aba_derivatives(model, q, v, a, fast=False, **kw)
    for x, y in zip(f_fast, f_ref):
        assert rel_err(x, y) < 1e-11
    assert np.allclose(f_fast[2] @ fast[2], np.eye(model.nv), atol=1e-9)
    # tau is quadratic in v: its v-derivative vanishes at v = 0 for a fixed base; at rest the
    # q-derivative is that of gravity (time derivatives of a motion at rest vanish).
    zero = np.zeros_like(v)
    _, dv0, _ = core.rnea_derivatives(model, q, zero, a, **kw)
    assert np.abs(dv0).max() < 1e-12
    taus = core.rnea_time_derivatives(model, q, [zero, zero, zero], **kw)
    assert rel_err(taus[0], reference.gravity(model, q, **kw)) < 1e-12 and np.abs(taus[1]).max() < 1e-12


@pytest.mark.parametrize("name", ["tree", "tree_mimic", "tree_float", "tree_float_mimic", "solo12"])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_fast_time_derivatives_equal_reference(name, batch):
    """The numba kernels of rnea/aba_time_derivatives give the numbers of the readable recursions."""
    model = model_of(name)
    rng = np.random.default_rng(11)
    q, _, _, T = random_state(model, rng, batch)
    kw = {"base_pose": T} if model.floating_base else {}
    r = 4
    v_derivs = list(rng.normal(size=(r + 2,) + batch + (model.nv,)) * 0.5)
    fast = core.rnea_time_derivatives(model, q, v_derivs, **kw)
    ref = core.rnea_time_derivatives(model, q, v_derivs, fast=False, **kw)
    assert len(fast) == r + 1
    for x, y in zip(fast, ref):
        assert x.shape == batch + (model.nv,) and rel_err(x, y) < 1e-12
    acc = core.aba_time_derivatives(model, q, v_derivs[0], ref, **kw)
    acc_ref = core.aba_time_derivatives(model, q, v_derivs[0], ref, fast=False, **kw)
    for k, (x, y) in enumerate(zip(acc, acc_ref)):
        assert x.shape == batch + (model.nv,) and rel_err(x, y) < 1e-9, k
        assert rel_err(x, v_derivs[k + 1]) < 1e-8, k  # solo12: light legs, M ill-conditioned


@pytest.mark.parametrize("name", ["tree", "tree_mimic", "tree_float", "tree_float_mimic", "panda", "solo12"])
def test_single_sample_time_derivatives_equal_reference(name):
    """The single-sample path (no checks.prepare) gives the readable recursions' numbers for every
    form of a single sample: a list of vectors, an (orders, nv) array, a strided q, plain lists."""
    model = model_of(name)
    rng = np.random.default_rng(12)
    q, _, _, T = random_state(model, rng)
    kw = {"base_pose": T} if model.floating_base else {}
    for r in (0, 1, 3):
        V = rng.normal(size=(r + 2, model.nv)) * 0.5
        ref = core.rnea_time_derivatives(model, q, list(V), fast=False, **kw)
        acc_ref = core.aba_time_derivatives(model, q, V[0], ref, fast=False, **kw)
        strided_q = np.stack([q, q], 1)[:, 0]
        for q_, v_derivs in ((q, list(V)), (q, V), (strided_q, V.tolist())):
            fast = core.rnea_time_derivatives(model, q_, v_derivs, **kw)
            assert len(fast) == r + 1
            for x, y in zip(fast, ref):
                assert x.shape == (model.nv,) and rel_err(x, y) < 1e-12
        for taus in (ref, np.array(ref)):
            acc = core.aba_time_derivatives(model, q, V[0], taus, **kw)
            assert len(acc) == r + 1
            for x, y in zip(acc, acc_ref):
                assert x.shape == (model.nv,) and rel_err(x, y) < 1e-9


def _bad_time_inputs(model: core.Model, rng: np.random.Generator):
    """(case, q, v_derivs, base_pose) of single samples that checks.prepare refuses."""
    q, v, _, T = random_state(model, rng)
    vd = np.stack([v, v, v])
    nan = vd.copy()
    nan[2, 0] = np.nan
    cases = [("short q", q[:-1], vd, T), ("NaN in q", np.full_like(q, np.nan), vd, T),
             ("one order", q, vd[:1], T), ("NaN in v''", q, nan, T), ("short vectors", q, vd[:, :-1], T),
             ("ragged list", q, [v, v[:3]], T), ("1-D array", q, v, T), ("no vectors", q, vd[:0], T)]
    if model.floating_base:
        bad_R, bad_row = T.copy(), T.copy()
        bad_R[:3, :3] *= 2
        bad_row[3, 0] = 0.5
        reflection = T @ np.diag([1.0, 1.0, -1.0, 1.0])
        cases += [("scaled R", q, vd, bad_R), ("last row", q, vd, bad_row), ("reflection", q, vd, reflection),
                  ("NaN pose", q, vd, np.full((4, 4), np.nan)), ("no pose", q, vd, None)]
    else:
        cases.append(("pose on a fixed base", q, vd, np.eye(4)))
    return cases


@pytest.mark.parametrize("name", ["tree_mimic", "tree_float"])
def test_single_sample_time_derivatives_bad_inputs(name):
    """Bad single samples raise the ValueError of checks.prepare, word for word as the reference path;
    the float64 ones are refused by the kernels themselves (BAD_INPUT), not by the dispatcher."""
    from liedyn_ros.core.fast import BAD_INPUT, fast_model
    from liedyn_ros.core.fast.entry import single

    model = model_of(name)
    fm = fast_model(model)
    v = np.ones(model.nv)
    for case, q, vd, T in _bad_time_inputs(model, np.random.default_rng(13)):
        kw = {} if T is None else {"base_pose": T}
        calls = [(core.rnea_time_derivatives, (q, vd))]
        if case != "one order":  # a single torque is a valid tau_derivs
            calls.append((core.aba_time_derivatives, (q, v, vd)))
        for f, args in calls:
            with pytest.raises(ValueError) as expected:
                f(model, *args, fast=False, **kw)
            with pytest.raises(ValueError) as got:
                f(model, *args, **kw)
            assert str(got.value) == str(expected.value), case
        if isinstance(vd, np.ndarray) and vd.ndim == 2 and (T is None) != model.floating_base:
            pose = np.eye(4) if T is None else T
            vd = np.ascontiguousarray(vd)  # the public functions hand the kernels contiguous orders
            out = np.empty((max(len(vd) - 1, 0), model.nv))
            assert single.rnea_time_one(fm.handle, q, vd, pose, out) == BAD_INPUT, case
            if case != "one order":
                out = np.empty((len(vd), model.nv))
                assert single.aba_time_one(fm.handle, q, v, vd, pose, out) == BAD_INPUT, case


def test_bad_inputs_raise_clear_errors():
    model = model_of("tree_float")
    q, v, a, T = random_state(model, np.random.default_rng(10))
    with pytest.raises(ValueError, match="base_pose"):
        core.rnea_derivatives(model, q, v, a)
    with pytest.raises(ValueError, match="v: contains NaN"):
        core.rnea_derivatives(model, q, np.full_like(v, np.nan), a, base_pose=T)
    with pytest.raises(ValueError, match="tau: expected length"):
        core.aba_derivatives(model, q, v, a[:-1], base_pose=T)
    with pytest.raises(ValueError, match="prescribed"):
        core.hybrid_derivatives(model, q, v, a, [1, 0], base_pose=T)
    with pytest.raises(ValueError, match="v_derivs: expected a list"):
        core.rnea_time_derivatives(model, q, [v], base_pose=T)
    with pytest.raises(ValueError, match=r"v_derivs\[1\]: expected length"):
        core.rnea_time_derivatives(model, q, [v, v[:3]], base_pose=T)
    with pytest.raises(ValueError, match=r"tau_derivs\[0\]: contains NaN"):
        core.aba_time_derivatives(model, q, v, [np.full_like(v, np.inf)], base_pose=T)
    with pytest.raises(ValueError, match="base_pose"):
        core.aba_time_derivatives(model, q, v, [a], base_pose=2 * T)
