"""core.Data, the prepared single-sample path: Pinocchio's values to 1e-10, and the plain functions' errors.

Each method is called on several random states in a row with one Data, so that a value left over
from an earlier call (the outputs are overwritten in place) would show as a mismatch.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from robots import (
    assert_close,
    case,
    pin_aba,
    pin_coriolis,
    pin_gravity,
    pin_mass_matrix,
    pin_rnea,
    pose_arg,
    random_state,
)
from test_constraints_pinocchio import FEET, _pin_constraints, _pin_lambda

from liedyn_ros import core
from liedyn_ros.core import dynamics
from liedyn_ros.core.constraints import forward
from liedyn_ros.core.fast.entry import single

CASES = ("panda", "panda_arm", "ur5", "solo12", "talos", "talos_mimic")
SAMPLES = 3


def refuse(*args, **kwargs):
    raise AssertionError("Data fell back to the plain function")


@pytest.fixture
def compiled_only(monkeypatch):
    """The plain functions raise: the values checked come from the prepared path itself."""
    for name in ("rnea", "aba", "gravity", "mass_matrix", "coriolis_matrix", "hybrid"):
        monkeypatch.setattr(dynamics, name, refuse)
    monkeypatch.setattr(forward, "constrained_aba", refuse)


def states(name: str, seed: int):
    """(twin, data, q, v, a, base_pose) for SAMPLES random states, one Data for all of them."""
    t = case(name)
    data = core.Data(t.model)
    rng = np.random.default_rng(seed)
    for _ in range(SAMPLES):
        yield (t, data, *random_state(t.model, rng), pose_arg(t.model, rng))


@pytest.mark.parametrize("name", CASES)
def test_rnea_gravity_mass_matrix_coriolis_equal_pinocchio(name: str, compiled_only) -> None:
    for t, data, q, v, a, T in states(name, 1):
        tau = data.rnea(q, v, a, base_pose=T)
        assert tau is data.tau
        assert_close(tau, pin_rnea(t, q, v, a, T), what=f"{name} rnea")
        assert data.gravity(q, base_pose=T) is data.g
        assert_close(data.g, pin_gravity(t, q, T), what=f"{name} gravity")
        assert data.mass_matrix(q, base_pose=T) is data.M
        assert_close(data.M, pin_mass_matrix(t, q, T), what=f"{name} mass_matrix")
        assert data.coriolis_matrix(q, v, base_pose=T) is data.C
        assert_close(data.C @ v, pin_coriolis(t, q, v, T) @ v, what=f"{name} coriolis_matrix")


@pytest.mark.parametrize("name", CASES)
def test_aba_and_hybrid_equal_pinocchio(name: str, compiled_only) -> None:
    """aba against Pinocchio's; hybrid with everything prescribed is Pinocchio's rnea, with nothing its aba."""
    rng = np.random.default_rng(2)
    everything, nothing = np.ones(case(name).model.nv, bool), np.zeros(case(name).model.nv, bool)
    for t, data, q, v, a, T in states(name, 2):
        tau = rng.normal(size=t.model.nv) * 5
        assert data.aba(q, v, tau, base_pose=T) is data.a
        assert_close(data.a, pin_aba(t, q, v, tau, T), rel=1e-9, what=f"{name} aba")
        tau_h, a_h = data.hybrid(q, v, a, everything, base_pose=T)
        assert tau_h is data.tau and a_h is data.a
        assert_close(tau_h, pin_rnea(t, q, v, a, T), what=f"{name} hybrid, all prescribed")
        _, a_h = data.hybrid(q, v, tau, nothing, base_pose=T)
        assert_close(a_h, pin_aba(t, q, v, tau, T), rel=1e-9, what=f"{name} hybrid, none prescribed")


@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_fixed_base_rnea_and_gravity_write_at_their_addresses(name: str, compiled_only, monkeypatch) -> None:
    """A fixed base's Data.rnea (alone and with a wrench on one link) and Data.gravity take the kernels that
    write at tau's and g's addresses (the other kernels made to fail here), Pinocchio's values in data.tau, data.g."""
    for kernel in ("rnea_one", "rnea_link_one", "gravity_one"):
        monkeypatch.setattr(single, kernel, refuse, raising=False)
    rng = np.random.default_rng(4)
    for t, data, q, v, a, T in states(name, 4):
        assert data.rnea(q, v, a) is data.tau
        assert_close(data.tau, pin_rnea(t, q, v, a, T), what=f"{name} rnea")
        f_ext = {t.model.body_names[-1]: rng.normal(size=6) * 10}
        assert data.rnea(q, v, a, f_ext=f_ext) is data.tau
        assert_close(data.tau, pin_rnea(t, q, v, a, T, f_ext), what=f"{name} rnea f_ext")
        assert data.gravity(q) is data.g
        assert_close(data.g, pin_gravity(t, q, T), what=f"{name} gravity")


