"""Forward dynamics of a constrained system (Kim 2012, section 3.2, eqs. 67-69)."""
from __future__ import annotations

import weakref

import numpy as np

from ..dynamics import aba
from ..model import Model
from .state import setup, solve_psd

__all__ = ["constrained_aba", "unforced"]

_UNFORCED: "weakref.WeakKeyDictionary[Model, Model]" = weakref.WeakKeyDictionary()


def unforced(model: Model) -> Model:
    """The model without gravity: aba(unforced, q, 0, f) = M^-1 f, Kim's simplified solve."""
    out = _UNFORCED.get(model)
    if out is None:
        out = _UNFORCED[model] = model.with_gravity((0.0, 0.0, 0.0))
    return out


def baumgarte_terms(terms, baumgarte) -> np.ndarray:
    """kd A v + kp e, the feedback that pulls a drifting state back onto the constraints."""
    if baumgarte is None:
        return 0.0
    kp, kd = (float(x) for x in baumgarte)
    if not (kp >= 0 and kd >= 0):
        raise ValueError(f"baumgarte: expected gains (kp, kd) >= 0, got {baumgarte!r}")
    return kd * terms.Av + kp * terms.e


def constrained_aba(model: Model, q, v, tau, constraints, *, base_pose=None, f_ext=None, active=None,
                    baumgarte=None, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """(a, lam) of  M a + b = tau + A^T lam,  A a + c = 0  (Kim eqs. 54, 67-69).

        a_r = aba(q, v, tau)                         the open tree's answer
        Y   = M^-1 A^T                               m articulated-body solves of unit forces
        (A M^-1 A^T) lam = -(A a_r + c [+ kd A v + kp e])                            (67)
        a   = a_r + Y lam                                                            (68-69)

    Shapes: q (..., n), v and tau (..., nv) -> a (..., nv), lam (..., m). lam is what each
    constraint applies to the robot, in its frame (a force (3,) or a wrench (m, f) (6,)), zero for
    an inactive one. A rank-deficient A (redundant contacts) still gives the unique a and the
    least-norm lam. active: booleans (..., k), one per constraint (default all). baumgarte: gains
    (kp, kd) of the feedback above (kp acts on loop closures' position error). tol: the largest
    |A v| and loop position error accepted (ValueError beyond, saying which constraint and how far).
    """
    pb = setup(model, q, {"v": v, "tau": tau}, constraints, base_pose, active, tol)
    B, t = pb.batch.q.shape[0], pb.terms
    a_r = aba(model, q, v, tau, base_pose=base_pose, f_ext=f_ext).reshape(B, model.nv)
    pose = pb.pose()
    Y = aba(unforced(model), pb.batch.q[:, None, :], np.zeros(model.nv), t.A,
            base_pose=None if pose is None else pose[:, None])  # (B, m, nv): row i = (M^-1 A^T)_i
    K = t.A @ np.swapaxes(Y, -1, -2)
    lam = -solve_psd(K, np.einsum("bij,bj->bi", t.A, a_r) + t.c + baumgarte_terms(t, baumgarte))
    a = a_r + np.einsum("bi,bij->bj", lam, Y)
    return pb.restore(a), pb.restore(lam)
