"""Contact-consistent replay of legged robots simulated by Pinocchio (test/contact_sim.py): a
Solo12 standing on four feet, then trotting on two; a Talos on two flat soles, then on one. The
torques closest to the measured efforts leave below 1 % of them, in every phase, where the
unconstrained RNEA misses the weight the knees carry."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from liedyn_ros import core, pipeline
from liedyn_ros.replay import ReplayOptions, replay

import contact_sim  # noqa: E402  (test/ helper)

EDGE_S = 0.04  # left out around the phase switch and the bag's ends (the derivative's window)
ROBOTS = {"solo12": contact_sim.solo12, "talos": contact_sim.talos}
KNEES = {"solo12": "KFE", "talos": "_4_joint"}
SOLE = (0.1, 0.05)  # half-lengths of the soles checked for tipping (flat contacts), m


@pytest.fixture(scope="module")
def recordings() -> dict[str, contact_sim.Recording]:
    return {}


def recording(recordings: dict[str, contact_sim.Recording], name: str) -> tuple[contact_sim.Robot, contact_sim.Recording]:
    robot = ROBOTS[name]()
    if name not in recordings:
        recordings[name] = contact_sim.simulate(robot, 0.4, 0.3 if name == "solo12" else 0.25)
    return robot, recordings[name]


def params(tmp_path: Path, robot: contact_sim.Robot, source: str) -> Path:
    path = tmp_path / f"{source}.yaml"
    path.write_text(
        "/**:\n  ros__parameters:\n"
        f"    contact_links: [{', '.join(robot.feet)}]\n"
        f"    contact_types: [{robot.kind}]\n    friction_coefficient: 0.8\n    contact_source: {source}\n"
        "    contact_force_threshold: 1.0\n"
        + ("    observer_gain: 300.0\n" if source == "observer" else "")
        + (f"    contact_sole_size: [{SOLE[0]}, {SOLE[1]}]\n" if robot.kind == "flat" else ""))
    return path


def read_csv(path: Path) -> tuple[np.ndarray, list[str], np.ndarray]:
    header = path.read_text().split("\n", 1)[0].split(",")[1:]
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return data[:, 0].astype(np.int64), header, data[:, 1:]


def relative_rms(residual: np.ndarray, effort: np.ndarray) -> float:
    return float(np.sqrt(np.mean(residual ** 2)) / np.sqrt(np.mean(effort ** 2)))


@pytest.mark.parametrize("name, source", [("solo12", "topic"), ("solo12", "wrench"), ("solo12", "kinematic"),
                                          ("solo12", "observer"), ("talos", "topic")])
def test_contact_consistent_residual_below_one_percent(tmp_path, recordings, name, source):
    robot, rec = recording(recordings, name)
    bag = contact_sim.write_bag(tmp_path / "bag", rec, flags=source == "topic", wrenches=source == "wrench")
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=robot.urdf, odom_topic="/odom", params=params(tmp_path, robot, source),
                                         progress=False, plots=source == "topic"))
    assert report.processed == len(rec.t) and not report.problems
    stamps, joints, effort = read_csv(out / "measured_effort.csv")
    _, _, fit = read_csv(out / "torque_fit.csv")
    _, _, free = read_csv(out / "unconstrained_torque.csv")
    _, _, configured = read_csv(out / "feedforward_torque.csv")
    knees = [j for j, joint in enumerate(joints) if joint.endswith(KNEES[name])]
    t = (stamps - contact_sim.T0_NS) * 1e-9
    away = (t > EDGE_S) & (t < rec.t[-1] - EDGE_S) & (np.abs(t - rec.switch) > EDGE_S)
    for phase, rows in (("all feet down", away & (t < rec.switch)), ("some feet up", away & (t > rec.switch))):
        assert rows.sum() > 150
        fit_error = relative_rms(effort[rows] - fit[rows], effort[rows])
        knee_miss = relative_rms(effort[rows][:, knees] - free[rows][:, knees], effort[rows][:, knees])
        node_error = relative_rms(effort[rows] - configured[rows], effort[rows])
        print(f"{name} {source} {phase}: closest {fit_error:.2e}, min-torque {node_error:.2e}, "
              f"unconstrained knees {knee_miss:.2f}")
        assert fit_error < 0.01, (phase, fit_error)
        if name == "talos" and phase == "some feet up":  # one sole: the forces, and torques, are unique
            assert node_error < 0.01, node_error
        assert knee_miss > 0.5, (phase, knee_miss)  # the weight on the feet, missing
    summary = json.loads((out / "summary.json").read_text())
    if source == "observer":  # the ground is no collision (issue 23)
        assert summary["collisions"] == []
    links = summary["contacts"]["links"]
    for i, foot in enumerate(robot.feet):
        if source == "kinematic":  # a lifting foot counts as down until 2 cm up or 0.1 m/s fast
            assert 0 <= links[foot]["active"] - rec.active[:, i].sum() < 60
        elif source == "observer":  # its first samples (the estimate from zero) and a few ms at lift-off
            assert abs(links[foot]["active"] - rec.active[:, i].sum()) <= 10
        else:
            assert links[foot]["active"] == rec.active[:, i].sum()
        assert report.published[f"contact_wrench/{foot}"] == links[foot]["active"]
    if robot.kind == "flat":  # on one sole its weight is beside it: tipping, as the simulator's own wrenches say
        off_sole = (np.abs(pipeline.centre_of_pressure(rec.wrench)) > SOLE).any(axis=-1) & rec.active
        print("tipping", {foot: links[foot]["tipping"] for foot in robot.feet}, "simulator", off_sole.sum(axis=0))
        assert off_sole[:, 0].sum() > 200
        assert [links[foot]["tipping"] for foot in robot.feet] == list(off_sole.sum(axis=0))
    if source == "topic":
        assert (out / "contact_forces.png").is_file()


def test_observer_source_says_when_its_threshold_is_above_the_weight_per_foot(tmp_path, recordings):
    """The default contact_force_threshold (20 N) on a 2.5 kg Solo12 (about 6 N a foot): the
    observer never sees a foot down, which the simulator's states contradict, and the replay
    says why in its problems (and the pipeline, for the node's log); with a threshold below the
    weight per foot the note is gone."""
    robot, rec = recording(recordings, "solo12")
    bag = contact_sim.write_bag(tmp_path / "bag", rec)
    path = params(tmp_path, robot, "observer")
    path.write_text(path.read_text().replace("contact_force_threshold: 1.0", "contact_force_threshold: 20.0"))
    out = tmp_path / "out"
    report = replay([bag], ReplayOptions(out=out, urdf=robot.urdf, odom_topic="/odom", params=path, progress=False,
                                         plots=False))
    links = json.loads((out / "summary.json").read_text())["contacts"]["links"]
    assert rec.active.sum() > 0 and all(links[foot]["active"] == 0 for foot in robot.feet)
    weight = core.load_urdf(robot.urdf.read_text(), floating_base=True).mass * 9.81 / len(robot.feet)
    notes = [p for p in report.problems if "contact_force_threshold 20 N" in p]
    assert len(notes) == 1 and f"{weight:.3g} N" in notes[0], report.problems
    config = pipeline.PipelineConfig(contact_links=tuple(robot.feet), contact_source=pipeline.ContactSource.OBSERVER)
    model = core.load_urdf(robot.urdf.read_text(), floating_base=True)
    assert pipeline.DynamicsPipeline(model, config).contact_note == notes[0]
    lower = dataclasses.replace(config, contact_force_threshold=0.9 * weight)
    assert pipeline.DynamicsPipeline(model, lower).contact_note is None
