"""Just enough of rclpy and the message packages to run the node's own code without ROS.

:func:`load_node_module` puts stand-ins for ``rclpy`` and the message packages into
``sys.modules`` (through pytest's monkeypatch, which takes them out again, so the launch tests
still skip where ROS is absent) and imports ``liedyn_ros.dynamics_node`` against them. The fake
:class:`Node` keeps what the node wires: subscription callbacks by topic (``callbacks``),
publishers that record what they publish (``outputs``), timers, parameters with their set-callbacks (``set_parameters`` runs them like rclpy),
log lines. Messages the node only passes along are rosbags typestore classes (the real ROS 2
definitions). What the node calls and the fake lacks raises AttributeError: the fake never guesses.
The launch tests (test_launch_*.py) check the same node under a real ROS 2.
"""
from __future__ import annotations

import array
import dataclasses
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
from rosbags.interfaces import Nodetype
from rosbags.typesys import Stores, get_typestore

TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
TYPES = TYPESTORE.types


class Parameter:
    def __init__(self, name: str, type_: Any = None, value: Any = None) -> None:
        self.name, self.value = name, value


class Message:
    """A message built from keyword arguments (for the types whose typestore class needs every field)."""

    def __init__(self, **fields: Any) -> None:
        self.header = types.SimpleNamespace(stamp=None, frame_id="")
        self.__dict__.update(fields)


def serialize_message(msg: Any) -> bytes:
    """rclpy.serialization.serialize_message's stand-in: rosbags' CDR of a typestore message
    (whose float64[] fields the node fills with rclpy's array.array: read as numpy arrays)."""
    return bytes(TYPESTORE.serialize_cdr(_numpy_fields(msg), msg.__msgtype__))


def deserialize_message(serialized_message: bytes, message_type: Any) -> Any:
    return TYPESTORE.deserialize_cdr(serialized_message, message_type.__msgtype__)


def as_typestore(value: Any, msgtype: str) -> Any:
    """A message shaped like rclpy's (the fields as attributes, arrays of numbers as array.array,
    lists or numpy) as the typestore's ``msgtype``, which rosbags serializes."""
    fields = {}
    for name, (nodetype, detail) in TYPESTORE.fielddefs[msgtype][1]:
        item = getattr(value, name)
        if nodetype == Nodetype.NAME:
            item = as_typestore(item, detail)
        elif nodetype in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            (kind, element), _ = detail
            if kind == Nodetype.NAME:
                item = [as_typestore(x, element) for x in item]
            elif element[0] != "string":
                item = np.asarray(item, dtype=element[0])
        fields[name] = item
    return TYPES[msgtype](**fields)


def _numpy_fields(value: Any) -> Any:
    if isinstance(value, array.array):
        return np.frombuffer(value, dtype=np.float64)
    if isinstance(value, list):
        return [_numpy_fields(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _numpy_fields(getattr(value, f.name))
                                             for f in dataclasses.fields(value)})
    return value


class Publisher:
    """Records what is published; CDR bytes (rclpy publishes them as they are) are recorded as
    the message a subscriber receives, deserialized by rosbags as the ``kind`` published."""

    def __init__(self, topic: str, kind: Any = None) -> None:
        self.topic, self.kind, self.sent = topic, kind, []

    def publish(self, msg: Any) -> None:
        if isinstance(msg, bytes):
            msg = TYPESTORE.deserialize_cdr(msg, self.kind.__msgtype__)
        self.sent.append(msg)

    def get_subscription_count(self) -> int:
        return 1


@dataclass
class Clock:
    nanoseconds: int = 0

    def now(self) -> Clock:
        return self

    def to_msg(self) -> Any:
        return TYPES["builtin_interfaces/msg/Time"](sec=0, nanosec=0)


@dataclass
class Logger:
    lines: list[tuple[str, str]]

    def _log(self, level: str, text: str, **options: Any) -> None:
        self.lines.append((level, text))

    def info(self, text: str, **options: Any) -> None:
        self._log("info", text)

    def warning(self, text: str, **options: Any) -> None:
        self._log("warning", text)

    def error(self, text: str, **options: Any) -> None:
        self._log("error", text)


@dataclass(eq=False)  # hashable, like rclpy's
class Timer:
    period: float
    callback: Callable[[], None]


