"""A Unitree Go2 on the ground, simulated by MuJoCo (independently of liedyn_ros): the recordings of
the contact-aware observer's tests and of benchmarks/bench_legged_observer.py.

The MuJoCo model is example-robot-data's go2.urdf (its inertias; meshes left out) with a free base,
a small sphere at each foot (the URDF's <link>_foot origin, radius FOOT_RADIUS), a floor and a
motor per joint. Joint PD control around a standing posture; a trot in place lifts the diagonal pairs in turn; pushes on the trunk are MuJoCo's xfrc_applied (a force at
the trunk's centre of mass, world axes). Recorded at every step (TIMESTEP): the applied efforts,
the base pose and body twist, the feet's contact state (a contact with the floor pushing) and
MuJoCo's accelerations.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import mujoco
import numpy as np

from liedyn_ros.robot_data import robots_dir

URDF = robots_dir() / "go2_description/urdf/go2.urdf"
LEGS = ("FL", "FR", "RL", "RR")
FEET = tuple(f"{leg}_foot" for leg in LEGS)
FOOT_RADIUS = 0.001
FOOT_OFFSET = -0.213  # the foot's origin below the calf joint (go2.urdf's <leg>_foot_joint)
TIMESTEP = 0.0005
KP, KD = 80.0, 2.0
STAND = {"hip": 0.0, "thigh": 0.8, "calf": -1.6}
SWING = {"thigh": 0.35, "calf": -0.7}  # added at mid-swing


@dataclass(frozen=True)
class Push:
    """A force on the trunk's centre of mass [N], world axes, from ``start`` for ``duration`` [s]."""

    start: float
    duration: float
    force: tuple[float, float, float]


@dataclass
class Recording:
    """Per step: t (N,); q (N, 12) joints in ``names`` order; v (N, 18) = [body twist (omega, v);
    qd]; a (N, 18) its derivative (MuJoCo's, the same convention); pose (N, 4, 4) T_world_base;
    effort (N, 12) applied torques; contact (N, 4) feet pushing on the floor (FEET order) and
    normal (N, 4) their normal forces [N] and force (N, 4, 3) the floor's force on each, world axes;
    push (N, 6) the trunk push as a base-frame wrench (m, f) about the base origin, J^T F."""

    names: tuple[str, ...]
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    pose: np.ndarray
    effort: np.ndarray
    contact: np.ndarray
    normal: np.ndarray
    force: np.ndarray
    push: np.ndarray


def mujoco_model() -> mujoco.MjModel:
    text = URDF.read_text()
    text = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", text, flags=re.S)
    text = re.sub(r"(<robot[^>]*>)", r'\1<mujoco><compiler discardvisual="true" fusestatic="true" '
                  r'balanceinertia="false" angle="radian"/></mujoco>', text, count=1)
    spec = mujoco.MjSpec.from_string(text)
    spec.option.timestep = TIMESTEP
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    floor = spec.worldbody.add_geom()
    floor.type, floor.size, floor.name = mujoco.mjtGeom.mjGEOM_PLANE, [0, 0, 1], "floor"
    floor.friction = [1.0, 0.005, 0.0001]
    spec.body("base").add_freejoint()
    for leg in LEGS:
        foot = spec.body(f"{leg}_calf").add_geom()
        foot.name, foot.type, foot.size = f"{leg}_foot", mujoco.mjtGeom.mjGEOM_SPHERE, [FOOT_RADIUS, 0, 0]
        foot.pos, foot.mass = [0, 0, FOOT_OFFSET], 0.0
        foot.condim = 3
        foot.solref = [0.004, 1.0]
    for joint in spec.joints:
        if joint.type == mujoco.mjtJoint.mjJNT_HINGE:
            motor = spec.add_actuator()
            motor.target, motor.trntype = joint.name, mujoco.mjtTrn.mjTRN_JOINT
            motor.ctrllimited = False
    return spec.compile()


def _posture(m: mujoco.MjModel, names: tuple[str, ...], swing: dict[str, float]) -> np.ndarray:
    out = np.empty(len(names))
    for i, name in enumerate(names):
        leg, part = name.split("_")[:2]
        out[i] = STAND[part] + swing.get(leg, 0.0) * SWING.get(part, 0.0)
    return out


