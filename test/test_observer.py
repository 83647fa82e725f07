"""Momentum observer and collision events (issue 14), against recordings Pinocchio simulates.

The simulator is Pinocchio's own forward dynamics (`pin.aba` with an external force on a joint
frame), integrated by Lie-group RK4 at 10 kHz and sampled at 1 kHz with sensor noise; the true
external torque is Pinocchio's J^T F. Nothing of liedyn_ros.core takes part in the simulation.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from liedyn_ros import core
from robots import twin

GAIN, THRESHOLD = 50.0, 1.0  # 1/s, N m
DT, SUBSTEPS = 1e-3, 10
NOISE_V, NOISE_TAU = 1e-3, 0.02  # rad/s, N m: encoder-derived velocities, torque sensing


def _simulate(tw, q0_pin, duration, controller, push=None, seed=0, friction=None):
    """Samples (t, q, v, tau, base_pose, tau_ext) in our conventions, tau_ext the true J^T F.

    controller(t, q_pin, v_pin) -> joint torques (Pinocchio order); push = (joint name, F as
    (f, m) in that joint's frame, t_on, t_off), or None; friction(qd) -> the joint torques
    friction takes from the motors' (Pinocchio order).
    """
    pm = tw.pin_model
    pd = pm.createData()
    nj = pm.nv - (6 if tw.model.floating_base else 0)
    jid = pm.getJointId(push[0]) if push else 0
    force = pin.Force(np.asarray(push[1][:3]), np.asarray(push[1][3:])) if push else None

    def generalized_force(t, q, v):
        tau = np.zeros(pm.nv)
        tau[pm.nv - nj:] = controller(t, q, v)
        return tau

    def pushing(t):
        return push is not None and push[2] <= t < push[3]

    def accel(t, q, v):
        fext = pin.StdVec_Force()
        for i in range(pm.njoints):
            fext.append(force if (i == jid and pushing(t)) else pin.Force.Zero())
        tau = generalized_force(t, q, v)
        if friction is not None:
            tau[pm.nv - nj:] -= friction(v[pm.nv - nj:])
        return pin.aba(pm, pd, q, v, tau, fext).copy()

    rng = np.random.default_rng(seed)
    q, v, h = q0_pin.copy(), np.zeros(pm.nv), DT / SUBSTEPS
    rows = []
    for k in range(int(round(duration / DT)) + 1):
        t = k * DT
        tau_ext = np.zeros(pm.nv)
        if pushing(t + 0.5 * DT):  # the force of the coming interval (on from t_on = a sample + 1 ns)
            pin.computeJointJacobians(pm, pd, q)
            J = pin.getJointJacobian(pm, pd, jid, pin.ReferenceFrame.LOCAL)
            tau_ext = J.T @ force.vector
        rows.append((t, q.copy(), v.copy(), generalized_force(t, q, v), tau_ext))
        for s in range(SUBSTEPS):
            ts = t + s * h
            a1 = accel(ts, q, v)
            v2 = v + 0.5 * h * a1
            a2 = accel(ts + 0.5 * h, pin.integrate(pm, q, 0.5 * h * v), v2)
            v3 = v + 0.5 * h * a2
            a3 = accel(ts + 0.5 * h, pin.integrate(pm, q, 0.5 * h * v2), v3)
            v4 = v + h * a3
            a4 = accel(ts + h, pin.integrate(pm, q, h * v3), v4)
            q = pin.integrate(pm, q, h / 6 * (v + 2 * v2 + 2 * v3 + v4))
            v = v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    t = np.array([r[0] for r in rows])
    q, v, pose = core.from_pinocchio(tw.model, np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
                                     joint_order=tw.joint_order)
    _, E = tw.to_pin(q[0], None if pose is None else pose[0])  # v_pin = E v, so tau = E^T tau_pin
    tau = np.array([r[3] for r in rows]) @ E
    tau_ext = np.array([r[4] for r in rows]) @ E
    v_noisy = v + rng.normal(0.0, NOISE_V, v.shape)
    tau_noisy = tau + rng.normal(0.0, NOISE_TAU, tau.shape)
    return t, q, v_noisy, tau_noisy, pose, tau_ext


def _observe(model, t, q, v, tau, pose, friction=None):
    obs = core.MomentumObserver(model, GAIN, friction=friction)
    return np.array([obs.update(t[k], q[k], v[k], tau[k], base_pose=None if pose is None else pose[k])
                     for k in range(len(t))])


def _pd_tracking(tw, q0_pin, amplitude, hz):
    """Gravity compensation plus PD tracking of q0 + A (1 - cos(w_j t)), w_j = 2 pi hz (1 + j / 8)
    (Pinocchio's terms): it starts at rest, so no torque step at t = 0."""
    pm = tw.pin_model
    pd = pm.createData()
    w = 2 * np.pi * hz * (1.0 + np.arange(pm.nv) / 8)

    def controller(t, q, v):
        q_des, qd_des = q0_pin + amplitude * (1 - np.cos(w * t)), amplitude * w * np.sin(w * t)
        return pin.computeGeneralizedGravity(pm, pd, q) + 400.0 * (q_des - q) + 40.0 * (qd_des - v)

    return controller


@pytest.fixture(scope="module")
def panda():
    tw = twin("panda_arm")
    return tw, np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8])


