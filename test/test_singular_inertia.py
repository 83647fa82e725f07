"""Singular articulated inertia (issue 20): one rule, the same verdict on every path.

The models are built here after bullet3's pybullet_data (cartpole.urdf: a massless slide bar, a
cart on a prismatic joint and a pole; a pole and a 5-link pendulum on a massless base) and after
Val's forearm (massless links between the wrist joints). Floating, each has a massless base whose
joints repeat its own motion: M(q) is singular at every state. Fixed, the wrist is singular only
where its two roll axes align (pitch = 0).

What is singular is decided by a physical reference, not by our rule: M(q) from Pinocchio's crba
with its smallest eigenvalue below SINGULAR_RTOL times the size of M. Every path must then refuse
(SingularInertiaError), and on regular models near that boundary every path must answer, equal to
Pinocchio's aba and inverting rnea.
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liedyn_ros import core
from liedyn_ros.core import reference
from liedyn_ros.core.singular import SINGULAR_RTOL
from robots import Twin, assert_close, pin_aba, pin_mass_matrix, pin_rnea, twin_from_xml

LIMIT = '<limit lower="-15" upper="15" effort="1000" velocity="5"/>'


def inertial(mass: float, com: str = "0 0 0", ixx: float = 0.0, iyy: float | None = None,
             izz: float | None = None) -> str:
    iyy, izz = ixx if iyy is None else iyy, ixx if izz is None else izz
    return (f'<inertial><origin xyz="{com}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx!r}" ixy="0" ixz="0" iyy="{iyy!r}" iyz="0" izz="{izz!r}"/></inertial>')


def joint(name: str, kind: str, parent: str, child: str, axis: str, origin: str = "0 0 0") -> str:
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{origin}"/><axis xyz="{axis}"/>{LIMIT}</joint>')


def robot(name: str, *parts: str) -> str:
    return f'<robot name="{name}">{"".join(parts)}</robot>'


# bullet3's cartpole.urdf, its geometry dropped: the slide bar has no mass but a rotational inertia.
CARTPOLE = robot("cartpole", f'<link name="slideBar">{inertial(0.0, ixx=1.0)}</link>',
                 f'<link name="cart">{inertial(1.0, ixx=1.0)}</link>',
                 joint("slider_to_cart", "prismatic", "slideBar", "cart", "1 0 0"),
                 f'<link name="pole">{inertial(10.0, "0 0 0.5", ixx=1.0)}</link>',
                 joint("cart_to_pole", "continuous", "cart", "pole", "0 1 0"))


def pendulum(links: int, base_inertia: float = 0.0) -> str:
    """A chain of 1 m links swinging about y on a massless base (bullet3's pole: one link; pendulum5: five)."""
    parts = [f'<link name="base">{inertial(0.0, ixx=base_inertia)}</link>']
    for k in range(links):
        parts.append(f'<link name="link{k}">{inertial(1.0, "0 0 0.5", ixx=0.1)}</link>')
        parts.append(joint(f"joint{k}", "continuous", f"link{k - 1}" if k else "base", f"link{k}", "0 1 0",
                           f"0 0 {1 if k else 0}"))
    return robot(f"pendulum{links}", *parts)


HAND = f'<link name="hand">{inertial(1.0, "0 0 0.1", ixx=0.01, izz=0.002)}</link>'


def wrist() -> str:
    """A shoulder, then roll (z), pitch (y), roll (z) through massless links to a hand 0.1 m along z:
    at pitch = 0 the two rolls turn the hand about one axis (Val's forearm and wrist)."""
    return robot("wrist", f'<link name="upper">{inertial(5.0, ixx=0.1)}</link>',
                 f'<link name="arm">{inertial(2.0, "0 0 0.2", ixx=0.05)}</link>',
                 joint("shoulder", "revolute", "upper", "arm", "0 1 0"),
                 f'<link name="forearm">{inertial(0.0)}</link>',
                 joint("forearm_roll", "revolute", "arm", "forearm", "0 0 1", "0 0 0.4"),
                 f'<link name="wrist">{inertial(0.0)}</link>',
                 joint("wrist_pitch", "revolute", "forearm", "wrist", "0 1 0", "0 0 0.3"),
                 HAND, joint("wrist_roll", "revolute", "wrist", "hand", "0 0 1"))


def forearm() -> str:
    """The massless forearm as the root (loaded as floating): its pitch joint repeats its own rotation."""
    return robot("forearm", f'<link name="forearm">{inertial(0.0)}</link>',
                 f'<link name="wrist">{inertial(0.0)}</link>',
                 joint("wrist_pitch", "revolute", "forearm", "wrist", "0 1 0", "0 0 0.3"),
                 HAND, joint("wrist_roll", "revolute", "wrist", "hand", "0 0 1"))


SINGULAR = {  # name -> (URDF, floating)
    "cartpole": (CARTPOLE, True),
    "pole": (pendulum(1), True),
    "pendulum5": (pendulum(5), True),
    "forearm": (forearm(), True),
}
PITCH = 2  # index of wrist_pitch in the wrist's q


def twin(xml: str, floating: bool) -> Twin:
    with warnings.catch_warnings():  # massless links are legal URDF: the loader's warnings are beside the point
        warnings.simplefilter("ignore")
        return twin_from_xml(xml, floating)


TWINS = {name: twin(*spec) for name, spec in SINGULAR.items()}
WRIST = twin(wrist(), False)


def size_of_M(t: Twin) -> float:
    """The rule's scale, from Pinocchio: the largest diagonal entry of M at q = 0."""
    return float(np.diagonal(pin_mass_matrix(t, np.zeros(t.model.n), np.eye(4) if t.model.floating_base else None))
                 .max())


def smallest_eigenvalue(t: Twin, q: np.ndarray, T: np.ndarray | None) -> float:
    return float(np.linalg.eigvalsh(pin_mass_matrix(t, q, T))[0])


# ------------------------------------------------------------------------------ every path


def paths(model: core.Model) -> dict[str, Callable]:
    """Each way of asking for forward dynamics: path name -> f(q, v, tau, T) returning arrays."""
    nv = model.nv
    free = np.zeros(nv, dtype=bool)
    partial = free.copy()
    partial[0] = model.floating_base  # a prescribed base rotation about x: the dense path (M_ff)
    contact = [core.Contact(model.body_names[-1])]
    out = {
        "aba": lambda q, v, tau, T: core.aba(model, q, v, tau, base_pose=T),
        "aba batch": lambda q, v, tau, T: core.aba(model, q[None], v[None], tau[None],
                                                   base_pose=None if T is None else T[None]),
        "aba reference": lambda q, v, tau, T: reference.aba(model, q, v, tau, base_pose=T),
        "hybrid": lambda q, v, tau, T: core.hybrid(model, q, v, tau, free, base_pose=T),
        "hybrid reference": lambda q, v, tau, T: reference.hybrid(model, q, v, tau, free, base_pose=T),
        "aba_derivatives": lambda q, v, tau, T: core.aba_derivatives(model, q, v, tau, base_pose=T),
        "aba_derivatives batch": lambda q, v, tau, T: core.aba_derivatives(
            model, q[None], v[None], tau[None], base_pose=None if T is None else T[None]),
        "aba_derivatives reference": lambda q, v, tau, T: core.aba_derivatives(
            model, q, v, tau, fast=False, base_pose=T),
        "hybrid_derivatives": lambda q, v, tau, T: core.hybrid_derivatives(model, q, v, tau, free, base_pose=T),
        "aba_time_derivatives": lambda q, v, tau, T: core.aba_time_derivatives(
            model, q, v, [tau, tau], base_pose=T),
        "aba_time_derivatives reference": lambda q, v, tau, T: core.aba_time_derivatives(
            model, q, v, [tau, tau], fast=False, base_pose=T),
        "constrained_aba": lambda q, v, tau, T: core.constrained_aba(model, q, 0 * v, tau, contact, base_pose=T),
        "constrained_aba reference": lambda q, v, tau, T: core.constrained_aba(
            model, q, 0 * v, tau, contact, fast=False, base_pose=T),
    }
    if model.floating_base:
        out["hybrid, base partly given"] = lambda q, v, tau, T: core.hybrid(model, q, v, tau, partial, base_pose=T)
        out["hybrid reference, base partly given"] = lambda q, v, tau, T: reference.hybrid(
            model, q, v, tau, partial, base_pose=T)
    return out


def verdicts(model: core.Model, q, v, tau, T) -> dict[str, str]:
    """Path -> 'refused', or the largest |entry| returned, to show what came back instead."""
    out = {}
    for name, f in paths(model).items():
        try:
            result = f(q, v, tau, T)
        except core.SingularInertiaError:
            out[name] = "refused"
        else:
            arrays = result if isinstance(result, (tuple, list)) else [result]
            out[name] = f"returned max |x| = {max(float(np.abs(x).max(initial=0.0)) for x in arrays):.3g}"
    return out


def answered(got: dict[str, str]) -> dict[str, str]:
    """The paths that returned a result, with its size."""
    return {name: x for name, x in got.items() if x != "refused"}


def pose(quat: list[float], position: list[float]) -> np.ndarray:
    x = np.asarray(quat) / np.linalg.norm(quat)
    T = np.eye(4)
    T[:3, :3] = pin.Quaternion(x[3], *x[:3]).toRotationMatrix()
    T[:3, 3] = position
    return T


finite = st.floats(-3.0, 3.0, allow_nan=False)
# |w| >= 0.1 of the norm: rotations up to 168 degrees (to_pinocchio loses precision within 1e-6 rad of 180)
quaternions = st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(
    lambda x: np.linalg.norm(x) > 0.1 and abs(x[3]) >= 0.1 * np.linalg.norm(x))


@st.composite
def states(draw, model: core.Model) -> tuple:
    q = np.array(draw(st.lists(finite, min_size=model.n, max_size=model.n)))
    v = np.array(draw(st.lists(finite, min_size=model.nv, max_size=model.nv)))
    tau = np.array(draw(st.lists(finite, min_size=model.nv, max_size=model.nv)))
    T = pose(draw(quaternions), draw(st.lists(finite, min_size=3, max_size=3))) if model.floating_base else None
    return q, v, tau, T


@pytest.mark.parametrize("name", SINGULAR)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_massless_floating_base_is_refused_on_every_path(name: str, data) -> None:
    t = TWINS[name]
    q, v, tau, T = data.draw(states(t.model))
    assert smallest_eigenvalue(t, q, T) <= 1e-14 * size_of_M(t)  # singular by Pinocchio's M
    assert answered(verdicts(t.model, q, v, tau, T)) == {}


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_aligned_wrist_is_refused_on_every_path(data) -> None:
    """Fixed base, pitch = 0: aba refused before, but aba_derivatives gave M^-1 of 1e17."""
    q, v, tau, _ = data.draw(states(WRIST.model))
    q[PITCH] = 0.0
    assert smallest_eigenvalue(WRIST, q, None) <= 1e-14 * size_of_M(WRIST)
    assert answered(verdicts(WRIST.model, q, v, tau, None)) == {}


# ------------------------------------------------------------------------- near the boundary


def accepted_everywhere(t: Twin, q, v, tau, T) -> None:
    """Every path answers; aba equals Pinocchio's and rnea(aba) gives tau back; M^-1 inverts M."""
    got = verdicts(t.model, q, v, tau, T)
    assert answered(got) == got
    want = pin_aba(t, q, v, tau, T)
    for name in ("aba", "aba reference", "hybrid", "hybrid reference"):
        a = paths(t.model)[name](q, v, tau, T)
        a = a[1] if isinstance(a, tuple) else a
        assert_close(a, want, rel=1e-6, what=name)
        assert_close(pin_rnea(t, q, v, a, T), tau, rel=1e-6, what=f"rnea({name})")
    M = pin_mass_matrix(t, q, T)
    for fast in (True, False):
        M_inv = core.aba_derivatives(t.model, q, v, tau, base_pose=T, fast=fast)[2]
        assert_close(M_inv @ M, np.eye(t.model.nv), rel=1e-6, what=f"M^-1 M (fast={fast})")


@settings(max_examples=12, deadline=None)
@given(data=st.data(), pitch=st.floats(3e-3, 0.5), sign=st.sampled_from([-1.0, 1.0]))
def test_nearly_aligned_wrist_matches_pinocchio(data, pitch: float, sign: float) -> None:
    q, v, tau, _ = data.draw(states(WRIST.model))
    q[PITCH] = sign * pitch
    assert smallest_eigenvalue(WRIST, q, None) > 1e3 * SINGULAR_RTOL * size_of_M(WRIST)
    accepted_everywhere(WRIST, q, v, tau, None)


@settings(max_examples=12, deadline=None)
@given(data=st.data(), inertia=st.floats(1e-6, 1e-2))
def test_light_floating_base_matches_pinocchio(data, inertia: float) -> None:
    """The pendulum on a base of small but real rotational inertia: regular, however light."""
    t = twin(pendulum(5, base_inertia=inertia), True)
    q, v, tau, T = data.draw(states(t.model))
    accepted_everywhere(t, q, v, tau, T)


def test_prescribing_the_repeated_joint_makes_the_cartpole_regular() -> None:
    """With the slider's acceleration given, the cart no longer slides under the massless bar: the
    free part of M is regular and hybrid answers on both paths, consistent with rnea."""
    t = TWINS["cartpole"]
    rng = np.random.default_rng(7)
    q, v, u, T = rng.uniform(-1, 1, t.model.n), rng.normal(size=8), rng.normal(size=8), np.eye(4)
    mask = np.zeros(8, dtype=bool)
    mask[6] = True  # slider_to_cart
    for hybrid in (core.hybrid, reference.hybrid):
        tau, a = hybrid(t.model, q, v, u, mask, base_pose=T)
        assert_close(a[mask], u[mask], what="prescribed a")
        assert_close(tau[~mask], u[~mask], what="given tau")
        assert_close(pin_rnea(t, q, v, a, T), tau, rel=1e-9, what="rnea(hybrid)")


# ------------------------------------------------------------------------------- the rule


def two_pivot_models(ratio: float) -> dict[str, Twin]:
    """Models whose smallest pivot is ratio * SINGULAR_RTOL * scale by construction.

    'joint': a disk spinning about its own axis at the end of an arm (its pivot is its izz);
    'base': a floating base with the pendulum's first joint at its origin (the base's pivot about y
    is its own iyy, since the joint moves everything else about y).
    """
    out = {}
    arm = [f'<link name="upper">{inertial(5.0, ixx=0.1)}</link>',
           f'<link name="arm">{inertial(2.0, "0 0 0.2", ixx=0.05)}</link>',
           joint("shoulder", "revolute", "upper", "arm", "0 1 0")]
    probe = twin(robot("arm", *arm, f'<link name="disk">{inertial(0.0)}</link>',
                              joint("spin", "continuous", "arm", "disk", "0 0 1", "0 0 0.4")), False)
    small = ratio * SINGULAR_RTOL * size_of_M(probe)
    out["joint"] = twin(robot("arm", *arm, f'<link name="disk">{inertial(0.0, ixx=0.0, izz=small)}</link>',
                                      joint("spin", "continuous", "arm", "disk", "0 0 1", "0 0 0.4")), False)
    base = pendulum(1).replace(inertial(0.0, ixx=0.0), inertial(1.0, ixx=1.0, iyy=0.0))
    scale = size_of_M(twin(base, True))
    out["base"] = twin(base.replace('iyy="0.0"', f'iyy="{ratio * SINGULAR_RTOL * scale!r}"'), True)
    return out


@pytest.mark.parametrize("kind", ["joint", "base"])
def test_the_verdict_turns_at_the_documented_tolerance_on_every_path(kind: str) -> None:
    """A pivot at half the tolerance is refused everywhere, at twice the tolerance accepted everywhere."""
    rng = np.random.default_rng(11)
    for ratio, refused in ((0.5, True), (2.0, False)):
        t = two_pivot_models(ratio)[kind]
        q, v, tau = rng.uniform(-1, 1, t.model.n), rng.normal(size=t.model.nv), rng.normal(size=t.model.nv)
        T = np.eye(4) if t.model.floating_base else None
        got = verdicts(t.model, q, v, tau, T)
        assert answered(got) == ({} if refused else got), ratio


# ------------------------------------------------------------------------------- batches


def wrist_batch(shape: tuple[int, ...], singular: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    q = rng.uniform(-1, 1, shape + (WRIST.model.n,))
    q[..., PITCH] = rng.uniform(0.2, 1.0, shape)
    q[singular + (PITCH,)] = 0.0
    return q, rng.normal(size=shape + (WRIST.model.nv,)), rng.normal(size=shape + (WRIST.model.nv,))


@pytest.mark.parametrize("shape, singular, label", [((5,), (3,), "sample 3"), ((2, 3), (1, 0), r"sample \(1, 0\)")])
def test_a_batch_raises_naming_its_first_singular_sample(shape, singular, label) -> None:
    """One singular sample fails the whole batch (no partial result, as for bad input), on every
    path, and the error says which sample, in the caller's batch shape."""
    q, v, tau = wrist_batch(shape, singular)
    model = WRIST.model
    calls = {
        "aba": lambda: core.aba(model, q, v, tau),
        "aba reference": lambda: reference.aba(model, q, v, tau),
        "hybrid": lambda: core.hybrid(model, q, v, tau, np.zeros(model.nv, dtype=bool)),
        "aba_derivatives": lambda: core.aba_derivatives(model, q, v, tau),
        "aba_derivatives reference": lambda: core.aba_derivatives(model, q, v, tau, fast=False),
        "aba_time_derivatives": lambda: core.aba_time_derivatives(model, q, v, [tau]),
        "aba_time_derivatives reference": lambda: core.aba_time_derivatives(model, q, v, [tau], fast=False),
    }
    for name, call in calls.items():
        with pytest.raises(core.SingularInertiaError, match=f"joint 'forearm_roll' at {label} is singular"):
            call()
    regular = q.copy()
    regular[singular + (PITCH,)] = 0.5
    assert np.all(np.isfinite(core.aba(model, regular, v, tau)))
