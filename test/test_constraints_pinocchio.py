"""Constrained dynamics against Pinocchio 4's rigid constraint models (CONTACT_3D / CONTACT_6D, LOCAL).

Pinocchio's 3-D contact holds the classical acceleration of the contact point and its 6-D
contact the frame's spatial acceleration, both in the contact frame (LOCAL; LOCAL_WORLD_ALIGNED
for our frame="world"), with lambda the force (f) or wrench (f, m) on the robot there: our
conventions, so a and lam must agree even for velocities that violate the constraints. A point
loop closure is its CONTACT_3D between two joints. Inverse dynamics is checked against a KKT
system assembled from Pinocchio's M, b and frame Jacobians.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from robots import Twin, assert_close, random_pose, twin, twin_from_xml

from liedyn_ros import core

TOL = 1e-9
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def _offset(rng: np.random.Generator) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = pin.rpy.rpyToMatrix(*rng.uniform(-0.3, 0.3, 3))
    T[:3, 3] = rng.uniform(-0.03, 0.03, 3)
    return T


def _cases(rng: np.random.Generator) -> dict[str, tuple[Twin, list]]:
    hand = dict(offset=_offset(rng))
    return {
        "solo12 four feet": (twin("solo12"), [core.Contact(f) for f in FEET]),
        "solo12 three feet, offsets": (twin("solo12"), [core.Contact(f, offset=_offset(rng)) for f in FEET[:3]]),
        "solo12 four feet, world axes": (twin("solo12"), [core.Contact(f, frame="world") for f in FEET]),
        "talos flat feet": (twin("talos"), [core.Contact("left_sole_link", "flat"),
                                            core.Contact("right_sole_link", "flat")]),
        "talos feet and hands on a table": (twin("talos"), [
            core.Contact("left_sole_link", "flat"), core.Contact("right_sole_link", "flat"),
            core.Contact("gripper_left_base_link", "point", **hand),  # a link merged by a fixed joint
            core.Contact("wrist_right_ft_tool_link", "point", offset=_offset(rng))]),
    }


def _reference(c: core.Contact) -> pin.ReferenceFrame:
    return pin.LOCAL_WORLD_ALIGNED if c.frame == "world" else pin.LOCAL


def _pin_constraints(t: Twin, constraints: list) -> tuple:
    pm = t.pin_model
    models = []
    for c in constraints:
        frame = pm.frames[pm.getFrameId(c.link)]
        kind = pin.ContactType.CONTACT_3D if c.kind == "point" else pin.ContactType.CONTACT_6D
        models.append(pin.RigidConstraintModel(kind, pm, frame.parentJoint, frame.placement * pin.SE3(c.offset),
                                               _reference(c)))
    datas = pin.StdVec_RigidConstraintData([cm.createData() for cm in models])
    return pin.StdVec_RigidConstraintModel(models), datas


def _pin_lambda(constraints: list, lam_pin: np.ndarray) -> np.ndarray:
    """Pinocchio's (f, m) blocks of 6-D contacts reordered to our (m, f)."""
    out, r = [], 0
    for c in constraints:
        if c.kind == "point":
            out.append(lam_pin[r:r + 3])
            r += 3
        else:
            out.append(np.concatenate([lam_pin[r + 3:r + 6], lam_pin[r:r + 3]]))
            r += 6
    return np.concatenate(out)


def _pin_jacobian(t: Twin, constraints: list, q_pin: np.ndarray, E: np.ndarray) -> np.ndarray:
    """Pinocchio's LOCAL frame Jacobians of the contact frames, rows (omega, v), acting on our v."""
    pm, pd = t.pin_model, t.pin_model.createData()
    pin.computeJointJacobians(pm, pd, q_pin)
    rows = []
    for c in constraints:
        frame = pm.frames[pm.getFrameId(c.link)]
        J = pin.getFrameJacobian(pm, pd, frame.parentJoint, frame.placement * pin.SE3(c.offset), _reference(c))
        J = np.vstack([J[3:], J[:3]]) @ E
        rows.append(J[3:] if c.kind == "point" else J)
    return np.vstack(rows)


@pytest.mark.parametrize("name", ["solo12 four feet", "solo12 three feet, offsets", "solo12 four feet, world axes",
                                  "talos flat feet",
                                  "talos feet and hands on a table"])
