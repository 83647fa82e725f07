"""The dynamics of a sample or a batch: core calls for feedforward, gravity and predictions.

compute_outputs is the open tree (pipeline.routes.free, and the unconstrained part of the other
routes); constrained_predictions the constrained routes' predicted accelerations."""
from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.pipeline.config import FloatArray
from liedyn_ros.pipeline.contacts import ContactChecks


class DynamicsOutputs(NamedTuple):
    """Core results for one sample (shape (n,)) or a batch (shape (N, n)).

    tau_ff: rnea joint torques; tau_g: gravity joint torques; qdd_pred: aba joint
    accelerations from the measured efforts less the friction compensated (None without
    efforts; NaN rows for batch rows without efforts). Floating base only: base_wrench = rnea's
    base part (m, f) in the base frame, the wrench the environment must apply to the base for
    this motion; base_acc_pred = aba's base part, dV_base/dt (omega', v') with the base unactuated.
    With contacts (pipeline.routes.contacts, .loops): tau_ff, tau_g and the predictions are the
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
