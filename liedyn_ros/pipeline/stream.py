"""The streaming pipeline: one message at a time, as the node receives them."""
from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from liedyn_ros import core
from liedyn_ros.core import SingularInertiaError, reference
from liedyn_ros.core.fast.warmup import (
    CONTACT_KERNELS, LOOP_CONTACT_KERNELS, LOOP_KERNELS, NODE_KERNELS, KernelWarmup,
)
from liedyn_ros.core.model import urdf_limit
from liedyn_ros.pipeline.compute import DynamicsOutputs, prepare_kernels
from liedyn_ros.pipeline.config import (
    NS_PER_S, AccelerationSource, ContactSource, FloatArray, Logger, PipelineConfig, SkipReason,
)
from liedyn_ros.pipeline.contacts import (
    ContactState, WrenchSensors, check_tipping, contact_frames, decode_contact_flags, kinematic_contacts,
    pair_contact_state, resolve_contacts,
)
from liedyn_ros.pipeline.decode import JointSample, JointStateDecoder, stamp_to_ns
from liedyn_ros.pipeline.loops import resolve_loops
from liedyn_ros.pipeline.observed import ContactObserver, event_residual, measured_torque, unreachable_touchdown
from liedyn_ros.pipeline.estimate import AccelerationEstimator
from liedyn_ros.pipeline.pair import BaseState, Reference, decode_odometry, decode_reference, pair_odometry
from liedyn_ros.pipeline.payload import Dynamics
from liedyn_ros.pipeline.routes import Route, armature_of, choose_route


class PipelineOutput(NamedTuple):
    """Everything needed to publish one JointState's outputs; external_torque (n,) the momentum
    observer's estimate (None without a measured effort), collision the event that started at
    this sample; external_base_wrench (6,): with contacts on a floating base, the estimate's base
    part beyond the contacts' forces, (m, f) in the base frame (a push on the trunk)."""

    stamp_ns: int
    frame_id: str
    base_frame: str
    sample: JointSample
    outputs: DynamicsOutputs
    external_torque: FloatArray | None = None
    collision: core.Collision | None = None
    external_base_wrench: FloatArray | None = None


@dataclass
class PipelineStats:
    """Counters for diagnostics."""

    received: int = 0
    published: int = 0
    skipped: dict[SkipReason, int] = field(default_factory=dict)
    last_compute_s: float = 0.0
    total_compute_s: float = 0.0
    reference_samples: int = 0  # computed by core.reference while the kernels were compiling
    # Contact forces that are not physical, never hidden: contacts pulling, outside the
    # friction cone or tipping (a flat contact's centre of pressure off its sole), samples whose
    # motion no contact force realises (least squares used).
    contact_pulling: int = 0
    contact_slipping: int = 0
    contact_tipping: int = 0
    contact_unbalanced: int = 0
    # The contact links of the latest sample with each violation ("pulling", "slipping", "tipping").
    contact_offenders: dict[str, tuple[str, ...]] = field(default_factory=dict)
    collisions: int = 0  # collision events started
    # Stamps: jumps back (a simulator reset, a looping bag), each restarting what depends on time,
    # with the latest jump (from, to) in ns; joint states stamped 0 or with the previous stamp (no
    # time passes: computed, but the momentum observer cannot integrate up to them).
    clock_resets: int = 0
    clock_reset: tuple[int, int] | None = None
    unstamped: int = 0
    repeated_stamps: int = 0

    @property
    def mean_compute_s(self) -> float:
        return self.total_compute_s / self.published if self.published else 0.0


_NO_TIPPING = np.zeros(0, dtype=bool)
# Samples the dynamics refused: their velocity must feed no later estimate.
_REFUSED = frozenset({SkipReason.NON_FINITE_OUTPUT, SkipReason.EFFORT_OUT_OF_RANGE, SkipReason.COMPUTE_ERROR,
                      SkipReason.INTERNAL_ERROR})
# The float outputs of DynamicsOutputs, all checked before a sample is published.
_FLOAT_OUTPUTS = ("tau_ff", "tau_g", "qdd_pred", "base_wrench", "base_acc_pred", "contact_wrench", "tau_free")


def _finite(out: DynamicsOutputs) -> bool:
    """Whether every output is finite: NaN or inf makes the sum non-finite (so does a sum of huge
    finite values, garbage too). Python's sum over the lists is quicker than numpy checks at these
    sizes, and overflows without a warning."""
    total = 0.0
    for name in _FLOAT_OUTPUTS:
        x = getattr(out, name)
        if x is not None:
            total += sum(x.ravel().tolist())
    return math.isfinite(total)


