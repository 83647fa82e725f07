"""Excitation trajectories for identification: finite Fourier series whose base regressor is well
conditioned, within the joint limits, written as a ROS JointTrajectory file (and CSV).

    limits = excitation_limits(model, acceleration=5.0)            # URDF limits, scaled
    problem = excitation_problem(model, joints, limits, period=10.0, payload_link=..., identify=...)
    result = design_excitation(problem)                             # .trajectory, .condition_number
    write_trajectory(out_dir, result, duration=20.0)                # trajectory.yaml, trajectory.csv, design.json
    load_trajectory(path, model, limits)                            # checked, or TrajectoryRefused
"""
from __future__ import annotations

from .design import (Excitation, ExcitationProblem, condition_number, design_excitation, excitation_problem,
                     random_fourier, single_sine, violations)
from .fourier import FourierTrajectory, at_rest
from .limits import Limits, effort_bound, excitation_limits

__all__ = ["FourierTrajectory", "at_rest", "Limits", "excitation_limits", "effort_bound", "ExcitationProblem",
           "Excitation", "excitation_problem", "condition_number", "violations", "random_fourier", "single_sine",
           "design_excitation"]
