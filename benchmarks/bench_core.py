"""Our compiled dynamics against Pinocchio, measured in the same run.

Per call on the Panda, through the plain functions and through a prepared core.Data (taking
turns with Pinocchio in short bursts, best of many rounds, so that the load of a shared machine
reaches both alike) and per sample for a batch of 10,000 against Pinocchio's 2-thread
`rneaInParallel` / `abaInParallel`, and both on one thread (how each scales); then the same for Talos (reduced, floating base; Pinocchio
with a free-flyer root). Goals: per call <= 1.5x (<= 1.0x through core.Data), batch <= 1.0x.
Run: python benchmarks/bench_core.py [--batch N] [--threads T]
"""
from __future__ import annotations

import argparse
import time
import timeit
from typing import Callable

import numba
import numpy as np
import pinocchio as pin

from liedyn_ros import core
from liedyn_ros.core import base as conversions
from liedyn_ros.robot_data import robots_dir

ROBOTS = robots_dir()
ROBOT_FILES = {"panda": ("panda_description/urdf/panda.urdf", False),
               "talos reduced": ("talos_data/robots/talos_reduced.urdf", True)}


def per_call(fns: list[Callable[[], object]], number: int = 1000, rounds: int = 30) -> list[float]:
    """Best time of one call of each function, in seconds.

    The functions take turns in short bursts, so that a load that comes and goes on a shared
    machine reaches them alike; the minimum over the rounds is the figure.
    """
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            best[k] = min(best[k], timeit.timeit(fn, number=number) / number)
    return best


def best_of(fns: list[Callable[[], object]], rounds: int = 20, burst: int = 3) -> list[float]:
    """Best time of one call of each function, in seconds, taking turns in bursts of `burst` calls.

    Bursts rather than single calls: Pinocchio's OpenMP threads keep spinning for a while after
    their parallel loop, and would otherwise take the cores from the call right after theirs.
    """
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            for _ in range(burst):
                t0 = time.perf_counter()
                fn()
                best[k] = min(best[k], time.perf_counter() - t0)
    return best


def row(name: str, ours: float, theirs: float | None, unit: float = 1e-6) -> str:
    if theirs is None:
        return f"  {name:<22}{ours / unit:>10.3f}{'-':>12}{'-':>8}"
    return f"  {name:<22}{ours / unit:>10.3f}{theirs / unit:>12.3f}{ours / theirs:>8.2f}"


