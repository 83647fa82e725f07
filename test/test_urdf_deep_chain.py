"""A 3,000-link chain loads (no recursion) in well under a second, and its gravity torques are right.

The chain hangs from a fixed base, every joint about y, links of length L with their centre of
mass c below the joint. With the first joint at pi/2 and the others at 0 the chain lies
horizontal, and holding it takes at joint i (1-based, N joints)

    g_i = m g sum_{k=i..N} ((k - i) L + c) = m g (L (N - i) (N - i + 1) / 2 + (N - i + 1) c).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from liedyn_ros import core
from liedyn_ros.core import reference

N, L, C, MASS, G = 3000, 0.1, 0.04, 0.5, 9.81


def chain_urdf(n: int, fixed_every: int = 0) -> str:
    """n revolute joints; with fixed_every = k, each k-th link is welded on by a fixed joint instead."""
    body = (f'<inertial><origin xyz="0 0 {-C}"/><mass value="{MASS}"/>'
            '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial>')
    links = ['<link name="l0"/>'] + [f'<link name="l{i}">{body}</link>' for i in range(1, n + 1)]
    joints = []
    for i in range(1, n + 1):
        kind = "fixed" if fixed_every and i > 1 and i % fixed_every == 0 else "revolute"
        joints.append(f'<joint name="j{i}" type="{kind}"><parent link="l{i - 1}"/><child link="l{i}"/>'
                      f'<origin xyz="0 0 {-L if i > 1 else 0}"/><axis xyz="0 1 0"/>'
                      '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return f'<robot name="chain">{"".join(links)}{"".join(joints)}</robot>'


@pytest.fixture(scope="module")
def chain() -> tuple[str, core.Model, float]:
    xml = chain_urdf(N)
    start = time.perf_counter()
    model = core.load_urdf(xml)
    return xml, model, time.perf_counter() - start


def horizontal(n: int) -> np.ndarray:
    q = np.zeros(n)
    q[0] = np.pi / 2
    return q


def test_deep_chain_loads_quickly_in_urdf_order(chain) -> None:
    _, model, seconds = chain
    assert model.n == N and model.joint_names == tuple(f"j{i}" for i in range(1, N + 1))
    assert np.array_equal(model.parent, np.arange(N) - 1)
    # About 2 s on the shared 2-core machine (Pinocchio's parser: 3.7 s); a quadratic walk would take minutes.
    assert seconds < 15.0, f"loading {N} links took {seconds:.2f} s"


def test_deep_chain_gravity_matches_the_formula(chain) -> None:
    _, model, _ = chain
    k = np.arange(N, 0, -1)  # N - i + 1 links below joint i
    want = MASS * G * (L * (k - 1) * k / 2 + k * C)
    got = core.gravity(model, horizontal(N))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * want.max())


def test_deep_chain_dynamics_agree_across_algorithms(chain) -> None:
    """Pinocchio cannot check this chain (its Data for 400 joints takes 4.4 GB and 28 s): identities
    between our algorithms do, on the compiled and the reference path."""
    _, model, _ = chain
    rng = np.random.default_rng(5)
    q, v, a = rng.uniform(-0.3, 0.3, N), rng.normal(size=N) * 0.1, rng.normal(size=N)
    tau = core.rnea(model, q, v, a)
    scale = np.abs(tau).max()
    np.testing.assert_allclose(reference.rnea(model, q, v, a), tau, rtol=0, atol=1e-9 * scale)
    M_a = core.rnea(model, q, v, a) - core.rnea(model, q, v, np.zeros(N))
    np.testing.assert_allclose(core.mass_matrix(model, q) @ a, M_a, rtol=0, atol=1e-9 * scale)
    # M of 3,000 point masses is ill-conditioned: check aba by its residual, not by a itself.
    np.testing.assert_allclose(core.rnea(model, q, v, core.aba(model, q, v, tau)), tau, rtol=0, atol=1e-9 * scale)


def test_deep_chain_with_fixed_joints_merges_iteratively() -> None:
    """Every third link welded on: 2,000 moving joints, the welded links' mass lumped into their parent."""
    model = core.load_urdf(chain_urdf(N, fixed_every=3))
    assert model.n == N - N // 3
    k = np.arange(N, 0, -1)
    per_joint = MASS * G * (L * (k - 1) * k / 2 + k * C)  # what each joint of the unwelded chain holds
    moving = [i for i in range(N) if i == 0 or (i + 1) % 3]
    np.testing.assert_allclose(core.gravity(model, horizontal(model.n)), per_joint[moving], rtol=1e-9,
                               atol=1e-9 * per_joint.max())


def test_deep_floating_chain_loads() -> None:
    model = core.load_urdf(chain_urdf(N), floating_base=True)
    tau = core.rnea(model, np.zeros(N), np.zeros(N + 6), np.zeros(N + 6), base_pose=np.eye(4))
    assert np.all(np.isfinite(tau))
    assert tau[5] == pytest.approx(MASS * G * N, rel=1e-12)  # the base carries the chain's weight (z up)
