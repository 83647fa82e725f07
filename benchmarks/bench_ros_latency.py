"""Latency under real ROS 2: JointState publish -> feedforward_torque arrival in another process.

For the 7-DoF Panda arm (``panda``: fixed base), Solo12 (``solo12``: 12 joints on a floating base,
odometry sent with each joint state) and Solo12 on its four point feet (``solo12-contacts``:
config/solo12_contacts.yaml, a std_msgs/UInt8MultiArray contact state sent with each joint state)
it starts `dynamics_node` in its own process, publishes joint states
(with efforts, so the node also runs ABA and publishes predicted accelerations; by default
consistent ones, as a robot sends, see joint_states) at --rate Hz
from this process and records, for every feedforward_torque that arrives here, now minus its
stamp (the node copies the joint state's stamp, which is the publish time). Samples are counted
after the node reports its compiled kernels ready. It prints p50 / p90 / p99 / max and the
samples lost, and, to show where the time goes, the same figures for an echo node (a JointState
relayed unchanged: executor and DDS alone), the CPU time the process under test spent per
sample it answered (from /proc: its work, whatever else loads the machine), the pipeline's own time per sample
from /diagnostics (a mean since the start, the reference-path warm-up samples included) and the
node's own wall time per sample, bytes in to its output published ("own p50/p99": /diagnostics'
sample_time_us_p50 and _p99, medians over its reports while measuring). That one is what the node
adds to rclpy's latency sample by sample; the scheduling outside its callback, which makes the
p99 of two separate runs noise on a machine without kernel preemption, does not enter it.

The goal (issue 24), against the echo relay of the same run: p99 within 0.25 ms of the relay's,
CPU per sample at most twice the relay's, nothing lost; the last columns print both.

On a machine with few cores the publisher, the receiver and the process under test compete for
them: when they saturate the cores (1 kHz on two cores) the relay's own p99 is that of the
scheduler, milliseconds, and the goal cannot be told either way. Hence:

- ``--rate 250 500 1000``: each case at each rate, where the lower ones leave the cores idle part
  of the time (the "CPU %" columns say how much of a core each process used);
- ``--pin 0 1``: this process (publisher and receiver, with its DDS threads) on CPU 0 and the
  process under test (relay or node, started through ``taskset``) on CPU 1, so that the two do not
  preempt each other (any CPU lists taskset takes, e.g. ``--pin 0 1-3``);
- ``--repeat N``: relay and node alternate N times per case and rate (the load of the moment
  falls on both alike), and a summary gives the medians of the goal's figures over the runs;
- ``--rt PRIO``: for the measured seconds, every thread of this process and of the relay or node
  (the DDS threads too: with the Python threads alone the relay's p99 stayed at 19 ms) runs
  SCHED_FIFO at PRIO, as a robot's control processes do (chrt), so that other processes wait
  for them instead of the reverse. Start-up (imports, kernels) stays at normal priority. Each
  real-time thread has a CPU budget (RLIMIT_RTTIME, RT_BUDGET_US) and the relay or node dies
  with this process (setpriv --pdeathsig), so no busy loop is left holding a core. Under --rt the
  publisher sleeps to its deadline (a real-time thread has no timer slack) instead of spinning
  the last 0.2 ms (SCHED_FIFO has no time slices: a spinning thread keeps this process's other
  real-time threads, the receiver's and DDS's, off its core);
- ``--max-late US``: the closing medians leave out the pairs of runs in which this process
  published later than US microseconds at p99 (the machine held the benchmark itself; a witness
  that does not look at the latencies, though it sees this process's cores only). The closing
  table gives the p50 difference too: the node's own time per sample, which no tail hides.

The receiver (``--receiver lean``, the default) takes feedforward_torque as CDR bytes in a thread
of its own with the node's spin loop and reads the stamp from the bytes; ``--receiver executor``
takes message objects through rclpy's executor, in the thread that also takes /diagnostics (it
made the publisher's own lateness 0.76 ms against 0.10 ms in a pair of runs: the "late us" column,
p99 of how late each sample was published, the benchmark's own share of the scheduling noise;
"load" is the 1-minute load average after each run). This process does not
collect garbage while measuring.

Run where ROS 2 is sourced:
  python benchmarks/bench_ros_latency.py [--seconds S] [--rate HZ ...] [--cases panda solo12 solo12-contacts]
      [--pin PROBE_CPUS NODE_CPUS] [--repeat N] [--rt PRIO] [--max-late US] [--receiver lean|executor]
      [--relay executor|lean|raw] [--all-outputs] [--efforts consistent|random]
Without rclpy it prints that it is skipped and exits 0.
"""
from __future__ import annotations

