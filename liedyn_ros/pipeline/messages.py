"""Output messages: the one place that builds them, for rclpy and rosbags classes alike."""
from __future__ import annotations

import array
import struct
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
from numpy.typing import NDArray

from liedyn_ros.pipeline.cdr import CDR_LE
from liedyn_ros.pipeline.config import NS_PER_S, FloatArray, PipelineConfig
from liedyn_ros.pipeline.contacts import resolve_contacts, wrench_at_link
from liedyn_ros.pipeline.observed import event_names
from liedyn_ros.pipeline.stream import PipelineOutput

# Output topic names (relative, in the node's namespace); the replay prefixes them.
TOPIC_FEEDFORWARD = "feedforward_torque"
TOPIC_GRAVITY = "gravity_torque"
TOPIC_PREDICTED_ACCELERATION = "predicted_acceleration"
TOPIC_BASE_WRENCH = "base_wrench"
TOPIC_BASE_ACCELERATION = "predicted_base_acceleration"
TOPIC_EFFORT_COMMAND = "effort_command"
TOPIC_UNCONSTRAINED_FEEDFORWARD = "unconstrained/feedforward_torque"
TOPIC_CONTACT_WRENCH = "contact_wrench/"  # + the contact link
TOPIC_EXTERNAL_TORQUE = "external_torque"
TOPIC_COLLISION = "collision"


def contact_wrench_topic(link: str) -> str:
    """The output topic of a contact's wrench: contact_wrench/<link>."""
    return TOPIC_CONTACT_WRENCH + link


@dataclass(frozen=True)
class MessageClasses:
    """Message classes to build outputs with, and how to fill a float64[] field.

    rclpy wants ``array.array('d')`` for float64[]; rosbags wants numpy arrays. All messages
    are constructed with every field as a keyword, which both flavours accept.
    """

    Time: Any
    Duration: Any
    Header: Any
    JointState: Any
    JointTrajectory: Any
    JointTrajectoryPoint: Any
    Vector3: Any
    Wrench: Any
    WrenchStamped: Any
    Accel: Any
    AccelStamped: Any
    Float64MultiArray: Any
    MultiArrayLayout: Any
    float_array: Callable[[FloatArray], Any]

    @classmethod
    def from_typestore(cls, typestore: Any) -> MessageClasses:
        """Classes from a rosbags typestore (``rosbags.typesys.get_typestore(...)``)."""
        t = typestore.types
        return cls(
            Time=t["builtin_interfaces/msg/Time"],
            Duration=t["builtin_interfaces/msg/Duration"],
            Header=t["std_msgs/msg/Header"],
            JointState=t["sensor_msgs/msg/JointState"],
            JointTrajectory=t["trajectory_msgs/msg/JointTrajectory"],
            JointTrajectoryPoint=t["trajectory_msgs/msg/JointTrajectoryPoint"],
            Vector3=t["geometry_msgs/msg/Vector3"],
            Wrench=t["geometry_msgs/msg/Wrench"],
            WrenchStamped=t["geometry_msgs/msg/WrenchStamped"],
            Accel=t["geometry_msgs/msg/Accel"],
            AccelStamped=t["geometry_msgs/msg/AccelStamped"],
            Float64MultiArray=t["std_msgs/msg/Float64MultiArray"],
            MultiArrayLayout=t["std_msgs/msg/MultiArrayLayout"],
            float_array=lambda x: np.array(x, dtype=np.float64),
        )

    @classmethod
    def from_modules(
        cls, builtin_interfaces: Any, std_msgs: Any, sensor_msgs: Any,
        trajectory_msgs: Any, geometry_msgs: Any,
    ) -> MessageClasses:
        """Classes from rclpy-style ``<package>.msg`` modules (the node passes the imported
        modules, so this file imports none)."""
        return cls(
            Time=builtin_interfaces.Time,
            Duration=builtin_interfaces.Duration,
            Header=std_msgs.Header,
            JointState=sensor_msgs.JointState,
            JointTrajectory=trajectory_msgs.JointTrajectory,
            JointTrajectoryPoint=trajectory_msgs.JointTrajectoryPoint,
            Vector3=geometry_msgs.Vector3,
            Wrench=geometry_msgs.Wrench,
            WrenchStamped=geometry_msgs.WrenchStamped,
            Accel=geometry_msgs.Accel,
            AccelStamped=geometry_msgs.AccelStamped,
            Float64MultiArray=std_msgs.Float64MultiArray,
            MultiArrayLayout=std_msgs.MultiArrayLayout,
            float_array=double_array,
        )


