"""Closed loops (planar four-bar and five-bar), identities between the constrained algorithms, errors.

The loops are open trees cut at one revolute joint and closed by a point LoopClosure (in the
plane two of its three rows are independent: A is rank-deficient by construction). Their
closed-form geometry q = phi(theta) in the independent coordinates theta (circle intersections)
gives the reduced dynamics  Phi^T (M (Phi thdd + dPhi) + b - tau) = 0  with Pinocchio's M and
b, Phi = dphi/dtheta and dPhi = (d/dt Phi) thd by differences of phi, against which constrained
forward dynamics is checked.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from robots import advance, assert_close, kinetic_energy, link_pose, potential_energy, random_pose, rk4_step, twin, \
    twin_from_xml

from liedyn_ros import core


def _link(name: str, length: float, mass: float) -> str:
    I = mass * length ** 2 / 12
    return (f'<link name="{name}"><inertial><origin xyz="{length / 2} 0 0"/><mass value="{mass}"/>'
            f'<inertia ixx="1e-4" ixy="0" ixz="0" iyy="{I}" iyz="0" izz="{I}"/></inertial></link>')


def _joint(name: str, parent: str, child: str, x: float) -> str:
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{x} 0 0"/><axis xyz="0 1 0"/><limit lower="-7" upper="7" effort="9" velocity="9"/></joint>')


# Lengths: four-bar crank a, coupler b, rocker c, ground d; five-bar l1..l4, ground d5.
A4, B4, C4, D4 = 0.3, 0.8, 0.6, 0.7
L5, D5 = (0.4, 0.6, 0.55, 0.45), 0.5
FOUR_BAR = ('<robot name="four_bar"><link name="ground"/>' + _link("crank", A4, 1.0) + _link("coupler", B4, 2.0)
            + _link("rocker", C4, 1.5) + _joint("j1", "ground", "crank", 0.0) + _joint("j2", "crank", "coupler", A4)
            + _joint("j4", "ground", "rocker", D4) + "</robot>")
FIVE_BAR = ('<robot name="five_bar"><link name="ground"/>' + _link("l1", L5[0], 1.0) + _link("l2", L5[1], 1.2)
            + _link("l4", L5[3], 0.9) + _link("l3", L5[2], 1.1) + _joint("j1", "ground", "l1", 0.0)
            + _joint("j2", "l1", "l2", L5[0]) + _joint("j5", "ground", "l4", D5) + _joint("j4", "l4", "l3", L5[3])
            + "</robot>")


def _tip(length: float) -> np.ndarray:
    T = np.eye(4)
    T[0, 3] = length
    return T


LOOPS = {
    "four_bar": (FOUR_BAR, [core.LoopClosure("coupler", "rocker", "point", _tip(B4), _tip(C4))], [0]),
    "five_bar": (FIVE_BAR, [core.LoopClosure("l2", "l3", "point", _tip(L5[1]), _tip(L5[2]))], [0, 2]),
}


THETA = {"four_bar": np.array([0.9]), "five_bar": np.array([1.3, 1.9])}  # away from singular poses


def _angle(d: np.ndarray) -> float:
    """Rotation about y taking x to the planar direction d = (x, z): x -> (cos t, -sin t)."""
    return float(np.arctan2(-d[1], d[0]))


def _u(t: float) -> np.ndarray:
    return np.array([np.cos(t), -np.sin(t)])


def _meet(P: np.ndarray, r1: float, Q: np.ndarray, r2: float) -> np.ndarray:
    """The intersection of circles (P, r1) and (Q, r2) on the upper branch (z > line PQ)."""
    d = np.linalg.norm(Q - P)
    x = (d * d + r1 * r1 - r2 * r2) / (2 * d)
    e = (Q - P) / d
    return P + x * e + np.sqrt(r1 * r1 - x * x) * np.array([-e[1], e[0]])


def phi(name: str, theta: np.ndarray) -> np.ndarray:
    """Joint angles of the closed loop from its independent coordinates (closed form)."""
    if name == "four_bar":
        P = A4 * _u(theta[0])
        X = _meet(P, B4, np.array([D4, 0.0]), C4)
        g = _angle(X - P)
        return np.array([theta[0], g - theta[0], _angle(X - np.array([D4, 0.0]))])
    P1, P4 = L5[0] * _u(theta[0]), np.array([D5, 0.0]) + L5[3] * _u(theta[1])
    X = _meet(P1, L5[1], P4, L5[2])
    return np.array([theta[0], _angle(X - P1) - theta[0], theta[1], _angle(X - P4) - theta[1]])


def _Phi(name: str, theta: np.ndarray) -> np.ndarray:
    """dphi/dtheta by central differences, Richardson-extrapolated."""
    def diff(h: float) -> np.ndarray:
        return np.array([(phi(name, theta + h * e) - phi(name, theta - h * e)) / (2 * h) for e in np.eye(len(theta))]).T

    return (4 * diff(5e-4) - diff(1e-3)) / 3


def _reduced_qdd(name: str, t, theta: np.ndarray, thd: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """qdd from the closed-form reduced dynamics in theta, with Pinocchio's M and b."""
    Phi = _Phi(name, theta)

    def second(h: float) -> np.ndarray:
        return (phi(name, theta + h * thd) - 2 * phi(name, theta) + phi(name, theta - h * thd)) / h ** 2

    dPhi = (4 * second(5e-4) - second(1e-3)) / 3  # Richardson: error O(h^4)
    q, v = phi(name, theta), Phi @ thd
    q_pin, E = t.to_pin(q)
    M = pin.crba(t.pin_model, t.pin_model.createData(), q_pin)
    M = E.T @ (np.triu(M) + np.triu(M, 1).T) @ E
    b = E.T @ pin.rnea(t.pin_model, t.pin_model.createData(), q_pin, E @ v, np.zeros(len(v)))
    thdd = np.linalg.solve(Phi.T @ M @ Phi, Phi.T @ (tau - b - M @ dPhi))
    return Phi @ thdd + dPhi


