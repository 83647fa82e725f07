"""Constrained forward dynamics (constrained_aba) against Pinocchio's constraintDynamics, same run.

Per call on Solo12 with four point contacts, Talos (reduced) and Unitree G1 with two flat feet:
our compiled path (the plain function, and a core.Data's method) and Pinocchio's
constraintDynamics (initConstraintDynamics done once, proximal settings with mu = 0 and one
iteration: the exact KKT solve), taking turns in short bursts, best of many rounds
(bench_core.per_call). Goal: ratio <= 1.5 (<= 1.0 through core.Data).
Then the cost over n and m: a floating body with L three-joint legs (n = 3 L), k feet down
(m = 3 k point contacts): Kim's O(n) + O(m^3), ours against Pinocchio's.
Run: python benchmarks/bench_constraints.py
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
from bench_core import per_call

from liedyn_ros import core
from liedyn_ros.core import base as conversions
from liedyn_ros.robot_data import robots_dir


class Case:
    """One robot with contacts: our model and constraint set, Pinocchio's, and one consistent state."""

    def __init__(self, xml: str, contacts: list[core.Contact], rng: np.random.Generator) -> None:
        self.model = core.load_urdf(xml, floating_base=True)
        self.pin_model = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
        self.data = self.pin_model.createData()
        order = list(self.pin_model.names)[2:]
        self.cs = core.constraint_set(self.model, contacts)
        models = []
        for c in contacts:
            frame = self.pin_model.frames[self.pin_model.getFrameId(c.link)]
            kind = pin.ContactType.CONTACT_3D if c.kind == "point" else pin.ContactType.CONTACT_6D
            models.append(pin.RigidConstraintModel(kind, self.pin_model, frame.parentJoint, frame.placement,
                                                   pin.LOCAL))
        self.pin_datas = pin.StdVec_RigidConstraintData([cm.createData() for cm in models])
        self.pin_models = pin.StdVec_RigidConstraintModel(models)
        pin.initConstraintDynamics(self.pin_model, self.data, self.pin_models, self.pin_datas)
        self.prox = pin.ProximalSettings(1e-12, 0.0, 1)
        m = self.model
        self.q, self.pose = rng.uniform(-0.5, 0.5, m.n), core.pose_from_position_quaternion(
            rng.normal(size=3), rng.normal(size=4))
        A = core.constraint_jacobian(m, self.q, self.cs, base_pose=self.pose)
        v = rng.normal(size=m.nv)
        self.v = v - np.linalg.pinv(A) @ (A @ v)
        self.tau = np.concatenate([np.zeros(6), rng.normal(size=m.n)])
        self.q_pin, self.v_pin = conversions.to_pinocchio(m, self.q, self.v, base_pose=self.pose, joint_order=order)
        _, tau_rows = conversions.to_pinocchio(m, self.q, np.eye(m.nv), base_pose=self.pose, joint_order=order)
        self.tau_pin = np.linalg.solve(tau_rows, self.tau)  # v_pin = E v, so tau = E^T tau_pin

    def ours(self, active=None):
        return lambda: core.constrained_aba(self.model, self.q, self.v, self.tau, self.cs, base_pose=self.pose,
                                            active=active)

    def prepared(self):
        """The same call through a core.Data made once (docs/api.md, 'Fast repeated calls')."""
        data = core.Data(self.model)
        return lambda: data.constrained_aba(self.q, self.v, self.tau, self.cs, base_pose=self.pose)

    def theirs(self):
        return lambda: pin.constraintDynamics(self.pin_model, self.data, self.q_pin, self.v_pin, self.tau_pin,
                                              self.pin_models, self.pin_datas, self.prox)

    def check(self) -> float:
        """Largest |a - a_pin| (in our coordinates), to show both compute the same thing."""
        a, _ = self.ours()()
        a_pin = self.theirs()()
        _, a_ours_pin = conversions.to_pinocchio(self.model, self.q, a, base_pose=self.pose,
                                                 joint_order=list(self.pin_model.names)[2:])
        return float(np.abs(a_ours_pin - a_pin).max())


