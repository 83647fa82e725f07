"""Closed loops and passive joints in the ROS-free pipeline (the node's path): a five-bar linkage
(a URDF tree cut at one revolute joint, closed by a point loop closure, test_constraints_loops),
actuated at its two ground joints, checked against Pinocchio: its constraint Jacobian, rnea and
constraintDynamics (a KKT system for the torques); on a fixed base, and on a floating base held
by a flat contact under the ground link (the same torques) or in flight; bad configuration."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
from robots import Twin, assert_close, twin_from_xml
from rosbags.typesys import Stores, get_typestore

from liedyn_ros.pipeline import (
    DynamicsPipeline, MessageClasses, OutputMessageFactory, PipelineConfig, config_from_parameters,
)

from test_constraints_loops import FIVE_BAR, L5, THETA, _Phi, phi, readable_minimisers_fail
from test_contacts_pipeline import flags
from test_pipeline import odometry, ros_joint_state, trajectory

PASSIVE = [1, 3]  # j2, j4: the joints at the moving ends of the ground links
LOOP = dict(loop_closures=("l2 l3 point",), loop_offsets=(L5[1], 0.0, 0.0, L5[2], 0.0, 0.0),
            passive_joints=("j2", "j4"))
STAMP = 10**9
TOL = 1e-9


class Reference:
    """Pinocchio's five-bar: the loop as a CONTACT_3D between the tips of l2 and l3."""

    def __init__(self, floating: bool) -> None:
        self.t: Twin = twin_from_xml(FIVE_BAR, floating)
        pm = self.pin = self.t.pin_model
        fa, fb = pm.frames[pm.getFrameId("l2")], pm.frames[pm.getFrameId("l3")]
        tip_a, tip_b = pin.SE3(np.eye(3), np.array([L5[1], 0, 0])), pin.SE3(np.eye(3), np.array([L5[2], 0, 0]))
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, fa.parentJoint, fa.placement * tip_a,
                                      fb.parentJoint, fb.placement * tip_b, pin.LOCAL)
        self.models = pin.StdVec_RigidConstraintModel([cm])
        self.datas = pin.StdVec_RigidConstraintData([cm.createData()])
        self.data = pm.createData()
        pin.initConstraintDynamics(pm, self.data, self.models, self.datas)

    def forward(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, pose: np.ndarray | None = None) -> np.ndarray:
        """Pinocchio's constrained forward dynamics, in our coordinates (tau: our generalized force)."""
        q_pin, E = self.t.to_pin(q, pose)
        a = pin.constraintDynamics(self.pin, self.data, q_pin, E @ v, np.linalg.solve(E.T, tau), self.models,
                                   self.datas, pin.ProximalSettings(1e-14, 1e-12, 50))
        return np.linalg.solve(E, a)

    def torques(self, q: np.ndarray, v: np.ndarray, a: np.ndarray, pose: np.ndarray | None = None) -> np.ndarray:
        """The joint torques, zero on the passive joints, with rnea(q, v, a) = [0; tau] + J^T lam
        (the base rows, if any, left to the sky-hook): the KKT system solved by least squares."""
        q_pin, E = self.t.to_pin(q, pose)
        self.forward(q, v, np.zeros(len(v)), pose)  # Pinocchio's kinematics for its Jacobian
        J = pin.getConstraintsJacobian(self.pin, self.data, self.models, self.datas) @ E
        tau_r = E.T @ pin.rnea(self.pin, self.pin.createData(), q_pin, E @ v, E @ a)
        nb = len(v) - 4
        active = [nb + j for j in range(4) if j not in PASSIVE]
        S = np.eye(len(v))[:, active]
        x = np.linalg.lstsq(np.hstack([S, J.T])[nb:], tau_r[nb:], rcond=None)[0]
        tau = np.zeros(4)
        tau[[j - nb for j in active]] = x[:len(active)]
        return tau


@pytest.fixture(scope="module")
def fixed() -> Reference:
    return Reference(False)


@pytest.fixture(scope="module")
def floating() -> Reference:
    return Reference(True)


