"""The dynamics of a sample or a batch: core calls for feedforward, gravity and predictions."""
from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import (
    ContactChecks, ContactPath, Contacts, check_forces, check_wrenches, contact_wrenches, inside_cones,
)


class DynamicsOutputs(NamedTuple):
    """Core results for one sample (shape (n,)) or a batch (shape (N, n)).

    tau_ff: rnea joint torques; tau_g: gravity joint torques; qdd_pred: aba joint
    accelerations from the measured efforts less the friction compensated (None without
    efforts; NaN rows for batch rows without efforts). Floating base only: base_wrench = rnea's
    base part (m, f) in the base frame, the wrench the environment must apply to the base for
    this motion; base_acc_pred = aba's base part, dV_base/dt (omega', v') with the base unactuated.
    With contacts (:func:`compute_contact_outputs`): tau_ff, tau_g and the predictions are the
    contact-consistent ones; contact_active (..., k); contact_wrench (..., k, 6) what each
    contact applies, (m, f) at the contact point in link axes, zero when inactive; tau_free
    the unconstrained tau_ff; checks the friction-cone and pulling violations.
    (A NamedTuple: built once per message in the node, several times cheaper than a frozen
    dataclass.)
    """

    tau_ff: FloatArray
    tau_g: FloatArray
    qdd_pred: FloatArray | None = None
    base_wrench: FloatArray | None = None
    base_acc_pred: FloatArray | None = None
    contact_active: NDArray[np.bool_] | None = None
    contact_wrench: FloatArray | None = None
    tau_free: FloatArray | None = None
    checks: ContactChecks | None = None

    def row(self, i: int) -> DynamicsOutputs:
        """Sample ``i`` of a batch (the replay builds one message set per row)."""
        def pick(x: Any) -> Any:
            if isinstance(x, ContactChecks):
                return ContactChecks(*(y[i] for y in x))
            return None if x is None else x[i]
        return DynamicsOutputs(*(pick(x) for x in self))


_NO_BASE_WRENCH = np.zeros(6)  # aba's base part of the generalized force: a free-floating base
# The base left unbalanced by more than this fraction of max(1, |tau_base|): no contact force realises
# the motion (least squares used).
UNBALANCED_RTOL = 1e-6
_BALANCED, _UNBALANCED = np.zeros((), dtype=bool), np.ones((), dtype=bool)  # checks.unbalanced of one sample
_BALANCED.flags.writeable = _UNBALANCED.flags.writeable = False


def compute_outputs(
    model: Any,
    q: FloatArray,
    v: FloatArray,
    a: FloatArray,
    effort: FloatArray | None,
    base_pose: FloatArray | None = None,
    *,
    ff_state: tuple[FloatArray, FloatArray] | None = None,
    friction: core.Friction | None = None,
    algorithms: Any = None,
    armature: FloatArray | None = None,
) -> DynamicsOutputs:
    """Feedforward, gravity and predicted accelerations, batched over leading dimensions.

    q: (..., n); v, a: (..., nv) with nv = n, or 6 + n with the base twist first (floating
    base, ``base_pose`` (..., 4, 4) required); effort: (..., n) measured joint torques or None
    (rows containing NaN are treated as "no effort" and give NaN predictions).
    ``ff_state = (q_ff, v_ff)`` evaluates the feedforward at another state (the reference
    trajectory) instead of (q, v). Returns joint-space parts of length n; the base parts go
    to ``base_wrench`` / ``base_acc_pred``. A single sample of contiguous float64 vectors
    takes the core's single-sample fast path (the node's case). ``friction`` adds its torque
    at the feedforward's joint velocities to tau_ff (friction compensation) and takes its torque at
    the measured joint velocities off the efforts the predictions start from (a motor's effort
    is what the bodies and the friction take together, as in the observer). ``armature`` (n,)
    (core.identification.Drive): the rotors' inertia on the diagonal of M, in tau_ff
    (+ armature * qdd) and in the predictions ((M + diag(armature)) qdd = tau - h). ``algorithms``
    supplies rnea, gravity and aba: the core (compiled kernels, None), or
    ``core.reference`` (the same results, no compilation) while the kernels are being built.
    """
    algorithms = core if algorithms is None else algorithms
    q_ff, v_ff = (q, v) if ff_state is None else ff_state
    tau_ff_full = algorithms.rnea(model, q_ff, v_ff, a, base_pose=base_pose)
    if friction is not None:
        tau_ff_full[..., model.nv - model.n:] += core.friction_torque(friction, v_ff[..., model.nv - model.n:])
    if armature is not None:
        tau_ff_full[..., model.nv - model.n:] += armature * a[..., model.nv - model.n:]
    tau_g_full = algorithms.gravity(model, q, base_pose=base_pose)
    net = None if effort is None else rigid_body_effort(model, v, effort, friction)
    acc_full = _predict_accelerations(model, q, v, net, base_pose, algorithms)
    if armature is not None and acc_full is not None:
        acc_full = _with_armature(model, q, acc_full, base_pose, armature, algorithms)
    if not model.floating_base:
        return DynamicsOutputs(tau_ff_full, tau_g_full, acc_full)
    return DynamicsOutputs(
        tau_ff_full[..., 6:], tau_g_full[..., 6:],
        None if acc_full is None else acc_full[..., 6:],
        tau_ff_full[..., :6],
        None if acc_full is None else acc_full[..., :6],
    )