@pytest.mark.parametrize("name", list(LOOPS))
def test_loop_forward_equals_reduced_dynamics(name: str) -> None:
    xml, constraints, indep = LOOPS[name]
    t = twin_from_xml(xml, False)
    rng = np.random.default_rng(3)
    theta = THETA[name]
    thd = rng.normal(size=len(indep))
    q = phi(name, theta)
    Phi = _Phi(name, theta)
    v, tau = Phi @ thd, rng.normal(size=t.model.n)
    a, lam = core.constrained_aba(t.model, q, v, tau, constraints)
    assert_close(a, _reduced_qdd(name, t, theta, thd, tau), 1e-8, f"{name}: qdd")  # differences of phi
    A = core.constraint_jacobian(t.model, q, constraints)
    assert np.linalg.matrix_rank(A) == 2  # the out-of-plane row is zero: least-norm lam has no y force
    assert abs(lam[1]) < 1e-12


@pytest.mark.parametrize("name", list(LOOPS))
def test_loop_holds_along_a_simulated_trajectory(name: str) -> None:
    """RK4 under gravity, tau = 0, with Baumgarte gains: at every step A a + c = 0 (1e-10), the
    loop stays closed (tip-to-tip distance from independent kinematics, and A v, below 1e-7) and
    energy is conserved: lam does no work. RK4's inner stages leave the constraints by O(h^2),
    hence their looser tol."""
    xml, constraints, indep = LOOPS[name]
    model = core.load_urdf(xml)
    closure = constraints[0]
    q = phi(name, THETA[name])
    v = np.zeros(model.n)

    def accel(q, v, _):
        return core.constrained_aba(model, q, v, np.zeros(model.n), constraints, baumgarte=(400.0, 40.0), tol=1e-4)[0]

    energy, worst, residual = [kinetic_energy(model, q, v) + potential_energy(model, q)], 0.0, 0.0
    for step in range(60):
        q, v, _ = rk4_step(model, q, v, None, 2e-3, accel)
        a, _ = core.constrained_aba(model, q, v, np.zeros(model.n), constraints, tol=1e-7)
        A = core.constraint_jacobian(model, q, constraints)
        residual = max(residual, np.abs(A @ a + core.constraint_bias(model, q, v, constraints)).max())
        worst = max(worst, np.abs(A @ v).max())
        if step % 10 == 9:  # poses and energies by scipy's expm and differences: every tenth step
            gap = (link_pose(model, closure.link_a, q) @ closure.offset_a - link_pose(model, closure.link_b, q)
                   @ closure.offset_b)[:3, 3]
            worst = max(worst, np.abs(gap).max())
            energy.append(kinetic_energy(model, q, v) + potential_energy(model, q))
    assert residual < 1e-10, residual
    assert worst < 1e-7, worst
    assert np.ptp(energy) < 1e-7 * max(1.0, np.abs(energy).max()), np.ptp(energy)
    assert np.linalg.norm(v) > 0.1  # it moved


