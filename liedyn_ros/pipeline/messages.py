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

    Keys of :meth:`build`'s result are the topic names of CONVENTIONS.md (relative); which
    ones appear follows the config's ``publish_*`` switches, whether efforts were measured
    (predicted accelerations and external torque) and whether the base floats. Every call
    returns new messages but external_torque and the contact wrenches: each is one message per
    topic whose stamp and values each call replaces (the observer's budget is a fifth of the
    per-sample time, and a new JointState costs a third of that; four new WrenchStamped cost as
    much as the contacts' whole dynamics; publish serializes them at once, so the node may reuse
    them). The empty
    float64[] value is made once and passed to every message (rclpy copies a float64[] into the
    message and rosbags' empty numpy array holds nothing to change).
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
        self._external: Any = None  # the external_torque message, refilled by each build
        self._contact_msgs: list[Any] = [None] * len(self.contact_links)  # likewise, per contact

    def build(self, out: PipelineOutput) -> dict[str, Any]:
        cfg, res = self.config, out.outputs
        header = self.header(out.stamp_ns, out.frame_id)
        msgs: dict[str, Any] = {}
        if cfg.publish_feedforward:
            msgs[TOPIC_FEEDFORWARD] = self.torque_state(header, res.tau_ff)
        if cfg.publish_gravity:
            msgs[TOPIC_GRAVITY] = self.torque_state(header, res.tau_g)
        if cfg.publish_predicted_acceleration and res.qdd_pred is not None:
            msgs[TOPIC_PREDICTED_ACCELERATION] = self.acceleration_trajectory(header, res.qdd_pred)
        if self.floating_base and cfg.publish_base_outputs:
            base_header = self.header(out.stamp_ns, out.base_frame)
            if res.base_wrench is not None:
                msgs[TOPIC_BASE_WRENCH] = self.wrench(base_header, res.base_wrench)
            if res.base_acc_pred is not None:
                msgs[TOPIC_BASE_ACCELERATION] = self.accel(base_header, res.base_acc_pred)
        if cfg.publish_effort_command:
            msgs[TOPIC_EFFORT_COMMAND] = self.effort_command(res.tau_ff)
        if out.external_torque is not None:
            msgs[TOPIC_EXTERNAL_TORQUE] = self.external_state(header, out.external_torque)
        if out.collision is not None:
            msgs[TOPIC_COLLISION] = self.collision_state(out.collision)
        if cfg.publish_unconstrained and res.tau_free is not None:  # contacts or loops
            msgs[TOPIC_UNCONSTRAINED_FEEDFORWARD] = self.torque_state(header, res.tau_free)
        if self._contacts is not None and res.contact_active is not None and res.contact_wrench is not None:
            wrench = wrench_at_link(self._contacts, res.contact_wrench).reshape(-1).tolist()
            stamp, reused = header.stamp, self._contact_msgs
            for i, on in enumerate(res.contact_active.tolist()):
                if not on:
                    continue
                msg = reused[i]
                if msg is None:  # made once, refilled by every later build (see the class docstring)
                    header_i = self.c.Header(stamp=stamp, frame_id=self.contact_links[i])
                    msg = reused[i] = self.wrench(header_i, np.asarray(wrench[6 * i:6 * i + 6]))
                else:
                    msg.header.stamp = stamp
                    m, f = msg.wrench.torque, msg.wrench.force
                    m.x, m.y, m.z, f.x, f.y, f.z = wrench[6 * i:6 * i + 6]
                msgs[self._contact_topics[i]] = msg
        return msgs

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

    def external_state(self, header: Any, tau: FloatArray) -> Any:
        """The external_torque JointState, made once and refilled (see the class docstring)."""
        msg = self._external
        if msg is None:
            msg = self._external = self.torque_state(header, tau)
        else:
            msg.header, msg.effort = header, self.c.float_array(tau)
        return msg

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
        layout = self.c.MultiArrayLayout(dim=[], data_offset=0)
        return self.c.Float64MultiArray(
            layout=layout, data=self.c.float_array(np.asarray(tau)[self.command_index])
        )


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
