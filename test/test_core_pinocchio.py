"""The public algorithms of liedyn_ros.core against Pinocchio (independent), to 1e-10 relative.

Fixed bases: the Panda (with its mimic finger, and with the fingers welded), the UR5 and random
URDF trees. Floating bases (Pinocchio's JointModelFreeFlyer): Solo12, Talos (reduced) and Talos
with its mimic joints (talos_full_v2), at random base poses and twists. Pinocchio treats mimic
joints as independent joints; our vectors map to its through the linear map E of `Twin.to_pin`
(v_pin = E v, tau = E^T tau_pin).
"""
from __future__ import annotations

import numpy as np
import pytest

from liedyn_ros import core
from liedyn_ros.core import dynamics
from robots import (FIXED_CASES, FLOATING_CASES, assert_close, case, pin_aba, pin_coriolis, pin_gravity,
                    pin_mass_matrix, pin_rnea, pose_arg, random_state)

ALL_CASES = FIXED_CASES + FLOATING_CASES
SAMPLES = 2


def samples(name: str, seed: int):
    """SAMPLES random (model twin, q, v, a, base_pose) of a case."""
    t = case(name)
    rng = np.random.default_rng(seed)
    for _ in range(SAMPLES):
        yield (t, *random_state(t.model, rng), pose_arg(t.model, rng))


def leaf_and_merged_links(model: core.Model) -> list[str]:
    """Two links to push on: the last body's link and a link merged by a fixed joint (if any)."""
    merged = [link for link, (b, T) in model.link_frames.items()
              if link not in model.body_names and link != model.root_link]
    return list(model.body_names[-1:]) + merged[-1:]


@pytest.mark.parametrize("name", ALL_CASES)
def test_rnea(name: str) -> None:
    for t, q, v, a, T in samples(name, 1):
        assert_close(core.rnea(t.model, q, v, a, base_pose=T), pin_rnea(t, q, v, a, T), what=name)


@pytest.mark.parametrize("name", ALL_CASES)
def test_rnea_with_external_wrenches(name: str) -> None:
    """rnea(f_ext) = rnea - sum J_link^T f, with Pinocchio's LOCAL frame Jacobians of the links."""
    rng = np.random.default_rng(2)
    for t, q, v, a, T in samples(name, 2):
        f_ext = {link: rng.normal(size=6) * 10 for link in leaf_and_merged_links(t.model)}
        got = core.rnea(t.model, q, v, a, base_pose=T, f_ext=f_ext)
        assert_close(got, pin_rnea(t, q, v, a, T, f_ext), what=f"{name} {sorted(f_ext)}")


@pytest.mark.parametrize("name", ALL_CASES)
def test_a_wrench_on_one_link(name: str, monkeypatch) -> None:
    """f_ext on one link, every link in turn (the root link of a floating base too): rnea equals Pinocchio's
    rnea - J^T f; aba of that tau with the same wrench gives a back, and hybrid with everything prescribed
    gives tau. The general path is made to fail, so the values come from the one-link kernels."""
    def refuse(*args, **kwargs):
        raise AssertionError("not the one-link kernel")

    t = case(name)
    rng = np.random.default_rng(10)
    q, v, a = random_state(t.model, rng)
    T = pose_arg(t.model, rng)
    everything = np.ones(t.model.nv, bool)
    monkeypatch.setattr(dynamics, "prepare", refuse)
    monkeypatch.setattr(dynamics, "_sample_wrenches", refuse)
    for link in t.model.link_frames:
        f_ext = {link: rng.normal(size=6) * 10}
        tau = pin_rnea(t, q, v, a, T, f_ext)
        assert_close(core.rnea(t.model, q, v, a, base_pose=T, f_ext=f_ext), tau, what=f"{name} rnea {link}")
        assert_close(core.aba(t.model, q, v, tau, base_pose=T, f_ext=f_ext), a, rel=1e-8, what=f"{name} aba {link}")
        assert_close(core.hybrid(t.model, q, v, a, everything, base_pose=T, f_ext=f_ext)[0], tau,
                     what=f"{name} hybrid {link}")


@pytest.mark.parametrize("name", ALL_CASES)
def test_gravity(name: str) -> None:
    for t, q, _, _, T in samples(name, 3):
        assert_close(core.gravity(t.model, q, base_pose=T), pin_gravity(t, q, T), what=name)


@pytest.mark.parametrize("name", ALL_CASES)
def test_mass_matrix(name: str) -> None:
    for t, q, _, _, T in samples(name, 4):
        assert_close(core.mass_matrix(t.model, q, base_pose=T), pin_mass_matrix(t, q, T), what=name)


@pytest.mark.parametrize("name", ALL_CASES)
def test_aba(name: str) -> None:
    """Pinocchio's aba; for mimic models (Panda, Talos full) Pinocchio's M a = tau - b."""
    rng = np.random.default_rng(5)
    for t, q, v, _, T in samples(name, 5):
        tau = rng.normal(size=t.model.nv) * 5
        assert_close(core.aba(t.model, q, v, tau, base_pose=T), pin_aba(t, q, v, tau, T), rel=1e-9, what=name)


@pytest.mark.parametrize("name", ALL_CASES)
def test_coriolis_times_velocity(name: str) -> None:
    """C(q, v) v equals Pinocchio's C_pin v_pin mapped back (valid for every model)."""
    for t, q, v, _, T in samples(name, 6):
        got = core.coriolis_matrix(t.model, q, v, base_pose=T) @ v
        assert_close(got, pin_coriolis(t, q, v, T) @ v, what=name)


