"""Flags: a robot's joint far above the fleet's median for the same joint (`residual_outlier`,
`friction_outlier`, `collision_outlier`), its friction grown against its own history
(`friction_drift`), its identified payload far from the one its parameters say (`payload_mismatch`).

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
# friction_drift: a period's Coulomb friction above the robot's baseline (the median of its first
# BASELINE periods) by DRIFT and by DRIFT_FLOOR (N m or N, against the noise of a fit of almost no
# friction), in each of at least PERSIST periods up to the latest (one noisy period is no drift)
DRIFT, DRIFT_FLOOR, BASELINE, PERSIST = 0.2, 0.05, 3, 2
# payload_mismatch: the identified mass off the labelled one by this fraction and PAYLOAD_FLOOR kg
PAYLOAD_TOLERANCE, PAYLOAD_FLOOR = 0.2, 0.2
FRICTION_SCALE = 0.02  # N m or N: friction_outlier's smallest scale (3.5 x: 0.07 above the median)
COLLISION_SCALE = 1.0  # events per hour: collision_outlier's smallest scale
Key = tuple[str, str]  # (robot, joint)


def fleet_outliers(per_bag: Sequence[tuple[str, str, float, int]], kind: str, floor: float = 0.0
                   ) -> list[dict[str, Any]]:
    """`flags` rows of `kind` from (robot, joint, value, bag start_ns) rows: the robots whose
    value for a joint has z > Z_LIMIT; since_ns is the start of the robot's first bag above the
    limit. `floor`: the smallest scale (MAD / 0.6745), in the value's unit: differences far
    below it are of no consequence (a fleet without friction differs by rounding)."""
    values: dict[Key, list[float]] = defaultdict(list)
    for robot, joint, value, _ in per_bag:
        values[(robot, joint)].append(value)
    robot_values = {key: statistics.median(v) for key, v in values.items()}
    flags = []
    for joint, robots in _by_joint(robot_values).items():
        if len(robots) < MIN_ROBOTS:
            continue
        median = statistics.median(robots.values())
        scale = max(statistics.median(abs(v - median) for v in robots.values()) / 0.6745,
                    MAD_FLOOR * abs(median) / 0.6745, floor)
        if scale == 0:
            continue
        limit = median + Z_LIMIT * scale
        for robot, value in robots.items():
            if value > limit:
                since = min(start for r, j, v, start in per_bag if (r, j) == (robot, joint) and v > limit)
                flags.append({"robot": robot, "joint": joint, "kind": kind, "value": value, "fleet_median": median,
                              "z": (value - median) / scale, "since_ns": since, "reference": median,
                              "detail": f"{value:.4g} against the fleet's median {median:.4g} for {joint}"})
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


def identified(identification: Sequence[dict[str, Any]], column: str) -> list[tuple[str, str, float, int]]:
    """(robot, joint, value, period start) of the periods whose pooled fit was written (status ok)."""
    return [(i["robot"], i["joint"], i[column], i["start_ns"]) for i in identification
            if i["status"] == "ok" and i[column] is not None]


def friction_outliers(identification: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`friction_outlier` flags: a robot's identified Coulomb friction (median over its periods)
    against the fleet's."""
    return fleet_outliers(identified(identification, "coulomb"), "friction_outlier", FRICTION_SCALE)


