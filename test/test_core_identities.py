"""Physical identities between the algorithms, on fixed, mimic and floating-base models.

Independent pieces (link poses, twists, energies, Jacobians) come from test/robots.py, which
recomputes them from the model's constant data with scipy's matrix exponential.
"""
from __future__ import annotations

import numpy as np
import pytest

from liedyn_ros import core
from liedyn_ros.core import reference
from robots import (advance, assert_close, case, kinetic_energy, link_jacobian, pose_arg,
                    potential_energy, random_state, rk4_step)

# panda: mimic finger; tree1: random branching tree; solo12: floating; talos_mimic: floating + mimic.
CASES = ("ur5", "panda", "tree1", "solo12", "talos_mimic")


def sample(name: str, seed: int) -> tuple[core.Model, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    t = case(name)
    rng = np.random.default_rng(seed)
    return (t.model, *random_state(t.model, rng), pose_arg(t.model, rng))


@pytest.mark.parametrize("name", CASES)
def test_mass_matrix_symmetric_positive_definite(name: str) -> None:
    model, q, _, _, T = sample(name, 10)
    M = core.mass_matrix(model, q, base_pose=T)
    assert_close(M, M.T, rel=1e-13, what="M - M^T")
    assert np.linalg.eigvalsh(M).min() > 0


@pytest.mark.parametrize("name", CASES)
def test_kinetic_energy_is_half_vMv(name: str) -> None:
    """1/2 v^T M v equals sum_i 1/2 V_i^T J_i V_i with V_i from differentiated link poses."""
    model, q, v, _, T = sample(name, 11)
    M = core.mass_matrix(model, q, base_pose=T)
    assert_close(0.5 * v @ M @ v, kinetic_energy(model, q, v, T), rel=1e-8)


@pytest.mark.parametrize("name", CASES)
def test_mdot_minus_2c_is_skew_symmetric(name: str) -> None:
    """Mdot by central differences along the motion (base: T exp(t [V_base]))."""
    model, q, v, _, T = sample(name, 12)
    eps = 1e-6
    (q_plus, T_plus), (q_minus, T_minus) = advance(model, q, v, T, eps), advance(model, q, v, T, -eps)
    M_plus = core.mass_matrix(model, q_plus, **_kw(T_plus))
    M_minus = core.mass_matrix(model, q_minus, **_kw(T_minus))
    N = (M_plus - M_minus) / (2 * eps) - 2 * core.coriolis_matrix(model, q, v, base_pose=T)
    assert_close(N + N.T, np.zeros_like(N), rel=1e-7, what="(Mdot - 2C) + (Mdot - 2C)^T")


def _kw(T: np.ndarray | None) -> dict:
    return {} if T is None else {"base_pose": T}


@pytest.mark.parametrize("name", CASES)
def test_coriolis_vanishes_at_rest(name: str) -> None:
    model, q, v, _, T = sample(name, 13)
    C = core.coriolis_matrix(model, q, np.zeros(model.nv), base_pose=T)
    assert np.array_equal(C, np.zeros_like(C)) or np.abs(C).max() < 1e-14


@pytest.mark.parametrize("name", CASES)
def test_coriolis_times_velocity_is_bias_force(name: str) -> None:
    """C(q, v) v = rnea(q, v, 0) - g(q)."""
    model, q, v, _, T = sample(name, 14)
    bias = core.rnea(model, q, v, np.zeros(model.nv), base_pose=T) - core.gravity(model, q, base_pose=T)
    assert_close(core.coriolis_matrix(model, q, v, base_pose=T) @ v, bias)


@pytest.mark.parametrize("name", CASES)
def test_rnea_is_mass_matrix_plus_bias(name: str) -> None:
    """rnea(q, v, a) = M a + C v + g."""
    model, q, v, a, T = sample(name, 15)
    want = (core.mass_matrix(model, q, base_pose=T) @ a + core.coriolis_matrix(model, q, v, base_pose=T) @ v
            + core.gravity(model, q, base_pose=T))
    assert_close(core.rnea(model, q, v, a, base_pose=T), want)


@pytest.mark.parametrize("name", CASES)
def test_aba_inverts_rnea(name: str) -> None:
    """aba(rnea(a)) = a, also under external wrenches."""
    model, q, v, a, T = sample(name, 16)
    f_ext = {model.body_names[-1]: np.arange(1.0, 7.0)}
    tau = core.rnea(model, q, v, a, base_pose=T, f_ext=f_ext)
    assert_close(core.aba(model, q, v, tau, base_pose=T, f_ext=f_ext), a, rel=1e-9)


@pytest.mark.parametrize("name", CASES)
def test_hybrid_with_all_or_nothing_prescribed(name: str) -> None:
    model, q, v, a, T = sample(name, 17)
    tau = core.rnea(model, q, v, a, base_pose=T)
    tau_all, a_all = core.hybrid(model, q, v, a, np.ones(model.nv, bool), base_pose=T)
    assert_close(tau_all, tau, what="all prescribed: tau = rnea")
    assert_close(a_all, a, rel=1e-14, what="all prescribed: a as given")
    tau_none, a_none = core.hybrid(model, q, v, tau, np.zeros(model.nv, bool), base_pose=T)
    assert_close(a_none, core.aba(model, q, v, tau, base_pose=T), what="none prescribed: a = aba")
    assert_close(tau_none, tau, rel=1e-14, what="none prescribed: tau as given")


@pytest.mark.parametrize("name", CASES)
def test_hybrid_mixed_mask_is_consistent(name: str) -> None:
    """Prescribe every other coordinate (for a floating base: the whole base, then half of it):
    the returned (tau, a) keep the given entries and satisfy rnea(q, v, a) = tau."""
    model, q, v, a_given, T = sample(name, 18)
    rng = np.random.default_rng(18)
    masks = [np.arange(model.nv) % 2 == 0]
    if model.floating_base:
        masks.append(np.r_[np.ones(6, bool), np.arange(model.n) % 2 == 1])
        masks.append(np.r_[np.array([1, 1, 1, 0, 0, 0], bool), np.arange(model.n) % 3 == 0])
    for mask in masks:
        u = np.where(mask, a_given, rng.normal(size=model.nv))
        f_ext = {model.body_names[0]: rng.normal(size=6)}
        tau, a = core.hybrid(model, q, v, u, mask, base_pose=T, f_ext=f_ext)
        assert_close(a[mask], u[mask], rel=1e-14, what="prescribed a kept")
        assert_close(tau[~mask], u[~mask], rel=1e-14, what="given tau kept")
        assert_close(core.rnea(model, q, v, a, base_pose=T, f_ext=f_ext), tau, rel=1e-9, what=f"mask {mask}")


@pytest.mark.parametrize("name", CASES)
def test_external_wrench_equals_jacobian_transpose(name: str) -> None:
    """rnea(f_ext) - rnea = -J_link^T f, J_link the link's body Jacobian from differentiated poses."""
    model, q, v, a, T = sample(name, 19)
    link = model.body_names[len(model.body_names) // 2]
    f = np.array([0.3, -1.2, 0.5, 2.0, 1.0, -3.0])
    diff = (core.rnea(model, q, v, a, base_pose=T, f_ext={link: f}) - core.rnea(model, q, v, a, base_pose=T))
    assert_close(diff, -link_jacobian(model, link, q, T).T @ f, rel=1e-8)


@pytest.mark.parametrize("name", CASES)
def test_gravity_is_gradient_of_potential_energy(name: str) -> None:
    """g(q) = dU/dq; for a floating base the first six entries along T exp(eps e_k)."""
    model, q, _, _, T = sample(name, 20)
    eps = 1e-6
    grad = []
    for k in range(model.nv):
        e = np.eye(model.nv)[k]
        grad.append((potential_energy(model, *advance(model, q, e, T, eps))
                     - potential_energy(model, *advance(model, q, e, T, -eps))) / (2 * eps))
    assert_close(core.gravity(model, q, base_pose=T), np.array(grad), rel=1e-7)


@pytest.mark.parametrize("name", ["ur5", "panda", "tree1", "solo12"])
def test_energy_balance_along_simulated_motion(name: str) -> None:
    """Under constant forces tau, E = 1/2 v^T M v + U changes by the work tau . dq (base wrench 0).

    The motion is integrated with aba (RK4, base on SE(3)); 60 steps of 1 ms.
    """
    model, q, v, _, T = sample(name, 21)
    rng = np.random.default_rng(21)
    tau = 0.1 * rng.normal(size=model.nv)  # small: the light legs of Solo12 accelerate fast
    if model.floating_base:
        tau[:6] = 0.0

    def accel(qs, vs, Ts):
        return core.aba(model, qs, vs, tau, **_kw(Ts))

    def energy(qs, vs, Ts):
        return 0.5 * vs @ core.mass_matrix(model, qs, **_kw(Ts)) @ vs + potential_energy(model, qs, Ts)

    q0, E0 = q.copy(), energy(q, v, T)
    for _ in range(60):
        q, v, T = rk4_step(model, q, v, T, 1e-3, accel)
    work = tau[-model.n:] @ (q - q0)
    assert abs(energy(q, v, T) - E0 - work) < 1e-8 * max(1.0, abs(E0))


@pytest.mark.parametrize("name", CASES)
def test_public_functions_equal_reference(name: str) -> None:
    """The public (fast) path equals the readable reference, single and batched."""
    t = case(name)
    model = t.model
    rng = np.random.default_rng(22)
    q, v, a = (np.array(x) for x in zip(*(random_state(model, rng) for _ in range(3))))
    T = np.array([pose_arg(model, rng) for _ in range(3)]) if model.floating_base else None
    mask = np.arange(model.nv) % 2 == 0
    for k in (slice(None), 0):
        kw = _kw(None if T is None else T[k])
        args = (q[k], v[k], a[k])
        pairs = {
            "rnea": (core.rnea(model, *args, **kw), reference.rnea(model, *args, **kw)),
            "aba": (core.aba(model, *args, **kw), reference.aba(model, *args, **kw)),
            "gravity": (core.gravity(model, q[k], **kw), reference.gravity(model, q[k], **kw)),
            "mass_matrix": (core.mass_matrix(model, q[k], **kw), reference.mass_matrix(model, q[k], **kw)),
            "coriolis": (core.coriolis_matrix(model, q[k], v[k], **kw),
                         reference.coriolis_matrix(model, q[k], v[k], **kw)),
            "hybrid": (np.array(core.hybrid(model, *args, mask, **kw)),
                       np.array(reference.hybrid(model, *args, mask, **kw))),
        }
        for key, (fast, ref) in pairs.items():
            assert_close(fast, ref, rel=1e-11, what=f"{name} {key} {k}")
