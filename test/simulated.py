"""Recordings simulated by MuJoCo (an independent simulator) from a URDF with known friction and payload.

MuJoCo reads the URDF itself (visual and collision geometry stripped): `<dynamics damping
friction>` become its joint damping and friction loss (dry friction, a constraint force), a
payload is a link welded to the flange by a fixed joint. The arm follows a sum of sines by a
computed-torque controller; the recorded effort is the applied joint torque, which is what the
motors deliver against inertia, gravity, damping and friction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass
class Recording:
    t: np.ndarray  # (N,)
    q: np.ndarray  # (N, n)
    qd: np.ndarray
    qdd: np.ndarray  # MuJoCo's accelerations
    effort: np.ndarray
    joint_names: tuple[str, ...]


def arm_urdf(urdf: str, damping: dict[str, float], friction: dict[str, float],
             payload: tuple[str, float, np.ndarray, np.ndarray] | None = None) -> str:
    """The URDF without geometry, with joint dynamics and an optional payload (link, mass, com, I_com)."""
    urdf = re.sub(r"<(visual|collision)\b.*?</\1>", "", urdf, flags=re.S)
    urdf = re.sub(r"<dynamics[^>]*/>", "", urdf)
    for joint in damping:
        urdf = re.sub(rf'(<joint name="{joint}"[^>]*>)',
                      rf'\1<dynamics damping="{damping[joint]}" friction="{friction[joint]}"/>', urdf)
    if payload is not None:
        link, mass, com, I = payload
        urdf = urdf.replace("</robot>", f"""
  <link name="sim_payload"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="{mass}"/>
    <inertia ixx="{I[0, 0]}" ixy="{I[0, 1]}" ixz="{I[0, 2]}" iyy="{I[1, 1]}" iyz="{I[1, 2]}" izz="{I[2, 2]}"/>
  </inertial></link>
  <joint name="sim_payload_weld" type="fixed"><parent link="{link}"/><child link="sim_payload"/></joint>
</robot>""")
    return urdf


def simulate(urdf: str, joint_names: tuple[str, ...], model_for_control, *, seconds: float, rate: float = 500.0,
             moving: tuple[str, ...] | None = None, seed: int = 0,
             compensation: tuple[np.ndarray, np.ndarray] | None = None) -> Recording:
    """Track q_ref(t) = q_mid + sum of sines (on `moving` joints only, the others held) for `seconds`.

    model_for_control: a liedyn model whose rnea gives the controller's feedforward (any model:
    the recorded torque is whatever MuJoCo needed, the controller only keeps the arm on track).
    compensation: (Coulomb, viscous) friction the controller adds along the reference velocity, so
    that light joints with much friction track instead of sticking and slipping.
    """
    from liedyn_ros.core import rnea

    mj = mujoco.MjModel.from_xml_string(urdf)
    mj.opt.timestep = 0.001
    mj.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    # Friction loss is a soft constraint: by default a light joint needs tenths of a rad/s before
    # the friction force reaches its level. A nearly hard one (impedance 0.9999) is dry friction.
    mj.dof_solimp[:, :2] = 0.9999
    mj.dof_solref[:, 0] = 0.002
    data = mujoco.MjData(mj)
    qadr = np.array([mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in joint_names])
    dadr = np.array([mj.jnt_dofadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in joint_names])
    n = len(joint_names)
    rng = np.random.default_rng(seed)
    lo, hi = model_for_control.lower, model_for_control.upper
    mid = np.where(np.isfinite(lo + hi), (lo + hi) / 2, 0.0)
    span = np.where(np.isfinite(hi - lo), (hi - lo) / 2, np.pi)
    on = np.array([moving is None or j in moving for j in joint_names], dtype=float)
    freq = rng.uniform(0.1, 0.6, (n, 3))
    amp = rng.uniform(0.2, 0.5, (n, 3)) * span[:, None] / 3 * on[:, None]
    phase = rng.uniform(0, 2 * np.pi, (n, 3))

    def reference(t: float):
        w = 2 * np.pi * freq
        s = np.sin(w * t + phase)
        c = np.cos(w * t + phase)
        return (mid + (amp * s).sum(1), (amp * w * c).sum(1), -(amp * w * w * s).sum(1))

    q0, _, _ = reference(0.0)
    data.qpos[qadr] = q0
    data.qvel[dadr] = reference(0.0)[1]
    mujoco.mj_forward(mj, data)
    steps = int(round(seconds / mj.opt.timestep))
    every = int(round(1.0 / (rate * mj.opt.timestep)))
    out = {k: [] for k in ("t", "q", "qd", "qdd", "effort")}
    kp, kd = 400.0, 40.0
    for step in range(steps):
        t = step * mj.opt.timestep
        qr, vr, ar = reference(t)
        q, qd = data.qpos[qadr].copy(), data.qvel[dadr].copy()
        tau = rnea(model_for_control, q, qd, ar + kp * (qr - q) + kd * (vr - qd))
        if compensation is not None:
            tau = tau + compensation[0] * np.tanh(vr / 0.05) + compensation[1] * vr
        data.qfrc_applied[dadr] = tau
        if step % every == 0:  # the state, the torque applied and the acceleration it gives
            mujoco.mj_forward(mj, data)
            out["t"].append(t)
            out["q"].append(q)
            out["qd"].append(qd)
            out["qdd"].append(data.qacc[dadr].copy())
            out["effort"].append(tau)
        mujoco.mj_step(mj, data)
    arr = {k: np.array(v) for k, v in out.items()}
    return Recording(arr["t"], arr["q"], arr["qd"], arr["qdd"], arr["effort"], tuple(joint_names))