def state(ref: Reference, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, v, a) on the closed loop: closed-form q, v along it, a Pinocchio's constrained
    acceleration under random torques (consistent by construction)."""
    theta = THETA["five_bar"]
    q = phi("five_bar", theta)
    v = _Phi("five_bar", theta) @ rng.normal(size=2)
    return q, v, ref.forward(q, v, rng.normal(size=4))


def compiled_terms_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy constraint terms and minimisers fail if called: the route's A, c, A v and e must come
    from the compiled kernel (core.constraints.fast_closures), its least-norm forces and solves from
    fast_minimisers, which Pinocchio then checks through the outputs."""
    from liedyn_ros.core.constraints import jacobian, state

    def numpy_terms(*args: Any) -> None:
        raise AssertionError("the numpy constraint terms ran on the loop route's fast path")

    for module in (jacobian, state):
        monkeypatch.setattr(module, "constraint_terms", numpy_terms)
    readable_minimisers_fail(monkeypatch)
    readable_closest_forces_fail(monkeypatch)


def readable_closest_forces_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """pipeline.loops' numpy closest forces fail if called: flight's must come from closest_forces_many."""
    from liedyn_ros.pipeline import loops

    def numpy_forces(*args: Any) -> None:
        raise AssertionError("the numpy closest loop forces ran on the loop route's fast path")

    monkeypatch.setattr(loops, "forces_closest_to", numpy_forces)


