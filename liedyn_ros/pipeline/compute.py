"""The dynamics of a sample or a batch: core calls for feedforward, gravity and predictions."""
from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from liedyn_ros import core
from liedyn_ros.pipeline.config import FloatArray


class DynamicsOutputs(NamedTuple):
    """Core results for one sample (shape (n,)) or a batch (shape (N, n)).

    tau_ff: rnea joint torques; tau_g: gravity joint torques; qdd_pred: aba joint
    accelerations from the measured efforts (None without efforts; NaN rows for batch rows
    without efforts). Floating base only: base_wrench = rnea's base part (m, f) in the base
    frame, the wrench the environment must apply to the base for this motion;
    base_acc_pred = aba's base part, dV_base/dt (omega', v') with the base unactuated.
    (A NamedTuple: built once per message in the node, several times cheaper than a frozen
    dataclass.)
    """

    tau_ff: FloatArray
    tau_g: FloatArray
    qdd_pred: FloatArray | None = None
    base_wrench: FloatArray | None = None
    base_acc_pred: FloatArray | None = None

    def row(self, i: int) -> DynamicsOutputs:
        """Sample ``i`` of a batch (the replay builds one message set per row)."""
        def pick(x: FloatArray | None) -> FloatArray | None:
            return None if x is None else x[i]
        return DynamicsOutputs(
            self.tau_ff[i], self.tau_g[i], pick(self.qdd_pred),
            pick(self.base_wrench), pick(self.base_acc_pred),
        )


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
) -> DynamicsOutputs:
    """Feedforward, gravity and predicted accelerations, batched over leading dimensions.

    q: (..., n); v, a: (..., nv) with nv = n, or 6 + n with the base twist first (floating
    base, ``base_pose`` (..., 4, 4) required); effort: (..., n) measured joint torques or None
    (rows containing NaN are treated as "no effort" and give NaN predictions).
    ``ff_state = (q_ff, v_ff)`` evaluates the feedforward at another state (the reference
    trajectory) instead of (q, v). Returns joint-space parts of length n; the base parts go
    to ``base_wrench`` / ``base_acc_pred``. A single sample of contiguous float64 vectors
    takes the core's single-sample fast path (the node's case). ``friction`` adds its torque
    at the feedforward's joint velocities to tau_ff (friction compensation).
    """
    q_ff, v_ff = (q, v) if ff_state is None else ff_state
    tau_ff_full = core.rnea(model, q_ff, v_ff, a, base_pose=base_pose)
    if friction is not None:
        tau_ff_full[..., model.nv - model.n:] += core.friction_torque(friction, v_ff[..., model.nv - model.n:])
    tau_g_full = core.gravity(model, q, base_pose=base_pose)
    acc_full = _predict_accelerations(model, q, v, effort, base_pose)
    if not model.floating_base:
        return DynamicsOutputs(tau_ff_full, tau_g_full, acc_full)
    return DynamicsOutputs(
        tau_ff_full[..., 6:], tau_g_full[..., 6:],
        None if acc_full is None else acc_full[..., 6:],
        tau_ff_full[..., :6],
        None if acc_full is None else acc_full[..., :6],
    )


def _predict_accelerations(
    model: Any, q: FloatArray, v: FloatArray, effort: FloatArray | None, base_pose: FloatArray | None
) -> FloatArray | None:
    """aba with the measured efforts; the floating base gets zero generalized force."""
    if effort is None:
        return None
    if effort.ndim == 1:
        tau = np.concatenate((_NO_BASE_WRENCH, effort)) if model.floating_base else effort
        return core.aba(model, q, v, tau, base_pose=base_pose)
    # Batch: run aba only on rows that have efforts; the core rejects NaN by contract.
    effort = np.asarray(effort, dtype=np.float64)
    if model.floating_base:
        effort = np.concatenate([np.zeros(effort.shape[:-1] + (6,)), effort], axis=-1)
    valid = np.isfinite(effort).all(axis=-1)
    out = np.full(effort.shape, np.nan)
    if valid.any():
        out[valid] = core.aba(
            model, q[valid], v[valid], effort[valid],
            base_pose=None if base_pose is None else base_pose[valid],
        )
    return out


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
