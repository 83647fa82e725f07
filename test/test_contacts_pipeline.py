"""Contacts in the ROS-free pipeline (the node's path): a Solo12 standing still, checked against
Pinocchio's statics; every contact-state source, stale and bad state, flight, bad configuration."""
from __future__ import annotations

from typing import Any

import numpy as np
import pinocchio as pin
import pytest
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core
from liedyn_ros.pipeline import (
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
    SkipReason,
    compute_contact_outputs,
    compute_outputs,
    resolve_contacts,
    wrench_at_link,
)
from liedyn_ros.pipeline.cdr import read_uint8_multiarray as contact_flags_from_cdr
from liedyn_ros.robot_data import robots_dir

import contact_sim  # noqa: E402  (test/ helper)
from test_pipeline import odometry, ros_joint_state

URDF = robots_dir() / "solo_description/robots/solo12.urdf"
FEET = list(contact_sim.FEET)
TS = get_typestore(Stores.ROS2_JAZZY)
T = TS.types
STAMP = 10**9


@pytest.fixture(scope="module")
def solo() -> tuple[Any, pin.Model, np.ndarray]:
    """(our model, Pinocchio's, Pinocchio's q of the robot standing with its feet on z = 0)."""
    model = core.load_urdf(str(URDF), floating_base=True)
    pin_model = pin.buildModelFromUrdf(str(URDF), pin.JointModelFreeFlyer())
    data = pin_model.createData()
    q = contact_sim.standing_posture(pin_model)
    pin.framesForwardKinematics(pin_model, data, q)
    q[2] -= np.mean([data.oMf[pin_model.getFrameId(f)].translation[2] for f in FEET])
    assert tuple(pin_model.names[2:]) == model.joint_names
    return model, pin_model, q


def feed(pipe: DynamicsPipeline, q_pin: np.ndarray, stamp: int = STAMP, lift: float = 0.0) -> Any:
    pipe.on_odometry(odometry("rosbags", stamp, q_pin[:3] + [0, 0, lift], q_pin[3:7], np.zeros(6), "base_link"))
    n = len(q_pin) - 7
    return pipe.on_joint_state(ros_joint_state(stamp, list(pipe.model.joint_names), q_pin[7:], np.zeros(n), np.zeros(n)))


def flags(values: list[int]) -> Any:
    return T["std_msgs/msg/UInt8MultiArray"](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
                                             data=np.array(values, dtype=np.uint8))


def foot_wrench(stamp: int, link: str, fz: float) -> Any:
    sec, nsec = divmod(stamp, 10**9)
    V = T["geometry_msgs/msg/Vector3"]
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=link)
    return T["geometry_msgs/msg/WrenchStamped"](header=header, wrench=T["geometry_msgs/msg/Wrench"](
        force=V(x=0.0, y=0.0, z=fz), torque=V(x=0.0, y=0.0, z=0.0)))


def config(**kw: Any) -> PipelineConfig:
    return PipelineConfig(contact_links=tuple(FEET), base_link="base_link", **kw)