def rigid_body_effort(model: Any, v: FloatArray, effort: FloatArray, friction: core.Friction | None) -> FloatArray:
    """The measured joint efforts (..., n) less the friction torque at the measured joint
    velocities: what accelerates the rigid bodies, tau - tau_f(qd) = M qdd + h (NaN rows stay NaN)."""
    if friction is None:
        return effort
    return effort - core.friction_torque(friction, v[..., model.nv - model.n:])


def _predict_accelerations(
    model: Any, q: FloatArray, v: FloatArray, effort: FloatArray | None, base_pose: FloatArray | None,
    algorithms: Any,
) -> FloatArray | None:
    """aba with the measured efforts; the floating base gets zero generalized force."""
    if effort is None:
        return None
    if effort.ndim == 1:
        tau = np.concatenate((_NO_BASE_WRENCH, effort)) if model.floating_base else effort
        return algorithms.aba(model, q, v, tau, base_pose=base_pose)
    # Batch: run aba only on rows that have efforts; the core rejects NaN by contract.
    effort = np.asarray(effort, dtype=np.float64)
    if model.floating_base:
        effort = np.concatenate([np.zeros(effort.shape[:-1] + (6,)), effort], axis=-1)
    valid = np.isfinite(effort).all(axis=-1)
    out = np.full(effort.shape, np.nan)
    if valid.any():
        out[valid] = algorithms.aba(
            model, q[valid], v[valid], effort[valid],
            base_pose=None if base_pose is None else base_pose[valid],
        )
    return out


def _with_armature(model: Any, q: FloatArray, acc: FloatArray, base_pose: FloatArray | None, armature: FloatArray,
                   algorithms: Any) -> FloatArray:
    """The accelerations with the rotors' inertia D = diag(armature), from aba's acc = M^-1 (tau - h):
    (M + D) a = M acc, so a = (1 + M^-1 D)^-1 acc. M^-1's joint columns come from aba at rest,
    M^-1 x = aba(q, 0, x + g(q)): the aba and gravity kernels the node has built already, single
    samples on their single-sample path. Batch rows with NaN stay NaN."""
    if acc.ndim > 1:
        ok = np.isfinite(acc).all(axis=-1)
        out = acc.copy()
        if ok.any():
            pose = None if base_pose is None else base_pose[ok]
            out[ok] = _armature_solve(model, q[ok], acc[ok], pose, armature, algorithms)
        return out
    return _armature_solve(model, q, acc, base_pose, armature, algorithms)


def _armature_solve(model: Any, q: FloatArray, acc: FloatArray, base_pose: FloatArray | None, armature: FloatArray,
                    algorithms: Any) -> FloatArray:
    g = algorithms.gravity(model, q, base_pose=base_pose)
    rest = np.zeros_like(acc)
    D = np.zeros(model.nv)
    D[model.nv - model.n:] = armature
    A = np.broadcast_to(np.eye(model.nv), acc.shape + (model.nv,)).copy()  # 1 + M^-1 D
    for j in np.flatnonzero(D):
        x = g.copy()
        x[..., j] += 1.0
        A[..., :, j] += D[j] * algorithms.aba(model, q, rest, x, base_pose=base_pose)
    return np.linalg.solve(A, acc[..., None])[..., 0]