import argparse
import gc
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import AccelStamped, WrenchStamped
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import UInt8MultiArray
    from trajectory_msgs.msg import JointTrajectory
except ImportError:
    print("bench_ros_latency: skipped, no ROS 2 (rclpy) in this environment")
    sys.exit(0)

from bench_pipeline import joint_states, seven_dof_panda

from liedyn_ros import core
from liedyn_ros.robot_data import robots_dir

ECHO = "echo"  # the relay run as a baseline
OTHER_OUTPUTS = {"gravity_torque": JointState, "predicted_acceleration": JointTrajectory, "external_torque": JointState,
                 "base_wrench": WrenchStamped, "predicted_base_acceleration": AccelStamped}
CONFIG = Path(__file__).resolve().parent.parent / "config"


class Case(NamedTuple):
    """A robot and the node's parameters for it (``contacts``: a contact state sent with each sample)."""

    title: str
    urdf: str
    floating: bool
    parameters: dict[str, Any]
    contacts: int


def cases() -> dict[str, Case]:
    robots = robots_dir()
    solo = (robots / "solo_description/robots/solo12.urdf").read_text()
    standing = yaml.safe_load((CONFIG / "solo12_contacts.yaml").read_text())["/**"]["ros__parameters"]
    return {
        "panda": Case("Panda (7, fixed)", seven_dof_panda(), False, {}, 0),
        "solo12": Case("Solo12 (6+12, floating)", solo, True, {"floating_base": True}, 0),
        "solo12-contacts": Case("Solo12, 4 point contacts", solo, True, standing, len(standing["contact_links"])),
    }


RELAYS = {
    "executor": "rclpy.spin, message objects (the issue's relay: rclpy and DDS as a plain node uses them)",
    "lean": "the node's spin loop (node_main.LeanSpin), message objects",
    "raw": "the node's spin loop, CDR bytes taken and published as they are (rclpy and DDS alone)",
}


def echo_main(relay: str) -> None:
    """A JointState relay (joint_states -> feedforward_torque) with the node's QoS, spun and
    converted the ``relay`` way (RELAYS)."""
    from rclpy.executors import ExternalShutdownException
    from rclpy.qos import qos_profile_sensor_data

    from liedyn_ros.node_main import LeanSpin

    rclpy.init()
    node = Node("latency_echo")
    pub = node.create_publisher(JointState, "feedforward_torque", 10)
    node.create_subscription(JointState, "joint_states", pub.publish, qos_profile_sensor_data, raw=relay == "raw")
    try:
        if relay == "executor":
            rclpy.spin(node)
        else:
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            loop = LeanSpin(node, executor)
            while rclpy.ok():
                loop.spin_once(0.1)
    except (KeyboardInterrupt, ExternalShutdownException):  # stopped by the benchmark
        pass