def double_array(x: FloatArray) -> array.array[float]:
    """float64[] as rclpy stores it: array.array('d'). Copied from the bytes, since rclpy's
    setter checks every element of anything that is not already an array.array (slow)."""
    # tobytes() gives C-order bytes whatever the strides; asarray only converts other dtypes.
    return array.array("d", np.asarray(x, dtype=np.float64).tobytes())


Make = Callable[[Any, FloatArray], Any]  # (header or None, values) -> a new message
Writer = Callable[[Any], Callable[[FloatArray], None]]  # message -> what writes new values into it


class Content(NamedTuple):
    """One output message's content: its topic, the frame_id of its header (None: no header),
    how to make the message (``make(header, values)``) and to refill one (``writer``), and the
    float64 values it carries."""

    topic: str
    frame: str | None
    make: Make
    writer: Writer
    values: FloatArray


def every_topic(topic: str) -> bool:
    return True


class OutputMessageFactory:
    """Builds the node's output messages from a :class:`PipelineOutput`.

    Keys of :meth:`build`'s result are the output topic names of docs/node.md (relative); which
    ones appear follows the config's ``publish_*`` switches, whether efforts were measured
    (predicted accelerations and external torque) and whether the base floats.

    :meth:`build` returns the same message objects at every call, refilled in place: one
    message per topic, made at its first use, whose float64[] fields are written through a
    numpy view of their buffer and whose headers all share one stamp object, set once per call.
    Making a message costs tens of times more than refilling it (rclpy's constructors check
    every field; a 12-joint JointState: 150 us against 7 us on the loaded 2-core machine), and
    at 1 kHz the node's CPU time per sample is the budget (bench_ros_latency.py). Publish or
    serialize the messages before the next call (rclpy's publish serializes at once). The
    ``collision`` message, rare, is new each time; the single-message methods below
    (``torque_state``, ``wrench``...: the replay's templates) make new messages.
    :meth:`contents` says what goes into each message; the node publishes it as CDR bytes
    (:class:`SerializedOutputs`), cheaper still than a refilled message.
    """

    def __init__(self, classes: MessageClasses, model: Any, config: PipelineConfig) -> None:
        self.c = classes
        self.config = config
        self.joint_names = list(model.joint_names)
        self.event_names = event_names(model, config.base_link or str(model.root_link))  # a base event last
        self.floating_base = bool(model.floating_base)
        self.command_index = command_indices(model.joint_names, config.command_joints)
        self._empty = classes.float_array(np.zeros(0))
        contacts = resolve_contacts(model, config)
        self.contact_links = () if contacts is None else contacts.links
        self._contacts = contacts
        self._contact_topics = [contact_wrench_topic(link) for link in self.contact_links]
        # What build refills (see the class docstring): the stamp every header holds, a header
        # per frame, per topic the message and what writes new values into it.
        self._stamp = classes.Time(sec=0, nanosec=0)
        self._headers: dict[str, Any] = {}
        self._reused: dict[str, tuple[Any, Callable[[FloatArray], None]]] = {}
        # The outputs the publish_* switches offer, in build's order (fixed by the config, so
        # listed once): topic, in the base frame (else the joint state's), make, writer, and the
        # DynamicsOutputs field of its values.
        offered: list[tuple[str, bool, Make, Writer, str]] = []
        if config.publish_feedforward:
            offered.append((TOPIC_FEEDFORWARD, False, self.torque_state, effort_writer, "tau_ff"))
        if config.publish_gravity:
            offered.append((TOPIC_GRAVITY, False, self.torque_state, effort_writer, "tau_g"))
        if config.publish_predicted_acceleration:
            offered.append((TOPIC_PREDICTED_ACCELERATION, False, self.acceleration_trajectory, acceleration_writer,
                            "qdd_pred"))
        if self.floating_base and config.publish_base_outputs:
            offered.append((TOPIC_BASE_WRENCH, True, self.wrench, wrench_writer, "base_wrench"))
            offered.append((TOPIC_BASE_ACCELERATION, True, self.accel, accel_writer, "base_acc_pred"))
        self._offered = tuple(offered)

    def build(self, out: PipelineOutput) -> dict[str, Any]:
        self._set_stamp(out.stamp_ns)
        msgs = {c.topic: self._refill(c) for c in self.contents(out)}
        if out.collision is not None:
            msgs[TOPIC_COLLISION] = self.collision_state(out.collision)
        return msgs

    def _set_stamp(self, stamp_ns: int) -> None:
        """The stamp every refilled message's header holds (:meth:`_refill`)."""
        stamp = self._stamp
        stamp.sec, stamp.nanosec = divmod(int(stamp_ns), NS_PER_S)

    def contents(self, out: PipelineOutput, wanted: Callable[[str], bool] = every_topic) -> list[Content]:
        """What :meth:`build` writes into each output message but ``collision``, for the topics
        ``wanted`` (by default all), asked in build's order. The values of a topic not wanted are
        not computed (the command's gather, the contact wrenches' transformation)."""
        cfg, res = self.config, out.outputs
        frame, base = out.frame_id, out.base_frame
        todo: list[Content] = []
        for topic, at_base, make, writer, field in self._offered:
            values = getattr(res, field)
            if values is not None and wanted(topic):
                todo.append(Content(topic, base if at_base else frame, make, writer, values))
        if cfg.publish_effort_command and wanted(TOPIC_EFFORT_COMMAND):
            todo.append(Content(TOPIC_EFFORT_COMMAND, None, self._command, data_writer,
                                np.asarray(res.tau_ff)[self.command_index]))
        if out.external_torque is not None and wanted(TOPIC_EXTERNAL_TORQUE):
            todo.append(Content(TOPIC_EXTERNAL_TORQUE, frame, self.torque_state, effort_writer, out.external_torque))
        if cfg.publish_unconstrained and res.tau_free is not None and wanted(TOPIC_UNCONSTRAINED_FEEDFORWARD):
            todo.append(Content(TOPIC_UNCONSTRAINED_FEEDFORWARD, frame, self.torque_state, effort_writer,
                                res.tau_free))  # contacts or loops
        if self._contacts is not None and res.contact_active is not None and res.contact_wrench is not None:
            links = [i for i, on in enumerate(res.contact_active.tolist()) if on and wanted(self._contact_topics[i])]
            if links:
                wrench = wrench_at_link(self._contacts, res.contact_wrench)
                todo += [Content(self._contact_topics[i], self.contact_links[i], self.wrench, wrench_writer, wrench[i])
                         for i in links]
        return todo

    def _refill(self, content: Content) -> Any:
        """The topic's message holding the content's values under the shared stamp (:meth:`_set_stamp`),
        in the header of its frame (None: a message without a header): made by ``content.make`` at
        the first call, then written by what ``content.writer(message)`` returned then."""
        topic, frame = content.topic, content.frame
        reused = self._reused.get(topic)
        if reused is None:
            msg = content.make(None if frame is None else self._header(frame), content.values)
            self._reused[topic] = (msg, content.writer(msg))
            return msg
        msg, write = reused
        if frame is not None and msg.header.frame_id != frame:  # a joint state with another frame_id
            msg.header = self._header(frame)
        write(content.values)
        return msg

    def _header(self, frame: str) -> Any:
        """The header of ``frame`` holding the shared stamp (one per frame, made once)."""
        header = self._headers.get(frame)
        if header is None:
            header = self._headers[frame] = self.c.Header(stamp=self._stamp, frame_id=frame)
        return header

    def _command(self, header: Any, tau: FloatArray) -> Any:
        return self.c.Float64MultiArray(layout=self.c.MultiArrayLayout(dim=[], data_offset=0),
                                        data=self.c.float_array(tau))

    def header(self, stamp_ns: int, frame_id: str) -> Any:
        sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
        return self.c.Header(stamp=self.c.Time(sec=sec, nanosec=nanosec), frame_id=frame_id)

    def torque_state(self, header: Any, tau: FloatArray) -> Any:
        """sensor_msgs/JointState carrying torques in ``effort`` (position/velocity empty)."""
        empty = self._empty
        return self.c.JointState(
            header=header, name=list(self.joint_names), position=empty, velocity=empty,
            effort=self.c.float_array(tau),
        )

    def collision_state(self, event: Any) -> Any:
        """sensor_msgs/JointState of a collision (core.Collision) as it starts: stamped with its
        first sample, the joint in ``name`` and its external torque there in ``effort``."""
        return self.c.JointState(
            header=self.header(event.start_ns, ""), name=[self.event_names[event.joint]], position=self._empty,
            velocity=self._empty, effort=self.c.float_array(np.array([event.peak])),
        )

    def acceleration_trajectory(self, header: Any, qdd: FloatArray) -> Any:
        """trajectory_msgs/JointTrajectory with one point whose ``accelerations`` hold qdd."""
        c, empty = self.c, self._empty
        point = c.JointTrajectoryPoint(
            positions=empty, velocities=empty, accelerations=c.float_array(qdd), effort=empty,
            time_from_start=c.Duration(sec=0, nanosec=0),
        )
        return c.JointTrajectory(header=header, joint_names=list(self.joint_names), points=[point])

    def wrench(self, header: Any, wrench: FloatArray) -> Any:
        """geometry_msgs/WrenchStamped from (m, f)."""
        mx, my, mz, fx, fy, fz = wrench.tolist()
        w = self.c.Wrench(force=self.c.Vector3(x=fx, y=fy, z=fz),
                          torque=self.c.Vector3(x=mx, y=my, z=mz))
        return self.c.WrenchStamped(header=header, wrench=w)

    def accel(self, header: Any, acc: FloatArray) -> Any:
        """geometry_msgs/AccelStamped from (omega', v')."""
        wx, wy, wz, vx, vy, vz = acc.tolist()
        a = self.c.Accel(linear=self.c.Vector3(x=vx, y=vy, z=vz),
                         angular=self.c.Vector3(x=wx, y=wy, z=wz))
        return self.c.AccelStamped(header=header, accel=a)

    def effort_command(self, tau: FloatArray) -> Any:
        """std_msgs/Float64MultiArray in ``command_joints`` order (ros2_control effort
        controllers take exactly this, with an empty layout)."""
        return self._command(None, np.asarray(tau)[self.command_index])