def legged_urdf(legs: int) -> str:
    """A floating body with `legs` legs of three revolute joints each, the feet links FOOT0..."""
    links = ['<link name="body"><inertial><mass value="8"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" '
             'iyz="0" izz="0.25"/></inertial></link>']
    joints = []
    for k in range(legs):
        ang = 2 * np.pi * k / legs
        parent = "body"
        for s, (axis, xyz) in enumerate([("1 0 0", f"{0.3 * np.cos(ang):.4f} {0.3 * np.sin(ang):.4f} 0"),
                                         ("0 1 0", "0 0.05 0"), ("0 1 0", "0 0 -0.2")]):
            name = f"L{k}_{s}"
            links.append(f'<link name="{name}"><inertial><origin xyz="0 0 -0.1"/><mass value="0.5"/>'
                         '<inertia ixx="0.002" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.001"/></inertial></link>')
            joints.append(f'<joint name="J{k}_{s}" type="revolute"><parent link="{parent}"/><child link="{name}"/>'
                          f'<origin xyz="{xyz}"/><axis xyz="{axis}"/><limit lower="-3" upper="3" effort="50" '
                          'velocity="20"/></joint>')
            parent = name
        links.append(f'<link name="FOOT{k}"/>')
        joints.append(f'<joint name="F{k}" type="fixed"><parent link="{parent}"/><child link="FOOT{k}"/>'
                      '<origin xyz="0 0 -0.2"/></joint>')
    return f'<robot name="legged{legs}">{"".join(links)}{"".join(joints)}</robot>'


def main() -> None:
    rng = np.random.default_rng(0)
    robots = robots_dir()
    solo = Case((robots / "solo_description/robots/solo12.urdf").read_text(),
                [core.Contact(f) for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")], rng)
    talos = Case((robots / "talos_data/robots/talos_reduced.urdf").read_text(),
                 [core.Contact("left_sole_link", "flat"), core.Contact("right_sole_link", "flat")], rng)
    g1 = Case((robots / "g1_description/urdf/g1_29dof_rev_1_0.urdf").read_text(),
              [core.Contact("left_ankle_roll_link", "flat"), core.Contact("right_ankle_roll_link", "flat")], rng)
    print("constrained_aba per call vs Pinocchio constraintDynamics (plain function, and through a core.Data)")
    print(f"  {'robot':<28}{'m':>4}{'ours us':>10}{'Data us':>9}{'Pinocchio us':>14}{'ratio':>7}{'Data':>6}"
          f"{'|a - a_pin|':>13}")
    for label, case in (("solo12, 4 point contacts", solo), ("talos reduced, 2 flat feet", talos),
                        ("g1 29-dof, 2 flat feet", g1)):
        ours, prepared, theirs = per_call([case.ours(), case.prepared(), case.theirs()])
        print(f"  {label:<28}{case.cs.m:>4}{ours * 1e6:>10.2f}{prepared * 1e6:>9.2f}{theirs * 1e6:>14.2f}"
              f"{ours / theirs:>7.2f}{prepared / theirs:>6.2f}{case.check():>13.1e}")

    print("\ncost over n (3 L joints) and m (3 per foot down): ours us / Pinocchio us")
    feet_down = (1, 2, 4, 8, 16)
    print(f"  {'n':>4} " + "".join(f"{'m = ' + str(3 * k):>20}" for k in feet_down))
    for legs in (2, 4, 8, 16):
        cells = []
        for k in feet_down:
            if k > legs:
                cells.append(f"{'':>20}")
                continue
            case = Case(legged_urdf(legs), [core.Contact(f"FOOT{j}") for j in range(k)], rng)
            ours, theirs = per_call([case.ours(), case.theirs()], number=200, rounds=10)
            cells.append(f"{ours * 1e6:>10.1f} /{theirs * 1e6:>7.1f}  ")
        print(f"  {3 * legs:>4} " + "".join(cells))


if __name__ == "__main__":
    main()
