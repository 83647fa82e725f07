"""A node's contact sample in one compiled call: the constrained terms and the checks of what it publishes.

constrained_terms_one (constraints.fast) gives every term of a sample on contacts; a node then checks, before
it publishes them, that they are finite, that no torque exceeds its bound and whether every contact pushes
inside its friction cone. In numpy (or Python over lists) those checks cost more than the terms themselves at
these sizes (a dozen joints, four feet), so `contact_sample_one` makes them in the same call, on the same
values and in the same order as pipeline.stream and pipeline.contacts make them (their readable forms):

    finite:   the sum, output by output in the published order (tau_ff, tau_g, the joint accelerations,
              the base wrench, the base acceleration, the contact wrenches, tau_free), of each output's
              entries summed in order, is finite (a NaN, an infinity, or finite values whose sum overflows)
    in range: no |tau_j| > bound_j in tau_ff, tau_g or tau_free (NaN is in range)
    inside:   every contact's force along the ground normal is > 0 and its size across it <= mu times that

Sums of adds only, comparisons and one product each: no step a fused multiply-add could round otherwise, so
each verdict equals its readable form's for any values.
"""
from __future__ import annotations

import math

from ..fast.kinematics import BAD_INPUT, OK, model_arrays, sizes
from ..fast.spatial import ijit, jit
from .fast import constrained_terms_one

__all__ = ["contact_sample_one"]


@ijit
def span_sum(x, start, stop):
    """x[start] + ... + x[stop - 1] from 0.0, in order (Python's sum over a list of floats)."""
    s = 0.0
    for i in range(start, stop):
        s += x[i]
    return s


@ijit
def exceeds(x, start, bound):
    """Whether some |x[start + j]| > bound[j]."""
    for j in range(bound.shape[0]):
        if abs(x[start + j]) > bound[j]:
            return True
    return False


@jit
def contact_sample_one(handle, ci, cf, sc, q, v, a, effort, T, active, passive, w, min_force, has_tau, tol,
                       least_squares, up, bound, mu, tau, out, verdict):
    """constrained_terms_one with tau = [0 (base); effort] (written into tau, (nv,)), then verdict (3,) <-
    (finite, in range, inside the cones) of its outputs as the module docstring says; bound (n,) the torques'
    bounds (inf: none), mu the friction coefficient. Returns constrained_terms_one's status (the verdict is
    written on OK only); BAD_INPUT for wrong lengths of effort, bound, tau or verdict."""
    _, mi = model_arrays(handle)
    _, n, nv = sizes(mi)
    if effort.shape[0] != n or bound.shape[0] != n or tau.shape[0] != nv or verdict.shape[0] != 3:
        return BAD_INPUT
    nb = nv - n
    for i in range(nb):
        tau[i] = 0.0
    for j in range(n):
        tau[nb + j] = effort[j]
    status = constrained_terms_one(handle, ci, cf, sc, q, v, a, tau, T, active, passive, w, min_force, has_tau,
                                   tol, least_squares, up, out)
    if status != OK:
        return status
    k, m = ci[0], ci[1]
    # terms_size's layout: tau_r, tau, lam, tau_g, lam_g, a, lam_a, frames, normal, tangential, wrench, ...
    tau_r, tau_c, tau_g, acc = 0, nv, 2 * nv + m, 3 * nv + 2 * m
    normal = 4 * nv + 3 * m + 16 * k
    tangential, wrench = normal + k, normal + 2 * k
    total = 0.0
    total += span_sum(out, tau_c + nb, tau_c + nv)  # tau_ff
    total += span_sum(out, tau_g + nb, tau_g + nv)  # tau_g
    if has_tau:
        total += span_sum(out, acc + nb, acc + nv)  # the joint accelerations
    if nb > 0:
        total += span_sum(out, tau_r, tau_r + nb)  # the base wrench
        if has_tau:
            total += span_sum(out, acc, acc + nb)  # the base acceleration
    total += span_sum(out, wrench, wrench + 6 * k)  # the contact wrenches
    total += span_sum(out, tau_r + nb, tau_r + nv)  # tau_free
    verdict[0] = math.isfinite(total)
    verdict[1] = not (exceeds(out, tau_c + nb, bound) or exceeds(out, tau_g + nb, bound)
                      or exceeds(out, tau_r + nb, bound))
    inside = True
    for j in range(k):
        f = out[normal + j]
        if not (f > 0.0 and out[tangential + j] <= mu * f):
            inside = False
            break
    verdict[2] = inside
    return OK