def prepare_kernels(model: Any, *, batch: bool = False) -> float:
    """Run a robot at rest through compute_outputs, so that numba builds the compiled kernels (or
    loads them from its cache) now rather than on the first real sample; returns the seconds taken.

    The node's single samples and the replay's blocks (``batch=True``) use different kernels. The
    first run after an install compiles for about a minute on a 2-core machine; later runs load
    the cache in under a second. A model whose forward dynamics is undefined (a massless link on
    a moving joint) raises SingularInertiaError here, after rnea and gravity are built.
    """
    start = time.perf_counter()
    lead = (1,) if batch else ()
    q, tau = np.zeros(lead + (model.n,)), np.zeros(lead + (model.n,))
    v = np.zeros(lead + (model.nv,))
    pose = np.broadcast_to(np.eye(4), lead + (4, 4)).copy() if model.floating_base else None
    compute_outputs(model, q, v, v, tau, pose)
    return time.perf_counter() - start


def compute_contact_outputs(
    model: Any,
    contacts: Contacts,
    q: FloatArray,
    v: FloatArray,
    a: FloatArray,
    effort: FloatArray | None,
    base_pose: FloatArray | None,
    active: NDArray[np.bool_],
    *,
    solution: str = "min_torque",
    ff_state: tuple[FloatArray, FloatArray] | None = None,
    friction: Any = None,
    algorithms: Any = None,
) -> DynamicsOutputs:
    """:func:`compute_outputs` with the active contacts (..., k) holding their points still.

    tau_ff: core.constrained_rnea (M a + h = [0; tau] + A^T lam, the base passive, ``solution``
    among many); tau_g: the same at rest; predictions: core.constrained_aba with the measured
    efforts. Samples without an active contact (flight) keep the unconstrained outputs: the
    base then falls freely. base_wrench stays the unconstrained one: the wrench the contacts
    apply to the base in total. Measured states are never exactly on the contacts, so the
    contact velocity is not checked (tol=inf); when no contact force balances the base (two
    feet and a rotation about the line through them in the estimated acceleration), the forces
    balance it in the least-squares sense (``solution`` taken among those) and the sample is
    flagged ``checks.unbalanced``. ``friction`` and ``algorithms`` as in :func:`compute_outputs`
    (``core.reference``: the core's functions with fast=False, no compiled code at all, while the
    kernels are being built).
    """
    if algorithms is not None:
        return _general_contact_outputs(model, contacts, q, v, a, effort, base_pose, np.asarray(active, dtype=bool),
                                        solution, ff_state, friction, fast=False)
    if ff_state is None and type(active) is np.ndarray and active.ndim == 1:  # the kernel declines flight
        one = _one_contact_sample(model, contacts, q, v, a, effort, base_pose, active, solution, friction)
        if one is not None:
            return one
    active = np.asarray(active, dtype=bool)
    if ff_state is None and active.ndim == 2 and np.ndim(q) == 2:
        return _contact_batch(model, contacts, q, v, a, effort, base_pose, active, solution, friction)
    return _general_contact_outputs(model, contacts, q, v, a, effort, base_pose, active, solution, ff_state,
                                    friction)


def _contact_batch(model: Any, contacts: Contacts, q: FloatArray, v: FloatArray, a: FloatArray,
                   effort: FloatArray | None, base_pose: FloatArray | None, active: NDArray[np.bool_],
                   solution: str, friction: Any) -> DynamicsOutputs:
    """A block of samples (the replay's): the compiled kernel per sample, the general path for flight
    and the samples the kernel declines only."""
    path = contacts.path(model, solution)
    B, nb = active.shape[0], model.nv - model.n
    out = np.full((B, path.kernel.size), np.nan)
    done = np.zeros(B, dtype=bool)
    tau_in = path.tau.copy()
    net = None if effort is None else rigid_body_effort(model, v, effort, friction)
    efforts = [None] * B if net is None else [e if np.isfinite(e).all() else None for e in net]
    flying = np.asarray(~active.any(axis=-1))  # the general path's unconstrained outputs
    for b in range(B):
        tau = None
        if efforts[b] is not None:
            tau_in[nb:] = efforts[b]
            tau = tau_in
        done[b] = not flying[b] and path.kernel(q[b], v[b], a[b], tau, None if base_pose is None else base_pose[b],
                                                active[b], out[b])
    if not done.any():
        return _general_contact_outputs(model, contacts, q, v, a, effort, base_pose, active, solution, None,
                                        friction)
    res = _kernel_outputs(contacts, path, out, v, effort, active, friction)
    if done.all():
        return res
    rest = ~done
    other = _general_contact_outputs(
        model, contacts, q[rest], v[rest], a[rest], None if effort is None else effort[rest],
        None if base_pose is None else base_pose[rest], active[rest], solution, None, friction)
    for field, x in zip(res._fields, other):
        if isinstance(x, ContactChecks):
            for y, z in zip(res.checks, x):  # type: ignore[arg-type]
                y[rest] = z
        elif x is not None:
            getattr(res, field)[rest] = x
    return res