class Node:
    """rclpy.node.Node as the node uses it. ``OVERRIDES``: the parameter values it starts with
    (a launch file's), set by the test before building the node."""

    OVERRIDES: dict[str, Any] = {}

    def __init__(self, name: str) -> None:
        self._name = name
        self._parameters: dict[str, Parameter] = {}
        self._set_callbacks: list[Callable[[list[Parameter]], Any]] = []
        self.callbacks: dict[str, Callable[[Any], None]] = {}  # subscriptions by topic
        self.outputs: dict[str, Publisher] = {}  # publishers by topic
        self.timers: list[Timer] = []
        self.lines: list[tuple[str, str]] = []
        self._clock = Clock()

    def declare_parameter(self, name: str, value: Any, descriptor: Any = None) -> None:
        self._parameters[name] = Parameter(name, value=self.OVERRIDES.get(name, value))

    def get_parameter(self, name: str) -> Parameter:
        return self._parameters[name]

    def add_on_set_parameters_callback(self, callback: Callable[[list[Parameter]], Any]) -> None:
        self._set_callbacks.append(callback)

    def set_parameters(self, params: list[Parameter]) -> list[Any]:
        """As ``ros2 param set``: the set-callbacks decide, the values change only if they accept
        (an exception in a callback goes to the caller, as in rclpy)."""
        for callback in self._set_callbacks:
            result = callback(params)
            if not result.successful:
                return [result]
        self._parameters.update({p.name: p for p in params})
        return [result]

    @property
    def publishers(self) -> list[Publisher]:
        return list(self.outputs.values())

    @property
    def subscriptions(self) -> list[str]:
        return list(self.callbacks)

    def create_publisher(self, kind: Any, topic: str, qos: Any, **options: Any) -> Publisher:
        return self.outputs.setdefault(topic, Publisher(topic, kind))

    def create_subscription(self, kind: Any, topic: str, callback: Callable[[Any], None], qos: Any,
                            raw: bool = False, **options: Any) -> str:
        if raw:  # rclpy hands a raw subscription the CDR bytes: so does this one, of the message sent
            self.callbacks[topic] = lambda msg: callback(
                msg if isinstance(msg, bytes) else serialize_message(as_typestore(msg, kind.__msgtype__)))
        else:
            self.callbacks[topic] = callback
        return topic

    def destroy_subscription(self, topic: str) -> None:
        self.callbacks.pop(topic, None)

    def create_timer(self, period: float, callback: Callable[[], None]) -> Timer:
        self.timers.append(Timer(period, callback))
        return self.timers[-1]

    def get_logger(self) -> Logger:
        return Logger(self.lines)

    def resolve_topic_name(self, topic: str) -> str:
        return "/" + topic

    def get_clock(self) -> Clock:
        return self._clock

    def get_name(self) -> str:
        return self._name

    def destroy_node(self) -> None:
        pass


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def _messages(package: str, names: list[str]) -> types.ModuleType:
    return _module(f"{package}.msg", **{n: TYPES[f"{package}/msg/{n}"] for n in names})


def _modules() -> dict[str, types.ModuleType]:
    anything = types.SimpleNamespace
    msgs = {
        "builtin_interfaces": _messages("builtin_interfaces", ["Time", "Duration"]),
        "std_msgs": _messages("std_msgs", ["Header", "String", "Float64MultiArray", "MultiArrayLayout",
                                           "UInt8MultiArray"]),
        "sensor_msgs": _messages("sensor_msgs", ["JointState"]),
        "trajectory_msgs": _messages("trajectory_msgs", ["JointTrajectory", "JointTrajectoryPoint"]),
        "geometry_msgs": _messages("geometry_msgs", ["Vector3", "Wrench", "WrenchStamped", "Accel",
                                                     "AccelStamped"]),
        "nav_msgs": _messages("nav_msgs", ["Odometry"]),
        "diagnostic_msgs": _module("diagnostic_msgs.msg", DiagnosticArray=Message, DiagnosticStatus=Message,
                                   KeyValue=Message),
        "rcl_interfaces": _module("rcl_interfaces.msg", ParameterDescriptor=Message, SetParametersResult=Message),
    }
    modules = {}
    for package, msg in msgs.items():
        modules[package] = _module(package, msg=msg)
        modules[f"{package}.msg"] = msg
    qos = dict(DurabilityPolicy=anything(TRANSIENT_LOCAL=1), ReliabilityPolicy=anything(RELIABLE=1),
               QoSProfile=anything, qos_profile_sensor_data=anything())
    modules.update({
        "rclpy": _module("rclpy", init=lambda args=None: None, try_shutdown=lambda: None),
        "rclpy.executors": _module("rclpy.executors", ExternalShutdownException=type("ExternalShutdown",
                                                                                    (Exception,), {})),
        "rclpy.node": _module("rclpy.node", Node=Node),
        "rclpy.parameter": _module("rclpy.parameter", Parameter=Parameter),
        "rclpy.publisher": _module("rclpy.publisher", Publisher=Publisher),
        "rclpy.qos": _module("rclpy.qos", **qos),
        "rclpy.qos_overriding_options": _module(
            "rclpy.qos_overriding_options",
            QoSOverridingOptions=anything(with_default_policies=lambda: None)),
        "rclpy.event_handler": _module("rclpy.event_handler", PublisherEventCallbacks=anything),
        "rclpy.serialization": _module("rclpy.serialization", serialize_message=serialize_message,
                                       deserialize_message=deserialize_message),
    })
    return modules


def load_node_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    """liedyn_ros.dynamics_node imported against the stand-ins (taken out again after the test).
    The node's background kernel build is left out: the kernels the tests use are cached."""
    for name, module in _modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    # Recorded as it was (absent, normally) and so restored; imported anew against the stand-ins.
    monkeypatch.setitem(sys.modules, "liedyn_ros.dynamics_node", types.ModuleType("placeholder"))
    del sys.modules["liedyn_ros.dynamics_node"]
    from liedyn_ros.pipeline import DynamicsPipeline
    monkeypatch.setattr(DynamicsPipeline, "start_warmup", lambda self, warmup=None: None)
    import liedyn_ros.dynamics_node as node_module
    return node_module
