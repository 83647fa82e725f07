"""The contacts' route: the active contacts hold their points still (pipeline.contacts).

One sample in contact (the node's case) takes the compiled core.TermsKernel, every term on one
evaluation of the contacts; a block (the replay's) takes it row by row. Flight, the samples the
kernel declines (two feet and a rotation no force balances), the reference state (``ff_state``) and
the reference implementation (while the kernels compile) take the general path: the core's
functions one by one.

Outputs: tau_ff by core.constrained_rnea (M a + h = [0; tau] + A^T lam, the base passive,
``solution`` among many); tau_g the same at rest; predictions by core.constrained_aba with the
measured efforts. Samples without an active contact (flight) keep the unconstrained outputs: the
base then falls freely. base_wrench stays the unconstrained one: the wrench the contacts apply to
the base in total. Measured states are never exactly on the contacts, so the contact velocity is
not checked (tol=inf); when no contact force balances the base the forces balance it in the
least-squares sense (``solution`` taken among those) and the sample is flagged
``checks.unbalanced``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.core.constraints.terms import CheckedTermsKernel
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
    Contacts,
    check_forces,
    check_wrenches,
    contact_wrenches,
)
from liedyn_ros.pipeline.payload import Dynamics

BoolArray = NDArray[np.bool_]
_BALANCED, _UNBALANCED = np.zeros((), dtype=bool), np.ones((), dtype=bool)  # checks.unbalanced of one sample
_BALANCED.flags.writeable = _UNBALANCED.flags.writeable = False


class ContactRoute:
    """The contacts of one model: its constraint set and compiled kernel (core.TermsKernel, with the
    checks of what the node publishes: core.constraints.fast_sample; no state check, the base balanced in
    the least-squares sense where no force balances it), made once, and the slices of the kernel's output
    that make the outputs.

    ``bound`` (n,): the torques' bounds the node holds the outputs to (inf: none; :meth:`hold_to`).
    ``verdict``: (finite, in range) of the latest outputs when the kernel checked them itself (the node's
    pipeline.stream._finite and the bound check, made in the same compiled call), else None
    (pipeline.routes.Route)."""

    def __init__(self, dynamics: Dynamics, contacts: Contacts, solution: str = "min_torque") -> None:
        model = self.model = dynamics.model
        self.friction, self.contacts, self.solution = dynamics.friction, contacts, solution
        self.kernel = kernel = CheckedTermsKernel(model, contacts.on(model), solution=solution, tol=np.inf,
                                                  balance="least_squares")
        self.bound = np.full(model.n, np.inf)
        self.verdict: tuple[bool, bool] | None = None
        self._checks = np.zeros(3, dtype=np.int64)  # the kernel's verdict: finite, in range, inside the cones
        nb, L = model.nv - model.n, kernel.layout
        self._nb = nb
        self._joints = slice(nb, model.nv)
        self._tau_ff, self._tau_free, self._tau_g, self._qdd = (slice(s.start + nb, s.stop)
                                                                for s in (L.tau, L.tau_r, L.tau_g, L.a))
        self._base_wrench = slice(L.tau_r.start, L.tau_r.start + nb) if nb else None
        self._base_acc = slice(L.a.start, L.a.start + nb) if nb else None
        self._wrench, self._forces = L.wrench, slice(L.normal.start, L.tangential.stop)
        self._residual = L.residual.start
        self._wrenches = (contacts.k, 6)

    def outputs(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: Any, *, ff_state: tuple[FloatArray, FloatArray] | None = None,
                algorithms: Any = None) -> DynamicsOutputs:
        """One sample (q (n,), ``active`` (k,)) or a block (q (N, n), ``active`` (N, k)); ``ff_state``
        (q_ff, v_ff) the feedforward's state; ``algorithms`` core.reference while the kernels
        compile (the core's readable paths only)."""
        if algorithms is None and ff_state is None and type(active) is np.ndarray and active.ndim == 1:
            return self.sample(q, v, a, effort, pose, active)
        self.verdict = None  # checked by the caller
        if algorithms is not None:
            return self.general(q, v, a, effort, pose, np.asarray(active, dtype=bool), ff_state, fast=False)
        active = np.asarray(active, dtype=bool)
        if ff_state is None and active.ndim == 2 and np.ndim(q) == 2:
            return self.block(q, v, a, effort, pose, active)
        return self.general(q, v, a, effort, pose, active, ff_state)

    def sample(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
               pose: FloatArray | None, active: BoolArray) -> DynamicsOutputs:
        """One sample: the compiled kernel, every term on one evaluation of the contacts, and its checks
        (:attr:`verdict`); flight and what the kernel declines by the general path (no verdict)."""
        self.verdict = None
        if True not in active.tolist():
            return self.general(q, v, a, effort, pose, active)  # flight: the unconstrained outputs
        friction, contacts = self.friction, self.contacts
        net = effort if friction is None or effort is None else rigid_body_effort(self.model, v, effort, friction)
        out = np.empty(self.kernel.size)  # not kept between samples: the outputs are views of it
        checks = self._checks
        if not self.kernel.checked(q, v, a, net, pose, active, self.bound, contacts.mu, out, checks):
            return self.general(q, v, a, effort, pose, active)  # declined (see core.TermsKernel): the general path
        finite, in_range, inside = checks.tolist()
        tau_ff, tau_free = out[self._tau_ff], out[self._tau_free]
        if friction is not None:  # compensated on the contact-consistent torques too (then checked by the caller)
            extra = core.friction_torque(friction, v[self._joints])
            tau_ff, tau_free = tau_ff + extra, tau_free + extra
        if inside:  # most samples: every foot pushes inside its cone (no tolerance needed)
            pulling = slipping = contacts.clear
        else:
            k, forces = contacts.k, out[self._forces]
            pulling, slipping = check_forces(contacts, forces[:k], forces[k:], active)
        base = self._base_wrench
        outputs = DynamicsOutputs(
            tau_ff, out[self._tau_g], None if effort is None else out[self._qdd], None if base is None else out[base],
            None if effort is None or base is None else out[self._base_acc], active,
            out[self._wrench].reshape(self._wrenches), tau_free,
            ContactChecks(pulling, slipping, _UNBALANCED if out.item(self._residual) > UNBALANCED_RTOL else _BALANCED))
        if friction is None:  # (with friction, tau_ff and tau_free change after the kernel's checks)
            self.verdict = (finite == 1, in_range == 1)
        return outputs

    def hold_to(self, bound: FloatArray | None) -> None:
        """The torques' bounds (n,) the kernel checks the outputs against (None: none)."""
        self.bound = np.full(self.model.n, np.inf) if bound is None else np.ascontiguousarray(bound, np.float64)

    def block(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
              pose: FloatArray | None, active: BoolArray) -> DynamicsOutputs:
        """A block of samples (the replay's): the compiled kernel row by row, the general path for
        flight and the rows the kernel declines only."""
        B = active.shape[0]
        out = np.full((B, self.kernel.size), np.nan)
        done = np.zeros(B, dtype=bool)
        tau_in = np.zeros(self.model.nv)  # the kernel's tau: zero on the base, each row's efforts
        net = None if effort is None else rigid_body_effort(self.model, v, effort, self.friction)
        efforts = [None] * B if net is None else [e if np.isfinite(e).all() else None for e in net]
        flying = np.asarray(~active.any(axis=-1))  # the general path's unconstrained outputs
        for b in range(B):
            tau = None
            if efforts[b] is not None:
                tau_in[self._nb:] = efforts[b]
                tau = tau_in
            done[b] = not flying[b] and self.kernel(q[b], v[b], a[b], tau, None if pose is None else pose[b],
                                                    active[b], out[b])
        if not done.any():
            return self.general(q, v, a, effort, pose, active)
        res = self._kernel_outputs(out, v, effort, active)
        if done.all():
            return res
        rest = ~done
        other = self.general(q[rest], v[rest], a[rest], None if effort is None else effort[rest],
                             None if pose is None else pose[rest], active[rest])
        for field, x in zip(res._fields, other):
            if isinstance(x, ContactChecks):
                for y, z in zip(res.checks, x):  # type: ignore[arg-type]
                    y[rest] = z
            elif x is not None:
                getattr(res, field)[rest] = x
        return res

    def general(self, q: FloatArray, v: FloatArray, a: FloatArray, effort: FloatArray | None,
                pose: FloatArray | None, active: BoolArray, ff_state: tuple[FloatArray, FloatArray] | None = None,
                fast: bool = True) -> DynamicsOutputs:
        """The outputs by the core's functions one by one: any batch, the reference state, and the
        samples the kernel declines; fast=False: their readable paths only."""
        model, friction = self.model, self.friction
        free = compute_outputs(model, q, v, a, effort, pose, ff_state=ff_state, friction=friction,
                               algorithms=None if fast else core.reference)
        wrench = np.zeros(active.shape + (6,))
        unbalanced = np.zeros(active.shape[:-1], dtype=bool)
        out = free._replace(contact_active=active, contact_wrench=wrench, tau_free=free.tau_ff)
        rows = np.asarray(active.any(axis=-1))
        take: Any = ... if active.ndim == 1 else rows  # one sample: all of it
        if rows.any():
            q_ff, v_ff = (q, v) if ff_state is None else ff_state
            at = None if pose is None else pose[take]
            tau_ff, tau_g = np.array(free.tau_ff), np.array(free.tau_g)
            rest = np.zeros_like(v[take])
            if active.ndim == 1:  # one sample: two calls on the core's single-sample compiled path
                motion = self.torques(q_ff, v_ff, a, at, active, fast)
                tau_g[take] = self.torques(q, rest, rest, at, active, fast)[0]
                tau_ff[take], lam, unbalanced[take] = motion
            else:  # a batch: the motion and the robot at rest (gravity) in one call, one constraint evaluation
                both = self.torques(np.stack((q_ff[take], q[take])), np.stack((v_ff[take], rest)),
                                    np.stack((a[take], rest)), None if at is None else np.stack((at, at)),
                                    np.stack((active[take], active[take])), fast)
                tau_ff[take], tau_g[take], lam, unbalanced[take] = both[0][0], both[0][1], both[1][0], both[2][0]
            if friction is not None:  # compensated on the contact-consistent torques too
                tau_ff[take] += core.friction_torque(friction, v_ff[take][..., self._nb:])
            wrench[take] = contact_wrenches(self.contacts, lam)  # an inactive contact's lam is zero
            out = out._replace(tau_ff=tau_ff, tau_g=tau_g)
            if effort is not None and free.qdd_pred is not None:
                out = constrained_predictions(model, self.contacts, q, v, rigid_body_effort(model, v, effort, friction),
                                              pose, active, rows, out, fast)
        if not rows.any():  # flight: check_forces flags active contacts only, so nothing to compute
            if active.ndim == 1:
                return out._replace(checks=ContactChecks(self.contacts.clear, self.contacts.clear, unbalanced))
            return out._replace(checks=ContactChecks(np.zeros(active.shape, dtype=bool),
                                                     np.zeros(active.shape, dtype=bool), unbalanced))
        pulling, slipping = check_wrenches(model, self.contacts, q, pose, wrench, active, fast)
        return out._replace(checks=ContactChecks(pulling, slipping, unbalanced))

    def torques(self, q: FloatArray, v: FloatArray, a: FloatArray, pose: FloatArray | None, active: BoolArray,
                fast: bool = True) -> tuple[FloatArray, FloatArray, BoolArray]:
        """(tau (..., n), lam (..., m), unbalanced (...,)): the joint torques and contact forces that
        realise (q, v, a), by core.constrained_rnea; where no contact force balances the base exactly
        (flagged unbalanced), the forces balance it in the least-squares sense and ``solution`` is
        taken among those (balance="least_squares", as the kernel does). fast=False: the core's
        readable paths only."""
        model, nb, cs, solution = self.model, self._nb, self.contacts.on(self.model), self.solution
        try:
            tau, lam = core.constrained_rnea(model, q, v, a, cs, base_pose=pose, active=active,
                                             solution=solution, tol=np.inf, fast=fast)
            return tau[..., nb:], lam, np.zeros(np.shape(q)[:-1], dtype=bool)
        except ValueError:  # the inputs passed compute_outputs: no force balances the base
            pass
        tau, lam = core.constrained_rnea(model, q, v, a, cs, base_pose=pose, active=active, solution=solution,
                                         tol=np.inf, balance="least_squares", fast=fast)
        tau_b = (core if fast else core.reference).rnea(model, q, v, a, base_pose=pose)[..., :nb]
        A_b = core.constraint_jacobian(model, q, cs, base_pose=pose, fast=fast)[..., :nb]
        gap = tau_b - np.einsum("...mi,...m->...i", A_b, lam)
        scale = np.maximum(1.0, np.abs(tau_b).max(axis=-1, initial=0.0))
        return tau[..., nb:], lam, np.abs(gap).max(axis=-1, initial=0.0) > UNBALANCED_RTOL * scale

    def _kernel_outputs(self, out: FloatArray, v: FloatArray, effort: FloatArray | None,
                        active: BoolArray) -> DynamicsOutputs:
        """DynamicsOutputs from the kernel's output rows (B, size) of a block."""
        tau_ff, tau_free = out[:, self._tau_ff], out[:, self._tau_free]
        if self.friction is not None:  # compensated on the contact-consistent torques too
            extra = core.friction_torque(self.friction, v[..., self._joints])
            tau_ff, tau_free = tau_ff + extra, tau_free + extra
        contacts = self.contacts
        k, forces = contacts.k, out[:, self._forces]
        pulling, slipping = check_forces(contacts, forces[:, :k], forces[:, k:], active)
        base, base_acc = self._base_wrench, self._base_acc
        return DynamicsOutputs(
            tau_ff, out[:, self._tau_g], None if effort is None else out[:, self._qdd],
            None if base is None else out[:, base], None if effort is None or base_acc is None else out[:, base_acc],
            active, out[:, self._wrench].reshape((out.shape[0], k, 6)), tau_free,
            ContactChecks(pulling, slipping, out[:, self._residual] > UNBALANCED_RTOL))


def compute_contact_outputs(model: Any, contacts: Contacts, q: FloatArray, v: FloatArray, a: FloatArray,
                            effort: FloatArray | None, base_pose: FloatArray | None, active: BoolArray, *,
                            solution: str = "min_torque", ff_state: tuple[FloatArray, FloatArray] | None = None,
                            friction: Any = None, algorithms: Any = None) -> DynamicsOutputs:
    """The contacts' route of ``model`` for one call (its kernel made for it): :class:`ContactRoute`'s
    outputs, a sample or a block, with the active contacts (..., k) holding their points still."""
    return ContactRoute(Dynamics(model, friction), contacts, solution).outputs(
        q, v, a, effort, base_pose, active, ff_state=ff_state, algorithms=algorithms)
