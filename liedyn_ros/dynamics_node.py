"""ROS 2 node: joint states (+ odometry) in, feedforward / gravity torques and predicted
accelerations out. It only wires ROS to :mod:`liedyn_ros.pipeline`, which does all the work.

Console scripts ``dynamics_node`` and ``dynamics_lifecycle_node`` (liedyn_ros.node_main, which
also handles Ctrl-C and SIGTERM); the contract (topics, frames, orderings, parameters) is
docs/node.md, the defaults are in config/dynamics.yaml.
"""
from __future__ import annotations

import functools
import math
import time
import traceback
import warnings
from typing import Any, Callable

import numpy as np
from builtin_interfaces import msg as builtin_msgs
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs import msg as geometry_msgs
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs import msg as sensor_msgs
from std_msgs import msg as std_msgs
from trajectory_msgs import msg as trajectory_msgs

try:  # rclpy since Iron (importing qos_event there warns that it is deprecated)
    from rclpy.event_handler import PublisherEventCallbacks  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Humble, and the type stubs
    from rclpy.qos_event import PublisherEventCallbacks  # type: ignore[no-redef, unused-ignore]

from liedyn_ros import core
from liedyn_ros.pipeline import (
    TOPIC_BASE_ACCELERATION,
    TOPIC_BASE_WRENCH,
    TOPIC_COLLISION,
    TOPIC_EFFORT_COMMAND,
    TOPIC_EXTERNAL_TORQUE,
    TOPIC_FEEDFORWARD,
    TOPIC_GRAVITY,
    TOPIC_PREDICTED_ACCELERATION,
    TOPIC_UNCONSTRAINED_FEEDFORWARD,
    PARAMETERS,
    ContactSource,
    DynamicsPipeline,
    MessageClasses,
    OutputMessageFactory,
    PipelineConfig,
    SerializedOutputs,
    check_parameters,
    contact_wrench_topic,
)
from liedyn_ros.pipeline.cdr import JointStateBytes, byte_order, read_uint8_multiarray
from liedyn_ros.pipeline.diagnostics import DiagnosticsReporter, NodeErrors, SampleTimes
from liedyn_ros.pipeline.payload import DYNAMICS_PARAMETERS, Dynamics, dynamics_from

# Parameters that change the URDF model itself (a change reloads it).
WAITING = "waiting for robot_description"  # the model status before any description
MODEL_PARAMETERS = frozenset({"robot_description", "floating_base", "gravity", "strict_urdf"})
LISTENERS_S = 0.05  # the outputs' subscribers are counted again at most this often (_listened)


def describe(exc: Exception) -> str:
    """An error as a reason: a ValueError or TypeError names the parameter or element itself; any
    other exception (a RecursionError from a deep URDF, a MemoryError) is named by its class."""
    return str(exc) if isinstance(exc, (ValueError, TypeError)) else f"{type(exc).__name__}: {exc}"


