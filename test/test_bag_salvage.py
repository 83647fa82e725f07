"""Damaged bags of every format (mcap, sqlite3, ROS 1): cut at any point or with a block of
bytes overwritten, the replay's bag reading (bagio.BagSet) gives every intact message and
states what was lost (summary.json's "salvage").

A message is intact when the bytes that store it (its record: header and payload) are all in
the file and untouched. Bags are written here by rosbags' writers; their messages are unique
(one stamp each), so a payload found in the file's bytes says where the message is stored.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.highlevel import AnyReader
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from liedyn_ros.replay.bagio import BagSet

KINDS = ("mcap", "sqlite3", "ros1")
COUNT = 2500       # joint states: about 2.7 MB, three chunks, 700 pages
FRAME = "f" * 700  # a long frame id makes each message about 1 KB
T0 = 1_700_000_000 * 1_000_000_000
DESCRIPTION = "<robot name='r'>" + "<link name='l'/>" * 1500 + "</robot>"  # 25 kB: sqlite overflow pages
# Bytes of a stored message before its payload: MCAP record header; ROS 1 record header
# (conn, op, time fields) with its lengths; SQLite cell up to its data blob, with margin.
BEFORE_PAYLOAD = {"mcap": 31, "ros1": 46, "sqlite3": 24}
TOPICS = ["/joint_states", "/robot_description"]


@dataclass(frozen=True)
class Bag:
    kind: str
    file: Path                          # the storage file
    data: bytes
    messages: list[tuple[str, int, bytes]]  # as rosbags reads the intact file
    where: list[int]                    # each message's payload offset in `data` (-1: not contiguous)

    def intact(self, *damaged: tuple[int, int]) -> set[tuple[str, int, bytes]]:
        """The messages stored outside the damaged byte ranges [start, end)."""
        before = BEFORE_PAYLOAD[self.kind]
        return {m for m, at in zip(self.messages, self.where)
                if at >= 0 and all(at + len(m[2]) <= start or at - before >= end for start, end in damaged)}

    def first(self) -> int:
        """Where the first joint state is stored: the bag's header, topics and first chunk's
        definitions come before it (damage there leaves nothing to name the rest by)."""
        return min(at for m, at in zip(self.messages, self.where) if m[0] == "/joint_states") - 64


def write(directory: Path, kind: str, compression: str | None = None) -> Path:
    """A bag of a robot description and COUNT joint states; returns the storage file."""
    ts = get_typestore(Stores.ROS1_NOETIC if kind == "ros1" else Stores.ROS2_HUMBLE)
    t = ts.types
    if kind == "ros1":
        path = directory / "bag.bag"
        writer = Writer1(path)
        if compression:
            writer.set_compression(getattr(Writer1.CompressionFormat, compression.upper()))
    else:
        path = directory / "bag"
        plugin = StoragePlugin.MCAP if kind == "mcap" else StoragePlugin.SQLITE3
        writer = Writer2(path, version=9, storage_plugin=plugin)
        if compression:  # zstd chunks
            writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    serialize = ts.serialize_ros1 if kind == "ros1" else ts.serialize_cdr
    header = (lambda s: {"seq": 0}) if kind == "ros1" else (lambda s: {})
    with writer:
        desc = writer.add_connection("/robot_description", "std_msgs/msg/String", typestore=ts)
        js = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        writer.write(desc, T0 - 1, serialize(t["std_msgs/msg/String"](data=DESCRIPTION), "std_msgs/msg/String"))
        for k in range(COUNT):
            stamp = T0 + k * 2_000_000
            msg = t["sensor_msgs/msg/JointState"](
                header=t["std_msgs/msg/Header"](**header(stamp), stamp=t["builtin_interfaces/msg/Time"](
                    sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=FRAME),
                name=["a", "b"], position=np.array([k, 1.0]), velocity=np.array([0.5, -k]), effort=np.zeros(2))
            writer.write(js, stamp + 300_000, serialize(msg, "sensor_msgs/msg/JointState"))
    return path if kind == "ros1" else next(path.glob("bag.*[!l]"))  # .mcap or .db3, not metadata.yaml


def load(directory: Path, kind: str, compression: str | None = None) -> Bag:
    file = write(directory, kind, compression)
    with AnyReader([file if kind == "ros1" else file.parent]) as reader:
        messages = [(c.topic, t, bytes(d)) for c, t, d in reader.messages()]
    data = file.read_bytes()
    return Bag(kind, file, data, messages, _offsets(data, [m[2] for m in messages]))


def _offsets(data: bytes, payloads: list[bytes]) -> list[int]:
    """Where each payload is in `data` (-1: nowhere in one piece). Searched near the previous
    one first: messages are stored in receive order (in SQLite pages, backwards)."""
    out, near = [], 0
    for payload in payloads:
        at = data.find(payload, max(0, near - 65536))
        out.append(at if at >= 0 else data.find(payload))
        near = max(near, out[-1])
    return out


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Bag]:
    return {kind: load(tmp_path_factory.mktemp(kind), kind) for kind in KINDS}


def salvaged(directory: Path, bag: Bag, data: bytes) -> tuple[list[tuple[str, int, bytes]], list[dict], list[str]]:
    """What BagSet reads of `data` saved as a bare storage file: messages, salvage, problems."""
    directory.mkdir(exist_ok=True)
    path = directory / bag.file.name
    path.write_bytes(data)
    with BagSet([path]) as bags:
        got = [(m.topic, m.receive_ns, bytes(m.data)) for m in bags.messages(TOPICS)]
        return got, bags.salvage(), bags.problems()


def check(bag: Bag, got: list, salvage: list[dict], *damaged: tuple[int, int]) -> None:
    """Every intact message read, in receive order; at most one reading of each damaged one;
    a loss stated."""
    intact = bag.intact(*damaged)
    assert intact <= set(got), f"{len(intact - set(got))} intact messages not read"
    order = [t for m in got if m in intact for t in [m[1]]]  # damage may hit a stored time
    assert order == sorted(order)
    assert len(set(got) - set(bag.messages)) <= len(bag.messages) - len(intact)
    if len(got) == len(bag.messages):
        return  # nothing lost (a payload damaged in place cannot be told without checksums)
    (account,) = salvage
    assert account["format"] == bag.kind and account["reason"]
    assert account["messages_recovered"] >= len(intact)
    assert account["damaged_regions"] or account["bytes_missing"] or account["messages_lost_at_least"]


def test_intact_bags_need_no_salvage(bags: dict[str, Bag], tmp_path: Path) -> None:
    for kind, bag in bags.items():
        got, salvage, problems = salvaged(tmp_path / kind, bag, bag.data)
        assert got == bag.messages and salvage == [] and problems == []


@pytest.mark.parametrize("kind", KINDS)
def test_truncation_at_ten_points_keeps_every_intact_message(bags: dict[str, Bag], tmp_path: Path, kind: str) -> None:
    bag = bags[kind]
    totals = [0, 0]
    for k in range(1, 11):
        cut = len(bag.data) * k // 10 - 1
        got, salvage, problems = salvaged(tmp_path / str(k), bag, bag.data[:cut])
        check(bag, got, salvage, (cut, len(bag.data)))
        (account,) = salvage
        assert account["messages_lost"] is None  # a bare file does not say how many it held
        assert any("salvaged" in p for p in problems)
        totals[0] += len(set(got) & set(bag.messages))
        totals[1] += len(bag.intact((cut, len(bag.data))))
    assert totals[0] >= totals[1]  # more: the description, stored in pieces (not in `intact`)
    print(f"\n{kind}: {totals[0]} messages read, {totals[1]} intact over ten cuts")


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_blocks_lose_only_what_they_touch(bags: dict[str, Bag], tmp_path: Path, kind: str) -> None:
    """Blocks of zeros or random bytes, from one byte to several pages, among the messages."""
    bag = bags[kind]
    rng = random.Random(kind)
    for trial in range(8):
        size = rng.choice([1, 64, 4096, 20_000])
        start = rng.randrange(bag.first(), len(bag.data) - size)
        fill = bytes(size) if trial % 2 else rng.randbytes(size)
        got, salvage, _ = salvaged(tmp_path / str(trial), bag, bag.data[:start] + fill + bag.data[start + size :])
        check(bag, got, salvage, (start, start + size))


@settings(max_examples=15, deadline=None)
@given(kind=st.sampled_from(KINDS), cut=st.floats(0.0, 1.0), flips=st.lists(st.floats(0.0, 1.0), max_size=3),
       fill=st.sampled_from([b"\x00", b"\xff", b"\x5a"]), size=st.sampled_from([1, 9, 512, 4096]))
def test_any_cut_with_damage_before_it(bags: dict[str, Bag], tmp_path_factory: pytest.TempPathFactory, kind: str,
                                       cut: float, flips: list[float], fill: bytes, size: int) -> None:
    """Cut anywhere after the first joint state, with blocks overwritten before the cut."""
    bag = bags[kind]
    end = bag.first() + int(cut * (len(bag.data) - bag.first()))
    data = bytearray(bag.data[:end])
    damaged = [(end, len(bag.data))]
    for at in (bag.first() + int(f * (end - bag.first())) for f in flips):
        data[at : at + size] = fill * len(data[at : at + size])
        damaged.append((at, at + size))
    got, salvage, _ = salvaged(tmp_path_factory.mktemp(kind), bag, bytes(data))
    check(bag, got, salvage, *damaged)


def test_metadata_yaml_gives_the_exact_loss(bags: dict[str, Bag], tmp_path: Path) -> None:
    """A rosbag2 directory keeps its metadata.yaml (a copy cut by a full disk): it says how many
    messages there were, so the loss is exact, by topic."""
    for kind in ("mcap", "sqlite3"):
        bag = bags[kind]
        directory = Path(shutil.copytree(bag.file.parent, tmp_path / kind))
        storage = directory / bag.file.name
        storage.write_bytes(bag.data[: len(bag.data) // 2])
        with BagSet([directory]) as bagset:
            got = list(bagset.messages(TOPICS))
            (account,) = bagset.salvage()
        assert account["messages_lost"] == COUNT + 1 - len(got)
        assert account["topics"]["/joint_states"] == {"recovered": len(got) - 1, "lost": COUNT + 1 - len(got)}


def test_a_corrupt_record_length_in_an_indexed_mcap_chunk(bags: dict[str, Bag], tmp_path: Path) -> None:
    """The file's index is intact: the chunk walk disagrees with it, and the salvage walk
    resynchronises after the damaged record instead of dropping the rest of the chunk."""
    bag = bags["mcap"]
    victim = bag.messages[1000]
    at = bag.where[bag.messages.index(victim)] - BEFORE_PAYLOAD["mcap"]
    data = bytearray(bag.data)
    data[at + 4] ^= 0x10  # the record length's fourth byte: 1 MB too long
    got, salvage, problems = salvaged(tmp_path, bag, bytes(data))
    assert set(got) == set(bag.messages) - {victim}
    (account,) = salvage
    assert account["messages_lost"] == 1 and account["topics"]["/joint_states"]["lost"] == 1
    assert "does not match the file's index" in account["reason"] and "1 lost" in problems[0]


@pytest.mark.parametrize(("kind", "compression"), [("ros1", "lz4"), ("ros1", "bz2"), ("mcap", "zstd")])
def test_cut_compressed_bags_keep_their_complete_chunks(tmp_path: Path, kind: str, compression: str) -> None:
    """A compressed chunk cut by the end of the file gives what decompresses before the cut
    (lz4 and zstd blocks; bz2 needs its whole 900 kB block); the complete chunks all of theirs."""
    bag = load(tmp_path, kind, compression)
    chunks = _chunk_ends(bag)
    for k in (3, 6, 9):
        cut = len(bag.data) * k // 10
        got, salvage, _ = salvaged(tmp_path / str(k), bag, bag.data[:cut])
        assert set(got) <= set(bag.messages)
        assert len(got) >= sum(count for end, count in chunks if end <= cut)
        assert salvage[0]["damaged_regions"] >= 1


def _chunk_ends(bag: Bag) -> list[tuple[int, int]]:
    """(where each chunk ends, messages in it), from rosbags' reading of the intact file's index."""
    if bag.kind == "ros1":
        from rosbags.rosbag1 import Reader

        with Reader(bag.file) as reader:
            return [(reader.chunks[info.pos].datapos + reader.chunks[info.pos].datasize,
                     sum(info.connection_counts.values())) for info in reader.chunk_infos]
    from rosbags.rosbag2 import Reader

    with Reader(bag.file) as reader:
        return [(c.chunk_start_offset + c.chunk_length, sum(c.channel_count.values())) for c in reader.storage.chunks]


def test_salvage_readers_hold_one_block_at_a_time() -> None:
    """Bounded memory: a block is loaded only when the time-ordered merge reaches its start
    (a cut 1.78 GB MCAP took 4.6 GB before; benchmarks/bench_salvage.py measures it)."""
    from liedyn_ros.replay.salvage.blocks import Block, by_time

    loaded: list[int] = []

    def load(key: int) -> list[tuple[int, int, int]]:
        loaded.append(key)
        return [(10 * key + i, 10 * key + i, 10 * key + i) for i in range(10)]

    blocks = [Block(10 * k, k) for k in reversed(range(100))]
    for n, item in enumerate(by_time(blocks, load)):
        assert item == n and len(loaded) <= n // 10 + 1  # the block being read, none ahead
