"""Benchmark of liedyn_ros.core.derivatives.

1. First-order derivatives per call (public API, fast path) against Pinocchio's
   computeRNEADerivatives / computeABADerivatives on the Panda arm and Solo12 (goal: <= 2x).
2. Time derivatives of inverse and forward dynamics as the order grows (0..5) and as the number of
   bodies grows (chains of 5..40), against CasADi automatic differentiation: the 0-th order
   inverse dynamics of the same chain written in CasADi SX along q(t) = sum_k q^(k) t^k / k!, and
   differentiated in t by repeated jtimes (built once, timed per evaluation, like Ali et al.).

Run: /work/venv/bin/python benchmarks/bench_derivatives.py [--quick]
Prints tables and saves benchmarks/time_derivatives.png.
"""
from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path
from typing import Callable

import casadi as ca
import numpy as np
import pinocchio as pin

from liedyn_ros import core
from liedyn_ros.robot_data import robots_dir

ROBOTS = robots_dir()
OUT = Path(__file__).with_name("time_derivatives.png")


def per_call(f: Callable[[], object], min_time: float = 0.3, rounds: int = 20) -> float:
    """Best of `rounds` rounds of mean seconds per call: many short rounds, so that the best one
    misses the other processes of a shared machine."""
    f()
    n, best = 1, math.inf
    while True:
        t = time.perf_counter()
        for _ in range(n):
            f()
        if time.perf_counter() - t > min_time / rounds:
            break
        n *= 2
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t) / n)
    return best


# ---------------------------------------------------------------------------- first order


def first_order_table() -> None:
    panda = re.sub(r"<mimic[^>]*/>", "", (ROBOTS / "panda_description/urdf/panda.urdf").read_text())
    panda = panda.replace('type="prismatic"', 'type="fixed"')
    rows = []
    for name, xml, floating in (("panda arm (7)", panda, False),
                                ("solo12 (6+12)", (ROBOTS / "solo_description/robots/solo12.urdf").read_text(), True)):
        model = core.load_urdf(xml, floating_base=floating)
        pm = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromXML(xml)
        pd = pm.createData()
        rng = np.random.default_rng(0)
        q, v, a = rng.uniform(-1, 1, model.n), rng.normal(size=model.nv), rng.normal(size=model.nv)
        T = np.eye(4) if floating else None
        order = list(pm.names)[2:] if floating else list(pm.names)[1:]
        qp, vp = core.to_pinocchio(model, q, v, base_pose=T, joint_order=order)
        _, ap = core.to_pinocchio(model, q, a, base_pose=T, joint_order=order)
        t_ours = per_call(lambda: core.rnea_derivatives(model, q, v, a, base_pose=T))
        t_pin = per_call(lambda: pin.computeRNEADerivatives(pm, pd, qp, vp, ap))
        t_ref = per_call(lambda: core.rnea_derivatives(model, q, v, a, base_pose=T, fast=False), 0.1)
        rows.append((name, "rnea_derivatives", t_ours, t_pin, t_ref))
        t_ours = per_call(lambda: core.aba_derivatives(model, q, v, a, base_pose=T))
        t_pin = per_call(lambda: pin.computeABADerivatives(pm, pd, qp, vp, ap))
        t_ref = per_call(lambda: core.aba_derivatives(model, q, v, a, base_pose=T, fast=False), 0.1)
        rows.append((name, "aba_derivatives", t_ours, t_pin, t_ref))
    print("\nFirst-order derivatives, microseconds per call (one sample, public API incl. input checks)")
    print(f"{'robot':16s} {'function':18s} {'ours (fast)':>12s} {'pinocchio':>10s} {'ratio':>6s} {'reference':>10s}")
    for name, fn, t_ours, t_pin, t_ref in rows:
        print(f"{name:16s} {fn:18s} {t_ours * 1e6:12.1f} {t_pin * 1e6:10.1f} {t_ours / t_pin:6.1f} {t_ref * 1e6:10.0f}")


# ----------------------------------------------------------------------- time derivatives


