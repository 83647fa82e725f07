#!/usr/bin/env bash
# Type-checks every liedyn_ros module that imports rclpy, plus the ROS-free pipeline, with mypy
# against the real rclpy and message Python sources (rclpy-intellisense,
# common-interfaces-intellisense). They go into .ros-typeshed/ (git-ignored), NOT into the venv:
# there `import rclpy` would succeed and the ROS-only tests would stop skipping.
# Catches wrong calls such as a create_subscription without its qos_profile.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
STUBS=.ros-typeshed

if [ ! -f "$STUBS/rclpy/node.py" ] || [ ! -f "$STUBS/sensor_msgs/msg/JointState.py" ]; then
    "$PY" -m pip install --quiet --disable-pip-version-check --target "$STUBS" \
        "rclpy-intellisense==1.2.0" "common-interfaces-intellisense==0.1.0"
fi
# Refuse to run without the sources: mypy would then treat rclpy as missing and pass vacuously.
for module in rclpy/node.py rclpy/qos_overriding_options.py std_msgs/msg/String.py \
              diagnostic_msgs/msg/DiagnosticArray.py nav_msgs/msg/Odometry.py; do
    [ -f "$STUBS/$module" ] || { echo "typecheck: $STUBS/$module missing" >&2; exit 1; }
done

# Only what the ROS sources import but the packages do not ship (the C extension, ROS-only
# Python packages) may be missing; everything else is checked.
cat > "$STUBS/mypy.ini" <<'INI'
[mypy]
python_version = 3.10
follow_imports = silent
warn_unused_ignores = True
[mypy-rcl_interfaces.*,rclpy.impl.*,rclpy._rclpy_pybind11,rpyutils.*,rosidl_parser.*,rosidl_runtime_py.*,unique_identifier_msgs.*,action_msgs.*,lifecycle_msgs.*,yaml.*]
ignore_missing_imports = True
INI

mapfile -t MODULES < <(grep -rlE --include='*.py' '^\s*(import rclpy|from rclpy)' liedyn_ros | sort)
if [ "${#MODULES[@]}" -eq 0 ]; then
    echo "typecheck: no module imports rclpy; expected at least liedyn_ros/dynamics_node.py" >&2
    exit 1
fi
echo "typecheck: mypy on ${MODULES[*]} liedyn_ros/pipeline/"
MYPYPATH="$STUBS" "$PY" -m mypy --config-file "$STUBS/mypy.ini" "${MODULES[@]}" liedyn_ros/pipeline/
