"""Excitation design on a 6-DoF (UR5) and a 7-DoF arm (Panda, fingers welded), and a MuJoCo run of it.

1. Per arm: the designed trajectory's condition number (column-scaled base regressor of inertia
   and friction) against 10 random Fourier trajectories and a single-sine one of the same period
   and harmonics, all grown to the same limits. Goal: >= 5x better than the random median.
2. Every limit checked independently of the design's bounds: positions, velocities and
   accelerations on a grid 50x finer than the design's, efforts there by Pinocchio's rnea; and
   the written trajectory.yaml loaded back through load_trajectory.
3. MuJoCo (an independent simulator, model built from the URDF) runs the trajectory: a "true"
   arm whose link masses and inertias differ from the URDF's by up to 15 % and whose centres of
   mass are shifted by up to 1 cm, with a 1.5 kg payload on the flange and viscous joint damping,
   tracked by computed torque (Pinocchio's rnea of the URDF model plus PD). The package's fit
   (inertia and friction, prior = the URDF, rows of the first 3 periods, validation on the 4th)
   of the recorded torques, exact and with noise (0.5 % of each joint's effort limit), gives base parameters
   compared with the true arm's. The same for the best random Fourier trajectory, for contrast.
Run: python benchmarks/bench_excitation.py [--iterations N]
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin

from liedyn_ros import core
from liedyn_ros.core.identification import base_parameters, parameters
from liedyn_ros.core.identification.excitation import (condition_number, design_excitation, excitation_limits,
                                                        excitation_problem, random_fourier, violations)
from liedyn_ros.core.identification.excitation.files import load_trajectory, write_trajectory
from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify
from liedyn_ros.robot_data import robots_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
from simulated import arm_urdf  # noqa: E402  (the MuJoCo-ready URDF: no geometry, damping, payload)

PERIOD, HARMONICS, ACCELERATION, PERIODS = 10.0, 5, 5.0, 4


def arms() -> dict[str, tuple[str, str]]:
    """name -> (URDF without mimic or finger joints, payload link)."""
    panda = (robots_dir() / "panda_description/urdf/panda.urdf").read_text()
    panda = re.sub(r"<mimic[^>]*/>", "", panda).replace('type="prismatic"', 'type="fixed"')
    ur5 = (robots_dir() / "ur_description/urdf/ur5_robot.urdf").read_text()
    return {"ur5": (ur5, "wrist_3_link"), "panda": (panda, "panda_link7")}


def independent_limit_check(problem, traj) -> tuple[float, list[str]]:
    """Worst use of each limit (fraction) on a grid 50x finer than the design's, efforts by Pinocchio."""
    model, lim = problem.model, problem.limits
    t = np.linspace(0.0, problem.period, 50 * problem.effort_samples + 1)
    q, qd, qdd = traj.derivatives(t, 2)
    pm = pin.buildModelFromXML(XML[model.name])
    data = pm.createData()
    order = [list(pm.names).index(j) - 1 for j in model.joint_names]  # Pinocchio's q index per joint
    tau = np.empty_like(q)
    for k in range(len(t)):
        qp, vp, ap = (np.zeros(pm.nq) for _ in range(3))
        qp[order], vp[order], ap[order] = q[k], qd[k], qdd[k]
        tau[k] = pin.rnea(pm, data, qp, vp, ap)[order]
    use = max(float(np.max(np.maximum(lim.lower - q, q - lim.upper))), -1.0)
    bad = lim.violations(model.joint_names, q, qd, qdd, tau=tau)
    fractions = [np.max(np.abs(x) / b) for x, b in ((qd, lim.velocity), (qdd, lim.acceleration), (tau, lim.effort))]
    return max(fractions), bad + ([f"position beyond range by {use}"] if use > 0 else [])


XML: dict[str, str] = {}


