"""Constrained dynamics (Kim 2012, section 3): contacts and closed loops.

One module per stage: description (Contact, LoopClosure, ConstraintSet), jacobian (A, c),
forward (constrained_aba), inverse (constrained_rnea), hybrid (constrained_hybrid), terms
(constrained_terms: all of a sample at once), wrenches (friction-cone and pushing checks of contact forces).
"""
from __future__ import annotations

from .description import ConstraintSet, Contact, LoopClosure, constraint_set
from .forward import constrained_aba
from .hybrid import constrained_hybrid
from .inverse import constrained_rnea
from .jacobian import constraint_bias, constraint_frames, constraint_jacobian
from .terms import ConstrainedTerms, TermsKernel, TermsLayout, constrained_terms
from .wrenches import ContactCheck, constraint_wrenches, contact_forces, contact_wrench_checks, wrench_spread

__all__ = [
    "Contact",
    "LoopClosure",
    "ConstraintSet",
    "constraint_set",
    "constraint_jacobian",
    "constraint_bias",
    "constraint_frames",
    "constrained_aba",
    "constrained_rnea",
    "constrained_hybrid",
    "ConstrainedTerms",
    "TermsKernel",
    "TermsLayout",
    "constrained_terms",
    "ContactCheck",
    "constraint_wrenches",
    "contact_forces",
    "wrench_spread",
    "contact_wrench_checks",
]