def simulate(duration: float, pushes: tuple[Push, ...] = (), trot: tuple[float, float] | None = None,
             period: float = 0.5) -> Recording:
    """Stand for ``duration`` [s]; trot in place between ``trot`` = (start, end) [s] (diagonal pairs
    FL+RR, then FR+RL, each swinging for half of ``period``); ``pushes`` on the trunk."""
    m = mujoco_model()
    d = mujoco.MjData(m)
    hinge = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    names = tuple(m.joint(j).name for j in hinge)
    qa, va = m.jnt_qposadr[hinge], m.jnt_dofadr[hinge]
    stand = _posture(m, names, {})
    d.qpos[:] = 0.0
    d.qpos[2], d.qpos[3] = 0.5, 1.0
    d.qpos[qa] = stand
    mujoco.mj_kinematics(m, d)
    feet = [m.geom(f).id for f in FEET]
    d.qpos[2] -= min(d.geom_xpos[g][2] for g in feet) - FOOT_RADIUS + 1e-4
    base, floor = m.body("base").id, m.geom("floor").id
    steps = int(round(duration / TIMESTEP))
    fields = ("t", "q", "v", "a", "pose", "effort", "contact", "normal", "force", "push")
    rec: dict[str, list] = {k: [] for k in fields}
    force = np.zeros(6)
    for _ in range(steps):
        t = d.time
        swing = {}
        if trot is not None and trot[0] <= t < trot[1]:
            phase = ((t - trot[0]) % period) / period
            lift = np.sin(np.pi * (2 * phase % 1.0))
            swing = dict.fromkeys(("FL", "RR") if phase < 0.5 else ("FR", "RL"), lift)
        target = _posture(m, names, swing)
        d.ctrl[:] = KP * (target - d.qpos[qa]) - KD * d.qvel[va]
        force[:] = 0.0
        for p in pushes:
            if p.start <= t < p.start + p.duration:
                force[:3] += p.force
        d.xfrc_applied[base] = force
        mujoco.mj_forward(m, d)
        R = d.xmat[base].reshape(3, 3)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, d.xpos[base]
        normal, world = np.zeros(len(FEET)), np.zeros((len(FEET), 3))
        f6 = np.zeros(6)
        for k in range(d.ncon):
            pair = {d.contact[k].geom1, d.contact[k].geom2}
            for i, g in enumerate(feet):
                if pair == {g, floor}:
                    mujoco.mj_contactForce(m, d, k, f6)
                    normal[i] += f6[0]
                    # contact frame rows: the normal (from geom1 to geom2), two tangents
                    f = d.contact[k].frame.reshape(3, 3).T @ f6[:3]
                    world[i] += f if d.contact[k].geom2 == g else -f
        # J^T F of the push on the base: the force at the trunk's centre of mass, base axes
        f_b = R.T @ force[:3]
        c_b = R.T @ (d.xipos[base] - d.xpos[base])
        rec["push"].append(np.concatenate((np.cross(c_b, f_b), f_b)))
        rec["t"].append(t)
        rec["q"].append(d.qpos[qa].copy())
        rec["v"].append(np.concatenate((d.qvel[3:6], R.T @ d.qvel[0:3], d.qvel[va])))
        rec["pose"].append(T)
        rec["effort"].append(d.qfrc_actuator[va].copy())
        rec["contact"].append(normal > 0.0)
        rec["normal"].append(normal)
        rec["force"].append(world)
        # MuJoCo's qacc: linear part the derivative of the world velocity; the body twist's
        # derivative is R^T (dv_w/dt) - omega x v_b
        acc = d.qacc
        w, vb = d.qvel[3:6], R.T @ d.qvel[0:3]
        rec["a"].append(np.concatenate((acc[3:6], R.T @ acc[0:3] - np.cross(w, vb), acc[va])))
        mujoco.mj_step(m, d)
    return Recording(names, *(np.array(rec[k]) for k in fields))