@pytest.mark.parametrize("consistent", [True, False])
def test_forward_matches_pinocchio(name: str, consistent: bool) -> None:
    rng = np.random.default_rng(11)
    t, constraints = _cases(rng)[name]
    m = t.model
    q, T = rng.uniform(-1.0, 1.0, m.n), random_pose(rng)
    v, tau = rng.normal(size=m.nv), rng.normal(size=m.nv) * 5
    q_pin, E = t.to_pin(q, T)
    A_pin = _pin_jacobian(t, constraints, q_pin, E)
    assert_close(core.constraint_jacobian(m, q, constraints, base_pose=T), A_pin, TOL, "A")
    if consistent:
        v -= np.linalg.pinv(A_pin) @ (A_pin @ v)
    a, lam = core.constrained_aba(m, q, v, tau, constraints, base_pose=T, tol=1e-9 if consistent else np.inf)

    pin_models, pin_datas = _pin_constraints(t, constraints)
    pd = t.pin_model.createData()
    pin.initConstraintDynamics(t.pin_model, pd, pin_models, pin_datas)
    a_pin = pin.constraintDynamics(t.pin_model, pd, q_pin, E @ v, np.linalg.solve(E.T, tau), pin_models, pin_datas,
                                   pin.ProximalSettings(1e-14, 0.0, 1))
    assert_close(a, np.linalg.solve(E, a_pin), TOL, f"{name}: a")
    assert_close(lam, _pin_lambda(constraints, pd.lambda_c), TOL, f"{name}: lambda")
    a_ref, lam_ref = core.constrained_aba(m, q, v, tau, constraints, base_pose=T, tol=np.inf, fast=False)
    assert_close(a, a_ref, 1e-10, f"{name}: compiled a = reference a")
    assert_close(lam, lam_ref, 1e-10, f"{name}: compiled lam = reference lam")


def test_redundant_contacts_give_the_unique_a_and_least_norm_lam() -> None:
    """A flat foot plus point contacts at its four corners: 18 rows of rank 6. a is the flat foot's
    alone, A^T lam the same generalized force, and lam has no part in the null space of A^T."""
    t = twin("talos")
    m = t.model
    rng = np.random.default_rng(13)
    corners = []
    for x, y in ((0.1, 0.05), (0.1, -0.05), (-0.1, 0.05), (-0.1, -0.05)):
        T = np.eye(4)
        T[:3, 3] = [x, y, 0.0]
        corners.append(core.Contact("left_sole_link", "point", offset=T))
    flat = [core.Contact("left_sole_link", "flat")]
    q, T = rng.uniform(-0.5, 0.5, m.n), random_pose(rng)
    A1 = core.constraint_jacobian(m, q, flat, base_pose=T)
    v = rng.normal(size=m.nv)
    v -= np.linalg.pinv(A1) @ (A1 @ v)
    tau = rng.normal(size=m.nv)
    a1, lam1 = core.constrained_aba(m, q, v, tau, flat, base_pose=T)
    both = flat + corners
    a, lam = core.constrained_aba(m, q, v, tau, both, base_pose=T)
    A = core.constraint_jacobian(m, q, both, base_pose=T)
    assert np.linalg.matrix_rank(A) == 6
    assert_close(a, a1, TOL, "a")
    assert_close(A.T @ lam, A1.T @ lam1, TOL, "A^T lam")
    null = np.linalg.svd(A.T)[2][6:]  # rows spanning the null space of A^T
    assert np.abs(null @ lam).max() < 1e-9 * np.abs(lam).max()


