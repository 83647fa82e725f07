"""ROS-free message-to-dynamics pipeline shared by the ROS 2 node and the bag replay.

Nothing here imports rclpy or any message package: messages are read by attribute (duck
typing), so the same code accepts rclpy messages (``array.array`` fields), rosbags typestore
messages (``numpy`` fields) and plain test objects. Output messages are built by
:class:`OutputMessageFactory` from a :class:`MessageClasses` bundle, which the node fills with
rclpy classes and the replay with rosbags typestore classes.

Data flow for one JointState, one module per stage::

    decode   JointStateDecoder.decode(msg)         -> JointSample (stamp ns, q, qd, effort
               (decode_arrays: the same for a chunk      in model order)
               of messages as (N, n) arrays; the replay uses it)
    pair     pair_odometry (floating base)         -> base_pose T_world_base, base twist (omega, v)
    contacts pair_contact_state, WrenchSensors, kinematic_contacts -> active contacts (k,)
    estimate acceleration source                   -> a (zero | estimated | reference)
    routes   route.outputs(q, v, a, effort, ...)   -> DynamicsOutputs, one sample or a block: the route
               chosen once per model (choose_route), one module each: free (the open tree,
               compute.compute_outputs), contacts (contact-consistent, with contact wrenches and
               checks), loops (loop closures and passive joints too), observed (contacts from the
               momentum observer)
    messages OutputMessageFactory.build(output)    -> {topic: message}
    observed ContactObserver.beyond(...)           -> the observer's estimate beyond the contacts'
               forces; contact_source observer: the contacts' state from it (hysteresis)

``stream.DynamicsPipeline`` runs these stages per message for the node (and counts the contact
checks, ``contacts.check_forces`` and ``contacts.check_tipping``); ``diagnostics`` turns its
counters into the node's /diagnostics status; ``config`` holds the settings and skip reasons;
``parameters`` the node's parameters and the one rule that checks them (node and parameter files).
Conventions (docs/contract.md): twists (omega, v), wrenches (m, f), angular first; the
floating-base generalized velocity is the Odometry twist in child_frame_id, reordered
angular-first; output stamps copy the JointState stamp.
"""
from liedyn_ros.pipeline.compute import DynamicsOutputs, compute_outputs, prepare_kernels
from liedyn_ros.pipeline.config import (
    NODE_ONLY_PARAMETERS,
    NS_PER_S,
    AccelerationSource,
    ContactSource,
    FloatArray,
    Logger,
    Model,
    PipelineConfig,
    SkipReason,
    config_from_parameters,
)
from liedyn_ros.pipeline.contacts import (
    ContactChecks,
    Contacts,
    ContactState,
    WrenchSensors,
    centre_of_pressure,
    check_tipping,
    contact_frames,
    contact_wrenches,
    decode_contact_flags,
    decode_contact_wrench,
    forces_closest_to,
    joint_torques,
    kinematic_contacts,
    pair_contact_state,
    resolve_contacts,
    stacked_forces,
    wrench_at_link,
)
from liedyn_ros.pipeline.decode import (
    JointBlock,
    JointSample,
    JointStateArrays,
    JointStateDecoder,
    as_float_array,
    joined_float_arrays,
    length_problem,
    stamp_to_ns,
)
from liedyn_ros.pipeline.estimate import AccelerationEstimator, estimate_accelerations
from liedyn_ros.pipeline.loops import Loops, base_held, closest_loop_forces, resolve_loops
from liedyn_ros.pipeline.routes import (
    ContactRoute, FreeRoute, LoopRoute, ObservedRoute, Route, armature_of, choose_route, compute_contact_outputs,
    compute_loop_outputs,
)
from liedyn_ros.pipeline.observed import ContactObserver, ObservedContacts, contact_estimate, event_names, measured_torque, normal_forces, residual_beyond
from liedyn_ros.pipeline.messages import (
    TOPIC_BASE_ACCELERATION,
    TOPIC_BASE_WRENCH,
    TOPIC_COLLISION,
    TOPIC_CONTACT_WRENCH,
    TOPIC_EFFORT_COMMAND,
    TOPIC_EXTERNAL_TORQUE,
    TOPIC_FEEDFORWARD,
    TOPIC_GRAVITY,
    TOPIC_PREDICTED_ACCELERATION,
    TOPIC_UNCONSTRAINED_FEEDFORWARD,
    CdrLayout,
    MessageClasses,
    OutputMessageFactory,
    SerializedOutputs,
    command_indices,
    contact_wrench_topic,
    double_array,
    locate_values,
)
from liedyn_ros.pipeline.parameters import (
    PARAMETERS,
    ParameterError,
    Parameters,
    check_parameters,
    load_parameter_file,
)
from liedyn_ros.pipeline.pair import BaseState, Reference, decode_odometry, decode_reference, pair_odometry
from liedyn_ros.pipeline.stream import DynamicsPipeline, PipelineOutput, PipelineStats, RateLimitedWarner
from liedyn_ros.pipeline.diagnostics import DiagnosticsReport, DiagnosticsReporter, Level, SampleTimes

__all__ = [
    "NODE_ONLY_PARAMETERS", "config_from_parameters",
    "PARAMETERS", "ParameterError", "Parameters", "check_parameters", "load_parameter_file",
    "ContactRoute", "FreeRoute", "LoopRoute", "ObservedRoute", "Route", "armature_of", "choose_route",
    "ContactObserver", "ObservedContacts", "contact_estimate", "event_names", "measured_torque", "normal_forces",
    "residual_beyond",
    "Loops", "base_held", "closest_loop_forces", "compute_loop_outputs", "resolve_loops",
    "TOPIC_CONTACT_WRENCH", "TOPIC_UNCONSTRAINED_FEEDFORWARD", "ContactSource", "ContactChecks",
    "Contacts", "ContactState", "WrenchSensors", "centre_of_pressure", "check_tipping",
    "DiagnosticsReport", "DiagnosticsReporter", "Level", "SampleTimes", "compute_contact_outputs", "contact_frames",
    "contact_wrench_topic", "contact_wrenches", "decode_contact_flags",
    "decode_contact_wrench", "forces_closest_to", "joint_torques", "kinematic_contacts",
    "pair_contact_state", "resolve_contacts", "stacked_forces", "wrench_at_link",
    "NS_PER_S", "TOPIC_BASE_ACCELERATION", "TOPIC_BASE_WRENCH", "TOPIC_EFFORT_COMMAND",
    "TOPIC_FEEDFORWARD", "TOPIC_GRAVITY", "TOPIC_PREDICTED_ACCELERATION", "TOPIC_EXTERNAL_TORQUE", "TOPIC_COLLISION",
    "AccelerationEstimator", "AccelerationSource", "BaseState", "DynamicsOutputs",
    "DynamicsPipeline", "FloatArray", "JointBlock", "JointSample", "JointStateArrays",
    "JointStateDecoder", "Logger", "MessageClasses", "Model", "OutputMessageFactory", "SerializedOutputs",
    "CdrLayout", "locate_values",
    "PipelineConfig", "PipelineOutput", "PipelineStats", "RateLimitedWarner", "Reference",
    "SkipReason", "as_float_array", "command_indices", "compute_outputs", "decode_odometry",
    "decode_reference", "double_array", "estimate_accelerations", "joined_float_arrays",
    "length_problem", "pair_odometry", "prepare_kernels", "stamp_to_ns",
]