class SerializedOutputs:
    """The factory's output messages as CDR bytes, for publishing without converting a message
    object (rclpy's ``Publisher.publish`` takes bytes too and hands them to the middleware as they
    are; converting a 12-joint JointState costs about twice as much as publishing its bytes).

    Per topic and frame, one message is serialized by ``serialize`` (rclpy's serialize_message, or
    a rosbags typestore's serialize_cdr) and the places of its stamp and values located
    (:func:`locate_values`, proven on a second message); each sample then rewrites them in a copy
    of those bytes. A message whose values cannot be located that way (not little-endian CDR) is
    the factory's refilled message object instead, and so is the rare ``collision`` message.
    """

    _CACHE_LIMIT = 64  # (topic, frame) layouts kept: a joint state source that changes its frame_id at every message must not grow memory

    def __init__(self, factory: OutputMessageFactory, serialize: Callable[[Any], bytes]) -> None:
        self.factory, self.serialize = factory, serialize
        self._layouts: dict[tuple[str, str | None], CdrLayout | None] = {}

    def encode(self, out: PipelineOutput, wanted: Callable[[str], bool] = every_topic) -> dict[str, Any]:
        """{topic: CDR bytes (or a message object, see above)} of the topics ``wanted``."""
        factory, stamp_ns = self.factory, out.stamp_ns
        msgs: dict[str, Any] = {}
        for content in factory.contents(out, wanted):
            layout = self._layout(content)
            if layout is None:
                factory._set_stamp(stamp_ns)
                msgs[content.topic] = factory._refill(content)
            else:
                msgs[content.topic] = layout.patch(stamp_ns, content.values)
        if out.collision is not None and wanted(TOPIC_COLLISION):
            msgs[TOPIC_COLLISION] = factory.collision_state(out.collision)
        return msgs

    def _layout(self, content: Content) -> CdrLayout | None:
        key = (content.topic, content.frame)
        if key in self._layouts:
            return self._layouts[key]
        if len(self._layouts) >= self._CACHE_LIMIT:
            self._layouts.clear()
        factory, frame, make = self.factory, content.frame, content.make
        if frame is None:
            layout = locate_values(lambda stamp_ns, values: make(None, values), self.serialize,
                                   len(content.values), stamped=False)
        else:
            layout = locate_values(lambda stamp_ns, values: make(factory.header(stamp_ns, frame), values),
                                   self.serialize, len(content.values))
        self._layouts[key] = layout
        return layout


