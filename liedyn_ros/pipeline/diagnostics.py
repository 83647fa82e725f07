"""What the node's /diagnostics says, from the pipeline's counters: level, message, key/values.

The node only turns a :class:`DiagnosticsReport` into a diagnostic_msgs/DiagnosticStatus. The
level is WARN when something went wrong since the previous report (the last
``diagnostics_period``, or less when a collision publishes at once): samples skipped, a
collision started or under way, contact forces that are not physical (pulling, outside the
friction cone, tipping, no force realising the motion), and when the compiled kernels cannot be
had (the reference implementation then serves every sample). It is OK again after a period
without any, and ERROR without a model. While the kernels compile in the background the level
stays OK and the message says so ("warming up: ..."); the acceleration estimator's restarts
(samples far apart on the slow reference path, and once more at the switch to the kernels) are
not problems then. The counts in the values
are totals since the pipeline was built.

Stamps: a clock reset (joint state stamps going back) is named in the first report after it, as
WARN, and counted in ``clock_resets``; joint states stamped 0 or repeating the previous stamp are
computed but give no external torque (counted in ``unstamped`` and ``repeated_stamps``), and the
report says what they leave uncomputed. Errors the node caught outside the samples (a model rebuild
refused, a callback that raised) are counted in ``node_errors`` and named once.
"""
from __future__ import annotations

import enum
import time
from typing import Callable, NamedTuple

import numpy as np

from liedyn_ros.pipeline.config import AccelerationSource, SkipReason
from liedyn_ros.pipeline.observed import event_names
from liedyn_ros.pipeline.stream import DynamicsPipeline, PipelineStats


class Level(enum.IntEnum):
    """diagnostic_msgs/DiagnosticStatus levels."""

    OK = 0
    WARN = 1
    ERROR = 2


class DiagnosticsReport(NamedTuple):
    """One DiagnosticStatus: level, message, (key, value) pairs."""

    level: Level
    message: str
    values: tuple[tuple[str, str], ...]


class NodeErrors(NamedTuple):
    """Errors the node caught outside the samples: how many, and the latest ("cannot build the
    dynamics model (the previous model is kept): RecursionError: ...")."""

    caught: int = 0
    latest: str = ""


class SampleTimes:
    """The node's own wall time per published joint state, from its bytes in to its last output
    published, kept until the next report (the latest ``capacity`` of them).

    Its p50, p99 and max are what the node adds to rclpy's and the middleware's own latency, each
    sample on its own: the tail that a mean compute time hides, and one that the machine's
    scheduling outside the callback does not enter (an echo relay's latency, the benchmark's
    reference, carries that noise twice)."""

    def __init__(self, capacity: int = 8192) -> None:
        self._seconds = np.empty(capacity)
        self._count = 0

    def add(self, seconds: float) -> None:
        self._seconds[self._count % len(self._seconds)] = seconds
        self._count += 1

    def take(self) -> tuple[tuple[str, str], ...]:
        """The report's values of the samples since the last take: sample_time_us_p50, _p99, _max
        (nan without a sample) and sample_time_samples; then starts over."""
        kept = self._seconds[:min(self._count, len(self._seconds))] * 1e6
        count, self._count = self._count, 0
        p50, p99, top = (np.percentile(kept, 50), np.percentile(kept, 99), kept.max()) if count else (np.nan,) * 3
        return (("sample_time_us_p50", f"{p50:.1f}"), ("sample_time_us_p99", f"{p99:.1f}"),
                ("sample_time_us_max", f"{top:.1f}"), ("sample_time_samples", str(count)))


# Contact violations: (diagnostics key, PipelineStats counter, key of stats.contact_offenders).
CONTACT_VIOLATIONS = (
    ("contact_pulling", "contact_pulling", "pulling"),
    ("contact_outside_friction_cone", "contact_slipping", "slipping"),
    ("contact_tipping", "contact_tipping", "tipping"),
    ("contact_unbalanced", "contact_unbalanced", None),  # a whole sample: no link to name
)


class _Counts(NamedTuple):
    """The counters a report compares with the previous one."""

    received: int
    skipped: int
    collisions: int
    contacts: tuple[int, ...]
    clock: tuple[int, int, int]  # clock resets, joint states stamped 0, repeated stamps
    reference: int  # samples on the reference path
    estimator: int  # skipped while the acceleration estimator (re)starts

    @classmethod
    def of(cls, stats: PipelineStats) -> _Counts:
        return cls(stats.received, sum(stats.skipped.values()), stats.collisions,
                   tuple(getattr(stats, counter) for _, counter, _ in CONTACT_VIOLATIONS),
                   (stats.clock_resets, stats.unstamped, stats.repeated_stamps),
                   stats.reference_samples, stats.skipped.get(SkipReason.ESTIMATOR_WARMUP, 0))


_NONE = _Counts(0, 0, 0, (0,) * len(CONTACT_VIOLATIONS), (0, 0, 0), 0, 0)