def one_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The loop route's samples by one path only: "kernel" (core.constraints.fast_loop_sample, LoopRoute.sample;
    the general path fails if called) or "general" (LoopRoute.general, the core's constrained functions one by one;
    the sample kernel declining)."""
    from liedyn_ros.pipeline.routes.loops import LoopRoute

    def general(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the loop route's general path ran where its sample kernel should have answered")

    if path == "kernel":
        monkeypatch.setattr(LoopRoute, "general", general)
    else:
        monkeypatch.setattr(LoopRoute, "sample", lambda *args, **kwargs: None)


PATHS = ("kernel", "general")


@pytest.mark.parametrize("path", PATHS)
def test_fixed_five_bar_torques_match_pinocchio_and_reproduce_the_motion(fixed: Reference, path: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    compiled_terms_only(monkeypatch)
    one_path(monkeypatch, path)
    rng = np.random.default_rng(5)
    q, v, a = state(fixed, rng)
    effort = rng.normal(size=4)  # the passive joints' entries are not torques: ignored
    names = list(fixed.t.model.joint_names)
    pipe = DynamicsPipeline(fixed.t.model, PipelineConfig(acceleration_source="reference", publish_unconstrained=True,
                                                          **LOOP))
    pipe.on_reference(trajectory(names, q, v, a, STAMP))
    out = pipe.on_joint_state(ros_joint_state(STAMP, names, q, v, effort))
    res = out.outputs
    assert res.tau_ff[PASSIVE].tolist() == [0.0, 0.0] and res.tau_g[PASSIVE].tolist() == [0.0, 0.0]
    assert_close(res.tau_ff, fixed.torques(q, v, a), TOL, "feedforward")
    assert_close(fixed.forward(q, v, res.tau_ff), a, 1e-8, "the feedforward drives Pinocchio's loop along a")
    zero = np.zeros(4)
    assert_close(res.tau_g, fixed.torques(q, zero, zero), TOL, "gravity")
    assert_close(fixed.forward(q, zero, res.tau_g), zero, 1e-8, "the gravity torque holds the loop still")
    driven = np.where(np.isin(np.arange(4), PASSIVE), 0.0, effort)
    assert_close(res.qdd_pred, fixed.forward(q, v, driven), 1e-8, "predicted acceleration")
    free = pin.rnea(fixed.pin, fixed.pin.createData(), *(fixed.t.to_pin(q)[0], v, a))
    assert_close(res.tau_free, free, TOL, "unconstrained")
    assert np.abs(res.tau_ff - res.tau_free).max() > 0.1  # the loop forces matter
    assert not res.checks.unbalanced and pipe.stats.contact_unbalanced == 0
    msgs = OutputMessageFactory(MessageClasses.from_typestore(get_typestore(Stores.ROS2_JAZZY)), fixed.t.model,
                                pipe.config).build(out)
    np.testing.assert_allclose(msgs["feedforward_torque"].effort, res.tau_ff)
    np.testing.assert_allclose(msgs["unconstrained/feedforward_torque"].effort, res.tau_free)


def feed(pipe: DynamicsPipeline, q: np.ndarray, v: np.ndarray, effort: np.ndarray, stamp: int) -> Any:
    pipe.on_odometry(odometry("rosbags", stamp, [0, 0, 0.3], [0, 0, 0, 1], v[:6], "ground"))
    return pipe.on_joint_state(ros_joint_state(stamp, list(pipe.model.joint_names), q, v[6:], effort)).outputs


@pytest.mark.parametrize("path", PATHS)
def test_floating_five_bar_standing_on_its_ground_link_and_in_flight(fixed: Reference, floating: Reference, path: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A flat contact under the ground link holds the base: the joint torques are the fixed
    base's (base at rest). In flight (the contact lifted) the loop stays closed, the passive joints
    unactuated, and the predicted accelerations are Pinocchio's free-flying constrained ones. By the
    route's sample kernel and by its general path."""
    compiled_terms_only(monkeypatch)
    one_path(monkeypatch, path)
    rng = np.random.default_rng(6)
    q, v_j, a_j = state(fixed, rng)
    v, a = np.concatenate([np.zeros(6), v_j]), np.concatenate([np.zeros(6), a_j])
    pose = np.eye(4)
    pose[2, 3] = 0.3
    effort = rng.normal(size=4)
    effort[PASSIVE] = 0.0
    names = list(floating.t.model.joint_names)
    pipe = DynamicsPipeline(floating.t.model, PipelineConfig(
        acceleration_source="reference", contact_links=("ground",), contact_types=("flat",), contact_source="topic",
        base_link="ground", **LOOP))
    pipe.on_reference(trajectory(names, q, v_j, a_j, STAMP))
    pipe.on_contact_state(flags([1]), STAMP)
    standing = feed(pipe, q, v, effort, STAMP)
    assert_close(standing.tau_ff, fixed.torques(q, v_j, a_j), TOL, "standing: the fixed base's torques")
    assert standing.contact_active.tolist() == [True] and not standing.checks.unbalanced
    assert_close(standing.base_acc_pred, np.zeros(6), 1e-9, "standing: the base held")
    pipe.on_contact_state(flags([0]), STAMP + 10**6)
    flying = feed(pipe, q, v, effort, STAMP + 10**6)
    assert flying.tau_ff[PASSIVE].tolist() == [0.0, 0.0] and not flying.checks.unbalanced
    assert_close(flying.tau_ff, floating.torques(q, v, a, pose), 1e-8, "flight: the loop-consistent joint torques")
    want = floating.forward(q, v, np.concatenate([np.zeros(6), effort]), pose)
    assert_close(np.concatenate([flying.base_acc_pred, flying.qdd_pred]), want, 1e-8, "flight: Pinocchio's fall")
    assert flying.base_acc_pred[5] < -9.0  # falls, its loop closed


