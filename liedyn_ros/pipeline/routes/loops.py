"""The loops' route: loop closures always on, passive joints unactuated, contacts (if any) per their
state, solved together (pipeline.loops):

    M a + b = [0; tau] + A^T lam,   tau = 0 on the passive joints (and the supported base).

tau_ff by core.constrained_rnea (``solution`` among many, zero on the passive joints); tau_g the
same at rest; predictions by core.constrained_aba with the measured efforts (zero on the passive
joints). A floating base with no contact down (flight) is not held by the loops: there the base
keeps the wrench of the unconstrained RNEA (``base_wrench``) and the joints the loop-consistent
torques. A motion no constraint force realises gets least-squares forces and ``checks.unbalanced``.
contact_active, contact_wrench (and the cone checks) only with contacts; tau_free the unconstrained
tau_ff.

One sample (the node's) takes one compiled call, core.constraints.fast_loop_sample.loop_sample_one: the
readable path's rules on one evaluation of the terms, where that path's dozen core calls spent most of the
sample in numpy's per-call cost. A block, the samples that kernel declines (LoopRoute.sample), and the
reference implementation (while the kernels compile) run the general path below: the core's readable
constrained paths (the compiled contact kernels take contacts only) with compiled kernels under them: the
constraints' A, c, A v and e (constraint_terms_many), rnea and aba, the motion and the robot at rest in one
stacked call (batch kernels), the least-norm minimisers of the rank-deficient loop (least_norm_forces_many,
psd_solve_many) and flight's closest forces (closest_forces_many); core.fast.warmup.LOOP_KERNELS names the
kernels the route calls. Each constrained call checks its inputs once (constraints.state.setup) and hands the
checked batch to rnea and aba unchecked.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core.constraints.fast_closures import closure_arrays
from liedyn_ros.core.constraints.fast_loop_sample import loop_sample_size
from liedyn_ros.core.constraints.fast_minimisers import LEAST_NORM, MIN_TORQUE
from liedyn_ros.core.constraints.inverse import BALANCE_RTOL, passive_mask
from liedyn_ros.core.constraints.state import RANK_RTOL, setup
from liedyn_ros.core.dynamics import rnea_batch
from liedyn_ros.core.fast import OK, fast_model
from liedyn_ros.core.fast.entry import single
from liedyn_ros.pipeline.compute import (
    DynamicsOutputs,
    compute_outputs,
    constrained_predictions,
    rigid_body_effort,
)
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import (
    UNBALANCED_RTOL,
    ContactChecks,
    check_forces_one,
    check_wrenches,
    contact_wrenches,
)
from liedyn_ros.pipeline.loops import (
    BALANCE_WEIGHT,
    PINV_RCOND,
    Loops,
    base_held,
    closest_loop_forces,
)
from liedyn_ros.pipeline.payload import Dynamics
from liedyn_ros.pipeline.routes.unchecked import Unchecked

BoolArray = NDArray[np.bool_]


class LoopRoute(Unchecked):
    """The loops (with their contacts) of one model: its constraint set and its passive joints'
    mask, made once, and the compiled sample's arguments at its first sample; its outputs checked by the
    caller."""

    def __init__(self, dynamics: Dynamics, loops: Loops, solution: str = "min_torque") -> None:
        model = self.model = dynamics.model
        self.friction, self.loops, self.solution = dynamics.friction, loops, solution
        self._nb = model.nv - model.n
        self._passive = passive_mask(model, loops.passive)[self._nb:]  # (n,) the joints without a drive
        # loop_sample_one's fixed arguments, made at the first compiled sample (sample()); False where it does not serve
        self._kernel: tuple | bool | None = None if solution in ("min_torque", "min_force") and not model.has_mimic \
            else False

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: BoolArray | None, *,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """One sample or a block; ``active`` (..., k) the contacts' state (None without contacts);
        ``algorithms`` core.reference while the kernels compile (the core's readable paths only)."""
        if algorithms is None and type(q) is np.ndarray and q.ndim == 1:
            out = self.sample(q, v, a, effort, pose, active, ff_state)
            if out is not None:
                return out
        return self.general(q, v, a, effort, pose, active, ff_state, algorithms)

    def sample(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
               pose: FloatArray | None, active: BoolArray | None,
               ff_state: tuple[FloatArray, FloatArray] | None = None) -> DynamicsOutputs | None:
        """One sample by core.constraints.fast_loop_sample.loop_sample_one (the general path's rules, equal
        to it to rounding); None where it declines (general() then answers, or words the error): arrays
        of other shapes or types, NaN, the solution "unique", mimic joints, a model whose inertia is singular."""
        model, loops, nb = self.model, self.loops, self._nb
        contacts = loops.contacts
        args = self._kernel if self._kernel is not None else self._kernel_arguments()
        if not isinstance(args, tuple):  # the solution "unique" or mimic joints: the general path
            return None
        fm, ca, p, w, mode, params, up, loops_on, size = args
        q_ff, v_ff = (q, v) if ff_state is None else ff_state
        if contacts is None:
            act = loops_on
        elif type(active) is np.ndarray and active.dtype == np.bool_ and active.shape == (contacts.k,):
            act = np.concatenate((active, loops_on))
        else:
            return None
        if (pose is None) is not fm.fixed or np.shape(v) != (model.nv,) or np.shape(v_ff) != (model.nv,):
            return None
        friction = self.friction
        if effort is None:
            net = q  # not read
        elif type(effort) is np.ndarray and effort.shape == (model.n,):
            net = rigid_body_effort(model, v, effort, friction)  # the kernel zeroes the passive joints
        else:
            return None
        out = np.empty(size)  # not kept between samples: the outputs are views of it
        try:
            status = single.loop_sample_one(fm.handle, ca.ci, ca.cb, ca.cf, ca.scratch, q, v, a, q_ff, v_ff, net,
                                            fm.identity if pose is None else pose, act, p, w, mode,
                                            effort is not None, params, up, out)
        except TypeError:  # not float64 vectors, a read-only or strided array: the general path
            return None
        if status != OK:
            return None
        nv, n, m = model.nv, model.n, ca.ci[1]
        tau_free, tau_ff, tau_g = out[nb:nv], out[nv:nv + n], out[nv + n:nv + 2 * n]
        if friction is not None:  # compensated on the actuated joints only; tau_free on all of them
            extra = core.friction_torque(friction, v_ff[nb:])
            tau_ff, tau_free = tau_ff + np.where(self._passive, 0.0, extra), tau_free + extra
        acc = out[nv + 2 * n + m:2 * nv + 2 * n + m]
        unbalanced = out[-1] != 0.0
        outputs = DynamicsOutputs(tau_ff, tau_g, None if effort is None else acc[nb:], out[:nb] if nb else None,
                                  None if effort is None or not nb else acc[:nb], tau_free=tau_free)
        if contacts is None:
            none = np.zeros(0, dtype=bool)
            return outputs._replace(checks=ContactChecks(none, none, unbalanced))
        k, kc, at = len(act), contacts.k, 2 * nv + 2 * n + m
        contact_active = act[:kc]
        wrench = contact_wrenches(contacts, out[nv + 2 * n:nv + 2 * n + loops.m_contacts])
        wrench[~contact_active] = 0.0
        normal, tangential = out[at:at + kc], out[at + k:at + k + kc]
        pulling, slipping = check_forces_one(contacts, normal, tangential, contact_active)
        return outputs._replace(contact_active=contact_active, contact_wrench=wrench,
                                checks=ContactChecks(pulling, slipping, unbalanced))

    def _kernel_arguments(self) -> tuple:
        """loop_sample_one's arguments that do not change between samples, made once (never while the kernels
        compile: outputs() asks for them only on the compiled path)."""
        model, loops = self.model, self.loops
        cs = loops.on(model)
        p = passive_mask(model, loops.passive)
        # constrained_rnea's minimiser as it takes it: min_torque unit weights, min_force unweighted the least norm
        w, mode = (np.ones(int((~p).sum())), MIN_TORQUE) if self.solution == "min_torque" else (np.ones(1), LEAST_NORM)
        params = np.array([RANK_RTOL, BALANCE_RTOL, BALANCE_WEIGHT, PINV_RCOND, UNBALANCED_RTOL])
        up = np.zeros(3) if loops.contacts is None else np.ascontiguousarray(loops.contacts.up, dtype=np.float64)
        loops_on = np.ones(len(loops.closures) if loops.contacts is not None else cs.k, dtype=bool)
        size = loop_sample_size(model.nv, model.n, cs.m, cs.k)
        self._kernel = (fast_model(model), closure_arrays(cs), p, w, mode, params, up, loops_on, size)
        return self._kernel

    def general(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: BoolArray | None,
                ff_state: tuple[FloatArray, FloatArray] | None = None, algorithms: Any = None) -> DynamicsOutputs:
        """One sample or a block by the core's constrained functions one by one (their readable paths with
        compiled kernels under them; ``algorithms`` core.reference: no compiled code)."""
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
