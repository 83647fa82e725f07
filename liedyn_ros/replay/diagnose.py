"""Mistakes that would make a replay meaningless, found before it starts or told after it ends.

Before: a topic of another message type than its option expects, effort commands with more or
fewer entries than `--effort-joints` names, and bags that are separate recordings rather than
parts of one (a merge by receive time would drop the later one's samples). Each is a
ReplayError saying what to do instead.

After: measured efforts that are all zero or constant (Gazebo fills JointState.effort with
zeros), or absent. The residual then is minus the RNEA torque, not a residual; the warning
names the bag's Float64MultiArray topics that look like effort commands. And many joint
states dropped for stamps that did not increase (a copy of a bag given with it, a clock reset).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from .errors import ReplayError

if TYPE_CHECKING:
    from .bagio import BagSet
    from .samples import Topics
    from .summary import ResidualSummary

JOINT_STATE = "sensor_msgs/msg/JointState"
ODOMETRY = "nav_msgs/msg/Odometry"
EFFORT_ARRAY = "std_msgs/msg/Float64MultiArray"
# Parts of one recording (rosbag2 splits, a restarted recorder) follow each other closely.
SEPARATE_RECORDINGS_GAP_NS = 1_000_000_000
# A few repeated stamps happen (a driver's hiccup); more than this share means a mistake.
NON_INCREASING_SHARE = 0.01


def check_topic_types(bags: BagSet, topics: Topics) -> None:
    """ReplayError when an input topic has another type than its option expects."""
    wanted = [("--joint-states-topic", topics.joint_states, JOINT_STATE), ("--odom-topic", topics.odom, ODOMETRY),
              ("--effort-topic", topics.effort, EFFORT_ARRAY)]
    for option, topic, expected in wanted:
        if topic is None:
            continue
        for bag in bags.bags:
            found = bag.topic_types().get(topic)
            if found is not None and found != expected:
                raise ReplayError(f"{option} {topic} is a {found}, expected a {expected}{_hint(bags, option, found, expected)}")


def _hint(bags: BagSet, option: str, found: str, expected: str) -> str:
    if option == "--effort-topic" and found == JOINT_STATE:
        return "; the efforts of the joint states are used without --effort-topic"
    same = sorted(t for t, ty in bags.topic_types().items() if ty == expected)
    return f"; topics of that type in the bags: {', '.join(same)}" if same else "; the bags hold none"


def check_effort_entries(bags: BagSet, topics: Topics, model: Any) -> None:
    """ReplayError when the first effort command's length differs from the joints it is said to hold."""
    if topics.effort is None:
        return
    first = bags.first(topics.effort)
    if first is None:
        return  # no command at all: told after the replay (no measured effort)
    entries = len(first.data)
    names = topics.effort_joints or tuple(model.joint_names)
    if entries == len(names):
        return
    if topics.effort_joints:
        raise ReplayError(f"--effort-joints names {len(names)} joints, {topics.effort} holds {entries} entries: "
                          f"name all {entries}, in the order of the commands")
    raise ReplayError(f"{topics.effort} holds {entries} entries, the model has {len(names)} joints "
                      f"({', '.join(names)}): give --effort-joints J1,...,J{entries} in the order of the commands")


def check_one_recording(bags: BagSet) -> None:
    """ReplayError when the bags do not overlap in time nor follow each other closely: merged by
    receive time, the later recording's stamps (restarting from a simulation's zero, say) fall
    behind the earlier one's and its samples are dropped."""
    seen: dict[object, str] = {}
    for bag in bags.bags:
        key = bag.path.resolve()
        if key in seen:
            raise ReplayError(f"{bag.path} is given twice (as {seen[key]} too): give each bag once")
        seen[key] = str(bag.path)
    spans = sorted((start, end, str(bag.path)) for bag in bags.bags
                   for start, end in [_span(bag.reader)] if end > 0)
    for (s0, e0, a), (s1, e1, b) in zip(spans, spans[1:]):
        if s1 > e0 + SEPARATE_RECORDINGS_GAP_NS:
            raise ReplayError(f"{a} ({_clock(s0)}-{_clock(e0)}) and {b} ({_clock(s1)}-{_clock(e1)}) do not overlap "
                              "in time: separate recordings are not merged; replay each on its own with --jobs N "
                              "(outputs in DIR/<bag name>/)")


def _span(reader: Any) -> tuple[int, int]:
    """(first, last) receive time of a bag; (0, 0) when unknown (a damaged bag read by scanning)."""
    try:
        return int(reader.start_time), int(reader.end_time)
    except (AttributeError, TypeError, ValueError):
        return 0, 0


def _clock(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns * 1e-9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def stamp_warnings(skipped: dict[str, int], received: int) -> list[str]:
    """A warning when many joint states were dropped because their stamps did not increase."""
    dropped = skipped.get("non_increasing_stamp", 0)
    if received == 0 or dropped <= NON_INCREASING_SHARE * received:
        return []
    return [f"{dropped} of {received} joint states were dropped because their stamps did not increase: "
            "bags that hold the same samples (a copy given with its original) or recordings whose clocks "
            "restart; give each recording once, and separate recordings with --jobs N"]


def efforts_usable(summary: ResidualSummary, passive: tuple[str, ...] = ()) -> bool:
    """Whether some actuated joint's measured effort varies: all-zero, constant or absent efforts
    leave minus the model's torques as residual and external torque, so no collision is told."""
    varies = (summary.effort_count > 0) & (summary.effort_low < summary.effort_high)
    return any(v and name not in passive for name, v in zip(summary.joint_names, varies))


def effort_warnings(summary: ResidualSummary, bags: BagSet, topics: Topics, model: Any,
                    passive: tuple[str, ...] = ()) -> list[str]:
    """Warnings when the measured efforts cannot give a residual (all zero, constant, none);
    the ``passive`` (unactuated) joints' efforts are expected constant."""
    names = summary.joint_names
    source = f"--effort-topic {topics.effort}" if topics.effort else f"the effort field of {topics.joint_states}"
    seen = summary.effort_count > 0
    if not seen.any():
        what = f"no measured effort in {source}: the torque residual columns are empty"
    elif (summary.effort_low[seen] == 0).all() and (summary.effort_high[seen] == 0).all():
        what = f"the measured efforts ({source}) are all zero: the torque residual is minus the RNEA torque"
    else:
        constant = [n for n, ok, lo, hi in zip(names, seen, summary.effort_low, summary.effort_high) if ok and lo == hi
                    and n not in passive]
        if not constant:
            return []
        return [f"the measured effort ({source}) is constant on {', '.join(constant)}: the torque residual "
                "there only shifts the RNEA torque; check that these joints' efforts are recorded"]
    return [what + _effort_candidates(bags, topics, model)]


def _effort_candidates(bags: BagSet, topics: Topics, model: Any) -> str:
    """Float64MultiArray topics that may hold torque commands (one entry per joint first)."""
    found = []
    for topic, msgtype in sorted(bags.topic_types().items()):
        if msgtype != EFFORT_ARRAY or topic == topics.effort:
            continue
        first = bags.first(topic)
        entries = len(first.data) if first is not None else 0
        looks = entries == model.n or any(w in topic.lower() for w in ("effort", "torque"))
        found.append((not looks, topic, entries))
    if not found:
        return "; the bags hold no std_msgs/msg/Float64MultiArray topic of torque commands to use instead"
    found.sort()
    best = found[0][1]
    listed = ", ".join(f"{t} ({k} entries)" for _, t, k in found)
    return f"; Float64MultiArray topics in the bags: {listed}; try --effort-topic {best}"

