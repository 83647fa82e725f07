"""End-to-end replay throughput and peak memory on long generated bags (7-DoF arm).

`python benchmarks/bench_replay.py [--samples 20000 80000]`: writes an mcap bag with that many
500 Hz JointStates of the Panda arm (7 joints: the arm without its hand), replays it (decode,
acceleration estimate, RNEA/gravity/ABA, encode, mcap bag, CSV, summary; no plots) in a fresh
process pinned to one CPU with numba on one thread, and prints samples/s and the peak resident
memory. Target: >= 20,000 samples/s on one core; peak memory the same for both lengths.

The child first replays a short bag (2,000 samples) and times it separately: that first call
loads the numba kernels from their on-disk cache (compiling them after an install or an edit
of the core), a cost paid once per process, not per sample. The throughput is measured on the
second replay, as a long replay sees it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = r"""
import json, os, resource, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
from pathlib import Path
from liedyn_ros.replay import ReplayOptions, replay
warmup, bag, out, urdf = map(Path, sys.argv[1:5])
options = dict(urdf=urdf, progress=False, plots=False)
t0 = time.perf_counter()
replay([warmup], ReplayOptions(out=out.with_name(out.name + "_warmup"), **options))
first_call = time.perf_counter() - t0
t0 = time.perf_counter()
report = replay([bag], ReplayOptions(out=out, **options))
elapsed = time.perf_counter() - t0
print(json.dumps({"samples": report.processed, "seconds": elapsed, "first_call_s": first_call,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

WARMUP_SAMPLES = 2_000


def write_bag(path: Path, n: int, urdf: Path) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from liedyn_ros import core

    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    model = core.load_urdf(str(urdf))
    names = list(model.joint_names)
    time_s = np.arange(n) / 500.0
    arg = time_s[:, None] * np.linspace(1, 3, len(names)) + np.arange(len(names))
    q, qd = 0.3 * np.sin(arg), 0.3 * np.linspace(1, 3, len(names)) * np.cos(arg)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        for k in range(n):
            stamp = 1_700_000_000_000_000_000 + k * 2_000_000
            sec, nsec = divmod(stamp, 1_000_000_000)
            msg = t["sensor_msgs/msg/JointState"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=""),
                name=names, position=q[k], velocity=qd[k], effort=np.sin(arg[k]))
            writer.write(conn, stamp, ts.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[20_000, 80_000])
    args = parser.parse_args()
    from liedyn_ros.robot_data import panda_urdf

    # The 7-DoF arm: the Panda without its hand (joint 8 is fixed, fingers removed).
    text = panda_urdf().read_text()
    start = text.index('<joint name="panda_hand_joint"')
    arm = text[:start] + "</robot>\n"
    with tempfile.TemporaryDirectory() as tmp:
        urdf = Path(tmp) / "panda_arm.urdf"
        urdf.write_text(arm)
        warmup = Path(tmp) / "bag_warmup"
        write_bag(warmup, WARMUP_SAMPLES, urdf)
        env = dict(os.environ, NUMBA_NUM_THREADS="1")
        for n in args.samples:
            bag = Path(tmp) / f"bag_{n}"
            write_bag(bag, n, urdf)
            child = [sys.executable, "-c", CHILD, str(warmup), str(bag), str(Path(tmp) / f"out_{n}"), str(urdf)]
            out = subprocess.run(child, check=True, capture_output=True, text=True, env=env)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{r['samples']:>8} samples: {r['samples'] / r['seconds']:>9.0f} samples/s, "
                  f"{r['seconds']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB "
                  f"(first call in the process: {r['first_call_s']:.2f} s for {WARMUP_SAMPLES} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
