"""Peak memory and time of reading damaged bags (salvage) against reading them intact.

For each format (mcap, sqlite3, ROS 1) a bag of COUNT 7-joint JointStates (about 330 MB at
one million) is written in a temporary directory, then copied cut at 60 % and, intact in
length, with 64 KiB of zeros in the middle. Each file is read by the replay's BagSet (every
joint state, through the same code as the replay) in a subprocess of its own, whose peak
resident memory (VmHWM: ru_maxrss would keep the parent's peak across exec) is compared.
Goal: salvage within 2x of the intact read.
Run: python benchmarks/bench_salvage.py [COUNT]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

READ = """
import json, sys, time
from pathlib import Path
from liedyn_ros.replay.bagio import BagSet
start = time.perf_counter()
with BagSet([Path(sys.argv[1])]) as bags:
    count = sum(1 for _ in bags.messages(["/joint_states"]))
    salvage = bags.salvage()
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"messages": count, "rss_mb": peak / 1024, "s": time.perf_counter() - start,
                  "salvaged": bool(salvage)}))
"""


def write(directory: Path, kind: str, count: int) -> Path:
    """The bag's storage file. One message is serialized and its stamp patched (fast)."""
    ts = get_typestore(Stores.ROS1_NOETIC if kind == "ros1" else Stores.ROS2_HUMBLE)
    t = ts.types
    header = {"seq": 0} if kind == "ros1" else {}
    msg = t["sensor_msgs/msg/JointState"](
        header=t["std_msgs/msg/Header"](**header, stamp=t["builtin_interfaces/msg/Time"](sec=0, nanosec=0),
                                        frame_id="base"),
        name=[f"joint_{i}" for i in range(7)], position=np.zeros(7), velocity=np.zeros(7), effort=np.zeros(7))
    data = bytearray((ts.serialize_ros1 if kind == "ros1" else ts.serialize_cdr)(msg, "sensor_msgs/msg/JointState"))
    if kind == "ros1":
        path = directory / "bag.bag"
        writer = Writer1(path)
    else:
        path = directory / kind
        plugin = StoragePlugin.MCAP if kind == "mcap" else StoragePlugin.SQLITE3
        writer = Writer2(path, version=9, storage_plugin=plugin)
    with writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for k in range(count):
            stamp = 1_700_000_000 * 10**9 + k * 1_000_000
            # The stamp follows the ROS 1 header's seq, or the CDR encapsulation header.
            data[4:12] = (stamp // 10**9).to_bytes(4, "little") + (stamp % 10**9).to_bytes(4, "little")
            writer.write(conn, stamp + 300_000, bytes(data))
    return path if kind == "ros1" else next(p for p in path.iterdir() if p.suffix in (".mcap", ".db3"))


def read(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def damaged(storage: Path, directory: Path) -> dict[str, Path]:
    """A copy cut at 60 %, and one with 64 KiB of zeros in the middle."""
    size = storage.stat().st_size
    cut, zeros = directory / ("cut_" + storage.name), directory / ("zeros_" + storage.name)
    with storage.open("rb") as src, cut.open("wb") as dst:
        _copy(src, dst, size * 6 // 10)
    with storage.open("rb") as src, zeros.open("wb") as dst:
        _copy(src, dst, size // 2)
        dst.write(bytes(1 << 16))
        src.seek(size // 2 + (1 << 16))
        _copy(src, dst, size)
    return {"cut 60%": cut, "64 KiB zeros": zeros}


def _copy(src: Any, dst: Any, size: int) -> None:
    """Up to `size` bytes, 16 MiB at a time."""
    while size > 0 and (block := src.read(min(size, 1 << 24))):
        dst.write(block)
        size -= len(block)


def main(count: int) -> None:
    print(f"{'format':8} {'file':13} {'MB':>6} {'messages':>9} {'peak RSS MB':>12} {'s':>6}  salvage/intact RSS")
    for kind in ("mcap", "sqlite3", "ros1"):
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            storage = write(directory, kind, count)
            intact = read(storage)
            files = {"intact": storage, **damaged(storage, directory)}
            for name, path in files.items():
                result = intact if name == "intact" else read(path)
                ratio = result["rss_mb"] / intact["rss_mb"]
                print(f"{kind:8} {name:13} {path.stat().st_size / 1e6:6.0f} {result['messages']:9d} "
                      f"{result['rss_mb']:12.0f} {result['s']:6.1f}  {ratio:.2f}")
                assert name == "intact" or (result["salvaged"] and ratio <= 2.0)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
