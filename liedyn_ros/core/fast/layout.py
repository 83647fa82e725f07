"""The model packed into two flat arrays for the compiled kernels, built once per model.

Numba's call overhead grows with every array argument (about 70 ns each), so a model travels as
one float array `mf` and one int array `mi`, and the single-sample workspace rides in `mf`:

    mf[i]   body i (0 <= i < nb):  R of M_i (row-major), p of M_i, S_i, J_i (row-major),
                                   mimic multiplier and offset (q_i = mult q_coord + offset),
                                   1 if i is the first body its coordinate drives,
                                   the axis of S_i (`joint_axis`),
                                   1 if i is the only body its coordinate drives
    mf[nb]  the base:              gravity (world frame), the pivots' scale (core.singular), 1 if every
                                   coordinate's bodies share one parent (ABA stays recursive),
                                   J_base
    mf[nb + 1:]                    the workspace of single-sample calls (`workspace`)
    mi[i]   body i:                lambda(i), the coordinate that drives it
    mi[nb]  sizes:                 n, nv
    links[k] link k of `FastModel.links`: the body it is merged into (-1: the root link), R and p
                                   of T_body_link (row-major): the table of the one-link wrench kernels

The column offsets below are compile-time constants inside the kernels. Single-sample kernels
take the model as one integer, `handle`: the address of a header (address of mf, its rows,
address of mi, its rows, address of links, its rows), from which `kinematics.model_arrays` and
`kinematics.link_table` rebuild the arrays.
"""
from __future__ import annotations

import numpy as np

from ..checks import check_model
from ..model import Model
from ..singular import inertia_scale

__all__ = ["FastModel", "fast_model", "RM", "PM", "SCREW", "INERTIA", "MULT", "OFFSET", "FIRST", "AXIS", "ALONE",
           "GRAVITY", "SCALE", "GROUPED", "PARENT", "COORD", "GENERAL", "WIDTH", "MI_WIDTH", "LINK_WIDTH", "HEADER"]

RM, PM, SCREW, INERTIA, MULT, OFFSET, FIRST, AXIS, ALONE = 0, 9, 12, 18, 54, 55, 56, 57, 58
# base row: gravity (3), inertia_scale (core.singular's rule), mimic groups share a parent
GRAVITY, SCALE, GROUPED = 0, 3, 4
WIDTH = 59
PARENT, COORD = 0, 1
MI_WIDTH = 2
LINK_WIDTH = 13  # body, R (9), p (3)
HEADER = 6  # entries of the handle's header
GENERAL = -1  # AXIS of a screw with more than one nonzero entry


class FastModel:
    """Kernel-ready arrays of one model and the workspace its single-sample calls reuse.

    The single-sample kernels hold the GIL (no nogil), so one workspace per model is safe.
    """

    def __init__(self, model: Model) -> None:
        nb = model.nb
        ws_rows = -(-workspace_size(nb, model.nv) // WIDTH)
        mf = np.zeros((nb + 1 + ws_rows, WIDTH))
        mf[:nb, RM:RM + 9] = model.M[:, :3, :3].reshape(nb, 9)
        mf[:nb, PM:PM + 3] = model.M[:, :3, 3]
        mf[:nb, SCREW:SCREW + 6] = model.S
        mf[:nb, INERTIA:INERTIA + 36] = model.J.reshape(nb, 36)
        coordinate = model.coordinate
        mf[:nb, MULT] = model.P[np.arange(nb), coordinate] if model.n else 0.0
        mf[:nb, OFFSET] = model.q_offset
        first, count = np.unique(coordinate, return_index=True, return_counts=True)[1:]
        mf[first, FIRST] = 1.0
        mf[first[count == 1], ALONE] = 1.0
        mf[:nb, AXIS] = [joint_axis(S) for S in model.S]
        mf[nb, GRAVITY:GRAVITY + 3] = model.gravity
        mf[nb, SCALE] = inertia_scale(model)
        mf[nb, GROUPED] = all(np.unique(model.parent[coordinate == k]).size == 1 for k in range(model.n))
        mf[nb, INERTIA:INERTIA + 36] = model.J_base.reshape(36)
        mi = np.zeros((nb + 1, MI_WIDTH), dtype=np.int64)
        mi[:nb, PARENT] = model.parent
        mi[:nb, COORD] = coordinate
        mi[nb] = model.n, model.nv
        # The links' row numbers for the one-link wrench kernels (rnea_link_one, hybrid_link_one).
        self.links = {link: k for k, link in enumerate(model.link_frames)}
        link_rows = np.zeros((max(1, len(self.links)), LINK_WIDTH))  # one row at least: a valid address
        for k, (body, T) in enumerate(model.link_frames.values()):
            link_rows[k] = body, *T[:3, :3].ravel(), *T[:3, 3]
        self.mf, self.mi, self._link_rows = mf, mi, link_rows
        self._header = np.array([mf.ctypes.data, mf.shape[0], mi.ctypes.data, mi.shape[0], link_rows.ctypes.data,
                                 len(self.links)], dtype=np.int64)
        self.handle = self._header.ctypes.data  # valid while self (holding mf, mi, link_rows, _header) lives
        self.n, self.nb, self.nv = model.n, nb, model.nv
        self.fixed = not model.floating_base
        self.ws_size = workspace_size(nb, model.nv)
        self.free = np.zeros(model.nv, dtype=bool)  # aba: nothing prescribed
        self.identity = np.eye(4)  # the base pose of a fixed base: gravity is given in its frame
        # f_body (B, nb, 6) and f_base (B, 6) of a batch without external wrenches
        self.no_body_force, self.no_base_force = np.zeros((0, nb, 6)), np.zeros((0, 6))


def joint_axis(S: np.ndarray) -> int:
    """The k with S = c e_k, or GENERAL.

    0 <= k < 3 is a revolute joint about a frame axis, 3 <= k < 6 a prismatic one along it: most
    robots' joints, whose f_i, S_i^T F and J S_i cost a fraction of a general screw's.
    """
    nonzero = np.flatnonzero(S)
    return int(nonzero[0]) if nonzero.size == 1 else GENERAL


def workspace_size(nb: int, nv: int) -> int:
    """Floats of scratch memory one sample of any kernel needs (see the `block`s each kernel takes).

    The last 6 (nb + 1) are the one-link wrench kernels' f_body and f_base (`kinematics.link_wrench`), the 16
    before them the identity pose of core.Data's fixed-base kernels (`kinematics.fixed_pose`): the kernels
    they call never reach these.
    """
    return 146 * (nb + 1) + 3 * nv * nv + 16 * nv + 64


def fast_model(model: Model) -> FastModel:
    """The packed arrays of `model`, built on the first call and kept on the model as `model._fast`,
    so that the kernels' callers read them as a plain instance-dictionary hit (`try: model._fast`,
    this function only when that raises). Copies made by dataclasses.replace start without them."""
    try:
        return model._fast
    except AttributeError:
        pass
    check_model(model)
    fm = FastModel(model)
    object.__setattr__(model, "_fast", fm)  # Model is frozen; the layout is no model field
    return fm
