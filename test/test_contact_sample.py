"""The node's contact sample in one compiled call (core.constraints.fast_sample.contact_sample_one): its
verdict on the outputs equals the readable checks it replaces (pipeline.stream._finite, the bound check of
DynamicsPipeline._out_of_range, every contact pushing inside its friction cone), on states that overflow,
exceed their bounds or pull a foot; and a pipeline that checks in Python publishes and skips the same.
(The terms themselves are constrained_terms_one's, tested against Pinocchio in test_constraints_terms.)"""
from __future__ import annotations

import math
from typing import Any

import contact_sim  # test/ helper
import numpy as np
import pytest
from test_pipeline import odometry, ros_joint_state

from liedyn_ros import core
from liedyn_ros.pipeline import DynamicsPipeline, PipelineConfig, SkipReason
from liedyn_ros.pipeline.config import ContactSource
from liedyn_ros.pipeline.contacts import resolve_contacts
from liedyn_ros.pipeline.payload import Dynamics
from liedyn_ros.pipeline.routes import ContactRoute
from liedyn_ros.robot_data import robots_dir

URDF = robots_dir() / "solo_description/robots/solo12.urdf"
FEET = tuple(contact_sim.FEET)


@pytest.fixture(scope="module")
def solo() -> Any:
    return core.load_urdf(str(URDF), floating_base=True)


def states(model: Any, rng: np.random.Generator, count: int) -> list[tuple[np.ndarray, ...]]:
    """(q, v, a, effort, pose) of random states: most with accelerations that make feet pull or slip, every
    fourth standing still on nearly straight legs, every few an overflowing velocity or fast joints (torques
    far beyond a bound)."""
    out = []
    for i in range(count):
        q = rng.uniform(-1.0, 1.0, model.n)
        v = rng.normal(scale=[1.0, 5.0, 30.0][i % 3], size=model.nv)
        if i % 7 == 3:
            v[6 + i % model.n] = 1e155  # finite, its square overflows
        a = rng.normal(scale=20.0, size=model.nv)
        if i % 4 == 1:  # standing on nearly straight legs: every foot pushes inside its cone
            q, v, a = rng.normal(scale=0.05, size=model.n), np.zeros(model.nv), np.zeros(model.nv)
        pose = np.eye(4)
        pose[:3, 3] = rng.normal(size=3)
        out.append((q, v, a, rng.normal(scale=5.0, size=model.n), pose))
    return out


def readable_verdict(route: ContactRoute, outputs: Any, bound: np.ndarray, terms: np.ndarray) -> tuple[bool, ...]:
    """(finite, in range, inside the cones) as the node's Python made them before the kernel did; terms: the
    plain TermsKernel's output of the sample (its contact forces along and across the ground normal)."""
    total = 0.0
    for name in ("tau_ff", "tau_g", "qdd_pred", "base_wrench", "base_acc_pred", "contact_wrench", "tau_free"):
        x = getattr(outputs, name)
        if x is not None:
            total += sum(x.ravel().tolist())
    in_range = not any((np.abs(tau) > bound).any() for tau in (outputs.tau_ff, outputs.tau_g, outputs.tau_free))
    layout, mu = route.kernel.layout, route.contacts.mu
    normal, tangential = terms[layout.normal], terms[layout.tangential]
    inside = bool(((normal > 0.0) & (tangential <= mu * normal)).all())
    return math.isfinite(total), in_range, inside


@pytest.mark.parametrize("feet", [FEET, (FEET[0], FEET[3])])
def test_verdict_equals_the_readable_checks(solo, feet) -> None:
    contacts = resolve_contacts(solo, PipelineConfig(base_link="base_link", contact_links=feet))
    route = ContactRoute(Dynamics(solo, None, None), contacts)
    rng = np.random.default_rng(4)
    seen = {"finite": 0, "overflow": 0, "in range": 0, "beyond": 0, "inside": 0, "outside": 0}
    active = np.ones(len(feet), dtype=bool)
    for q, v, a, effort, pose in states(solo, rng, 90):
        bound = rng.uniform(0.5, 200.0, solo.n)
        route.hold_to(bound)
        outputs = route.outputs(q, v, a, effort, pose, active)
        assert route.verdict is not None, "the compiled sample declined"
        terms = np.empty(route.kernel.size)
        assert route.kernel(q, v, a, np.concatenate((np.zeros(6), effort)), pose, active, terms)
        finite, in_range, inside = readable_verdict(route, outputs, bound, terms)
        assert route.verdict == (finite, in_range)
        # inside the cones: pulling and slipping are the shared all-clear flags, without check_forces
        assert (outputs.checks.pulling is contacts.clear and outputs.checks.slipping is contacts.clear) == inside
        seen["finite" if finite else "overflow"] += 1
        seen["in range" if in_range else "beyond"] += 1
        seen["inside" if inside else "outside"] += 1
    assert min(seen.values()) > 0, seen  # every verdict both ways


