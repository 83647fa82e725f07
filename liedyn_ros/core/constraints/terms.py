"""Every term of a constrained sample at once: what a controller or a replay needs of a robot on contacts."""
from __future__ import annotations

import functools
import weakref
from typing import NamedTuple

import numpy as np

from .. import dynamics as core_dynamics, reference
from ..fast import OK, fast_model
from ..fast.entry import single
from ..model import Model
from .description import constraint_set
from .fast import terms_size
from .forward import constrained_aba
from .inverse import BALANCES, SOLUTIONS, constrained_rnea, kernel_arguments, passive_mask
from .jacobian import constraint_frames, constraint_jacobian
from .state import per_sample
from .wrenches import constraint_wrenches, contact_forces

__all__ = ["CheckedTermsKernel", "ConstrainedTerms", "TermsKernel", "TermsLayout", "constrained_terms", "terms_layout"]


class ConstrainedTerms(NamedTuple):
    """The terms of :func:`constrained_terms`; shapes for a batch of leading dimensions (...)."""

    tau_r: np.ndarray  # (..., nv) rnea(q, v, a): the unconstrained generalized forces
    tau: np.ndarray  # (..., nv) constrained_rnea(q, v, a), zero on the passive coordinates
    lam: np.ndarray  # (..., m) its constraint forces
    tau_g: np.ndarray  # (..., nv) constrained_rnea(q, 0, 0): holding the robot still
    lam_g: np.ndarray  # (..., m) its constraint forces
    a: np.ndarray | None  # (..., nv) constrained_aba(q, v, tau_in); None without tau_in
    lam_a: np.ndarray | None  # (..., m) its constraint forces
    frames: np.ndarray  # (..., k, 4, 4) constraint_frames(q): world poses of the constraint frames
    normal: np.ndarray  # (..., k) each contact's force in lam along the ground normal up (NaN: a loop closure)
    tangential: np.ndarray  # (..., k) and its size across it: the friction the contact must hold
    wrench: np.ndarray  # (..., k, 6) lam per constraint as a wrench (m, f) in its lam axes (a point's m zero)
    residual: np.ndarray  # (...,) |A_p^T lam - tau_r,p|_inf / max(1, |tau_r,p|_inf): 0 when lam balances
    residual_g: np.ndarray  # (...,) the same of lam_g (nonzero only with balance="least_squares")


def constrained_terms(model: Model, q, v, a, constraints, *, tau=None, base_pose=None, active=None, passive=None,
                      solution: str = "min_torque", weights=None, up=None, tol: float = 1e-6,
                      balance: str = "exact", fast: bool = True) -> ConstrainedTerms:
    """rnea, constrained_rnea in motion and at rest, constrained_aba and constraint_frames of one state.

        tau_r        = rnea(q, v, a)
        (tau, lam)   = constrained_rnea(q, v, a)      M a + b = tau + A^T lam, tau_p = 0   (Kim 3.1)
        (tau_g, lam_g) = constrained_rnea(q, 0, 0)    the torques that hold the robot still
        (a, lam_a)   = constrained_aba(q, v, tau)     M a + b = tau + A^T lam, A a + c = 0  (Kim 3.2)
        frames       = constraint_frames(q)
        normal, tangential = contact_forces(lam, frames, up)
        wrench       = constraint_wrenches(lam)
        residual, residual_g: how far lam, lam_g are from balancing the passive coordinates

    balance="least_squares" (constrained_rnea's) takes the forces that balance the passive coordinates
    in the least-squares sense where none does exactly, and says by how much in residual, residual_g;
    "exact" raises then.

    The arguments are those of constrained_rnea (tau: the generalized forces of the forward dynamics,
    (..., nv), or None to leave a and lam_a out; up (3,): the ground normal in world axes, a unit vector,
    by default against the model's gravity). Each result equals that function's; together they share
    one evaluation of A(q) and c and one factorisation per minimiser, which the compiled path (contacts on
    a model without mimic joints, a solution other than "unique") exploits: on Solo12 with four feet the
    whole sample costs about what constrained_aba alone does. Anything else takes the functions one by one,
    and so raises what they raise.
    """
    if solution not in SOLUTIONS:
        raise ValueError(f"solution: expected one of {SOLUTIONS}, got {solution!r}")
    if balance not in BALANCES:
        raise ValueError(f"balance: expected one of {BALANCES}, got {balance!r}")
    cs = constraint_set(model, constraints)
    up = _up(model, up)
    if fast and cs._fast is not None and solution != "unique":
        out = _fast(model, cs, q, v, a, tau, base_pose, active, passive, solution, weights, up, tol, balance)
        if out is not None:
            return out
    common = dict(base_pose=base_pose, active=active, tol=tol, fast=fast)
    inverse = dict(passive=passive, solution=solution, weights=weights, balance=balance, **common)
    tau_c, lam = constrained_rnea(model, q, v, a, cs, **inverse)
    rest = np.zeros(np.shape(v))
    tau_g, lam_g = constrained_rnea(model, q, rest, rest, cs, **inverse)
    acc = lam_a = None
    if tau is not None:
        acc, lam_a = constrained_aba(model, q, v, tau, cs, **common)
    frames = constraint_frames(model, q, cs, base_pose=base_pose, fast=fast)
    normal, tangential = contact_forces(cs, lam, frames, up)
    dynamics = core_dynamics if fast else reference  # fast=False: no compiled code at all
    tau_r = dynamics.rnea(model, q, v, a, base_pose=base_pose)
    A = np.where(cs.row_mask(active)[..., None], constraint_jacobian(model, q, cs, base_pose=base_pose, fast=fast),
                 0.0)
    p = passive_mask(model, passive)
    return ConstrainedTerms(tau_r, tau_c, lam, tau_g, lam_g, acc, lam_a, frames, normal, tangential,
                            constraint_wrenches(cs, lam), _residual(A, lam, tau_r, p),
                            _residual(A, lam_g, dynamics.gravity(model, q, base_pose=base_pose), p))