def bench_robot(label: str, batch: int, threads: int) -> None:
    path, floating = ROBOT_FILES[label]
    model = core.load_urdf(str(ROBOTS / path), floating_base=floating)
    pin_model = pin.buildModelFromUrdf(str(ROBOTS / path), *([pin.JointModelFreeFlyer()] if floating else []))
    data_pin = pin_model.createData()
    order = list(pin_model.names)[2 if floating else 1:]
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, model.n)
    v, a = rng.normal(size=(2, model.nv))
    pose = core.pose_from_position_quaternion(rng.normal(size=3), rng.normal(size=4)) if floating else None
    q_pin, v_pin = conversions.to_pinocchio(model, q, v, base_pose=pose, joint_order=order)
    a_pin = rng.normal(size=pin_model.nv)
    tau_pin = pin.rnea(pin_model, data_pin, q_pin, v_pin, a_pin)
    # A wrench on the link of the last joint with its own coordinate (the Panda's second finger is
    # a mimic joint here, a joint of its own in Pinocchio): the link's frame is the joint's in both.
    joint = [name for name in pin_model.names if name in model.joint_names][-1]
    link = model.body_names[model.body_joints.index(joint)]
    wrench = rng.normal(size=6)  # (m, f)
    f_ext = {link: wrench}
    fext_pin = pin.StdVec_Force()
    for k in range(pin_model.njoints):
        fext_pin.append(pin.Force(wrench[3:], wrench[:3]) if k == pin_model.getJointId(joint) else pin.Force.Zero())

    print(f"\n{label}: n = {model.n} coordinates, {model.nb} bodies (Pinocchio nv = {pin_model.nv})")
    print(f"  per call {'':<13}{'ours us':>10}{'Pinocchio us':>12}{'ratio':>8}")
    cases = [
        ("rnea", lambda: core.rnea(model, q, v, a, base_pose=pose),
         lambda: pin.rnea(pin_model, data_pin, q_pin, v_pin, a_pin)),
        ("gravity", lambda: core.gravity(model, q, base_pose=pose),
         lambda: pin.computeGeneralizedGravity(pin_model, data_pin, q_pin)),
        ("aba", lambda: core.aba(model, q, v, a, base_pose=pose),
         lambda: pin.aba(pin_model, data_pin, q_pin, v_pin, tau_pin)),
        ("mass_matrix", lambda: core.mass_matrix(model, q, base_pose=pose),
         lambda: pin.crba(pin_model, data_pin, q_pin)),
        ("coriolis_matrix", lambda: core.coriolis_matrix(model, q, v, base_pose=pose),
         lambda: pin.computeCoriolisMatrix(pin_model, data_pin, q_pin, v_pin)),
        ("hybrid (half given)", lambda: core.hybrid(model, q, v, a, mask, base_pose=pose), None),
        ("rnea, wrench on 1 link", lambda: core.rnea(model, q, v, a, base_pose=pose, f_ext=f_ext),
         lambda: pin.rnea(pin_model, data_pin, q_pin, v_pin, a_pin, fext_pin)),
    ]
    mask = np.arange(model.nv) % 2 == 0
    data = core.Data(model)  # the prepared path: checks once, writes into data's arrays (docs/api.md)
    cases += [
        ("Data.rnea", lambda: data.rnea(q, v, a, base_pose=pose),
         lambda: pin.rnea(pin_model, data_pin, q_pin, v_pin, a_pin)),
        ("Data.gravity", lambda: data.gravity(q, base_pose=pose),
         lambda: pin.computeGeneralizedGravity(pin_model, data_pin, q_pin)),
        ("Data.aba", lambda: data.aba(q, v, a, base_pose=pose),
         lambda: pin.aba(pin_model, data_pin, q_pin, v_pin, tau_pin)),
        ("Data.mass_matrix", lambda: data.mass_matrix(q, base_pose=pose),
         lambda: pin.crba(pin_model, data_pin, q_pin)),
        ("Data.coriolis_matrix", lambda: data.coriolis_matrix(q, v, base_pose=pose),
         lambda: pin.computeCoriolisMatrix(pin_model, data_pin, q_pin, v_pin)),
        ("Data.rnea, wrench", lambda: data.rnea(q, v, a, base_pose=pose, f_ext=f_ext),
         lambda: pin.rnea(pin_model, data_pin, q_pin, v_pin, a_pin, fext_pin)),
    ]
    for name, ours, theirs in cases:
        if theirs is None:
            print(row(name, per_call([ours])[0], None))
            continue
        try:
            theirs()
        except RuntimeError as exc:  # Pinocchio's aba refuses some models (mimic joints)
            print(f"  {name}: Pinocchio refused ({exc})")
            print(row(name, per_call([ours])[0], None))
            continue
        print(row(name, *per_call([ours, theirs])))

    Q = rng.uniform(-1, 1, (batch, model.n))
    V, A = rng.normal(size=(2, batch, model.nv))
    poses = core.pose_from_position_quaternion(rng.normal(size=(batch, 3)), rng.normal(size=(batch, 4))) \
        if floating else None
    Q_pin, V_pin = (np.asfortranarray(x.T) for x in conversions.to_pinocchio(model, Q, V, base_pose=poses,
                                                                              joint_order=order))
    A_pin = np.asfortranarray(rng.normal(size=(pin_model.nv, batch)))
    TAU_pin = np.asfortranarray(np.empty((pin_model.nv, batch)))
    pool = pin.ModelPool(pin_model, threads)
    tau_pin_batch = np.asfortranarray(pin.rneaInParallel(threads, pool, Q_pin, V_pin, A_pin))
    print(f"  batch of {batch}, per sample (Pinocchio {threads} threads)")
    batch_cases = [
        ("rnea", lambda: core.rnea(model, Q, V, A, base_pose=poses),
         lambda: pin.rneaInParallel(threads, pool, Q_pin, V_pin, A_pin, TAU_pin)),
        ("aba", lambda: core.aba(model, Q, V, A, base_pose=poses),
         lambda: pin.abaInParallel(threads, pool, Q_pin, V_pin, tau_pin_batch, TAU_pin)),
        ("gravity", lambda: core.gravity(model, Q, base_pose=poses), None),
        ("mass_matrix", lambda: core.mass_matrix(model, Q), None),
        ("coriolis_matrix", lambda: core.coriolis_matrix(model, Q, V), None),
    ]
    for name, ours, theirs in batch_cases:
        times = best_of([ours] + ([theirs] if theirs is not None else []))
        print(row(name, *(t / batch for t in times), *([None] if theirs is None else [])))
    # The same batches on one thread each: with the rows above, how each side scales with threads.
    print(f"  batch of {batch}, per sample, 1 thread each")
    threads_before = numba.config.NUMBA_NUM_THREADS
    numba.config.NUMBA_NUM_THREADS = 1  # fast.threads.run_batch reads it at every call
    try:
        for name, ours, theirs in [
            ("rnea", batch_cases[0][1], lambda: pin.rneaInParallel(1, pool, Q_pin, V_pin, A_pin, TAU_pin)),
            ("aba", batch_cases[1][1], lambda: pin.abaInParallel(1, pool, Q_pin, V_pin, tau_pin_batch, TAU_pin)),
        ]:
            print(row(name, *(t / batch for t in best_of([ours, theirs], rounds=10))))
    finally:
        numba.config.NUMBA_NUM_THREADS = threads_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    t0 = time.perf_counter()
    core.rnea(core.load_urdf(str(ROBOTS / ROBOT_FILES["panda"][0])), np.zeros(8), np.zeros(8), np.zeros(8))
    print(f"first call (JIT compile or numba cache load): {time.perf_counter() - t0:.1f} s")
    for label in ROBOT_FILES:
        bench_robot(label, args.batch, args.threads)


if __name__ == "__main__":
    main()