def design(name: str, xml: str, iterations: int):
    model = core.load_urdf(xml)
    XML[model.name] = xml
    limits = excitation_limits(model, acceleration=ACCELERATION)
    problem = excitation_problem(model, model.joint_names, limits, period=PERIOD, harmonics=HARMONICS)
    start = time.perf_counter()
    result = design_excitation(problem, restarts=1, maxiter=iterations)
    seconds = time.perf_counter() - start
    rnd = result.random_condition_numbers
    dense = condition_number(problem, result.trajectory, samples=50 * problem.samples)
    print(f"\n{name}: {model.n} joints, {len(problem.columns)} base columns (inertia + friction), period {PERIOD:g} s, "
          f"{HARMONICS} harmonics ({HARMONICS / PERIOD:g} Hz), designed in {seconds:.0f} s")
    print(f"  condition number: designed {result.condition_number:.4g} (on a 50x finer grid {dense:.4g}); random "
          f"Fourier median {np.median(rnd):.4g}, best {rnd.min():.4g}, worst {rnd.max():.4g}; single sine "
          f"{result.single_sine_condition_number:.4g}")
    print(f"  ratio random median / designed: {np.median(rnd) / result.condition_number:.1f}x "
          f"(best random / designed {rnd.min() / result.condition_number:.1f}x)")
    worst, bad = independent_limit_check(problem, result.trajectory)
    print(f"  limits on the 50x grid (Pinocchio efforts): {'none broken' if not bad else bad}, highest use of a "
          f"velocity, acceleration or effort limit {100 * worst:.1f} %; design's own check: "
          f"{violations(problem, result.trajectory) or 'none broken'}")
    with tempfile.TemporaryDirectory() as out:
        paths = write_trajectory(Path(out), result, periods=2)
        sampled = load_trajectory(paths["yaml"], model, limits)
        print(f"  trajectory.yaml: {len(sampled.t)} points, {paths['yaml'].stat().st_size / 1024:.0f} KiB, "
              "loads back through load_trajectory")
    return problem, result


def true_arm(xml: str, payload_link: str, seed: int = 1) -> tuple[str, dict[str, float]]:
    """The URDF with each link's mass and inertia scaled by U(0.85, 1.15), its centre of mass moved by
    up to 1 cm, a 1.5 kg payload on payload_link and viscous damping on every joint."""
    rng = np.random.default_rng(seed)

    def perturb(m: re.Match) -> str:
        block = m.group(0)
        f = rng.uniform(0.85, 1.15)
        block = re.sub(r'(<mass value=")([^"]+)"', lambda g: f'{g.group(1)}{float(g.group(2)) * f}"', block)
        block = re.sub(r'(i(?:xx|xy|xz|yy|yz|zz)=")([^"]+)"', lambda g: f'{g.group(1)}{float(g.group(2)) * f}"',
                       block)

        def shift(g: re.Match) -> str:
            xyz = np.array(g.group(2).split(), dtype=float) + rng.uniform(-0.01, 0.01, 3)
            return f'{g.group(1)}{" ".join(map(str, xyz))}"'
        return re.sub(r'(<origin[^>]*xyz=")([^"]+)"', shift, block, count=1)

    moved = re.sub(r"<inertial>.*?</inertial>", perturb, xml, flags=re.S)
    joints = re.findall(r'<joint name="([^"]+)" type="(?:revolute|continuous)"', xml)
    damping = dict(zip(joints, rng.uniform(0.5, 2.0, len(joints))))
    payload = (payload_link, 1.5, np.array([0.0, 0.02, 0.05]), np.diag([4e-3, 4e-3, 2e-3]))
    return arm_urdf(moved, damping, dict.fromkeys(joints, 0.0), payload), damping


def mujoco_run(urdf: str, prior_xml: str, traj, seconds: float, rate: float = 500.0):
    """(t, q, qd, qdd, tau) of MuJoCo tracking the trajectory by computed torque (Pinocchio, prior model)."""
    mj = mujoco.MjModel.from_xml_string(urdf)
    mj.opt.timestep, mj.opt.integrator = 0.001, mujoco.mjtIntegrator.mjINT_RK4
    data = mujoco.MjData(mj)
    model = core.load_urdf(prior_xml)
    pm = pin.buildModelFromXML(prior_xml)
    pdata = pm.createData()
    pin_idx = [list(pm.names).index(j) - 1 for j in model.joint_names]
    qadr = [mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in model.joint_names]
    dadr = [mj.jnt_dofadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in model.joint_names]
    q0, _, _ = traj.derivatives([0.0], 2)
    data.qpos[qadr] = q0[0]
    mujoco.mj_forward(mj, data)
    steps, every = int(round(seconds / mj.opt.timestep)), int(round(1 / (rate * mj.opt.timestep)))
    rec = {k: [] for k in ("t", "q", "qd", "qdd", "tau")}
    kp, kd = 2500.0, 100.0  # stiff: the controller knows neither the payload nor the damping
    for step in range(steps):
        t = step * mj.opt.timestep
        qr, vr, ar = (x[0] for x in traj.derivatives([t], 2))
        q, qd = data.qpos[qadr].copy(), data.qvel[dadr].copy()
        qp, vp, ap = (np.zeros(pm.nq) for _ in range(3))
        qp[pin_idx], vp[pin_idx], ap[pin_idx] = q, qd, ar + kp * (qr - q) + kd * (vr - qd)
        tau = pin.rnea(pm, pdata, qp, vp, ap)[pin_idx]
        data.qfrc_applied[dadr] = tau
        if step % every == 0:
            mujoco.mj_forward(mj, data)
            for k, x in zip(rec, (t, q, qd, data.qacc[dadr].copy(), tau)):
                rec[k].append(x)
        mujoco.mj_step(mj, data)
    return {k: np.array(v) for k, v in rec.items()}


