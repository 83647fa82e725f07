"""The compiled constrained_rnea of one sample (constraints.fast) equals the reference path, single
and against a batch (the reference's), on the pipeline's cases; the compiled contact frames
(core.constraint_frames) equal Pinocchio's frame placements."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from robots import random_pose, random_state, twin

from liedyn_ros import core
from liedyn_ros.core.constraints import inverse

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
CASES = {
    "solo12 four feet": ("solo12", [core.Contact(f) for f in FEET]),
    "talos two soles": ("talos", [core.Contact("left_sole_link", "flat"), core.Contact("right_sole_link", "flat")]),
}


def _close(fast: np.ndarray, ref: np.ndarray, what: str) -> None:
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-10 * max(1.0, float(np.abs(ref).max())), err_msg=what)


def _compiled_only(monkeypatch: pytest.MonkeyPatch, *args, **kwargs):
    """constrained_rnea with the reference path made to fail: a silent fallback cannot pass."""
    with monkeypatch.context() as m:
        m.setattr(inverse, "setup", lambda *a, **k: pytest.fail("the compiled path fell back to the reference"))
        return core.constrained_rnea(*args, **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_compiled_constrained_rnea_equals_the_reference(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Single samples (every contact, one lifted) against fast=False, and a batch (with the pipeline's
    repeated state: the motion and rest at one q) against the compiled samples one by one."""
    robot, contacts = CASES[case]
    model = twin(robot).model
    rng = np.random.default_rng(3)
    k = len(contacts)
    for active in (np.ones(k, dtype=bool), np.arange(k) != 0):
        q, v, a = random_state(model, rng)
        T = random_pose(rng)
        fast = _compiled_only(monkeypatch, model, q, v, a, contacts, base_pose=T, active=active, tol=np.inf)
        ref = core.constrained_rnea(model, q, v, a, contacts, base_pose=T, active=active, tol=np.inf, fast=False)
        _close(fast[0], ref[0], f"tau, active {active}")
        _close(fast[1], ref[1], f"lam, active {active}")
        assert np.all(fast[0][:6] == 0.0)
    Q = np.stack([random_state(model, rng)[0] for _ in range(3)])
    Q[1] = Q[0]  # the kernel's repeated state
    V, Acc = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    P = np.stack([random_pose(rng) for _ in range(3)])
    P[1] = P[0]
    act = np.array([np.ones(k, dtype=bool), np.ones(k, dtype=bool), np.arange(k) != k - 1])
    V[1], Acc[1] = 0.0, 0.0
    ref = core.constrained_rnea(model, Q, V, Acc, contacts, base_pose=P, active=act, tol=np.inf)
    for b in range(3):
        fast = _compiled_only(monkeypatch, model, Q[b], V[b], Acc[b], contacts, base_pose=P[b], active=act[b],
                              tol=np.inf)
        _close(fast[0], ref[0][b], f"batch tau {b}")
        _close(fast[1], ref[1][b], f"batch lam {b}")


def test_compiled_constrained_rnea_leaves_the_errors_to_the_reference() -> None:
    """A state off the contacts and a base no force balances raise the reference's ValueError."""
    robot, contacts = CASES["solo12 four feet"]
    model = twin(robot).model
    rng = np.random.default_rng(4)
    q, v, a = random_state(model, rng)
    T = random_pose(rng)
    with pytest.raises(ValueError, match="violates"):
        core.constrained_rnea(model, q, v, a, contacts, base_pose=T)  # random v moves the feet
    one = np.array([True, False, False, False])  # one point foot cannot hold a random motion
    with pytest.raises(ValueError, match="balances"):
        core.constrained_rnea(model, q, v, a, contacts, base_pose=T, active=one, tol=np.inf)


@pytest.mark.parametrize("case", list(CASES))
def test_contact_frames_equal_pinocchio_frame_placements(case: str) -> None:
    robot, contacts = CASES[case]
    t = twin(robot)
    rng = np.random.default_rng(5)
    offset = np.eye(4)
    offset[:3, :3] = pin.rpy.rpyToMatrix(0.1, -0.2, 0.3)
    offset[:3, 3] = (0.01, -0.02, 0.03)
    contacts = contacts[:-1] + [core.Contact(contacts[-1].link, contacts[-1].kind, offset=offset)]
    Q = np.stack([random_state(t.model, rng)[0] for _ in range(2)])
    P = np.stack([random_pose(rng) for _ in range(2)])
    frames = core.constraint_frames(t.model, Q, contacts, base_pose=P)
    assert frames.shape == (2, len(contacts), 4, 4)
    _close(core.constraint_frames(t.model, Q[1], contacts, base_pose=P[1]), frames[1], "single sample")
    data = t.pin_model.createData()
    for b in range(2):
        q_pin, _ = t.to_pin(Q[b], P[b])
        pin.framesForwardKinematics(t.pin_model, data, q_pin)
        for i, c in enumerate(contacts):
            expected = data.oMf[t.pin_model.getFrameId(c.link)].homogeneous @ c.offset
            np.testing.assert_allclose(frames[b, i], expected, atol=1e-12, err_msg=f"{c.link}, sample {b}")
