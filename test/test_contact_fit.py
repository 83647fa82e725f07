"""The compiled fit of contact forces to a generalized force (core.constraints.fit, the legged
observer's per-leg J^T pseudo-inverse) against Pinocchio's frame Jacobians and numpy's least
squares, and the observer's path through it (pipeline.observed) against its numpy path."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from robots import assert_close, random_pose, twin

from liedyn_ros import core, pipeline
from liedyn_ros.core.constraints.fit import ContactFit

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
UP = np.array([0.0, 0.0, 1.0])


def _offset(rng: np.random.Generator) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = pin.rpy.rpyToMatrix(*rng.uniform(-0.3, 0.3, 3))
    T[:3, 3] = rng.uniform(-0.03, 0.03, 3)
    return T


def _pinocchio(t, constraints, q: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """(A acting on our v, each contact frame's world rotation) from Pinocchio's frame Jacobians
    (LOCAL, or LOCAL_WORLD_ALIGNED for frame="world"; rows (omega, v) as ours)."""
    q_pin, E = t.to_pin(q, T)
    pm, pd = t.pin_model, t.pin_model.createData()
    pin.computeJointJacobians(pm, pd, q_pin)
    pin.framesForwardKinematics(pm, pd, q_pin)
    rows, rotations = [], []
    for c in constraints:
        frame = pm.frames[pm.getFrameId(c.link)]
        placement = frame.placement * pin.SE3(c.offset)
        ref = pin.LOCAL_WORLD_ALIGNED if c.frame == "world" else pin.LOCAL
        J = pin.getFrameJacobian(pm, pd, frame.parentJoint, placement, ref)
        J = np.vstack([J[3:], J[:3]]) @ E
        rows.append(J[3:] if c.kind == "point" else J)
        rotations.append(np.eye(3) if c.frame == "world" else (pd.oMi[frame.parentJoint] * placement).rotation)
    return np.vstack(rows), rotations


@pytest.mark.parametrize("name", ["solo12 four feet", "solo12 three feet, offsets, world axes", "talos flat feet",
                                  "talos feet and hands"])
def test_fit_matches_least_squares_on_pinocchio_jacobians(name: str) -> None:
    rng = np.random.default_rng(5)
    robot = "solo12" if name.startswith("solo12") else "talos"
    t = twin(robot)
    m = t.model
    constraints = {
        "solo12 four feet": [core.Contact(f) for f in FEET],
        "solo12 three feet, offsets, world axes": [core.Contact(f, offset=_offset(rng), frame="world")
                                                    for f in FEET[:3]],
        "talos flat feet": [core.Contact("left_sole_link", "flat"), core.Contact("right_sole_link", "flat")],
        "talos feet and hands": [core.Contact("left_sole_link", "flat"), core.Contact("right_sole_link", "flat"),
                                 core.Contact("gripper_left_base_link", "point", offset=_offset(rng)),
                                 core.Contact("wrist_right_ft_tool_link", "point")],
    }[name]
    fit = ContactFit(m, constraints, UP)
    N = 5
    q = rng.uniform(-1.0, 1.0, (N, m.n))
    T = np.stack([random_pose(rng) for _ in range(N)])
    r = rng.normal(size=(N, m.nv)) * 20
    k = len(constraints)
    active = rng.uniform(size=(N, k)) < 0.6
    got = fit(q, T, r, active)
    assert got is not None, "the compiled fit declined a full-rank case"
    nb = 6
    for b in range(N):
        A, R = _pinocchio(t, constraints, q[b], T[b])
        assert_close(got.A[b], A, 1e-9, "A")
        lam = np.linalg.lstsq(A[:, nb:].T, r[b, nb:], rcond=None)[0]
        assert_close(got.lam[b], lam, 1e-8, "lam")
        sizes = [3 if c.kind == "point" else 6 for c in constraints]
        down = np.repeat(active[b], sizes)
        rest = r[b] - np.concatenate((A[:, :nb].T @ lam, A[:, nb:].T @ np.where(down, lam, 0.0)))
        assert_close(got.rest[b], rest, 1e-8, "rest")
        forces = np.split(lam, np.cumsum(sizes)[:-1])
        normal = np.array([(Rj @ f[-3:]) @ UP for Rj, f in zip(R, forces)])
        across = np.array([np.linalg.norm(Rj @ f[-3:] - ((Rj @ f[-3:]) @ UP) * UP) for Rj, f in zip(R, forces)])
        assert_close(got.normal[b], normal, 1e-8, "normal")
        assert_close(got.tangential[b], across, 1e-8, "tangential")


def _solo12_observer(source_observer: bool) -> tuple[core.Model, pipeline.ContactObserver]:
    m = twin("solo12").model
    contacts = pipeline.resolve_contacts(m, pipeline.PipelineConfig(base_link="base_link", contact_links=FEET))
    assert contacts is not None
    return m, pipeline.ContactObserver(contacts, 20.0, 0.5, source_observer)


def test_observer_beyond_equals_its_numpy_path() -> None:
    """ContactObserver.beyond through the compiled fit gives the pseudo-inverse path's residual and
    states, given states and (observer source) states that change within the block; a straight leg
    (q = 0: J_leg singular) is declined by the fit and answered by the pseudo-inverse."""
    rng = np.random.default_rng(7)
    m, given = _solo12_observer(False)
    contacts = given.contacts
    N = 40
    stance = np.tile([0.1, 0.8, -1.6, -0.1, 0.8, -1.6, 0.1, -0.8, 1.6, -0.1, -0.8, 1.6], (N, 1))
    q = stance + rng.normal(scale=0.1, size=(N, m.n))
    T = np.stack([random_pose(rng) for _ in range(N)])
    r = rng.normal(size=(N, m.nv)) * 5
    A = core.constraint_jacobian(m, q, contacts.on(m), base_pose=T)
    force = np.where(rng.uniform(size=(N, 4)) < 0.5, 30.0, 5.0)  # normal forces across the thresholds
    frames = core.constraint_frames(m, q, contacts.on(m), base_pose=T)
    lam = (np.einsum("nkji,j->nki", frames[..., :3, :3], UP) * force[..., None]).reshape(N, 12)
    r[:, 6:] += np.einsum("nmi,nm->ni", A[:, :, 6:], lam)
    active = rng.uniform(size=(N, 4)) < 0.5

    def numpy_path(observer: pipeline.ContactObserver, active: np.ndarray | None):
        lam_ref, A_ref = pipeline.contact_estimate(m, contacts, q, T, r)
        if active is None:
            active = pipeline.ObservedContacts(4, 20.0, 0.5).series(
                pipeline.normal_forces(m, contacts, q, T, lam_ref))
        return pipeline.residual_beyond(m, contacts, r, A_ref, lam_ref, active), active

    assert given.prepare(m)(q, T, r, active) is not None  # the compiled path answers here
    rest, states = given.beyond(m, q, T, r, active)
    want, _ = numpy_path(given, active)
    assert_close(rest, want, 1e-9, "given states")
    np.testing.assert_array_equal(states, active)
    _, observed = _solo12_observer(True)
    rest, states = observed.beyond(m, q, T, r, None)
    want, want_states = numpy_path(observed, None)
    assert 0 < states.sum() < states.size and (np.diff(states, axis=0) != 0).any()  # states change in the block
    np.testing.assert_array_equal(states, want_states)
    assert_close(rest, want, 1e-9, "observed states")
    straight = np.zeros((1, m.n))
    assert given.prepare(m)(straight, T[:1], r[:1], active[:1]) is None
    rest, _ = given.beyond(m, straight, T[:1], r[:1], active[:1])
    lam_ref, A_ref = pipeline.contact_estimate(m, contacts, straight, T[:1], r[:1])
    assert_close(rest, pipeline.residual_beyond(m, contacts, r[:1], A_ref, lam_ref, active[:1]), 1e-12, "straight")


def test_a_contact_on_the_root_link_takes_no_force(monkeypatch) -> None:
    """A contact on the root link (a trunk lying on the ground, the ground link of a closed chain) has no joint
    columns in A: the least-norm fit of the joint rows (numpy's least squares) gives it no force, so the whole
    residual is beyond it, and the observer's source never sees it down. The compiled fit declines such a set
    (A_j A_j^T singular); the observer answers without the pseudo-inverse, as that would."""
    rng = np.random.default_rng(5)
    m = twin("solo12").model
    contacts = pipeline.resolve_contacts(m, pipeline.PipelineConfig(
        base_link="base_link", contact_links=("base_link",), contact_types=("flat",)))
    assert contacts is not None
    N = 6
    q = rng.uniform(-1.0, 1.0, size=(N, m.n))
    T = np.stack([random_pose(rng) for _ in range(N)])
    r = rng.normal(size=(N, m.nv)) * 5
    A = core.constraint_jacobian(m, q, contacts.on(m), base_pose=T)
    assert A[..., :6].any() and not A[..., 6:].any()  # the base's rows only
    for b in range(N):
        np.testing.assert_array_equal(np.linalg.lstsq(A[b, :, 6:].T, r[b, 6:], rcond=None)[0], 0.0)
    active = np.ones((N, 1), dtype=bool)
    given = pipeline.ContactObserver(contacts, 20.0, 0.5, False)
    assert given.prepare(m)(q, T, r, active) is None  # declined: the observer answers itself
    lam_ref, A_ref = pipeline.contact_estimate(m, contacts, q, T, r)
    want = pipeline.residual_beyond(m, contacts, r, A_ref, lam_ref, active)
    assert_close(want, r, 0.0, "pseudo-inverse path")

    def forbidden(*args):
        raise AssertionError("the pseudo-inverse path ran")
    monkeypatch.setattr(pipeline.observed, "contact_estimate", forbidden)
    rest, states = given.beyond(m, q, T, r, active)
    np.testing.assert_array_equal(rest, r)
    np.testing.assert_array_equal(given.beyond_one(m, q[0], T[0], r[0], active[0]), r[0])
    rest, states = pipeline.ContactObserver(contacts, 1e-9, 0.5, True).beyond(m, q, T, r, None)
    np.testing.assert_array_equal(rest, r)
    assert not states.any()  # no force: never down, whatever the threshold
