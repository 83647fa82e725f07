"""The momentum observer with contacts, and contact_source observer, on a Go2 simulated by MuJoCo
(test/go2_sim.py): standing, one push on the trunk. The long run with a trot and two pushes is
benchmarks/bench_legged_observer.py."""
from __future__ import annotations

import numpy as np
import pytest

import go2_sim
import legged_eval
from liedyn_ros import core, pipeline
from liedyn_ros.replay.external import ExternalTorque, ObserverSettings
from liedyn_ros.replay.samples import SampleBlock

PUSH = go2_sim.Push(0.3, 0.1, (0.0, 60.0, 0.0))
GAIN = 200.0


@pytest.fixture(scope="module")
def recording() -> go2_sim.Recording:
    return go2_sim.simulate(0.5, (PUSH,))


@pytest.fixture(scope="module")
def node(recording: go2_sim.Recording) -> legged_eval.Run:
    return legged_eval.run_node(recording, GAIN)


def test_push_detected_on_the_base_and_nothing_from_the_ground(recording: go2_sim.Recording,
                                                                node: legged_eval.Run) -> None:
    ev = legged_eval.evaluate(recording, node, (PUSH,))
    (push,) = ev.pushes
    assert push.name == "base" and push.delay_ms <= 20.0, push
    assert abs(push.error_pct) < 10.0 and push.wrench_error_pct < 10.0, push  # against MuJoCo's J^T F
    assert ev.other_events == []
    # the feet down as the observer sees them: all four, from its first few ms until the push
    standing = (recording.t > 0.05) & (recording.t < PUSH.start)
    assert node.state[standing].all()


def test_replay_path_gives_the_node_states_and_events(recording: go2_sim.Recording, node: legged_eval.Run) -> None:
    replay = legged_eval.run_replay(recording, GAIN, block=300)
    np.testing.assert_array_equal(replay.state, node.state)
    np.testing.assert_allclose(replay.wrench, node.wrench, atol=1e-6)
    assert [(e[0], e[1]) for e in replay.events] == [(e[0], e[1]) for e in node.events]


def test_standing_robot_feels_no_external_torque_with_its_contacts(recording: go2_sim.Recording) -> None:
    """Issue 23: without its contacts the observer reads the ground as 10-17 N m on the stance legs."""
    m = legged_eval.model()
    order = [recording.names.index(j) for j in m.joint_names]
    v = np.concatenate((recording.v[:, :6], recording.v[:, 6:][:, order]), axis=1)
    tau = np.concatenate((np.zeros((len(recording.t), 6)), recording.effort[:, order]), axis=1)
    r = core.MomentumObserver(m, GAIN).series(recording.t, recording.q[:, order], v, tau, base_pose=recording.pose)
    quiet = (recording.t > 0.15) & (recording.t < PUSH.start)  # settled on its feet
    assert np.abs(r[quiet, 6:]).max() > 5.0  # the ground, read as an external torque
    contacts = pipeline.resolve_contacts(m, legged_eval.config(GAIN))
    assert contacts is not None
    observer = pipeline.ContactObserver(contacts, 20.0, 0.5, source_observer=False)
    down = np.ones((len(r), contacts.k), dtype=bool)
    rest, _ = observer.beyond(m, recording.q[:, order], recording.pose, r, down)
    assert np.abs(rest[quiet]).max() < 1.0  # N m on the joints, N and N m on the base
    # the feet's forces it took off: MuJoCo's normal forces through the observer's filter (dr/dt =
    # K (f - r), the force of a step acting over the step), within 1 N
    lam, _ = pipeline.contact_estimate(m, contacts, recording.q[:, order], recording.pose, r)
    normal = pipeline.normal_forces(m, contacts, recording.q[:, order], recording.pose, lam)
    decay = np.exp(-GAIN * go2_sim.TIMESTEP)
    filtered = np.zeros_like(recording.normal)
    for k in range(1, len(filtered)):
        filtered[k] = decay * filtered[k - 1] + (1 - decay) * recording.normal[k - 1]
    np.testing.assert_allclose(normal[quiet], filtered[quiet], atol=1.0)


def test_hysteresis() -> None:
    state = pipeline.ObservedContacts(2, threshold=20.0, release=0.5)
    normal = np.array([[0.0, 25.0], [21.0, 15.0], [12.0, 9.0], [9.0, 15.0], [15.0, 21.0]])
    got = state.series(normal)
    np.testing.assert_array_equal(got, [[False, True], [True, True], [True, False], [False, False], [False, True]])
    state.reset()
    assert not state.active.any()


def test_observer_source_needs_the_observer() -> None:
    with pytest.raises(ValueError, match="contact_source: observer needs external_torque_observer"):
        pipeline.PipelineConfig(contact_links=("FL_foot",), contact_source="observer", external_torque_observer=False)
    with pytest.raises(ValueError, match="contact_force_release"):
        pipeline.PipelineConfig(contact_links=("FL_foot",), contact_force_release=1.5)