def five_bar_calls(fixed: Reference, floating: Reference, seed: int) -> tuple[dict[str, Any], SimpleNamespace]:
    """The loop route's three five-bar cases (fixed; floating, standing on its flat ground contact; in
    flight) on one random state: {case: call}, and the routes, state and effort the calls use."""
    from liedyn_ros.pipeline.contacts import resolve_contacts
    from liedyn_ros.pipeline.loops import resolve_loops
    from liedyn_ros.pipeline.payload import Dynamics
    from liedyn_ros.pipeline.routes.loops import LoopRoute

    rng = np.random.default_rng(seed)
    q, v_j, a_j = state(fixed, rng)
    effort = rng.normal(size=4)
    fm = floating.t.model
    config = PipelineConfig(contact_links=("ground",), contact_types=("flat",), base_link="ground", **LOOP)
    pose = np.eye(4)
    pose[2, 3] = 0.3
    v, a = np.concatenate([np.zeros(6), v_j]), np.concatenate([np.zeros(6), a_j])
    fixed_route = LoopRoute(Dynamics(fixed.t.model, None), resolve_loops(fixed.t.model, PipelineConfig(**LOOP), None))
    floating_route = LoopRoute(Dynamics(fm, None), resolve_loops(fm, config, resolve_contacts(fm, config)))
    calls = {"fixed": lambda: fixed_route.outputs(q, v_j, a_j, effort, None, None),
             "standing": lambda: floating_route.outputs(q, v, a, effort, pose, np.array([True])),
             "in flight": lambda: floating_route.outputs(q, v, a, effort, pose, np.array([False]))}
    return calls, SimpleNamespace(fixed_route=fixed_route, floating_route=floating_route, q=q, v_j=v_j, v=v, a=a,
                                  effort=effort)