@pytest.mark.parametrize("name", ["solo12 four feet", "talos feet and hands on a table"])
def test_min_torque_matches_kkt_from_pinocchio(name: str) -> None:
    """min |W^1/2 tau_a|^2 s.t. A_p^T lam = tau_pr, tau_a = tau_ar - A_a^T lam: its KKT system, with
    Pinocchio's rnea and Jacobians, against constrained_rnea."""
    rng = np.random.default_rng(12)
    t, constraints = _cases(rng)[name]
    m = t.model
    q, T = rng.uniform(-1.0, 1.0, m.n), random_pose(rng)
    q_pin, E = t.to_pin(q, T)
    A = _pin_jacobian(t, constraints, q_pin, E)
    v = rng.normal(size=m.nv)
    v -= np.linalg.pinv(A) @ (A @ v)
    a = rng.normal(size=m.nv)  # the KKT balance holds for any a; it needs no consistent acceleration
    pm, pd = t.pin_model, t.pin_model.createData()
    tau_r = E.T @ pin.rnea(pm, pd, q_pin, E @ v, E @ a)
    w = rng.uniform(0.5, 2.0, m.n)
    Aa, Ap = A[:, 6:], A[:, :6]
    mm = A.shape[0]
    kkt = np.block([[Aa @ np.diag(w) @ Aa.T, Ap], [Ap.T, np.zeros((6, 6))]])
    sol = np.linalg.lstsq(kkt, np.concatenate([Aa @ (w * tau_r[6:]), tau_r[:6]]), rcond=None)[0]
    lam_want = sol[:mm]
    tau_want = np.concatenate([np.zeros(6), tau_r[6:] - Aa.T @ lam_want])
    for fast in (True, False):
        tau, lam = core.constrained_rnea(m, q, v, a, constraints, base_pose=T, weights=w, tol=np.inf, fast=fast)
        assert_close(tau, tau_want, TOL, f"{name}: tau")
        assert_close(lam, lam_want, 1e-8, f"{name}: lam")
    # min_force: the least-norm lam that balances the base
    tau_f, lam_f = core.constrained_rnea(m, q, v, a, constraints, base_pose=T, solution="min_force", tol=np.inf)
    assert_close(lam_f, np.linalg.pinv(Ap.T) @ tau_r[:6], 1e-8, f"{name}: min_force lam")
    assert_close(tau_f[6:], tau_r[6:] - Aa.T @ lam_f, TOL, f"{name}: min_force tau")
    # weighted min_force: least lam^T W lam with A_p^T lam = tau_pr, lam = W^-1 A_p (A_p^T W^-1 A_p)^-1 tau_pr
    wf = rng.uniform(0.5, 2.0, mm)
    _, lam_w = core.constrained_rnea(m, q, v, a, constraints, base_pose=T, solution="min_force", weights=wf,
                                     tol=np.inf)
    assert_close(lam_w, (Ap / wf[:, None]) @ np.linalg.solve(Ap.T @ (Ap / wf[:, None]), tau_r[:6]), 1e-8,
                 f"{name}: weighted min_force lam")


@pytest.mark.parametrize("name", ["four_bar", "five_bar"])
def test_loop_closure_matches_pinocchio(name: str) -> None:
    """A point loop closure is Pinocchio's CONTACT_3D between two joints (LOCAL): the same a, and
    lambda the force on link_a in frame a. Its third row is empty in the plane, so Pinocchio runs
    its proximal iterations (mu 1e-12), which converge to the least-norm lambda as ours is."""
    from test_constraints_loops import LOOPS, THETA, _Phi, phi

    xml, loops, _ = LOOPS[name]
    t = twin_from_xml(xml, False)
    pm, closure = t.pin_model, loops[0]
    fa, fb = (pm.frames[pm.getFrameId(link)] for link in (closure.link_a, closure.link_b))
    cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm,
                                  fa.parentJoint, fa.placement * pin.SE3(closure.offset_a),
                                  fb.parentJoint, fb.placement * pin.SE3(closure.offset_b), pin.LOCAL)
    models, datas = pin.StdVec_RigidConstraintModel([cm]), pin.StdVec_RigidConstraintData([cm.createData()])
    pd = pm.createData()
    pin.initConstraintDynamics(pm, pd, models, datas)
    theta = THETA[name]
    q, v = phi(name, theta), _Phi(name, theta) @ np.full(len(theta), 0.7)
    tau = np.random.default_rng(14).normal(size=t.model.n)
    q_pin, E = t.to_pin(q)
    a_pin = pin.constraintDynamics(pm, pd, q_pin, E @ v, np.linalg.solve(E.T, tau), models, datas,
                                   pin.ProximalSettings(1e-14, 1e-12, 50))
    a, lam = core.constrained_aba(t.model, q, v, tau, loops, tol=1e-8)
    assert_close(a, np.linalg.solve(E, a_pin), TOL, f"{name}: a")
    assert_close(lam, pd.lambda_c, TOL, f"{name}: lambda")