def _effort_bound(model: Any, factor: float) -> tuple[FloatArray | None, list[str]]:
    """(factor x each joint's URDF effort limit, inf where the URDF gives none (core.model.urdf_limit),
    or None when no joint is bounded; the names of the unbounded joints)."""
    bound = factor * urdf_limit(model.effort_limit)
    unbounded = [name for name, b in zip(model.joint_names, bound) if math.isinf(b)]
    return (None if len(unbounded) == len(bound) else bound), unbounded


def _offenders(stats: PipelineStats) -> str:
    """"pulling FL_FOOT, HR_FOOT; tipping left_sole_link": the latest offending links per violation."""
    return "; ".join(f"{kind} {', '.join(links)}" for kind, links in stats.contact_offenders.items()) or "none"


class RateLimitedWarner:
    """At most one warning per key per ``period`` seconds, reporting how many were held back."""

    def __init__(self, log: Logger, period: float, clock: Callable[[], float] = time.monotonic):
        self._log, self._period, self._clock = log, period, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warn(self, key: str, text: str | Callable[[], str]) -> None:
        """``text``, or a function giving it: a message that costs microseconds to format is then
        formatted only when it is emitted, not for every sample it is held back."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._period:
            self._held[key] = self._held.get(key, 0) + 1
            return
        held = self._held.pop(key, 0)
        suffix = f" ({held} more since the last warning)" if held else ""
        self._last[key] = now
        self._log((text if isinstance(text, str) else text()) + suffix)


class DynamicsPipeline:
    """JointState (+ Odometry, + reference JointTrajectory, + contact state) -> :class:`PipelineOutput`.

    With ``contact_links`` configured the outputs are contact-consistent; the contact state
    comes per ``contact_source`` from :meth:`on_contact_state` (flags), :meth:`on_contact_wrench`
    (foot sensors), the kinematics, or is all contacts. With ``loop_closures`` or
    ``passive_joints`` they are also loop-consistent (pipeline.loops). Raises ValueError (naming
    the parameter) for contacts, loops or passive joints the model cannot have. ``on_joint_state`` returns None for a skipped sample, after counting the reason in
    ``stats.skipped`` and emitting a rate-limited warning through ``log``.
    """

    def __init__(
        self,
        model: Any,
        config: PipelineConfig | None = None,
        *,
        log: Logger = lambda text: None,
        clock: Callable[[], float] = time.monotonic,
        friction: Any = None,
        drive: Any = None,
    ) -> None:
        self._dynamics = Dynamics(model, friction, drive)
        self.config = config or PipelineConfig()
        self.decoder = JointStateDecoder(model, drive)
        self.stats = PipelineStats()
        self.base_frame = self.config.base_link or str(model.root_link)
        self._log = log
        self._warner = RateLimitedWarner(log, self.config.warn_period, clock)
        self._estimator = AccelerationEstimator(
            self.config.estimator_window, self.config.estimator_min_samples
        )
        self._floating = bool(model.floating_base)
        self._odom: BaseState | None = None
        self._reference: Reference | None = None
        self._last_stamp_ns: int | None = None  # the latest joint state's (a later 0 excepted)
        self._frame_warned = False
        # Set when the model turns out to have no forward dynamics (a massless link on a moving
        # joint): the torques go on, the predicted accelerations stop.
        self._no_forward_dynamics = False
        # While set, the compiled kernels are being built in a child process (start_warmup).
        self._warmup: KernelWarmup | None = None
        self._warmup_failure_logged = False
        self.contacts = resolve_contacts(model, self.config)
        self.loops = resolve_loops(model, self.config, self.contacts)
        self._contact_state: ContactState | None = None
        self._sensors = None if self.contacts is None else WrenchSensors(
            self.contacts, self.config.contact_force_threshold)
        self._all_active = None if self.contacts is None else np.ones(self.contacts.k, dtype=bool)
        cfg = self.config
        # The observer's estimate beyond the contacts' forces, and contact_source observer's state.
        self._contact_observer = None if self.contacts is None or not cfg.external_torque_observer else \
            ContactObserver(self.contacts, cfg.contact_force_threshold, cfg.contact_force_release,
                            cfg.contact_source is ContactSource.OBSERVER)
        # Said once by whoever runs the pipeline (the node at model load, the replay in its problems).
        self.contact_note = unreachable_touchdown(model, self.contacts, cfg)
        self._route = self._choose_route(self._dynamics)
        self._measured_wrench: FloatArray | None = None  # the sensors' wrenches of the latest sample
        n_base = 6 if self._floating else 0
        # Inputs the core only reads, made once. (Writable: the core's single-sample fast path
        # refuses read-only arrays.)
        self._zero_acceleration = np.zeros(n_base + len(self.decoder.joint_names))
        # Reference source: a = [0 ; qdd_ref] and v_ff = [measured base twist ; qd_ref], set
        # when a trajectory arrives; per sample only v_ff's base part changes.
        self._reference_a = self._zero_acceleration
        self._reference_v = self._zero_acceleration.copy()
        n = len(self.decoder.joint_names)
        if len(self.config.collision_threshold) not in (1, n):
            raise ValueError(f"collision_threshold: {len(self.config.collision_threshold)} values for {n} joints; "
                             "give one for all or one per joint")
        self._thresholds = np.broadcast_to(np.asarray(self.config.collision_threshold, dtype=np.float64), (n,)).copy()
        if self._contact_observer is not None and self._floating:  # and the base's force beyond the contacts
            self._thresholds = np.append(self._thresholds, self.config.external_force_threshold)
        self._observer = self._new_observer(self._dynamics)
        self._observed_tau = np.zeros(n_base + n)  # the observer's applied forces (_observe)
        self._effort_bound, unbounded = _effort_bound(model, self.config.effort_limit_factor)
        self._route.hold_to(self._effort_bound)  # a route may check its outputs against them (routes.Route)
        # (finite, in range) of the latest outputs as their route checked them, or None: _finite and
        # _out_of_range then check them here.
        self._verdict: tuple[bool, bool] | None = None
        # Said once by whoever runs the pipeline (the node at model load).
        self.unchecked_note = (f"no URDF effort limit for joints {unbounded}: their torques are published without "
                               "the effort_limit_factor check" if unbounded and
                               math.isfinite(self.config.effort_limit_factor) else None)
        self._observer_origin_ns = 0  # the stamp of the observer's t = 0
        self.collision: core.Collision | None = None  # the event under way, if any

    @property
    def model(self) -> Any:
        return self._dynamics.model

    def set_dynamics(self, dynamics: Dynamics) -> None:
        """Swap model and friction (a payload grasped, friction retuned) in one assignment: every
        sample is computed with the old pair or the new one, never half of each. The joints
        must stay the same; the estimator, odometry and reference are kept."""
        if tuple(dynamics.model.joint_names) != tuple(self.model.joint_names):
            raise ValueError("model: a swapped model must have the same joints")
        observer = self._new_observer(dynamics)  # starts over: its integral belongs to the old model
        bound, _ = _effort_bound(dynamics.model, self.config.effort_limit_factor)
        route = self._choose_route(dynamics)
        route.hold_to(bound)
        self._dynamics, self._route, self._observer, self.collision, self._effort_bound = \
            dynamics, route, observer, None, bound
        if self._contact_observer is not None:
            self._contact_observer.reset()
        self.decoder.drive = dynamics.drive

    def _choose_route(self, dynamics: Dynamics) -> Route:
        """The route of a sample through ``dynamics`` (pipeline.routes); contact_source observer:
        the contacts' state from the contact observer."""
        observer = self._contact_observer if self.config.contact_source is ContactSource.OBSERVER else None
        return choose_route(dynamics, self.contacts, self.loops, self.config.contact_solution, observer=observer)

    def _new_observer(self, dynamics: Dynamics) -> core.MomentumObserver:
        """The momentum observer of this model; the friction compensated (if any) is taken off
        the measured effort too."""
        cfg = self.config
        return core.MomentumObserver(dynamics.model, cfg.observer_gain, max_gap=cfg.observer_max_gap,
                                     friction=dynamics.friction, armature=armature_of(dynamics))

    # -- inputs -----------------------------------------------------------------------

    def on_odometry(self, msg: Any) -> SkipReason | None:
        """Store the latest odometry; returns the skip reason for a rejected message."""
        state = decode_odometry(msg)
        if isinstance(state, SkipReason):
            self._skip(state, "odometry rejected: non-finite values or a non-unit quaternion")
            return state
        if state.child_frame_id != self.base_frame and not self._frame_warned:
            # Warn once: a mismatch usually means the twist is expressed in another frame.
            self._frame_warned = True
            self._log(
                f"odometry child_frame_id '{state.child_frame_id}' differs from the base link "
                f"'{self.base_frame}'; the twist is used as if expressed in '{self.base_frame}'"
            )
        self._odom = state
        return None

    def on_reference(self, msg: Any) -> SkipReason | None:
        """Store the first point of a JointTrajectory for the ``reference`` source."""
        stamp = stamp_to_ns(msg.header.stamp)
        # A zero stamp means "now" in trajectory_msgs; date it by the latest joint state.
        if stamp == 0:
            stamp = self._last_stamp_ns or 0
        reference = decode_reference(msg, self.decoder, stamp)
        if isinstance(reference, SkipReason):
            self._skip(
                reference, "reference trajectory rejected: no points, NaN, a length mismatch "
                f"or missing joints (need {list(self.decoder.joint_names)})"
            )
            return reference
        self._reference = reference
        n_base = 6 if self._floating else 0
        # The reference has no base motion: zero base acceleration (the base twist is the
        # measured one, copied in per sample).
        self._reference_a = np.concatenate((np.zeros(n_base), reference.qdd))
        self._reference_v = np.concatenate((np.zeros(n_base), reference.qd))
        return None

    def on_contact_state(self, msg: Any, stamp_ns: int) -> SkipReason | None:
        """Store a std_msgs array of contact flags (``contact_source: topic``), stamped by the
        caller (its receive time: the arrays have no header)."""
        if self.contacts is None:
            return None
        state = decode_contact_flags(msg, self.contacts.k, stamp_ns)
        if isinstance(state, SkipReason):
            self._skip(state, f"contact state rejected: expected {self.contacts.k} finite flags "
                       f"in the order {list(self.contacts.links)}")
            return state
        self._contact_state = state
        return None

    def on_contact_wrench(self, index: int, msg: Any) -> SkipReason | None:
        """Store contact ``index``'s foot sensor WrenchStamped (``contact_source: wrench``)."""
        if self._sensors is None:
            return None
        reason = self._sensors.update(index, msg)
        if reason is not None:
            self._skip(reason, f"contact wrench {index} (contact_links order) rejected: non-finite values")
        return reason

    def on_joint_state(self, msg: Any) -> PipelineOutput | None:
        """Process one JointState; None when the sample is skipped. No exception leaves: one the
        core raises (ValueError, ``compute_error``) or any other (``internal_error``, a bug, logged
        with its traceback) costs that sample only, and leaves no trace in the pipeline's state."""
        stats = self.stats
        stats.received += 1
        sample: JointSample | SkipReason | None = None
        try:
            sample = self.decoder.decode(msg)
            started = time.perf_counter()
            result = sample if isinstance(sample, SkipReason) else self._process(sample)
        except ValueError as exc:
            result = self._refuse(SkipReason.COMPUTE_ERROR, f"dynamics rejected the sample: {exc}")
        except Exception:  # a bug: whatever it is, it costs this sample, never the stream
            result = self._refuse(SkipReason.INTERNAL_ERROR, f"unexpected error:\n{traceback.format_exc()}")
        if isinstance(result, SkipReason):
            if result in _REFUSED and isinstance(sample, JointSample):
                self._estimator.discard(sample.stamp_ns)  # its velocity must feed no later estimate
            self._skip_sample(result, msg)
            return None
        elapsed = time.perf_counter() - started
        stats.published += 1
        stats.last_compute_s = elapsed
        stats.total_compute_s += elapsed
        return result

    # -- processing ---------------------------------------------------------------------

    def _process(self, sample: JointSample) -> PipelineOutput | SkipReason:
        advances = self._advance_clock(sample.stamp_ns)
        pose = None
        v = sample.qd
        if self._floating:
            base = pair_odometry(sample.stamp_ns, self._odom, self.config.odom_max_age)
            if isinstance(base, SkipReason):
                return base
            pose = base.pose
            v = np.concatenate((base.twist, sample.qd))
        a, ff_state = self._zero_acceleration, None
        source = self.config.acceleration_source
        if source is AccelerationSource.ESTIMATED:
            if sample.stamp_ns == 0 and not advances:
                return SkipReason.UNSTAMPED
            estimate = self._estimator.update(sample.stamp_ns, v)
            if estimate is None:
                return SkipReason.ESTIMATOR_WARMUP
            if not math.isfinite(sum(estimate.tolist())):  # a velocity whose slope overflows
                return SkipReason.NON_FINITE_OUTPUT
            a = estimate
        elif source is AccelerationSource.REFERENCE:
            state = self._reference_state(sample.stamp_ns, v)
            if isinstance(state, SkipReason):
                return state
            a, ff_state = state
        active = self._active_contacts(sample, v, pose)
        if isinstance(active, SkipReason):
            return active
        outputs = self._compute(sample, v, a, pose, ff_state, active)
        # Checked before the observer takes this sample in (by the route's kernel when it checked them).
        verdict, bound = self._verdict, self._effort_bound
        if not (_finite(outputs) if verdict is None else verdict[0]):
            return SkipReason.NON_FINITE_OUTPUT
        if bound is not None and (verdict is None or not verdict[1]) and self._out_of_range(outputs, bound):
            return SkipReason.EFFORT_OUT_OF_RANGE
        observed = self._observe(sample, v, pose, advances, active)
        if observed is None:
            return SkipReason.NON_FINITE_OUTPUT
        external, started, beyond = observed
        return PipelineOutput(sample.stamp_ns, sample.frame_id, self.base_frame, sample, outputs, external, started,
                              beyond)

    def _refuse(self, reason: SkipReason, text: str) -> SkipReason:
        self._warner.warn(reason.value, text)  # the skip's own, shorter warning is then held back
        return reason

    def _advance_clock(self, stamp_ns: int) -> bool:
        """Whether time passes at this joint state, so that the observer may integrate up to it:
        not at stamp 0 after the first sample (a driver that fills no header; a first 0 is a
        simulation starting at t = 0) nor at the previous stamp. Stamps going back (a simulator
        reset, ``ros2 bag play --loop``, /clock restarting) restart the clock."""
        stats, last = self.stats, self._last_stamp_ns
        if stamp_ns == 0 and last is not None:
            stats.unstamped += 1
            return False
        self._last_stamp_ns = stamp_ns
        if last is None or stamp_ns > last:
            return True
        if stamp_ns == last:
            stats.repeated_stamps += 1
            return False
        self._restart_clock(last, stamp_ns)
        return True

    def _restart_clock(self, last_ns: int, stamp_ns: int) -> None:
        """Start over what integrates or differentiates over time, as at the first sample.

        Odometry and contact states pair within their max age on either side, so those of the old
        timeline pair with nothing; a reference is only aged forward, so one stamped after the new
        time by more than ``reference_max_age`` would never age: it is forgotten."""
        self._reset_observer()
        self._estimator.reset()
        max_age = self.config.reference_max_age
        if self._reference is not None and max_age > 0 and self._reference.stamp_ns - stamp_ns > max_age * NS_PER_S:
            self._reference = None
        stats = self.stats
        stats.clock_resets += 1
        stats.clock_reset = (last_ns, stamp_ns)
        self._warner.warn("clock_reset", lambda: (
            f"clock reset: joint state stamps went back from {last_ns * 1e-9:.3f} s to {stamp_ns * 1e-9:.3f} s; "
            f"observer, acceleration estimator and collision state restarted ({stats.clock_resets} so far)"))

    def _reset_observer(self) -> None:
        self._observer.reset()
        if self._contact_observer is not None:
            self._contact_observer.reset()
        self.collision = None

    def _observe(self, sample: JointSample, v: FloatArray, pose: FloatArray | None, advances: bool,
                 active: np.ndarray | None
                 ) -> tuple[FloatArray | None, core.Collision | None, FloatArray | None] | None:
        """(joint part of the external torque, the collision event starting here, the base part
        beyond the contacts or None) for this sample;
        None when the observer's terms overflow (it refuses the sample and keeps its state).

        Without a measured effort the observer cannot integrate: it starts over at the next one.
        Where no time passes (``advances`` False) it has nothing to integrate: no estimate, its
        state and the collision state as they were. With contacts, what remains beyond the contacts'
        forces (pipeline.observed); ``active`` the contacts' state of this sample.
        """
        observer = self._observer
        if not self.config.external_torque_observer or self._warmup is not None or not advances:
            return None, None, None  # off, its kernel still compiling (it starts when it is ready), or no time
        if sample.effort is None:
            self._reset_observer()
            return None, None, None
        if observer.t is None:  # times from the observer's first sample keep float64's ns resolution
            self._observer_origin_ns = sample.stamp_ns
        t = (sample.stamp_ns - self._observer_origin_ns) * 1e-9
        tau = sample.effort
        if self._floating:  # [0 (the base: no actuator); effort], in an array of its own (read by the observer only)
            tau = self._observed_tau
            tau[6:] = sample.effort
        wrench, contacts = self._measured_wrench, self.contacts
        sensed = False
        if wrench is not None and active is not None and contacts is not None:
            # the foot sensors' forces join the torques the observer integrates
            tau = np.add(tau, measured_torque(self.model, contacts, sample.q, pose, wrench, active))
            sensed = True
        try:
            r = observer.update(t, sample.q, v, tau, base_pose=pose)
        except ValueError:  # the inputs and stamps are checked by now: only an overflow is left
            return None
        watched = external = r[6:] if self._floating else r
        base = None
        if self._contact_observer is not None:
            rest = self._contact_observer.beyond_one(self.model, sample.q, pose, r, active, sensed)
            external = rest[rest.shape[0] - len(external):]
            watched = event_residual(self.model, external, rest)
            base = rest[:6] if self._floating else None
        was = self.collision
        self.collision = core.collision_step(sample.stamp_ns, watched, self._thresholds, self.config.collision_release,
                                             was)
        started = self.collision if was is None else None
        if started is not None:
            self.stats.collisions += 1
        return external, started, base

    def _out_of_range(self, out: DynamicsOutputs, bound: FloatArray) -> bool:
        """Whether a published torque exceeds its bound (warned, naming the joint)."""
        for what, tau in (("feedforward", out.tau_ff), ("gravity", out.tau_g), ("unconstrained", out.tau_free)):
            if tau is not None and (np.abs(tau) > bound).any():
                j = int(np.argmax(np.abs(tau) / bound))
                factor = self.config.effort_limit_factor
                self._warner.warn(SkipReason.EFFORT_OUT_OF_RANGE.value, (
                    f"skipped (effort_out_of_range): {what} torque {tau[j]:.4g} on {self.decoder.joint_names[j]} "
                    f"exceeds effort_limit_factor={factor:g} x its URDF effort limit {bound[j] / factor:.4g}: "
                    "nothing published (a corrupt joint state, a wrong model or payload; raise "
                    "effort_limit_factor only if the URDF's limits are placeholders)"))
                return True
        return False

    def _compute(
        self, sample: JointSample, v: FloatArray, a: FloatArray, pose: FloatArray | None,
        ff_state: tuple[FloatArray, FloatArray] | None, active: np.ndarray | None,
    ) -> DynamicsOutputs:
        """The route's outputs (pipeline.routes); a model without forward
        dynamics keeps its torques, not its predictions."""
        route = self._route  # read once: a swap in between cannot mix two models
        if not self._no_forward_dynamics:
            try:
                return self._outputs(route, sample.q, v, a, sample.effort, pose, ff_state, active)
            except SingularInertiaError as exc:  # a property of the model, not of the sample
                self._forget_forward_dynamics(exc)
        return self._outputs(route, sample.q, v, a, None, pose, ff_state, active)

    def _outputs(
        self, route: Route, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
        pose: FloatArray | None, ff_state: tuple[FloatArray, FloatArray] | None, active: np.ndarray | None,
    ) -> DynamicsOutputs:
        """The route's outputs, its contact checks counted."""
        out = route.outputs(q, v, a, effort, pose, active, ff_state=ff_state, algorithms=self._algorithms())
        self._verdict = route.verdict
        checks, stats, contacts = out.checks, self.stats, self.contacts
        if checks is None:
            return out
        links = () if contacts is None else contacts.links
        tipping = _NO_TIPPING  # loops alone (no contact) or no sole: no call, per sample
        if contacts is not None and contacts.soles is not None and out.contact_wrench is not None \
                and out.contact_active is not None:
            tipping = check_tipping(contacts, out.contact_wrench, out.contact_active, checks.pulling)
        if contacts is not None and checks.pulling is checks.slipping is contacts.clear and tipping is _NO_TIPPING:
            # check_forces found every contact pushing inside its cone: nothing to count, or only that no
            # force balances the base (two point feet down, at every sample: no numpy reductions for it)
            if checks.unbalanced:
                stats.contact_unbalanced += 1
                self._warner.warn("contact_forces", self._contact_warning)
            return out
        # One sample's flags as lists: a contact pulling or slipping (a foot lifting off) is counted
        # without numpy reductions, each of which costs microseconds at these sizes.
        pulling, slipping, tips = checks.pulling.tolist(), checks.slipping.tolist(), tipping.tolist()
        if True in pulling or True in slipping or True in tips or checks.unbalanced:
            for kind, flags in (("pulling", pulling), ("slipping", slipping), ("tipping", tips)):
                if True in flags:
                    stats.contact_offenders[kind] = tuple(link for link, bad in zip(links, flags) if bad)
            stats.contact_pulling += sum(pulling)
            stats.contact_slipping += sum(slipping)
            stats.contact_tipping += sum(tips)
            stats.contact_unbalanced += int(checks.unbalanced)
            self._warner.warn("contact_forces", self._contact_warning)
        return out

    def _contact_warning(self) -> str:
        stats = self.stats
        return ("contact forces not physical: "
                f"{stats.contact_pulling} pulling, {stats.contact_slipping} outside the friction cone "
                f"(mu={self.config.friction_coefficient}), {stats.contact_tipping} tipping (centre of pressure "
                f"off the sole), {stats.contact_unbalanced} samples no contact force realises (least squares) "
                f"so far; latest: {_offenders(stats)}")

    def _algorithms(self) -> Any:
        """None (the core's compiled kernels), or core.reference while they are being built."""
        if self._warmup is None:
            return None
        if self._warmup.ready():
            self._warmup = None
            return None
        if self._warmup.failure is not None and not self._warmup_failure_logged:
            self._warmup_failure_logged = True
            self._log(f"compiled kernels unavailable, the reference implementation serves the samples: "
                      f"{self._warmup.failure}")
        self.stats.reference_samples += 1
        return reference

    def _active_contacts(self, sample: JointSample, v: FloatArray, pose: FloatArray | None) -> np.ndarray | SkipReason | None:
        """The active contacts for this sample per ``contact_source``; None without contacts, and with
        the observer's source (its route, pipeline.routes.observed, holds the state)."""
        contacts, cfg = self.contacts, self.config
        if contacts is None:
            return None
        source = cfg.contact_source
        if source is ContactSource.ALL:
            return self._all_active
        if source is ContactSource.TOPIC:
            state = pair_contact_state(sample.stamp_ns, self._contact_state, cfg.contact_max_age)
        elif source is ContactSource.WRENCH:
            assert self._sensors is not None
            state = self._sensors.state(sample.stamp_ns, cfg.contact_max_age)
            if not isinstance(state, SkipReason):
                self._measured_wrench = state.wrench
        elif source is ContactSource.OBSERVER:
            return None
        else:
            T_wc = contact_frames(self.model, contacts, sample.q, pose, fast=self._warmup is None)
            A = core.constraint_jacobian(self.model, sample.q, contacts.on(self.model), base_pose=pose,
                                         fast=self._warmup is None)
            Av = A @ v
            # The linear rows of each contact: all 3 of a point, the last 3 of a flat contact.
            velocity = np.stack([Av[contacts.rows[i + 1] - 3: contacts.rows[i + 1]] for i in range(contacts.k)])
            return kinematic_contacts(contacts, T_wc, velocity, cfg)
        return state if isinstance(state, SkipReason) else state.active

    def _forget_forward_dynamics(self, exc: SingularInertiaError) -> None:
        self._no_forward_dynamics = True
        self._log(f"no predicted accelerations for this model: {exc}")

    def start_warmup(self, warmup: KernelWarmup | None = None) -> None:
        """Build the kernels this pipeline's samples use in a child process (``warmup``, by default
        a new core.fast.warmup.KernelWarmup) and compute the samples with the reference
        implementation until they are ready: the first output comes without waiting for numba
        (with contacts or loop closures, the core's constrained functions on their readable paths,
        milliseconds per sample)."""
        names = NODE_KERNELS + (("observer_one",) if self.config.external_torque_observer else ())
        if self.loops is not None:
            names += LOOP_KERNELS + (LOOP_CONTACT_KERNELS if self.contacts is not None else ())
        elif self.contacts is not None:
            names += CONTACT_KERNELS
        self._warmup = warmup or KernelWarmup(names)

    @property
    def constrained(self) -> bool:
        """True with contacts, loop closures or passive joints: the constrained outputs."""
        return self.contacts is not None or self.loops is not None

    @property
    def warming_up(self) -> bool:
        """True while the samples are computed by the reference (the kernels still compiling)."""
        return self._warmup is not None and self._warmup.compiling

    @property
    def kernel_failure(self) -> str | None:
        """Why the compiled kernels cannot be had (the reference serves every sample), or None."""
        return None if self._warmup is None else self._warmup.failure

    def close(self) -> None:
        """Stop a kernel build still running in its child process."""
        if self._warmup is not None:
            self._warmup.close()
            self._warmup = None

    def prepare_kernels(self) -> float:
        """prepare_kernels for the node's single samples, with the contact path and the momentum
        observer when configured (not at the first sample, which would hold the node up for as
        long); returns the seconds it took. A model without forward dynamics is found here,
        logged once, and gives torques only."""
        start = time.perf_counter()
        model = self._dynamics.model
        q, v = np.zeros(model.n), np.zeros(model.nv)  # a robot at rest, all contacts down
        pose = np.eye(4) if self._floating else None
        try:
            prepare_kernels(model)
            down = None if self.contacts is None else np.ones(self.contacts.k, dtype=bool)
            if self.constrained:  # the constrained routes have kernels of their own: with contacts, the
                # compiled sample (all feet down) and the general path (the reference source, or samples
                # the compiled one declines, e.g. two feet down)
                for ff_state in (None,) if self.loops is not None else (None, (q, v)):
                    self._route.outputs(q, v, v, q, pose, down, ff_state=ff_state)
        except SingularInertiaError as exc:
            self._forget_forward_dynamics(exc)
        if self.config.external_torque_observer:  # and the observer's step, on a throwaway one
            observer = self._new_observer(self._dynamics)
            for t in (0.0, 1e-3):
                observer.update(t, q, v, np.zeros(model.nv), base_pose=pose)
            if self._contact_observer is not None:  # and its fit of the contact forces
                self._contact_observer.prepare(model)
        return time.perf_counter() - start

    def _reference_state(
        self, stamp_ns: int, v: FloatArray
    ) -> tuple[FloatArray, tuple[FloatArray, FloatArray]] | SkipReason:
        """(a, (q_ff, v_ff)) of the computed-torque feedforward at the latest reference."""
        ref = self._reference
        if ref is None:
            return SkipReason.NO_REFERENCE
        max_age = self.config.reference_max_age
        if max_age > 0 and stamp_ns - ref.stamp_ns > max_age * NS_PER_S:
            return SkipReason.STALE_REFERENCE
        v_ff = self._reference_v
        if self._floating:
            v_ff[:6] = v[:6]  # the measured base twist
        return self._reference_a, (ref.q, v_ff)

    # -- bookkeeping --------------------------------------------------------------------

    def _skip(self, reason: SkipReason, text: str) -> None:
        self.stats.skipped[reason] = self.stats.skipped.get(reason, 0) + 1
        self._warner.warn(reason.value, f"skipped ({reason.value}): {text}")

    def _skip_sample(self, reason: SkipReason, msg: Any) -> None:
        self._skip(reason, self._explain(reason, msg))

    def _explain(self, reason: SkipReason, msg: Any) -> str:
        if reason is SkipReason.MISSING_JOINT:
            return f"joint state lacks model joints {self.decoder.missing_joints(msg.name)}"
        if reason is SkipReason.UNNAMED_JOINT:
            return (f"joint state has entries without a name and lacks model joints "
                    f"{self.decoder.missing_joints(msg.name)}: joints are matched by name, never by position")
        texts = {
            SkipReason.DUPLICATE_JOINT: "a joint name appears twice in the joint state",
            SkipReason.LENGTH_MISMATCH: "position/velocity/effort lengths differ from name",
            SkipReason.MISSING_VELOCITY: "joint state has no velocities",
            SkipReason.NAN: "non-finite position, velocity or effort for a model joint",
            SkipReason.NO_ODOMETRY: "floating base and no odometry received yet",
            SkipReason.STALE_ODOMETRY: (
                f"latest odometry is more than odom_max_age={self.config.odom_max_age} s "
                "from the joint state stamp"
            ),
            SkipReason.ESTIMATOR_WARMUP: "acceleration estimator is collecting samples",
            SkipReason.UNSTAMPED: "joint state stamped 0: acceleration_source=estimated differentiates over time",
            SkipReason.NON_FINITE_OUTPUT: (
                "the dynamics of this sample overflow (a value too large, such as a velocity of 1e154): "
                "nothing published, no state kept"
            ),
            SkipReason.EFFORT_OUT_OF_RANGE: (
                f"a torque exceeds effort_limit_factor={self.config.effort_limit_factor:g} x its URDF effort limit"
            ),
            SkipReason.NO_REFERENCE: "acceleration_source=reference and no trajectory yet",
            SkipReason.STALE_REFERENCE: (
                f"reference is older than reference_max_age={self.config.reference_max_age} s"
            ),
            SkipReason.NO_CONTACT_STATE: (
                f"contact_source={self.config.contact_source.value} and no contact state from every contact yet"
            ),
            SkipReason.STALE_CONTACT_STATE: (
                f"contact state is more than contact_max_age={self.config.contact_max_age} s "
                "from the joint state stamp"
            ),
        }
        return texts.get(reason, reason.value)