def chain_urdf(n: int) -> str:
    """A chain of n revolute links with alternating axes and offset inertias."""
    links = ['<link name="l0"/>']
    joints = []
    for i in range(1, n + 1):
        links.append(f'<link name="l{i}"><inertial><origin xyz="0.05 0.01 0.1"/><mass value="{1 + 0.1 * i}"/>'
                     '<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.01"/></inertial></link>')
        axis = ("0 0 1", "0 1 0", "1 0 0")[i % 3]
        joints.append(f'<joint name="j{i}" type="continuous"><parent link="l{i - 1}"/><child link="l{i}"/>'
                      f'<origin xyz="0.02 0.01 0.2" rpy="0.1 0.2 0.3"/><axis xyz="{axis}"/></joint>')
    return f'<robot name="chain{n}">' + "".join(links + joints) + "</robot>"


def casadi_id_derivatives(model: core.Model, r: int) -> ca.Function:
    """f(t, p) -> [tau, tau', ..., tau^(r)] at t for q(t) = sum_k p_k t^k / k! (jtimes r times)."""
    n = model.n
    t = ca.SX.sym("t")
    p = ca.SX.sym("p", n, r + 3)  # q, qd, ..., q^(r+2)
    q = sum(p[:, k] * t ** k / math.factorial(k) for k in range(r + 3))
    qd = ca.jtimes(q, t, ca.SX(1))
    qdd = ca.jtimes(qd, t, ca.SX(1))
    tau = _casadi_rnea(model, q, qd, qdd)
    outs = [tau]
    for _ in range(r):
        outs.append(ca.jtimes(outs[-1], t, ca.SX(1)))
    return ca.Function("id_derivs", [t, p], [ca.horzcat(*outs)])


def _casadi_rnea(model: core.Model, q, qd, qdd):
    """Newton-Euler in CasADi SX for a fixed-base chain of revolute joints (the same equations)."""
    def hat3(w):
        return ca.vertcat(ca.horzcat(0, -w[2], w[1]), ca.horzcat(w[2], 0, -w[0]), ca.horzcat(-w[1], w[0], 0))

    def ad6(V):
        W, U = hat3(V[:3]), hat3(V[3:])
        return ca.vertcat(ca.horzcat(W, ca.SX.zeros(3, 3)), ca.horzcat(U, W))

    V = ca.SX.zeros(6)
    A = ca.vertcat(ca.SX.zeros(3), -ca.SX(model.gravity))
    Xs, Vs, As = [], [], []
    for i in range(model.nb):
        w = model.S[i][:3]
        W = ca.SX(hat3(ca.DM(w)))
        Rj = ca.SX.eye(3) + ca.sin(q[i]) * W + (1 - ca.cos(q[i])) * (W @ W)
        R = ca.SX(model.M[i][:3, :3]) @ Rj
        pvec = ca.SX(model.M[i][:3, 3])
        Rt = R.T
        X = ca.vertcat(ca.horzcat(Rt, ca.SX.zeros(3, 3)), ca.horzcat(-Rt @ hat3(pvec), Rt))
        S = ca.SX(model.S[i])
        V = X @ V + S * qd[i]
        A = X @ A + ad6(V) @ S * qd[i] + S * qdd[i]
        Xs.append(X)
        Vs.append(V)
        As.append(A)
    tau = [None] * model.nb
    F = ca.SX.zeros(6)
    for i in reversed(range(model.nb)):
        J = ca.SX(model.J[i])
        F = J @ As[i] - ad6(Vs[i]).T @ (J @ Vs[i]) + (Xs[i + 1].T @ F if i + 1 < model.nb else 0)
        tau[i] = ca.dot(ca.SX(model.S[i]), F)
    return ca.vertcat(*tau)


