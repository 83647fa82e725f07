"""Legged robots on the ground simulated by Pinocchio, independently of liedyn_ros: the
recordings of the contact tests. A Solo12 on four point feet, then trotting on two; a Talos on
two flat soles, then on its left one.

Contact dynamics by Pinocchio's own terms (crba, nonLinearEffects, the feet's frame Jacobians
and accelerations): per step the KKT system

    [ M   -J^T ] [ a ]   [ S^T tau - h                     ]
    [ J    0   ] [ f ] = [ -Jdot v - kd J v - kp e          ]

(f: the ground's forces (point feet) or wrenches (soles) on the feet, in each foot's frame;
the small Baumgarte terms on the drift e only stop it) and semi-implicit Euler at 10 kHz,
recorded at 1 kHz. Joint PD control with a feedforward that lets the feet carry the weight,
around a standing posture that sways; in the second phase some feet lift and swing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from liedyn_ros.robot_data import robots_dir

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
RATE = 1000
SUBSTEPS = 10
DT = 1.0 / RATE


@dataclass
class Robot:
    """What to simulate: feet (frames), their kind, the posture, which feet stay down in the
    second phase, which joints swing there (name -> amplitude, rad) and the PD gains."""

    urdf: Path
    feet: tuple[str, ...]
    kind: str
    posture: dict[str, float]
    second: tuple[bool, ...]
    swing: dict[str, float] = field(default_factory=dict)
    kp: float = 20.0
    kd: float = 0.05
    sway: float = 0.05


def solo12() -> Robot:
    posture = {}
    for leg in ("FL", "FR", "HL", "HR"):
        side, front = (1.0 if leg[1] == "L" else -1.0), (1.0 if leg[0] == "F" else -1.0)
        posture |= {f"{leg}_HAA": 0.1 * side, f"{leg}_HFE": 0.8 * front, f"{leg}_KFE": -1.6 * front}
    # FR and HL lift their feet: hip and knee flex further.
    swing = {"FR_HFE": 0.4, "FR_KFE": -0.8, "HL_HFE": -0.4, "HL_KFE": 0.8}
    return Robot(robots_dir() / "solo_description/robots/solo12.urdf", FEET, "point", posture,
                 (True, False, False, True), swing)


def talos() -> Robot:
    """Talos (reduced) in its half-sitting posture (talos.srdf) on two flat soles, then on the left."""
    legs = {"1": 0.0, "2": 0.0, "3": -0.411354, "4": 0.859395, "5": -0.448041, "6": -0.001708}
    posture = {f"leg_{side}_{i}_joint": x for side in ("left", "right") for i, x in legs.items()}
    posture |= {"arm_left_1_joint": 0.25847, "arm_left_2_joint": 0.173046, "arm_left_4_joint": -0.525366,
                "arm_right_1_joint": -0.25847, "arm_right_2_joint": -0.173046, "arm_right_4_joint": -0.525366,
                "arm_left_7_joint": 0.1, "arm_right_7_joint": 0.1, "torso_2_joint": 0.006761}
    swing = {"leg_right_3_joint": -0.3, "leg_right_4_joint": 0.6, "leg_right_5_joint": -0.3}
    return Robot(robots_dir() / "talos_data/robots/talos_reduced.urdf", ("left_sole_link", "right_sole_link"),
                 "flat", posture, (True, False), swing, kp=400.0, kd=2.0, sway=0.03)


@dataclass
class Recording:
    """Per sample: t (N,), q_pin (N, 7 + n), v_pin (N, 6 + n), tau (N, n) in Pinocchio's joint
    order, the contact flags (N, k) and wrenches (N, k, 6) (m, f) at each foot in its frame;
    joint names, total mass, the switch time."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    active: np.ndarray
    wrench: np.ndarray
    joint_names: list[str]
    mass: float
    switch: float
    feet: tuple[str, ...] = FEET


def standing_posture(model: pin.Model, posture: dict[str, float] | None = None) -> np.ndarray:
    q = pin.neutral(model)
    for name, value in (posture if posture is not None else solo12().posture).items():
        q[model.joints[model.getJointId(name)].idx_q] = value
    return q


