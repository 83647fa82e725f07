"""Pipeline settings, skip reasons and the types every stage shares."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
Logger = Callable[[str], None]

NS_PER_S = 1_000_000_000


class Model(Protocol):
    """What the pipeline needs from ``liedyn_ros.core.load_urdf``'s model."""

    joint_names: tuple[str, ...]
    floating_base: bool
    root_link: str
    n: int
    nv: int


class SkipReason(str, enum.Enum):
    """Why a message produced no output. The value is the counter / diagnostics key."""

    MISSING_JOINT = "missing_joint"            # a model joint is not in the JointState
    DUPLICATE_JOINT = "duplicate_joint"        # a name appears twice: ambiguous, never guess
    LENGTH_MISMATCH = "length_mismatch"        # position/velocity/effort length != name length
    MISSING_VELOCITY = "missing_velocity"      # empty velocity array (Coriolis needs qd)
    NAN = "nan"                                # non-finite q or qd (or effort) of a model joint
    NO_ODOMETRY = "no_odometry"                # floating base, no odometry received yet
    STALE_ODOMETRY = "stale_odometry"          # latest odometry further than odom_max_age
    BAD_ODOMETRY = "bad_odometry"              # odometry with NaN or a degenerate quaternion
    ESTIMATOR_WARMUP = "estimator_warmup"      # estimated qdd needs a few samples first
    NO_REFERENCE = "no_reference"              # reference source, no trajectory received yet
    STALE_REFERENCE = "stale_reference"        # reference older than reference_max_age
    BAD_REFERENCE = "bad_reference"            # trajectory without points, NaN, missing joint
    COMPUTE_ERROR = "compute_error"            # the core rejected the input (ValueError)


class AccelerationSource(str, enum.Enum):
    """Where the joint accelerations fed to RNEA come from."""

    ZERO = "zero"            # gravity + Coriolis feedforward
    ESTIMATED = "estimated"  # causal filtered differentiation of measured velocities
    REFERENCE = "reference"  # computed-torque feedforward from the latest JointTrajectory


@dataclass(frozen=True)
class PipelineConfig:
    """Pipeline settings; field names match the node's ROS parameters.

    ``odom_max_age``, ``estimator_window``, ``reference_max_age`` and ``warn_period`` are in
    seconds. ``reference_max_age`` <= 0 disables the reference age check. ``command_joints``
    empty means the model's joint order. ``base_link`` empty means the model's root link.
    """

    acceleration_source: AccelerationSource = AccelerationSource.ZERO
    odom_max_age: float = 0.02
    estimator_window: float = 0.05
    estimator_min_samples: int = 3
    reference_max_age: float = 1.0
    base_link: str = ""
    publish_feedforward: bool = True
    publish_gravity: bool = True
    publish_predicted_acceleration: bool = True
    publish_base_outputs: bool = True
    publish_effort_command: bool = False
    command_joints: tuple[str, ...] = ()
    warn_period: float = 5.0

    def __post_init__(self) -> None:
        # Accept the plain string a ROS parameter gives, and fail on anything else.
        try:
            source = AccelerationSource(self.acceleration_source)
        except ValueError:
            choices = ", ".join(s.value for s in AccelerationSource)
            raise ValueError(
                f"acceleration_source: {self.acceleration_source!r} is not one of {choices}"
            ) from None
        object.__setattr__(self, "acceleration_source", source)
        object.__setattr__(self, "command_joints", tuple(self.command_joints))
        _require_positive("odom_max_age", self.odom_max_age)
        _require_positive("estimator_window", self.estimator_window)
        _require_positive("warn_period", self.warn_period, allow_zero=True)
        if self.estimator_min_samples < 2:
            raise ValueError(
                f"estimator_min_samples: {self.estimator_min_samples} < 2, a slope needs two samples"
            )
        if not math.isfinite(self.reference_max_age):
            raise ValueError(f"reference_max_age: {self.reference_max_age} is not finite")


def _require_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0.0 if allow_zero else value > 0.0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: {value} must be finite and {bound}")