def test_standing_torques_carry_the_weight_as_pinocchio_statics_demand(solo) -> None:
    model, pin_model, q = solo
    pipe = DynamicsPipeline(model, config(publish_unconstrained=True))
    out = feed(pipe, q)
    res = out.outputs
    # Pinocchio's statics: g(q) = [0; tau] + sum_i J_i^T f_i, J_i the feet's LOCAL linear Jacobians.
    data = pin_model.createData()
    g = pin.computeGeneralizedGravity(pin_model, data, q)
    pin.computeJointJacobians(pin_model, data, q)
    pin.updateFramePlacements(pin_model, data)
    J = np.vstack([pin.getFrameJacobian(pin_model, data, pin_model.getFrameId(f), pin.LOCAL)[:3] for f in FEET])
    f = res.contact_wrench[:, 3:].reshape(-1)
    np.testing.assert_allclose(np.concatenate([np.zeros(6), res.tau_ff]) + J.T @ f, g, atol=1e-10)
    # Minimum torque among all forces that hold the robot: the least-squares solution on the
    # null space of the base rows, from Pinocchio's matrices.
    G, H = J[:, :6].T, J[:, 6:].T
    f0 = np.linalg.lstsq(G, g[:6], rcond=None)[0]
    N = np.linalg.svd(G)[2][np.linalg.matrix_rank(G):].T
    z = np.linalg.lstsq(H @ N, g[6:] - H @ f0, rcond=None)[0]
    np.testing.assert_allclose(res.tau_ff, g[6:] - H @ (f0 + N @ z), atol=1e-10)
    # The feet carry the weight; the knees hold it, which the unconstrained torques miss.
    R = np.array([data.oMf[pin_model.getFrameId(f)].rotation for f in FEET])
    assert np.einsum("kij,kj->ki", R, res.contact_wrench[:, 3:])[:, 2].sum() == pytest.approx(9.81 * model.mass)
    knees = [j for j, n in enumerate(model.joint_names) if n.endswith("KFE")]
    assert np.all(np.abs(res.tau_ff[knees]) > 4 * np.abs(res.tau_free[knees]))
    np.testing.assert_allclose(res.tau_g, res.tau_ff, atol=1e-12)  # at rest
    assert not (res.checks.pulling.any() or res.checks.slipping.any() or res.checks.unbalanced)
    msgs = OutputMessageFactory(MessageClasses.from_typestore(TS), model, pipe.config).build(out)
    assert {f"contact_wrench/{f}" for f in FEET} <= set(msgs)
    assert msgs["contact_wrench/FL_FOOT"].header.frame_id == "FL_FOOT"
    assert msgs["contact_wrench/FL_FOOT"].wrench.force.z == pytest.approx(res.contact_wrench[0, 5])
    np.testing.assert_allclose(msgs["unconstrained/feedforward_torque"].effort, res.tau_free)


def test_topic_source_pairs_flags_by_stamp(solo) -> None:
    model, _, q = solo
    pipe = DynamicsPipeline(model, config(contact_source="topic", contact_max_age=0.02))
    assert feed(pipe, q) is None and pipe.stats.skipped == {SkipReason.NO_CONTACT_STATE: 1}
    assert pipe.on_contact_state(flags([1, 0, 0]), STAMP) is SkipReason.BAD_CONTACT_STATE
    pipe.on_contact_state(flags([1, 0, 0, 1]), STAMP - 5_000_000)
    out = feed(pipe, q)
    np.testing.assert_array_equal(out.outputs.contact_active, [True, False, False, True])
    # the node's raw take hands the flags read from the bytes: the same state
    raw = contact_flags_from_cdr(bytes(TS.serialize_cdr(flags([1, 0, 0, 1]), "std_msgs/msg/UInt8MultiArray")))
    assert pipe.on_contact_state(raw, STAMP - 5_000_000) is None
    np.testing.assert_array_equal(feed(pipe, q).outputs.contact_active, [True, False, False, True])
    assert pipe.on_contact_state(raw[:3], STAMP) is SkipReason.BAD_CONTACT_STATE
    pipe.on_contact_state(raw, STAMP - 5_000_000)
    assert out.outputs.contact_wrench[1:3].sum() == 0.0
    assert feed(pipe, q, STAMP + 30_000_000) is None
    assert pipe.stats.skipped[SkipReason.STALE_CONTACT_STATE] == 1
    assert pipe.stats.skipped[SkipReason.BAD_CONTACT_STATE] == 2


@pytest.mark.parametrize("little_endian", [True, False])
def test_contact_flags_read_from_their_bytes_as_rosbags_deserializes_them(little_endian: bool) -> None:
    """The node takes contact states raw: the flags read from the CDR bytes equal rosbags'
    deserialization (lengths 0 to 6, so the trailing padding varies; any uint8), and what the
    bytes cannot give (a layout with dimensions, another encapsulation, bytes cut short) is None,
    for the node to deserialize."""
    kind = "std_msgs/msg/UInt8MultiArray"
    for values in ([], [1], [0, 1, 0, 1], [0, 255, 2, 1, 0], [1, 1, 0, 0, 1, 3]):
        data = bytes(TS.serialize_cdr(flags(values), kind, little_endian=little_endian))
        assert data[:2] == (b"\x00\x01" if little_endian else b"\x00\x00")
        read = contact_flags_from_cdr(data)
        assert read is not None and read.dtype == np.uint8
        np.testing.assert_array_equal(read, TS.deserialize_cdr(data, kind).data)
        assert contact_flags_from_cdr(data[:16 + len(values) - 1]) is None  # the last flag cut off
    dims = T[kind](layout=T["std_msgs/msg/MultiArrayLayout"](
        dim=[T["std_msgs/msg/MultiArrayDimension"](label="feet", size=4, stride=4)], data_offset=0),
        data=np.array([1, 0, 0, 1], dtype=np.uint8))
    assert contact_flags_from_cdr(bytes(TS.serialize_cdr(dims, kind, little_endian=little_endian))) is None
    assert contact_flags_from_cdr(b"\x00\x03\x00\x00" + bytes(16)) is None  # not plain CDR


