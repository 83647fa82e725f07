"""Joint states read from their CDR bytes (issue 24: the node's joint state subscription is raw):
pipeline.cdr.JointStateBytes gives what rosbags' deserialization gives, for the awkward messages
too (empty effort, names only, big-endian, NaN and infinities, many joints, empty and non-ASCII
names), learns each new layout once, and hands anything it cannot read that way (not plain CDR,
a layout its check refuses, bytes cut short) to the full deserialization. Without ROS;
test_serialized_ros.py checks the same against rclpy under a real ROS 2.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fake_ros import Node, load_node_module
from rosbags.typesys import Stores, get_typestore
from test_node_robustness import ARM, JOINTS, MS, Q, held_still, pin_gravity

from liedyn_ros.pipeline.cdr import JointStateBytes, JointStateFields

TS = get_typestore(Stores.ROS2_HUMBLE)
T = TS.types
JS = "sensor_msgs/msg/JointState"


def joint_state(stamp_ns: int, frame: str, names: list[str], position: Any, velocity: Any, effort: Any) -> Any:
    sec, nanosec = divmod(stamp_ns, 10**9)
    return T[JS](header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                                 frame_id=frame),
                 name=names, position=np.ascontiguousarray(position, dtype=np.float64),
                 velocity=np.ascontiguousarray(velocity, dtype=np.float64),
                 effort=np.ascontiguousarray(effort, dtype=np.float64))


def awkward(rng: np.random.Generator) -> dict[str, Any]:
    """JointStates a driver may send, each a layout of its own."""
    n7 = [f"panda_joint{i}" for i in range(1, 8)]
    many = [f"j{i}" for i in range(300)]
    r = lambda n: rng.normal(size=n)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 5e-324, 1.7e308, -np.nan])
    return {
        "plain": joint_state(1_500_000_001, "", n7, r(7), r(7), r(7)),
        "empty effort": joint_state(2 * 10**9, "base", n7, r(7), r(7), []),
        "names only": joint_state(3, "", n7, [], [], []),
        "nothing at all": joint_state(4, "", [], [], [], []),
        "no names": joint_state(5, "", [], r(3), r(3), r(3)),
        "NaN, infinities, subnormal": joint_state(6, "world", n7, special, special[::-1], special),
        "many joints": joint_state(7, "odom", many, r(300), r(300), r(300)),
        "empty and non-ASCII names": joint_state(8, "bâse", ["", "épaule", "", "コ"], r(4), r(4), []),
        "odd lengths": joint_state(-9, "x" * 13, ["a", "bc", "def"], r(3), r(2), r(1)),
        "frame padding": joint_state(10, "abc", ["a"], r(1), r(1), r(1)),
        "empty position": joint_state(11, "", n7[:2], [], r(2), r(2)),
        "velocity alone": joint_state(12, "", n7[:2], [], r(2), []),
    }


def assert_same(got: Any, msg: Any) -> None:
    """``got`` (what JointStateBytes read) has the message's fields, bit for bit."""
    assert tuple(got.name) == tuple(msg.name)
    assert str(got.header.frame_id) == msg.header.frame_id
    assert (got.header.stamp.sec, got.header.stamp.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
    for field in ("position", "velocity", "effort"):
        want, have = getattr(msg, field), np.asarray(getattr(got, field), dtype=np.float64)
        assert have.shape == want.shape and have.tobytes() == want.tobytes(), field


@pytest.mark.parametrize("little_endian", [True, False], ids=["little-endian", "big-endian"])
def test_every_awkward_joint_state_reads_as_rosbags_deserializes_it(little_endian: bool) -> None:
    rng = np.random.default_rng(3)
    deserialized: list[bytes] = []

    def deserialize(data: bytes) -> Any:
        deserialized.append(data)
        return TS.deserialize_cdr(data, JS)

    reader = JointStateBytes(deserialize)
    for what, msg in awkward(rng).items():
        data = bytes(TS.serialize_cdr(msg, JS, little_endian=little_endian))
        got = reader.read(data)
        assert isinstance(got, JointStateFields), what  # read from the bytes, not the deserialized message
        assert_same(got, TS.deserialize_cdr(data, JS))
        assert_same(got, msg)
        # The same layout with another stamp and other values: read by views, not deserialized again.
        calls = len(deserialized)
        n = len(msg.position), len(msg.velocity), len(msg.effort)
        again = joint_state(msg.header.stamp.sec * 10**9 + 77, msg.header.frame_id, list(msg.name),
                            rng.normal(size=n[0]), rng.normal(size=n[1]), rng.normal(size=n[2]))
        got = reader.read(bytes(TS.serialize_cdr(again, JS, little_endian=little_endian)))
        assert isinstance(got, JointStateFields) and len(deserialized) == calls, what
        assert_same(got, again)


def test_a_new_layout_is_learnt_and_checked_once() -> None:
    """Layouts alternating (two drivers on one topic): each change of layout is parsed and checked
    against the deserializer, each repetition read by views; stamps and values never count as
    layout."""
    rng = np.random.default_rng(5)
    calls: list[bytes] = []
    reader = JointStateBytes(lambda data: calls.append(data) or TS.deserialize_cdr(data, JS))
    a = lambda k: joint_state(k * MS, "", JOINTS, rng.normal(size=2), rng.normal(size=2), rng.normal(size=2))
    b = lambda k: joint_state(k * MS, "", JOINTS[::-1], rng.normal(size=2), rng.normal(size=2), [])
    for make, repeats in ((a, 5), (b, 3), (a, 1), (a, 4), (b, 2)):
        for k in range(repeats):
            msg = make(k + 1)
            assert_same(reader.read(bytes(TS.serialize_cdr(msg, JS))), msg)
    assert len(calls) == 4  # a, b, a, b: four changes of layout


def test_what_cannot_be_read_from_the_bytes_is_deserialized() -> None:
    rng = np.random.default_rng(7)
    msg = joint_state(10**9, "", JOINTS, rng.normal(size=2), rng.normal(size=2), rng.normal(size=2))
    data = bytes(TS.serialize_cdr(msg, JS))

    # Not plain CDR (another encapsulation, e.g. XCDR2's 00 07): the middleware's deserialization,
    # whatever it gives.
    other = b"\x00\x07" + data[2:]
    marker = object()
    assert JointStateBytes(lambda d: marker if d == other else None).read(other) is marker

    # A layout whose reading disagrees with the deserializer's is never trusted: every message
    # of it is the deserializer's.
    def shifted(d: bytes) -> Any:
        m = TS.deserialize_cdr(d, JS)
        m.position = m.position + 1.0
        return m

    liar = JointStateBytes(shifted)
    for k in range(3):
        again = joint_state(10**9 + k, "", JOINTS, rng.normal(size=2), rng.normal(size=2), rng.normal(size=2))
        got = liar.read(bytes(TS.serialize_cdr(again, JS)))
        assert not isinstance(got, JointStateFields)
        np.testing.assert_array_equal(got.position, again.position + 1.0)

    # Cut short, or trailing bytes that are not padding: the deserializer's verdict (here it
    # refuses), never numbers read from the wrong bytes.
    reader = JointStateBytes(lambda d: TS.deserialize_cdr(d, JS))
    assert isinstance(reader.read(data), JointStateFields)
    for bad in (data[:-8], data + bytes(8)):
        with pytest.raises(Exception):  # noqa: B017 - rosbags' own exception for a bad message
            reader.read(bad)


def test_the_node_answers_joint_states_of_either_byte_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's raw subscription (fake_ros hands it CDR bytes, as rclpy does): little- and
    big-endian joint states give Pinocchio's gravity torques, stamped as sent."""
    monkeypatch.setattr(Node, "OVERRIDES", {"robot_description": ARM})
    node = load_node_module(monkeypatch).DynamicsNode()
    for k, shaped in enumerate(held_still([(k + 1) * MS for k in range(4)], np.zeros(2))):
        msg = joint_state((k + 1) * MS, "", list(shaped.name), shaped.position, shaped.velocity, shaped.effort)
        node.callbacks["joint_states"](bytes(TS.serialize_cdr(msg, JS, little_endian=k % 2 == 0)))
    sent = node.outputs["gravity_torque"].sent
    assert [s.header.stamp.nanosec for s in sent] == [(k + 1) * MS for k in range(4)]
    for s in sent:
        np.testing.assert_allclose(s.effort, pin_gravity(Q), atol=1e-12)


def test_node_and_replay_refuse_a_layout_on_the_same_disagreements() -> None:
    """pipeline.cdr.reading_agrees is the one check of both readers: a deserializer that differs
    from the bytes' reading in one bit of a value (0.0 against -0.0, another NaN payload), a name,
    the frame id, a nanosecond or one array's length makes the node's JointStateBytes and the
    replay's JointStateReader hand out what it deserialized, message after message."""
    from liedyn_ros.replay.cdr import JointStateReader

    other_nan = np.frombuffer((np.frombuffer(np.float64(np.nan).tobytes(), np.uint64) | 1).tobytes(), np.float64)[0]
    msg = joint_state(10**9 + 5, "base", ["a", "b"], [0.0, np.nan], [1.0, 2.0], [3.0, 4.0])
    data = bytes(TS.serialize_cdr(msg, JS))

    def changed(change: Any) -> Any:
        def deserialize(d: bytes) -> Any:
            m = TS.deserialize_cdr(d, JS)
            change(m)
            return m
        return deserialize

    def set_position(m: Any, values: list[float]) -> None:
        m.position = np.array(values)

    def set_stamp(m: Any) -> None:
        m.header.stamp.nanosec += 1

    def set_name(m: Any) -> None:
        m.name = ["a", "c"]

    def set_frame(m: Any) -> None:
        m.header.frame_id = "odom"

    changes = {"-0.0": lambda m: set_position(m, [-0.0, np.nan]), "NaN payload": lambda m: set_position(m, [0.0, other_nan]),
               "name": set_name, "frame id": set_frame, "stamp": set_stamp,
               "length": lambda m: setattr(m, "effort", m.effort[:1])}
    assert JointStateBytes(changed(lambda m: None)).read(data).__class__ is JointStateFields  # unchanged: agreed
    for what, change in changes.items():
        deserialize = changed(change)
        node = JointStateBytes(deserialize)
        for _ in range(2):
            got = node.read(data)
            assert not isinstance(got, JointStateFields), what
            assert_same(got, deserialize(data))
        groups, failed = JointStateReader(deserialize).read([data, data])
        assert failed.size == 0 and [rows.tolist() for rows, _ in groups] == [[0], [1]], what  # one by one
        want = deserialize(data)
        for _, arrays in groups:
            assert arrays.names == tuple(want.name) and arrays.frame_id == (want.header.frame_id,), what
            assert all(np.asarray(getattr(arrays, f))[0].tobytes() == np.asarray(getattr(want, f)).tobytes()
                       for f in ("position", "velocity", "effort")), what


@pytest.mark.parametrize("little_endian", [True, False], ids=["little-endian", "big-endian"])
def test_decoding_from_the_bytes_grid_equals_decoding_the_deserialized_message(little_endian: bool) -> None:
    """pipeline.decode gathers a joint state read from its bytes straight from their float64 grid
    (JointStateFields.grid); for every awkward message, and models whose joints it has in another
    order, lacks or has among 300, that decoding equals the decoding of rosbags' deserialization
    of the same bytes, bit for bit (or the same skip reason)."""
    from types import SimpleNamespace

    from liedyn_ros.pipeline.decode import JointSample, JointStateDecoder

    models = [("panda_joint3", "panda_joint1", "panda_joint7"), ("j5", "j299", "j0"), ("épaule", "コ")]
    decoders = [JointStateDecoder(SimpleNamespace(joint_names=names)) for names in models]
    reader, gridded = JointStateBytes(lambda d: TS.deserialize_cdr(d, JS)), 0
    for what, msg in awkward(np.random.default_rng(5)).items():
        data = bytes(TS.serialize_cdr(msg, JS, little_endian=little_endian))
        got, want = reader.read(data), TS.deserialize_cdr(data, JS)
        gridded += got.grid is not None
        for decoder in decoders:
            a, b = decoder.decode(got), decoder.decode(want)
            assert type(a) is type(b), what
            if isinstance(b, JointSample):
                assert (a.stamp_ns, a.frame_id) == (b.stamp_ns, b.frame_id), what
                for x, y in ((a.q, b.q), (a.qd, b.qd), (a.effort, b.effort)):
                    assert (x is None and y is None) or x.tobytes() == y.tobytes(), what
            else:
                assert a is b, what
    # the grid serves this machine's byte order alone, and one value per name in position and velocity
    # (plain, empty effort, NaN, many joints, non-ASCII names, frame padding)
    assert gridded == (6 if little_endian else 0)
