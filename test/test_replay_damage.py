"""The replay on damaged recordings (issue 20, "Bags"): a cut or corrupt bag of any format is
salvaged and its loss reported in summary.json and on the console; one sample stamped far off,
or with a velocity too large for float64, is one skipped sample, not the end of the replay; a
FIFO given as the bag is refused at once."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from liedyn_ros import core, pipeline
from liedyn_ros.replay import ReplayError, ReplayOptions, SavgolSettings, differentiate, replay
from liedyn_ros.replay.bagio import BagSet
from liedyn_ros.replay.cli import main
from liedyn_ros.replay.samples import SampleStream, Topics
from test_replay import read_csv, scenario, ur5_urdf, write_bag

T0 = 1_700_000_000 * 1_000_000_000
DAY_NS = 86_400 * 1_000_000_000


@pytest.fixture(scope="module")
def model():
    return core.load_urdf(str(ur5_urdf()))


def options(out: Path) -> ReplayOptions:
    return ReplayOptions(out=out, urdf=ur5_urdf(), progress=False, plots=False)


def write_states(path: Path, model, stamps: np.ndarray, qd: np.ndarray | None = None,
                 flips: dict[int, int] | None = None) -> Path:
    """An mcap bag of UR5 joint states with these header stamps, received 0.3 ms after the
    stamps they should have had (every 2 ms), so a bad stamp does not move its message.
    `flips`: {row: bit} flipped in the serialized stamp (int32 sec, uint32 nanosec)."""
    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    n = len(stamps)
    q = 0.3 * np.sin(np.arange(n)[:, None] * 0.01 + np.arange(model.n))
    qd = 0.3 * np.cos(np.arange(n)[:, None] * 0.01 + np.arange(model.n)) if qd is None else qd
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for k, stamp in enumerate(stamps.tolist()):
            sec, nsec = divmod(int(stamp), 1_000_000_000)
            msg = t["sensor_msgs/msg/JointState"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec),
                                                frame_id="base"),
                name=list(model.joint_names), position=q[k], velocity=qd[k], effort=np.ones(model.n))
            data = bytearray(ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
            if k in (flips or {}):
                bit = flips[k]  # type: ignore[index]
                data[4 + bit // 8] ^= 1 << (bit % 8)  # the stamp follows the 4-byte CDR header
            writer.write(conn, T0 + k * 2_000_000 + 300_000, bytes(data))
    return path


@pytest.mark.parametrize("kind", ["sqlite3", "ros1"])
def test_a_cut_bag_replays_what_it_holds_and_says_what_was_lost(tmp_path, model, kind, capsys):
    """Refused before (0 of the samples of a ROS 1 bag cut by one byte, none of a cut .db3)."""
    bag = write_bag(tmp_path / "in", kind, scenario(model))
    full = replay([bag], options(tmp_path / "full"))
    storage = bag if kind == "ros1" else next(bag.glob("*.db3"))
    data = storage.read_bytes()
    cut = tmp_path / "cut" / storage.name
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) * 6 // 10])
    code = main([str(cut), "--out", str(tmp_path / "out"), "--urdf", str(ur5_urdf()), "--no-progress", "--no-plots"])
    assert code == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (account,) = summary["salvage"]
    recovered = account["topics"]["/joint_states"]["recovered"]
    assert summary["received"] == recovered and 0.5 * full.received < recovered < full.received
    assert account["format"] == kind and account["bytes_missing"] > 0
    assert f"WARNING: {cut}: damaged {kind} file" in printed and f"{recovered} intact messages read" in printed
    # The samples replayed are the full replay's (gravity needs no derivative, so no edge effect);
    # in a cut SQLite page the newest rows come first, so a few before the last may be gone.
    s_full, v_full = read_csv(tmp_path / "full" / "gravity_torque.csv")
    s_cut, v_cut = read_csv(tmp_path / "out" / "gravity_torque.csv")
    rows = np.searchsorted(s_full, s_cut)
    np.testing.assert_array_equal(s_full[rows], s_cut)
    np.testing.assert_allclose(v_cut, v_full[rows], rtol=1e-12)
    assert len(s_cut) == summary["processed"] >= recovered - 1  # the scenario's NaN sample


def test_a_corrupt_record_length_loses_one_sample_not_the_chunk(tmp_path, model):
    """Was 3,861 of 5,000 with exit 0 and no warning."""
    stamps = T0 + 2_000_000 * np.arange(5000)
    bag = write_states(tmp_path / "in", model, stamps)
    mcap = next(bag.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    log_time = (T0 + 1000 * 2_000_000 + 300_000).to_bytes(8, "little")
    record = data.find(log_time) - 15  # before it: opcode, length, channel, sequence
    assert data[record] == 0x05
    data[record + 4] ^= 0x10
    mcap.write_bytes(bytes(data))
    report = replay([bag], options(tmp_path / "out"))
    assert report.received == 4999 and report.processed == 4999
    (account,) = report.salvage
    assert account["messages_lost"] == 1 and account["messages_recovered"] == 4999
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["salvage"] == report.salvage
    assert any("1 lost" in p for p in report.problems)


def test_a_sample_stamped_a_day_ahead_is_one_skipped_sample(tmp_path, model):
    """Was 999 of 2,000 discarded: every later stamp looked out of order."""
    stamps = T0 + 2_000_000 * np.arange(2000)
    stamps[1000] += DAY_NS
    report = replay([write_states(tmp_path / "in", model, stamps)], options(tmp_path / "out"))
    assert report.skipped == {"stamp_outlier": 1} and report.processed == 1999


def test_a_velocity_beyond_float64_with_uneven_stamps_is_skipped(tmp_path, model, capsys):
    """Was a traceback from scipy's CubicSpline."""
    stamps = T0 + 2_000_000 * np.arange(400) + np.where(np.arange(400) % 7 == 0, 100_000, 0)
    qd = 0.3 * np.cos(np.arange(400)[:, None] * 0.01 + np.arange(model.n))
    qd[200, 2] = 1e300
    bag = write_states(tmp_path / "in", model, stamps, qd)
    assert main([str(bag), "--out", str(tmp_path / "out"), "--urdf", str(ur5_urdf()), "--no-progress",
                 "--no-plots"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["skipped"] == {"velocity_out_of_range": 1} and summary["processed"] == 399
    assert "Traceback" not in capsys.readouterr().err


def test_differentiate_leaves_slopes_beyond_float64_without_an_estimate():
    """Uneven stamps go through cubic splines, which refuse slopes that overflow (ValueError)."""
    t = np.cumsum(np.where(np.arange(60) % 5 == 0, 2_100_000, 2_000_000)).astype(np.int64)
    v = np.sin(np.arange(60) * 0.1)[:, None].repeat(2, axis=1)
    v[30, 1] = 1e308
    assert np.isnan(differentiate(t, v, SavgolSettings())).all()  # one run: no estimate, no exception


@settings(max_examples=20, deadline=None)
@given(bad=st.lists(st.tuples(st.integers(0, 299), st.integers(0, 63)), min_size=1, max_size=3,
                    unique_by=lambda b: b[0]),
       chunk=st.sampled_from([30, 64, 300]))
def test_flipped_stamp_bits_cost_only_their_samples(tmp_path_factory, model, bad, chunk):
    """A bit flipped in a stamp (sec or nanosec, any bit) costs one sample: itself, or a
    neighbour it swapped places with; never the samples after it (was: up to 4,874 of 5,000).
    Across chunk boundaries too: the last LOOKAHEAD samples of a chunk are decided with the next."""
    stamps = T0 + 2_000_000 * np.arange(300)
    path = write_states(tmp_path_factory.mktemp("flips") / "in", model, stamps, flips=dict(bad))
    stream = SampleStream(BagSet([path]), model, Topics(), pipeline.PipelineConfig())
    kept = np.concatenate([b.stamp_ns for b in stream.blocks(chunk)])
    assert stream.received == 300 and len(kept) >= 300 - len(bad) and (np.diff(kept) > 0).all()
    assert sum(stream.skipped.values()) == 300 - len(kept)


def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    """Was: blocked forever reading it."""
    fifo = tmp_path / "recording.mcap"
    os.mkfifo(fifo)
    directory = tmp_path / "bag"
    directory.mkdir()
    os.mkfifo(directory / "bag_0.db3")
    for path in (fifo, directory):
        result: list[BaseException] = []
        worker = threading.Thread(target=lambda p=path: result.append(_error(p, tmp_path)), daemon=True)
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive(), f"{path} blocked"
        assert isinstance(result[0], ReplayError) and "not a regular file" in str(result[0])
    assert main([str(fifo), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "not a regular file (a FIFO, socket or device)" in capsys.readouterr().err


def _error(path: Path, tmp_path: Path) -> BaseException:
    try:
        replay([path], options(tmp_path / "never"))
    except BaseException as err:  # noqa: BLE001 - returned for the test to check
        return err
    raise AssertionError("no error")