@pytest.mark.parametrize("kind", ["weld", "point"])
def test_spatial_loop_closure_matches_pinocchio(kind: str) -> None:
    """A random tree closed by a weld (CONTACT_6D) or ball (CONTACT_3D) between two branches, with
    offset_b chosen so that the frames coincide at q: a and lambda against Pinocchio, and the bias
    c equal to d/dt(A) v by differences along an admissible motion."""
    from robots import advance

    rng = np.random.default_rng(15)
    t = twin_from_xml(_two_arms_urdf(rng), False)
    m = t.model
    link_a, link_b = "a4", "b4"
    q = rng.uniform(-1.0, 1.0, m.n)
    offset_a = _offset(rng)
    T_a = link_pose_of(t, link_a, q) @ offset_a
    offset_b = np.linalg.solve(link_pose_of(t, link_b, q), T_a)  # frame b on link_b coincides with frame a
    loops = [core.LoopClosure(link_a, link_b, kind, offset_a, offset_b)]
    A = core.constraint_jacobian(m, q, loops)
    v = rng.normal(size=m.nv)
    v -= np.linalg.pinv(A) @ (A @ v)
    tau = rng.normal(size=m.nv)
    a, lam = core.constrained_aba(m, q, v, tau, loops, tol=1e-9)

    pm = t.pin_model
    fa, fb = (pm.frames[pm.getFrameId(link)] for link in (link_a, link_b))
    contact = pin.ContactType.CONTACT_6D if kind == "weld" else pin.ContactType.CONTACT_3D
    cm = pin.RigidConstraintModel(contact, pm, fa.parentJoint, fa.placement * pin.SE3(offset_a),
                                  fb.parentJoint, fb.placement * pin.SE3(offset_b), pin.LOCAL)
    models, datas = pin.StdVec_RigidConstraintModel([cm]), pin.StdVec_RigidConstraintData([cm.createData()])
    pd = pm.createData()
    pin.initConstraintDynamics(pm, pd, models, datas)
    q_pin, E = t.to_pin(q)
    a_pin = pin.constraintDynamics(pm, pd, q_pin, E @ v, np.linalg.solve(E.T, tau), models, datas,
                                   pin.ProximalSettings(1e-14, 0.0, 1))
    assert_close(a, np.linalg.solve(E, a_pin), TOL, f"{kind}: a")
    want = pd.lambda_c if kind == "point" else np.concatenate([pd.lambda_c[3:], pd.lambda_c[:3]])
    assert_close(lam, want, TOL, f"{kind}: lambda")
    eps = 1e-6
    dA = (core.constraint_jacobian(m, advance(m, q, v, None, eps)[0], loops)
          - core.constraint_jacobian(m, advance(m, q, v, None, -eps)[0], loops)) / (2 * eps)
    assert_close(core.constraint_bias(m, q, v, loops), dA @ v, 1e-7, f"{kind}: Adot v")


def _two_arms_urdf(rng: np.random.Generator) -> str:
    """Two arms of four revolute joints with random axes and origins on one ground: 8 joints."""
    parts = ['<robot name="two_arms"><link name="ground"/>']
    for arm in "ab":
        parent = "ground"
        for k in range(1, 5):
            name = f"{arm}{k}"
            axis = rng.normal(size=3)
            xyz, com = rng.uniform(-0.3, 0.3, 3), rng.uniform(-0.1, 0.1, 3)
            parts.append(f'<link name="{name}"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="1"/>'
                         '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial></link>'
                         f'<joint name="j{name}" type="continuous"><parent link="{parent}"/><child link="{name}"/>'
                         f'<origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}"/><axis xyz="{axis[0]} {axis[1]} {axis[2]}"/></joint>')
            parent = name
    return "".join(parts) + "</robot>"


def link_pose_of(t: Twin, link: str, q: np.ndarray) -> np.ndarray:
    """World pose of a link from Pinocchio's forward kinematics."""
    pm, pd = t.pin_model, t.pin_model.createData()
    q_pin, _ = t.to_pin(q)
    pin.framesForwardKinematics(pm, pd, q_pin)
    return pd.oMf[pm.getFrameId(link)].homogeneous