def _residual(A: np.ndarray, lam: np.ndarray, tau_r: np.ndarray, passive: np.ndarray) -> np.ndarray:
    """|A_p^T lam - tau_r,p|_inf / max(1, |tau_r,p|_inf), (...,)."""
    gap = np.einsum("...ri,...r->...i", A, lam)[..., passive] - tau_r[..., passive]
    return np.abs(gap).max(axis=-1, initial=0.0) / np.maximum(1.0, np.abs(tau_r[..., passive]).max(axis=-1,
                                                                                                  initial=0.0))


_UP: "weakref.WeakKeyDictionary[Model, np.ndarray]" = weakref.WeakKeyDictionary()


def _up(model: Model, up) -> np.ndarray:
    """The ground normal: a unit (3,) vector, by default -g / |g| (world z without gravity), made once per model."""
    if up is None:
        out = _UP.get(model)
        if out is None:
            g = np.asarray(model.gravity, dtype=float)
            norm = float(np.linalg.norm(g))
            out = _UP[model] = -g / norm if norm > 0 else np.array([0.0, 0.0, 1.0])
        return out
    out = np.ascontiguousarray(up, dtype=float)
    if out.shape != (3,) or not abs(sum(x * x for x in out.tolist()) - 1.0) < 1e-9:
        raise ValueError(f"up: expected a unit vector (3,) in world axes, got {up!r}")
    return out


class TermsLayout(NamedTuple):
    """Where each term of ConstrainedTerms sits in TermsKernel's output vector (frames: k 4x4 row-major,
    wrench: k 6-vectors, residual and residual_g: one entry each)."""

    tau_r: slice
    tau: slice
    lam: slice
    tau_g: slice
    lam_g: slice
    a: slice
    lam_a: slice
    frames: slice
    normal: slice
    tangential: slice
    wrench: slice
    residual: slice
    residual_g: slice


@functools.lru_cache(maxsize=64)
def terms_layout(nv: int, m: int, k: int) -> TermsLayout:
    sizes = (nv, nv, m, nv, m, nv, m, 16 * k, k, k, 6 * k, 1, 1)
    ends = np.cumsum(sizes).tolist()
    return TermsLayout(*(slice(end - size, end) for size, end in zip(sizes, ends)))


