"""Cold start: the pipeline answers at once on the reference path while a child process compiles.

Whether the kernels are compiled is asked of numba's cache itself: a warm cache loads at once
(no child), an empty one (a fresh NUMBA_CACHE_DIR, a deleted cache) starts the child and the
calling thread never compiles; the child's kernels are then loaded from the cache, and a child
that fails, or a cache that does not keep its kernels, leaves the reference path serving and
/diagnostics saying why.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from liedyn_ros import core
from liedyn_ros.core.fast import warmup as warmup_module
from liedyn_ros.core.fast.warmup import CONTACT_KERNELS, LOOP_KERNELS, NODE_KERNELS, KernelWarmup
from liedyn_ros.pipeline import DynamicsPipeline, PipelineConfig
from liedyn_ros.pipeline.diagnostics import DiagnosticsReporter, Level
from test_pipeline import ARM, ARM_XML, LogSink, rclpy_joint_state

HERE = Path(__file__).parent
ARM_NAMES = NODE_KERNELS + ("observer_one",)


def _as_if_uncached(monkeypatch: pytest.MonkeyPatch, calls: int = 1) -> None:
    """The first ``calls`` cache look-ups find nothing (an empty cache), later ones ask numba."""
    real, seen = warmup_module.load_cached, [0]
    monkeypatch.setattr(warmup_module, "_may_be_cached", lambda names: True)

    def load_cached(names: tuple[str, ...]) -> tuple[str, ...]:
        seen[0] += 1
        return tuple(names) if seen[0] <= calls else real(names)

    monkeypatch.setattr(warmup_module, "load_cached", load_cached)


def test_first_samples_use_the_reference_then_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child builds (or, numba's cache being warm, loads) the kernels; this process then loads
    them from the cache (load_cached: never compiling)."""
    model = core.load_urdf(ARM_XML)
    pin_model = pin.buildModelFromXML(ARM_XML)
    pipe = DynamicsPipeline(model)
    _as_if_uncached(monkeypatch)
    warmup = KernelWarmup(ARM_NAMES)
    pipe.start_warmup(warmup)
    assert pipe.warming_up
    rng = np.random.default_rng(5)

    def sample_matches_pinocchio(stamp_ns: int) -> None:
        q, qd, effort = rng.uniform(-1, 1, 7), rng.normal(size=7), rng.normal(size=7)
        out = pipe.on_joint_state(rclpy_joint_state(stamp_ns, list(ARM), q, qd, effort))
        assert out is not None
        data = pin_model.createData()
        np.testing.assert_allclose(out.outputs.tau_ff, pin.rnea(pin_model, data, q, qd, np.zeros(7)), atol=1e-9)
        np.testing.assert_allclose(out.outputs.qdd_pred, pin.aba(pin_model, data, q, qd, effort), atol=1e-8)

    sample_matches_pinocchio(1)
    assert pipe.stats.reference_samples == 1  # answered while the child was still at work
    deadline = time.monotonic() + 900  # a cold compile on a loaded 2-core machine
    while pipe.warming_up and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pipe.warming_up
    sample_matches_pinocchio(2)
    sample_matches_pinocchio(3)
    assert pipe.stats.reference_samples == 1 and pipe.stats.published == 3  # the kernels took over
    assert warmup.failure is None and pipe.kernel_failure is None
    monkeypatch.undo()
    again = KernelWarmup(ARM_NAMES)  # the next start: from the cache at once, no child
    assert again.ready() and not again.compiling and again._child is None


