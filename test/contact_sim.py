"""A Solo12 on the ground simulated by Pinocchio, independently of liedyn_ros: the recordings of
the contact tests.

Contact dynamics by Pinocchio's own terms (crba, nonLinearEffects, the feet's frame Jacobians
and classical accelerations): per step the KKT system

    [ M   -J^T ] [ a ]   [ S^T tau - h                    ]
    [ J    0   ] [ f ] = [ -Jdot v - kd J v - kp (p - p0) ]

(f: the ground's forces on the feet, world axes; the small Baumgarte terms only stop drift) and
semi-implicit Euler at 10 kHz, recorded at 1 kHz. Joint PD control around a standing posture that sways; phase
"stand": four feet down, then "trot": FL and HR down while FR and HL swing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
STANCE_TROT = (True, False, False, True)
STAND = {"HAA": 0.1, "HFE": 0.8, "KFE": -1.6}  # per leg, signs below
RATE = 1000
SUBSTEPS = 10
DT = 1.0 / RATE


@dataclass
class Recording:
    """Per sample: t (N,), q_pin (N, 19), v_pin (N, 18), tau (N, 12) in Pinocchio's joint order,
    the contact flags (N, 4) and forces (N, 4, 3) in each foot's link axes; joint names."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    active: np.ndarray
    force_link: np.ndarray
    joint_names: list[str]
    mass: float


def standing_posture(model: pin.Model) -> np.ndarray:
    q = pin.neutral(model)
    for name in model.names[2:]:
        leg, kind = name.split("_")
        sign_side = 1.0 if leg[1] == "L" else -1.0   # FL/HL: +HAA
        sign_front = 1.0 if leg[0] == "F" else -1.0  # hind legs bend the other way
        value = STAND[kind] * (sign_side if kind == "HAA" else sign_front)
        q[model.joints[model.getJointId(name)].idx_q] = value
    return q


def simulate(urdf: Path, stand_s: float = 0.4, trot_s: float = 0.3) -> Recording:
    model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
    data = model.createData()
    feet = [model.getFrameId(f) for f in FEET]
    q = standing_posture(model)
    pin.framesForwardKinematics(model, data, q)
    q[2] -= np.mean([data.oMf[f].translation[2] for f in feet])  # feet on z = 0
    pin.framesForwardKinematics(model, data, q)
    anchors = [data.oMf[f].translation.copy() for f in feet]
    q_stand = q[7:].copy()
    v = np.zeros(model.nv)
    kp, kd, steps = 20.0, 0.05, int(round((stand_s + trot_s) * RATE))
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "q", "v", "tau", "active", "force")}
    phase = np.arange(12) * 0.7
    for step in range(steps * SUBSTEPS):
        t = step * DT / SUBSTEPS
        active = np.ones(4, dtype=bool) if t < stand_s else np.array(STANCE_TROT)
        ref = q_stand + 0.05 * np.sin(np.pi * min(t / 0.2, 1.0) / 2) ** 2 * np.sin(2 * np.pi * 1.5 * t + phase)
        if t >= stand_s:  # swing legs lift their feet: hip and knee flex further
            lift = 0.4 * np.sin(np.pi * min((t - stand_s) / 0.3, 1.0)) ** 2
            for leg, down in zip(("FL", "FR", "HL", "HR"), active):
                if not down:
                    i = [n.startswith(leg) for n in model.names[2:]].index(True)
                    sign = 1.0 if leg[0] == "F" else -1.0
                    ref[i + 1] += sign * lift
                    ref[i + 2] -= sign * 2 * lift
        tau = holding_torque(model, data, feet, q, active) + kp * (ref - q[7:]) - kd * v[6:]
        a, f = contact_step(model, data, feet, anchors, q, v, tau, active)
        if step % SUBSTEPS == 0:
            R = [data.oMf[fid].rotation for fid in feet]
            out["t"].append(np.array(t))
            out["q"].append(q.copy())
            out["v"].append(v.copy())
            out["tau"].append(tau)
            out["active"].append(active)
            out["force"].append(np.array([R[i].T @ f[i] for i in range(4)]))
        v = v + a * DT / SUBSTEPS
        q = pin.integrate(model, q, v * DT / SUBSTEPS)
    arrays = {k: np.array(x) for k, x in out.items()}
    return Recording(arrays["t"], arrays["q"], arrays["v"], arrays["tau"], arrays["active"], arrays["force"],
                     list(model.names[2:]), float(sum(i.mass for i in model.inertias)))