def test_compiled_minimisers_equal_the_readable_ones_on_the_five_bar(fixed: Reference, floating: Reference,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The route's general path with the compiled least-norm minimisers (fast_minimisers; the point loop has
    rank 2 of 3) equals itself with the numpy ones (the kernels declining), fixed, standing and in flight."""
    from liedyn_ros.core.fast.entry import single

    calls, _ = five_bar_calls(fixed, floating, 7)
    one_path(monkeypatch, "general")
    for name, call in calls.items():
        with monkeypatch.context() as patch:
            readable_minimisers_fail(patch)
            got = call()
        with monkeypatch.context() as patch:
            for kernel in ("least_norm_forces_many", "psd_solve_many"):
                patch.setattr(single, kernel, lambda *args: 1)  # BAD_INPUT: the numpy minimisers answer
            want = call()
        for field in ("tau_ff", "tau_g", "qdd_pred", "base_acc_pred", "contact_wrench"):
            if getattr(want, field) is not None:
                assert_close(getattr(got, field), getattr(want, field), 1e-10, f"{name}: {field}")


@pytest.mark.parametrize("seed", range(3))
def test_compiled_closest_forces_equal_numpys_and_are_the_weighted_least_squares_ones(floating: Reference,
                                                                                     seed: int) -> None:
    """pipeline.loops.closest_loop_forces on random rank-deficient A (B, m, nv), random targets, inactive rows, the
    base held or not: the compiled closest_forces_many equals the numpy path (forces_closest_to's pinv) to 1e-9;
    its forces solve the weighted normal equations (the passive columns weighted 1e6) with the least norm
    (checked on a null-space basis of this test's own), tau is the joints' part of tau_full - A^T lam with zeros
    on the passive joints, and a balanceable sample is balanced (not unbalanced), an unbalanceable one not."""
    from test_constraints_loops import _null_space

    from liedyn_ros.core.constraints.inverse import passive_mask
    from liedyn_ros.pipeline.contacts import resolve_contacts
    from liedyn_ros.pipeline.loops import (
        BALANCE_WEIGHT,
        closest_loop_forces,
        resolve_loops,
    )

    model = floating.t.model
    config = PipelineConfig(contact_links=("ground",), contact_types=("flat",), base_link="ground", **LOOP)
    loops = resolve_loops(model, config, resolve_contacts(model, config))
    rng = np.random.default_rng(seed)
    B, m, nv, nb = 6, 9, model.nv, model.nv - model.n
    rank = int(rng.integers(2, 6))
    A = rng.normal(size=(B, m, rank)) @ rng.normal(size=(B, rank, nv))
    rows = rng.random((B, m)) < 0.8
    held = np.array([True, True, True, False, False, False])
    p = passive_mask(model, loops.passive)
    tau_full = rng.normal(size=(B, nv))
    balanceable = np.array([True, False, True, True, True, True])  # held: 8 passive columns, rank at most 5
    for b in np.flatnonzero(balanceable):  # tau_p in the range of the active rows' A_p^T
        cols = p & (np.arange(nv) >= (0 if held[b] else nb))
        tau_full[b, cols] = (rows[b, :, None] * A[b])[:, cols].T @ rng.normal(size=m)
    target = rng.normal(size=(B, model.n))
    want = closest_loop_forces(model, loops, tau_full, A, target, rows, held, fast=False)
    got = closest_loop_forces(model, loops, tau_full, A, target, rows, held)
    for name, x, y in zip(("lam", "tau"), got, want):
        assert_close(x, y, 1e-9, name)
    lam, tau, unbalanced = got
    assert unbalanced.tolist() == want[2].tolist() == (~balanceable).tolist()
    for b in range(B):
        cols = np.arange(nb if not held[b] else 0, nv)
        w = np.where(p[cols], BALANCE_WEIGHT, 1.0)
        M = w[:, None] * (rows[b, :, None] * A[b])[:, cols].T
        r = w * (tau_full[b, cols] - np.where(p[cols], 0.0, np.concatenate([np.zeros(nb), target[b]])[cols]))
        gradient = M.T @ (r - M @ lam[b])
        scale = np.linalg.norm(M, 2) * np.linalg.norm(r)
        assert np.abs(gradient).max() <= 1e-9 * scale, "the weighted normal equations"
        Z = _null_space(M)
        assert np.abs(Z.T @ lam[b]).max(initial=0.0) <= 1e-9 * max(1.0, np.abs(lam[b]).max()), "the least norm"
        g = tau_full[b] - A[b].T @ lam[b]
        assert_close(tau[b], np.where(p[nb:], 0.0, g[nb:]), 1e-9, "tau")
        if balanceable[b]:
            assert_close(g[cols][p[cols]], np.zeros(int(p[cols].sum())), 1e-6, "balanced")


def test_inputs_are_checked_once_per_constrained_call(fixed: Reference, floating: Reference,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The route's general path: its constrained calls validate their batch once (constraints.state.setup) and hand
    it to rnea and aba unchecked: core.checks.prepare runs twice per sample, fixed, standing and in flight
    (constrained_rnea or flight's rnea and A, then constrained_aba), where each of those used to run it two or three
    times; the public functions still refuse bad input by name."""
    from liedyn_ros import core
    from liedyn_ros.core import checks
    from liedyn_ros.core.constraints import state as constraint_state
    from liedyn_ros.pipeline.routes import loops as loop_route

    calls, five = five_bar_calls(fixed, floating, 8)
    one_path(monkeypatch, "general")
    fixed_route, floating_route, fm = five.fixed_route, five.floating_route, floating.t.model
    q, v_j, v, a, effort = five.q, five.v_j, five.v, five.a, five.effort
    count = [0]
    real = checks.prepare

    def counting(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    for name, call in calls.items():
        call()
        count[0] = 0
        with monkeypatch.context() as patch:
            for module in (core.dynamics, core.constraints.jacobian, constraint_state, loop_route):
                if hasattr(module, "prepare"):
                    patch.setattr(module, "prepare", counting)
            call()
        assert count[0] == 2, f"{name}: prepare ran {count[0]} times"
    cs = fixed_route.loops.on(fixed.t.model)
    with pytest.raises(ValueError, match="q: contains NaN"):
        core.constrained_aba(fixed.t.model, np.full(4, np.nan), v_j, effort, cs, tol=np.inf)
    with pytest.raises(ValueError, match="base_pose: rotation part has determinant -1"):
        core.constrained_rnea(fm, q, v, a, floating_route.loops.on(fm), base_pose=np.diag([1.0, 1.0, -1.0, 1.0]),
                              passive=LOOP["passive_joints"], active=np.array([True, True]), tol=np.inf)


FIELDS = ("tau_ff", "tau_g", "qdd_pred", "base_wrench", "base_acc_pred", "contact_active", "contact_wrench",
          "tau_free")


def same_outputs(got: Any, want: Any, what: str) -> None:
    """Two DynamicsOutputs equal to rounding (1e-10), the same fields present, the same checks."""
    for field in FIELDS:
        x, y = getattr(got, field), getattr(want, field)
        assert (x is None) == (y is None), f"{what}: {field}"
        if y is not None:
            assert np.shape(x) == np.shape(y), f"{what}: {field}"
            assert_close(np.asarray(x, dtype=float), np.asarray(y, dtype=float), 1e-10, f"{what}: {field}")
    for name, x, y in zip(got.checks._fields, got.checks, want.checks):
        assert np.array_equal(x, y), f"{what}: checks.{name}"


@pytest.mark.parametrize("seed", range(2))
def test_the_sample_kernel_equals_the_general_path(fixed: Reference, floating: Reference, seed: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """LoopRoute.sample (one compiled call, core.constraints.fast_loop_sample) gives the general path's outputs
    (the core's constrained functions one by one, which the tests above check against Pinocchio) to 1e-10: fixed,
    standing and in flight, at the measured state and at a reference state (ff_state), with and without efforts,
    with friction, with the solution min_force, at a random acceleration, with three passive joints (the least
    squares where no force balances them, flagged); it answers all of them itself; and bad input gets the general
    path's error, word for word (or the general path's outputs where that takes it)."""
    from robots import random_pose

    from liedyn_ros import core
    from liedyn_ros.pipeline.contacts import resolve_contacts
    from liedyn_ros.pipeline.loops import resolve_loops
    from liedyn_ros.pipeline.payload import Dynamics
    from liedyn_ros.pipeline.routes.loops import LoopRoute

    rng = np.random.default_rng(20 + seed)
    fm = floating.t.model
    config = PipelineConfig(contact_links=("ground",), contact_types=("flat",), base_link="ground", **LOOP)
    friction = core.Friction(coulomb=rng.uniform(0.1, 0.5, 4), viscous=rng.uniform(0.1, 0.5, 4))
    routes = {(floating_base, friction_on, solution): LoopRoute(
        Dynamics(model, friction if friction_on else None),
        resolve_loops(model, config if floating_base else PipelineConfig(**LOOP),
                      resolve_contacts(model, config) if floating_base else None), solution)
        for floating_base, model in ((False, fixed.t.model), (True, fm)) for friction_on in (False, True)
        for solution in ("min_torque", "min_force")}
    # three passive joints: no loop force balances most motions (constrained_rnea refuses; the least squares answer)
    three = PipelineConfig(**{**LOOP, "passive_joints": ("j1", "j2", "j4")})
    routes[False, False, "three passive"] = LoopRoute(Dynamics(fixed.t.model, None),
                                                      resolve_loops(fixed.t.model, three, None))
    q, v_j, a_j = state(fixed, rng)
    q_ref, v_ref, _ = state(fixed, rng)
    pose = random_pose(rng)
    effort = rng.normal(size=4)
    calls = []
    for (floating_base, friction_on, solution), route in routes.items():
        grow = (lambda x: np.concatenate([rng.normal(size=6) * 0.3, x])) if floating_base else (lambda x: x)
        v, a, v_ff = grow(v_j), grow(a_j), grow(v_ref)
        for down in ((True, False) if floating_base else (None,)):
            active = None if down is None else np.array([down])
            T = pose if floating_base else None
            for ff_state in (None, (q_ref, v_ff)):
                for e in (effort, None):
                    calls.append((route, (q, v, a, e, T, active), ff_state))
            calls.append((route, (q, v, rng.normal(size=v.shape), effort, T, active), None))  # no constraint's motion
    with monkeypatch.context() as patch:
        one_path(patch, "kernel")
        got = [route.outputs(*args, ff_state=ff_state) for route, args, ff_state in calls]
    flagged = 0
    for k, ((route, args, ff_state), out) in enumerate(zip(calls, got)):
        want = route.general(*args, ff_state)
        same_outputs(out, want, f"call {k}")
        flagged += bool(want.checks.unbalanced)
    assert flagged > 0  # the least-squares forces and their flag came into it
    route = routes[True, False, "min_torque"]
    va, aa = np.concatenate([np.zeros(6), v_j]), np.concatenate([np.zeros(6), a_j])
    nan = np.full(4, np.nan)
    bad = {"q NaN": (nan, va, aa, effort, pose, np.array([True])),
           "effort NaN on a passive joint": (q, va, aa, np.where(np.arange(4) == PASSIVE[0], np.nan, effort), pose,
                                             np.array([True])),
           "effort too short": (q, va, aa, effort[:3], pose, np.array([True])),
           "a too short": (q, va, aa[:7], effort, pose, np.array([True])),
           "pose a reflection": (q, va, aa, effort, np.diag([1.0, 1.0, -1.0, 1.0]), np.array([True])),
           "active of ints": (q, va, aa, effort, pose, np.array([1])),
           "active too long": (q, va, aa, effort, pose, np.array([True, True]))}
    for what, args in bad.items():
        try:
            want = route.general(*args)
        except Exception as exc:  # noqa: BLE001 - whatever the general path raises, the route raises it too
            with pytest.raises(type(exc)) as raised:
                route.outputs(*args)
            assert str(raised.value) == str(exc), what
            continue
        same_outputs(route.outputs(*args), want, what)  # taken as the general path takes it


def test_few_poses_are_checked_as_numpy_checks_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """core.checks.check_pose passes up to FEW_POSES poses in plain floats first: it accepts and refuses (with
    numpy's words) the same poses as its numpy checks alone, across the tolerance: rotations scaled by
    1 +- 2e-6 and 1 +- 5e-7, sheared, reflected, last rows off by 2e-6 or 5e-7, NaN and inf, one to six poses."""
    from robots import random_pose

    from liedyn_ros.core import checks

    rng = np.random.default_rng(9)
    poses = []
    for k in range(200):
        T = random_pose(rng)
        kind = k % 8
        if kind == 1:
            T[:3, :3] *= 1 + rng.choice([-2e-6, 2e-6, -5e-7, 5e-7])
        elif kind == 2:
            T[rng.integers(3), rng.integers(3)] += rng.choice([-2e-6, 5e-7])
        elif kind == 3:
            T[:3, :3] = T[:3, :3] @ np.diag([1.0, 1.0, -1.0])
        elif kind == 4:
            T[3, rng.integers(4)] += rng.choice([-2e-6, 2e-6, -5e-7, 5e-7])
        elif kind == 5:
            T[rng.integers(4), rng.integers(4)] = rng.choice([np.nan, np.inf])
        poses.append(T)

    def verdict(batch: np.ndarray) -> str:
        try:
            checks.check_pose("base_pose", batch)
            return "ok"
        except ValueError as exc:
            return str(exc)

    batches = [np.array(poses[k:k + 1 + k % 6]) for k in range(len(poses))]
    fast = [verdict(batch) for batch in batches]
    with monkeypatch.context() as patch:
        patch.setattr(checks, "FEW_POSES", 0)  # numpy's checks alone
        slow = [verdict(batch) for batch in batches]
    assert fast == slow, [x for x in zip(fast, slow) if x[0] != x[1]][:3]
    assert 20 < fast.count("ok") < 180, fast.count("ok")  # both sides of the tolerance


@pytest.mark.parametrize("kw, message", [
    (dict(LOOP, loop_closures=("l2 l9 point",)), r"loop_closures: \['l9'\]"),
    (dict(LOOP, loop_closures=("l2 l3 hinge",)), "loop_closures: 'l2 l3 hinge'"),
    (dict(LOOP, loop_closures=("l2 l3",)), "loop_closures: 'l2 l3'"),
    (dict(LOOP, loop_closures="l2 l3 point"), "loop_closures: expected a list"),
    (dict(LOOP, loop_closures=("l2 l2 weld",)), "loop_closures: 'l2' is closed onto itself"),
    (dict(LOOP, loop_offsets=(0.1, 0.0, 0.0, 0.2, 0.0)), "loop_offsets"),
    (dict(LOOP, loop_offsets=(0.1, 0.0, 0.0, 0.2, 0.0, float("nan"))), "loop_offsets"),
    (dict(LOOP, passive_joints=("j2", "j9")), r"passive_joints: \['j9'\]"),
    (dict(passive_joints=("j2",)), "passive_joints: .* need loop_closures or contact_links"),
])
def test_bad_loop_configuration_is_refused_by_name(fixed: Reference, kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DynamicsPipeline(fixed.t.model, PipelineConfig(**kw))


def test_ros_parameters_read_as_the_node_declares_them(fixed: Reference) -> None:
    """The node's string arrays cannot be empty: [''] means none."""
    none = config_from_parameters({"loop_closures": [""], "passive_joints": [""]})
    assert DynamicsPipeline(fixed.t.model, none).loops is None
    some = config_from_parameters({"loop_closures": ["l2 l3 point"], "passive_joints": ["j2", "j4"],
                                   "loop_offsets": list(LOOP["loop_offsets"])})
    loops = DynamicsPipeline(fixed.t.model, some).loops
    assert loops is not None and loops.passive == ("j2", "j4") and len(loops.closures) == 1
    np.testing.assert_allclose(loops.closures[0].offset_b[:3, 3], [L5[2], 0, 0])


def test_replay_residual_against_the_loop_consistent_torques(tmp_path, fixed: Reference) -> None:
    """A five-bar driven at its ground joints, simulated by Pinocchio's constraint dynamics (RK4),
    replayed with the loop configured in --params: the loop-consistent feedforward (and the fit
    closest to the efforts, the same here: two passive joints pin the two loop forces down)
    explain the efforts to below 1 % relative RMS, where the unconstrained RNEA misses."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from liedyn_ros.replay import ReplayOptions, replay
    from robots import rk4_step

    from test_contacts_replay import read_csv, relative_rms

    model, h = fixed.t.model, 0.002
    q, v = phi("five_bar", THETA["five_bar"]), np.zeros(4)
    hold = fixed.torques(q, v, v)
    t = np.arange(0.0, 0.8, h)
    drive = hold + np.outer(np.sin(2 * np.pi * 1.5 * t), [0.4, 0.0, -0.3, 0.0])
    ts = get_typestore(Stores.ROS2_JAZZY)
    T = ts.types
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for k, tau in enumerate(drive):
            stamp = STAMP + round(t[k] * 1e9)
            sec, nsec = divmod(stamp, 10**9)
            header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="")
            msg = T["sensor_msgs/msg/JointState"](header=header, name=list(model.joint_names), position=q.copy(),
                                                  velocity=v.copy(), effort=tau.copy())
            w.write(conn, stamp, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
            q, v, _ = rk4_step(model, q, v, None, h, lambda qs, vs, _T, tau=tau: fixed.forward(qs, vs, tau))
    urdf = tmp_path / "five_bar.urdf"
    urdf.write_text(FIVE_BAR)
    params = tmp_path / "loops.yaml"
    params.write_text("/**:\n  ros__parameters:\n    loop_closures: ['l2 l3 point']\n"
                      f"    loop_offsets: [{L5[1]}, 0.0, 0.0, {L5[2]}, 0.0, 0.0]\n    passive_joints: [j2, j4]\n")
    out = tmp_path / "out"
    report = replay([tmp_path / "bag"], ReplayOptions(out=out, urdf=urdf, params=params, progress=False, plots=False))
    assert report.processed == len(t) and not report.problems
    stamps, _, effort = read_csv(out / "measured_effort.csv")
    tables = {name: read_csv(out / f"{name}.csv")[2] for name in ("feedforward_torque", "torque_fit",
                                                                   "unconstrained_torque")}
    away = np.abs((stamps - STAMP) * 1e-9 - 0.4) < 0.35  # the derivative's window off the ends
    for name, tau in tables.items():
        error = relative_rms(effort[away] - tau[away], effort[away])
        print(f"five-bar replay: {name} {error:.2e}")
        assert (error < 0.01) == (name != "unconstrained_torque"), (name, error)
    assert np.all(tables["feedforward_torque"][:, PASSIVE] == 0.0)
    assert report.summary["contacts"]["unbalanced_samples"] == 0