# Run in a process of its own, whose numba reads an empty cache (NUMBA_CACHE_DIR): the node's
# pipeline with its default warm-up, timed sample by sample while the child compiles; the arm, or
# the five-bar with its loop closure (sys.argv[1]).
_EMPTY_CACHE_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from liedyn_ros import core
    from liedyn_ros.core.fast import warmup
    from liedyn_ros.pipeline import DynamicsPipeline, PipelineConfig
    from liedyn_ros.pipeline.diagnostics import DiagnosticsReporter
    from test_pipeline import ARM, ARM_XML, rclpy_joint_state

    if sys.argv[1] == "arm":
        model, loop = core.load_urdf(ARM_XML), {}
    else:
        from test_constraints_loops import FIVE_BAR
        from test_loops_pipeline import LOOP as loop
        model = core.load_urdf(FIVE_BAR)
    names, n = list(model.joint_names), model.n
    pipe = DynamicsPipeline(model, PipelineConfig(acceleration_source="estimated", **loop))
    reporter = DiagnosticsReporter()
    started = time.perf_counter()
    pipe.start_warmup()
    start_s = time.perf_counter() - started
    rng = np.random.default_rng(1)
    times = []
    for k in range(30):  # a smooth velocity: the estimated accelerations stay those of a robot
        q, qd, effort = rng.uniform(-1, 1, n), 0.5 * np.sin(0.01 * k + np.arange(n)), rng.normal(size=n)
        t = time.perf_counter()
        pipe.on_joint_state(rclpy_joint_state(1_000_000 * (k + 1), names, q, qd, effort))
        times.append(time.perf_counter() - t)
    time.sleep(1.0)
    report = reporter.report(pipe, "arm")
    kernels = pipe._warmup.names
    result = dict(start_s=start_s, kernels=kernels, may_be_cached=warmup._may_be_cached(kernels),
                  max_sample_s=max(times), warming_up=pipe.warming_up,
                  reference_samples=pipe.stats.reference_samples, level=int(report.level), message=report.message,
                  compiled_here=[k for k in kernels if warmup._dispatcher(k).overloads],
                  child=pipe._warmup._child.pid)
    pipe.close()
    result["child_after_close"] = os.path.exists(f"/proc/{result['child']}")
    print(json.dumps(result))