def _solo_state(rng, active=(True, True, True, True)):
    t = twin("solo12")
    m = t.model
    constraints = core.constraint_set(m, [core.Contact(f) for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")])
    q, T = rng.uniform(-1.0, 1.0, m.n), random_pose(rng)
    A = core.constraint_jacobian(m, q, constraints, base_pose=T)[np.repeat(active, 3)]
    v = rng.normal(size=m.nv)
    v -= np.linalg.pinv(A) @ (A @ v)
    return m, constraints, q, T, v


def test_bias_is_the_derivative_of_A_along_the_motion() -> None:
    """c = d/dt(A(q(t))) v at a consistent state, by central differences of A along v."""
    rng = np.random.default_rng(5)
    m, cs, q, T, v = _solo_state(rng)
    eps = 1e-6
    Ap = core.constraint_jacobian(m, *advance(m, q, v, T, eps)[:1], cs, base_pose=advance(m, q, v, T, eps)[1])
    Am = core.constraint_jacobian(m, *advance(m, q, v, T, -eps)[:1], cs, base_pose=advance(m, q, v, T, -eps)[1])
    assert_close(core.constraint_bias(m, q, v, cs, base_pose=T), (Ap - Am) @ v / (2 * eps), 1e-7, "Adot v")
    xml, loops, indep = LOOPS["five_bar"]
    model = core.load_urdf(xml)
    q5 = phi("five_bar", THETA["five_bar"])
    A5 = core.constraint_jacobian(model, q5, loops)
    v5 = np.linalg.svd(A5)[2][-1]  # an admissible velocity
    Ap = core.constraint_jacobian(model, q5 + eps * v5, loops)
    Am = core.constraint_jacobian(model, q5 - eps * v5, loops)
    assert_close(core.constraint_bias(model, q5, v5, loops), (Ap - Am) @ v5 / (2 * eps), 1e-7, "loop Adot v")


def test_forward_and_inverse_invert_each_other() -> None:
    rng = np.random.default_rng(6)
    m, cs, q, T, v = _solo_state(rng)
    tau = np.concatenate([np.zeros(6), rng.normal(size=m.n)])
    a, lam = core.constrained_aba(m, q, v, tau, cs, base_pose=T)
    for solution in ("min_torque", "min_force"):
        tau_id, lam_id = core.constrained_rnea(m, q, v, a, cs, base_pose=T, solution=solution)
        a_fd, lam_fd = core.constrained_aba(m, q, v, tau_id, cs, base_pose=T)
        assert_close(a_fd, a, 1e-9, f"FD(ID(a)) [{solution}]")
        assert_close(lam_fd, lam_id, 1e-9, f"lam of FD(ID(a)) [{solution}]")
    # m = n_p (one flat foot of Talos: 6 constraints, 6 passive coordinates): ID is unique, ID(FD) = tau.
    t = twin("talos")
    foot = [core.Contact("left_sole_link", "flat")]
    qt, Tt = rng.uniform(-0.5, 0.5, t.model.n), random_pose(rng)
    At = core.constraint_jacobian(t.model, qt, foot, base_pose=Tt)
    vt = rng.normal(size=t.model.nv)
    vt -= np.linalg.pinv(At) @ (At @ vt)
    taut = np.concatenate([np.zeros(6), rng.normal(size=t.model.n)])
    at, lamt = core.constrained_aba(t.model, qt, vt, taut, foot, base_pose=Tt)
    tau_back, lam_back = core.constrained_rnea(t.model, qt, vt, at, foot, base_pose=Tt, solution="unique")
    assert_close(tau_back, taut, 1e-9, "ID(FD(tau))")
    assert_close(lam_back, lamt, 1e-9, "lam")


def test_loop_inverse_dynamics_with_passive_joints() -> None:
    """The five-bar driven at its two ground joints (Kim's example): the passive joints j2, j4 carry
    no torque, and the driving torques of a motion are unique, so ID returns the FD's torques."""
    xml, loops, _ = LOOPS["five_bar"]
    model = core.load_urdf(xml)
    theta = THETA["five_bar"]
    q, v = phi("five_bar", theta), _Phi("five_bar", theta) @ np.array([0.7, -0.4])
    tau = np.array([1.5, 0.0, -0.8, 0.0])  # j1, j2, j5, j4: the ground joints j1 and j5 drive
    a, lam = core.constrained_aba(model, q, v, tau, loops, tol=1e-8)
    tau_id, lam_id = core.constrained_rnea(model, q, v, a, loops, passive=["j2", "j4"], tol=1e-8)
    assert_close(tau_id, tau, 1e-9, "driving torques")
    assert_close(lam_id, lam, 1e-9, "closure force")  # least norm: both have no out-of-plane force


def test_hybrid_reduces_to_forward_and_inverse() -> None:
    """Nothing prescribed: constrained_aba. The actuated joints prescribed (base free): their
    torques realise the accelerations of constrained_aba."""
    rng = np.random.default_rng(7)
    m, cs, q, T, v = _solo_state(rng)
    tau = np.concatenate([np.zeros(6), rng.normal(size=m.n)])
    a, lam = core.constrained_aba(m, q, v, tau, cs, base_pose=T)
    free = np.zeros(m.nv, dtype=bool)
    tau_h, a_h, lam_h = core.constrained_hybrid(m, q, v, tau, free, cs, base_pose=T)
    assert_close(a_h, a, 1e-9, "a")
    assert_close(lam_h, lam, 1e-9, "lam")
    # Prescribe the legs: 12 constraints > 6 free base coordinates, so the prescribed motion must be
    # admissible (it is: a came from constrained_aba) and lam is the least-norm one.
    legs = np.arange(m.nv) >= 6
    tau_h, a_h, lam_h = core.constrained_hybrid(m, q, v, np.where(legs, a, 0.0), legs, cs, base_pose=T)
    assert_close(a_h, a, 1e-9, "a (legs prescribed)")
    a_back, _ = core.constrained_aba(m, q, v, tau_h, cs, base_pose=T)
    assert_close(a_back, a, 1e-9, "FD of the hybrid torques")
    with pytest.raises(ValueError, match="leave no motion the constraints allow"):
        core.constrained_hybrid(m, q, v, np.where(legs, a + 1.0, 0.0), legs, cs, base_pose=T)


def test_batches_masks_and_friction_checks() -> None:
    rng = np.random.default_rng(8)
    m, cs, q, T, v = _solo_state(rng, active=(True, True, True, False))
    tau = np.concatenate([np.zeros(6), rng.normal(size=m.n)])
    active = np.array([True, True, True, False])
    a, lam = core.constrained_aba(m, q, v, tau, cs, base_pose=T, active=active)
    assert np.all(lam[9:] == 0.0)
    a3, lam3 = core.constrained_aba(m, q, v, tau, [core.Contact(f) for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT")],
                                    base_pose=T)
    assert_close(a, a3, 1e-12, "masked = fewer contacts")
    assert_close(lam[:9], lam3, 1e-12, "masked lam")
    # a batch of 2 x 2 with per-sample masks equals the samples one by one
    masks = np.array([[[True] * 3 + [False], [True] * 3 + [False]], [[True] * 3 + [False], [True, True, True, False]]])
    qb, vb = np.broadcast_to(q, (2, 2, m.n)), np.broadcast_to(v, (2, 2, m.nv))
    taub = tau + rng.normal(size=(2, 2, m.nv)) * np.r_[np.zeros(6), np.ones(m.n)]
    ab, lamb = core.constrained_aba(m, qb, vb, taub, cs, base_pose=T, active=masks)
    assert ab.shape == (2, 2, m.nv) and lamb.shape == (2, 2, 12)
    for i in range(2):
        for j in range(2):
            aij, lij = core.constrained_aba(m, q, v, taub[i, j], cs, base_pose=T, active=masks[i, j])
            assert_close(ab[i, j], aij, 1e-12, "batch")
            assert_close(lamb[i, j], lij, 1e-12, "batch lam")
    checks = core.contact_wrench_checks(cs, lam, 0.8)
    assert [c.name for c in checks] == list(cs.names)
    f = lam[:3]
    assert checks[0].pushes == (f[2] >= 0) and checks[0].in_cone == (np.hypot(f[0], f[1]) <= 0.8 * f[2] + 1e-9)
    # standing still on flat ground, forces in the world's axes: all four feet push, inside the cone
    q0 = np.tile([0.0, 0.8, -1.6], 4)
    cs_up = core.constraint_set(m, [core.Contact(c.link, frame="world") for c in cs.constraints])
    tau_st, lam_st = core.constrained_rnea(m, q0, np.zeros(m.nv), np.zeros(m.nv), cs_up, base_pose=np.eye(4),
                                           solution="min_force")
    assert all(c.pushes and c.in_cone for c in core.contact_wrench_checks(cs_up, lam_st, 1.0))
    assert_close(lam_st[2::3].sum(), m.mass * 9.81, 1e-9, "the feet carry the weight")


def test_errors_say_what_is_wrong() -> None:
    rng = np.random.default_rng(9)
    m, cs, q, T, v = _solo_state(rng)
    tau = np.zeros(m.nv)
    with pytest.raises(ValueError, match="unknown link 'NOSE'"):
        core.constrained_aba(m, q, v, tau, [core.Contact("NOSE")], base_pose=T)
    with pytest.raises(ValueError, match="kind"):
        core.Contact("FL_FOOT", "edge")
    with pytest.raises(ValueError, match=r"violates the point contact on 'FL_FOOT' by [0-9.e-]+ m/s"):
        core.constrained_aba(m, q, v + 0.01, tau, cs, base_pose=T)
    with pytest.raises(ValueError, match="active"):
        core.constrained_aba(m, q, v, tau, cs, base_pose=T, active=[True, False])
    with pytest.raises(ValueError, match="not unique"):
        core.constrained_rnea(m, q, v, np.zeros(m.nv), cs, base_pose=T, solution="unique")
    with pytest.raises(ValueError, match="no constraint force balances"):
        core.constrained_rnea(m, q, v, np.zeros(m.nv), cs, base_pose=T, active=[True, False, False, False])
    with pytest.raises(ValueError, match="passive: unknown joint"):
        core.constrained_rnea(m, q, v, np.zeros(m.nv), cs, base_pose=T, passive=["knee"])
    xml, loops, _ = LOOPS["four_bar"]
    model = core.load_urdf(xml)
    with pytest.raises(ValueError, match=r"violates the point loop closure 'coupler'-'rocker' by [0-9.e-]+ m or rad"):
        core.constrained_aba(model, np.zeros(3), np.zeros(3), np.zeros(3), loops)


def test_readme_example_runs() -> None:
    """The legged page's example (docs/legged.md), run as written: standing still, the torques it
    prints give back a = 0."""
    page = (Path(__file__).parents[1] / "docs" / "legged.md").read_text()
    block = page.split("## Contacts and closed loops", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(block, scope)  # noqa: S102 - our own documentation
    assert_close(scope["a2"], np.zeros(scope["model"].nv), 1e-9, "a2")
    assert np.all(scope["lam3"][9:] == 0.0)



def _closures_on(model: core.Model, rng: np.random.Generator) -> list:
    """A weld (from the root link l0) and a point loop closure between random links, two contacts (flat in the
    world's axes, point in its own), all at random offsets."""
    a, b, c, d, f = rng.choice(sorted(set(model.link_frames) - {"l0"}), 5, replace=False)
    return [core.Contact(f, "flat", random_pose(rng), "world"),
            core.LoopClosure("l0", a, "weld", random_pose(rng), random_pose(rng)),
            core.LoopClosure(b, c, "point", random_pose(rng), random_pose(rng)),
            core.Contact(d, "point", random_pose(rng))]


def _frames_of(model: core.Model, constraint, q: np.ndarray, pose: np.ndarray | None) -> tuple:
    """(T_a, T_b) of a constraint in the world (T_b the identity for a contact), by robots' forward kinematics."""
    if isinstance(constraint, core.Contact):
        return link_pose(model, constraint.link, q, pose) @ constraint.offset, np.eye(4)
    return (link_pose(model, constraint.link_a, q, pose) @ constraint.offset_a,
            link_pose(model, constraint.link_b, q, pose) @ constraint.offset_b)


def _velocity(model: core.Model, constraint, q, v, pose, eps: float = 1e-6) -> np.ndarray:
    """What A v is, from poses alone by central differences along q + t v: a weld's -(dT_ab/dt T_ab^-1)^vee
    (T_ab = T_a^-1 T_b), a point loop's R_a^T (dp_a/dt - dp_b/dt), a flat contact's body twist (omega, v), a point
    contact's R_a^T dp_a/dt; in the world's axes (omega_world, dp_a/dt) and dp_a/dt."""
    from robots import vee

    (Ta, Tb), plus, minus = (_frames_of(model, constraint, *advance(model, q, v, pose, s)) for s in (0.0, eps, -eps))
    dTa, dTb = (plus[0] - minus[0]) / (2 * eps), (plus[1] - minus[1]) / (2 * eps)
    if isinstance(constraint, core.Contact):
        twist = vee(np.linalg.solve(Ta, dTa))
        if constraint.frame == "world":
            return dTa[:3, 3] if constraint.kind == "point" else np.concatenate([Ta[:3, :3] @ twist[:3], dTa[:3, 3]])
        return twist[3:] if constraint.kind == "point" else twist
    if constraint.kind == "point":
        return Ta[:3, :3].T @ (dTa[:3, 3] - dTb[:3, 3])
    T_ab = np.linalg.solve(Ta, Tb)
    dT_ab = np.linalg.solve(Ta, dTb) - np.linalg.solve(Ta, dTa) @ T_ab
    return -vee(dT_ab @ np.linalg.inv(T_ab))


def _bias(model: core.Model, constraint, q, v, pose, eps: float = 1e-4) -> np.ndarray:
    """What c is: the derivative of A v along q + t v at a = 0 (_velocity), plus for rows in turning axes the
    turn: a point's w_a x (A v) (classical accelerations in a's axes), a flat contact in the world's axes
    -(0, omega x dp_a/dt) (its body acceleration turned by R_a)."""
    Av = _velocity(model, constraint, q, v, pose)
    plus, minus = (_velocity(model, constraint, *advance(model, q, v, pose, s)[:1], v, advance(model, q, v, pose, s)[1])
                   for s in (eps, -eps))
    c = (plus - minus) / (2 * eps)
    if constraint.kind == "point" and getattr(constraint, "frame", "local") == "local":
        link, offset = (constraint.link, constraint.offset) if isinstance(constraint, core.Contact) else \
            (constraint.link_a, constraint.offset_a)
        w_a = _velocity(model, core.Contact(link, "flat", offset), q, v, pose)[:3]
        c = c + np.cross(w_a, Av)
    elif constraint.kind == "flat" and constraint.frame == "world":
        c = c - np.concatenate([np.zeros(3), np.cross(Av[:3], Av[3:])])
    return c


@pytest.mark.parametrize("seed", [1, 2])
def test_compiled_loop_terms_equal_the_reference_and_the_kinematics(seed: int, monkeypatch) -> None:
    """Loop closures (weld and point, from the root link too) with contacts in either axes, on random trees with
    a mimic joint (seed 1 floating, 2 fixed): the compiled terms (fast_closures) equal the numpy reference to
    1e-12 for a (2, 3) batch with inactive constraints; and, for all active, A v equals the constraint
    velocity from robots' own forward kinematics, c its derivative at a = 0 (_bias), e Pinocchio's log6 of T_ab
    (a weld) or -p_ab (a point loop)."""
    from test_fast_path import load

    from liedyn_ros.core.constraints import state
    from liedyn_ros.core.constraints.state import setup

    rng = np.random.default_rng(seed)
    model = load(f"random{seed}")
    assert model.has_mimic and model.floating_base == (seed == 1)
    closures = _closures_on(model, rng)
    cs = core.constraint_set(model, closures)
    shape = (2, 3)
    q, v = rng.uniform(-2, 2, shape + (model.n,)), rng.normal(size=shape + (model.nv,))
    pose = np.array([[random_pose(rng) for _ in range(3)] for _ in range(2)]) if model.floating_base else None
    active = rng.random(shape + (cs.k,)) < 0.7
    want = setup(model, q, {"v": v}, cs, pose, active, np.inf, False).terms

    def unwanted(*args):
        raise AssertionError("the reference ran where the kernel should have")

    monkeypatch.setattr(state, "constraint_terms", unwanted)  # from here on every term is the kernel's
    got = setup(model, q, {"v": v}, cs, pose, active, np.inf).terms
    for name in ("A", "c", "Av", "e"):
        assert_close(getattr(got, name), getattr(want, name), 1e-12, name)
    assert np.all(got.A[~cs.row_mask(active).reshape(6, -1)] == 0.0)
    q0, v0, T0 = q[0, 0], v[0, 0], None if pose is None else pose[0, 0]
    terms = setup(model, q0, {"v": v0}, cs, T0, None, np.inf).terms
    assert_close(terms.A[0], core.constraint_jacobian(model, q0, cs, base_pose=T0), 0.0, "A")
    assert_close(terms.c[0], core.constraint_bias(model, q0, v0, cs, base_pose=T0), 0.0, "c")
    for k, constraint in enumerate(closures):
        r = slice(cs.rows[k], cs.rows[k + 1])
        assert_close(terms.Av[0, r], _velocity(model, constraint, q0, v0, T0), 1e-7, f"{cs.names[k]}: A v")
        assert_close(terms.c[0, r], _bias(model, constraint, q0, v0, T0), 1e-5, f"{cs.names[k]}: c")
        if isinstance(constraint, core.LoopClosure):
            Ta, Tb = _frames_of(model, constraint, q0, T0)
            T_ab = np.linalg.solve(Ta, Tb)
            log = pin.log6(pin.SE3(T_ab[:3, :3], T_ab[:3, 3])).vector  # (v, w)
            e = -np.concatenate([log[3:], log[:3]]) if constraint.kind == "weld" else -T_ab[:3, 3]
            assert_close(terms.e[0, r], e, 1e-10, f"{cs.names[k]}: e")


@pytest.mark.parametrize("angle", [0.0, 1e-9, 1.0, np.pi - 1e-7, np.pi])
def test_weld_position_error_at_any_angle(angle: float) -> None:
    """A weld of the five-bar's l2 and l3 whose frames differ by a turn of `angle` (and a shift): the compiled
    e = -log T_ab (Taylor series near 0, the axis of R + I near pi) equals the reference and gives T_ab back
    through Pinocchio's exp6 (the reference's own accuracy)."""
    xml, _, _ = LOOPS["five_bar"]
    model = core.load_urdf(xml)
    rng = np.random.default_rng(int(angle * 1e3))
    q = phi("five_bar", THETA["five_bar"])
    axis = rng.normal(size=3)
    X = pin.exp6(pin.Motion(rng.normal(size=3), angle * axis / np.linalg.norm(axis))).homogeneous
    offset_b = np.linalg.solve(link_pose(model, "l3", q), link_pose(model, "l2", q) @ X)  # T_ab = X
    weld = [core.LoopClosure("l2", "l3", "weld", None, offset_b)]
    from liedyn_ros.core.constraints.state import setup

    got, want = (setup(model, q, {"v": np.zeros(model.nv)}, weld, None, None, np.inf, fast).terms.e[0]
                 for fast in (True, False))
    # At pi, acos turns R_ab's rounding (1e-16, kernel and reference differ there) into 1e-8 of the angle; within
    # 1e-6 of pi the axis is read off R + I, which drops the rotation's skew part (of that size).
    near_pi = angle > 3
    assert_close(got, want, 1e-7 if near_pi else 1e-12, "e")
    assert_close(pin.exp6(pin.Motion(-got[3:], -got[:3])).homogeneous, X, 1e-6 if near_pi else 1e-9, "exp(-e)")


def readable_minimisers_fail(monkeypatch) -> None:
    """The numpy minimisers fail if called: what answers must be the compiled ones (fast_minimisers)."""
    from liedyn_ros.core.constraints import inverse, state

    def fail(*args) -> None:
        raise AssertionError("a readable minimiser ran on the fast path")

    monkeypatch.setattr(inverse, "readable_forces", fail)
    monkeypatch.setattr(state, "readable_psd_solve", fail)


def _null_space(G: np.ndarray) -> np.ndarray:
    """An orthonormal basis (columns) of G's null space, by an SVD with its own rank cut."""
    _, s, Vt = np.linalg.svd(G)
    rank = int(np.sum(s > 1e-9 * max(1.0, s.max(initial=0.0))))
    return Vt[rank:].T


@pytest.mark.parametrize("seed", range(4))
def test_compiled_minimisers_equal_the_readable_ones_on_rank_deficient_sets(seed: int, monkeypatch) -> None:
    """Random A (B, m, nv) of rank below m, random passive coordinates and inactive rows, a balanceable
    tau: the compiled least_norm_forces and solve_psd equal the numpy ones (1e-10), and their answers are
    the minimisers by their optimality conditions, checked on a null-space basis of this test's own."""
    from liedyn_ros.core.constraints import inverse, state

    rng = np.random.default_rng(seed)
    B, m, nv = 3, int(rng.integers(3, 10)), int(rng.integers(6, 14))
    rank = int(rng.integers(1, m))
    A = rng.normal(size=(B, m, rank)) @ rng.normal(size=(B, rank, nv))
    p = np.zeros(nv, dtype=bool)
    p[rng.permutation(nv)[:int(rng.integers(1, nv))]] = True
    rows = rng.random((B, m)) < 0.8
    A = np.where(rows[..., None], A, 0.0)  # as setup leaves an inactive row
    tau = rng.normal(size=(B, nv))
    tau[:, p] = np.einsum("bij,bi->bj", A[:, :, p], rng.normal(size=(B, m)))  # balanceable
    n_a = int((~p).sum())
    for solution, w in (("min_torque", np.sqrt(rng.uniform(0.5, 2.0, n_a))), ("min_torque", np.ones(n_a)),
                        ("min_force", np.sqrt(rng.uniform(0.5, 2.0, m))), ("least_norm", None)):
        want = inverse.readable_forces(A, tau, p, rows, solution, w)
        with monkeypatch.context() as patch:
            readable_minimisers_fail(patch)
            got = inverse.least_norm_forces(A, tau, p, rows, solution, w, True)
        for name, x, y in zip(("lam", "residual", "scale", "free"), got, want):
            assert_close(x, y, 1e-10, f"{solution}: {name}")
        lam = got[0]
        for b in range(B):
            on = rows[b]
            Z_on = _null_space(A[b][on][:, p].T)  # A_p^T's null space over the active rows
            Z = np.zeros((m, Z_on.shape[1]))
            Z[on] = Z_on
            assert got[3][b] == pytest.approx(Z.shape[1], abs=1e-9), "free: the null space's dimension"
            assert_close(A[b][:, p].T @ lam[b], tau[b, p], 1e-9, "A_p^T lam = tau_p")
            assert np.all(lam[b][~on] == 0.0)
            if solution == "min_torque":
                wAt = w[:, None] * A[b][:, ~p].T
                gradient = Z.T @ wAt.T @ (w * tau[b, ~p] - wAt @ lam[b])
                assert_close(gradient, np.zeros(Z.shape[1]), 1e-9, "no torque-reducing direction left")
            else:
                ww = np.ones(m) if w is None else w
                assert_close(Z.T @ (ww**2 * lam[b]), np.zeros(Z.shape[1]), 1e-9, "no force-reducing direction left")
    # solve_psd: K = X X^T of rank below m, rhs in its range (plus the null space part the least norm drops)
    X = rng.normal(size=(B, m, int(rng.integers(1, m))))
    K = X @ np.swapaxes(X, -1, -2)
    rhs = np.einsum("bij,bj->bi", K, rng.normal(size=(B, m)))
    want = state.readable_psd_solve(K, rhs)
    with monkeypatch.context() as patch:
        readable_minimisers_fail(patch)
        got = state.solve_psd(K, rhs)
    assert_close(got, want, 1e-10, "solve_psd")
    for b in range(B):
        assert_close(K[b] @ got[b], rhs[b], 1e-9, "K x = rhs")
        assert_close(_null_space(K[b]).T @ got[b], np.zeros(m - X.shape[-1]), 1e-9, "x least-norm")
