"""Flags against the fleet: a robot's joint far above the fleet's median for the same joint.

The modified z-score of Iglewicz and Hoaglin, z = 0.6745 (x - median) / MAD over the robots'
values of one joint, is robust: the outliers themselves barely move the median and the MAD, as
they would a mean and a standard deviation. A robot's value is the median over its bags.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Mapping, Sequence

Z_LIMIT = 3.5  # Iglewicz and Hoaglin's cut
MIN_ROBOTS = 3  # fewer give no median worth comparing against
# The MAD is floored at this fraction of the median: robots alike to the last digit (simulated
# twins, a fleet of identical values) would give MAD 0 and flag differences of no consequence.
MAD_FLOOR = 0.05

Key = tuple[str, str]  # (robot, joint)


def fleet_outliers(per_bag: Sequence[tuple[str, str, float, int]], kind: str) -> list[dict[str, Any]]:
    """`flags` rows of `kind` from (robot, joint, value, bag start_ns) rows: the robots whose
    value for a joint has z > Z_LIMIT; since_ns is the start of the robot's first bag above the
    limit."""
    values: dict[Key, list[float]] = defaultdict(list)
    for robot, joint, value, _ in per_bag:
        values[(robot, joint)].append(value)
    robot_values = {key: statistics.median(v) for key, v in values.items()}
    flags = []
    for joint, robots in _by_joint(robot_values).items():
        if len(robots) < MIN_ROBOTS:
            continue
        median = statistics.median(robots.values())
        scale = max(statistics.median(abs(v - median) for v in robots.values()), MAD_FLOOR * abs(median)) / 0.6745
        if scale == 0:
            continue
        limit = median + Z_LIMIT * scale
        for robot, value in robots.items():
            if value > limit:
                since = min(start for r, j, v, start in per_bag if (r, j) == (robot, joint) and v > limit)
                flags.append({"robot": robot, "joint": joint, "kind": kind, "value": value,
                              "fleet_median": median, "z": (value - median) / scale, "since_ns": since})
    return flags


def _by_joint(robot_values: Mapping[Key, float]) -> dict[str, dict[str, float]]:
    joints: dict[str, dict[str, float]] = defaultdict(dict)
    for (robot, joint), value in robot_values.items():
        joints[joint][robot] = value
    return joints


def residual_outliers(bags: Sequence[dict[str, Any]], joint_stats: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`residual_outlier` flags: torque residual RMS against the fleet, over the bags replayed."""
    start = {b["bag"]: b["start_ns"] for b in bags if b["status"] == "ok"}
    rows = [(j["robot"], j["joint"], j["torque_residual_rms"], start[j["bag"]])
            for j in joint_stats if j["bag"] in start and j["torque_residual_rms"] is not None]
    return fleet_outliers(rows, "residual_outlier")
