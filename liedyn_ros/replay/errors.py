"""Errors raised by the bag replay."""

from __future__ import annotations


class ReplayError(Exception):
    """A replay cannot go on: unreadable bag, missing URDF or topic, bad option.

    Problems with single messages (unknown types, bad samples, a damaged tail) are not
    errors: they are counted and reported, and the replay keeps what it could read.
    """