def test_wrench_source_thresholds_each_foot(solo) -> None:
    model, _, q = solo
    pipe = DynamicsPipeline(model, config(contact_source="wrench", contact_force_threshold=5.0))
    for i, (foot, fz) in enumerate(zip(FEET[:3], (12.0, 1.0, 3.0))):
        pipe.on_contact_wrench(i, foot_wrench(STAMP, foot, fz))
    assert feed(pipe, q) is None and pipe.stats.skipped == {SkipReason.NO_CONTACT_STATE: 1}  # HR silent
    pipe.on_contact_wrench(3, foot_wrench(STAMP - 40_000_000, FEET[3], 11.0))
    assert feed(pipe, q) is None and pipe.stats.skipped[SkipReason.STALE_CONTACT_STATE] == 1
    pipe.on_contact_wrench(3, foot_wrench(STAMP, FEET[3], 11.0))
    np.testing.assert_array_equal(feed(pipe, q).outputs.contact_active, [True, False, False, True])


def test_kinematic_source_and_flight(solo) -> None:
    model, _, q = solo
    pipe = DynamicsPipeline(model, config(contact_source="kinematic"), log=lambda text: None)
    assert feed(pipe, q).outputs.contact_active.all()
    flying = feed(pipe, q, STAMP + 1_000_000, lift=0.1).outputs  # every foot 10 cm up: flight
    assert not flying.contact_active.any()
    pose = core.pose_from_position_quaternion(q[:3] + [0, 0, 0.1], q[3:7])
    free = compute_outputs(model, q[7:], np.zeros(18), np.zeros(18), np.zeros(12), pose)
    np.testing.assert_allclose(flying.tau_ff, free.tau_ff)
    np.testing.assert_allclose(flying.base_acc_pred, free.base_acc_pred)  # falls freely
    assert flying.base_acc_pred[3:] @ (pose[:3, :3].T @ np.array([0, 0, 1.0])) < -9.0


@pytest.mark.parametrize("kw, message", [
    (dict(contact_links=("FL_FOOT", "PAW")), "contact_links: ['PAW']"),
    (dict(contact_links=("FL_FOOT",), friction_coefficient=0.0), "friction_coefficient"),
    (dict(contact_links=("FL_FOOT",), contact_types=("line",)), "contact_types"),
    (dict(contact_links=("FL_FOOT",), contact_source="pressure"), "contact_source"),
    (dict(contact_links=("FL_FOOT",), contact_sole_size=(0.1, 0.05)), "contact_sole_size: .* no contact is flat"),
    (dict(contact_links=("FL_FOOT", "FR_FOOT"), contact_types=("flat",), contact_sole_size=(0.1, 0.05, 0.1)),
     "contact_sole_size: .* per flat contact"),
    (dict(contact_links=("FL_FOOT",), contact_types=("flat",), contact_sole_size=(0.1, 0.0)),
     "contact_sole_size: .* both half-lengths"),
    (dict(contact_links=("FL_FOOT",), contact_types=("flat",), contact_sole_size=(0.1, -0.05)),
     "contact_sole_size: .* >= 0"),
])
def test_bad_contact_configuration_is_refused_by_name(solo, kw, message) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        DynamicsPipeline(solo[0], PipelineConfig(**kw))


def test_contacts_resolve_on_merged_links_with_offsets(solo) -> None:
    contacts = resolve_contacts(solo[0], PipelineConfig(contact_links=("FL_FOOT", "HR_FOOT"),
                                                        contact_types=("point", "flat"),
                                                        contact_offsets=(0, 0, -0.01, 0, 0, 0.02)))
    assert contacts is not None and contacts.kinds == ("point", "flat") and list(contacts.rows) == [0, 3, 9]
    np.testing.assert_allclose(contacts.offsets[:, 2], [-0.01, 0.02])


