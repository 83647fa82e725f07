"""The compiled fast path (the public functions) equals the readable reference to 1e-10.

Robots: Panda and UR5 (fixed), Solo12 and Talos (floating), Talos full (floating, mimic joints),
and random synthetic trees from a small URDF generator (branching, revolute / prismatic /
continuous / fixed joints, rpy origins, a mimic joint). Every algorithm, single samples and
multi-dimensional batches, with and without external wrenches.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from robots import ROBOT_FILES as FILES

from liedyn_ros import core
from liedyn_ros.core import reference
from liedyn_ros.core.fast.spatial import sin_cos
from liedyn_ros.robot_data import robots_dir

REL = 1e-10


def random_urdf(rng: np.random.Generator, links: int, floating: bool) -> str:
    """A random tree: each link hangs from an earlier one through a random joint."""
    def origin() -> str:
        xyz, rpy = rng.uniform(-0.5, 0.5, 3), rng.uniform(-np.pi, np.pi, 3)
        return f'<origin xyz="{" ".join(map(str, xyz))}" rpy="{" ".join(map(str, rpy))}"/>'

    def inertial() -> str:
        I = np.diag(rng.uniform(0.01, 0.2, 3))
        return (f'<inertial>{origin()}<mass value="{rng.uniform(0.5, 3)}"/><inertia ixx="{I[0, 0]}" ixy="0" '
                f'ixz="0" iyy="{I[1, 1]}" iyz="0" izz="{I[2, 2]}"/></inertial>')

    parts = [f'<robot name="random"><link name="l0">{inertial()}</link>']
    moving: list[str] = []
    for k in range(1, links):
        kind = rng.choice(["revolute", "prismatic", "continuous", "fixed"], p=[0.45, 0.2, 0.2, 0.15])
        axis = rng.normal(size=3)
        mimic = f'<mimic joint="{moving[0]}" multiplier="-0.7" offset="0.2"/>' if k == links - 1 and moving \
            and kind != "fixed" else ""
        limit = '<limit lower="-2" upper="2" effort="10" velocity="3"/>' if kind in ("revolute", "prismatic") else ""
        parts.append(f'<link name="l{k}">{inertial()}</link><joint name="j{k}" type="{kind}"><parent '
                     f'link="l{rng.integers(0, k)}"/><child link="l{k}"/>{origin()}<axis xyz="{" ".join(map(str, axis))}"'
                     f'/>{limit}{mimic}</joint>')
        if kind != "fixed" and not mimic:
            moving.append(f"j{k}")
    parts.append("</robot>")
    return "".join(parts)


def load(name: str) -> core.Model:
    if name.startswith("random"):
        seed = int(name[6:])
        return core.load_urdf(random_urdf(np.random.default_rng(seed), 9, seed % 2 == 1), floating_base=seed % 2 == 1)
    path, floating = FILES[name]
    return core.load_urdf(str(robots_dir() / path), floating_base=floating)


NAMES = list(FILES) + [f"random{k}" for k in range(4)]


@pytest.fixture(scope="module", params=NAMES)
def model(request) -> core.Model:
    return load(request.param)


def random_pose(rng: np.random.Generator, shape: tuple[int, ...] = ()) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.normal(size=shape + (3, 3)))
    Q = Q * np.sign(np.linalg.det(Q))[..., None, None]
    T = np.zeros(shape + (4, 4))
    T[..., :3, :3], T[..., :3, 3], T[..., 3, 3] = Q, rng.normal(size=shape + (3,)), 1.0
    return T


def inputs(model: core.Model, rng: np.random.Generator, shape: tuple[int, ...] = ()):
    q = rng.uniform(-2, 2, shape + (model.n,))
    v, a = rng.normal(size=(2,) + shape + (model.nv,))
    return q, v, a, (random_pose(rng, shape) if model.floating_base else None)


def wrenches(model: core.Model, rng: np.random.Generator, shape: tuple[int, ...] = ()) -> dict:
    links = sorted(model.link_frames)
    return {link: rng.normal(size=shape + (6,)) for link in rng.choice(links, size=min(3, len(links)), replace=False)}


def close(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    scale = max(np.abs(want).max(initial=0.0), 1e-12)
    assert np.abs(got - want).max(initial=0.0) <= REL * scale, np.abs(got - want).max() / scale


def algorithms(model, q, v, a, pose, f_ext, mask):
    """(name, function of the module) for every algorithm at the given inputs."""
    return {
        "rnea": lambda m: m.rnea(model, q, v, a, base_pose=pose, f_ext=f_ext),
        "aba": lambda m: m.aba(model, q, v, a, base_pose=pose, f_ext=f_ext),
        "gravity": lambda m: m.gravity(model, q, base_pose=pose),
        "mass_matrix": lambda m: m.mass_matrix(model, q, base_pose=pose),
        "coriolis_matrix": lambda m: m.coriolis_matrix(model, q, v, base_pose=pose),
        "hybrid": lambda m: m.hybrid(model, q, v, a, mask, base_pose=pose, f_ext=f_ext),
    }


def pairs(name: str, got, want) -> list:
    """(ours, reference) pairs to compare: hybrid returns (tau, a)."""
    return list(zip(got, want)) if name == "hybrid" else [(got, want)]


def masks(model: core.Model, rng: np.random.Generator) -> list[np.ndarray]:
    """Nothing, everything, a random half, and for a floating base: base prescribed, base half prescribed."""
    nv = model.nv
    out = [np.zeros(nv, bool), np.ones(nv, bool), rng.random(nv) < 0.5]
    if model.floating_base:
        base = rng.random(nv) < 0.5
        base[:6] = True
        half = base.copy()
        half[:3] = False
        out += [base, half]
    return out


@pytest.mark.parametrize("with_f_ext", [False, True])
def test_single_sample(model: core.Model, with_f_ext: bool) -> None:
    rng = np.random.default_rng(1)
    for mask in masks(model, rng):
        q, v, a, pose = inputs(model, rng)
        f_ext = wrenches(model, rng) if with_f_ext else None
        for name, run in algorithms(model, q, v, a, pose, f_ext, mask).items():
            for g, w in pairs(name, run(core), run(reference)):
                close(g, w)


@pytest.mark.parametrize("shape", [(3,), (2, 2)])
def test_batches(model: core.Model, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(2)
    q, v, a, pose = inputs(model, rng, shape)
    f_ext = wrenches(model, rng, shape)
    mask = masks(model, rng)[-1]
    for name, run in algorithms(model, q, v, a, pose, f_ext, mask).items():
        for g, w in pairs(name, run(core), run(reference)):
            assert np.shape(g)[:len(shape)] == shape
            close(g, w)


def test_sin_cos_equals_libm() -> None:
    """The kernels' inlined sin_cos (joint transforms) against libm's sin and cos: within 4 ulp of the larger of
    the result and 1e-300 at random angles of every range, at multiples of pi/2 (the quadrant seams), near zero,
    and past 1e5, where it calls libm; NaN stays NaN."""
    rng = np.random.default_rng(5)
    xs = np.concatenate([rng.uniform(-b, b, 2000) for b in (1e-8, 1.0, 4.0, 100.0, 1e5, 1e7)]
                        + [np.arange(-64, 65) * np.pi / 2, [0.0, -0.0, 5e-324, np.pi / 4, -np.pi / 4, 99999.9]])
    for x in xs:
        s, c = sin_cos(x)
        for got, want in ((s, math.sin(x)), (c, math.cos(x))):
            assert abs(got - want) <= 4 * np.spacing(max(abs(want), 1e-300)), (x, got, want)
    assert all(np.isnan(sin_cos(np.nan)))


def test_broadcast_and_lists() -> None:
    """A single pose with a batch of q, plain lists, and strided arrays take the general path."""
    model = load("solo12")
    rng = np.random.default_rng(3)
    q, v, a, _ = inputs(model, rng, (4,))
    pose = random_pose(rng)
    close(core.rnea(model, q, v, a, base_pose=pose), reference.rnea(model, q, v, a, base_pose=pose))
    close(core.aba(model, list(q[0]), list(v[0]), list(a[0]), base_pose=pose.tolist()),
          reference.aba(model, q[0], v[0], a[0], base_pose=pose))
    strided = np.repeat(q[0], 2)[::2]
    close(core.mass_matrix(model, strided), reference.mass_matrix(model, q[0]))


@pytest.mark.parametrize("robot", ["solo12", "panda"])
def test_one_pose_for_a_threaded_batch(robot: str) -> None:
    """One base pose (4, 4) for a batch split over threads, which reads it from a single row, and
    aba's batch, which writes its tau to scratch: sample by sample equal to the reference."""
    from liedyn_ros.core.fast import threads

    model = load(robot)
    rng = np.random.default_rng(11)
    B = 2 * threads.SAMPLES_PER_THREAD + 5
    q, v, a, poses = inputs(model, rng, (B,))
    pose = poses[0] if model.floating_base else None
    mask = rng.random(model.nv) < 0.5
    for name, run in algorithms(model, q, v, a, pose, None, mask).items():
        got = run(core)
        for k in (0, B // 2, B - 1):
            want = algorithms(model, q[k], v[k], a[k], pose, None, mask)[name](reference)
            for g, w in pairs(name, [x[k] for x in got] if name == "hybrid" else got[k], want):
                close(g, w)
    got = core.aba_derivatives(model, q, v, a, base_pose=pose)
    want = core.aba_derivatives(model, q[-1], v[-1], a[-1], base_pose=pose, fast=False)
    for g, w in zip(got, want, strict=True):
        close(g[-1], w)
    got = core.rnea_time_derivatives(model, q, [v, a, a], base_pose=pose)
    want = core.rnea_time_derivatives(model, q[-1], [v[-1], a[-1], a[-1]], base_pose=pose, fast=False)
    for g, w in zip(got, want, strict=True):
        close(g[-1], w)


@pytest.mark.parametrize("bad, match", [
    (dict(q=np.full(8, np.nan)), "q: contains NaN"),
    (dict(q=np.zeros(3)), "q: expected length 8"),
    (dict(v=np.zeros(9)), "v: expected length 8"),
    (dict(a=np.array([np.inf] + [0.0] * 7)), "a: contains NaN"),
])
def test_bad_input_fixed_base(bad: dict, match: str) -> None:
    model = load("panda")
    args = dict(q=np.zeros(8), v=np.zeros(8), a=np.zeros(8)) | bad
    with pytest.raises(ValueError, match=match):
        core.rnea(model, args["q"], args["v"], args["a"])
    if "a" not in bad:
        with pytest.raises(ValueError, match=match):
            core.coriolis_matrix(model, args["q"], args["v"])
    with pytest.raises(ValueError, match="base_pose"):
        core.gravity(model, np.zeros(8), base_pose=np.eye(4))


def test_bad_pose_and_f_ext() -> None:
    model = load("solo12")
    q, v, a = np.zeros(12), np.zeros(18), np.zeros(18)
    reflection = np.diag([1.0, 1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="determinant"):
        core.aba(model, q, v, a, base_pose=reflection)
    with pytest.raises(ValueError, match="orthonormal"):
        core.mass_matrix(model, q, base_pose=np.diag([2.0, 1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="base_pose: required"):
        core.rnea(model, q, v, a)
    with pytest.raises(ValueError, match="unknown link"):
        core.rnea(model, q, v, a, base_pose=np.eye(4), f_ext={"nowhere": np.zeros(6)})
    link = sorted(model.link_frames)[0]
    for f in (np.array([0.0, np.nan, 0, 0, 0, 0]), np.zeros(5)):
        for run in (core.rnea, core.aba):
            with pytest.raises(ValueError, match=r"f_ext\['"):
                run(model, q, v, a, base_pose=np.eye(4), f_ext={link: f})


def test_singular_inertia_is_reported() -> None:
    """A massless leaf on a moving joint: aba raises the reference's ValueError, never NaN."""
    urdf = ('<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" '
            'iyz="0" izz="1"/></inertial></link><link name="b"/><joint name="j" type="revolute"><parent link="a"/>'
            '<child link="b"/><axis xyz="0 0 1"/></joint></robot>')
    model = core.load_urdf(urdf)
    with pytest.raises(ValueError, match="singular"):
        core.aba(model, np.zeros(1), np.zeros(1), np.zeros(1))


def test_other_dtypes_and_pickled_models() -> None:
    """Integer and read-only arrays take the general path; a model sent to another process (pickled)
    rebuilds its kernel arrays there instead of carrying this process's memory addresses."""
    import pickle

    model = load("panda")
    q = np.arange(8) % 3 - 1  # int64
    v, a = np.ones(8), np.full(8, 0.5)
    v.flags.writeable = False
    expected = reference.rnea(model, q.astype(float), v, a)
    close(core.rnea(model, q, v, a), expected)
    core.mass_matrix(model, q.astype(float))  # the original's kernel arrays exist before pickling
    copy = pickle.loads(pickle.dumps(model))
    assert "_fast" not in copy.__dict__
    close(core.rnea(copy, q.astype(float), v, a), expected)
    close(core.mass_matrix(copy, q.astype(float)), reference.mass_matrix(model, q.astype(float)))


def test_large_batches_split_over_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch split over three threads equals the reference sample by sample, for every algorithm."""
    import numba

    from liedyn_ros.core.fast import threads

    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 3)
    monkeypatch.setattr(threads, "_pool", None)
    calls = []
    kernel_run = threads.run_batch

    def counting(kernel, B, *args):
        calls.append((kernel.__name__, B))
        return kernel_run(kernel, B, *args)

    monkeypatch.setattr("liedyn_ros.core.dynamics.run_batch", counting)
    model = load("solo12")
    rng = np.random.default_rng(5)
    B = 3 * threads.SAMPLES_PER_THREAD + 7
    q, v, a, pose = inputs(model, rng, (B,))
    mask = rng.random(model.nv) < 0.5
    picks = [0, B // 3, B // 2, B - 1]  # samples in the first, second and last thread's share
    for name, run in algorithms(model, q, v, a, pose, None, mask).items():
        got = run(core)
        for k in picks:
            one = algorithms(model, q[k], v[k], a[k], pose[k], None, mask)[name](reference)
            for g, w in pairs(name, [x[k] for x in got] if name == "hybrid" else got[k], one):
                close(g, w)
    assert {B} == {n for _, n in calls} and len(calls) == 6
    assert threads._pool is not None  # the batch was in fact handed to the pool


def test_batches_in_a_forked_child() -> None:
    """A process forked after a threaded batch computes batches too (its pool is its own)."""
    import multiprocessing

    from liedyn_ros.core.fast import threads

    model = load("panda")
    q, v, a, _ = inputs(model, np.random.default_rng(6), (4 * threads.SAMPLES_PER_THREAD,))
    expected = core.rnea(model, q, v, a)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(core.rnea, (model, q, v, a)).get(timeout=120)
    close(got, expected)