def test_friction_leaves_the_checks_to_the_pipeline(solo) -> None:
    contacts = resolve_contacts(solo, PipelineConfig(base_link="base_link", contact_links=FEET))
    friction = core.Friction(np.full(solo.n, 0.1), np.full(solo.n, 0.02))
    route = ContactRoute(Dynamics(solo, friction, None), contacts)
    q, v, a, effort, pose = states(solo, np.random.default_rng(1), 1)[0]
    route.outputs(q, v, a, effort, pose, np.ones(4, dtype=bool))
    assert route.verdict is None  # tau_ff and tau_free get the friction torque after the kernel


def test_the_pipeline_publishes_and_skips_as_with_its_python_checks(solo, monkeypatch) -> None:
    """One stream (a push, overflowing and fast samples, feet lifting) through two pipelines, one with the
    kernel's verdicts and one that ignores them: the same outputs, skips, violations and collisions."""
    config = PipelineConfig(base_link="base_link", contact_links=FEET, contact_source=ContactSource.TOPIC,
                            effort_limit_factor=1.0, collision_threshold=(8.0,))
    rng = np.random.default_rng(2)
    q0 = np.concatenate(([0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0], rng.uniform(-0.5, 0.5, solo.n)))
    samples = []
    for i in range(120):
        v = rng.normal(scale=0.5, size=solo.n)
        if i % 11 == 5:
            v[i % solo.n] = 1e155
        if i % 13 == 6:
            v *= 5000.0  # far beyond the URDF's 1000 N m limits
        tau = rng.normal(scale=[0.5, 20.0][(i // 30) % 2], size=solo.n)
        samples.append((10**9 + i * 10**6, v, tau, np.array([1, 1, (i // 20) % 2, 1], dtype=np.uint8)))

    def run(python_checks: bool) -> tuple[list[Any], dict[str, Any]]:
        pipe = DynamicsPipeline(solo, config)
        if python_checks:
            original = ContactRoute.sample

            def sample(self: ContactRoute, *args: Any) -> Any:
                out = original(self, *args)
                self.verdict = None
                return out
            monkeypatch.setattr(ContactRoute, "sample", sample)
        published = []
        for stamp, v, tau, flags in samples:
            pipe.on_odometry(odometry("rosbags", stamp, q0[:3], q0[3:7], np.zeros(6), "base_link"))
            pipe.on_contact_state(flags, stamp)
            out = pipe.on_joint_state(ros_joint_state(stamp, list(solo.joint_names), q0[7:], v, tau))
            published.append(None if out is None else (out.outputs, out.external_torque, out.collision))
        monkeypatch.undo()
        return published, {k: v for k, v in vars(pipe.stats).items() if not k.endswith("_s")}

    kernel, python = run(False), run(True)
    assert kernel[1] == python[1]
    skipped = kernel[1]["skipped"]
    assert skipped.get(SkipReason.NON_FINITE_OUTPUT) and skipped.get(SkipReason.EFFORT_OUT_OF_RANGE)
    assert kernel[1]["contact_pulling"] + kernel[1]["contact_slipping"] > 0 and kernel[1]["collisions"] > 0
    for a, b in zip(kernel[0], python[0]):
        assert (a is None) == (b is None)
        if a is not None:
            for x, y in zip(a[0], b[0]):
                if isinstance(x, np.ndarray):
                    assert x.tobytes() == y.tobytes()
            assert a[1].tobytes() == b[1].tobytes() and a[2] == b[2]


def test_a_verdict_belongs_to_the_latest_outputs_only(solo) -> None:
    """pipeline.routes.Route: after a checked sample, outputs the kernel did not check (flight, the reference
    state) leave no verdict behind; the observer's route answers its inner route's; the open tree checks none."""
    from liedyn_ros.pipeline.observed import ContactObserver
    from liedyn_ros.pipeline.routes import FreeRoute, ObservedRoute

    contacts = resolve_contacts(solo, PipelineConfig(base_link="base_link", contact_links=FEET))
    route = ContactRoute(Dynamics(solo, None, None), contacts)
    observed = ObservedRoute(route, ContactObserver(contacts, 1.0, 0.5, True))
    observed.hold_to(np.full(solo.n, 0.5))  # the inner route's bounds: the fast joints below exceed them
    q, v, a, effort, pose = states(solo, np.random.default_rng(3), 1)[0]
    down, up = np.ones(4, dtype=bool), np.zeros(4, dtype=bool)
    v[6:] = 50.0
    for call, expected in ((lambda: observed.outputs(q, v, a, effort, pose, down), (True, False)),
                           (lambda: route.outputs(q, v, a, effort, pose, up), None),  # flight: the general path
                           (lambda: route.outputs(q, v, a, effort, pose, down), (True, False)),
                           (lambda: route.outputs(q, v, a, effort, pose, down, ff_state=(q, v)), None)):
        call()
        assert route.verdict == observed.verdict == expected
    free = FreeRoute(Dynamics(solo, None, None))
    free.hold_to(np.full(solo.n, 0.5))
    free.outputs(q, v, a, effort, pose)
    assert free.verdict is None