def _general_contact_outputs(model: Any, contacts: Contacts, q: FloatArray, v: FloatArray, a: FloatArray,
                             effort: FloatArray | None, base_pose: FloatArray | None, active: NDArray[np.bool_],
                             solution: str, ff_state: tuple[FloatArray, FloatArray] | None,
                             friction: Any, fast: bool = True) -> DynamicsOutputs:
    """compute_contact_outputs by the core's functions one by one: any batch, the reference source,
    and the samples the compiled sample declines; fast=False: their readable paths only."""
    free = compute_outputs(model, q, v, a, effort, base_pose, ff_state=ff_state, friction=friction,
                           algorithms=None if fast else core.reference)
    wrench = np.zeros(active.shape + (6,))
    unbalanced = np.zeros(active.shape[:-1], dtype=bool)
    out = free._replace(contact_active=active, contact_wrench=wrench, tau_free=free.tau_ff)
    rows = np.asarray(active.any(axis=-1))
    take: Any = ... if active.ndim == 1 else rows  # one sample: all of it
    if rows.any():
        q_ff, v_ff = (q, v) if ff_state is None else ff_state
        pose = None if base_pose is None else base_pose[take]
        tau_ff, tau_g = np.array(free.tau_ff), np.array(free.tau_g)
        rest = np.zeros_like(v[take])
        if active.ndim == 1:  # one sample: two calls on the core's single-sample compiled path
            motion = contact_torques(model, contacts, q_ff, v_ff, a, pose, active, solution, fast)
            tau_g[take] = contact_torques(model, contacts, q, rest, rest, pose, active, solution, fast)[0]
            tau_ff[take], lam, unbalanced[take] = motion
        else:  # a batch: the motion and the robot at rest (gravity) in one call, one constraint evaluation
            both = contact_torques(
                model, contacts, np.stack((q_ff[take], q[take])), np.stack((v_ff[take], rest)),
                np.stack((a[take], rest)), None if pose is None else np.stack((pose, pose)),
                np.stack((active[take], active[take])), solution, fast)
            tau_ff[take], tau_g[take], lam, unbalanced[take] = both[0][0], both[0][1], both[1][0], both[2][0]
        if friction is not None:  # compensated on the contact-consistent torques too
            tau_ff[take] += core.friction_torque(friction, v_ff[take][..., model.nv - model.n:])
        wrench[take] = contact_wrenches(contacts, lam)  # an inactive contact's lam is zero
        out = out._replace(tau_ff=tau_ff, tau_g=tau_g)
        if effort is not None and free.qdd_pred is not None:
            out = constrained_predictions(model, contacts, q, v, rigid_body_effort(model, v, effort, friction),
                                          base_pose, active, rows, out, fast)
    pulling, slipping = check_wrenches(model, contacts, q, base_pose, wrench, active, fast)
    return out._replace(checks=ContactChecks(pulling, slipping, unbalanced))


def _one_contact_sample(model: Any, contacts: Contacts, q: FloatArray, v: FloatArray, a: FloatArray,
                        effort: FloatArray | None, base_pose: FloatArray | None, active: NDArray[np.bool_],
                        solution: str, friction: Any) -> DynamicsOutputs | None:
    """One sample in contact by the compiled core.TermsKernel: every term on one evaluation of the
    contacts (the node's case), least-squares forces where none balances the base. None for flight
    and where the kernel cannot answer: the general path then does."""
    if True not in active.tolist():  # flight: the general path's unconstrained outputs
        return None
    path = contacts.path(model, solution)
    out = np.empty(path.kernel.size)
    tau_in = None
    if effort is not None:
        tau_in = path.tau
        tau_in[path.joints] = rigid_body_effort(model, v, effort, friction)
    if not path.kernel(q, v, a, tau_in, base_pose, active, out):
        return None
    return _kernel_outputs(contacts, path, out, v, effort, active, friction)


