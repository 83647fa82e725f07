"""The drives between published efforts and joint torques: gear ratios, torque constants, coupled
joints, and the rotor inertia the motors add.

Many drivers publish a motor current or a motor-side torque, not the joint torque. With e the
published effort of each motor (model joint order: the JointState entry named after joint i
carries motor i's value), k its torque constant (published unit -> motor torque; 1 when the
driver publishes motor torques), G the transmission (motor angles theta = G q; diag(gear
ratios) for independent joints, a full block for a differential wrist) and o a joint-side
torque offset (the driver's zero), power balance theta_dot^T tau_m = qd^T tau gives

    tau = G^T (k * e) + o                                   (joint torques, model joint order)

Rotor inertia: a rotor of inertia I_r behind a gear ratio N adds I_r N^2 to the joint's
diagonal of the mass matrix (Pinocchio's and MuJoCo's `armature`, joint side):

    tau = (M(q) + diag(armature)) qdd + C(q, qd) qd + g(q) + tau_f(qd)

For coupled joints the rotors' off-diagonal terms (G^T diag(I_r) G) are not modelled: the
armature is one number per joint. The same Drive serves the node, the replay and the fit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Drive", "PARAMETER_OF"]

# the node's parameter of each field (pipeline.payload.DYNAMICS_PARAMETERS)
PARAMETER_OF = {"torque_constant": "effort_torque_constant", "transmission": "effort_transmission",
                "offset": "effort_offset", "armature": "armature"}


@dataclass(frozen=True)
class Drive:
    """Per joint (model order, each (n,)): torque_constant k, offset o, armature; the
    transmission G (n, n). `Drive.of` builds one from gear ratios or a transmission."""

    torque_constant: np.ndarray
    transmission: np.ndarray
    offset: np.ndarray
    armature: np.ndarray

    def __post_init__(self) -> None:
        n = np.size(self.torque_constant)
        for name, shape in (("torque_constant", (n,)), ("transmission", (n, n)), ("offset", (n,)),
                            ("armature", (n,))):
            x = np.array(getattr(self, name), dtype=float)
            label = PARAMETER_OF[name]
            if x.shape != shape:
                raise ValueError(f"{label}: expected shape {shape}, got {x.shape}")
            if not np.all(np.isfinite(x)):
                raise ValueError(f"{label}: contains NaN or infinite values")
            x.setflags(write=False)
            object.__setattr__(self, name, x)
        if n and np.linalg.matrix_rank(self.transmission) < n:
            raise ValueError("effort_transmission: singular (some joint torque is not driven by any motor)")

    @classmethod
    def of(cls, n: int, *, gear_ratio=1.0, torque_constant=1.0, offset=0.0, transmission=None,
           armature=0.0) -> Drive:
        """Scalars apply to all joints. `transmission` (n, n) replaces diag(gear_ratio) (it holds
        the gear ratios then, and gear_ratio must stay 1)."""
        ratio = np.broadcast_to(np.asarray(gear_ratio, dtype=float), (n,))
        if transmission is None:
            G = np.diag(ratio)
        elif np.any(ratio != 1.0):
            raise ValueError("effort_gear_ratio: give the gear ratios inside effort_transmission, not both")
        else:
            G = np.asarray(transmission, dtype=float)
        return cls(np.broadcast_to(np.asarray(torque_constant, dtype=float), (n,)).copy(), G,
                   np.broadcast_to(np.asarray(offset, dtype=float), (n,)).copy(),
                   np.broadcast_to(np.asarray(armature, dtype=float), (n,)).copy())

    @property
    def converts(self) -> bool:
        """Whether published efforts differ from joint torques (else the node keeps them as they are)."""
        n = self.offset.size
        return not (np.all(self.torque_constant == 1.0) and np.array_equal(self.transmission, np.eye(n))
                    and not self.offset.any())

    def joint_torque(self, effort: np.ndarray) -> np.ndarray:
        """tau = G^T (k * e) + o of published efforts e (..., n); NaN rows stay NaN."""
        return (self.torque_constant * np.asarray(effort, dtype=float)) @ self.transmission + self.offset

    def motor_torque(self, tau: np.ndarray) -> np.ndarray:
        """k * e (..., n), each motor's torque, of joint torques: G^-T (tau - o)."""
        return np.linalg.solve(self.transmission.T, (np.asarray(tau, dtype=float) - self.offset)[..., None])[..., 0]

    def effort(self, tau: np.ndarray) -> np.ndarray:
        """The published efforts e (..., n) that give joint torques tau (the inverse of joint_torque)."""
        return self.motor_torque(tau) / self.torque_constant
