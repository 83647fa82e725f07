"""Identification speed: the regressor against Pinocchio, and an hour-long recording fitted.

1. The joint-torque regressor per call against Pinocchio's computeJointTorqueRegressor on the
   Panda (fingers welded, 7 DoF), the UR5 and Solo12 (floating), measured in the same run by
   taking turns (bench_core.per_call). Goal: <= 1.5x.
2. One hour at 500 Hz of a 7-DoF arm (1.8 million samples, synthetic: sums of sines, torques from
   rnea plus friction plus 1% noise), streamed in blocks of 4096 as the replay does, through the
   full problem (all inertial parameters and friction, 91 unknowns): normal equations, then the
   constrained fit. Goal: under two minutes, memory flat in the recording's length (the resident
   set is printed as the stream advances).
Run: python benchmarks/bench_identification.py [--minutes M]
"""
from __future__ import annotations

import argparse
import re
import resource
import time

import numpy as np
import pinocchio as pin

from liedyn_ros import core
from liedyn_ros.core import identification as ident
from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify
from liedyn_ros.robot_data import robots_dir

from bench_core import per_call

RATE, BLOCK = 500, 4096


def arm_xml() -> str:
    xml = (robots_dir() / "panda_description/urdf/panda.urdf").read_text()
    return re.sub(r"<mimic[^>]*/>", "", xml).replace('type="prismatic"', 'type="fixed"')


def regressor_ratios() -> None:
    cases = [("panda (7 DoF)", arm_xml(), False),
             ("ur5", (robots_dir() / "ur_description/urdf/ur5_robot.urdf").read_text(), False),
             ("solo12 (floating)", (robots_dir() / "solo_description/robots/solo12.urdf").read_text(), True)]
    print(f"{'regressor per call':<22} {'ours [us]':>10} {'Pinocchio [us]':>15} {'ratio':>7}")
    rng = np.random.default_rng(0)
    for name, xml, floating in cases:
        model = core.load_urdf(xml, floating_base=floating)
        pm = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromXML(xml)
        data = pm.createData()
        q, v, a = rng.normal(size=model.n), rng.normal(size=model.nv), rng.normal(size=model.nv)
        T = core.spatial.exp_se3(rng.normal(size=6)) if floating else None
        order = list(pm.names)[2 if floating else 1:]
        q_pin, v_pin = core.to_pinocchio(model, q, v, base_pose=T, joint_order=order)
        _, a_pin = core.to_pinocchio(model, q, a, base_pose=T, joint_order=order)
        ours, theirs = per_call([lambda: ident.regressor(model, q, v, a, base_pose=T),
                                 lambda: pin.computeJointTorqueRegressor(pm, data, q_pin, v_pin, a_pin)])
        print(f"{name:<22} {ours * 1e6:>10.2f} {theirs * 1e6:>15.2f} {ours / theirs:>7.2f}")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def hour_long_fit(minutes: float) -> None:
    model = core.load_urdf(arm_xml())
    n = model.n
    rng = np.random.default_rng(1)
    freq, amp, phase = rng.uniform(0.05, 0.5, (3, n)), rng.uniform(0.2, 0.6, (3, n)), rng.uniform(0, 6.3, (3, n))
    fc, fv = rng.uniform(0.5, 2.0, n), rng.uniform(0.2, 1.0, n)
    samples = int(minutes * 60 * RATE)
    cut = int(0.7 * samples)
    problem = IdentificationProblem(model, friction=True, inertia=True)
    fit, val = NormalEquations(n, problem.size), NormalEquations(n, problem.size)
    print(f"\n{minutes:g} min at {RATE} Hz, {model.name} {n} DoF: {samples} samples, {problem.size} unknowns")
    start = time.perf_counter()
    generating = 0.0  # making the synthetic samples stands for reading the bag: not counted
    marks = {samples * k // 4 for k in (1, 2, 3)}
    for begin in range(0, samples, BLOCK):
        t_gen = time.perf_counter()
        t = np.arange(begin, min(begin + BLOCK, samples))[:, None] / RATE
        w = 2 * np.pi * freq
        q = sum(amp[k] * np.sin(w[k] * t + phase[k]) for k in range(3))
        qd = sum(amp[k] * w[k] * np.cos(w[k] * t + phase[k]) for k in range(3))
        qdd = -sum(amp[k] * w[k] ** 2 * np.sin(w[k] * t + phase[k]) for k in range(3))
        tau = core.rnea(model, q, qd, qdd) + fc * np.tanh(qd / 0.01) + fv * qd
        tau += 0.01 * rng.standard_normal(tau.shape) * np.abs(tau).mean(0)
        generating += time.perf_counter() - t_gen
        cols = problem.columns(q, qd, qdd, tau)
        c = int(np.clip(cut - begin, 0, len(t)))
        fit.add(cols[0][:c], cols[1][:c])
        val.add(cols[0][c:], cols[1][c:])
        if any(begin <= m < begin + BLOCK for m in marks):
            print(f"  {begin / samples:4.0%} streamed after {time.perf_counter() - start - generating:6.1f} s, "
                  f"resident memory {rss_mb():7.1f} MB")
    streamed = time.perf_counter() - start - generating
    result = identify(problem, fit, val)
    total = time.perf_counter() - start - generating
    err = np.abs(result.friction.coulomb - fc) / fc
    print(f"  normal equations {streamed:.1f} s, constrained fit {total - streamed:.1f} s, total {total:.1f} s "
          f"(goal < 120 s for 60 min; making the samples took {generating:.1f} s more); "
          f"resident memory {rss_mb():.1f} MB")
    print(f"  Coulomb friction max relative error {err.max():.2%}; condition number {result.condition_number:.3g}; "
          f"{len(result.unexcited)} unexcited directions; validation RMS {np.nanmean(result.rms_before):.3g} -> "
          f"{np.nanmean(result.rms_after):.3g} N m")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0, help="length of the synthetic recording")
    args = p.parse_args()
    regressor_ratios()
    hour_long_fit(args.minutes)


if __name__ == "__main__":
    main()