class DynamicsNode(Node):
    """Subscriptions, publishers and parameters around a :class:`DynamicsPipeline`.

    ``managed``: the part of the lifecycle node (liedyn_ros.lifecycle_node), which declares the
    parameters here and calls _configure, _release and sets ``_active`` in its transitions; the
    plain node configures at once and is active.
    """

    def __init__(self, *, managed: bool = False) -> None:
        super().__init__("liedyn_dynamics")
        self._arrival_clock = self.get_clock()  # stamps the contact states (looked up once: microseconds per call)
        for name, (default, text) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=text))
        self.add_on_set_parameters_callback(self._validate_parameters)
        self._classes = MessageClasses.from_modules(
            builtin_msgs, std_msgs, sensor_msgs, trajectory_msgs, geometry_msgs
        )
        self._pipeline: DynamicsPipeline | None = None
        self._factory: OutputMessageFactory | None = None
        self._serialized: SerializedOutputs | None = None  # the factory's messages as CDR bytes
        # joint states taken as CDR bytes, read by views (or deserialized when not plain CDR)
        self._joint_states = JointStateBytes(functools.partial(deserialize_message, message_type=sensor_msgs.JointState))
        self._description = ""
        self._model_status = WAITING
        self._rebuild = False
        self._urdf_model: Any = None  # the model before payload and corrections
        self._swap: Dynamics | None = None  # accepted payload/friction change, swapped in next sample
        self._diagnostics_reporter = DiagnosticsReporter()
        self._sample_times = SampleTimes()
        self._outputs: dict[str, Publisher] = {}
        self._listeners: frozenset[str] = frozenset()  # the outputs someone subscribes to (_listened)
        self._listeners_due = 0.0  # time.monotonic() from which they are counted again
        self._contact_subscriptions: list[Any] = []
        self._odom_subscription: Any = None  # only a floating-base model listens to odometry
        self.joint_state_subscription: Any = None  # the samples (node_main's loop serves them last)
        self._warned_flaws: set[str] = set()
        self._errors = NodeErrors()  # caught outside the samples, for /diagnostics
        self._active = not managed  # computing and publishing outputs (a managed node: when active)
        self._unconfigured: set[Any] | None = None  # the node's entities before _configure
        if not managed:
            self._configure()

    def _configure(self) -> None:
        """Publishers, subscriptions, the diagnostics timer, and the model with its kernel warm-up."""
        self._unconfigured = {*self.publishers, *self.subscriptions, *self.timers}
        self._rebuild, self._swap = False, None  # the build below reads every parameter as set now
        self._outputs = self._create_publishers()
        self._create_subscriptions()
        self.create_timer(self._diagnostics_period(), self._guard(self._publish_diagnostics, "diagnostics"))
        self._guard(self._load_model_from_parameter, "startup")()

    def _release(self) -> None:
        """Undo _configure: the kernel build stopped, the model dropped, and every publisher,
        subscription and timer made since (also by model rebuilds) destroyed; parameters stay."""
        self.close()
        before, self._unconfigured = self._unconfigured, None
        if before is None:
            return
        for publisher in [p for p in self.publishers if p not in before]:
            self.destroy_publisher(publisher)
        for subscription in [s for s in self.subscriptions if s not in before]:
            self.destroy_subscription(subscription)
        for timer in [t for t in self.timers if t not in before]:
            self.destroy_timer(timer)
        self._pipeline = self._factory = self._serialized = self._urdf_model = self._swap = None
        self._description, self._model_status, self._rebuild = "", WAITING, False
        self._outputs, self._contact_subscriptions, self._odom_subscription = {}, [], None
        self._listeners, self._listeners_due = frozenset(), 0.0
        self.joint_state_subscription = None

    @property
    def companion_subscriptions(self) -> tuple[Any, ...]:
        """The subscriptions whose messages only pair with the next joint state (odometry, contact
        states, foot sensors): node_main's loop takes them whenever it wakes and never waits for
        them, so that a sample wakes it once (none before the joint states are subscribed)."""
        if self.joint_state_subscription is None:
            return ()
        return tuple(s for s in (self._odom_subscription, *self._contact_subscriptions) if s is not None)

    def _diagnostics_period(self) -> float:
        """diagnostics_period, or its default when it is not > 0 and finite (0 would spin the timer,
        a negative period end the node; the model build refuses the value and says so)."""
        period = float(self.get_parameter("diagnostics_period").value)
        if period > 0 and math.isfinite(period):
            return period
        default = float(PARAMETERS["diagnostics_period"][0])
        self.get_logger().error(f"diagnostics_period: {period} must be finite and > 0; "
                                f"/diagnostics every {default} s")
        return default

    def _guard(self, callback: Callable[..., None], what: str) -> Callable[..., None]:
        """``callback`` that no exception leaves: a message, a description or a parameter that breaks
        something is logged and counted in /diagnostics, and the node goes on."""
        def guarded(*args: Any) -> None:
            try:
                callback(*args)
            except Exception as exc:  # whatever it is: the robot still needs the next sample
                self._caught(f"{what}: {describe(exc)}", exc, throttle_duration_sec=5.0)
        return guarded

    def _caught(self, text: str, exc: Exception, **throttle: float) -> None:
        """Count and log an error caught outside the samples (``throttle``: for one that may repeat
        at every message)."""
        self._errors = NodeErrors(self._errors.caught + 1, text)
        if isinstance(exc, ValueError):  # a refused value or file: its message says it all
            self.get_logger().error(text, **throttle)
            return
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
        self.get_logger().error(f"{text}\n{details}", **throttle)

    # -- wiring -------------------------------------------------------------------------

    def _create_publishers(self) -> dict[str, Publisher]:
        types = {
            TOPIC_FEEDFORWARD: sensor_msgs.JointState,
            TOPIC_GRAVITY: sensor_msgs.JointState,
            TOPIC_PREDICTED_ACCELERATION: trajectory_msgs.JointTrajectory,
            TOPIC_BASE_WRENCH: geometry_msgs.WrenchStamped,
            TOPIC_BASE_ACCELERATION: geometry_msgs.AccelStamped,
            TOPIC_EFFORT_COMMAND: std_msgs.Float64MultiArray,
            TOPIC_UNCONSTRAINED_FEEDFORWARD: sensor_msgs.JointState,
            TOPIC_EXTERNAL_TORQUE: sensor_msgs.JointState,
            TOPIC_COLLISION: sensor_msgs.JointState,
        }
        pubs = {topic: self._output_publisher(kind, topic) for topic, kind in types.items()}
        self._diagnostics = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        return pubs

    def _output_publisher(self, kind: Any, topic: str) -> Publisher:
        # No QoS-event handlers on the outputs: each is one more entity the spin loop polls (a
        # subscriber with incompatible QoS is told so on its side).
        return self.create_publisher(kind, topic, 10, event_callbacks=PublisherEventCallbacks(use_default_callbacks=False))

    def _create_subscriptions(self) -> None:
        # Sensor-data QoS (best effort) also receives from reliable publishers. Raw, as odometry:
        # reading a joint state's CDR bytes (pipeline.cdr.JointStateBytes) costs a fraction of
        # rclpy's conversion into a message object.
        overrides = QoSOverridingOptions.with_default_policies()
        self.joint_state_subscription = self.create_subscription(
            sensor_msgs.JointState, "joint_states", self._guard(self._on_joint_state, "joint state"),
            qos_profile_sensor_data, qos_overriding_options=overrides, raw=True,
        )
        self.create_subscription(trajectory_msgs.JointTrajectory, "reference",
                                 self._guard(self._on_reference, "reference"), 10)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        # Relative: /robot_description at the root, or robot_state_publisher's topic in our namespace.
        self.create_subscription(std_msgs.String, "robot_description",
                                 self._guard(self._on_description, "robot_description"), latched)

    def _wire_odometry(self, floating: bool) -> None:
        """Subscribe to odometry for a floating base; a fixed base (an arm on a wheeled base
        that publishes odom) does not listen to it."""
        if floating and self._odom_subscription is None:
            # Raw: its CDR bytes, of which the pipeline reads the stamp, pose and twist alone
            # (pipeline.cdr), at a fraction of converting the whole message.
            self._odom_subscription = self.create_subscription(
                Odometry, "odom", self._guard(self._on_odometry, "odometry"), qos_profile_sensor_data,
                qos_overriding_options=QoSOverridingOptions.with_default_policies(), raw=True,
            )
        elif not floating and self._odom_subscription is not None:
            self.destroy_subscription(self._odom_subscription)
            self._odom_subscription = None

    def _wire_contacts(self, config: PipelineConfig) -> None:
        """Contact wrench publishers and the contact-state subscriptions of ``contact_source``."""
        for sub in self._contact_subscriptions:
            self.destroy_subscription(sub)
        self._contact_subscriptions = []
        for link in config.contact_links:
            topic = contact_wrench_topic(link)
            if topic not in self._outputs:
                self._outputs[topic] = self._output_publisher(geometry_msgs.WrenchStamped, topic)
                self._listeners_due = 0.0
        source = config.contact_source
        if source is ContactSource.TOPIC:
            # Raw, as joint states: the flags are read from the bytes (pipeline.cdr.read_uint8_multiarray).
            self._contact_subscriptions.append(self.create_subscription(
                std_msgs.UInt8MultiArray, "contact_state", self._guard(self._on_contact_state, "contact state"),
                qos_profile_sensor_data, raw=True))
        elif source is ContactSource.WRENCH:
            for index, topic in enumerate(config.wrench_topics()):
                self._contact_subscriptions.append(self.create_subscription(
                    geometry_msgs.WrenchStamped, topic,
                    self._guard(functools.partial(self._on_contact_wrench, index), f"contact wrench {topic}"),
                    qos_profile_sensor_data))

    # -- model ----------------------------------------------------------------------------

    def _load_model_from_parameter(self) -> None:
        description = str(self.get_parameter("robot_description").value)
        if description:
            self._build(description)
        else:
            self.get_logger().info(self._waiting_text())

    def _waiting_text(self) -> str:
        topic = self.resolve_topic_name("robot_description")
        return f"waiting for the URDF: set robot_description or publish it on {topic} (std_msgs/String)"

    def _on_description(self, msg: std_msgs.String) -> None:
        if self.get_parameter("robot_description").value:
            return  # the parameter wins over the topic
        if str(msg.data) != self._description:
            self._build(str(msg.data))

    @staticmethod
    def _load(description: str, values: dict[str, Any]) -> tuple[Any, list[warnings.WarningMessage]]:
        """(URDF model with the gravity of ``values``, the URDF flaws it was loaded with)."""
        with warnings.catch_warnings(record=True) as flaws:
            warnings.simplefilter("always", core.URDFWarning)
            model = core.load_urdf(description, floating_base=bool(values["floating_base"]),
                                   strict=bool(values["strict_urdf"]))
        return model.with_gravity(np.asarray(values["gravity"], dtype=np.float64)), flaws

    def _assemble(self, model: Any, values: dict[str, Any]
                  ) -> tuple[Dynamics, PipelineConfig, OutputMessageFactory, DynamicsPipeline]:
        """Everything the parameters give on this URDF model; raises ValueError naming a bad
        parameter (also one that only this model refuses: a contact link, a threshold count)."""
        dynamics = dynamics_from(model, values)
        config = check_parameters(values, model.joint_names).config
        factory = OutputMessageFactory(self._classes, model, config)
        logger = self.get_logger()
        pipeline = DynamicsPipeline(dynamics.model, config, log=lambda text: logger.warning(text),
                                    friction=dynamics.friction, drive=dynamics.drive)
        return dynamics, config, factory, pipeline

    def _build(self, description: str) -> None:
        """(Re)build model and pipeline; on any failure keep the model there was (none at first)
        and say why: no description or parameter value ends the node."""
        values = {name: self.get_parameter(name).value for name in PARAMETERS}
        try:
            model, flaws = self._load(description, values)
            dynamics, config, factory, pipeline = self._assemble(model, values)
        except Exception as exc:  # a RecursionError or a MemoryError too, not only the ValueErrors
            kept = "the previous model is kept" if self._pipeline is not None else "no model"
            if self._pipeline is None:
                self._model_status = f"model error: {describe(exc)}"
            self._caught(f"cannot build the dynamics model ({kept}): {describe(exc)}", exc)
            return
        logger = self.get_logger()
        for flaw in flaws:  # once per flaw for the node's life, not once per rebuild
            if issubclass(flaw.category, core.URDFWarning) and str(flaw.message) not in self._warned_flaws:
                self._warned_flaws.add(str(flaw.message))
                logger.warning(f"URDF flaw accepted (strict_urdf: true refuses it): {flaw.message}")
        self._urdf_model, self._swap = model, None
        if self._pipeline is not None:
            self._pipeline.close()
        self._pipeline = pipeline
        self._wire_odometry(model.floating_base)
        self._wire_contacts(config)
        # The first samples run on the reference implementation while numba compiles.
        pipeline.start_warmup()
        ready = ("compiled kernels building in the background" if pipeline.warming_up
                 else f"compiled kernels unavailable: {pipeline.kernel_failure}" if pipeline.kernel_failure
                 else "compiled kernels loaded")
        self._factory, self._serialized = factory, SerializedOutputs(factory, serialize_message)
        self._description = description
        kind = "floating" if model.floating_base else "fixed"
        self._model_status = f"{model.n} joints, {kind} base, root link {model.root_link}"
        logger.info(f"dynamics model ready ({ready}): {self._model_status}, joints {list(model.joint_names)}")
        for note in (pipeline.unchecked_note, pipeline.contact_note):
            if note:
                logger.warning(note)

    def _validate_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Reject bad values before they are set. Payload and friction changes alone build the new
        model here and swap it in before the next sample; anything else rebuilds the pipeline."""
        params = [p for p in params if p.name in PARAMETERS]
        if not params:  # another parameter (a QoS override declared by a subscription): nothing to rebuild
            return SetParametersResult(successful=True)
        values = {name: self.get_parameter(name).value for name in PARAMETERS}
        values.update({p.name: p.value for p in params})
        dynamics = None
        try:
            check_parameters(values, () if self._urdf_model is None else self._urdf_model.joint_names)
            # With a model known, build what the values give on it, so that a value only the
            # model refuses (a contact link it lacks, thresholds for other joints) is refused
            # here, not accepted and then leaving the node without a model at the rebuild.
            model = self._urdf_model
            description = str(values["robot_description"]) or self._description
            if description and (model is None or any(p.name in MODEL_PARAMETERS for p in params)):
                model, _ = self._load(description, values)
            if model is not None:
                dynamics = self._assemble(model, values)[0]
        except Exception as exc:  # a deep URDF's RecursionError too: refused, the node goes on
            return SetParametersResult(successful=False, reason=describe(exc))
        if dynamics is not None and all(p.name in DYNAMICS_PARAMETERS for p in params):
            self._swap = dynamics
        else:
            self._rebuild = True
        return SetParametersResult(successful=True)

    def _apply_parameter_change(self) -> None:
        """Rebuild with the parameters accepted by _validate_parameters (set by now)."""
        self._rebuild = False
        description = str(self.get_parameter("robot_description").value) or self._description
        if description:
            self._build(description)

    # -- callbacks --------------------------------------------------------------------------

    def _on_joint_state(self, raw: bytes) -> None:
        if not self._active:
            return
        started = time.perf_counter()
        if self._rebuild:
            self._apply_parameter_change()
        if self._swap is not None and self._pipeline is not None:
            self._pipeline.set_dynamics(self._swap)
            self._swap = None
            self.get_logger().info("payload/friction parameters applied")
        if self._pipeline is None or self._serialized is None:
            return
        out = self._pipeline.on_joint_state(self._joint_states.read(raw))
        if out is None:
            return
        # Only the topics someone listens to: an output nobody takes is not even encoded.
        for topic, data in self._serialized.encode(out, self._listened).items():
            self._outputs[topic].publish(data)
        self._sample_times.add(time.perf_counter() - started)
        if out.collision is not None:  # flagged in /diagnostics now, not at the next period
            self._publish_diagnostics()

    def _listened(self, topic: str) -> bool:
        """Whether ``topic`` has a subscriber, as counted at most LISTENERS_S ago: asking rclpy costs
        a call per output topic (11 with four contacts), and a subscriber takes longer than that
        to be discovered anyway."""
        now = time.monotonic()
        if now >= self._listeners_due:
            self._listeners = frozenset(t for t, p in self._outputs.items() if p.get_subscription_count() > 0)
            self._listeners_due = now + LISTENERS_S
        return topic in self._listeners

    def _on_odometry(self, data: bytes) -> None:
        if self._pipeline is not None:
            # Another serialization than plain CDR (a middleware of other ways): the whole message.
            self._pipeline.on_odometry(data if byte_order(data) else deserialize_message(data, Odometry))

    def _on_reference(self, msg: trajectory_msgs.JointTrajectory) -> None:
        if self._pipeline is not None:
            self._pipeline.on_reference(msg)

    def _on_contact_state(self, data: bytes) -> None:
        if self._pipeline is not None:  # no header: stamped by its arrival
            flags = read_uint8_multiarray(data)
            msg = deserialize_message(data, std_msgs.UInt8MultiArray) if flags is None else flags
            self._pipeline.on_contact_state(msg, self._arrival_clock.now().nanoseconds)

    def _on_contact_wrench(self, index: int, msg: geometry_msgs.WrenchStamped) -> None:
        if self._pipeline is not None:
            self._pipeline.on_contact_wrench(index, msg)

    def close(self) -> None:
        """Stop a kernel build still running in the background."""
        if self._pipeline is not None:
            self._pipeline.close()

    # -- diagnostics --------------------------------------------------------------------------

    def _publish_diagnostics(self) -> None:
        if self._pipeline is None and self._model_status == WAITING:
            self.get_logger().info(self._waiting_text(), throttle_duration_sec=10.0)
        elif self._pipeline is None:  # a refused description or parameter file: said until fixed
            self.get_logger().warning(f"no dynamics model, nothing published ({self._model_status}); "
                                      "set a good value and it is built", throttle_duration_sec=10.0)
        report = self._diagnostics_reporter.report(self._pipeline, self._model_status, self._errors,
                                                   self._sample_times)
        message = report.message if self._active else f"inactive (no outputs): {report.message}"
        status = DiagnosticStatus(name=f"{self.get_name()}: dynamics", hardware_id="liedyn_ros",
                                  level=bytes([report.level]), message=message,
                                  values=[KeyValue(key=key, value=value) for key, value in report.values])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diagnostics.publish(array)