@pytest.mark.parametrize("name", ["panda", "solo12", "talos"])
def test_external_wrenches_equal_pinocchio(name: str, compiled_only) -> None:
    """rnea with f_ext on the last body, a link merged by a fixed joint and that link's body (two wrenches on
    one body), in changing sets: rnea - J^T f (Pinocchio)."""
    rng = np.random.default_rng(3)
    model = case(name).model
    merged = [link for link in model.link_frames if link not in model.body_names and link != model.root_link]
    carrier = model.body_names[model.link_frames[merged[-1]][0]]  # the body the merged link is lumped into
    link_sets = [[model.body_names[-1], merged[-1]], [merged[-1]], [carrier, merged[-1]], [model.body_names[-1]]]
    for t, data, q, v, a, T in states(name, 3):
        for links in link_sets:  # in turn on one Data: rows of an earlier set must not linger
            f_ext = {link: rng.normal(size=6) * 10 for link in links}
            assert_close(data.rnea(q, v, a, base_pose=T, f_ext=f_ext), pin_rnea(t, q, v, a, T, f_ext),
                         what=f"{name} {links}")
        # aba(rnea(a) with f_ext, f_ext) = a: the same wrenches on both sides
        tau = pin_rnea(t, q, v, a, T, f_ext)
        assert_close(data.aba(q, v, tau, base_pose=T, f_ext=f_ext), a, rel=1e-8, what=f"{name} aba f_ext")


def test_lists_take_the_plain_path() -> None:
    """Arguments the compiled kernels refuse (lists, float32) are answered by the plain function."""
    t = case("ur5")
    data = core.Data(t.model)
    q, v, a = random_state(t.model, np.random.default_rng(4))
    want = pin_rnea(t, q, v, a)
    assert_close(data.rnea(list(q), list(v), list(a)), want, what="lists")
    assert_close(data.rnea(q.astype(np.float32), v, a), pin_rnea(t, q.astype(np.float32).astype(float), v, a),
                 what="float32 q")
    assert data.tau is data.rnea(q[::-1][::-1].copy(), v, a)  # and the fast path after it writes the same array


FIXED = case("ur5").model
FLOATING = case("solo12").model


def plain_error(fn, *args, **kwargs) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return info.type, str(info.value)


def zeros(model: core.Model) -> list[np.ndarray]:
    return [np.zeros(model.n), np.zeros(model.nv), np.zeros(model.nv)]


def bad_calls():
    """(label, model, method name, args, kwargs): each refused by the plain function of that name."""
    nan = zeros(FIXED)
    nan[1][2] = np.nan
    short = zeros(FIXED)
    short[0] = np.zeros(FIXED.n - 1)
    bad_pose = np.eye(4)
    bad_pose[0, 0] = 2.0
    mask = np.zeros(FIXED.nv, bool)
    return [
        ("NaN in v", FIXED, "rnea", nan, {}),
        ("NaN in v, aba", FIXED, "aba", nan, {}),
        ("short q", FIXED, "rnea", short, {}),
        ("short q, gravity", FIXED, "gravity", short[:1], {}),
        ("short q, mass_matrix", FIXED, "mass_matrix", short[:1], {}),
        ("NaN v, coriolis", FIXED, "coriolis_matrix", nan[:2], {}),
        ("pose on a fixed base", FIXED, "rnea", zeros(FIXED), {"base_pose": np.eye(4)}),
        ("no pose on a floating base", FLOATING, "rnea", zeros(FLOATING), {}),
        ("pose outside SE(3)", FLOATING, "aba", zeros(FLOATING), {"base_pose": bad_pose}),
        ("pose outside SE(3), gravity", FLOATING, "gravity", zeros(FLOATING)[:1], {"base_pose": bad_pose}),
        ("unknown link", FIXED, "rnea", zeros(FIXED), {"f_ext": {"nowhere": np.zeros(6)}}),
        ("NaN wrench", FIXED, "aba", zeros(FIXED), {"f_ext": {FIXED.body_names[-1]: np.full(6, np.nan)}}),
        ("text q", FIXED, "rnea", [["a"] * FIXED.n, *zeros(FIXED)[1:]], {}),
        ("short mask", FIXED, "hybrid", zeros(FIXED) + [mask[:-1]], {}),
    ]


@pytest.mark.parametrize("label, model, name, args, kwargs", bad_calls(), ids=[c[0] for c in bad_calls()])
def test_bad_input_gives_the_plain_functions_error(label, model, name, args, kwargs) -> None:
    want_type, want_message = plain_error(getattr(core, name), model, *args, **kwargs)
    data = core.Data(model)
    with pytest.raises(want_type) as info:
        getattr(data, name)(*args, **kwargs)
    assert str(info.value) == want_message, label


