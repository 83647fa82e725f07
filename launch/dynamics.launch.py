"""Start liedyn_ros' dynamics_node, optionally with a robot_state_publisher.

    ros2 launch liedyn_ros dynamics.launch.py urdf_file:=/path/robot.urdf.xacro
    ros2 launch liedyn_ros dynamics.launch.py            # next to a running robot_state_publisher
    ros2 launch liedyn_ros dynamics.launch.py lifecycle:=true   # a managed node, unconfigured

Arguments: urdf_file (URDF or xacro; empty: take the robot_description topic),
start_robot_state_publisher, params_file, namespace, use_sim_time, joint_states_topic,
odom_topic, reference_topic, lifecycle (true: the managed node dynamics_lifecycle_node, left
unconfigured for a lifecycle manager or ``ros2 lifecycle set``).
"""
from __future__ import annotations

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import Command, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

ARGUMENTS = {
    "urdf_file": ("", "URDF or xacro file; empty: wait for the robot_description topic"),
    "start_robot_state_publisher": ("true", "with urdf_file: also start robot_state_publisher"),
    "params_file": (None, "parameter file (ros__parameters)"),
    "namespace": ("", "namespace of the nodes (outputs are relative to it)"),
    "use_sim_time": ("false", "use /clock"),
    "joint_states_topic": ("joint_states", "sensor_msgs/JointState input"),
    "odom_topic": ("odom", "nav_msgs/Odometry input (floating base)"),
    "reference_topic": ("reference", "trajectory_msgs/JointTrajectory (acceleration_source=reference)"),
    "lifecycle": ("false", "true: the node as a managed (lifecycle) node, unconfigured until configured"),
}


def _nodes(context: LaunchContext) -> list[Node]:
    value = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    sim_time = value["use_sim_time"].lower() == "true"
    parameters: list = [value["params_file"], {"use_sim_time": sim_time}]
    nodes = []
    if value["urdf_file"]:
        # xacro also passes a plain URDF through unchanged.
        description = ParameterValue(Command(["xacro ", value["urdf_file"]]), value_type=str)
        parameters.append({"robot_description": description})
        if value["start_robot_state_publisher"].lower() == "true":
            nodes.append(Node(
                package="robot_state_publisher", executable="robot_state_publisher",
                namespace=value["namespace"], output="screen",
                parameters=[{"robot_description": description, "use_sim_time": sim_time}],
                remappings=[("joint_states", value["joint_states_topic"])],
            ))
    managed = value["lifecycle"].lower() == "true"
    nodes.append((LifecycleNode if managed else Node)(
        package="liedyn_ros", executable="dynamics_lifecycle_node" if managed else "dynamics_node",
        name="liedyn_dynamics", namespace=value["namespace"], output="screen", parameters=parameters,
        remappings=[
            ("joint_states", value["joint_states_topic"]),
            ("odom", value["odom_topic"]),
            ("reference", value["reference_topic"]),
        ],
    ))
    return nodes


def generate_launch_description() -> LaunchDescription:
    default_params = PathJoinSubstitution([FindPackageShare("liedyn_ros"), "config", "dynamics.yaml"])
    declared = [
        DeclareLaunchArgument(name, default_value=default_params if default is None else default,
                              description=text)
        for name, (default, text) in ARGUMENTS.items()
    ]
    return LaunchDescription(declared + [OpaqueFunction(function=_nodes)])