_PROBE_STAMP_NS = 1_234_567_890 * NS_PER_S + 987_654_321
_STAMP = struct.Struct("<iI")  # a header's stamp: int32 sec, uint32 nanosec


class CdrLayout:
    """A message's CDR bytes and where its stamp (bytes 4-12: the header first) and its k float64
    values lie in them; :meth:`patch` gives the bytes of the same message with other ones."""

    def __init__(self, template: bytes, offsets: NDArray[np.intp], stamped: bool) -> None:
        self.template, self.offsets, self.stamped = template, offsets, stamped
        self._buf = bytearray(template)
        # CDR aligns every float64 to 8 bytes from the body's start, so all of them lie on one
        # float64 grid of the buffer: a view writes them at once.
        start = int(offsets[0]) % 8 if len(offsets) else 0
        grid = np.frombuffer(self._buf, dtype="<f8", offset=start, count=(len(template) - start) // 8)
        slots = (offsets - start) // 8
        if len(slots) and np.array_equal(slots, np.arange(slots[0], slots[0] + len(slots))):
            self._values: Any = grid[slots[0] : slots[0] + len(slots)]
            self._slots: Any = slice(None)
        else:
            self._values, self._slots = grid, slots

    @property
    def on_grid(self) -> bool:
        """Whether the offsets lie on one float64 grid (as CDR's alignment makes them)."""
        return len(self.offsets) == 0 or bool((self.offsets % 8 == self.offsets[0] % 8).all())

    def patch(self, stamp_ns: int, values: FloatArray) -> bytes:
        if self.stamped:
            _STAMP.pack_into(self._buf, 4, *divmod(int(stamp_ns), NS_PER_S))
        self._values[self._slots] = values
        return bytes(self._buf)


def locate_values(build: Callable[[int, FloatArray], Any], serialize: Callable[[Any], bytes], k: int, *,
                  stamped: bool = True) -> CdrLayout | None:
    """Where the stamp and the k float64 values of ``build(stamp_ns, values)``'s message lie in
    its CDR bytes ``serialize(message)``: found from a message with distinct values, then proven
    on a second, different message (patched bytes equal to its serialization). None when that
    fails (not little-endian CDR, no header first for ``stamped``, a value not found)."""
    probe = 1.0 + np.pi * 1e-3 + 0.1 * np.arange(k, dtype=np.float64)
    raw = bytes(serialize(build(_PROBE_STAMP_NS, probe)))
    if raw[:2] != CDR_LE or (stamped and raw[4:12] != struct.pack("<iI", *divmod(_PROBE_STAMP_NS, NS_PER_S))):
        return None
    offsets = np.array([raw.find(struct.pack("<d", x)) for x in probe], dtype=np.intp)
    if (offsets < 0).any():
        return None
    layout = CdrLayout(raw, offsets, stamped)
    if not layout.on_grid:
        return None
    check_values, check_stamp = -2.5 - 0.37 * np.arange(k, dtype=np.float64), 42 * NS_PER_S + 7
    expected = bytes(serialize(build(check_stamp, check_values)))
    if layout.patch(check_stamp, check_values) != expected:
        return None
    return CdrLayout(raw, offsets, stamped)  # a fresh buffer: the check's values are not left in it


# How build writes new values into a message it made: float64[] through a numpy view of the
# field's buffer (rclpy's array.array and rosbags' numpy array alike), vectors by their floats.

def _into(field: Any) -> Callable[[FloatArray], None]:
    view = np.frombuffer(field, dtype=np.float64)

    def write(values: FloatArray) -> None:
        view[:] = values
    return write


def _into_vectors(first: Any, second: Any) -> Callable[[FloatArray], None]:
    def write(values: FloatArray) -> None:
        first.x, first.y, first.z, second.x, second.y, second.z = values.tolist()
    return write


def effort_writer(msg: Any) -> Callable[[FloatArray], None]:
    return _into(msg.effort)


def acceleration_writer(msg: Any) -> Callable[[FloatArray], None]:
    return _into(msg.points[0].accelerations)


def data_writer(msg: Any) -> Callable[[FloatArray], None]:
    return _into(msg.data)


def wrench_writer(msg: Any) -> Callable[[FloatArray], None]:
    return _into_vectors(msg.wrench.torque, msg.wrench.force)  # (m, f)


def accel_writer(msg: Any) -> Callable[[FloatArray], None]:
    return _into_vectors(msg.accel.angular, msg.accel.linear)  # (omega', v')


def command_indices(joint_names: Sequence[str], command_joints: Sequence[str]) -> NDArray[np.intp]:
    """Model indices of ``command_joints`` (all joints in model order when empty)."""
    if not command_joints:
        return np.arange(len(joint_names), dtype=np.intp)
    position = {name: i for i, name in enumerate(joint_names)}
    unknown = [j for j in command_joints if j not in position]
    if unknown:
        raise ValueError(
            f"command_joints: {unknown} are not joints of the model {list(joint_names)}"
        )
    return np.array([position[j] for j in command_joints], dtype=np.intp)
