"""Analytic derivatives and higher-order time derivatives of the dynamics.

    rnea_derivatives(model, q, v, a)            -> (dtau/dq, dtau/dv, dtau/da = M)
    aba_derivatives(model, q, v, tau)           -> (dqdd/dq, dqdd/dv, dqdd/dtau = M^-1)
    hybrid_derivatives(model, q, v, u, mask)    -> (dy/dq, dy/dv, dy/du)
    rnea_time_derivatives(model, q, [v, v', ..., v^(r+1)])   -> [tau, tau', ..., tau^(r)]
    aba_time_derivatives(model, q, v, [tau, ..., tau^(r)])   -> [a, a', ..., a^(r)]

For a floating base the q-derivative has 6 + n columns: the first six are along the body-frame
perturbation T_world_base exp([xi]), xi = (omega, v). Readable references live in
`first_order` (Kim Table 5) and `time_derivatives` (Leibniz-rule recursions, Ali et al.); the
numba kernels in `fast` and `time_fast` give the same numbers and run by default (fast=False
selects the references).
"""
from __future__ import annotations

from .api import (
    aba_derivatives,
    aba_time_derivatives,
    hybrid_derivatives,
    rnea_derivatives,
    rnea_time_derivatives,
)

__all__ = [
    "rnea_derivatives",
    "aba_derivatives",
    "hybrid_derivatives",
    "rnea_time_derivatives",
    "aba_time_derivatives",
]