class DiagnosticsReporter:
    """Reports on a pipeline, each against the counters of the report before (a rebuilt
    pipeline starts from zero)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._time = clock()
        self._stats: PipelineStats | None = None
        self._counts = _NONE
        self._errors = 0
        self._warming = False  # the previous report's pipeline was warming up

    def report(self, pipe: DynamicsPipeline | None, model_status: str,
               errors: NodeErrors = NodeErrors(), times: SampleTimes | None = None) -> DiagnosticsReport:
        """``errors``: what the node caught outside the samples, named in the first report after;
        ``times``: the node's own time per sample since the previous report (its values taken)."""
        values = [("model", model_status)]
        if errors.caught:
            values += [("node_errors", str(errors.caught)), ("last_node_error", errors.latest)]
        fresh_error = [errors.latest] if errors.caught > self._errors else []
        self._errors = errors.caught
        if pipe is None:  # the model status says why (a refused build is counted in the values)
            return DiagnosticsReport(Level.ERROR, model_status, tuple(values))
        stats, now = pipe.stats, self._clock()
        before = self._counts if stats is self._stats else _NONE
        counts = _Counts.of(stats)
        period = now - self._time
        self._time, self._stats, self._counts = now, stats, counts
        values += [
            ("input_rate_hz", f"{(counts.received - before.received) / max(period, 1e-9):.1f}"),
            ("published", str(stats.published)),
            ("compute_time_us_mean", f"{stats.mean_compute_s * 1e6:.1f}"),
            ("compute_time_us_last", f"{stats.last_compute_s * 1e6:.1f}"),
            *(times.take() if times is not None else ()),
            ("compiled_kernels", "compiling (reference path)" if pipe.warming_up
             else "unavailable (reference path)" if pipe.kernel_failure else "ready"),
            ("reference_samples", str(stats.reference_samples)),
        ]
        values += [(f"skipped_{r.value}", str(c)) for r, c in stats.skipped.items()]
        if pipe.constrained:  # contacts or loops (loops alone: the unbalanced samples)
            for key, counter, kind in CONTACT_VIOLATIONS:
                values.append((key, str(getattr(stats, counter))))
                if kind is not None:  # the links of the latest sample with this violation
                    values.append((f"{key}_links", ", ".join(stats.contact_offenders.get(kind, ()))))
        ongoing = pipe.collision
        values += [("collision", str(ongoing is not None).lower()), ("collisions", str(stats.collisions)),
                   ("clock_resets", str(stats.clock_resets)), ("unstamped", str(stats.unstamped)),
                   ("repeated_stamps", str(stats.repeated_stamps))]
        if ongoing is not None:
            values += [("collision_joint", event_names(pipe.model, pipe.base_frame)[ongoing.joint]),
                       ("collision_peak", f"{ongoing.peak:.3f}")]
        problems = []
        fresh_collisions = counts.collisions - before.collisions
        if ongoing is not None or fresh_collisions:
            where = f" on {event_names(pipe.model, pipe.base_frame)[ongoing.joint]}" if ongoing is not None else ""
            problems.append(f"collision{where} ({stats.collisions} so far)")
        skipped = counts.skipped - before.skipped
        warming, was_warming, self._warming = pipe.warming_up, self._warming and before is not _NONE, pipe.warming_up
        if warming or was_warming:  # the estimator restarting after the reference path's pauses, and
            # once more at the switch to the kernels (loading them holds a sample up): part of warming up
            skipped -= counts.estimator - before.estimator
        if skipped > 0:
            problems.append(f"{skipped} samples skipped")
        contacts = _contact_problems(stats, counts, before, period)
        if contacts:
            problems.append(contacts)
        problems += _clock_problems(pipe, counts.clock, before.clock) + fresh_error
        serving = f"reference path serving {(counts.reference - before.reference) / max(period, 1e-9):.0f} samples/s"
        failure = pipe.kernel_failure
        if failure:
            values.append(("compiled_kernels_failure", failure))
            problems.append(f"compiled kernels unavailable, {serving}")
        notes = [f"warming up: compiled kernels building, {serving}"] if warming else []
        return DiagnosticsReport(Level.WARN if problems else Level.OK, "; ".join(problems + notes) or "ok",
                                 tuple(values))


def _clock_problems(pipe: DynamicsPipeline, now: tuple[int, int, int], then: tuple[int, int, int]) -> list[str]:
    """The clock resets since the previous report, and what joint states stamped 0 or repeating
    the previous stamp left uncomputed (``now``, ``then``: _Counts.clock)."""
    stats, problems = pipe.stats, []
    resets, unstamped, repeated = (a - b for a, b in zip(now, then))
    if resets and stats.clock_reset is not None:
        back, to = (ns * 1e-9 for ns in stats.clock_reset)
        problems.append(f"clock reset: stamps went back from {back:.3f} s to {to:.3f} s, observer, estimator and "
                        f"collision state restarted ({stats.clock_resets} so far)")
    lost = _untimed_losses(pipe)
    if unstamped and lost:
        problems.append(f"{unstamped} joint states stamped 0: {lost}")
    if repeated and pipe.config.external_torque_observer:
        problems.append(f"{repeated} joint states repeated the previous stamp: no external torque for them")
    return problems


def _untimed_losses(pipe: DynamicsPipeline) -> str:
    """What a joint state stamped 0 cannot give with this configuration ("" if nothing)."""
    cfg, lost = pipe.config, []
    if cfg.external_torque_observer:
        lost.append("no external torque or collision detection (the observer integrates over time)")
    if cfg.acceleration_source is AccelerationSource.ESTIMATED:
        lost.append("skipped, as estimated accelerations differentiate over time")
    if pipe.model.floating_base:
        lost.append("paired only with odometry stamped 0")
    return ", ".join(lost)


def _contact_problems(stats: PipelineStats, counts: _Counts, before: _Counts, period: float) -> str:
    """"contact forces not physical in the last 1.0 s: 3 tipping (left_sole_link), ..." or ""."""
    parts = []
    for (key, _, kind), now, then in zip(CONTACT_VIOLATIONS, counts.contacts, before.contacts):
        if now > then:
            links = ", ".join(stats.contact_offenders.get(kind, ())) if kind is not None else ""
            parts.append(f"{now - then} {key.removeprefix('contact_').replace('_', ' ')}"
                         + (f" ({links})" if links else ""))
    return f"contact forces not physical in the last {period:.1f} s: " + ", ".join(parts) if parts else ""