""")


def _python(code: str, cache: Path, *args: str, **kwargs) -> subprocess.Popen[str]:
    """A Python process on ``code`` with numba's cache in ``cache`` and the tests' helpers importable."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(HERE), *(p for p in sys.path if p)]))
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def _gone(pid: int) -> bool:
    """True when ``pid`` has ended (a zombie nobody has reaped yet counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("case, kernels", [("arm", ARM_NAMES),
                                           ("five_bar", ARM_NAMES + LOOP_KERNELS)])
def test_an_empty_cache_never_compiles_on_the_calling_thread(tmp_path: Path, case: str, kernels: tuple) -> None:
    """numba's cache elsewhere or deleted (here: a fresh NUMBA_CACHE_DIR) while the sources'
    own cache is warm: the start and every sample return promptly on the reference path while
    the child compiles, nothing is compiled in the calling process, /diagnostics says OK,
    warming up (the estimator's restarts are no problem then), and close() ends the child. The
    same with loop closures (their batch kernels and constraint terms in the child's list)."""
    proc = _python(_EMPTY_CACHE_SCRIPT, tmp_path / "numba_cache", case)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert tuple(result["kernels"]) == kernels, result
    # Compiling these kernels takes tens of seconds; loading or refusing them well under one.
    assert result["start_s"] < 5.0, result
    assert result["max_sample_s"] < 1.0, result
    assert result["warming_up"] and result["reference_samples"] >= 27, result  # the estimator needs 3
    assert result["compiled_here"] == [], result
    assert not result["may_be_cached"], result  # no index file: not even numba's compiler started
    assert result["level"] == Level.OK, result
    assert result["message"].startswith("warming up: compiled kernels building, reference path serving "), result
    assert result["message"].endswith(" samples/s"), result
    assert _gone(result["child"]), result


def test_the_child_ends_with_its_parent(tmp_path: Path) -> None:
    """A parent killed outright (no close()) does not leave its child compiling."""
    code = textwrap.dedent("""
        import sys, time
        from liedyn_ros.core.fast.warmup import KernelWarmup
        w = KernelWarmup(("rnea_one", "gravity_one"))
        print(w._child.pid, flush=True)
        time.sleep(600)
    """)
    proc = _python(code, tmp_path / "numba_cache")
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert not _gone(child)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10.0
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(child)


def test_the_child_compiles_as_background_work_under_a_real_time_parent(tmp_path: Path) -> None:
    """A node started with `chrt -f` (as docs/node.md advises on a robot): its compiling child must
    not inherit SCHED_FIFO, which would hold a core for minutes, and runs BACKGROUND_NICE nicer."""
    code = textwrap.dedent("""
        import os, time
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            rt = True
        except PermissionError:
            rt = False
        from liedyn_ros.core.fast.warmup import KernelWarmup
        w = KernelWarmup(("rnea_one", "gravity_one"))
        print(w._child.pid, rt, os.getpriority(os.PRIO_PROCESS, 0), flush=True)
        time.sleep(60)
    """)
    proc = _python(code, tmp_path / "numba_cache")
    assert proc.stdout is not None
    child, rt, parent_nice = proc.stdout.readline().split()
    try:
        if rt == "True":
            assert os.sched_getscheduler(int(proc.pid)) == os.SCHED_FIFO  # the parent really was real-time
        deadline = time.monotonic() + 20.0
        while os.getpriority(os.PRIO_PROCESS, int(child)) == int(parent_nice) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getpriority(os.PRIO_PROCESS, int(child)) == min(19, int(parent_nice) + warmup_module.BACKGROUND_NICE)
        assert os.sched_getscheduler(int(child)) == os.SCHED_OTHER
    finally:
        proc.kill()
        proc.wait()
    if rt != "True":
        pytest.skip("SCHED_FIFO not permitted here (no CAP_SYS_NICE): the niceness is checked, not the policy")


def test_a_failed_child_leaves_the_reference_path_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child fails (here: a kernel it does not know): the samples go on on the reference path,
    a warning says why once, /diagnostics is WARN with the reason."""
    _as_if_uncached(monkeypatch, calls=10**9)
    warmup = KernelWarmup(("no_such_kernel",))
    deadline = time.monotonic() + 120
    while warmup.compiling and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not warmup.ready()
    assert warmup.failure is not None and "exit code 1" in warmup.failure and "no_such_kernel" in warmup.failure
    log = LogSink()
    pipe = DynamicsPipeline(core.load_urdf(ARM_XML), log=log)
    pipe.start_warmup(warmup)
    for k in range(3):
        assert pipe.on_joint_state(rclpy_joint_state(k + 1, list(ARM), np.zeros(7), np.zeros(7))) is not None
    assert pipe.stats.reference_samples == 3 and not pipe.warming_up
    assert [line for line in log.lines if "compiled kernels unavailable" in line] == [
        f"compiled kernels unavailable, the reference implementation serves the samples: {warmup.failure}"]
    report = DiagnosticsReporter().report(pipe, "arm")
    assert report.level is Level.WARN
    assert "compiled kernels unavailable, reference path serving" in report.message
    assert dict(report.values)["compiled_kernels"] == "unavailable (reference path)"
    assert dict(report.values)["compiled_kernels_failure"] == warmup.failure


def test_kernels_missing_from_the_cache_after_the_child_are_not_compiled_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child succeeded but this process's cache does not hold the kernels (another cache
    directory, a read-only cache): no compilation here, the reason in ``failure``."""
    _as_if_uncached(monkeypatch, calls=10**9)
    warmup = KernelWarmup(("rnea_one",))
    deadline = time.monotonic() + 900
    while warmup.compiling and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not warmup.ready()
    assert warmup.failure is not None and warmup.failure.startswith("numba's cache does not hold rnea_one")


def test_diagnostics_say_warming_up_and_keep_warn_for_real_problems() -> None:
    """While the kernels compile: OK with "warming up" and the reference path's rate, also when the
    estimator restarts (and once more at the switch to the kernels); a sample with NaN is still a
    problem (WARN)."""
    clock = [0.0]
    pipe = DynamicsPipeline(core.load_urdf(ARM_XML), PipelineConfig(acceleration_source="estimated"))
    warmup = _Compiling()
    pipe.start_warmup(warmup)  # type: ignore[arg-type]
    reporter = DiagnosticsReporter(clock=lambda: clock[0])
    zeros = np.zeros(7)
    for burst in range(3):  # bursts 0.2 s apart: the estimator restarts at each (its window is 0.05 s)
        for k in range(5):
            pipe.on_joint_state(rclpy_joint_state(burst * 200_000_000 + k * 8_000_000 + 1, list(ARM), zeros, zeros))
    clock[0] = 1.0
    report = reporter.report(pipe, "arm")
    assert pipe.stats.skipped and pipe.stats.reference_samples == 9
    assert report.level is Level.OK, report
    assert report.message == "warming up: compiled kernels building, reference path serving 9 samples/s"
    assert dict(report.values)["compiled_kernels"] == "compiling (reference path)"
    pipe.on_joint_state(rclpy_joint_state(10**9, list(ARM), np.full(7, np.nan), zeros))
    clock[0] = 2.0
    report = reporter.report(pipe, "arm")
    assert report.level is Level.WARN
    assert report.message == ("1 samples skipped; warming up: compiled kernels building, "
                              "reference path serving 0 samples/s")
    warmup.done = True  # the kernels take over after a pause (loading them): the estimator restarts
    for k in range(3):
        pipe.on_joint_state(rclpy_joint_state(3 * 10**9 + k * 1_000_000, list(ARM), zeros, zeros))
    clock[0] = 3.0
    report = reporter.report(pipe, "arm")
    assert report.level is Level.OK and report.message == "ok", report
    for k in range(3):  # from now on a restart of the estimator (a gap in the stream) counts as before
        pipe.on_joint_state(rclpy_joint_state(5 * 10**9 + k * 1_000_000, list(ARM), zeros, zeros))
    clock[0] = 4.0
    report = reporter.report(pipe, "arm")
    assert report.level is Level.WARN and report.message == "2 samples skipped"


class _Compiling:
    """A warm-up whose kernels are still compiling until ``done`` is set."""

    def __init__(self) -> None:
        self.done = False
        self.failure: str | None = None

    @property
    def compiling(self) -> bool:
        return not self.done

    def ready(self) -> bool:
        return self.done

    def close(self) -> None:
        pass


def test_contact_samples_while_compiling_run_no_compiled_code(monkeypatch) -> None:
    """With contacts, the samples taken while the kernels compile run the core's readable paths
    only (every compiled entry point fails here if called) and give the standing Solo12's
    contact-consistent torques, which Pinocchio's statics check; then the kernels take over with
    the same numbers."""
    import contact_sim
    from test_pipeline import odometry, ros_joint_state

    from liedyn_ros.core.fast import entry
    from liedyn_ros.pipeline import PipelineConfig
    from liedyn_ros.robot_data import robots_dir

    urdf = str(robots_dir() / "solo_description/robots/solo12.urdf")
    model = core.load_urdf(urdf, floating_base=True)
    pin_model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    q_pin = contact_sim.standing_posture(pin_model)
    pipe = DynamicsPipeline(model, PipelineConfig(base_link="base_link", contact_links=contact_sim.FEET))
    warmup = _Compiling()
    pipe.start_warmup(warmup)  # type: ignore[arg-type]
    names = [name for name in dir(entry.single) if not name.startswith("_")] + list(CONTACT_KERNELS) + [
        "rnea_one", "gravity_one", "hybrid_one", "observer_one"]

    def forbidden(*args, **kwargs):
        raise AssertionError("a compiled kernel was called while compiling")

    outputs = []
    with monkeypatch.context() as m:
        for name in set(names):
            m.setattr(entry.single, name, forbidden, raising=False)
        for k in (1, 2):
            stamp = k * 1_000_000
            pipe.on_odometry(odometry("rclpy", stamp, q_pin[:3], q_pin[3:7], np.zeros(6), "base_link"))
            out = pipe.on_joint_state(ros_joint_state(stamp, list(model.joint_names), q_pin[7:], np.zeros(12),
                                                      np.zeros(12)))
            assert out is not None
            outputs.append(out.outputs)
    assert pipe.stats.reference_samples == 2
    warmup.done = True
    stamp = 3_000_000
    pipe.on_odometry(odometry("rclpy", stamp, q_pin[:3], q_pin[3:7], np.zeros(6), "base_link"))
    compiled = pipe.on_joint_state(ros_joint_state(stamp, list(model.joint_names), q_pin[7:], np.zeros(12),
                                                   np.zeros(12)))
    assert compiled is not None and not pipe.warming_up and pipe.stats.reference_samples == 2
    # Pinocchio's statics, g(q) = [0; tau] + sum_i J_i^T f_i with the feet's LOCAL linear Jacobians,
    # and the feet carry the weight.
    data = pin_model.createData()
    g = pin.computeGeneralizedGravity(pin_model, data, q_pin)
    pin.computeJointJacobians(pin_model, data, q_pin)
    pin.updateFramePlacements(pin_model, data)
    ids = [pin_model.getFrameId(foot) for foot in contact_sim.FEET]
    J = np.vstack([pin.getFrameJacobian(pin_model, data, i, pin.LOCAL)[:3] for i in ids])
    R = np.array([data.oMf[i].rotation for i in ids])
    for res in (outputs[0], outputs[1], compiled.outputs):
        f = res.contact_wrench[:, 3:]
        np.testing.assert_allclose(np.concatenate([np.zeros(6), res.tau_g]) + J.T @ f.reshape(-1), g,
                                   atol=1e-9 * np.abs(g).max())
        assert np.einsum("kij,kj->ki", R, f)[:, 2].sum() == pytest.approx(9.81 * model.mass)
    np.testing.assert_allclose(outputs[0].tau_g, compiled.outputs.tau_g, atol=1e-9)
    np.testing.assert_allclose(outputs[0].contact_wrench, compiled.outputs.contact_wrench, atol=1e-9)


class FiveBars:
    """The five-bar linkage of test_loops_pipeline in two pipelines: on a fixed base (efforts, the
    momentum observer), and floating on a flat contact under its ground link, standing and in
    flight; every output checked against Pinocchio's constrained dynamics."""

    def __init__(self) -> None:
        from test_loops_pipeline import LOOP, Reference

        self.fixed, self.floating = Reference(False), Reference(True)
        self.rng = np.random.default_rng(11)
        self.stamp = 10**9
        self.fixed_pipe = DynamicsPipeline(self.fixed.t.model, PipelineConfig(acceleration_source="reference", **LOOP))
        self.floating_pipe = DynamicsPipeline(self.floating.t.model, PipelineConfig(
            acceleration_source="reference", contact_links=("ground",), contact_types=("flat",), contact_source="topic",
            base_link="ground", **LOOP))

    @property
    def pipes(self) -> tuple[DynamicsPipeline, DynamicsPipeline]:
        return self.fixed_pipe, self.floating_pipe

    def check(self) -> list:
        """One sample of the fixed five-bar, one standing and one in flight of the floating one, each
        matching Pinocchio; their outputs."""
        from robots import assert_close
        from test_contacts_pipeline import flags
        from test_loops_pipeline import PASSIVE, feed, state
        from test_pipeline import ros_joint_state, trajectory

        fixed, floating, rng = self.fixed, self.floating, self.rng
        q, v, a = state(fixed, rng)
        effort = rng.normal(size=4)
        names = list(fixed.t.model.joint_names)
        self.stamp += 10**6
        self.fixed_pipe.on_reference(trajectory(names, q, v, a, self.stamp))
        res = self.fixed_pipe.on_joint_state(ros_joint_state(self.stamp, names, q, v, effort)).outputs
        zero = np.zeros(4)
        driven = np.where(np.isin(np.arange(4), PASSIVE), 0.0, effort)
        assert_close(res.tau_ff, fixed.torques(q, v, a), 1e-9, "feedforward")
        assert_close(res.tau_g, fixed.torques(q, zero, zero), 1e-9, "gravity")
        assert_close(res.qdd_pred, fixed.forward(q, v, driven), 1e-8, "predicted acceleration")
        out = [res]
        pose = np.eye(4)
        pose[2, 3] = 0.3
        vf, af = np.concatenate([np.zeros(6), v]), np.concatenate([np.zeros(6), a])
        effort[PASSIVE] = 0.0
        self.floating_pipe.on_reference(trajectory(names, q, v, a, self.stamp))
        for down in (1, 0):
            self.stamp += 10**6
            self.floating_pipe.on_contact_state(flags([down]), self.stamp)
            res = feed(self.floating_pipe, q, vf, effort, self.stamp)
            if down:
                assert_close(res.tau_ff, fixed.torques(q, v, a), 1e-9, "standing: the fixed base's torques")
                assert_close(res.base_acc_pred, np.zeros(6), 1e-9, "standing: the base held")
            else:
                assert_close(res.tau_ff, floating.torques(q, vf, af, pose), 1e-8, "flight: the joint torques")
                want = floating.forward(q, vf, np.concatenate([np.zeros(6), effort]), pose)
                assert_close(np.concatenate([res.base_acc_pred, res.qdd_pred]), want, 1e-8, "flight: the fall")
            out.append(res)
        return out


def test_loop_samples_while_compiling_run_no_compiled_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """With loop closures (a five-bar on a fixed base, and floating on a contact, standing and in
    flight), the samples taken while the kernels compile run the core's readable paths only (every
    compiled entry point, single-sample and batch, fails here if called) and match Pinocchio; then
    the kernels take over with the same numbers."""
    from liedyn_ros.core import dynamics
    from liedyn_ros.core.constraints import fast as constraints_fast, fast_closures, fast_minimisers
    from liedyn_ros.core.fast import entry

    bars = FiveBars()
    for pipe in bars.pipes:
        pipe.start_warmup(_Compiling())  # type: ignore[arg-type]

    def forbidden(*args, **kwargs):
        raise AssertionError("a compiled kernel was called while compiling")

    singles = [name for name in dir(entry.single) if not name.startswith("_")] + list(NODE_KERNELS) + list(
        CONTACT_KERNELS) + ["observer_one", "constraint_terms_many", "least_norm_forces_many", "psd_solve_many",
                            "closest_forces_many", "loop_sample_one"]
    with monkeypatch.context() as m:
        for name in set(singles):
            m.setattr(entry.single, name, forbidden, raising=False)
        for name in ("rnea_many", "gravity_many", "hybrid_many", "mass_matrix_many", "coriolis_many"):
            m.setattr(dynamics, name, forbidden)
        for module in (constraints_fast, fast_closures, fast_minimisers):
            for name in [n for n in dir(module) if n.endswith(("_many", "_one"))]:
                m.setattr(module, name, forbidden)
        warming = bars.check() + bars.check()
    assert [pipe.stats.reference_samples for pipe in bars.pipes] == [2, 4]
    for pipe in bars.pipes:
        pipe._warmup.done = True  # type: ignore[union-attr]
    bars.rng = np.random.default_rng(11)  # the first samples again, by the kernels
    again = bars.check()
    assert [pipe.stats.reference_samples for pipe in bars.pipes] == [2, 4] and not any(p.warming_up for p in bars.pipes)
    for before, after in zip(warming[:3], again):
        for name in ("tau_ff", "tau_g", "qdd_pred", "base_acc_pred", "contact_wrench"):
            if getattr(before, name) is not None:
                np.testing.assert_allclose(getattr(after, name), getattr(before, name), rtol=1e-9, atol=1e-9)


# A process of its own (its numba has nothing loaded): the five-bars' warm-ups as the node starts
# them, the first look-up finding an empty cache; the child builds (or loads) the kernels, this
# process then loads them. Every compilation in this process is recorded.
_LOOP_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from numba.core import event
    from numba.core.registry import CPUDispatcher as Dispatcher
    from liedyn_ros.core.fast import warmup
    from liedyn_ros.core.fast.rnea import rnea_many
    from liedyn_ros.core.fast.aba import hybrid_many
    from test_warmup import FiveBars

    compiled = []

    class Record(event.Listener):
        def on_start(self, ev):
            compiled.append(getattr(ev.data.get("dispatcher"), "__name__", "?"))

        def on_end(self, ev):
            pass

    event.install_listener("numba:compile", Record())
    real, calls = warmup.load_cached, [0]

    def first_empty(names):  # the two start_warmup calls
        calls[0] += 1
        return tuple(names) if calls[0] <= 2 else real(names)

    warmup.load_cached, warmup._may_be_cached = first_empty, lambda names: True
    bars = FiveBars()
    fixed, floating = bars.pipes
    fixed.start_warmup()
    floating.start_warmup()
    result = dict(started=[p.warming_up for p in bars.pipes], child=fixed._warmup._child is not None)
    bars.check()
    deadline = time.monotonic() + 900
    while any(p.warming_up for p in bars.pipes) and time.monotonic() < deadline:
        time.sleep(0.2)
    result.update(ready=[p._warmup.ready() for p in bars.pipes])  # the warm-up loads the child's kernels

    def loaded():  # every compiled kernel's signatures in this process
        return {f"{m.__name__}.{name}": len(k.overloads) for m in list(sys.modules.values())
                if getattr(m, "__name__", "").startswith("liedyn_ros.core.") for name, k in vars(m).items()
                if isinstance(k, Dispatcher)}

    before = loaded()
    bars.check()
    bars.check()
    after = loaded()
    result.update(reference=[p.stats.reference_samples for p in bars.pipes],
                  failure=[p.kernel_failure for p in bars.pipes], compiled=compiled,
                  loaded_by_samples=sorted(name for name in after if after[name] != before.get(name, 0)),
                  batch=[len(rnea_many.overloads), len(hybrid_many.overloads)])
    print(json.dumps(result))
""")


def test_loop_kernels_come_from_the_child_and_none_compiles_here(tmp_path: Path) -> None:
    """The node's warm-up of a loop model builds every kernel its samples call, batch kernels
    included, for the very signatures its calls have: after the switch the samples compile nothing
    and load nothing in the calling process (a kernel the warm-up left out, or a signature other
    than the calls', would be loaded or compiled there), and the outputs match Pinocchio before
    and after."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *(p for p in sys.path if p)]))
    proc = subprocess.run([sys.executable, "-c", _LOOP_SCRIPT], env=env, text=True, capture_output=True, timeout=1200,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["started"] == [True, True] and result["child"], result
    # the first samples (1 fixed, 2 floating) on the reference path, the later ones by the kernels
    assert result["reference"] == [1, 2] and result["failure"] == [None, None], result
    assert result["ready"] == [True, True], result
    # nothing compiled here, and nothing loaded by the samples after the switch: the warm-up had
    # loaded every kernel they call, with the one signature each call has
    assert result["compiled"] == [] and result["loaded_by_samples"] == [], result
    assert result["batch"] == [1, 1], result
