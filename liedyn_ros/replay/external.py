"""External torques and collision events over the replay's blocks (core.MomentumObserver).

The observer integrates the measured torque, so it runs on the samples that have one: a sample
without a measured effort breaks the integral and the observer starts over at the next one
(as after a gap longer than `max_gap`). Its joint part is the /liedyn/external_torque output;
the events come from `core.collision_events` on that joint part, carried across blocks.

Each event gets a kind (summary.json "kind"): `limit` when some joint sits at its URDF position
limit (within LIMIT_POSITION_MARGIN) or velocity limit (|v| within LIMIT_VELOCITY_SHARE of it)
on LIMIT_MIN_SAMPLES samples of the event's start (its first COMMAND_STEP_TIME_CONSTANTS / gain:
what made the estimate cross the threshold): a simulator's limit torque acts like an external one;
`command_step` when it starts within that time of the first effort after
samples without one (the observer starts over there, and a command offset shows as a step);
`collision` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from liedyn_ros import core
from liedyn_ros.core.model import urdf_limit
from liedyn_ros.pipeline.observed import ContactObserver, event_names, event_residual, measured_torque

from .errors import ReplayError

LIMIT_POSITION_MARGIN = 0.01  # rad or m inside the limit (a simulator's stop also lets it through a little)
# |v| held within 1% of the velocity limit: a simulator clamping it, not a motion passing through it
LIMIT_VELOCITY_SHARE = 0.01
LIMIT_MIN_SAMPLES = 3
COMMAND_STEP_TIME_CONSTANTS = 5.0  # the observer's estimate has settled after 5 / gain

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .samples import SampleBlock


def joints_at_limit(model: Any, q: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.bool_]:
    """(N, n): each joint at its URDF position limit (within LIMIT_POSITION_MARGIN) or velocity
    limit (|v| within LIMIT_VELOCITY_SHARE of it); q holds the joints only, v the base twist first."""
    vj = v[:, model.nv - model.n:]
    position = (q <= model.lower + LIMIT_POSITION_MARGIN) | (q >= model.upper - LIMIT_POSITION_MARGIN)
    limited = np.isfinite(urdf_limit(model.velocity_limit))
    vlim = urdf_limit(model.velocity_limit, 1.0)  # any positive value where it is not used
    return position | (limited & (np.abs(np.abs(vj) - vlim) <= LIMIT_VELOCITY_SHARE * vlim))


@dataclass(frozen=True)
class ObserverSettings:
    """--observer-gain [1/s], --collision-threshold [N m or N] (one, or one per joint),
    --collision-release (fraction of the threshold that ends an event), --observer-max-gap [s]."""

    gain: float = 50.0
    threshold: tuple[float, ...] = (10.0,)
    release: float = 0.5
    max_gap: float = 0.1

    def __post_init__(self) -> None:
        if not self.gain > 0:
            raise ReplayError(f"--observer-gain must be positive, got {self.gain}")
        if not self.threshold or not all(x > 0 for x in self.threshold):
            raise ReplayError(f"--collision-threshold must be positive, got {self.threshold}")
        if not 0 < self.release <= 1:
            raise ReplayError(f"--collision-release must be in (0, 1], got {self.release}")
        if not self.max_gap > 0:
            raise ReplayError(f"--observer-max-gap must be positive, got {self.max_gap}")


class ExternalTorque:
    """Feeds each block to the observer and the event detector; keeps the events. `friction`:
    the joint friction --params compensates (friction_compensation), taken off the measured
    torque as the node does; `armature`: --params' rotor inertia, in the momentum as the node's.
    `contacts` (pipeline.observed.ContactObserver): the estimate is what remains beyond the contacts'
    forces, and on a floating base a force on the base above `base_threshold` [N] is an event (named
    `base_link`); with contact_source observer it also gives each sample's contact state
    (`contact_state`, from the estimates up to the sample before, as the node)."""

    def __init__(self, model: Any, settings: ObserverSettings, friction: core.Friction | None = None,
                 armature: NDArray[np.float64] | None = None, contacts: ContactObserver | None = None,
                 base_threshold: float = np.inf, base_link: str = "base") -> None:
        if len(settings.threshold) not in (1, model.n):
            raise ReplayError(f"--collision-threshold takes one value or {model.n} (one per joint), "
                              f"got {len(settings.threshold)}")
        self.model = model
        self.settings = settings
        self.threshold = np.broadcast_to(np.asarray(settings.threshold, dtype=float), (model.n,))
        self.observer = core.MomentumObserver(model, settings.gain, max_gap=settings.max_gap, friction=friction,
                                              armature=armature)
        self.contacts = contacts
        self._watched = self.threshold
        if contacts is not None and model.floating_base:
            self._watched = np.append(self.threshold, base_threshold)
        self.names = event_names(model, base_link)
        self.contact_state: NDArray[np.bool_] | None = None  # per row of the last block (observer source)
        self.base_wrench: NDArray[np.float64] | None = None  # per row of the last block: the base part beyond the contacts
        self.events: list[core.Collision] = []
        self.ongoing: core.Collision | None = None
        self.at_limit: dict[int, int] = {}  # event start_ns: samples of the event with a joint at a limit
        self.command_starts: list[int] = []  # stamps of the first effort after samples without one
        # A piece of a bag (run.Piece): events are looked for on the samples stamped in [detect) only
        # (the observer runs on the warm-up before it); first_quiet_ns, the first of those with every
        # watched coordinate below the release, is where an event open at the cut in the whole
        # bag's replay ends. None: everywhere.
        self.detect: tuple[int, int] | None = None
        self.first_quiet_ns: int | None = None
        self._continuing = False  # the last sample seen had an effort: the next block goes on from it

    def add(self, block: SampleBlock, active: NDArray[np.bool_] | None = None) -> NDArray[np.float64]:
        """The joint part of the estimate (N, n), NaN on the samples without a measured effort;
        ``active`` (N, k) the contacts' state the block was computed with (not for the observer source)."""
        n, nv = self.model.n, self.model.nv
        out = np.full((len(block), n), np.nan)
        contacts = self.contacts
        own = contacts is not None and contacts.source_observer
        if contacts is not None:
            self.base_wrench = np.full((len(block), 6), np.nan)
        if own:
            assert contacts is not None
            self.contact_state = np.zeros((len(block), contacts.contacts.k), dtype=bool)
        measured = np.isfinite(block.effort).all(axis=1)
        # runs of consecutive samples with an effort: [a, b)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], measured.astype(np.int8), [0]])))
        for a, b in zip(edges[::2], edges[1::2]):
            if a > 0 or not self._continuing:
                self.observer.reset()
                if contacts is not None:
                    contacts.reset()
                self.command_starts.append(int(block.stamp_ns[a]))
            rows = slice(a, b)
            tau = np.zeros((b - a, nv))
            tau[:, nv - n:] = block.effort[rows]  # a floating base has no actuator: zero base wrench
            pose = None if block.base_pose is None else block.base_pose[rows]
            sensed = contacts is not None and block.contact_wrench is not None and active is not None
            if sensed:  # the foot sensors' forces join the torques the observer integrates
                assert contacts is not None and block.contact_wrench is not None and active is not None
                tau += measured_torque(self.model, contacts.contacts, block.q[rows], pose, block.contact_wrench[rows],
                                       active[rows])
            r = self.observer.series(block.stamp_ns[rows] * 1e-9, block.q[rows], block.v[rows], tau, base_pose=pose)
            out[rows] = r[:, nv - n:]
            watched = out[rows]
            if contacts is not None:
                before = contacts.state.active.copy()
                rest, after = contacts.beyond(self.model, block.q[rows], pose, r, None if own or active is None
                                              else active[rows], sensed)
                if own:
                    assert self.contact_state is not None
                    self.contact_state[rows] = np.vstack((before[None], after[:-1]))
                out[rows] = rest[:, nv - n:]
                if nv > n:
                    assert self.base_wrench is not None
                    self.base_wrench[rows] = rest[:, :6]
                watched = event_residual(self.model, out[rows], rest)
            stamps = block.stamp_ns[rows]
            if self.detect is not None:
                inside = (stamps >= self.detect[0]) & (stamps < self.detect[1])
                stamps, watched = stamps[inside], watched[inside]
                quiet = np.flatnonzero((np.abs(watched) < self.settings.release * self._watched).all(axis=1))
                if self.first_quiet_ns is None and len(quiet):
                    self.first_quiet_ns = int(stamps[quiet[0]])
            done, self.ongoing = core.collision_events(stamps, watched, self._watched,
                                                      release=self.settings.release, ongoing=self.ongoing)
            self.events += done
            self._count_limits(block.stamp_ns[rows], block.q[rows], block.v[rows], done, self.ongoing)
        if len(block):
            self._continuing = bool(measured[-1])
        return out

    @property
    def thresholds(self) -> NDArray[np.float64]:
        """The threshold of each coordinate events watch: the joints, then the base's force beyond
        the contacts on a floating base with contacts (pipeline.observed.event_residual)."""
        return np.asarray(self._watched, dtype=np.float64)

    def base_force(self) -> NDArray[np.float64] | None:
        """|force on the base beyond the contacts| (N,) of the last block when events watch it."""
        if len(self._watched) == self.model.n or self.base_wrench is None:
            return None
        return np.linalg.norm(self.base_wrench[:, 3:6], axis=1)

    def _count_limits(self, stamps: NDArray[np.int64], q: NDArray[np.float64], v: NDArray[np.float64],
                      done: list[core.Collision], ongoing: core.Collision | None) -> None:
        """Adds the samples of these rows at a joint limit to the start of each event they belong to."""
        at_limit = joints_at_limit(self.model, q, v).any(axis=1)
        for e in done + ([ongoing] if ongoing is not None else []):
            until = e.start_ns + self._settle_ns()
            if e.end_ns is not None:
                until = min(until, e.end_ns)
            inside = (stamps >= e.start_ns) & (stamps < until)
            self.at_limit[e.start_ns] = self.at_limit.get(e.start_ns, 0) + int((at_limit & inside).sum())

    def _settle_ns(self) -> float:
        """The observer's settling time, COMMAND_STEP_TIME_CONSTANTS / gain, in ns."""
        return COMMAND_STEP_TIME_CONSTANTS / self.settings.gain * 1e9

    def kind(self, event: core.Collision) -> str:
        """`limit`, `command_step` or `collision` (see the module docstring)."""
        if self.at_limit.get(event.start_ns, 0) >= LIMIT_MIN_SAMPLES:
            return "limit"
        if any(0 <= event.start_ns - s <= self._settle_ns() for s in self.command_starts):
            return "command_step"
        return "collision"

    def collisions(self, efforts_usable: bool = True) -> list[dict[str, Any]]:
        """The events as summary.json lists them; one still open at the end has end_ns null. None
        when the efforts are meaningless (all zero, constant, absent): the estimate is then minus
        the model's torques, not an external torque."""
        if not efforts_usable:
            return []
        events = self.events + ([self.ongoing] if self.ongoing is not None else [])
        return [{"start_ns": e.start_ns, "end_ns": e.end_ns, "joint": self.names[e.joint],
                 "peak": e.peak, "kind": self.kind(e)} for e in events]
