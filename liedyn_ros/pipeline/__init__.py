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
    estimate acceleration source                   -> a (zero | estimated | reference)
    compute  compute_outputs(model, q, v, a, ...)  -> DynamicsOutputs (batched numpy, core calls)
    messages OutputMessageFactory.build(output)    -> {topic: message}

``stream.DynamicsPipeline`` runs these stages per message for the node; ``config`` holds the
settings and skip reasons. Conventions (shared/CONVENTIONS.md): twists (omega, v), wrenches
(m, f), angular first; the floating-base generalized velocity is the Odometry twist in
child_frame_id, reordered angular-first; output stamps copy the JointState stamp.
"""
from liedyn_ros.pipeline.compute import DynamicsOutputs, compute_outputs, prepare_kernels
from liedyn_ros.pipeline.config import (
    NS_PER_S,
    AccelerationSource,
    FloatArray,
    Logger,
    Model,
    PipelineConfig,
    SkipReason,
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
from liedyn_ros.pipeline.messages import (
    TOPIC_BASE_ACCELERATION,
    TOPIC_BASE_WRENCH,
    TOPIC_EFFORT_COMMAND,
    TOPIC_FEEDFORWARD,
    TOPIC_GRAVITY,
    TOPIC_PREDICTED_ACCELERATION,
    MessageClasses,
    OutputMessageFactory,
    command_indices,
    double_array,
)
from liedyn_ros.pipeline.pair import BaseState, Reference, decode_odometry, decode_reference, pair_odometry
from liedyn_ros.pipeline.stream import DynamicsPipeline, PipelineOutput, PipelineStats, RateLimitedWarner

__all__ = [
    "NS_PER_S", "TOPIC_BASE_ACCELERATION", "TOPIC_BASE_WRENCH", "TOPIC_EFFORT_COMMAND",
    "TOPIC_FEEDFORWARD", "TOPIC_GRAVITY", "TOPIC_PREDICTED_ACCELERATION",
    "AccelerationEstimator", "AccelerationSource", "BaseState", "DynamicsOutputs",
    "DynamicsPipeline", "FloatArray", "JointBlock", "JointSample", "JointStateArrays",
    "JointStateDecoder", "Logger", "MessageClasses", "Model", "OutputMessageFactory",
    "PipelineConfig", "PipelineOutput", "PipelineStats", "RateLimitedWarner", "Reference",
    "SkipReason", "as_float_array", "command_indices", "compute_outputs", "decode_odometry",
    "decode_reference", "double_array", "estimate_accelerations", "joined_float_arrays",
    "length_problem", "pair_odometry", "prepare_kernels", "stamp_to_ns",
]
