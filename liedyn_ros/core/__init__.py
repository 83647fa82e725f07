"""liedyn_ros.core: Lie-group rigid-body dynamics without ROS.

Conventions (see docs/contract.md): twists (omega, v), wrenches (m, f), body frames; a fixed-base
model has v, a, tau of length n, a floating-base model 6 + n with the base twist / wrench first,
expressed in the base frame, and a base pose T_world_base. Every function accepts leading batch
dimensions.

Example (a doctest):

>>> import numpy as np
>>> from liedyn_ros.core import load_urdf, rnea, aba
>>> urdf = '''<robot name="pendulum">
...   <link name="world"/>
...   <link name="bob"><inertial><origin xyz="0 0 -1"/><mass value="2"/>
...     <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>
...   <joint name="swing" type="continuous"><parent link="world"/><child link="bob"/>
...     <axis xyz="0 1 0"/></joint>
... </robot>'''
>>> model = load_urdf(urdf)
>>> model.joint_names
('swing',)
>>> tau = rnea(model, [np.pi / 2], [0.0], [0.0])   # hold the arm horizontal: m g l
>>> round(float(tau[0]), 6)
19.62
>>> round(float(aba(model, [0.0], [0.0], [1.0])[0]), 6)   # m l^2 qdd = tau
0.5
"""
from __future__ import annotations

from .base import (
    from_pinocchio,
    pose_from_position_quaternion,
    position_quaternion_from_pose,
    to_pinocchio,
    velocity_from_twist,
)
from .collisions import Collision, collision_events, collision_step
from .constraints import (
    ConstrainedTerms,
    TermsKernel,
    ConstraintSet,
    Contact,
    LoopClosure,
    constrained_aba,
    constrained_hybrid,
    constrained_rnea,
    constrained_terms,
    constraint_bias,
    constraint_frames,
    constraint_jacobian,
    constraint_set,
    constraint_wrenches,
    contact_forces,
    wrench_spread,
    contact_wrench_checks,
)
from .data import Data
from .dynamics import aba, coriolis_matrix, gravity, hybrid, mass_matrix, rnea
from .derivatives import (
    aba_derivatives,
    aba_time_derivatives,
    hybrid_derivatives,
    rnea_derivatives,
    rnea_time_derivatives,
)
from .identification import Friction, friction_torque, parameters, regressor, with_parameters, with_payload
from .model import DEFAULT_GRAVITY, Flaw, Model, SingularInertiaError, URDFError, URDFLimitWarning, URDFWarning
from .observer import MomentumObserver
from .urdf import load_urdf

__all__ = [
    "DEFAULT_GRAVITY",
    "Model",
    "URDFError",
    "URDFWarning",
    "URDFLimitWarning",
    "Flaw",
    "SingularInertiaError",
    "load_urdf",
    "rnea",
    "aba",
    "gravity",
    "mass_matrix",
    "coriolis_matrix",
    "hybrid",
    "Data",
    "rnea_derivatives",
    "aba_derivatives",
    "hybrid_derivatives",
    "rnea_time_derivatives",
    "aba_time_derivatives",
    "Contact",
    "LoopClosure",
    "ConstraintSet",
    "constraint_set",
    "constraint_jacobian",
    "constraint_bias",
    "constraint_frames",
    "constrained_aba",
    "constrained_rnea",
    "constrained_hybrid",
    "constrained_terms",
    "ConstrainedTerms",
    "TermsKernel",
    "constraint_wrenches",
    "contact_forces",
    "wrench_spread",
    "contact_wrench_checks",
    "regressor",
    "parameters",
    "with_parameters",
    "with_payload",
    "Friction",
    "friction_torque",
    "MomentumObserver",
    "Collision",
    "collision_events",
    "collision_step",
    "pose_from_position_quaternion",
    "position_quaternion_from_pose",
    "velocity_from_twist",
    "to_pinocchio",
    "from_pinocchio",
]