def identify_run(prior_xml: str, truth_urdf: str, damping, traj, label: str, noise: float, noise_rng) -> None:
    prior = core.load_urdf(prior_xml)
    rec = mujoco_run(truth_urdf, prior_xml, traj, PERIODS * PERIOD)
    tracking = np.abs(rec["q"] - traj.derivatives(rec["t"], 0)[0]).max()
    tau = rec["tau"] + noise_rng.standard_normal(rec["tau"].shape) * noise * prior.effort_limit
    problem = IdentificationProblem(prior, friction=True, inertia=True)
    fit, val = NormalEquations(prior.n, problem.size), NormalEquations(prior.n, problem.size)
    first = rec["t"] < (PERIODS - 1) * PERIOD
    for eq, rows in ((fit, first), (val, ~first)):
        G, r = problem.columns(rec["q"][rows], rec["qd"][rows], rec["qdd"][rows], tau[rows])
        eq.add(G, r)
    result = identify(problem, fit, val)
    truth = core.load_urdf(truth_urdf)  # the payload merged into its link's body, as the fit sees it
    bp = base_parameters(truth)
    true_b, est_b = bp.of(parameters(truth)), bp.of(result.parameters)
    # each base parameter's share of the torques, |value| x its column's RMS over random states
    # within the limits (the same for every trajectory compared)
    lim = excitation_limits(prior, acceleration=ACCELERATION)
    rng = np.random.default_rng(5)
    states = (rng.uniform(lim.lower, lim.upper, (2000, prior.n)), rng.uniform(-1, 1, (2000, prior.n)) * lim.velocity,
              rng.uniform(-1, 1, (2000, prior.n)) * lim.acceleration)
    Y = core.identification.regressor(truth, *states)[..., bp.independent].reshape(-1, bp.independent.size)
    weight = np.sqrt(np.mean(Y ** 2, axis=0)) * np.abs(true_b)
    major = weight >= 0.01 * weight.max()
    rel = np.abs(est_b - true_b) / np.abs(true_b)
    worst = int(np.argmax(np.where(major, rel, -1)))
    weighted = np.linalg.norm((est_b - true_b) * weight / np.abs(true_b)) / np.linalg.norm(weight)
    friction = result.friction
    viscous_err = max(abs(friction.viscous[j] - damping[jn]) / damping[jn] for j, jn in enumerate(prior.joint_names))
    print(f"  {label:<15} noise {100 * noise:g} %: tracking {tracking:.2g} rad; base parameters: torque-weighted error "
          f"{100 * weighted:.2f} %, median {100 * np.median(rel[major]):.2f} %, worst {100 * rel[worst]:.2f} % "
          f"({bp.labels[worst]}) of the {major.sum()} of {major.size} with >= 1 % of the largest torque share; viscous "
          f"friction worst {100 * viscous_err:.2f} %; validation RMS {np.round(result.rms_after, 3).tolist()} N m")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=150)
    args = parser.parse_args()
    for name, (xml, payload_link) in arms().items():
        problem, result = design(name, xml, args.iterations)
        truth, damping = true_arm(xml, payload_link)
        print(f"  MuJoCo, perturbed {name} with a 1.5 kg payload on {payload_link}, {PERIODS} periods at 500 Hz, "
              "torque noise as a fraction of the effort limits:")
        for noise in (0.0, 0.005):
            identify_run(xml, truth, damping, result.trajectory, "designed", noise, np.random.default_rng(7))
            identify_run(xml, truth, damping, random_fourier(problem, np.random.default_rng(0)), "random Fourier",
                         noise, np.random.default_rng(7))


if __name__ == "__main__":
    main()
