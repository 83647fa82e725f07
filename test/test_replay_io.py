"""The replay's fast byte paths against rosbags: JointState CDR reading, output CDR encoding,
block MCAP writing. Each must give exactly what rosbags gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import pipeline
from liedyn_ros.replay import mcapblock
from liedyn_ros.replay.cdr import JointStateReader, parse_layout
from liedyn_ros.replay.outputs import TemplateEncoder

STORES = [Stores.ROS2_HUMBLE, Stores.ROS2_JAZZY]
JS = "sensor_msgs/msg/JointState"


def joint_state(ts: Any, stamp: int, frame: str, names: list[str], pos, vel, eff) -> Any:
    t = ts.types
    sec, nsec = divmod(stamp, 1_000_000_000)
    header = t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame)
    arr = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return t[JS](header=header, name=names, position=arr(pos), velocity=arr(vel), effort=arr(eff))


def mixed_messages(ts: Any, rng: np.random.Generator, count: int = 300) -> list[bytes]:
    """Interleaved layouts: frame ids and names of every length mod 4 (alignment), empty and
    mismatched arrays, NaN and inf values, negative and large stamps."""
    layouts = [
        ("", ["a", "bb", "ccc"], 3, 3, 3),
        ("base", ["joint_1", "j2"], 2, 2, 0),
        ("xy", ["q"], 1, 0, 1),
        ("odd_frame", ["a", "bb", "ccc", "dddd", "eeeee"], 5, 5, 4),
        ("f", [], 0, 0, 0),
    ]
    datas = []
    for _ in range(count):
        frame, names, n_pos, n_vel, n_eff = layouts[rng.integers(len(layouts))]
        values = rng.standard_normal(n_pos + n_vel + n_eff) * 10.0 ** rng.integers(-5, 5)
        if rng.random() < 0.1 and len(values):
            values[rng.integers(len(values))] = rng.choice([np.nan, np.inf, -np.inf])
        stamp = int(rng.integers(-(2**40), 2**31 * 1_000_000_000))  # sec is an int32
        msg = joint_state(ts, stamp, frame, names, values[:n_pos], values[n_pos : n_pos + n_vel],
                          values[n_pos + n_vel :])
        datas.append(bytes(ts.serialize_cdr(msg, JS)))
    return datas


def rosbags_row(msg: Any) -> pipeline.JointStateArrays:
    """What rosbags decodes, as a chunk of one row."""
    one = pipeline.JointStateArrays.from_message(msg)
    return one._replace(stamp_ns=np.atleast_1d(one.stamp_ns), position=np.atleast_2d(one.position),
                        velocity=np.atleast_2d(one.velocity), effort=np.atleast_2d(one.effort))


def assert_same(got: pipeline.JointStateArrays, expected: pipeline.JointStateArrays) -> None:
    assert got.names == expected.names
    assert got.frame_id == expected.frame_id
    np.testing.assert_array_equal(got.stamp_ns, expected.stamp_ns)
    for a, b in ((got.position, expected.position), (got.velocity, expected.velocity),
                 (got.effort, expected.effort)):
        assert a.shape == b.shape and a.dtype == np.float64
        assert a.tobytes() == b.tobytes()  # bit for bit, NaN payloads and -0.0 included


def rows_of(groups: list[tuple[np.ndarray, pipeline.JointStateArrays]]) -> dict[int, pipeline.JointStateArrays]:
    """Split groups into one-row arrays keyed by row."""
    out = {}
    for rows, arrays in groups:
        for k, row in enumerate(rows.tolist()):
            assert row not in out
            out[row] = pipeline.JointStateArrays(
                arrays.names, arrays.stamp_ns[k : k + 1], arrays.frame_id[k : k + 1],
                arrays.position[k : k + 1], arrays.velocity[k : k + 1], arrays.effort[k : k + 1])
    return out


@pytest.mark.parametrize("store", STORES)
def test_joint_state_reader_equals_rosbags(store):
    ts = get_typestore(store)
    datas = mixed_messages(ts, np.random.default_rng(7))
    calls = []

    def deserialize(data: bytes) -> Any:
        calls.append(1)
        return ts.deserialize_cdr(data, JS)

    groups, failed = JointStateReader(deserialize).read(datas)
    assert failed.size == 0
    got = rows_of(groups)
    assert sorted(got) == list(range(len(datas)))
    for row, data in enumerate(datas):
        assert_same(got[row], rosbags_row(ts.deserialize_cdr(data, JS)))
    # Vectorised: rosbags only checks each of the five layouts once.
    assert len(calls) == 5
    assert len(groups) == 5


def test_reader_falls_back_to_rosbags_when_it_cannot_or_must_not_read():
    ts = get_typestore(Stores.ROS2_HUMBLE)
    msg = joint_state(ts, 5_000_000_007, "base", ["a", "b"], [1.0, 2.0], [3.0, 4.0], [])
    little = bytes(ts.serialize_cdr(msg, JS))
    big = bytes(ts.serialize_cdr(msg, JS, little_endian=False))
    assert parse_layout(big) is None and parse_layout(little) is not None
    groups, failed = JointStateReader(lambda d: ts.deserialize_cdr(d, JS)).read([big, little, little[:-9]])
    got = rows_of(groups)
    assert sorted(got) == [0, 1] and failed.tolist() == [2]  # the cut message cannot be read
    for row in (0, 1):
        assert_same(got[row], rosbags_row(msg))

    # A layout that disagrees with rosbags is never used: every message goes through rosbags.
    def shifted(data: bytes) -> Any:
        m = ts.deserialize_cdr(data, JS)
        m.position = m.position + 1.0
        return m

    groups, failed = JointStateReader(shifted).read([little, little])
    assert failed.size == 0 and len(groups) == 2
    for _, arrays in groups:
        np.testing.assert_array_equal(arrays.position, [[2.0, 3.0]])

    # ROS 1 bags are read by rosbags only.
    ros1 = get_typestore(Stores.ROS1_NOETIC)
    msg1 = ros1.types[JS](header=ros1.types["std_msgs/msg/Header"](
        seq=256, stamp=ros1.types["builtin_interfaces/msg/Time"](sec=1, nanosec=2), frame_id=""),
        name=["a"], position=np.array([1.0]), velocity=np.array([2.0]), effort=np.array([]))
    data = bytes(ros1.serialize_ros1(msg1, JS))
    groups, _ = JointStateReader(lambda d: ros1.deserialize_ros1(d, JS), cdr=False).read([data])
    assert_same(groups[0][1], rosbags_row(msg1))


OUTPUT_TYPES = {
    "sensor_msgs/msg/JointState": lambda f: (lambda s, fr, v: f.torque_state(f.header(s, fr), v)),
    "trajectory_msgs/msg/JointTrajectory": lambda f: (lambda s, fr, v: f.acceleration_trajectory(f.header(s, fr), v)),
    "geometry_msgs/msg/WrenchStamped": lambda f: (lambda s, fr, v: f.wrench(f.header(s, fr), v)),
    "geometry_msgs/msg/AccelStamped": lambda f: (lambda s, fr, v: f.accel(f.header(s, fr), v)),
}


class _Model:
    joint_names = ("shoulder", "elbow", "wrist_1", "w2", "wrist_three", "j6", "j7")
    floating_base = True
    root_link = "base"


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("msgtype", list(OUTPUT_TYPES))
def test_template_encoder_is_byte_identical_to_serialize_cdr(store, msgtype):
    ts = get_typestore(store)
    factory = pipeline.OutputMessageFactory(pipeline.MessageClasses.from_typestore(ts), _Model(),
                                            pipeline.PipelineConfig())
    build = OUTPUT_TYPES[msgtype](factory)
    k = 6 if "Stamped" in msgtype else len(_Model.joint_names)
    rng = np.random.default_rng(3)
    n = 200
    values = rng.standard_normal((n, k)) * 10.0 ** rng.integers(-300, 300, (n, k))
    values[0, :3] = [np.nan, -0.0, np.inf]
    stamps = rng.integers(0, 2**31 * 1_000_000_000, n)
    frames = tuple(rng.choice(["", "a", "base_link", "odom_frame"], n).tolist())
    encoder = TemplateEncoder(build, lambda m: bytes(ts.serialize_cdr(m, msgtype)), k)
    groups = encoder.encode(stamps, frames, values)
    seen = []
    for rows, payloads in groups:
        for row, payload in zip(rows.tolist(), payloads):
            expected = bytes(ts.serialize_cdr(build(int(stamps[row]), frames[row], values[row]), msgtype))
            assert payload.tobytes() == expected
            seen.append(row)
    assert sorted(seen) == list(range(n))
    assert all(layout is not None for layout in encoder._layouts.values())  # the patch path ran


def write_both(tmp_path: Path, blocks: list[tuple[str, np.ndarray, np.ndarray]]) -> tuple[Path, Path]:
    """The same messages through rosbags' Writer (one by one) and BlockWriter (per block)."""
    ts = get_typestore(Stores.ROS2_HUMBLE)
    topics = sorted({topic for topic, _, _ in blocks})
    ref, ours = tmp_path / "rosbags" / "bag", tmp_path / "block" / "bag"  # same name: it is in the file
    with Writer(ref, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {t: w.add_connection(t, "std_msgs/msg/String", typestore=ts) for t in topics}
        for topic, times, payloads in blocks:
            for t, p in zip(times.tolist(), payloads):
                w.write(conns[topic], t, p.tobytes())
    with mcapblock.BlockWriter(ours) as w:
        conns = {t: w.add_connection(t, "std_msgs/msg/String", typestore=ts) for t in topics}
        for topic, times, payloads in blocks:
            w.write_block(conns[topic], times, payloads)
    return ref, ours


def string_payloads(n: int, size: int, seed: int) -> np.ndarray:
    """(n, size) CDR std_msgs/String messages of `size - 9` letters (so rosbags can read them)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, size), dtype=np.uint8)
    out[:, :4] = [0, 1, 0, 0]
    out[:, 4:8] = np.array([size - 8], dtype="<u4").view(np.uint8)
    out[:, 8:-1] = rng.integers(97, 123, (n, size - 9))
    out[:, -1] = 0
    return out


def test_block_writer_file_is_byte_identical_to_rosbags_for_one_chunk(tmp_path):
    times = 1_000 + 10 * np.arange(300, dtype=np.int64)
    blocks = [("/a", times, string_payloads(300, 40, 0)), ("/b", times + 3, string_payloads(300, 64, 1)),
              ("/a", times + 5_000, string_payloads(300, 40, 2))]
    ref, ours = write_both(tmp_path, blocks)
    assert (ours / "bag.mcap").read_bytes() == (ref / "bag.mcap").read_bytes()
    assert (ours / "metadata.yaml").read_text() == (ref / "metadata.yaml").read_text()


def test_block_writer_many_chunks_read_back_in_time_order(tmp_path):
    n = 20_000  # 3 channels x 20,000 x ~100 bytes: several 1 MiB chunks
    times = 10**18 + 2_000_000 * np.arange(n, dtype=np.int64)
    blocks = []
    for begin in range(0, n, 4096):
        sl = slice(begin, begin + 4096)
        m = len(times[sl])
        blocks += [("/ff", times[sl], string_payloads(m, 96, begin)),
                   ("/g", times[sl], string_payloads(m, 96, begin + 1)),
                   ("/acc", times[sl] + 1, string_payloads(m, 120, begin + 2))]
    ref, ours = write_both(tmp_path, blocks)

    def read(path: Path) -> list[tuple[str, int, bytes]]:
        with AnyReader([path]) as reader:
            return [(c.topic, t, bytes(d)) for c, t, d in reader.messages()]

    got = read(ours)
    assert len(got) == 3 * n
    assert [t for _, t, _ in got] == sorted(t for _, t, _ in got)
    # Messages with the same log time keep the order they were written in (channel order).
    assert [topic for topic, _, _ in got[:3]] == ["/ff", "/g", "/acc"]
    assert sorted(got) == sorted(read(ref))
    assert (ours / "metadata.yaml").read_text() == (ref / "metadata.yaml").read_text()


@pytest.mark.parametrize("bare_file", [False, True])
def test_indexed_mcap_reader_yields_what_rosbags_yields(tmp_path, bare_file):
    """Several overlapping chunks (messages written channel by channel), three topics."""
    from rosbags.rosbag2 import Reader

    from liedyn_ros.replay.bagio import BagSet, IndexedMcapReader

    ts = get_typestore(Stores.ROS2_HUMBLE)
    path = tmp_path / "bag"
    n = 6_000
    times = 10**18 + 1_000_000 * np.arange(n, dtype=np.int64)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = [w.add_connection(t, "std_msgs/msg/String", typestore=ts) for t in ("/a", "/b", "/c")]
        for begin in range(0, n, 2_500):
            for k, conn in enumerate(conns):
                for t, p in zip(times[begin : begin + 2_500].tolist(), string_payloads(min(2_500, n - begin), 100 + 40 * k, begin + k)):
                    w.write(conn, t + (k == 2), p.tobytes())
    source = path / "bag.mcap" if bare_file else path
    with Reader(source) as reader:
        expected = [(c.topic, t, bytes(d)) for c, t, d in reader.messages()]
        assert len(reader.storage.chunks if bare_file else reader.storage.storages[0].chunks) >= 3
    with BagSet([source]) as bags:
        storage = bags.bags[0].reader.storage
        mcap = storage if bare_file else storage.storages[0]
        assert type(mcap) is IndexedMcapReader
        got = [(m.topic, m.receive_ns, bytes(m.data)) for m in bags.messages(["/a", "/b", "/c"])]
        assert [(m.topic, m.receive_ns) for m in bags.messages(["/b"])] == [(t, s) for t, s, _ in expected if t == "/b"]
    assert got == expected