def _kernel_outputs(contacts: Contacts, path: ContactPath, out: FloatArray, v: FloatArray, effort: FloatArray | None,
                    active: NDArray[np.bool_], friction: Any) -> DynamicsOutputs:
    """DynamicsOutputs from core.TermsKernel's output, one sample (size,) or rows (B, size)."""
    one = out.ndim == 1  # the node's case: plain indexing (numpy scalars, no Ellipsis) at every sample
    pick: Any = out.__getitem__ if one else (lambda s: out[:, s])
    tau_ff, tau_free = pick(path.tau_ff), pick(path.tau_free)
    if friction is not None:  # compensated on the contact-consistent torques too
        extra = core.friction_torque(friction, v[..., path.joints])
        tau_ff, tau_free = tau_ff + extra, tau_free + extra
    k, forces, residual = contacts.k, pick(path.forces), pick(path.residual)
    if one and inside_cones(contacts, forces.tolist()):  # most samples: every foot inside its cone
        pulling = slipping = contacts.clear
    else:
        pulling, slipping = check_forces(contacts, forces[..., :k], forces[..., k:], active)
    unbalanced = (_UNBALANCED if residual > UNBALANCED_RTOL else _BALANCED) if one else residual > UNBALANCED_RTOL
    base = path.base_wrench
    return DynamicsOutputs(
        tau_ff, pick(path.tau_g), None if effort is None else pick(path.qdd), None if base is None else pick(base),
        None if effort is None or path.base_acc is None else pick(path.base_acc), active,
        pick(path.wrench).reshape(out.shape[:-1] + (k, 6)), tau_free, ContactChecks(pulling, slipping, unbalanced))


def contact_torques(model: Any, contacts: Contacts, q: FloatArray, v: FloatArray, a: FloatArray,
                    base_pose: FloatArray | None, active: NDArray[np.bool_], solution: str, fast: bool = True
                    ) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """(tau (..., n), lam (..., m), unbalanced (...,)): the joint torques and contact forces that
    realise (q, v, a), by core.constrained_rnea; where no contact force balances the base exactly
    (flagged unbalanced), the forces balance it in the least-squares sense and ``solution`` is
    taken among those (balance="least_squares", as the compiled contact sample does). fast=False:
    the core's readable paths only."""
    nb, cs = model.nv - model.n, contacts.on(model)
    try:
        tau, lam = core.constrained_rnea(model, q, v, a, cs, base_pose=base_pose, active=active,
                                         solution=solution, tol=np.inf, fast=fast)
        return tau[..., nb:], lam, np.zeros(np.shape(q)[:-1], dtype=bool)
    except ValueError:  # the inputs passed compute_outputs: no force balances the base
        pass
    tau, lam = core.constrained_rnea(model, q, v, a, cs, base_pose=base_pose, active=active, solution=solution,
                                     tol=np.inf, balance="least_squares", fast=fast)
    tau_b = (core if fast else core.reference).rnea(model, q, v, a, base_pose=base_pose)[..., :nb]
    A_b = core.constraint_jacobian(model, q, cs, base_pose=base_pose)[..., :nb]
    gap = tau_b - np.einsum("...mi,...m->...i", A_b, lam)
    scale = np.maximum(1.0, np.abs(tau_b).max(axis=-1, initial=0.0))
    return tau[..., nb:], lam, np.abs(gap).max(axis=-1, initial=0.0) > UNBALANCED_RTOL * scale


def constrained_predictions(model: Any, contacts: Any, q: FloatArray, v: FloatArray, effort: FloatArray,
                            base_pose: FloatArray | None, active: NDArray[np.bool_], rows: NDArray[np.bool_],
                            out: DynamicsOutputs, fast: bool = True) -> DynamicsOutputs:
    """constrained_aba on the rows in contact that have efforts (the base passive; ``effort`` less
    any friction compensated, see rigid_body_effort); ``contacts`` a Contacts or a loops.Loops
    (their constraint set ``on(model)``); fast=False: its readable path."""
    assert out.qdd_pred is not None
    nb = model.nv - model.n
    tau = np.concatenate((np.zeros(effort.shape[:-1] + (nb,)), effort), axis=-1)
    sel: Any = ...
    if effort.ndim > 1:
        sel = rows & np.isfinite(effort).all(axis=-1)
        if not sel.any():
            return out
    acc, _ = core.constrained_aba(model, q[sel], v[sel], tau[sel], contacts.on(model), tol=np.inf, fast=fast,
                                  base_pose=None if base_pose is None else base_pose[sel], active=active[sel])
    qdd = np.array(out.qdd_pred)
    qdd[sel] = acc[..., nb:]
    if out.base_acc_pred is None:
        return out._replace(qdd_pred=qdd)
    base = np.array(out.base_acc_pred)
    base[sel] = acc[..., :nb]
    return out._replace(qdd_pred=qdd, base_acc_pred=base)