@pytest.mark.parametrize("soles", [(True, True), (True, False), (False, True)])
def test_humanoid_on_flat_soles_balances_as_pinocchio_statics_demand(soles) -> None:
    """Talos at rest on both soles or one (a square A_p^T: unique forces): the torques and sole
    wrenches satisfy g(q) = [0; tau] + sum J_i^T w_i with Pinocchio's LOCAL sole Jacobians."""
    robot = contact_sim.talos()
    model = core.load_urdf(str(robot.urdf), floating_base=True)
    pin_model = pin.buildModelFromUrdf(str(robot.urdf), pin.JointModelFreeFlyer())
    q = contact_sim.standing_posture(pin_model, robot.posture)
    order = [list(pin_model.names[2:]).index(j) for j in model.joint_names]
    config = PipelineConfig(contact_links=robot.feet, contact_types=("flat",))
    contacts = resolve_contacts(model, config)
    pose = core.pose_from_position_quaternion(q[:3], q[3:7])
    v = np.zeros(model.nv)
    out = compute_contact_outputs(model, contacts, q[7:][order], v, v.copy(), None, pose, np.array(soles))
    data = pin_model.createData()
    g = pin.computeGeneralizedGravity(pin_model, data, q)
    pin.computeJointJacobians(pin_model, data, q)
    pin.updateFramePlacements(pin_model, data)
    total = np.zeros(pin_model.nv)
    for i, sole in enumerate(robot.feet):
        J = pin.getFrameJacobian(pin_model, data, pin_model.getFrameId(sole), pin.LOCAL)
        m, f = out.contact_wrench[i, :3], out.contact_wrench[i, 3:]
        total += J.T @ np.concatenate([f, m])  # pinocchio's wrench order: (f, m)
    tau_pin = np.zeros(pin_model.nv - 6)
    tau_pin[order] = out.tau_ff
    np.testing.assert_allclose(np.concatenate([np.zeros(6), tau_pin]) + total, g, atol=1e-8 * np.abs(g).max())
    assert not out.checks.unbalanced


def test_prepare_kernels_runs_the_contact_path_and_the_observer(solo, monkeypatch) -> None:
    """The node builds the kernels of a contact pipeline before its first sample (found live: the
    first sample with efforts held the node for seconds, minutes on a cold cache): the contact
    path with every contact down (the compiled sample, and the general path that takes the samples it
    declines) and the observer's step run once here, and leave no state."""
    from liedyn_ros.pipeline.routes import ContactRoute

    model = solo[0]
    calls: list[str] = []
    real_contact, real_update = ContactRoute.outputs, core.MomentumObserver.update
    monkeypatch.setattr(ContactRoute, "outputs", lambda self, *a, **k: calls.append(
        "contacts, general path" if k.get("ff_state") is not None else "contacts") or real_contact(self, *a, **k))
    monkeypatch.setattr(core.MomentumObserver, "update",
                        lambda self, *a, **k: calls.append("observer") or real_update(self, *a, **k))
    pipe = DynamicsPipeline(model, config())
    assert pipe.prepare_kernels() >= 0.0
    assert calls == ["contacts", "contacts, general path", "observer", "observer"]
    assert pipe.stats.published == 0 and pipe.collision is None


# ------------------------------------------------------------------ centre of pressure, /diagnostics

SOLE = (0.1, 0.05)  # half-lengths of a Talos-sized sole, m


