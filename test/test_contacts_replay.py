"""Contact-consistent replay of a Solo12 simulated by Pinocchio (test/contact_sim.py): standing
on four feet, then trotting on two. The torques closest to the measured efforts leave below 1 %
of them, in every phase, where the unconstrained RNEA misses the weight the knees carry."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from liedyn_ros.replay import ReplayOptions, replay
from liedyn_ros.robot_data import robots_dir

import contact_sim  # noqa: E402  (test/ helper, after pinocchio is known to be there)

URDF = robots_dir() / "solo_description/robots/solo12.urdf"
EDGE_S = 0.04  # left out around the phase switch and the bag's ends (the derivative's window)


@pytest.fixture(scope="module")
def recording() -> contact_sim.Recording:
    return contact_sim.simulate(URDF)


def params(tmp_path: Path, source: str) -> Path:
    path = tmp_path / f"{source}.yaml"
    path.write_text(
        "/**:\n  ros__parameters:\n"
        f"    contact_links: [{', '.join(contact_sim.FEET)}]\n"
        f"    contact_types: [point]\n    friction_coefficient: 0.8\n    contact_source: {source}\n"
        "    contact_force_threshold: 1.0\n    base_link: base_link\n")
    return path


def read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return data[:, 0].astype(np.int64), data[:, 1:]


def relative_rms(residual: np.ndarray, effort: np.ndarray) -> float:
    return float(np.sqrt(np.mean(residual ** 2)) / np.sqrt(np.mean(effort ** 2)))


def phases(stamps: np.ndarray, rec: contact_sim.Recording) -> dict[str, np.ndarray]:
    t = (stamps - contact_sim.T0_NS) * 1e-9
    switch, end = 0.4, rec.t[-1]
    away = (t > EDGE_S) & (t < end - EDGE_S) & (np.abs(t - switch) > EDGE_S)
    return {"stand": away & (t < switch), "trot": away & (t > switch)}


@pytest.mark.parametrize("source", ["topic", "wrench"])
def test_contact_consistent_residual_below_one_percent(tmp_path, recording, source):
    bag = contact_sim.write_bag(tmp_path / "bag", recording, flags=source == "topic", wrenches=source == "wrench")
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=URDF, odom_topic="/odom", params=params(tmp_path, source),
                                         progress=False,
                                         plots=source == "topic"))
    assert report.processed > 650 and not report.problems
    stamps, effort = read_csv(out / "measured_effort.csv")
    _, fit = read_csv(out / "torque_fit.csv")
    _, free = read_csv(out / "unconstrained_torque.csv")
    names = recording.joint_names
    knees = [j for j, name in enumerate(names) if name.endswith("KFE")]
    for phase, rows in phases(stamps, recording).items():
        assert rows.sum() > 150
        fit_error = relative_rms(effort[rows] - fit[rows], effort[rows])
        knee_miss = relative_rms(effort[rows][:, knees] - free[rows][:, knees], effort[rows][:, knees])
        print(f"{source} {phase}: fit {fit_error:.2e}, unconstrained knees {knee_miss:.2f}")
        assert fit_error < 0.01, (phase, fit_error)
        assert knee_miss > 0.5, (phase, knee_miss)  # the weight on the feet, missing
    summary = json.loads((out / "summary.json").read_text())
    links = summary["contacts"]["links"]
    assert links["FL_FOOT"]["active"] == links["HR_FOOT"]["active"] == report.processed
    assert 0 < links["FR_FOOT"]["active"] < report.processed
    assert report.published["contact_wrench/FR_FOOT"] == links["FR_FOOT"]["active"]
    if source == "topic":
        assert (out / "contact_forces.png").is_file()
