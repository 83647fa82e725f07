"""Hybrid dynamics of a constrained system (Kim 2012, section 3.3, eqs. 70-80)."""
from __future__ import annotations

import numpy as np

from ..dynamics import hybrid, hybrid_batch
from ..fast import fast_model
from ..model import Model
from ..reference.hybrid import _mask as check_prescribed
from .forward import baumgarte_terms, unforced, unit_solves
from .state import setup, solve_psd

__all__ = ["constrained_hybrid"]

# A a + c left over beyond this fraction of max(1, |A a_r + c|) means the prescribed accelerations
# leave no motion the constraints allow.
COMPATIBLE_RTOL = 1e-8


def constrained_hybrid(model: Model, q, v, a_or_tau, prescribed, constraints, *, base_pose=None, f_ext=None,
                       active=None, baumgarte=None, tol: float = 1e-6, fast: bool = True
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau, a, lam): accelerations given where `prescribed` (u), forces elsewhere (v), constrained.

        (tau_ur, a_r) = hybrid(q, v, (a_u, tau_v))          the open tree's answer     (77)
        (tau_uc, Y)   = hybrid of the unit forces (a_u = 0, tau_v = A_v^T e_i), no gravity or velocity
        (A_v M_vv^-1 A_v^T) lam = -(A a_r + c [+ kd A v + kp e])                      (76)
        a_v = a_rv + Y lam,   tau_u = tau_ur + tau_uc lam - A_u^T lam                (79-80)

    With nothing prescribed this is constrained_aba. If the constraints outnumber the free
    coordinates (m > n_v) lam is the least-norm one, and prescribed accelerations that leave no
    admissible motion raise ValueError. Shapes as `hybrid`, plus lam (..., m). Contacts get A and c
    from the compiled kernel (constraints.fast) unless fast=False.
    """
    mask = check_prescribed(model, prescribed)
    pb = setup(model, q, {"v": v, "a_or_tau": a_or_tau}, constraints, base_pose, active, tol, fast)
    B, t = pb.batch.q.shape[0], pb.terms
    # setup has checked the batch: without f_ext it goes to the kernel unchecked (a singular inertia: the public
    # call raises it)
    out = hybrid_batch(fast_model(model), pb.batch, mask) if fast and f_ext is None else None
    if out is None:
        out = hybrid(model, q, v, a_or_tau, mask, base_pose=base_pose, f_ext=f_ext)
    tau_r, a_r = (x.reshape(B, model.nv) for x in out)
    unit = np.where(mask, 0.0, t.A)  # (B, m, nv): a_u = 0, tau_v = row i of A_v
    units = unit_solves(model, pb, unit, mask) if fast else None
    if units is None:
        pose = pb.pose()
        units = hybrid(unforced(model), pb.batch.q[:, None, :], np.zeros(model.nv), unit, mask,
                       base_pose=None if pose is None else pose[:, None])
    tau_c, Y = units
    K = t.A @ np.swapaxes(Y, -1, -2)
    rhs = np.einsum("bij,bj->bi", t.A, a_r) + t.c + baumgarte_terms(t, baumgarte)
    lam = -solve_psd(K, rhs, fast and pb.cs._fast is None)  # compiled for loop sets, as constrained_aba's
    a = a_r + np.einsum("bi,bij->bj", lam, Y)
    left = np.abs(np.einsum("bij,bj->bi", t.A, a) + t.c + baumgarte_terms(t, baumgarte)).max(axis=-1, initial=0.0)
    if np.any(left > COMPATIBLE_RTOL * np.maximum(1.0, np.abs(rhs).max(axis=-1, initial=0.0))):
        raise ValueError(f"prescribed: the prescribed accelerations leave no motion the constraints allow "
                         f"(|A a + c| = {float(left.max()):.3g} remains)")
    tau_u = tau_r + np.einsum("bi,bij->bj", lam, tau_c) - np.einsum("bij,bi->bj", t.A, lam)
    tau = np.where(mask, tau_u, tau_r)
    return pb.restore(tau), pb.restore(a), pb.restore(lam)