def test_centre_of_pressure_of_corner_forces_is_their_weighted_centroid(solo) -> None:
    """Point forces at the sole's corners (p_z = 0, tangential parts too) give a wrench whose CoP
    is their f_z-weighted centroid; tipping holds exactly when no pressure (f_z >= 0 at the
    corners) realises (m_x, m_y, f_z), found independently by non-negative least squares."""
    from scipy.optimize import nnls

    from liedyn_ros.pipeline import centre_of_pressure, check_tipping

    # Two soles of different sizes (one pair per flat contact), a point contact between them.
    config = PipelineConfig(contact_links=("FL_FOOT", "FR_FOOT", "HL_FOOT"), contact_types=("flat", "point", "flat"),
                            contact_sole_size=(*SOLE, 0.2, 0.1))
    contacts = resolve_contacts(solo[0], config)
    np.testing.assert_array_equal(contacts.soles, [SOLE, (0, 0), (0.2, 0.1)])
    rng = np.random.default_rng(3)
    tipped = 0
    for trial in range(200):
        i = 2 * (trial % 2)  # a flat contact
        a, b = contacts.soles[i]
        corners = np.array([[sx * a, sy * b, 0.0] for sx in (1, -1) for sy in (1, -1)])
        f = np.column_stack([rng.normal(0, 5, (4, 2)), rng.uniform(-40 if trial >= 20 else 0, 100, 4)])
        wrench = np.zeros((3, 6))
        wrench[i] = np.concatenate([np.cross(corners, f).sum(axis=0), f.sum(axis=0)])
        if trial < 20:  # all corners pushing: the CoP is their centroid, inside the sole
            np.testing.assert_allclose(centre_of_pressure(wrench[i]), f[:, 2] @ corners[:, :2] / f[:, 2].sum(),
                                       atol=1e-12)
        active = np.ones(3, dtype=bool)
        tipping = check_tipping(contacts, wrench, active, np.zeros(3, dtype=bool))
        assert not tipping[[1, 2 - i]].any()  # the point contact, the other sole (unloaded)
        # Pressures p >= 0 at the corners with sum p (y, -x, 1) = (m_x, m_y, f_z)?
        A = np.vstack([corners[:, 1], -corners[:, 0], np.ones(4)])
        residual = nnls(A, wrench[i, [0, 1, 5]])[1]
        carried = residual < 1e-9 * np.abs(wrench[i]).max()
        assert tipping[i] == (not carried), (trial, residual)
        tipped += tipping[i]
        assert not check_tipping(contacts, wrench, ~active, np.zeros(3, dtype=bool)).any()  # inactive
    assert 20 < tipped < 180  # both kinds were drawn
    pulled = np.zeros((3, 6))
    pulled[0, [0, 5]] = 1.0, -10.0  # pulling, and counted as such only
    assert not check_tipping(contacts, pulled, np.ones(3, dtype=bool), np.array([True, False, False])).any()


def talos_on_left_sole(lean: float) -> tuple[Any, np.ndarray]:
    """(Pinocchio model, q) of Talos leaning sideways by ``lean`` rad (left hip roll +lean, ankle
    roll -lean) with its left sole flat at the world origin."""
    robot = contact_sim.talos()
    pin_model = pin.buildModelFromUrdf(str(robot.urdf), pin.JointModelFreeFlyer())
    data = pin_model.createData()
    q = contact_sim.standing_posture(pin_model, robot.posture | {"leg_left_2_joint": lean, "leg_left_6_joint": -lean})
    pin.framesForwardKinematics(pin_model, data, q)
    base = data.oMf[pin_model.getFrameId("left_sole_link")].inverse()
    q[:3], q[3:7] = base.translation, pin.Quaternion(base.rotation).coeffs()
    return pin_model, q


def test_talos_leaning_on_one_sole_tips_where_its_centre_of_mass_leaves_the_sole() -> None:
    """Talos at rest on its left sole: the sole wrench is unique and the CoP lies under Pinocchio's
    centre of mass. Standing straight (its weight between the feet) and leaning beyond the outer
    edge it tips, leaning over the sole it does not; /diagnostics warns with the counts and the
    sole's name while it tips and is OK again after a period without."""
    from liedyn_ros.pipeline import DiagnosticsReporter, Level, centre_of_pressure

    robot = contact_sim.talos()
    model = core.load_urdf(str(robot.urdf), floating_base=True)
    clock = [0.0]
    pipe = DynamicsPipeline(model, PipelineConfig(contact_links=robot.feet, contact_types=("flat",),
                                                  contact_sole_size=SOLE, contact_source="topic",
                                                  external_torque_observer=False))
    reporter = DiagnosticsReporter(clock=lambda: clock[0])
    n = model.n
    for step, (lean, tips) in enumerate(((0.0, True), (-0.14, False), (-0.26, True), (-0.14, False))):
        pin_model, q = talos_on_left_sole(lean)
        com = pin.centerOfMass(pin_model, pin_model.createData(), q)
        stamp = STAMP + step * 10**9
        pipe.on_odometry(odometry("rosbags", stamp, q[:3], q[3:7], np.zeros(6), model.root_link))
        pipe.on_contact_state(flags([1, 0]), stamp)
        names = list(pin_model.names[2:])
        out = pipe.on_joint_state(ros_joint_state(stamp, names, q[7:], np.zeros(n), np.zeros(n))).outputs
        np.testing.assert_allclose(centre_of_pressure(out.contact_wrench[0]), com[:2], atol=1e-9)
        assert (np.abs(com[:2]) > SOLE).any() == tips, (lean, com)
        clock[0] += 1.0
        report = reporter.report(pipe, "talos")
        values = dict(report.values)
        assert values["contact_tipping"] == str(pipe.stats.contact_tipping)
        if tips:
            assert report.level is Level.WARN, report
            assert report.message == "contact forces not physical in the last 1.0 s: 1 tipping (left_sole_link)"
            assert values["contact_tipping_links"] == "left_sole_link"
        else:
            assert report.level is Level.OK and report.message == "ok", report
    assert pipe.stats.contact_tipping == 2 and pipe.stats.contact_pulling == 0