@pytest.mark.parametrize("name", ["ur5", "tree0", "tree1", "tree2", "panda_arm"])
def test_coriolis_matrix_equals_pinocchio(name: str) -> None:
    """Fixed bases without mimic joints: the whole matrix C equals computeCoriolisMatrix.

    Pinocchio's C is the one of the Christoffel symbols of M (unique), so this also pins down
    which of the many skew-making factorizations the public C is.
    """
    for t, q, v, _, T in samples(name, 7):
        assert_close(core.coriolis_matrix(t.model, q, v), pin_coriolis(t, q, v), what=name)


@pytest.mark.parametrize("name", ["panda", "ur5", "tree1", "solo12", "talos_mimic"])
def test_batched_inputs(name: str) -> None:
    """A batch of 3 samples (base poses batched too) gives the per-sample Pinocchio results."""
    t = case(name)
    rng = np.random.default_rng(8)
    states = [random_state(t.model, rng) for _ in range(3)]
    q, v, a = (np.array(x) for x in zip(*states))
    T = np.array([pose_arg(t.model, rng) for _ in range(3)]) if t.model.floating_base else None
    m = t.model
    outs = {
        "rnea": core.rnea(m, q, v, a, base_pose=T),
        "aba": core.aba(m, q, v, a, base_pose=T),
        "gravity": core.gravity(m, q, base_pose=T),
        "mass_matrix": core.mass_matrix(m, q, base_pose=T),
        "C v": np.einsum("bij,bj->bi", core.coriolis_matrix(m, q, v, base_pose=T), v),
    }
    for k in range(3):
        Tk = None if T is None else T[k]
        want = {
            "rnea": pin_rnea(t, q[k], v[k], a[k], Tk),
            "aba": pin_aba(t, q[k], v[k], a[k], Tk),
            "gravity": pin_gravity(t, q[k], Tk),
            "mass_matrix": pin_mass_matrix(t, q[k], Tk),
            "C v": pin_coriolis(t, q[k], v[k], Tk) @ v[k],
        }
        for key, value in want.items():
            assert_close(outs[key][k], value, rel=1e-9, what=f"{name} {key} sample {k}")


@pytest.mark.parametrize("name", ["panda", "talos"])
def test_threaded_batch_equals_pinocchio(name: str, monkeypatch) -> None:
    """A batch spread over two threads (fast.threads, as on the benchmark's two cores): every sample's aba,
    rnea and rnea with a wrench on one link (per sample) equal Pinocchio's."""
    import numba

    from liedyn_ros.core.fast import threads

    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    monkeypatch.setattr(threads, "_pool", None)
    t = case(name)
    rng = np.random.default_rng(11)
    B = 2 * threads.SAMPLES_PER_THREAD + 5
    q, v, a = (np.array(x) for x in zip(*[random_state(t.model, rng) for _ in range(B)]))
    T = np.array([pose_arg(t.model, rng) for _ in range(B)]) if t.model.floating_base else None
    tau = rng.normal(size=(B, t.model.nv)) * 5
    link = t.model.body_names[-1]
    w = rng.normal(size=(B, 6)) * 10
    got_a = core.aba(t.model, q, v, tau, base_pose=T)
    got_tau = core.rnea(t.model, q, v, a, base_pose=T)
    got_wrench = core.rnea(t.model, q, v, a, base_pose=T, f_ext={link: w})
    assert threads._pool is not None  # the batch was in fact handed to the pool
    for k in range(B):
        Tk = None if T is None else T[k]
        assert_close(got_a[k], pin_aba(t, q[k], v[k], tau[k], Tk), rel=1e-9, what=f"{name} aba sample {k}")
        assert_close(got_tau[k], pin_rnea(t, q[k], v[k], a[k], Tk), what=f"{name} rnea sample {k}")
        assert_close(got_wrench[k], pin_rnea(t, q[k], v[k], a[k], Tk, {link: w[k]}), what=f"{name} f_ext {k}")


def test_leading_batch_dimensions_are_kept() -> None:
    """q of shape (2, 3, n) gives (2, 3, n) torques and (2, 3, n, n) mass matrices, each sample right."""
    t = case("ur5")
    rng = np.random.default_rng(9)
    q, v, a = (rng.normal(size=(2, 3, t.model.n)) for _ in range(3))
    tau = core.rnea(t.model, q, v, a)
    M = core.mass_matrix(t.model, q)
    assert tau.shape == (2, 3, t.model.n) and M.shape == (2, 3, t.model.n, t.model.n)
    assert_close(tau[1, 2], pin_rnea(t, q[1, 2], v[1, 2], a[1, 2]))
    assert_close(M[0, 1], pin_mass_matrix(t, q[0, 1]))


def test_random_trees_cover_what_they_claim() -> None:
    """The synthetic trees branch and use every joint type (fixed ones merged away)."""
    models = [case(f"tree{k}").model for k in range(3)]
    types = {ty for m in models for ty in m.body_types}
    assert types == {"revolute", "continuous", "prismatic"}
    assert any(len(set(m.parent.tolist())) < m.nb for m in models)  # some body has two children
    assert any(len(m.link_frames) > m.nb + 1 for m in models)  # some link merged by a fixed joint