def cpu_list(text: str) -> set[int]:
    """taskset's CPU list ("0", "1-3", "0,2") as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def pin_this_process(cpus: set[int]) -> None:
    """Every thread of this process (numpy's BLAS threads exist already) on ``cpus``; threads made
    later (rclpy's, DDS's) inherit it."""
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), cpus)


RT_BUDGET_US = (500_000, 1_000_000)  # RLIMIT_RTTIME: SIGXCPU, then SIGKILL, for an RT thread that never blocks


def set_realtime(pid: int, priority: int) -> None:
    """Every thread of process ``pid`` (its DDS threads too) to SCHED_FIFO at ``priority``, or back
    to SCHED_OTHER with 0. With a CPU budget: a real-time thread that runs RT_BUDGET_US without
    sleeping is killed, so that no busy loop can hold a core (the kernel keeps 5 % for the rest
    anyway, sched_rt_runtime_us)."""
    import resource

    if priority:
        resource.prlimit(pid, resource.RLIMIT_RTTIME, RT_BUDGET_US)
    policy = os.SCHED_FIFO if priority else os.SCHED_OTHER
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setscheduler(int(tid), policy, os.sched_param(priority))
        except ProcessLookupError:  # a thread that has just ended
            pass


def start(kind: str, case: Case, workdir: Path, cpus: str | None, relay: str) -> subprocess.Popen[bytes]:
    """The process under test: dynamics_node (its console script's code) for this case, or the echo
    relay of kind ``relay``; on ``cpus`` (taskset's list) if given."""
    if kind == ECHO:
        cmd = [sys.executable, __file__, "--echo", "--relay", relay]
    else:
        params = workdir / "params.yaml"
        values = {**case.parameters, "robot_description": case.urdf, "diagnostics_period": 0.5}
        params.write_text(yaml.safe_dump({"liedyn_dynamics": {"ros__parameters": values}}))
        cmd = [sys.executable, "-m", "liedyn_ros.node_main", "--ros-args", "--params-file", str(params)]
    if cpus is not None:
        cmd = ["taskset", "--cpu-list", cpus, *cmd]
    # Killed with this process, however it ends (a relay or node left at real-time priority would not be).
    cmd = ["setpriv", "--pdeathsig", "KILL", *cmd]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Probe(Node):
    """Publishes joint states (and odometry) with stamp = publish time; records arrival - stamp."""

    def __init__(self, model: core.Model, contacts: int, listen_all: bool, receiver: str, efforts: str,
                 rate: float) -> None:
        super().__init__("latency_probe")
        self.model = model
        self.js_pub = self.create_publisher(JointState, "joint_states", 10)
        self.odom_pub = self.create_publisher(Odometry, "odom", 10)
        self.contact_pub = self.create_publisher(UInt8MultiArray, "contact_state", 10) if contacts else None
        self.contact_state = UInt8MultiArray(data=[1] * contacts)  # all feet down
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        if receiver == "executor":
            self.create_subscription(JointState, "feedforward_torque", self._on_output, reliable)
        # The node publishes an output only when someone listens (rosbag record, RViz): --all-outputs
        # listens to every one of them, as such a tool would, and pays nothing for them here.
        for topic, kind in (OTHER_OUTPUTS if listen_all else {}).items():
            self.create_subscription(kind, topic, lambda msg: None, reliable, raw=True)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.latencies: dict[int, float] = {}
        self.recording = False
        self.kernels_ready = False
        self.compute_us: list[float] = []
        self.own_us: list[tuple[float, float]] = []  # the node's own time per sample: (p50, p99) per report
        self.states = [JointState(name=list(model.joint_names), position=q.tolist(), velocity=v.tolist(),
                                  effort=tau.tolist()) for q, v, tau in zip(*joint_states(model, efforts, rate))]
        self.js = self.states[0]
        self.sample = 0
        self.odom = Odometry(child_frame_id=model.root_link)
        self.odom.pose.pose.orientation.w = 1.0

    def _on_output(self, msg: JointState) -> None:
        self.arrived(msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec, time.time_ns())

    def arrived(self, stamp: int, now: int) -> None:
        if self.recording:
            self.latencies[stamp] = (now - stamp) * 1e-9
        self.got_any = True

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if values.get("compiled_kernels") == "ready":
                self.kernels_ready = True
            if self.recording and "compute_time_us_last" in values:
                self.compute_us.append(float(values["compute_time_us_mean"]))
            if self.recording and float(values.get("sample_time_samples", 0)) > 0:
                self.own_us.append((float(values["sample_time_us_p50"]), float(values["sample_time_us_p99"])))

    def publish(self, stamp_ns: int) -> None:
        """One sample: odometry, contact state, the next joint state of the cycle, each stamped
        ``stamp_ns`` (the messages are made beforehand: this process must keep up with the rate on
        a loaded machine too)."""
        sec, nsec = divmod(stamp_ns, 1_000_000_000)
        if self.model.floating_base:
            self.odom.header.stamp.sec, self.odom.header.stamp.nanosec = sec, nsec
            self.odom_pub.publish(self.odom)
        if self.contact_pub is not None:
            self.contact_pub.publish(self.contact_state)
        self.js = self.states[self.sample % len(self.states)]
        self.sample += 1
        self.js.header.stamp.sec, self.js.header.stamp.nanosec = sec, nsec
        self.js_pub.publish(self.js)


class Receiver:
    """Takes feedforward_torque as CDR bytes in a thread of its own, with the node's spin loop
    (node_main.LeanSpin), and records arrival - stamp in ``probe``: no executor between the
    middleware and the clock reading."""

    def __init__(self, probe: Probe) -> None:
        from liedyn_ros.node_main import LeanSpin

        self.probe = probe
        self.node = Node("latency_receiver", start_parameter_services=False)
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, "feedforward_torque", self._on_output, reliable, raw=True)
        self.executor = SingleThreadedExecutor()  # LeanSpin hands it anything but the subscription
        self.executor.add_node(self.node)
        self.loop = LeanSpin(self.node, self.executor)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self.stop.is_set():
            self.loop.spin_once(0.1)

    def _on_output(self, data: bytes) -> None:
        arrived = time.time_ns()
        # CDR: 4 bytes of encapsulation (its second byte 1: little endian), then header.stamp.
        sec, nanosec = struct.unpack_from("<iI" if data[1] == 1 else ">iI", data, 4)
        self.probe.arrived(sec * 1_000_000_000 + nanosec, arrived)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.executor.shutdown()
        self.node.destroy_node()


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU time of a process so far (Linux /proc): its work per sample, whatever the load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_case(kind: str, case: Case, seconds: float, rate: float, listen_all: bool,
             cpus: str | None, relay: str, rt: int, receiver: str, efforts: str) -> dict[str, Any]:
    model = core.load_urdf(case.urdf, floating_base=case.floating)
    with tempfile.TemporaryDirectory() as tmp:
        proc = start(kind, case, Path(tmp), cpus, relay)
        probe = Probe(model, case.contacts, listen_all, receiver, efforts, rate)
        lean = Receiver(probe) if receiver == "lean" else None
        executor = SingleThreadedExecutor()
        executor.add_node(probe)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        try:
            # Until outputs flow (and, for the node, its kernels are compiled): 100 Hz.
            probe.got_any = False
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and not (probe.got_any and (kind == ECHO or probe.kernels_ready)):
                probe.publish(time.time_ns())
                time.sleep(0.01)
            time.sleep(0.5)
            # Real time for the measured seconds only (start-up and any compiling at normal priority).
            if rt:
                set_realtime(proc.pid, rt)
                set_realtime(os.getpid(), rt)
            gc.disable()  # no collection of this process in the middle of a latency
            cpu_before, probe_before, wall_before = cpu_seconds(proc.pid), cpu_seconds("self"), time.monotonic()
            probe.recording = True
            period = 1.0 / rate
            # A real-time thread sleeps to the microsecond (no timer slack); otherwise the last
            # 0.2 ms are spun.
            spin = 0.0 if rt else 2e-4
            sent: list[int] = []
            late: list[float] = []
            next_t = time.perf_counter()
            for _ in range(int(seconds * rate)):
                next_t += period
                while (left := next_t - time.perf_counter()) > 0:
                    time.sleep(left if left > spin else 0)
                late.append(-left)
                stamp = time.time_ns()
                probe.publish(stamp)
                sent.append(stamp)
            time.sleep(1.0)
            probe.recording = False
            cpu = cpu_seconds(proc.pid) - cpu_before
            wall = time.monotonic() - wall_before
            probe_cpu = cpu_seconds("self") - probe_before
        finally:
            gc.enable()
            if rt:
                set_realtime(os.getpid(), 0)
            executor.shutdown()
            spinner.join()
            if lean is not None:
                lean.close()
            probe.destroy_node()
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:  # a starved relay still draining its queue
                proc.kill()
                proc.wait()
        got = np.array([probe.latencies[s] for s in sent if s in probe.latencies]) * 1e6
        answered = got.size
        if not answered:  # every sample lost: no latency to give
            got = np.array([np.nan])
        return {"sent": len(sent), "lost": len(sent) - answered,
                "p50": np.percentile(got, 50), "p90": np.percentile(got, 90),
                "p99": np.percentile(got, 99), "max": got.max(), "late": np.percentile(late, 99) * 1e6,
                "compute": float(np.median(probe.compute_us)) if probe.compute_us else float("nan"),
                "own50": float(np.median([p50 for p50, _ in probe.own_us])) if probe.own_us else float("nan"),
                "own99": float(np.median([p99 for _, p99 in probe.own_us])) if probe.own_us else float("nan"),
                "cpu": cpu / max(answered, 1) * 1e6, "busy": 100 * cpu / wall, "probe_busy": 100 * probe_cpu / wall}


def summary(title: str, rate: float, runs: list[tuple[dict[str, Any], dict[str, Any]]], max_late: float) -> str:
    """One line of the goal's figures over (relay, node) pairs of runs: medians of the p99s, of
    the p99 and p50 differences and of the CPU ratio, and the samples lost; pairs where this
    process published later than ``max_late`` us (p99) in either run are left out (the machine
    held the benchmark itself: a witness independent of the latencies measured)."""
    none = {"p99": np.nan, "p50": np.nan, "cpu": np.nan, "own99": np.nan}
    kept = [(r, n) for r, n in runs if max(r["late"], n["late"]) <= max_late] or [(none, none)]  # nan when none is left
    relay_p99 = np.median([r["p99"] for r, _ in kept]) / 1e3
    node_p99 = np.median([n["p99"] for _, n in kept]) / 1e3
    diff = np.median([(n["p99"] - r["p99"]) for r, n in kept]) / 1e3
    diff50 = np.median([(n["p50"] - r["p50"]) for r, n in kept]) / 1e3
    ratio = np.median([n["cpu"] / r["cpu"] for r, n in kept])
    own = np.median([n["own99"] for _, n in kept]) / 1e3
    used = sum(r is not none for r, _ in kept)
    lost = "/".join(f"{sum(x['lost'] for x in side)}" for side in zip(*runs))
    sent = sum(r["sent"] for r, _ in runs)
    return (f"{title:<26} {rate:6.0f} {f'{used}/{len(runs)}':>5} {relay_p99:13.2f} {node_p99:12.2f} {diff:+12.2f} "
            f"{diff50:+12.2f} {own:12.2f} {ratio:11.2f} {lost:>14} of {sent}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case")
    parser.add_argument("--rate", type=float, nargs="+", default=[1000.0],
                        help="joint states per second; several: each case at each rate")
    parser.add_argument("--cases", nargs="+", choices=["panda", "solo12", "solo12-contacts"],
                        default=["panda", "solo12", "solo12-contacts"], help="robots to run (default: all three)")
    parser.add_argument("--all-outputs", action="store_true",
                        help="listen to every output of the node, not only feedforward_torque (so it publishes all)")
    parser.add_argument("--pin", nargs=2, metavar=("PROBE_CPUS", "NODE_CPUS"),
                        help="CPU lists (taskset's form): this process (publisher, receiver) on the first, "
                             "the relay or node on the second, e.g. --pin 0 1")
    parser.add_argument("--repeat", type=int, default=1, help="relay and node alternating this many times")
    parser.add_argument("--relay", choices=list(RELAYS), default="executor",
                        help="the reference relay: " + "; ".join(f"{k}: {v}" for k, v in RELAYS.items()))
    parser.add_argument("--rt", type=int, default=0, metavar="PRIO",
                        help="SCHED_FIFO at PRIO (1-99) for every thread of this process and of the relay or node, "
                             "during the measured seconds")
    parser.add_argument("--receiver", choices=["executor", "lean"], default="lean",
                        help="how this process takes feedforward_torque: rclpy's executor, or CDR bytes in a "
                             "thread of its own with the node's spin loop")
    parser.add_argument("--max-late", type=float, default=float("inf"), metavar="US",
                        help="leave out of the closing medians the pairs of runs in which this process published "
                             "more than US microseconds late (p99, the 'late us' column) in either run")
    parser.add_argument("--efforts", choices=["consistent", "random"], default="consistent",
                        help="consistent: a moving arm's rnea torques, a standing robot's holding torques (no "
                             "collision seen); random: one random state and efforts (a collision open all run)")
    parser.add_argument("--echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo:
        echo_main(args.relay)
        return
    if args.repeat < 1 or any(rate <= 0 for rate in args.rate):
        parser.error("--repeat and --rate must be positive")
    if not 0 <= args.rt <= 99:
        parser.error("--rt: a SCHED_FIFO priority, 1-99")
    if args.rt:
        try:
            set_realtime(os.getpid(), args.rt)
            set_realtime(os.getpid(), 0)
        except PermissionError:
            parser.error("--rt: SCHED_FIFO needs root or CAP_SYS_NICE (or an rtprio limit, ulimit -r)")
    node_cpus = None
    if args.pin:
        probe_cpus, node_cpus = args.pin
        try:
            mine, theirs = cpu_list(probe_cpus), cpu_list(node_cpus)
        except ValueError:
            parser.error(f"--pin: CPU lists like 0 or 1-3, not {args.pin}")
        if not (mine | theirs) <= os.sched_getaffinity(0):
            parser.error(f"--pin: CPUs {sorted(mine | theirs)} are not all among this machine's "
                         f"{sorted(os.sched_getaffinity(0))}")
        pin_this_process(mine)
    chosen = [cases()[name] for name in args.cases]
    rclpy.init()
    rates = ", ".join(f"{rate:.0f}" for rate in args.rate)
    pinned = f"; this process on CPUs {args.pin[0]}, relay/node on {args.pin[1]}" if args.pin else ""
    pinned += f"; SCHED_FIFO {args.rt} while measuring" if args.rt else ""
    pinned += f"; receiver: {args.receiver}; {args.efforts} efforts"
    print(f"JointState publish -> feedforward_torque arrival, {rates} Hz for {args.seconds:.0f} s, "
          f"RMW {os.environ.get('RMW_IMPLEMENTATION', 'default')}"
          f"{', every output listened to' if args.all_outputs else ''}{pinned}; relay: {RELAYS[args.relay]}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'robot':<26} {'Hz':>6} {'process':<13} {'p50 us':>7} {'p90 us':>7} {'p99 us':>7} {'max us':>8} "
          f"{'lost':>11} {'CPU us/sample':>13} {'CPU %':>6} {'probe %':>7} {'late us':>7} {'pipeline us':>11} "
          f"{'own p50/p99 us':>14} "
          f"{'p99 - relay ms':>14} {'CPU / relay':>11} {'load':>5}")
    summaries = []
    for case in chosen:
        for rate in args.rate:
            runs = []
            for _ in range(args.repeat):
                relay: dict[str, Any] = {}
                for kind in (ECHO, "dynamics_node"):
                    r = run_case(kind, case, args.seconds, rate, args.all_outputs, node_cpus, args.relay,
                                 args.rt, args.receiver, args.efforts)
                    relay = relay or r
                    own = f"{r['own50']:.0f}/{r['own99']:.0f}"
                    print(f"{case.title:<26} {rate:6.0f} {kind:<13} {r['p50']:7.0f} {r['p90']:7.0f} {r['p99']:7.0f} "
                          f"{r['max']:8.0f} {r['lost']:>5}/{r['sent']:<5} {r['cpu']:13.0f} {r['busy']:6.0f} "
                          f"{r['probe_busy']:7.0f} {r['late']:7.0f} {r['compute']:11.0f} "
                          f"{own:>14} "
                          f"{(r['p99'] - relay['p99']) / 1e3:+14.2f} "
                          f"{r['cpu'] / relay['cpu']:11.2f} {os.getloadavg()[0]:5.1f}", flush=True)
                runs.append((relay, r))
            summaries.append(summary(case.title, rate, runs, args.max_late))
    print(f"\nThe goal's figures (issue 24: p99 within 0.25 ms of the relay's, CPU at most 2x the relay's, "
          f"nothing lost), medians over the pairs of runs used (runs: used/all, --max-late); "
          f"load now {os.getloadavg()[0]:.1f}")
    print(f"{'robot':<26} {'Hz':>6} {'runs':>5} {'relay p99 ms':>13} {'node p99 ms':>12} {'p99 - relay':>12} "
          f"{'p50 - relay':>12} {'own p99 ms':>12} "
          f"{'CPU / relay':>11} {'lost relay/node':>14}")
    print("\n".join(summaries))
    rclpy.shutdown()


if __name__ == "__main__":
    main()