def test_diagnostics_levels_follow_what_happened_since_the_previous_report(solo) -> None:
    """OK; WARN for skips, contact violations (with the latest offending links) and collisions
    since the report before; OK again once they stop; ERROR without a model; a rebuilt pipeline
    starts from zero."""
    from liedyn_ros.pipeline import DiagnosticsReporter, Level

    clock = [0.0]
    reporter = DiagnosticsReporter(clock=lambda: clock[0])
    assert reporter.report(None, "waiting for robot_description") == (
        Level.ERROR, "waiting for robot_description", (("model", "waiting for robot_description"),))
    pipe = DynamicsPipeline(solo[0], config(contact_source="topic"))
    q = solo[2]
    for step in range(4):
        feed(pipe, q, STAMP + step * 1_000_000)  # no contact state yet: skipped
    clock[0] = 2.0
    report = reporter.report(pipe, "solo")
    assert report.level is Level.WARN and report.message == "4 samples skipped"
    values = dict(report.values)
    assert values["input_rate_hz"] == "2.0" and values["skipped_no_contact_state"] == "4"
    assert values["contact_pulling"] == "0" and values["contact_pulling_links"] == ""
    clock[0] = 3.0
    assert reporter.report(pipe, "solo")[:2] == (Level.OK, "ok")
    stats = pipe.stats  # violations as _outputs counts them
    stats.contact_pulling, stats.contact_slipping, stats.contact_unbalanced = 2, 3, 1
    stats.contact_offenders |= {"pulling": ("FL_FOOT", "HR_FOOT"), "slipping": ("FR_FOOT",)}
    clock[0] = 3.5
    report = reporter.report(pipe, "solo")
    assert report.level is Level.WARN and report.message == (
        "contact forces not physical in the last 0.5 s: 2 pulling (FL_FOOT, HR_FOOT), "
        "3 outside friction cone (FR_FOOT), 1 unbalanced")
    values = dict(report.values)
    assert values["contact_pulling_links"] == "FL_FOOT, HR_FOOT" and values["contact_outside_friction_cone"] == "3"
    clock[0] = 4.5
    report = reporter.report(pipe, "solo")
    assert report[:2] == (Level.OK, "ok") and dict(report.values)["contact_pulling"] == "2"  # totals stay
    pipe.collision = core.Collision(STAMP, None, 2, 12.5)
    stats.collisions = 1
    assert reporter.report(pipe, "solo")[:2] == (Level.WARN, f"collision on {solo[0].joint_names[2]} (1 so far)")
    rebuilt = DynamicsPipeline(solo[0], config())
    feed(rebuilt, q)
    clock[0] = 5.5
    report = reporter.report(rebuilt, "solo")
    assert report[:2] == (Level.OK, "ok") and dict(report.values)["input_rate_hz"] == "1.0"