def test_fixed_base_push_is_estimated_and_detected(panda):
    tw, q0 = panda
    t_on, t_off = 0.2 + 1e-9, 0.4
    push = ("panda_joint5", (0.0, 30.0, -40.0, 0.0, 0.0, 2.0), t_on, t_off)
    t, q, v, tau, pose, tau_ext = _simulate(tw, q0, 0.55, _pd_tracking(tw, q0, 0.3, 0.5), push)
    r = _observe(tw.model, t, q, v, tau, pose)
    scale = np.abs(tau_ext).max()
    settled = (t >= t_on + 5 / GAIN) & (t < t_off)
    err = np.abs(r[settled] - tau_ext[settled]).max() / scale
    print(f"\npanda push: |J^T F| max {scale:.1f} N m, settled error {100 * err:.2f} % of it")
    assert err < 0.05
    events, open_event = core.collision_events(np.round(t * 1e9).astype(np.int64), r, THRESHOLD)
    assert open_event is None and len(events) == 1
    delay = (events[0].start_ns * 1e-9 - (t_on - 1e-9)) / DT
    print(f"detected {delay:.0f} samples after the onset; peak joint {tw.model.joint_names[events[0].joint]}"
          f" {events[0].peak:.2f} N m (true {tau_ext[settled, events[0].joint].mean():.2f})")
    assert 0 < delay <= 3
    assert events[0].end_ns * 1e-9 > t_off
    assert events[0].joint == int(np.argmax(np.abs(tau_ext[settled]).max(axis=0)))


def test_fast_motion_without_contact_gives_no_event(panda):
    tw, q0 = panda
    t, q, v, tau, pose, _ = _simulate(tw, q0, 2.0, _pd_tracking(tw, q0, 0.6, 0.7), seed=1)
    r = _observe(tw.model, t, q, v, tau, pose)
    events, open_event = core.collision_events(np.round(t * 1e9).astype(np.int64), r, THRESHOLD)
    above = (np.abs(r) > THRESHOLD).any(axis=1).mean()
    print(f"\nfast motion: peak speed {np.abs(v).max():.2f} rad/s, max |r| {np.abs(r).max():.3f} N m, "
          f"false-positive rate {above:.4f} of samples, {len(events)} events in {t[-1]:.1f} s")
    assert np.abs(v).max() > 2.0
    assert events == [] and open_event is None


def test_joint_friction_enters_through_the_friction_model(panda):
    """The simulated joints lose Fc tanh(qd / eps) + Fv qd of the motor torque: without a friction
    model the observer reports that loss as external torque, with it nothing."""
    tw, q0 = panda
    coulomb, viscous, eps = np.linspace(3.0, 1.0, 7), np.linspace(2.0, 0.5, 7), 0.05
    t, q, v, tau, pose, _ = _simulate(tw, q0, 0.6, _pd_tracking(tw, q0, 0.3, 0.7), seed=7,
                                      friction=lambda qd: coulomb * np.tanh(qd / eps) + viscous * qd)
    model_friction = core.Friction(coulomb, viscous, smoothing=eps)  # model order = Pinocchio's here
    without, with_model = _observe(tw.model, t, q, v, tau, pose), _observe(tw.model, t, q, v, tau, pose, model_friction)
    print(f"\nfriction: max |r| {np.abs(without).max():.2f} N m without the model, {np.abs(with_model).max():.3f} with it")
    assert np.abs(without).max() > 2.0 and np.abs(with_model).max() < 0.1 * np.abs(without).max()


