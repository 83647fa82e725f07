"""The loops' route: loop closures always on, passive joints unactuated, contacts (if any) per their
state, solved together (pipeline.loops):

    M a + b = [0; tau] + A^T lam,   tau = 0 on the passive joints (and the supported base).

tau_ff by core.constrained_rnea (``solution`` among many, zero on the passive joints); tau_g the
same at rest; predictions by core.constrained_aba with the measured efforts (zero on the passive
joints). A floating base with no contact down (flight) is not held by the loops: there the base
keeps the wrench of the unconstrained RNEA (``base_wrench``) and the joints the loop-consistent
torques. A motion no constraint force realises gets least-squares forces and ``checks.unbalanced``.
contact_active, contact_wrench (and the cone checks) only with contacts; tau_free the unconstrained
tau_ff. One sample and a block alike, batched over leading dimensions: this runs the core's
readable constrained paths (the compiled contact kernels take contacts only) with compiled kernels
under them: the constraints' A, c, A v and e (constraint_terms_many), rnea and aba, the motion and
the robot at rest in one stacked call (batch kernels: about half the CPU time of two single-sample
calls, numpy's per-call cost dominating), the least-norm minimisers of the rank-deficient loop
(least_norm_forces_many, psd_solve_many) and flight's closest forces (closest_forces_many);
core.fast.warmup.LOOP_KERNELS names the kernels it calls. Each constrained call checks its inputs
once (constraints.state.setup) and hands the checked batch to rnea and aba unchecked.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core.constraints.inverse import passive_mask
from liedyn_ros.core.constraints.state import setup
from liedyn_ros.core.dynamics import rnea_batch
from liedyn_ros.core.fast import fast_model
from liedyn_ros.pipeline.compute import (
    DynamicsOutputs,
    compute_outputs,
    constrained_predictions,
    rigid_body_effort,
)
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import ContactChecks, check_wrenches, contact_wrenches
from liedyn_ros.pipeline.loops import Loops, base_held, closest_loop_forces
from liedyn_ros.pipeline.payload import Dynamics
from liedyn_ros.pipeline.routes.unchecked import Unchecked

BoolArray = NDArray[np.bool_]


class LoopRoute(Unchecked):
    """The loops (with their contacts) of one model: its constraint set and its passive joints'
    mask, made once; its outputs checked by the caller."""

    def __init__(self, dynamics: Dynamics, loops: Loops, solution: str = "min_torque") -> None:
        model = self.model = dynamics.model
        self.friction, self.loops, self.solution = dynamics.friction, loops, solution
        self._nb = model.nv - model.n
        self._passive = passive_mask(model, loops.passive)[self._nb:]  # (n,) the joints without a drive

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: BoolArray | None, *,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """One sample or a block; ``active`` (..., k) the contacts' state (None without contacts);
        ``algorithms`` core.reference while the kernels compile (the core's readable paths only)."""
        model, loops, friction, nb = self.model, self.loops, self.friction, self._nb
        fast = algorithms is None
        free = compute_outputs(model, q, v, a, effort, pose, ff_state=ff_state, friction=friction,
                               algorithms=algorithms)
        lead = np.shape(q)[:-1]
        act = loops.active(active, lead)
        q_ff, v_ff = (q, v) if ff_state is None else ff_state
        rest = np.zeros_like(v)
        # the motion and the robot at rest, one call (np.array of two same-shaped arrays: np.stack, a tenth the cost)
        both = None if pose is None else np.array((pose, pose))
        tau, lam, unbalanced = self.torques(np.array((q_ff, q)), np.array((v_ff, rest)), np.array((a, rest)), both,
                                            np.array((act, act)), fast)
        tau_ff, tau_g = tau[0], tau[1]
        if friction is not None:  # compensated on the actuated joints only
            tau_ff = tau_ff + np.where(self._passive, 0.0, core.friction_torque(friction, v_ff[..., nb:]))
        out = free._replace(tau_ff=tau_ff, tau_g=tau_g, tau_free=free.tau_ff)
        if effort is not None and free.qdd_pred is not None:
            net = np.where(self._passive, 0.0, rigid_body_effort(model, v, effort, friction))  # friction: as compensated
            out = constrained_predictions(model, loops, q, v, net, pose, act, np.ones(lead, dtype=bool), out, fast)
        contacts = loops.contacts
        if contacts is None:
            none = np.zeros(lead + (0,), dtype=bool)
            return out._replace(checks=ContactChecks(none, none, unbalanced[0]))
        contact_active = act[..., :contacts.k]
        wrench = contact_wrenches(contacts, lam[0][..., :loops.m_contacts])
        wrench[~contact_active] = 0.0
        pulling, slipping = check_wrenches(model, contacts, q, pose, wrench, contact_active, fast)
        return out._replace(contact_active=contact_active, contact_wrench=wrench,
                            checks=ContactChecks(pulling, slipping, unbalanced[0]))

    def torques(self, q: FloatArray, v: FloatArray, a: FloatArray, pose: FloatArray | None, act: BoolArray,
                fast: bool = True) -> tuple[FloatArray, FloatArray, BoolArray]:
        """(tau (..., n), lam (..., m), unbalanced (...,)) that realise (q, v, a) with the passive
        joints at zero torque: core.constrained_rnea where the base is held (or fixed); least
        squares elsewhere (flight) and where no constraint force realises the motion. fast=False:
        the core's readable paths only."""
        model, loops, nb = self.model, self.loops, self._nb
        cs = loops.on(model)
        held = base_held(model, loops, act)
        if held.all():
            try:
                tau, lam = core.constrained_rnea(model, q, v, a, cs, base_pose=pose, passive=loops.passive,
                                                 active=act, solution=self.solution, tol=np.inf, fast=fast)
                return tau[..., nb:], lam, np.zeros(held.shape, dtype=bool)
            except ValueError:  # no constraint force realises the motion: least squares below
                pass
        if fast:  # rnea and A of one checked batch (the constrained algorithms' private entries)
            pb = setup(model, q, {"v": v, "a": a}, cs, pose, None, np.inf)
            tau_full, A = pb.restore(rnea_batch(fast_model(model), pb.batch)), pb.restore(pb.terms.A)
        else:
            tau_full = core.reference.rnea(model, q, v, a, base_pose=pose)
            A = core.constraint_jacobian(model, q, cs, base_pose=pose, fast=False)
        lam, tau, unbalanced = closest_loop_forces(model, loops, tau_full, A, np.zeros(np.shape(q)), cs.row_mask(act),
                                                   held, fast)
        return tau, lam, unbalanced


def compute_loop_outputs(model: Any, loops: Loops, q: FloatArray, v: FloatArray, a: FloatArray,
                         effort: FloatArray | None, base_pose: FloatArray | None, active: BoolArray | None, *,
                         solution: str = "min_torque", ff_state: tuple[FloatArray, FloatArray] | None = None,
                         friction: Any = None) -> DynamicsOutputs:
    """The loops' route of ``model`` for one call: :class:`LoopRoute`'s outputs, a sample or a block."""
    return LoopRoute(Dynamics(model, friction), loops, solution).outputs(q, v, a, effort, base_pose, active,
                                                                        ff_state=ff_state)