def collision_outliers(bags: Sequence[dict[str, Any]], joint_stats: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`collision_outlier` flags: collision events per hour of recording against the fleet's."""
    span = {b["bag"]: (b["start_ns"], (b["end_ns"] - b["start_ns"]) / 3.6e12) for b in bags
            if b["status"] == "ok" and b["end_ns"] is not None and b["end_ns"] > b["start_ns"]}
    rows = [(j["robot"], j["joint"], j["collisions"] / span[j["bag"]][1], span[j["bag"]][0])
            for j in joint_stats if j["bag"] in span]
    return fleet_outliers(rows, "collision_outlier", COLLISION_SCALE)


def friction_drift(identification: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`friction_drift` flags: the robot's joints whose Coulomb friction stayed above their
    baseline's limit (DRIFT) in the latest PERSIST periods or more; since_ns is the start of the
    first of those periods (when it crossed), value the latest, reference the baseline,
    fleet_median the median of the robots' latest values, z null (against itself, not the fleet)."""
    history: dict[Key, list[tuple[int, float]]] = defaultdict(list)
    for robot, joint, value, start in identified(identification, "coulomb"):
        history[(robot, joint)].append((start, value))
    latest = {key: max(h)[1] for key, h in history.items()}
    medians = {joint: statistics.median(v.values()) for joint, v in _by_joint(latest).items()}
    flags = []
    for (robot, joint), h in history.items():
        h.sort()
        if len(h) < BASELINE + PERSIST:
            continue
        baseline = statistics.median(v for _, v in h[:BASELINE])
        limit = max(baseline * (1 + DRIFT), baseline + DRIFT_FLOOR)
        above = 0
        while above < len(h) - BASELINE and h[-1 - above][1] > limit:
            above += 1
        if above >= PERSIST:
            since, value = h[-above][0], h[-1][1]
            flags.append({"robot": robot, "joint": joint, "kind": "friction_drift", "value": value,
                          "fleet_median": medians[joint], "z": None, "since_ns": since, "reference": baseline,
                          "detail": f"Coulomb {value:.4g} against its baseline {baseline:.4g} "
                                    f"(+{100 * (value / baseline - 1):.0f} %), above +{100 * DRIFT:.0f} % "
                                    f"in its last {above} periods"})
    return flags


def payload_mismatch(identification: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`payload_mismatch` flags: a robot whose identified payload mass (median over its periods)
    is off the mass its parameters label it with (none: 0 kg) by PAYLOAD_TOLERANCE and
    PAYLOAD_FLOOR; joint is the payload link, z the difference in standard deviations of the fit."""
    by_period: dict[Key, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in identification:  # every joint's row repeats its period's payload
        if row["status"] == "ok" and row["payload_mass"] is not None:
            by_period[(row["robot"], row["payload_link"])][row["period"]] = row
    periods = {key: list(rows.values()) for key, rows in by_period.items()}
    values = {key: statistics.median(r["payload_mass"] for r in rows) for key, rows in periods.items()}
    medians = {link: statistics.median(v.values()) for link, v in _by_joint(values).items()}
    flags = []
    for (robot, link), rows in periods.items():
        label = rows[0]["payload_label"] or 0.0
        value = values[(robot, link)]
        tolerance = max(PAYLOAD_TOLERANCE * label, PAYLOAD_FLOOR)
        if abs(value - label) > tolerance:
            stds = [r["payload_mass_std"] for r in rows if r["payload_mass_std"]]
            flags.append({"robot": robot, "joint": link, "kind": "payload_mismatch", "value": value,
                          "fleet_median": medians[link],
                          "z": (value - label) / statistics.median(stds) if stds else None,
                          "since_ns": min(r["start_ns"] for r in rows if abs(r["payload_mass"] - label) > tolerance),
                          "reference": label,
                          "detail": f"identified {value:.4g} kg on {link}, labelled {label:.4g} kg"})
    return flags


def explains(cause: Mapping[str, Any], flag: Mapping[str, Any]) -> bool:
    """Whether flag `cause` explains `flag`, a symptom of it. A payload off its label is residual
    torque on every joint that carries it and external torque to the observer (collision events):
    the robot's residual and collision outliers (per robot: which joints carry a payload depends
    on the robot, an arm's joints up to its link, a quadruped's stance legs for its trunk). A
    joint's friction drift puts its friction (the median over periods) above the fleet's: that
    joint's friction outlier, unless its baseline was above the fleet's limit already."""
    if cause["robot"] != flag["robot"]:
        return False
    if cause["kind"] == "payload_mismatch":
        return flag["kind"] in ("residual_outlier", "collision_outlier")
    if cause["kind"] == "friction_drift" and flag["kind"] == "friction_outlier" and cause["joint"] == flag["joint"]:
        scale = (flag["value"] - flag["fleet_median"]) / flag["z"]
        return (cause["reference"] - flag["fleet_median"]) / scale <= Z_LIMIT
    return False


def explained(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows, each with `explained_by`: the kind of the same robot's flag that explains it
    (`explains`), else None."""
    causes = [f for f in rows if f["kind"] in ("payload_mismatch", "friction_drift")]
    return [f | {"explained_by": next((c["kind"] for c in causes if explains(c, f)), None)} for f in rows]


def flags(bags: Sequence[dict[str, Any]], joint_stats: Sequence[dict[str, Any]],
          identification: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """All the `flags` rows from the store's tables."""
    return explained(residual_outliers(bags, joint_stats) + collision_outliers(bags, joint_stats)
                     + friction_outliers(identification) + friction_drift(identification)
                     + payload_mismatch(identification))