def test_singular_inertia_raises_like_aba() -> None:
    """A massless leaf body: aba raises SingularInertiaError, and so does Data.aba."""
    urdf = ('<robot name="r"><link name="base"/><link name="tip"/><joint name="j" type="revolute">'
            '<parent link="base"/><child link="tip"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    model = core.load_urdf(urdf)
    want_type, want_message = plain_error(core.aba, model, np.zeros(1), np.zeros(1), np.ones(1))
    assert issubclass(want_type, core.SingularInertiaError)
    with pytest.raises(want_type) as info:
        core.Data(model).aba(np.zeros(1), np.zeros(1), np.ones(1))
    assert str(info.value) == want_message


def test_batches_and_non_models_are_refused() -> None:
    data = core.Data(FIXED)
    with pytest.raises(ValueError, match="one sample at a time.*core.rnea takes batches"):
        data.rnea(np.zeros((2, FIXED.n)), np.zeros(FIXED.nv), np.zeros(FIXED.nv))
    with pytest.raises(TypeError, match="model: expected a liedyn_ros.core.Model"):
        core.Data("robot.urdf")


@pytest.mark.parametrize("name", ["solo12", "talos"])
def test_constrained_aba_equals_pinocchio(name: str, compiled_only) -> None:
    """a and lam against Pinocchio's constraintDynamics (exact KKT solve), two constraint sets in turn
    on one Data (lam follows the set's size)."""
    t = case(name)
    sets = ([[core.Contact(f) for f in FEET], [core.Contact(f) for f in FEET[:3]]] if name == "solo12" else
            [[core.Contact("left_sole_link", "flat"), core.Contact("right_sole_link", "flat")],
             [core.Contact("left_sole_link", "flat")]])
    data = core.Data(t.model)
    rng = np.random.default_rng(5)
    for constraints in sets * 2:
        q, v, _ = random_state(t.model, rng)
        T, tau = pose_arg(t.model, rng), rng.normal(size=t.model.nv) * 5
        a, lam = data.constrained_aba(q, v, tau, constraints, base_pose=T, tol=np.inf)
        assert a is data.a and lam is data.lam
        pin_models, pin_datas = _pin_constraints(t, constraints)
        pd = t.pin_model.createData()
        pin.initConstraintDynamics(t.pin_model, pd, pin_models, pin_datas)
        q_pin, E = t.to_pin(q, T)
        a_pin = pin.constraintDynamics(t.pin_model, pd, q_pin, E @ v, np.linalg.solve(E.T, tau), pin_models,
                                       pin_datas, pin.ProximalSettings(1e-14, 0.0, 1))
        assert_close(a, np.linalg.solve(E, a_pin), 1e-9, f"{name}: a")
        assert_close(lam, _pin_lambda(constraints, pd.lambda_c), 1e-9, f"{name}: lam")


def test_constrained_aba_errors_are_the_plain_functions() -> None:
    contacts = [core.Contact("FL_FOOT"), core.Contact("FR_FOOT")]
    q, v, tau = zeros(FLOATING)
    data = core.Data(FLOATING)
    for args, kwargs in [((q, v, tau, contacts), {}),  # no base pose
                         ((q, v, tau, contacts), {"base_pose": np.eye(4), "active": np.ones(3, bool)}),
                         ((q, v, tau, [core.Contact("nowhere")]), {"base_pose": np.eye(4)}),
                         ((q, np.full(FLOATING.nv, np.nan), tau, contacts), {"base_pose": np.eye(4)}),
                         ((q, np.ones(FLOATING.nv), tau, contacts), {"base_pose": np.eye(4)})]:  # |A v| > tol
        want_type, want_message = plain_error(core.constrained_aba, FLOATING, *args, **kwargs)
        with pytest.raises(want_type) as info:
            data.constrained_aba(*args, **kwargs)
        assert str(info.value) == want_message


@pytest.mark.parametrize("name", ["panda", "talos_mimic", "solo12"])
def test_results_passed_back_in(name: str) -> None:
    """A Data's output array as an input of the next call (tau = rnea(...); aba(q, v, tau); hybrid fed its own
    a or tau) gives the plain function's answer: a kernel that writes while it reads never sees its output."""
    t = case(name)
    data = core.Data(t.model)
    rng = np.random.default_rng(6)
    q, v, a = random_state(t.model, rng)
    T = pose_arg(t.model, rng)
    mask = np.arange(t.model.nv) % 3 == 0
    tau = data.rnea(q, v, a, base_pose=T)
    assert_close(data.aba(q, v, tau, base_pose=T), a, rel=1e-8, what="aba(rnea)")
    assert_close(data.rnea(q, v, data.a, base_pose=T), core.rnea(t.model, q, v, a, base_pose=T), rel=1e-8,
                 what="rnea(aba)")
    for out in ("a", "tau"):
        u = getattr(data, out)
        want = core.hybrid(t.model, q, v, u.copy(), mask, base_pose=T)
        got = data.hybrid(q, v, u, mask, base_pose=T)
        assert_close(got[0], want[0], what=f"hybrid({out}) tau")
        assert_close(got[1], want[1], what=f"hybrid({out}) a")
    u = data.a
    want = core.aba(t.model, q, u.copy(), u.copy(), base_pose=T)
    assert_close(data.aba(q, u, u, base_pose=T), want, what="aba(q, data.a, data.a)")