def test_floating_base_push_is_estimated():
    tw = twin("solo12")
    q0 = pin.neutral(tw.pin_model)
    q0[7:] = np.tile([0.0, 0.8, -1.6], 4)

    def controller(t, q, v):  # free fall (the base spins up to 15 rad/s) with the legs held by PD
        return 20.0 * (q0[7:] - q[7:]) - 0.4 * v[6:]

    t_on, t_off = 0.1 + 1e-9, 0.25
    push = ("FL_KFE", (15.0, -10.0, 20.0, 0.3, 0.0, -0.3), t_on, t_off)
    t, q, v, tau, pose, tau_ext = _simulate(tw, q0, 0.25, controller, push, seed=2)
    r = _observe(tw.model, t, q, v, tau, pose)
    settled = (t >= t_on + 5 / GAIN) & (t < t_off)
    scale = np.abs(tau_ext).max()
    err = np.abs(r[settled] - tau_ext[settled]).max() / scale
    print(f"\nsolo12 push: |J^T F| max {scale:.2f}, settled error {100 * err:.2f} %, "
          f"before the push max |r| {np.abs(r[t < t_on]).max():.3f}")
    assert err < 0.05
    assert np.abs(r[t < t_on]).max() < 0.05 * scale


@pytest.mark.parametrize("name", ["panda_arm", "solo12"])
def test_momentum_rate_matches_pinocchio(name):
    """beta = tau + C^T v - g is d(M v)/dt - tau_ext: central differences along pin.aba's motion,
    and C^T v - g equal to Pinocchio's computeCoriolisMatrix / computeGeneralizedGravity."""
    tw = twin(name)
    pm, pd = tw.pin_model, tw.pin_model.createData()
    rng = np.random.default_rng(3)
    q_pin = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
    v_pin, tau_pin = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    a_pin = pin.aba(pm, pd, q_pin, v_pin, tau_pin).copy()
    q, v, pose = core.from_pinocchio(tw.model, q_pin, v_pin, joint_order=tw.joint_order)
    _, E = tw.to_pin(q, pose)

    C_pin = pin.computeCoriolisMatrix(pm, pd, q_pin, v_pin)
    g_pin = pin.computeGeneralizedGravity(pm, pd, q_pin)
    obs = core.MomentumObserver(tw.model, 1.0)
    obs.update(0.0, q, v, tau_pin @ E, base_pose=pose)
    beta = obs._beta
    h = 1e-5
    M = lambda x: np.triu(x) + np.triu(x, 1).T  # noqa: E731  (crba fills the upper triangle only)
    rate = []
    for s in (h, -h):
        qh = pin.integrate(pm, q_pin, s * v_pin + 0.5 * s * s * a_pin)
        rate.append(M(pin.crba(pm, pd, qh)) @ (v_pin + s * a_pin))
    fd = (rate[0] - rate[1]) / (2 * h)
    np.testing.assert_allclose(beta, fd @ E, atol=1e-5 * (1 + np.abs(fd).max()))
    np.testing.assert_allclose(beta - tau_pin @ E, (C_pin.T @ v_pin - g_pin) @ E, atol=1e-9, rtol=1e-9)


def test_held_against_a_push_the_estimate_is_the_exact_step_response_at_jittered_stamps():
    """Motors holding the arm still against J^T F (tau = g - J^T F, Pinocchio's terms): r(t_k) is
    (1 - exp(-K (t_k - t_0))) J^T F at every stamp, whatever the intervals."""
    tw = twin("panda_arm")
    pm, pd = tw.pin_model, tw.pin_model.createData()
    q_pin = np.array([0.3, -0.5, 0.2, -1.8, 0.1, 1.4, 0.5])
    pin.computeJointJacobians(pm, pd, q_pin)
    F = np.array([10.0, -5.0, 20.0, 0.5, 1.0, 0.0])
    tau_ext_pin = pin.getJointJacobian(pm, pd, pm.getJointId("panda_joint6"), pin.ReferenceFrame.LOCAL).T @ F
    q, _, _ = core.from_pinocchio(tw.model, q_pin, joint_order=tw.joint_order)
    _, E = tw.to_pin(q)
    tau, tau_ext = (pin.computeGeneralizedGravity(pm, pd, q_pin) - tau_ext_pin) @ E, tau_ext_pin @ E
    stamps = np.cumsum(np.random.default_rng(4).uniform(0.2e-3, 3e-3, 60))
    gain = np.linspace(20.0, 80.0, tw.model.nv)
    obs = core.MomentumObserver(tw.model, gain)
    r = np.array([obs.update(t, q, np.zeros(7), tau) for t in stamps])
    want = (1 - np.exp(-gain * (stamps - stamps[0])[:, None])) * tau_ext
    np.testing.assert_allclose(r, want, atol=1e-9 * np.abs(tau_ext).max())