class TermsKernel:
    """constrained_terms of single samples with its arguments checked once, for a loop that calls it at
    every sample (a node): ``kernel(q, v, a, tau, base_pose, active, out)`` writes the terms into ``out``, a
    float64 vector of ``kernel.size`` laid out as ``kernel.layout``, and returns True. False means the
    compiled path cannot answer (not float64 vectors, loop closures, a singular minimiser, a state off the
    constraints): constrained_terms with the same arguments then gives the terms or words the error.
    tau None leaves a and lam_a NaN. The arguments of the constructor are constrained_terms'.
    """

    def __init__(self, model: Model, constraints, *, passive=None, solution: str = "min_torque", weights=None,
                 up=None, tol: float = 1e-6, balance: str = "exact") -> None:
        if solution not in SOLUTIONS:
            raise ValueError(f"solution: expected one of {SOLUTIONS}, got {solution!r}")
        if balance not in BALANCES:
            raise ValueError(f"balance: expected one of {BALANCES}, got {balance!r}")
        self.model = model
        self.constraints = cs = constraint_set(model, constraints)
        self.up = _up(model, up)
        self.layout = terms_layout(model.nv, cs.m, cs.k)
        self.size = terms_size(model.nv, cs.m, cs.k)
        self._static = None
        args = kernel_arguments(model, cs, passive, solution, weights, tol) if cs._fast is not None else None
        if args is not None and solution != "unique":
            fm, fc = fast_model(model), cs._fast
            self._static = (single.constrained_terms_one, fm.handle, fc.ci, fc.cf, fc.scratch, *args,
                            balance == "least_squares", self.up, fm.fixed, fm.identity, fc.all_active)

    def __call__(self, q, v, a, tau, base_pose, active, out) -> bool:
        if self._static is None:
            return False
        kernel, handle, ci, cf, scratch, p, w, min_force, tol, least_squares, up, fixed, identity, all_active = \
            self._static
        if (base_pose is None) is not fixed:
            return False
        try:
            return kernel(handle, ci, cf, scratch, q, v, a, a if tau is None else tau,
                          identity if base_pose is None else base_pose, all_active if active is None else active,
                          p, w, min_force, tau is not None, tol, least_squares, up, out) == OK
        except TypeError:  # not float64 vectors, a bool mask, a batch: constrained_terms
            return False


def _split(out: np.ndarray, layout: TermsLayout, has_tau: bool) -> ConstrainedTerms:
    """The terms as views of the kernel's output (..., terms_size) (slices: np.split costs ten times more)."""
    lead, L = out.shape[:-1], layout
    return ConstrainedTerms(out[..., L.tau_r], out[..., L.tau], out[..., L.lam], out[..., L.tau_g], out[..., L.lam_g],
                            out[..., L.a] if has_tau else None, out[..., L.lam_a] if has_tau else None,
                            out[..., L.frames].reshape(lead + (-1, 4, 4)), out[..., L.normal], out[..., L.tangential],
                            out[..., L.wrench].reshape(lead + (-1, 6)), out[..., L.residual.start],
                            out[..., L.residual_g.start])


def _fast(model: Model, cs, q, v, a, tau, base_pose, active, passive, solution, weights, up, tol, balance):
    """The compiled path (TermsKernel, per sample for a batch): the terms, or None to let the functions
    one by one answer (or raise)."""
    kernel = TermsKernel(model, cs, passive=passive, solution=solution, weights=weights, up=up, tol=tol,
                         balance=balance)
    has_tau = tau is not None
    if np.ndim(q) == 1:
        out = np.empty(kernel.size)
        return _split(out, kernel.layout, has_tau) if kernel(q, v, a, tau, base_pose, active, out) else None
    vectors = {"v": v, "a": a} if tau is None else {"v": v, "a": a, "tau": tau}
    fixed = fast_model(model).fixed

    def step(qb, vb, ab, *rest):  # rest: (tau_b,) pose_b, active_b, out_b; per_sample's poses are the identity
        done = kernel(qb, vb, ab, rest[0] if has_tau else None, None if fixed else rest[-3], rest[-2], rest[-1])
        return OK if done else OK + 1

    out = per_sample(model, cs, q, vectors, base_pose, active, (kernel.size,), step)
    return None if out is None else _split(out[0], kernel.layout, has_tau)


class CheckedTermsKernel(TermsKernel):
    """A TermsKernel (its constructor's arguments) whose :meth:`checked` also gives the verdict of
    `constraints.fast_sample.contact_sample_one` on the terms, for a node that checks them before it
    publishes them."""

    def __init__(self, model: Model, constraints, **options) -> None:
        super().__init__(model, constraints, **options)
        self._tau = np.zeros(model.nv)  # the kernel's tau input, written by it from the efforts
        self._no_effort = np.zeros(model.n)

    def checked(self, q, v, a, effort, base_pose, active, bound, mu: float, out, verdict) -> bool:
        """Like the call (tau = [0; effort], effort (n,) or None) into ``out`` of ``self.size``, and verdict
        (3,) int64 <- (finite, in range, inside) against bound (n,) and mu; False as the call, verdict then
        unwritten."""
        static = self._static
        if static is None:
            return False
        _, handle, ci, cf, scratch, p, w, min_force, tol, least_squares, up, fixed, identity, all_active = static
        if (base_pose is None) is not fixed or type(q) is not np.ndarray:
            return False
        has_tau = effort is not None
        try:
            return single.contact_sample_one(handle, ci, cf, scratch, q, v, a, effort if has_tau else self._no_effort,
                                             identity if base_pose is None else base_pose,
                                             all_active if active is None else active, p, w, min_force, has_tau, tol,
                                             least_squares, up, bound, mu, self._tau, out, verdict) == OK
        except TypeError:  # not float64 vectors, a bool mask, a batch: the caller's other path
            return False

