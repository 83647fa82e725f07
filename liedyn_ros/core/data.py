"""Repeated single-sample calls with the checks done once: `Data(model)`, like Pinocchio's Data.

The plain functions (core.rnea, ...) check the model and the arguments' types at every call and
return new arrays, about 0.5 us of a 2 us call on a 7-DoF arm. A Data is made once per model
and loop: its methods hand the arguments straight to the compiled single-sample kernels (whose
locked signature refuses anything but float64 vectors, and which check lengths, NaN and the
pose themselves) and write into the Data's own output arrays, which every call overwrites.
Whatever the kernel refuses goes to the plain function, which raises its precise error (or
answers a list argument, copied into the Data's array); a batch is refused: use the plain
functions for batches.
"""
from __future__ import annotations

import numpy as np

from . import dynamics
from .checks import check_model
from .constraints import forward
from .constraints.description import constraint_set
from .fast import OK, fast_model
from .fast.entry import single
from .model import Model
from .reference.hybrid import _mask as check_prescribed

__all__ = ["Data"]

TOL = forward.TOL  # constrained_aba's default tolerance of |A v|


class Data:
    """Output arrays of one model's single-sample calls (Pinocchio's `Data`): ``data = Data(model)``.

    Each method computes what the plain function of its name does for one sample and returns the
    Data's array for it, overwritten by the next call of that method (copy it to keep it):

    - ``rnea(q, v, a, *, base_pose=None, f_ext=None)`` -> ``tau`` (nv,)
    - ``aba(q, v, tau, *, base_pose=None, f_ext=None)`` -> ``a`` (nv,)
    - ``gravity(q, *, base_pose=None)`` -> ``g`` (nv,)
    - ``mass_matrix(q, *, base_pose=None)`` -> ``M`` (nv, nv)
    - ``coriolis_matrix(q, v, *, base_pose=None)`` -> ``C`` (nv, nv)
    - ``hybrid(q, v, a_or_tau, prescribed, *, base_pose=None, f_ext=None)`` -> ``(tau, a)``
    - ``constrained_aba(q, v, tau, constraints, *, base_pose=None, active=None, baumgarte=None,
      tol=1e-6)`` -> ``(a, lam)``, lam (m,) of the constraint set (a new array when the set changes)

    Arguments as numpy float64 vectors take the fast path; anything else gives the plain
    function's answer or its error. The calls of one model share its compiled workspace and hold
    the GIL: one Data per thread is not needed, but a Data's arrays are shared by its callers.
    """

    def __init__(self, model: Model) -> None:
        check_model(model)
        fm = fast_model(model)
        self.model = model
        nv = model.nv
        self.tau, self.a, self.g = np.zeros(nv), np.zeros(nv), np.zeros(nv)
        self.M, self.C = np.zeros((nv, nv)), np.zeros((nv, nv))
        self._handle, self._fixed, self._identity, self._free = fm.handle, fm.fixed, fm.identity, fm.free
        self._scratch = np.zeros(nv)  # aba's tau, which its kernel writes too
        # A fixed base's rnea and gravity kernels take tau and g by address (numba unboxes an int for a fraction
        # of an array's cost): these arrays stay the Data's for its life (copy a result to keep it, never rebind).
        self._tau_at = self.tau.ctypes.data if self._fixed else None
        self._g_at = self.g.ctypes.data if self._fixed else None
        self._tau_own, self._g_own = self.tau, self.g  # what the addresses point to, kept alive
        self._link_rows = fm.links  # a wrench on one link: its row for the one-link kernels
        # wrenches on several links, in body frames: the links of the last f_ext and the rows they write (_wrenches)
        self._f_body, self._f_base = np.zeros((1, model.nb, 6)), np.zeros((1, 6))
        self._links, self._plan = None, []
        # constrained_aba: the last constraint set, its compiled arrays and lam; the default (kp, kd, tol)
        self._cs, self._fc, self.lam = None, None, np.zeros(0)
        self._params = forward._DEFAULT_PARAMS

    def rnea(self, q, v, a, *, base_pose=None, f_ext=None) -> np.ndarray:
        """core.rnea of one sample into (and returning) ``self.tau``."""
        if base_pose is None and self._fixed:
            try:
                if f_ext is None:
                    if single.rnea_fixed_at(self._handle, q, v, a, self._tau_at) == OK:
                        return self._tau_own
                elif type(f_ext) is dict and len(f_ext) == 1:
                    (link, w), = f_ext.items()  # (a for loop over the items costs twice as much)
                    if single.rnea_link_fixed_at(self._handle, q, v, a, w, self._link_rows.get(link, -1),
                                                 self._tau_at) == OK:
                        return self._tau_own
            except TypeError:
                pass
        if (base_pose is None) is self._fixed:
            T = self._identity if base_pose is None else base_pose
            try:
                if f_ext is None:
                    if single.rnea_one(self._handle, q, v, a, T, self.tau) == OK:
                        return self.tau
                elif type(f_ext) is dict and len(f_ext) == 1:  # one link (core.dynamics' one-link branch)
                    for link, w in f_ext.items():
                        if single.rnea_link_one(self._handle, q, v, a, T, w, self._link_rows.get(link, -1),
                                                self.tau) == OK:
                            return self.tau
                elif self._wrenches(f_ext) and single.rnea_wrench_one(self._handle, q, v, a, T, self._f_body,
                                                                      self._f_base, self.tau) == OK:
                    return self.tau
            except TypeError:  # not float64 vectors: the plain function answers or words the error
                pass
        return _copy_into(self.tau, dynamics.rnea(self.model, q, v, a, base_pose=base_pose, f_ext=f_ext), "rnea")

    def aba(self, q, v, tau, *, base_pose=None, f_ext=None) -> np.ndarray:
        """core.aba of one sample into (and returning) ``self.a``."""
        if (base_pose is None) is self._fixed and v is not self.a and tau is not self.a:  # see _copy_into
            T = self._identity if base_pose is None else base_pose
            try:
                if f_ext is None:
                    if single.hybrid_one(self._handle, q, v, tau, self._free, T, self._scratch, self.a) == OK:
                        return self.a
                elif type(f_ext) is dict and len(f_ext) == 1:
                    (link, w), = f_ext.items()
                    if single.hybrid_link_one(self._handle, q, v, tau, self._free, T, w,
                                              self._link_rows.get(link, -1), self._scratch, self.a) == OK:
                        return self.a
                elif self._wrenches(f_ext) and single.hybrid_wrench_one(
                        self._handle, q, v, tau, self._free, T, self._f_body, self._f_base, self._scratch,
                        self.a) == OK:
                    return self.a
            except TypeError:
                pass
        return _copy_into(self.a, dynamics.aba(self.model, q, v, tau, base_pose=base_pose, f_ext=f_ext), "aba")

    def gravity(self, q, *, base_pose=None) -> np.ndarray:
        """core.gravity of one sample into (and returning) ``self.g``."""
        if base_pose is None and self._fixed:
            try:
                if single.gravity_fixed_at(self._handle, q, self._g_at) == OK:
                    return self._g_own
            except TypeError:
                pass
        elif (base_pose is None) is self._fixed:
            try:
                if single.gravity_one(self._handle, q, self._identity if base_pose is None else base_pose,
                                      self.g) == OK:
                    return self.g
            except TypeError:
                pass
        return _copy_into(self.g, dynamics.gravity(self.model, q, base_pose=base_pose), "gravity")

    def mass_matrix(self, q, *, base_pose=None) -> np.ndarray:
        """core.mass_matrix of one sample into (and returning) ``self.M``."""
        if base_pose is None or not self._fixed:  # the pose is optional (M does not depend on it)
            try:
                if single.mass_matrix_one(self._handle, q, self._identity if base_pose is None else base_pose,
                                          self.M) == OK:
                    return self.M
            except TypeError:
                pass
        return _copy_into(self.M, dynamics.mass_matrix(self.model, q, base_pose=base_pose), "mass_matrix")

    def coriolis_matrix(self, q, v, *, base_pose=None) -> np.ndarray:
        """core.coriolis_matrix of one sample into (and returning) ``self.C``."""
        if base_pose is None or not self._fixed:
            try:
                if single.coriolis_one(self._handle, q, v, self._identity if base_pose is None else base_pose,
                                       self.C) == OK:
                    return self.C
            except TypeError:
                pass
        return _copy_into(self.C, dynamics.coriolis_matrix(self.model, q, v, base_pose=base_pose), "coriolis_matrix")

    def hybrid(self, q, v, a_or_tau, prescribed, *, base_pose=None, f_ext=None) -> tuple[np.ndarray, np.ndarray]:
        """core.hybrid of one sample into (and returning) ``(self.tau, self.a)``."""
        mask = check_prescribed(self.model, prescribed)
        tau_out, a_out = self.tau, self.a
        if ((base_pose is None) is self._fixed and v is not tau_out and v is not a_out and a_or_tau is not tau_out
                and a_or_tau is not a_out):
            T = self._identity if base_pose is None else base_pose
            try:
                if f_ext is None:
                    if single.hybrid_one(self._handle, q, v, a_or_tau, mask, T, self.tau, self.a) == OK:
                        return self.tau, self.a
                elif type(f_ext) is dict and len(f_ext) == 1:
                    for link, w in f_ext.items():
                        if single.hybrid_link_one(self._handle, q, v, a_or_tau, mask, T, w,
                                                  self._link_rows.get(link, -1), self.tau, self.a) == OK:
                            return self.tau, self.a
                elif self._wrenches(f_ext) and single.hybrid_wrench_one(
                        self._handle, q, v, a_or_tau, mask, T, self._f_body, self._f_base, self.tau,
                        self.a) == OK:
                    return self.tau, self.a
            except TypeError:
                pass
        tau, a = dynamics.hybrid(self.model, q, v, a_or_tau, mask, base_pose=base_pose, f_ext=f_ext)
        return _copy_into(self.tau, tau, "hybrid"), _copy_into(self.a, a, "hybrid")

    def constrained_aba(self, q, v, tau, constraints, *, base_pose=None, active=None, baumgarte=None,
                        tol: float = TOL) -> tuple[np.ndarray, np.ndarray]:
        """core.constrained_aba of one sample into (and returning) ``(self.a, self.lam)``."""
        cs = constraints if constraints is self._cs else self._use(constraints)
        fc = self._fc
        params = self._params if baumgarte is None and tol is TOL else forward.kernel_parameters(baumgarte, tol)
        if fc is not None and params is not None and (base_pose is None) is self._fixed and v is not self.a \
                and tau is not self.a:
            try:
                if single.constrained_aba_one(self._handle, fc.ci, fc.cf, fc.scratch, q, v, tau,
                                              self._identity if base_pose is None else base_pose,
                                              fc.all_active if active is None else active, params, self.a,
                                              self.lam) == OK:
                    return self.a, self.lam
            except TypeError:
                pass
        a, lam = forward.constrained_aba(self.model, q, v, tau, cs, base_pose=base_pose, active=active,
                                         baumgarte=baumgarte, tol=tol)
        return _copy_into(self.a, a, "constrained_aba"), _copy_into(self.lam, lam, "constrained_aba")

    def _use(self, constraints):
        """The constraint set of `constraints` (checked), with its own lam, for the calls that follow."""
        cs = constraint_set(self.model, constraints)
        if cs is not self._cs:
            self._cs, self._fc, self.lam = cs, cs._fast, np.zeros(cs.m)
        return cs

    def _wrenches(self, f_ext) -> bool:
        """f_ext into the Data's wrench buffers (body frames); False when the plain path must handle it.

        Which row each link writes is found once per tuple of links (`_plan_for`): the first link
        on a row sets it and later ones add to it, so the rows need no zeroing while the links stay
        the same (numpy's small operations cost a few tenths of a microsecond each).
        """
        if type(f_ext) is not dict:
            return False
        links = tuple(f_ext)
        if links != self._links and not self._plan_for(links):
            return False
        for w, (row, X, add) in zip(f_ext.values(), self._plan):
            if type(w) is not np.ndarray or w.shape != (6,):
                return False
            F = w if X is None else w @ X
            if add:
                row += F
            else:
                row[:] = F
        return True

    def _plan_for(self, links: tuple) -> bool:
        """(row view, X, adds) per link of `links` (model._wrench_maps); False for an unknown link."""
        maps, plan, rows = self.model._wrench_maps, [], set()
        for link in links:
            if link not in maps:
                return False
            body, X = maps[link]
            plan.append((self._f_base[0] if body < 0 else self._f_body[0, body], X, body in rows))
            rows.add(body)
        self._f_body.fill(0.0)
        self._f_base.fill(0.0)
        self._links, self._plan = links, plan
        return True


def _copy_into(out: np.ndarray, result: np.ndarray, name: str) -> np.ndarray:
    """The plain function's result of one sample in the Data's array `out`; a batch is refused.

    The methods whose kernels read their inputs while they write (aba, hybrid, constrained_aba)
    come here too when an input is one of the Data's output arrays (a result passed back in): the
    plain function writes new arrays.
    """
    if result.shape != out.shape:
        raise ValueError(f"Data.{name}: one sample at a time (got a batch of shape {result.shape[:-out.ndim]}); "
                         f"core.{name} takes batches")
    out[...] = result
    return out