def test_batch_of_robots_equals_one_by_one():
    tw = twin("solo12")
    rng = np.random.default_rng(5)
    model, B = tw.model, 3
    q, v = rng.normal(size=(4, B, model.n)), rng.normal(size=(4, B, model.nv))
    tau = rng.normal(size=(4, B, model.nv))
    friction = core.Friction(rng.uniform(0, 1, model.n), rng.uniform(0, 1, model.n))
    pose = np.broadcast_to(np.eye(4), (B, 4, 4))
    t = np.array([0.0, 0.001, 0.0025, 0.003])[:, None] + np.array([0.0, 1e-4, 3e-4])
    batch = core.MomentumObserver(model, 30.0, friction=friction)
    got = [batch.update(t[k], q[k], v[k], tau[k], base_pose=pose) for k in range(4)]
    for b in range(B):
        one = core.MomentumObserver(model, 30.0, friction=friction)
        for k in range(4):
            want = one.update(t[k, b], q[k, b], v[k, b], tau[k, b], base_pose=pose[b])
            np.testing.assert_allclose(got[k][b], want, rtol=1e-12, atol=1e-12)


def test_series_in_blocks_equals_updates(panda):
    tw, q0 = panda
    rng = np.random.default_rng(6)
    q, v, tau = q0 + 0.1 * rng.normal(size=(9, 7)), rng.normal(size=(9, 7)), rng.normal(size=(9, 7))
    dt = rng.uniform(1e-3, 5e-3, 9)
    dt[[3, 6]] += [0.2, 0.4]  # gaps longer than max_gap: the observer starts over there
    t = np.cumsum(dt)
    one = core.MomentumObserver(tw.model, 40.0, max_gap=0.1)
    want = np.array([one.update(t[k], q[k], v[k], tau[k]) for k in range(9)])
    assert not want[[0, 3, 6]].any() and want[[1, 2, 4, 5, 7, 8]].all()
    series = core.MomentumObserver(tw.model, 40.0, max_gap=0.1)
    blocks = [(0, 1), (1, 5), (5, 5), (5, 7), (7, 9)]
    got = np.concatenate([series.series(t[a:b], q[a:b], v[a:b], tau[a:b]) for a, b in blocks])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_observer_errors():
    model = twin("panda_arm").model
    with pytest.raises(ValueError, match="gain"):
        core.MomentumObserver(model, [1.0, 2.0])
    with pytest.raises(ValueError, match="gain"):
        core.MomentumObserver(model, -1.0)
    obs = core.MomentumObserver(model, 10.0)
    z = np.zeros(7)
    with pytest.raises(ValueError, match="tau"):
        obs.update(0.0, z, z, np.zeros(6))
    obs.update(0.0, z, z, z)
    with pytest.raises(ValueError, match="t: "):
        obs.update(0.0, z, z, z)
    with pytest.raises(ValueError, match="q: batch shape"):
        obs.update(1.0, np.zeros((2, 7)), np.zeros((2, 7)), np.zeros((2, 7)))
    obs.reset()
    assert not obs.update(0.0, z, z, z).any()


