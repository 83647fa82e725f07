"""Output messages: the one place that builds them, for rclpy and rosbags classes alike."""
from __future__ import annotations

import array
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

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

    def build(self, out: PipelineOutput) -> dict[str, Any]:
        cfg, res = self.config, out.outputs
        sec, nanosec = divmod(int(out.stamp_ns), NS_PER_S)
        stamp = self._stamp
        stamp.sec, stamp.nanosec = sec, nanosec
        frame, refill = out.frame_id, self._refill
        msgs: dict[str, Any] = {}
        if cfg.publish_feedforward:
            msgs[TOPIC_FEEDFORWARD] = refill(TOPIC_FEEDFORWARD, frame, self.torque_state, effort_writer, res.tau_ff)
        if cfg.publish_gravity:
            msgs[TOPIC_GRAVITY] = refill(TOPIC_GRAVITY, frame, self.torque_state, effort_writer, res.tau_g)
        if cfg.publish_predicted_acceleration and res.qdd_pred is not None:
            msgs[TOPIC_PREDICTED_ACCELERATION] = refill(TOPIC_PREDICTED_ACCELERATION, frame,
                                                        self.acceleration_trajectory, acceleration_writer,
                                                        res.qdd_pred)
        if self.floating_base and cfg.publish_base_outputs:
            if res.base_wrench is not None:
                msgs[TOPIC_BASE_WRENCH] = refill(TOPIC_BASE_WRENCH, out.base_frame, self.wrench, wrench_writer,
                                                 res.base_wrench)
            if res.base_acc_pred is not None:
                msgs[TOPIC_BASE_ACCELERATION] = refill(TOPIC_BASE_ACCELERATION, out.base_frame, self.accel,
                                                       accel_writer, res.base_acc_pred)
        if cfg.publish_effort_command:
            msgs[TOPIC_EFFORT_COMMAND] = refill(TOPIC_EFFORT_COMMAND, None, self._command, data_writer,
                                                np.asarray(res.tau_ff)[self.command_index])
        if out.external_torque is not None:
            msgs[TOPIC_EXTERNAL_TORQUE] = refill(TOPIC_EXTERNAL_TORQUE, frame, self.torque_state, effort_writer,
                                                 out.external_torque)
        if out.collision is not None:
            msgs[TOPIC_COLLISION] = self.collision_state(out.collision)
        if cfg.publish_unconstrained and res.tau_free is not None:  # contacts or loops
            msgs[TOPIC_UNCONSTRAINED_FEEDFORWARD] = refill(TOPIC_UNCONSTRAINED_FEEDFORWARD, frame,
                                                           self.torque_state, effort_writer, res.tau_free)
        if self._contacts is not None and res.contact_active is not None and res.contact_wrench is not None:
            wrench = wrench_at_link(self._contacts, res.contact_wrench)
            for i, on in enumerate(res.contact_active.tolist()):
                if on:
                    topic = self._contact_topics[i]
                    msgs[topic] = refill(topic, self.contact_links[i], self.wrench, wrench_writer, wrench[i])
        return msgs

    def _refill(self, topic: str, frame: str | None, make: Callable[[Any, FloatArray], Any],
                writer: Callable[[Any], Callable[[FloatArray], None]], values: FloatArray) -> Any:
        """``topic``'s message holding ``values`` under the shared stamp, in the header of
        ``frame`` (None: a message without a header): made by ``make(header, values)`` at the
        first call, then written by what ``writer(message)`` returned then."""
        reused = self._reused.get(topic)
        if reused is None:
            msg = make(None if frame is None else self._header(frame), values)
            self._reused[topic] = (msg, writer(msg))
            return msg
        msg, write = reused
        if frame is not None and msg.header.frame_id != frame:  # a joint state with another frame_id
            msg.header = self._header(frame)
        write(values)
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