def time_derivative_tables(orders: list[int], bodies: list[int], fixed_order: int, casadi_max_bodies: int) -> dict:
    """Per-call times vs order (chain of 10) and vs bodies (order fixed_order), with growth ratios.

    Ali et al. predict quadratic growth in the order (order k sums k + 1 Leibniz terms, so orders
    0..r cost (r + 1)(r + 2) / 2 term evaluations) and linear growth in the bodies; the ratio columns
    put our measured growth next to those counts.
    """
    res: dict = {"orders": orders, "bodies": bodies, "fixed_order": fixed_order}
    rng = np.random.default_rng(1)
    model = core.load_urdf(chain_urdf(10))
    res["by_order"] = [(r,) + _time_one(model, r, rng, casadi=True) for r in orders]
    _growth_table("Time derivatives vs order r (chain of 10 bodies), microseconds per call; x = ratio to r = 0",
                  "r", "(r+1)(r+2)/2", res["by_order"], lambda r: (r + 1) * (r + 2) // 2)
    res["by_bodies"] = [(nb_,) + _time_one(core.load_urdf(chain_urdf(nb_)), fixed_order, rng,
                                           casadi=nb_ <= casadi_max_bodies) for nb_ in bodies]
    _growth_table(f"Time derivatives vs number of bodies (order r = {fixed_order}), microseconds per call; "
                  f"x = ratio to nb = {bodies[0]}", "nb", f"nb/{bodies[0]}", res["by_bodies"],
                  lambda nb_: nb_ / bodies[0])
    return res


def _growth_table(title: str, key: str, model_name: str, rows: list, model_growth: Callable) -> None:
    """Rows (key, rnea_time, aba_time, casadi, casadi build) with growth against the first row and a model count."""
    print(f"\n{title}")
    print(f"{key:>3s} {'rnea_time':>10s} {'x':>5s} {'aba_time':>9s} {'x':>5s} {'casadi':>8s} {'x':>5s} "
          f"{model_name:>13s} {'ours/casadi':>12s} {'casadi build s':>15s}")
    t0 = rows[0]
    for k, t_id, t_fd, t_ca, t_build in rows:
        print(f"{k:3d} {t_id * 1e6:10.1f} {t_id / t0[1]:5.1f} {t_fd * 1e6:9.1f} {t_fd / t0[2]:5.1f} "
              f"{t_ca * 1e6:8.1f} {t_ca / t0[3]:5.1f} {model_growth(k):13.1f} {t_id / t_ca:12.2f} {t_build:15.2f}")


def _time_one(model: core.Model, r: int, rng: np.random.Generator, casadi: bool) -> tuple[float, float, float, float]:
    n = model.n
    P = rng.normal(size=(n, r + 3)) * 0.5
    q, v_derivs = P[:, 0], [P[:, k + 1] for k in range(r + 2)]
    t_id = per_call(lambda: core.rnea_time_derivatives(model, q, v_derivs), 0.2)
    taus = core.rnea_time_derivatives(model, q, v_derivs)
    t_fd = per_call(lambda: core.aba_time_derivatives(model, q, v_derivs[0], taus), 0.2)
    if not casadi:
        return t_id, t_fd, float("nan"), float("nan")
    t0 = time.perf_counter()
    f = casadi_id_derivatives(model, r)
    t_build = time.perf_counter() - t0
    out = np.array(f(0.0, P))
    check = np.abs(out - np.stack(taus, 1)).max() / np.abs(out).max()
    assert check < 1e-9, f"CasADi and ours disagree: {check}"
    t_ca = per_call(lambda: f(0.0, P), 0.2)
    return t_id, t_fd, t_ca, t_build


def plot(res: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    o = np.array(res["by_order"], dtype=float)
    for col, label in ((1, "rnea_time_derivatives (ours)"), (2, "aba_time_derivatives (ours)"),
                       (3, "CasADi jtimes on ID")):
        ax1.semilogy(o[:, 0], o[:, col] * 1e6, "o-", label=label)
    ax1.set_xlabel("derivative order r")
    ax1.set_ylabel("microseconds per call")
    ax1.set_title("chain of 10 bodies: per call vs order")
    ax1.legend()
    b = np.array(res["by_bodies"], dtype=float)
    for col, label in ((1, "rnea_time_derivatives (ours)"), (2, "aba_time_derivatives (ours)"),
                       (3, "CasADi jtimes on ID")):
        ax2.semilogy(b[:, 0], b[:, col] * 1e6, "o-", label=label)
    ax2.set_xlabel("number of bodies")
    ax2.set_title(f"order r = {res['fixed_order']}: per call vs bodies")
    ax2.set_ylabel("microseconds per call")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"\nsaved {OUT}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes")
    args = parser.parse_args()
    first_order_table()
    if args.quick:
        res = time_derivative_tables([0, 1, 2, 3], [5, 10, 20], 2, 10)
    else:
        res = time_derivative_tables([0, 1, 2, 3, 4, 5], [5, 10, 20, 30, 40], 2, 40)
    plot(res)


if __name__ == "__main__":
    main()