def holding_torque(model: pin.Model, data: pin.Data, feet: list[int], q: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Joint torques that let the feet down carry the weight at rest (least-norm forces), the
    controller's feedforward."""
    g = pin.computeGeneralizedGravity(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    Jt = np.hstack([pin.getFrameJacobian(model, data, f, pin.LOCAL_WORLD_ALIGNED)[:3].T
                    for f, down in zip(feet, active) if down])
    f = np.linalg.lstsq(Jt[:6], g[:6], rcond=None)[0]
    return g[6:] - Jt[6:] @ f


def contact_step(model: pin.Model, data: pin.Data, feet: list[int], anchors: list[np.ndarray], q: np.ndarray,
                 v: np.ndarray, tau: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, f (4, 3) world-axes forces on the feet, zero for the feet in the air)."""
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.nonLinearEffects(model, data, q, v)
    pin.computeJointJacobians(model, data, q)
    pin.forwardKinematics(model, data, q, v, np.zeros(model.nv))
    pin.updateFramePlacements(model, data)
    rows, rhs = [], []
    for fid, anchor, down in zip(feet, anchors, active):
        if not down:
            continue
        J = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        drift = pin.getFrameClassicalAcceleration(model, data, fid, pin.LOCAL_WORLD_ALIGNED).linear
        rows.append(J)
        rhs.append(-drift - 20.0 * (J @ v) - 100.0 * (data.oMf[fid].translation - anchor))
    J = np.vstack(rows)
    m = J.shape[0]
    K = np.block([[M, -J.T], [J, np.zeros((m, m))]])
    S_tau = np.concatenate([np.zeros(6), tau])
    sol = np.linalg.solve(K, np.concatenate([S_tau - h, np.concatenate(rhs)]))
    f = np.zeros((4, 3))
    f[np.asarray(active)] = sol[model.nv:].reshape(-1, 3)
    return sol[: model.nv], f


T0_NS = 1_700_000_000 * 1_000_000_000


def write_bag(path: Path, rec: Recording, *, flags: bool = True, wrenches: bool = False) -> Path:
    """/joint_states (with efforts), /odom, and the contact flags (/contact_state, UInt8MultiArray)
    or the foot sensors (/contact_sensor/<foot>, WrenchStamped in the foot's frame)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    T = ts.types

    def header(stamp: int, frame: str):
        sec, nsec = divmod(stamp, 1_000_000_000)
        return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame)

    def vec(cls: str, x) -> object:
        return T[cls](x=float(x[0]), y=float(x[1]), z=float(x[2]))

    cov = np.zeros(36)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        js = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        od = w.add_connection("/odom", "nav_msgs/msg/Odometry", typestore=ts)
        cs = w.add_connection("/contact_state", "std_msgs/msg/UInt8MultiArray", typestore=ts) if flags else None
        ws = [w.add_connection(f"/contact_sensor/{f}", "geometry_msgs/msg/WrenchStamped", typestore=ts)
              for f in FEET] if wrenches else []
        for k in range(len(rec.t)):
            stamp = T0_NS + int(round(rec.t[k] * 1e9))
            q, v = rec.q[k], rec.v[k]
            pose = T["geometry_msgs/msg/PoseWithCovariance"](pose=T["geometry_msgs/msg/Pose"](
                position=vec("geometry_msgs/msg/Point", q[:3]),
                orientation=T["geometry_msgs/msg/Quaternion"](x=q[3], y=q[4], z=q[5], w=q[6])), covariance=cov)
            twist = T["geometry_msgs/msg/TwistWithCovariance"](twist=T["geometry_msgs/msg/Twist"](
                linear=vec("geometry_msgs/msg/Vector3", v[:3]), angular=vec("geometry_msgs/msg/Vector3", v[3:6])),
                covariance=cov)
            odom = T["nav_msgs/msg/Odometry"](header=header(stamp, "world"), child_frame_id="base_link",
                                              pose=pose, twist=twist)
            w.write(od, stamp, ts.serialize_cdr(odom, "nav_msgs/msg/Odometry"))
            if cs is not None:
                layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
                msg = T["std_msgs/msg/UInt8MultiArray"](layout=layout, data=rec.active[k].astype(np.uint8))
                w.write(cs, stamp, ts.serialize_cdr(msg, "std_msgs/msg/UInt8MultiArray"))
            for i, conn in enumerate(ws):
                wrench = T["geometry_msgs/msg/Wrench"](force=vec("geometry_msgs/msg/Vector3", rec.force_link[k, i]),
                                                       torque=vec("geometry_msgs/msg/Vector3", np.zeros(3)))
                msg = T["geometry_msgs/msg/WrenchStamped"](header=header(stamp, FEET[i]), wrench=wrench)
                w.write(conn, stamp, ts.serialize_cdr(msg, "geometry_msgs/msg/WrenchStamped"))
            state = T["sensor_msgs/msg/JointState"](
                header=header(stamp, ""), name=rec.joint_names, position=q[7:].copy(), velocity=v[6:].copy(),
                effort=rec.tau[k].copy())
            w.write(js, stamp, ts.serialize_cdr(state, "sensor_msgs/msg/JointState"))
    return path


def main() -> None:
    """The README's worked example: simulate, write the bag, replay it with the contacts of
    config/solo12_contacts.yaml, print the report. Usage: python test/contact_sim.py OUT_DIR"""
    import sys

    from liedyn_ros.replay import ReplayOptions, replay
    from liedyn_ros.replay.cli import print_report
    from liedyn_ros.robot_data import robots_dir

    out = Path(sys.argv[1])
    urdf = robots_dir() / "solo_description/robots/solo12.urdf"
    out.mkdir(parents=True, exist_ok=True)
    bag = write_bag(out / "solo12_stand_trot", simulate(urdf))
    params = Path(__file__).resolve().parents[1] / "config" / "solo12_contacts.yaml"
    print_report(replay([bag], ReplayOptions(out=out / "replay", urdf=urdf, odom_topic="/odom", params=params)))


if __name__ == "__main__":
    main()
