"""An arm whose driver publishes motor currents, simulated by MuJoCo (an independent simulator).

The UR5 of example-robot-data, with MuJoCo's own drive features: each motor is a MuJoCo
actuator whose control is its current, `gear` its torque constant; shoulder and elbow motors
act on their joint through a gear ratio, the two wrist motors on wrist_2 and wrist_3 together
through fixed tendons (a differential: motor a turns q5 + q6, motor b q5 - q6, each through the
wrist's gear ratio); `armature` is each joint's reflected rotor inertia, `frictionloss` and
`damping` its Coulomb and viscous friction, and a payload is welded to the last link. The
recording holds the currents the controller commanded, what such a driver publishes: MuJoCo
alone turns them into joint torques.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass

import mujoco
import numpy as np

from liedyn_ros import core
from robots import urdf_text
from simulated import Recording, arm_urdf

LINK = "wrist_3_link"
N = (100.0, 100.0, 100.0, 80.0, 50.0, 50.0)  # gear ratios; the wrist's pair is coupled
K = (0.11, 0.12, 0.10, 0.07, 0.05, 0.05)  # torque constants [N m / A], the simulator's
K_DATASHEET = (0.10, 0.13, 0.105, 0.065, 0.053, 0.047)  # what --params says: 5-9% off
ARMATURE = (0.40, 0.40, 0.20, 0.04, 0.03, 0.03)  # kg m^2, joint side
COULOMB = (3.0, 3.0, 2.0, 1.0, 0.8, 0.8)  # N m, MuJoCo's frictionloss
VISCOUS = (1.5, 1.5, 1.0, 0.4, 0.3, 0.3)  # N m s / rad, MuJoCo's damping
MASS, COM, I_COM = 1.2, np.array([0.01, 0.08, 0.02]), np.diag([0.003, 0.002, 0.004])
# motor angles theta = G q: the wrist's motors a and b drive q5 + q6 and q5 - q6
G = np.diag(N)
G[4:, 4:] = [[N[4], N[5]], [N[4], -N[5]]]


@dataclass(frozen=True)
class Arm:
    model: object  # the URDF's liedyn model (no payload, no drive)
    mjcf: str  # MuJoCo's model: the URDF with payload, friction, tendons and motors

    def drive(self, torque_constant=K, armature=0.0) -> core.identification.Drive:
        return core.identification.Drive.of(6, transmission=G, torque_constant=torque_constant, armature=armature)

    def parameters(self, torque_constant=K_DATASHEET) -> dict:
        """The node's drive parameters as a --params file gives them (the datasheet's constants)."""
        return {"effort_transmission": G.reshape(-1).tolist(), "effort_torque_constant": list(torque_constant)}


def ur5_arm() -> Arm:
    xml = urdf_text("ur5")
    model = core.load_urdf(xml)
    names = model.joint_names
    with_payload = arm_urdf(xml, dict(zip(names, VISCOUS)), dict(zip(names, COULOMB)), (LINK, MASS, COM, I_COM))
    mj = mujoco.MjModel.from_xml_string(with_payload)
    with tempfile.TemporaryDirectory() as tmp:  # MuJoCo's own MJCF of the URDF, which takes tendons and motors
        mujoco.mj_saveLastXML(f"{tmp}/arm.xml", mj)
        mjcf = re.sub(r'\s*actuatorfrcrange="[^"]*"', "", open(f"{tmp}/arm.xml").read())
    actuators = [f'<motor name="m{j}" joint="{names[j]}" gear="{N[j] * K[j]!r}"/>' for j in range(4)]
    actuators += [f'<motor name="m{j}" tendon="w{j}" gear="{K[j]!r}"/>' for j in (4, 5)]
    tendons = [f'<fixed name="w{j}"><joint joint="{names[4]}" coef="{float(G[j, 4])!r}"/>'
               f'<joint joint="{names[5]}" coef="{float(G[j, 5])!r}"/></fixed>' for j in (4, 5)]
    mjcf = mjcf.replace("</mujoco>", f"<tendon>{''.join(tendons)}</tendon>"
                                     f"<actuator>{''.join(actuators)}</actuator></mujoco>")
    return Arm(model, mjcf)


def simulate(arm: Arm, *, seconds: float, seed: int, moving=None, rate: float = 500.0) -> Recording:
    """Track a sum of sines on the `moving` joints (all by default; the others held) with currents.

    The controller computes the joint torque it wants (rnea of the URDF, the drive's rotor inertia
    and friction along the reference, PD) and commands the currents the true drive needs for it;
    `effort` holds those currents, `qdd` MuJoCo's accelerations.
    """
    from liedyn_ros.core import rnea

    mj = mujoco.MjModel.from_xml_string(arm.mjcf)
    mj.opt.timestep = 0.001
    mj.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    names = arm.model.joint_names
    dof = np.array([mj.jnt_dofadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in names])
    qadr = np.array([mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] for j in names])
    mj.dof_armature[dof] = ARMATURE
    mj.dof_solimp[:, :2] = 0.9999  # friction loss as dry friction (test/simulated.py)
    mj.dof_solref[:, 0] = 0.002
    data = mujoco.MjData(mj)
    drive = arm.drive()
    rng = np.random.default_rng(seed)
    on = np.array([moving is None or j in moving for j in names], dtype=float)
    freq = rng.uniform(0.2, 0.8, (6, 3))
    amp = rng.uniform(0.2, 0.5, (6, 3)) * on[:, None]
    phase = rng.uniform(0, 2 * np.pi, (6, 3))
    mid = np.array([0.0, -1.2, 1.2, -1.2, 1.0, 0.0])

    def reference(t: float):
        w = 2 * np.pi * freq
        s, c = np.sin(w * t + phase), np.cos(w * t + phase)
        return mid + (amp * s).sum(1), (amp * w * c).sum(1), -(amp * w * w * s).sum(1)

    q0, v0, _ = reference(0.0)
    data.qpos[qadr], data.qvel[dof] = q0, v0
    every = int(round(1.0 / (rate * mj.opt.timestep)))
    out = {k: [] for k in ("t", "q", "qd", "qdd", "effort")}
    armature, coulomb, viscous = map(np.array, (ARMATURE, COULOMB, VISCOUS))
    for step in range(int(round(seconds / mj.opt.timestep))):
        t = step * mj.opt.timestep
        qr, vr, ar = reference(t)
        q, qd = data.qpos[qadr].copy(), data.qvel[dof].copy()
        acc = ar + 400.0 * (qr - q) + 40.0 * (vr - qd)
        tau = rnea(arm.model, q, qd, acc) + armature * acc + coulomb * np.tanh(vr / 0.05) + viscous * vr
        data.ctrl[:] = drive.effort(tau)
        if step % every == 0:
            mujoco.mj_forward(mj, data)
            out["t"].append(t)
            out["q"].append(q)
            out["qd"].append(qd)
            out["qdd"].append(data.qacc[dof].copy())
            out["effort"].append(data.ctrl.copy())
        mujoco.mj_step(mj, data)
    arr = {k: np.array(v) for k, v in out.items()}
    return Recording(arr["t"], arr["q"], arr["qd"], arr["qdd"], arr["effort"], tuple(names))
