"""The replay itself: bags in, dynamics outputs, summary and plots out, in bounded memory.

Data flow, one block of `chunk_size` joint samples at a time::

    BagSet.messages            merged raw messages of the input topics (bagio)
    SampleStream.blocks        CDR chunk reading (cdr), pipeline JointStateDecoder.decode_arrays,
                               effort/odometry alignment (samples)
    StreamingDifferentiator    Savitzky-Golay acceleration estimate (accel)
    BlockDynamics.run          the model's route (pipeline.choose_route: RNEA, gravity, ABA, batched;
                               contact- and loop-consistent with contacts or loops), plus the
                               contact forces closest to the measurements
    ExternalTorque.add         momentum observer and collision events (external)
    OutputWriter.write         /liedyn/... mcap bag (outputs, mcapblock) and CSV (csvfmt)
    ResidualSummary, PlotRecorder
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from liedyn_ros import core, pipeline
from liedyn_ros.pipeline.observed import unreachable_touchdown
from liedyn_ros.pipeline.payload import DYNAMICS_PARAMETERS, Dynamics, dynamics_from

from . import diagnose, hints
from .accel import SavgolSettings, StreamingDifferentiator
from .bagio import BagSet
from . import outdir
from .errors import ReplayError
from .external import COMMAND_STEP_TIME_CONSTANTS, ExternalTorque, ObserverSettings, joints_at_limit
from .identify import FIT_ALL, MIN_SPEED, VALIDATE_ALL, Identifier, parse_targets, survey
from .outputs import OutputWriter
from .plots import PlotRecorder
from .samples import SampleStream, Topics
from .summary import ResidualSummary, joint_kinds

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .samples import SampleBlock

ROBOT_DESCRIPTION_TOPIC = "/robot_description"
DEFAULT_ODOM_TOPIC = "/odom"
PREPARE_NOTICE_S = 3.0  # a warm start loads the cached kernels well within this
# A piece of a bag (Piece): the observer's warm-up makes its estimate at the cut that of the whole
# bag's replay to within PIECE_TOLERANCE of the estimate where the warm-up began (it decays as
# exp(-K t), core.observer); PIECE_STREAM_S more for the stream's own state (the derivative's
# window, the stamp checks, the latest effort and odometry); reading starts PIECE_SLACK_S earlier
# again in receive time, for the receive times' lag behind the stamps.
PIECE_TOLERANCE, PIECE_STREAM_S, PIECE_SLACK_S = 1e-9, 0.5, 1.0


@dataclass(frozen=True)
class Piece:
    """A bag's samples stamped in [start_s, end_s) s after its first joint state message's stamp
    (None: from its start, to its end), replayed as one piece of several (liedyn-fleet
    --split-seconds). The pieces of a bag together give its samples exactly once. Before
    start_s a warm-up (`Piece.warmup_s`) runs through the dynamics and the observer only, so
    that the observer's estimate at the cut is the whole replay's; events are looked for from
    start_s (summary.json's "piece" says where an event open at the cut ends: first_quiet_ns);
    reading stops 5 / K after end_s (the `limit` kind of an event starting at the end)."""

    start_s: float | None
    end_s: float | None

    def __post_init__(self) -> None:
        if self.start_s is not None and self.end_s is not None and not self.start_s < self.end_s:
            raise ReplayError(f"a piece from {self.start_s} s must end after it, not at {self.end_s} s")

    @staticmethod
    def warmup_s(gain: float) -> float:
        return math.log(1 / PIECE_TOLERANCE) / gain + PIECE_STREAM_S


@dataclass(frozen=True)
class ReplayOptions:
    """What `liedyn-replay` takes on its command line (see docs/contract.md)."""

    out: Path
    urdf: Path | None = None
    joint_states_topic: str = "/joint_states"
    odom_topic: str | None = None
    acceleration_source: str = "estimated"
    gravity: tuple[float, float, float] | None = None
    effort_topic: str | None = None
    effort_joints: tuple[str, ...] = ()
    savgol: SavgolSettings = field(default_factory=SavgolSettings)
    # node parameters set by command-line options (--observer-gain: observer_gain, ...), over --params'
    parameters: Mapping[str, Any] = field(default_factory=dict)
    identify: tuple[tuple[str, ...], ...] = ()  # --identify arguments, e.g. (("payload", "tool0"),)
    identify_min_speed: float = MIN_SPEED  # rad/s or m/s: slower joint rows are left out of the fit
    # "split": fit on 70% of this recording; "fit" / "validation": all of it, for a fit of several
    # recordings pooled afterwards (identify.pool; the replay then returns its Identifier)
    identify_role: str = "split"
    chunk_size: int = 4096
    progress: bool = True
    plots: bool = True
    start_s: float | None = None  # time window, s since the first joint state (stamps)
    end_s: float | None = None
    params: Path | None = None
    contact_state_topic: str = "/contact_state"
    piece: Piece | None = None  # one piece of the bag (liedyn-fleet --split-seconds); None: all of it

    def __post_init__(self) -> None:
        if self.acceleration_source not in ("estimated", "zero"):
            raise ReplayError(
                f"--acceleration-source must be 'estimated' or 'zero', got {self.acceleration_source!r}"
            )
        if self.gravity is not None and (len(self.gravity) != 3 or not all(map(math.isfinite, self.gravity))):
            raise ReplayError(f"--gravity needs three finite numbers GX GY GZ in m/s^2, got {list(self.gravity)}")
        for name, value in (("--start", self.start_s), ("--end", self.end_s)):
            if value is not None and not math.isfinite(value):
                raise ReplayError(f"{name} must be a finite number of seconds, got {value}")
        if self.start_s is not None and self.end_s is not None and self.start_s >= self.end_s:
            raise ReplayError(f"--start {self.start_s} s is not before --end {self.end_s} s")
        if self.effort_joints and not self.effort_topic:
            raise ReplayError("--effort-joints needs --effort-topic")
        if self.piece is not None and (self.start_s is not None or self.end_s is not None):
            raise ReplayError("a piece of a bag (--split-seconds) takes no --start/--end")
        if self.piece is not None and self.identify and self.identify_role == "split":
            raise ReplayError("a piece of a bag identifies as one recording of several (identify_role fit)")
        if self.identify_role not in ("split", "fit", "validation"):
            raise ReplayError(f"identify_role must be split, fit or validation, got {self.identify_role!r}")
        if self.chunk_size < 2 * self.savgol.window:
            raise ReplayError(f"chunk size {self.chunk_size} is below twice the filter window")
        try:
            pipeline.check_parameters(self.parameters, replay=True)
        except pipeline.ParameterError as err:
            raise ReplayError(f"{err} (given on the command line)") from None


@dataclass
class ReplayReport:
    """What a replay did: counts, residual summary, problems met, where the files are."""

    bags: list[str]
    out: str
    received: int
    processed: int
    skipped: dict[str, int]
    published: dict[str, int]
    summary: dict[str, Any]
    table: str
    problems: list[str]
    skipped_types: dict[str, str]
    elapsed_s: float
    files: list[str]
    identification: dict[str, Any] | None = None
    identifier: Identifier | None = None  # identify_role fit or validation: what this recording adds
    piece: dict[str, Any] | None = None  # options.piece: its span, warm-up, and where an open event ends
    salvage: list[dict[str, Any]] = field(default_factory=list)  # damaged bag files: what was read, what lost

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("table", "identifier")}


def replay_parameters(options: ReplayOptions, joint_names: Sequence[str]) -> pipeline.Parameters:
    """The node's parameters of --params, those given on the command line over them, checked by the
    node's own rule (pipeline.check_parameters)."""
    try:
        given = pipeline.load_parameter_file(options.params, joint_names, replay=True).values if options.params else {}
        return pipeline.check_parameters(given | dict(options.parameters), joint_names, replay=True)
    except pipeline.ParameterError as err:
        raise ReplayError(f"--params {options.params}: {err}") from None


def load_model(bags: BagSet, options: ReplayOptions) -> Any:
    """The model from --urdf or the bags' /robot_description."""
    floating = options.odom_topic is not None
    if options.urdf is not None:
        if not options.urdf.is_file():
            raise ReplayError(f"--urdf {options.urdf}: no such file")
        source: str = str(options.urdf)
    else:
        msg = bags.first(ROBOT_DESCRIPTION_TOPIC)
        if msg is None or not getattr(msg, "data", ""):
            raise ReplayError(
                f"no --urdf given and no {ROBOT_DESCRIPTION_TOPIC} message in the bags; pass --urdf FILE"
            )
        source = str(msg.data)
    try:
        model = core.load_urdf(source, floating_base=floating)
    except (ValueError, OSError) as err:
        where = str(options.urdf) if options.urdf is not None else f"the bag's {ROBOT_DESCRIPTION_TOPIC}"
        if _looks_like_xacro(source, options.urdf):
            raise ReplayError(
                f"{where} is a xacro file, not a URDF: expand it first (`xacro FILE > robot.urdf`, or "
                "`ros2 run xacro xacro FILE > robot.urdf` in a ROS shell) and pass --urdf robot.urdf"
            ) from err
        raise ReplayError(f"cannot load the URDF from {where}: {err}") from err
    return model


def _with_gravity(model: Any, options: ReplayOptions, params: pipeline.Parameters) -> Any:
    """The model with --gravity, else the gravity of --params."""
    gravity = options.gravity if options.gravity is not None else params.values.get("gravity")
    return model if gravity is None else model.with_gravity(np.asarray(gravity, dtype=np.float64))


def _observer(config: pipeline.PipelineConfig) -> ObserverSettings:
    """The momentum observer and collision settings of the node's parameters."""
    return ObserverSettings(gain=config.observer_gain, threshold=config.collision_threshold,
                            release=config.collision_release, max_gap=config.observer_max_gap)


def _contact_observer(config: pipeline.PipelineConfig, contacts: pipeline.Contacts | None
                      ) -> pipeline.ContactObserver | None:
    """The observer's view of the contacts (pipeline.observed), None without contacts."""
    if contacts is None:
        return None
    return pipeline.ContactObserver(contacts, config.contact_force_threshold, config.contact_force_release,
                                    config.contact_source is pipeline.ContactSource.OBSERVER)


def _dynamics(urdf_model: Any, params: dict[str, Any], options: ReplayOptions) -> Dynamics:
    """The node's model and friction compensation: --params' payload, friction, inertial parameters."""
    try:
        return dynamics_from(urdf_model, params)
    except ValueError as err:
        raise ReplayError(f"--params {options.params}: {err}") from err


def _identifier(urdf_model: Any, params: dict[str, Any], options: ReplayOptions,
                stream: Callable[[], SampleStream]) -> Identifier | None:
    """The fit of --identify on the node's model. An identified payload replaces the one of --params;
    a payload of --params that stays is left out of the identified inertial_parameters again (the
    node adds it to them). The samples of `stream` are surveyed first: the split inside the
    window, and too few moving samples refused now rather than after the replay."""
    if not options.identify:
        return None
    problem = parse_targets(urdf_model, options.identify, options.identify_min_speed)
    keep = {k: v for k, v in params.items() if k in DYNAMICS_PARAMETERS and k != "friction_compensation"}
    if problem.payload_link:
        keep = {k: v for k, v in keep.items() if not k.startswith("payload_")}
    bare = _dynamics(urdf_model, {k: v for k, v in keep.items() if not k.startswith("payload_")}, options).model
    dynamics = _dynamics(urdf_model, keep, options)
    model = dynamics.model
    problem = parse_targets(model, options.identify, options.identify_min_speed, dynamics.drive)
    payload = core.parameters(model) - core.parameters(bare)
    if options.identify_role != "split":  # one of several recordings: counted when they are pooled
        return Identifier(problem, urdf_model, FIT_ALL if options.identify_role == "fit" else VALIDATE_ALL, payload)
    samples = stream()
    split = survey(samples.blocks(options.chunk_size), _window(options), problem.min_speed,
                   lambda: samples.first_stamp_ns)
    short = split.shortage(problem, model.joint_names)
    if short is not None:
        raise ReplayError(short)
    return Identifier(problem, urdf_model, split.split_ns, payload)


def _window(options: ReplayOptions) -> tuple[float, float]:
    """--start/--end in s since the first joint state's stamp (unbounded when absent)."""
    return (-math.inf if options.start_s is None else options.start_s,
            math.inf if options.end_s is None else options.end_s)


@dataclass(frozen=True)
class PieceSpan:
    """A Piece in the bag's stamps [ns]: its own samples [start_ns, end_ns), the warm-up from
    start_ns - warmup_ns and the tail to end_ns + tail_ns (observer only), and the receive time
    reading starts at (seek_ns; None: the bag's start)."""

    start_ns: int
    end_ns: int
    warmup_ns: int
    tail_ns: int
    seek_ns: int | None
    gain: float

    def describe(self, external: ExternalTorque | None) -> dict[str, Any]:
        """summary.json's "piece": the span, and where an event open at its start ends."""
        return {"start_ns": _bounded(self.start_ns), "end_ns": _bounded(self.end_ns), "warmup_s": self.warmup_ns * 1e-9,
                "seek_ns": self.seek_ns, "observer_gain": self.gain,
                "first_quiet_ns": None if external is None else external.first_quiet_ns,
                "thresholds": {} if external is None else dict(zip(external.names, external.thresholds.tolist()))}


_UNBOUNDED = 2**62  # stamps [ns] of a piece that starts at the bag's start or ends at its end


def _bounded(ns: int) -> int | None:
    return None if abs(ns) == _UNBOUNDED else ns


def _piece_span(bags: BagSet, piece: Piece, topics: Topics, config: pipeline.PipelineConfig) -> PieceSpan:
    """The piece's stamps and receive time from the bag's first joint state message (its stamp is
    time zero of Piece's seconds, its receive time less its stamp the lag the seek allows for)."""
    if topics.contact_state is not None:
        raise ReplayError(f"a bag whose contact states come from {topics.contact_state} is not split: a state sent "
                          "on change can date from before a piece's warm-up")
    raw = next(iter(bags.messages([topics.joint_states])), None)
    if raw is None:
        raise ReplayError(f"no {topics.joint_states} messages in the bag")
    stamp = raw.bag.deserialize(raw.data, raw.msgtype).header.stamp
    zero = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
    gain = float(np.min(config.observer_gain))
    warmup = round(Piece.warmup_s(gain) * 1e9)
    start = -_UNBOUNDED if piece.start_s is None else zero + round(piece.start_s * 1e9)
    end = _UNBOUNDED if piece.end_s is None else zero + round(piece.end_s * 1e9)
    seek = None if piece.start_s is None else raw.receive_ns + (start - warmup - zero) - round(PIECE_SLACK_S * 1e9)
    return PieceSpan(start, end, warmup, round(COMMAND_STEP_TIME_CONSTANTS / gain * 1e9), seek, gain)


def _looks_like_xacro(source: str, path: Path | None) -> bool:
    """A xacro file that failed to load (an expanded URDF may keep the xacro namespace)."""
    if path is not None:
        if path.suffix == ".xacro":
            return True
        source = path.read_text(errors="replace")
    return "<xacro:" in source


def replay(paths: list[Path], options: ReplayOptions) -> ReplayReport:
    """Replays `paths` merged in time into `options.out`; see the module docstring."""
    started = time.perf_counter()
    with BagSet([Path(p) for p in paths]) as bags:
        urdf_model = load_model(bags, options)
        checked = replay_parameters(options, urdf_model.joint_names)
        config, params = checked.config, checked.values
        urdf_model = _with_gravity(urdf_model, options, checked)
        dyn = _dynamics(urdf_model, params, options)
        model = dyn.model
        try:
            contacts = pipeline.resolve_contacts(model, config)
            loops = pipeline.resolve_loops(model, config, contacts)
        except ValueError as err:
            raise ReplayError(f"--params {options.params}: {err}") from err
        topics = _topics(bags, model, options, config, contacts)
        diagnose.check_effort_entries(bags, topics, model)
        diagnose.check_one_recording(bags)
        delay = float(params.get("effort_delay", 0.0))
        identifier = _identifier(urdf_model, params, options,
                                 lambda: SampleStream(bags, model, topics, config, dyn.drive, delay))
        span = None if options.piece is None else _piece_span(bags, options.piece, topics, config)
        outdir.claim(options.out)
        predict = _prepare_kernels(model, options)
        stream = SampleStream(bags, model, topics, config, dyn.drive, delay, None if span is None else span.seek_ns)
        names, kinds = tuple(model.joint_names), joint_kinds(model)
        links = () if contacts is None else contacts.links
        constrained = contacts is not None or loops is not None
        observing = config.external_torque_observer  # false: no external torque, no collision events (as live)
        summary = ResidualSummary(names, kinds, contact_links=links, constrained=constrained, observer=observing)
        watches_base = observing and contacts is not None and model.floating_base  # events watch its force too
        recorder = PlotRecorder(names, kinds, effort_label="commanded" if topics.effort else "measured",
                                gravity=bool(np.any(model.gravity)), contact_links=links, constrained=constrained,
                                base_link=(config.base_link or str(model.root_link)) if watches_base else "")
        armature = None if dyn.drive is None else dyn.drive.armature
        observed = _contact_observer(config, contacts) if observing else None
        external = ExternalTorque(model, _observer(config), dyn.friction, armature, observed,
                                  config.external_force_threshold, config.base_link or str(model.root_link)
                                  ) if observing else None
        if external is not None and span is not None:
            external.detect = (span.start_ns, span.end_ns)
        clues = hints.Clues(names, topics, delay)
        with OutputWriter(options.out, model, config) as writer:
            dynamics = BlockDynamics(model, config, contacts, options, predict, dyn.friction, loops, armature, observed)
            skipped_rows = _stream(stream, options, dynamics, writer, summary, recorder, external, clues, identifier,
                                   span)
        usable = diagnose.efforts_usable(summary, config.passive_joints)  # else a WARNING says why
        summary.collisions = external.collisions(usable) if external is not None else []
        summary.hints = hints.find(summary, clues, bool(np.any(model.gravity)), bags) if usable else []
        problems = (bags.problems() + diagnose.stamp_warnings(stream.skipped, stream.received)
                    + diagnose.effort_warnings(summary, bags, topics, model, config.passive_joints)
                    + [note for note in [unreachable_touchdown(model, contacts, config)] if note])
        skipped_types = bags.undecodable()
        salvage = bags.salvage()
    threshold = None if external is None else external.thresholds
    files = [str(p) for p in recorder.save(options.out, summary.collisions, threshold)] if options.plots else []
    identification = None
    if identifier is not None and options.identify_role == "split":
        identification, ident_files = identifier.finish(options.out, options.plots)
        files += [str(p) for p in ident_files]
    skipped = dict(stream.skipped) | skipped_rows
    report = ReplayReport(
        bags=[str(p) for p in paths], out=str(options.out), received=stream.received,
        processed=summary.samples, skipped=skipped, published=dict(writer.counts),
        summary=summary.as_dict(), table=summary.table(), problems=problems,
        skipped_types=skipped_types, elapsed_s=time.perf_counter() - started, files=files,
        identification=identification, identifier=None if identification is not None else identifier,
        salvage=salvage, piece=None if span is None else span.describe(external),
    )
    summary.save(options.out / "summary.json", {k: v for k, v in report.as_dict().items() if k != "summary"})
    outdir.record(options.out)
    if identification is not None and "error" in identification:  # after summary.json, which says it too
        raise ReplayError(identification["error"])
    return report


def _topics(bags: BagSet, model: Any, options: ReplayOptions, config: pipeline.PipelineConfig,
            contacts: pipeline.Contacts | None) -> Topics:
    odom = options.odom_topic or (DEFAULT_ODOM_TOPIC if model.floating_base else None)
    state, wrenches = None, ()
    if contacts is not None and config.contact_source is pipeline.ContactSource.TOPIC:
        state = options.contact_state_topic
    elif contacts is not None and config.contact_source is pipeline.ContactSource.WRENCH:
        # The node's relative topic names, at the root of the bag.
        wrenches = tuple(n if n.startswith("/") else "/" + n for n in config.wrench_topics())
    available = bags.topic_types()
    needed = [options.joint_states_topic] + [t for t in (odom, options.effort_topic, state) if t] + list(wrenches)
    missing = [t for t in needed if t not in available]
    if missing:
        raise ReplayError(f"topics {missing} are not in the bags; they hold {sorted(available)}")
    topics = Topics(options.joint_states_topic, odom, options.effort_topic, options.effort_joints, state, wrenches)
    diagnose.check_topic_types(bags, topics)
    return topics


def _prepare_kernels(model: Any, options: ReplayOptions) -> bool:
    """Build the compiled batch kernels before the progress bar starts; False when the model has
    no forward dynamics (a massless link on a moving joint), which then gives no predictions.

    Loading cached kernels takes about a second; only a wait longer than that (compiling,
    after an install) is announced."""
    notice = threading.Timer(PREPARE_NOTICE_S, print, (
        "liedyn-replay: compiling the dynamics kernels (a minute on the first run after an install)",
    ), {"file": sys.stderr})
    if options.progress:
        notice.start()
    try:
        pipeline.prepare_kernels(model, batch=True)
    except core.SingularInertiaError as err:
        print(f"liedyn-replay: no predicted accelerations: {err}", file=sys.stderr)
        return False
    finally:
        notice.cancel()
    return True


def _stream(stream: SampleStream, options: ReplayOptions, dynamics: BlockDynamics, writer: OutputWriter,
            summary: ResidualSummary, recorder: PlotRecorder, external: ExternalTorque | None, clues: hints.Clues,
            identifier: Identifier | None = None, span: PieceSpan | None = None) -> dict[str, int]:
    """Runs every block through the dynamics; returns the rows left out, by reason: no
    acceleration estimate, outside the --start/--end window (which still feeds the derivative),
    outside a piece's span (`span`: its warm-up and tail feed the observer only, and the reading
    stops after the tail)."""
    differentiator = StreamingDifferentiator(options.savgol)
    progress = _progress_bar(stream, options)
    dropped: dict[str, int] = {}
    window = _window(options)
    past_piece = False

    def leave_out(block: SampleBlock, accel: NDArray[np.float64], ok: NDArray[np.bool_], reason: str
                  ) -> tuple[SampleBlock, NDArray[np.float64]]:
        if ok.all():
            return block, accel
        dropped[reason] = dropped.get(reason, 0) + int((~ok).sum())
        return block.slice_rows(ok), accel[ok]

    def process(block: SampleBlock, accel: NDArray[np.float64]) -> None:
        # an isolated sample between gaps has no derivative
        finite = np.asarray(np.isfinite(accel).all(axis=1), dtype=np.bool_)
        block, accel = leave_out(block, accel, finite, "no_acceleration_estimate")
        assert recorder.t0 is not None
        t = block.stamp_ns * 1e-9 - recorder.t0
        block, accel = leave_out(block, accel, (t >= window[0]) & (t <= window[1]), "outside_window")
        if span is None:
            own(block, accel)
            return
        nonlocal past_piece
        past_piece = past_piece or bool(len(block) and block.stamp_ns[-1] >= span.end_ns + span.tail_ns)
        inside = (block.stamp_ns >= span.start_ns - span.warmup_ns) & (block.stamp_ns < span.end_ns + span.tail_ns)
        block, accel = leave_out(block, accel, inside, "outside_piece")
        a, b = np.searchsorted(block.stamp_ns, [span.start_ns, span.end_ns])  # stamps increase (SampleStream)
        observe(block.slice(0, a), accel[:a])
        own(block.slice(a, b), accel[a:b])
        observe(block.slice(b, len(block)), accel[b:])

    def observe(block: SampleBlock, accel: NDArray[np.float64]) -> None:
        """A piece's warm-up or tail: through the observer (and the dynamics it needs), no output."""
        if external is None or not len(block):
            return
        if external.contacts is not None and not external.contacts.source_observer:
            external.add(block, dynamics.run(block, accel).outputs.contact_active)
        else:
            external.add(block)

    def own(block: SampleBlock, accel: NDArray[np.float64]) -> None:
        if len(block):
            if external is None:  # external_torque_observer false
                result = dynamics.run(block, accel)
                tau_ext = np.full_like(block.effort, np.nan)
            elif external.contacts is not None and external.contacts.source_observer:  # its state first
                tau_ext = external.add(block)
                block = dataclasses.replace(block, contact_active=external.contact_state)
                result = dynamics.run(block, accel)
            else:
                result = dynamics.run(block, accel)
                tau_ext = external.add(block, result.outputs.contact_active)
            n = dynamics.model.n
            writer.write(block, result.outputs, accel, result.fit, tau_ext)
            summary.add_block(block.effort, result.outputs, accel[:, -n:], result.fit, tau_ext)
            recorder.add_block(block, result.outputs, accel[:, -n:], result.fit, tau_ext,
                               joints_at_limit(dynamics.model, block.q, block.v),
                               None if external is None else external.base_force())
            clues.add(block, result.outputs)
            if identifier is not None:
                identifier.add(block, accel)

    try:
        for block in stream.blocks(options.chunk_size):
            if summary.first_stamp_ns is None:  # the first joint state, also when an effort delay skipped it
                assert stream.first_stamp_ns is not None
                summary.first_stamp_ns = stream.first_stamp_ns
                recorder.t0 = summary.first_stamp_ns * 1e-9
                if span is not None and span.seek_ns is not None:
                    _check_warmup(stream, span)
            for done, accel in differentiator.feed(block):
                process(done, accel)
            if progress is not None:  # once the block is done, not when it is read
                progress.update(stream.received - progress.n)
            if past_piece:
                break
        else:
            for done, accel in differentiator.finish():
                process(done, accel)
    finally:
        if progress is not None:
            progress.update(stream.received - progress.n)  # a last chunk that was all skipped
            progress.close()
    return dropped


def _check_warmup(stream: SampleStream, span: PieceSpan) -> None:
    """A piece whose reading (from its seek) began after its warm-up would start the observer late."""
    assert stream.first_stamp_ns is not None
    if stream.first_stamp_ns > span.start_ns - span.warmup_ns:
        raise ReplayError(f"the piece's first joint state read is stamped {(stream.first_stamp_ns - span.start_ns) * 1e-9:.3f}"
                          f" s from its start, after its warm-up of {span.warmup_ns * 1e-9:.3f} s (its receive times lag "
                          f"its stamps by more than {PIECE_SLACK_S} s, or no samples there): replay it whole")


class BlockResult(NamedTuple):
    """A block's outputs, and with contacts the forces closest to the measurements."""

    outputs: pipeline.DynamicsOutputs
    fit: ContactFit | None


class BlockDynamics:
    """The dynamics of a block of samples: the node's outputs (contact- and loop-consistent with
    contacts or loops) and then the constraint forces that come closest to what was measured
    (see :class:`ContactFit`)."""

    def __init__(self, model: Any, config: pipeline.PipelineConfig, contacts: pipeline.Contacts | None,
                 options: ReplayOptions, predict: bool, friction: core.Friction | None = None,
                 loops: pipeline.Loops | None = None, armature: NDArray[np.float64] | None = None,
                 observer: pipeline.ContactObserver | None = None) -> None:
        self.model, self.config, self.contacts, self.options, self.predict = model, config, contacts, options, predict
        self.friction = friction  # friction compensation of --params, on the feedforward torques
        self.loops = loops
        self.armature = armature  # --params' rotor inertia (free path only: parameters refuse it with constraints)
        # contact_source observer: the node's route (pipeline.routes.ObservedRoute), chosen as the node
        # chooses it; each row's state is the one the observer's run over the block gave it (_active)
        source = observer if observer is not None and observer.source_observer else None
        self.route = pipeline.choose_route(Dynamics(model, friction), contacts, loops, config.contact_solution,
                                           observer=source, armature=armature)

    def run(self, block: SampleBlock, accel_est: NDArray[np.float64]) -> BlockResult:
        contacts = self.contacts
        a = accel_est if self.options.acceleration_source == "estimated" else np.zeros_like(accel_est)
        effort = block.effort if self.predict else None
        active = None if contacts is None else self._active(block)
        outputs = self.route.outputs(block.q, block.v, a, effort, block.base_pose, active)
        constrained = contacts is not None or self.loops is not None
        return BlockResult(outputs, self._fit(block, a, outputs, active) if constrained else None)

    def _active(self, block: SampleBlock) -> NDArray[np.bool_]:
        assert self.contacts is not None
        source = self.config.contact_source
        if source is pipeline.ContactSource.ALL:
            return np.ones((len(block), self.contacts.k), dtype=bool)
        if source is not pipeline.ContactSource.KINEMATIC:
            assert block.contact_active is not None
            return block.contact_active
        contacts = self.contacts
        T_wc = pipeline.contact_frames(self.model, contacts, block.q, block.base_pose)
        A = core.constraint_jacobian(self.model, block.q, contacts.constraints, base_pose=block.base_pose)
        Av = np.einsum("bij,bj->bi", A, block.v)
        velocity = np.stack([Av[:, contacts.rows[i + 1] - 3: contacts.rows[i + 1]] for i in range(contacts.k)], axis=1)
        return pipeline.kinematic_contacts(contacts, T_wc, velocity, self.config)

    def _fit(self, block: SampleBlock, a: NDArray[np.float64], out: pipeline.DynamicsOutputs,
             active: NDArray[np.bool_] | None) -> ContactFit:
        """The contact forces closest to the measurements: the measured wrenches (wrench
        source), else least squares to the measured efforts among all forces that realise the
        motion; the torques they imply. With loops, the loop forces likewise."""
        model, contacts = self.model, self.contacts
        assert out.tau_free is not None
        nb = model.nv - model.n
        tau_full = out.tau_free if out.base_wrench is None else np.concatenate([out.base_wrench, out.tau_free], axis=1)
        if self.loops is not None:
            return self._loop_fit(block, out, tau_full, active)
        assert contacts is not None and active is not None
        A = core.constraint_jacobian(model, block.q, contacts.constraints, base_pose=block.base_pose)
        rows = np.repeat(active, np.diff(contacts.rows), axis=1)
        measured = block.contact_wrench is not None
        if block.contact_wrench is not None:
            lam = np.where(rows, pipeline.stacked_forces(contacts, block.contact_wrench), 0.0)
        else:
            has_effort = np.isfinite(block.effort).all(axis=1)
            target = np.where(has_effort[:, None], block.effort, 0.0)
            lam = pipeline.forces_closest_to(tau_full, A, target, nb, rows)
            lam[~has_effort] = np.nan
        tau = pipeline.joint_torques(tau_full, A, lam, nb)
        flight = ~active.any(axis=1)
        tau[flight] = out.tau_free[flight]
        return self._contact_fit(block, out, tau, lam, measured)

    def _loop_fit(self, block: SampleBlock, out: pipeline.DynamicsOutputs, tau_full: NDArray[np.float64],
                  active: NDArray[np.bool_] | None) -> ContactFit:
        """:meth:`_fit` with loops: contact and loop forces closest to the efforts among those that
        balance the passive joints (and the base where a contact holds it); measured contact
        wrenches stay as measured, the loop forces are fitted around them."""
        model, loops = self.model, self.loops
        assert loops is not None
        cs, m_c = loops.on(model), loops.m_contacts
        act = loops.active(active, (len(block),))
        A = core.constraint_jacobian(model, block.q, cs, base_pose=block.base_pose)
        rows = cs.row_mask(act)
        has_effort = np.isfinite(block.effort).all(axis=1)
        target = np.where(has_effort[:, None], block.effort, 0.0)
        measured = block.contact_wrench is not None and loops.contacts is not None
        lam_c = None
        if block.contact_wrench is not None and loops.contacts is not None:
            lam_c = np.where(rows[:, :m_c], pipeline.stacked_forces(loops.contacts, block.contact_wrench), 0.0)
            tau_full = tau_full - np.einsum("bmi,bm->bi", A[:, :m_c], lam_c)
            rows = rows.copy()
            rows[:, :m_c] = False
        held = pipeline.base_held(model, loops, act)
        lam, tau, _ = pipeline.closest_loop_forces(model, loops, tau_full, A, target, rows, held)
        if lam_c is not None:
            lam[:, :m_c] = lam_c
        lam[~has_effort], tau[~has_effort] = np.nan, np.nan
        return self._contact_fit(block, out, tau, lam[:, :m_c], measured)

    def _contact_fit(self, block: SampleBlock, out: pipeline.DynamicsOutputs, tau: NDArray[np.float64],
                     lam: NDArray[np.float64], measured: bool) -> ContactFit:
        """The ContactFit of torques tau and contact forces lam (contacts' rows), with the normal
        forces of the configured solution and of the fit; no contacts: (N, 0) wrenches."""
        contacts, n = self.contacts, len(block)
        if contacts is None:
            none = np.zeros((n, 0))
            return ContactFit(tau, np.zeros((n, 0, 6)), measured, none, none, none.astype(bool))
        wrench = pipeline.contact_wrenches(contacts, lam)
        R = pipeline.contact_frames(self.model, contacts, block.q, block.base_pose)[..., :3, :3]
        assert out.contact_wrench is not None and out.contact_active is not None
        normal, normal_fit = (np.einsum("bkij,bkj->bki", R, w[..., 3:]) @ contacts.up
                              for w in (out.contact_wrench, wrench))
        assert out.checks is not None
        tipping = pipeline.check_tipping(contacts, out.contact_wrench, out.contact_active, out.checks.pulling)
        return ContactFit(tau, wrench, measured, normal, normal_fit, tipping)


class ContactFit(NamedTuple):
    """tau (N, n): the contact-consistent torques closest to the measured efforts (or implied
    by the measured wrenches, ``measured``); wrench (N, k, 6) those contact forces (m, f) at
    the contact points in link axes. NaN rows where nothing was measured."""

    tau: NDArray[np.float64]
    wrench: NDArray[np.float64]
    measured: bool
    normal: NDArray[np.float64]      # (N, k) the configured solution's normal forces (world up)
    normal_fit: NDArray[np.float64]  # (N, k) the fit's
    tipping: NDArray[np.bool_]       # (N, k) the configured solution's centre of pressure off its sole


def _progress_bar(stream: SampleStream, options: ReplayOptions) -> Any:
    if not options.progress:
        return None
    from tqdm import tqdm

    # Progress in joint states, one update per chunk: each is shown (no mininterval), and the
    # bar stays at the end, so even a one-chunk bag shows its count and rate, not just "0%".
    total = stream.bags.message_count([stream.topics.joint_states])
    return tqdm(total=total or None, unit="sample", desc="replay", mininterval=0, leave=True)
