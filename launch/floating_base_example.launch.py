"""Example for a floating-base robot: dynamics_node with config/floating_base.yaml, the base
pose and twist from a state estimator's nav_msgs/Odometry.

    ros2 launch liedyn_ros floating_base_example.launch.py \
        urdf_file:=/path/quadruped.urdf odom_topic:=/odometry/filtered
"""
from __future__ import annotations

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("liedyn_ros")
    forwarded = {
        "urdf_file": ("", "URDF or xacro of the floating-base robot (root link = base link)"),
        "odom_topic": ("odom", "nav_msgs/Odometry of the base, twist in child_frame_id"),
        "joint_states_topic": ("joint_states", "sensor_msgs/JointState input"),
        "namespace": ("", "namespace of the nodes"),
        "use_sim_time": ("false", "use /clock"),
    }
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in forwarded.items()]
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "dynamics.launch.py"])),
        launch_arguments={
            **{name: LaunchConfiguration(name) for name in forwarded},
            "params_file": PathJoinSubstitution([share, "config", "floating_base.yaml"]),
        }.items(),
    )
    return LaunchDescription(declared + [include])