def test_foot_sensors_join_the_observer(recording: go2_sim.Recording) -> None:
    """contact_source wrench: MuJoCo's foot forces as the sensors' wrenches (foot link axes); what
    remains is the push, and nothing on the joints of the legs down."""
    m, cfg = legged_eval.model(), legged_eval.config(GAIN)
    contacts = pipeline.resolve_contacts(m, cfg)
    assert contacts is not None
    order = [recording.names.index(j) for j in m.joint_names]
    q = recording.q[:, order]
    v = np.concatenate((recording.v[:, :6], recording.v[:, 6:][:, order]), axis=1)
    T_wc = pipeline.contact_frames(m, contacts, q, recording.pose)
    wrench = np.zeros((len(q), contacts.k, 6))
    wrench[..., 3:] = np.einsum("nkji,nkj->nki", T_wc[..., :3, :3], recording.force)  # R^T f
    assert recording.force[..., 2].min() >= 0.0  # the floor pushes
    down = legged_eval.steps(recording)
    observer = pipeline.ContactObserver(contacts, cfg.contact_force_threshold, cfg.contact_force_release, False)
    external = ExternalTorque(m, ObserverSettings(gain=GAIN, threshold=(10.0,)), None, None, observer, 15.0, "base")
    stamps = np.round(recording.t * 1e9).astype(np.int64)
    block = SampleBlock(stamps, stamps, q, v, recording.effort[:, order], recording.pose, ("",) * len(q),
                        down, wrench)
    joints = external.add(block, down)
    assert external.base_wrench is not None
    late = (recording.t >= PUSH.start + PUSH.duration / 2) & (recording.t < PUSH.start + PUSH.duration)
    np.testing.assert_allclose(external.base_wrench[late].mean(axis=0), recording.push[late].mean(axis=0),
                               atol=0.05 * np.linalg.norm(PUSH.force))
    quiet = (recording.t > 0.15) & (recording.t < PUSH.start)
    assert np.abs(joints[quiet]).max() < 1.0 and np.abs(external.base_wrench[quiet]).max() < 1.0
    events = external.collisions()
    assert [e["joint"] for e in events] == ["base"] and 0 <= events[0]["start_ns"] * 1e-9 - PUSH.start <= 0.02
    # the sensors' forces are what it takes off: twice them leaves minus the ground's force, the weight
    doubled = ExternalTorque(m, ObserverSettings(gain=GAIN, threshold=(10.0,)), None, None, observer, 15.0, "base")
    observer.reset()
    doubled.add(SampleBlock(stamps, stamps, q, v, recording.effort[:, order], recording.pose, ("",) * len(q),
                            down, 2.0 * wrench), down)
    assert doubled.base_wrench is not None
    ground = np.linalg.norm(recording.force[quiet].sum(axis=1), axis=1).mean()
    assert np.linalg.norm(doubled.base_wrench[quiet, 3:], axis=1).mean() == pytest.approx(ground, rel=0.02)


def test_the_replay_takes_the_nodes_observer_route(recording: go2_sim.Recording, node: legged_eval.Run,
                                                   tmp_path) -> None:
    """contact_source observer: the replay's BlockDynamics takes the node's route (ObservedRoute,
    chosen by choose_route with the observer); a block through it, each row with its state, gives
    what the node's one-sample call gives with the observer holding that state (to 1e-12); a
    block without the rows' states is refused (the observer holds only its last one)."""
    from liedyn_ros.pipeline.routes import ObservedRoute
    from liedyn_ros.replay import ReplayOptions
    from liedyn_ros.replay.run import BlockDynamics

    m, cfg = legged_eval.model(), legged_eval.config(GAIN)
    contacts = pipeline.resolve_contacts(m, cfg)
    assert contacts is not None
    observer = pipeline.ContactObserver(contacts, cfg.contact_force_threshold, cfg.contact_force_release, True)
    route = BlockDynamics(m, cfg, contacts, ReplayOptions(out=tmp_path), True, observer=observer).route
    assert isinstance(route, ObservedRoute) and route.observer is observer
    rows = np.linspace(0, len(recording.t) - 1, 16).astype(int)  # standing, pushed, feet on and off
    order = [recording.names.index(j) for j in m.joint_names]
    q = recording.q[rows][:, order]
    v = np.concatenate((recording.v[rows, :6], recording.v[rows, 6:][:, order]), axis=1)
    a = np.random.default_rng(2).normal(size=v.shape)
    effort, pose, state = recording.effort[rows][:, order], recording.pose[rows], node.state[rows]
    assert state.any() and not state.all()
    block = route.outputs(q, v, a, effort, pose, state)
    for i in range(len(rows)):
        observer.state.active = state[i].copy()
        one = route.outputs(q[i], v[i], a[i], effort[i], pose[i])
        for name in ("tau_ff", "tau_g", "qdd_pred", "base_wrench", "contact_wrench", "tau_free"):
            np.testing.assert_allclose(getattr(one, name), getattr(block, name)[i], rtol=0, atol=1e-12, err_msg=name)
        assert np.array_equal(one.contact_active, state[i])
    with pytest.raises(ValueError, match="each sample's contact state"):
        route.outputs(q, v, a, effort, pose)