def test_a_block_takes_the_compiled_sample_and_the_general_path_for_what_it_declines(solo) -> None:
    """A replay block mixing four feet, two feet (no force balances an arbitrary acceleration: the
    least-squares general path), flight and a sample without efforts: every row equals that sample
    computed alone by the general path (``ff_state`` forces it), which the tests above hold against
    Pinocchio."""
    model = solo[0]
    contacts = resolve_contacts(model, config())
    rng = np.random.default_rng(5)
    B = 5
    q = np.tile([0.0, 0.8, -1.6], (B, 4)) + rng.normal(scale=0.1, size=(B, 12))
    v, a = rng.normal(size=(B, 18)), rng.normal(size=(B, 18))
    pose = np.stack([np.eye(4)] * B)
    pose[:, 2, 3] = 0.3
    effort = rng.normal(size=(B, 12))
    effort[3] = np.nan
    active = np.array([[1, 1, 1, 1], [1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 0, 1], [1, 1, 1, 1]], dtype=bool)
    block = compute_contact_outputs(model, contacts, q, v, a, effort, pose, active, friction=core.Friction(
        coulomb=np.full(12, 0.1), viscous=np.full(12, 0.02)))
    for b in range(B):
        one = compute_contact_outputs(model, contacts, q[b], v[b], a[b], None if b == 3 else effort[b], pose[b],
                                      active[b], ff_state=(q[b], v[b]), friction=core.Friction(
                                          coulomb=np.full(12, 0.1), viscous=np.full(12, 0.02)))
        for name, x, y in zip(one._fields, block.row(b), one):
            if name == "checks":
                for xs, ys in zip(x, y):
                    np.testing.assert_array_equal(xs, ys)
            elif name in ("qdd_pred", "base_acc_pred") and b == 3:
                assert np.isnan(x).all()
            elif y is not None:
                np.testing.assert_allclose(x, y, rtol=1e-8, atol=1e-8, err_msg=f"row {b}: {name}")
    assert block.checks.unbalanced[1] and not block.checks.unbalanced[0]


def test_stats_count_every_violation_the_published_checks_show(solo) -> None:
    """/diagnostics' counts are what the published samples flag, whichever way the stream counts them
    (a sample with only the base unbalanced, two diagonal feet down, takes a shorter way than one
    with a foot pulling or slipping): flags switching on a moving recording give all three kinds."""
    model = solo[0]
    rec = contact_sim.simulate(first_s=0.08, second_s=0.0)
    pipe = DynamicsPipeline(model, config(contact_source="topic", contact_max_age=0.02))
    counts = {"pulling": 0, "slipping": 0, "unbalanced": 0}
    offenders: dict[str, tuple[str, ...]] = {}
    for k in range(len(rec.t)):
        stamp = STAMP + int(rec.t[k] * 1e9)
        q, v = rec.q[k], rec.v[k]
        pipe.on_odometry(odometry("rosbags", stamp, q[:3], q[3:7], np.concatenate([v[3:6], v[:3]]), "base_link"))
        pipe.on_contact_state(flags([int((k // 8 + i) % 3 != 0) for i in range(4)]), stamp)
        out = pipe.on_joint_state(ros_joint_state(stamp, list(model.joint_names), q[7:], v[6:], rec.tau[k]))
        checks = out.outputs.checks
        for kind in ("pulling", "slipping"):
            flagged = getattr(checks, kind).tolist()
            counts[kind] += sum(flagged)
            if any(flagged):
                offenders[kind] = tuple(link for link, bad in zip(FEET, flagged) if bad)
        counts["unbalanced"] += bool(checks.unbalanced)
    stats = pipe.stats
    assert min(counts.values()) > 0, counts  # every way of counting was taken
    assert (stats.contact_pulling, stats.contact_slipping, stats.contact_unbalanced) == \
        (counts["pulling"], counts["slipping"], counts["unbalanced"])
    assert stats.contact_offenders == offenders


@pytest.mark.parametrize("offset", [(0.0, 0.0, 0.0), (0.01, -0.02, -0.015)])
def test_contact_wrenches_about_the_link_origins(solo, offset) -> None:
    """wrench_at_link (the contact_wrench/<link> messages): a wrench (m, f) at the contact point p is
    (m + p x f, f) about the link origin; with every p zero, the same values."""
    model = solo[0]
    contacts = resolve_contacts(model, config(contact_offsets=offset))
    wrench = np.random.default_rng(3).normal(size=(5, 4, 6))
    expected = wrench.copy()
    expected[..., :3] += np.cross(np.asarray(offset), wrench[..., 3:])
    np.testing.assert_allclose(wrench_at_link(contacts, wrench), expected, rtol=0, atol=1e-15)