def simulate(robot: Robot | None = None, first_s: float = 0.4, second_s: float = 0.3) -> Recording:
    robot = robot or solo12()
    model = pin.buildModelFromUrdf(str(robot.urdf), pin.JointModelFreeFlyer())
    data = model.createData()
    feet = [model.getFrameId(f) for f in robot.feet]
    q = standing_posture(model, robot.posture)
    pin.framesForwardKinematics(model, data, q)
    q[2] -= np.mean([data.oMf[f].translation[2] for f in feet])  # feet on z = 0
    pin.framesForwardKinematics(model, data, q)
    anchors = [data.oMf[f].copy() for f in feet]
    q_stand, n = q[7:].copy(), model.nv - 6
    v = np.zeros(model.nv)
    names = list(model.names[2:])
    swing = np.zeros(n)
    for name, amplitude in robot.swing.items():
        swing[names.index(name)] = amplitude
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "q", "v", "tau", "active", "wrench")}
    phase = np.arange(n) * 0.7
    all_down, second = np.ones(len(feet), dtype=bool), np.array(robot.second)
    for step in range(int(round((first_s + second_s) * RATE)) * SUBSTEPS):
        t = step * DT / SUBSTEPS
        active = all_down if t < first_s else second
        ramp = np.sin(np.pi * min(t / 0.2, 1.0) / 2) ** 2
        ref = q_stand + robot.sway * ramp * np.sin(2 * np.pi * 1.5 * t + phase)
        if t >= first_s:
            ref += swing * np.sin(np.pi * min((t - first_s) / 0.3, 1.0)) ** 2
        tau = holding_torque(model, data, feet, robot.kind, q, active) + robot.kp * (ref - q[7:]) - robot.kd * v[6:]
        a, w = contact_step(model, data, feet, robot.kind, anchors, q, v, tau, active)
        if step % SUBSTEPS == 0:
            out["t"].append(np.array(t))
            out["q"].append(q.copy())
            out["v"].append(v.copy())
            out["tau"].append(tau)
            out["active"].append(active)
            out["wrench"].append(w)
        v = v + a * DT / SUBSTEPS
        q = pin.integrate(model, q, v * DT / SUBSTEPS)
    arrays = {k: np.array(x) for k, x in out.items()}
    return Recording(arrays["t"], arrays["q"], arrays["v"], arrays["tau"], arrays["active"], arrays["wrench"],
                     names, float(sum(i.mass for i in model.inertias)), first_s, robot.feet)


def _rows(model: pin.Model, data: pin.Data, fid: int, kind: str) -> np.ndarray:
    """The foot's constraint rows: LOCAL Jacobian, linear rows (point) or all six (flat)."""
    J = pin.getFrameJacobian(model, data, fid, pin.LOCAL)
    return J[:3] if kind == "point" else J


def holding_torque(model: pin.Model, data: pin.Data, feet: list[int], kind: str, q: np.ndarray,
                   active: np.ndarray) -> np.ndarray:
    """Joint torques that let the feet down carry the weight at rest (least-norm forces), the
    controller's feedforward."""
    g = pin.computeGeneralizedGravity(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    Jt = np.hstack([_rows(model, data, f, kind).T for f, down in zip(feet, active) if down])
    f = np.linalg.lstsq(Jt[:6], g[:6], rcond=None)[0]
    return g[6:] - Jt[6:] @ f


def contact_step(model: pin.Model, data: pin.Data, feet: list[int], kind: str, anchors: list[pin.SE3],
                 q: np.ndarray, v: np.ndarray, tau: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, wrenches (k, 6) (m, f) on the feet in their frames, zero for the feet in the air)."""
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
        J = _rows(model, data, fid, kind)
        if kind == "point":
            drift = pin.getFrameClassicalAcceleration(model, data, fid, pin.LOCAL).linear
            error = data.oMf[fid].rotation.T @ (data.oMf[fid].translation - anchor.translation)
        else:  # the derivative of the body twist; pinocchio orders (linear, angular)
            drift = pin.getFrameAcceleration(model, data, fid, pin.LOCAL).vector
            error = pin.log6(anchor.actInv(data.oMf[fid])).vector
        rows.append(J)
        rhs.append(-drift - 20.0 * (J @ v) - 100.0 * error)
    J = np.vstack(rows)
    m = J.shape[0]
    K = np.block([[M, -J.T], [J, np.zeros((m, m))]])
    sol = np.linalg.solve(K, np.concatenate([np.concatenate([np.zeros(6), tau]) - h, np.concatenate(rhs)]))
    w = np.zeros((len(feet), 6))
    size = 3 if kind == "point" else 6
    f = sol[model.nv:].reshape(-1, size)
    if kind == "point":
        w[np.asarray(active), 3:] = f
    else:
        w[np.asarray(active)] = np.concatenate([f[:, 3:], f[:, :3]], axis=1)  # (f, m) -> (m, f)
    return sol[: model.nv], w


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
              for f in rec.feet] if wrenches else []
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
                wrench = T["geometry_msgs/msg/Wrench"](force=vec("geometry_msgs/msg/Vector3", rec.wrench[k, i, 3:]),
                                                       torque=vec("geometry_msgs/msg/Vector3", rec.wrench[k, i, :3]))
                msg = T["geometry_msgs/msg/WrenchStamped"](header=header(stamp, rec.feet[i]), wrench=wrench)
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

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    robot = solo12()
    bag = write_bag(out / "solo12_stand_trot", simulate(robot))
    params = Path(__file__).resolve().parents[1] / "config" / "solo12_contacts.yaml"
    print_report(replay([bag], ReplayOptions(out=out / "replay", urdf=robot.urdf, odom_topic="/odom", params=params)))


if __name__ == "__main__":
    main()
