"""core.constrained_terms: every term of a sample on contacts at once, against Pinocchio term by term
(rnea, constraintDynamics, the min-torque KKT system from its rnea and Jacobians, frame placements)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from robots import assert_close, random_pose
from test_constraints_pinocchio import _cases, _pin_constraints, _pin_jacobian, _pin_lambda

from liedyn_ros import core

TOL = 1e-9


def _kkt_min_torque(A: np.ndarray, tau_r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """min |tau_a|^2 s.t. A_p^T lam = tau_pr (base passive), solved as its KKT system."""
    Aa, Ap = A[:, 6:], A[:, :6]
    m = A.shape[0]
    kkt = np.block([[Aa @ Aa.T, Ap], [Ap.T, np.zeros((6, 6))]])
    lam = np.linalg.lstsq(kkt, np.concatenate([Aa @ tau_r[6:], tau_r[:6]]), rcond=None)[0][:m]
    return np.concatenate([np.zeros(6), tau_r[6:] - Aa.T @ lam]), lam


@pytest.mark.parametrize("name", ["solo12 four feet", "solo12 three feet, offsets", "solo12 four feet, world axes",
                                  "talos feet and hands on a table"])
def test_terms_match_pinocchio(name: str) -> None:
    rng = np.random.default_rng(21)
    t, constraints = _cases(rng)[name]
    m, pm = t.model, t.pin_model
    q, T = rng.uniform(-1.0, 1.0, m.n), random_pose(rng)
    q_pin, E = t.to_pin(q, T)
    A = _pin_jacobian(t, constraints, q_pin, E)
    v = rng.normal(size=m.nv)
    v -= np.linalg.pinv(A) @ (A @ v)
    a = rng.normal(size=m.nv)
    tau_in = np.concatenate([np.zeros(6), rng.normal(size=m.n) * 5])
    terms = core.constrained_terms(m, q, v, a, constraints, tau=tau_in, base_pose=T)

    pd = pm.createData()
    tau_r = E.T @ pin.rnea(pm, pd, q_pin, E @ v, E @ a)
    assert_close(terms.tau_r, tau_r, TOL, f"{name}: tau_r")
    tau_want, lam_want = _kkt_min_torque(A, tau_r)
    assert_close(terms.tau, tau_want, TOL, f"{name}: tau")
    assert_close(terms.lam, lam_want, 1e-8, f"{name}: lam")
    tau_g_want, lam_g_want = _kkt_min_torque(A, E.T @ pin.computeGeneralizedGravity(pm, pd, q_pin))
    assert_close(terms.tau_g, tau_g_want, TOL, f"{name}: tau_g")
    assert_close(terms.lam_g, lam_g_want, 1e-8, f"{name}: lam_g")

    models, datas = _pin_constraints(t, constraints)
    pin.initConstraintDynamics(pm, pd, models, datas)
    a_pin = pin.constraintDynamics(pm, pd, q_pin, E @ v, np.linalg.solve(E.T, tau_in), models, datas,
                                   pin.ProximalSettings(1e-14, 0.0, 1))
    assert_close(terms.a, np.linalg.solve(E, a_pin), TOL, f"{name}: a")
    assert_close(terms.lam_a, _pin_lambda(constraints, pd.lambda_c), TOL, f"{name}: lam_a")

    pin.framesForwardKinematics(pm, pd, q_pin)
    up = -np.asarray(m.gravity) / np.linalg.norm(m.gravity)
    row = 0
    for j, c in enumerate(constraints):
        frame = pm.frames[pm.getFrameId(c.link)]
        want = (pd.oMi[frame.parentJoint] * frame.placement * pin.SE3(c.offset)).homogeneous
        assert_close(terms.frames[j], want, 1e-12, f"{name}: frame of {c.link}")
        size = 3 if c.kind == "point" else 6
        f = terms.lam[row + size - 3:row + size]
        row += size
        f_world = f if c.frame == "world" else want[:3, :3] @ f
        assert abs(terms.normal[j] - f_world @ up) < 1e-9 * (1 + np.abs(f).max())
        assert abs(terms.tangential[j] - np.linalg.norm(f_world - (f_world @ up) * up)) < 1e-9 * (1 + np.abs(f).max())

    # min_force: the least-norm lam that balances the base, in motion and at rest
    mf = core.constrained_terms(m, q, v, a, constraints, base_pose=T, solution="min_force")
    assert_close(mf.lam, np.linalg.pinv(A[:, :6].T) @ tau_r[:6], 1e-8, f"{name}: min_force lam")
    assert mf.a is None and mf.lam_a is None


def test_batch_inactive_contacts_and_the_general_path() -> None:
    """A batch equals its samples; an inactive contact is an absent one with exactly zero force; the
    readable path (fast=False) gives the same terms."""
    rng = np.random.default_rng(22)
    t, constraints = _cases(rng)["solo12 four feet"]
    m = t.model
    B = 3
    q, T = rng.uniform(-1.0, 1.0, (B, m.n)), np.stack([random_pose(rng) for _ in range(B)])
    v, a = rng.normal(size=(B, m.nv)), rng.normal(size=(B, m.nv))
    tau = np.concatenate([np.zeros((B, 6)), rng.normal(size=(B, m.n))], axis=-1)
    active = np.array([[True, True, True, True], [True, False, True, True], [False, True, True, True]])
    batch = core.constrained_terms(m, q, v, a, constraints, tau=tau, base_pose=T, active=active, tol=np.inf)
    slow = core.constrained_terms(m, q, v, a, constraints, tau=tau, base_pose=T, active=active, tol=np.inf,
                                  fast=False)
    for name, x, y in zip(batch._fields, batch, slow):
        assert_close(x, y, 1e-8, f"fast = readable: {name}")
    for solution in ("min_torque", "min_force"):  # constrained_rnea's compiled batch loop
        got = core.constrained_rnea(m, q, v, a, constraints, base_pose=T, active=active, solution=solution, tol=np.inf)
        want = core.constrained_rnea(m, q, v, a, constraints, base_pose=T, active=active, solution=solution,
                                     tol=np.inf, fast=False)
        assert_close(got[0], want[0], 1e-8, f"constrained_rnea batch {solution}: tau")
        assert_close(got[1], want[1], 1e-8, f"constrained_rnea batch {solution}: lam")
    for b in range(B):
        on = [c for c, flag in zip(constraints, active[b]) if flag]
        one = core.constrained_terms(m, q[b], v[b], a[b], on, tau=tau[b], base_pose=T[b], tol=np.inf)
        rows = np.repeat(active[b], 3)
        assert np.all(batch.lam[b][~rows] == 0.0) and np.all(batch.lam_a[b][~rows] == 0.0)
        for name in ("tau_r", "tau", "tau_g", "a"):
            assert_close(getattr(batch, name)[b], getattr(one, name), 1e-8, f"sample {b}: {name}")
        assert_close(batch.lam[b][rows], one.lam, 1e-8, f"sample {b}: lam")


def test_loop_closures_take_the_functions_and_bad_input_is_refused() -> None:
    rng = np.random.default_rng(23)
    t, constraints = _cases(rng)["solo12 four feet"]
    m = t.model
    q, T, v = rng.uniform(-1.0, 1.0, m.n), random_pose(rng), np.zeros(m.nv)
    loop = core.LoopClosure("FL_FOOT", "FR_FOOT", "point")  # held anyway by the feet: redundant rows
    terms = core.constrained_terms(m, q, v, v, constraints + [loop], base_pose=T, tol=np.inf)
    assert np.isnan(terms.normal[4]) and np.isfinite(terms.normal[:4]).all()
    alone = core.constrained_terms(m, q, v, v, constraints, base_pose=T, tol=np.inf)
    assert_close(terms.tau_g, alone.tau_g, 1e-8, "a redundant loop changes no torque")
    with pytest.raises(ValueError, match="up"):
        core.constrained_terms(m, q, v, v, constraints, base_pose=T, up=[0.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="solution"):
        core.constrained_terms(m, q, v, v, constraints, base_pose=T, solution="least")
    with pytest.raises(ValueError, match="violates"):
        core.constrained_terms(m, q, rng.normal(size=m.nv), v, constraints, base_pose=T)


def test_terms_kernel_writes_the_terms_or_declines() -> None:
    """TermsKernel: the same terms as constrained_terms in its layout, or False where the compiled path
    cannot answer (then constrained_terms answers)."""
    rng = np.random.default_rng(24)
    t, constraints = _cases(rng)["solo12 four feet"]
    m = t.model
    q, T = rng.uniform(-1.0, 1.0, m.n), random_pose(rng)
    v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
    tau = np.concatenate([np.zeros(6), rng.normal(size=m.n)])
    active = np.array([True, False, True, True])
    kernel = core.TermsKernel(m, constraints, solution="min_force", tol=np.inf)
    out = np.empty(kernel.size)
    assert kernel(q, v, a, tau, T, active, out)
    want = core.constrained_terms(m, q, v, a, constraints, tau=tau, base_pose=T, active=active,
                                  solution="min_force", tol=np.inf, fast=False)
    for name, s in zip(kernel.layout._fields, kernel.layout):
        assert_close(out[s], np.ravel(getattr(want, name)), 1e-8, f"kernel: {name}")
    assert kernel(q, v, a, None, T, active, out) and np.isnan(out[kernel.layout.a]).all()
    assert not kernel(q, v, a, tau, None, active, out)  # a floating base needs its pose
    assert not kernel(q[None], v, a, tau, T, active, out)  # a batch: constrained_terms
    assert not kernel(q, v, a, tau, T, [True, False, True, True], out)  # a list: constrained_terms
    loops = core.TermsKernel(m, constraints + [core.LoopClosure("FL_FOOT", "HR_FOOT", "point")], tol=np.inf)
    assert not loops(q, v, a, tau, T, None, np.empty(loops.size))
    strict = core.TermsKernel(m, constraints)  # tol 1e-6: this v is off the contacts
    assert not strict(q, v, a, tau, T, active, out)


def test_least_squares_balance_against_pinocchio() -> None:
    """Two point feet cannot hold the base's moment about the line through them: with
    balance="least_squares" lam balances the base in the least-squares sense and, among those, gives
    the least joint torques (min_torque) or is the least-norm one (min_force); built here from
    Pinocchio's rnea and Jacobians as the two least-squares problems, one after the other."""
    rng = np.random.default_rng(25)
    t, constraints = _cases(rng)["solo12 four feet"]
    m, pm = t.model, t.pin_model
    q, T = rng.uniform(-1.0, 1.0, m.n), random_pose(rng)
    v, a = np.zeros(m.nv), rng.normal(size=m.nv)
    active = np.array([True, False, False, True])
    q_pin, E = t.to_pin(q, T)
    rows = np.repeat(active, 3)
    A = _pin_jacobian(t, constraints, q_pin, E) * rows[:, None]
    tau_r = E.T @ pin.rnea(pm, pm.createData(), q_pin, E @ v, E @ a)
    G, Aa = A[:, :6].T, A[:, 6:]
    lam0 = np.linalg.lstsq(G, tau_r[:6], rcond=1e-10)[0]  # least squares on the base, least-norm
    N = np.linalg.svd(G)[2][np.linalg.matrix_rank(G):].T * rows[:, None]  # the forces the base does not feel
    s = np.linalg.lstsq(Aa.T @ N, tau_r[6:] - Aa.T @ lam0, rcond=1e-10)[0]
    want = {"min_torque": lam0 + N @ s, "min_force": lam0}
    residual = np.abs(G @ lam0 - tau_r[:6]).max() / max(1.0, np.abs(tau_r[:6]).max())
    assert residual > 1e-3  # really unbalanced
    for solution, lam_want in want.items():
        for fast in (True, False):
            terms = core.constrained_terms(m, q, v, a, constraints, base_pose=T, active=active, solution=solution,
                                           balance="least_squares", fast=fast)
            assert_close(terms.lam, lam_want, 1e-8, f"{solution}, fast={fast}: lam")
            assert_close(terms.tau[6:], tau_r[6:] - Aa.T @ lam_want, 1e-8, f"{solution}, fast={fast}: tau")
            assert abs(terms.residual - residual) < 1e-9
            kernel = core.TermsKernel(m, constraints, solution=solution, balance="least_squares")
            out = np.empty(kernel.size)
            assert kernel(q, v, a, None, T, active, out)
            assert_close(out[kernel.layout.lam], lam_want, 1e-8, f"{solution}: kernel lam")
        with pytest.raises(ValueError, match="balances"):
            core.constrained_terms(m, q, v, a, constraints, base_pose=T, active=active, solution=solution)
        assert not core.TermsKernel(m, constraints, solution=solution)(q, v, a, None, T, active, np.empty(kernel.size))
    with pytest.raises(ValueError, match="balance"):
        core.constrained_rnea(m, q, v, a, constraints, base_pose=T, balance="roughly")