def test_collision_events_hysteresis_and_blocks():
    t = np.arange(40, dtype=np.int64) * 1000
    r = np.zeros((40, 2))
    r[5:9, 0] = [1.5, 0.8, 1.2, 3.0]    # dips under the threshold, not under the release level: one event
    r[9, 0] = 0.2                        # quiet: ends it
    r[20:23, 1] = [-0.5, -2.5, -0.6]     # second joint, own threshold 0.4, negative torque
    thr = np.array([1.0, 0.4])
    events, ongoing = core.collision_events(t, r, thr)
    assert ongoing is None
    assert events == [core.Collision(5000, 9000, 0, 3.0), core.Collision(20000, 23000, 1, -2.5)]
    # in blocks, cutting through both events, gives the same
    got, ongoing = [], None
    for lo, hi in [(0, 7), (7, 8), (8, 21), (21, 40)]:
        done, ongoing = core.collision_events(t[lo:hi], r[lo:hi], thr, ongoing=ongoing)
        got += done
    assert got == events and ongoing is None
    done, ongoing = core.collision_events(t[:22], r[:22], 1.0)
    assert len(done) == 1 and ongoing == core.Collision(21000, None, 1, -2.5)
    with pytest.raises(ValueError, match="threshold"):
        core.collision_events(t, r, [1.0, 0.0])
    with pytest.raises(ValueError, match="release"):
        core.collision_events(t, r, 1.0, release=1.5)


def test_collision_step_is_collision_events_one_sample_at_a_time():
    """The node's per-sample step leaves open the event the block function leaves open after the
    same samples (one-sample blocks carried, as the node called it, and the whole series up to each
    finite sample), through bursts that dip under the threshold, start on either joint, peak again,
    end, and NaN/inf samples (where blocks and the whole series differ: argmax finds NaN first)."""
    rng = np.random.default_rng(3)
    n = 400
    t = np.arange(n, dtype=np.int64) * 1000
    r = rng.normal(0.0, 0.3, (n, 3)) * (rng.random((n, 1)) < 0.5)
    for start in rng.integers(0, n - 30, 12):  # bursts of either sign on a random joint
        r[start:start + rng.integers(3, 30), rng.integers(3)] += rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 4.0)
    r[[370, 371, 385]] = np.nan
    r[380, 1] = np.inf
    r[386:389, 0] = 5.0  # an event started right after a NaN
    thr, release = np.array([1.0, 0.4, 2.0]), 0.5
    stepped, carried, kinds = None, None, set()
    for i in range(n):
        was = stepped
        stepped = core.collision_step(int(t[i]), r[i], thr, release, stepped)
        _, carried = core.collision_events(t[i:i + 1], r[i:i + 1], thr, release=release, ongoing=carried)
        assert stepped == carried, i
        if i < 370:
            assert stepped == core.collision_events(t[:i + 1], r[:i + 1], thr, release=release)[1], i
        kinds.add((was is None, stepped is None, was is not None and stepped is not None and stepped != was))
    assert kinds == {(True, True, False), (True, False, False), (False, True, False), (False, False, False),
                     (False, False, True)}  # none, start, end, held, a new peak: every transition seen
    assert core.collision_step(0, np.zeros(0), np.zeros(0), release, core.Collision(0, None, 0, 1.0)) is None


def test_lone_floating_body_held_against_a_push():
    """No joint at all (a drone's body): the compiled step has no friction column to read. Held
    still (base wrench = g - F, Pinocchio's gravity wrench), r is the exact step response to F."""
    urdf = ('<robot name="box"><link name="world"/><link name="body"><inertial><origin xyz="0.1 0 0"/>'
            '<mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.3"/></inertial></link>'
            '<joint name="fly" type="floating"><parent link="world"/><child link="body"/></joint></robot>')
    model = core.load_urdf(urdf)
    pm = pin.buildModelFromXML(urdf)  # its floating joint is a free-flyer
    pose = np.eye(4)
    pose[:3, 3] = [0.0, 0.0, 1.0]
    q_pin, E = core.to_pinocchio(model, np.zeros(0), np.eye(6), base_pose=pose)
    g = pin.computeGeneralizedGravity(pm, pm.createData(), q_pin) @ E.T
    F = np.array([0.5, -0.2, 0.1, 3.0, 0.0, -4.0])
    obs = core.MomentumObserver(model, 40.0)
    t = np.array([0.0, 0.002, 0.0035, 0.01])
    r = np.array([obs.update(tk, np.zeros(0), np.zeros(6), g - F, base_pose=pose) for tk in t])
    np.testing.assert_allclose(r, (1 - np.exp(-40.0 * t))[:, None] * F, atol=1e-9)
