"""Contacts: resolved on the model, their state per sample, and the checks of their forces.

A contact sits on a link at the point p (``contact_offsets``, link axes): "point" holds that
point still (3 constraint rows, lam = force f in the link's axes), "flat" holds the whole frame
still (6 rows, lam = wrench (m, f) about p). Which contacts are active comes from a
:class:`~liedyn_ros.pipeline.config.ContactSource`; topic and wrench states are paired with a
joint state by stamp like odometry (the latest, no further than ``contact_max_age``).
"""
from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from liedyn_ros import core
from liedyn_ros.pipeline.config import NS_PER_S, FloatArray, PipelineConfig, SkipReason
from liedyn_ros.pipeline.decode import as_float_array, stamp_to_ns

BoolArray = NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class Contacts:
    """The configured contacts of one model, checked against it once.

    links, kinds: per contact; offsets (k, 3): contact points in link axes; constraints: the
    ``core.Contact`` list in the same order; rows (k + 1,): row ranges of lam; up (3,): the
    ground normal, against gravity; mu: friction coefficient. spread (6k, m): lam -> the k
    wrenches (m, f) at the contact points, stacked; to_link (6k, 6k): stacked wrenches @ to_link
    are the same about the link origins (matrices: one product per sample or batch, where a loop over the
    contacts costs a microsecond per contact). soles (k, 2): half-lengths (x, y) of the flat
    contacts' soles, zero where not checked (point contacts too), None when no sole is checked.
    """

    links: tuple[str, ...]
    kinds: tuple[str, ...]
    offsets: FloatArray
    constraints: tuple[Any, ...]
    rows: NDArray[np.intp]
    up: FloatArray
    mu: float
    spread: FloatArray
    to_link: FloatArray
    soles: FloatArray | None = None
    _sets: weakref.WeakKeyDictionary[Any, Any] = field(default_factory=weakref.WeakKeyDictionary, repr=False)

    @property
    def k(self) -> int:
        return len(self.links)

    @functools.cached_property
    def clear(self) -> BoolArray:
        """(k,) False, read-only: the flags of a sample without violations (one array; the node
        tells such a sample by identity, without looking)."""
        out = np.zeros(self.k, dtype=bool)
        out.flags.writeable = False
        return out

    @functools.cached_property
    def at_origins(self) -> bool:
        """Whether every contact point is its link's origin (offsets zero): the wrenches about the
        contact points are those about the link origins."""
        return not self.offsets.any()

    def on(self, model: Any) -> Any:
        """The contacts as a core.ConstraintSet of ``model`` (the dynamics model may change, with a
        payload), built once per model: the core then skips resolving the list on every call."""
        cs = self._sets.get(model)
        if cs is None:
            cs = self._sets[model] = core.constraint_set(model, list(self.constraints))
        return cs


def resolve_contacts(model: Any, config: PipelineConfig) -> Contacts | None:
    """The contacts of ``config`` on ``model``; None without contacts. Raises ValueError
    naming the parameter for a link the model does not have."""
    links = config.contact_links
    if not links:
        return None
    k = len(links)
    unknown = [link for link in links if link not in model.link_frames]
    if unknown:
        raise ValueError(f"contact_links: {unknown} are not links of the model "
                         f"(it has {sorted(model.link_frames)})")
    kinds = config.contact_types * k if len(config.contact_types) == 1 else config.contact_types
    offsets = np.asarray(config.contact_offsets, dtype=np.float64).reshape(-1, 3)
    offsets = np.broadcast_to(offsets, (k, 3)).copy()
    poses = np.tile(np.eye(4), (k, 1, 1))
    poses[:, :3, 3] = offsets
    constraints = tuple(core.Contact(link, kind, pose) for link, kind, pose in zip(links, kinds, poses))
    g = np.asarray(model.gravity, dtype=np.float64)
    norm = float(np.linalg.norm(g))
    up = -g / norm if norm > 0 else np.array([0.0, 0.0, 1.0])  # no gravity: world z is up
    cs = core.constraint_set(model, list(constraints))
    rows = np.asarray(cs.rows, dtype=np.intp)
    to_link = np.eye(6 * k)
    for i in range(k):
        px, py, pz = offsets[i]
        to_link[6 * i:6 * i + 3, 6 * i + 3:6 * i + 6] = [[0.0, -pz, py], [pz, 0.0, -px], [-py, px, 0.0]]  # m + p x f
    return Contacts(tuple(links), tuple(kinds), offsets, constraints, rows, up, float(config.friction_coefficient),
                    core.wrench_spread(cs), np.ascontiguousarray(to_link.T), _soles(kinds, config))


def _soles(kinds: tuple[str, ...], config: PipelineConfig) -> FloatArray | None:
    """(k, 2) sole half-lengths per contact from ``contact_sole_size`` (flat contacts only)."""
    flat = iter(config.flat_soles())
    soles = np.array([next(flat) if kind == "flat" else (0.0, 0.0) for kind in kinds], dtype=np.float64)
    return soles if soles.any() else None


# --------------------------------------------------------------------------------------
# Contact state from messages
# --------------------------------------------------------------------------------------


class ContactState(NamedTuple):
    """Which contacts are active, from a message stamped ``stamp_ns``; ``wrench`` (k, 6) holds
    the measured wrenches (m, f) at the contact points in link axes, when sensors gave them."""

    stamp_ns: int
    active: BoolArray
    wrench: FloatArray | None = None


def decode_contact_flags(msg: Any, k: int, stamp_ns: int) -> ContactState | SkipReason:
    """A std_msgs ``*MultiArray`` of k flags in ``contact_links`` order (> 0.5: in contact, so
    0/1 integers and contact probabilities both work), or its ``data`` alone (an array:
    pipeline.cdr.read_uint8_multiarray's). The arrays have no header: the caller stamps them
    (receive time)."""
    flags = msg if isinstance(msg, np.ndarray) else msg.data
    if type(flags) is np.ndarray and flags.dtype == np.uint8:  # the node's: integers, finite, > 0.5 where not 0
        return ContactState(stamp_ns, flags != 0) if flags.shape == (k,) else SkipReason.BAD_CONTACT_STATE
    flags = as_float_array(flags)
    if flags.shape != (k,) or not np.isfinite(flags).all():
        return SkipReason.BAD_CONTACT_STATE
    return ContactState(stamp_ns, flags > 0.5)


def decode_contact_wrench(msg: Any, offset: FloatArray) -> tuple[int, FloatArray] | SkipReason:
    """geometry_msgs/WrenchStamped of a foot sensor, expressed in the contact link's frame
    -> (stamp, wrench (m, f) about the contact point ``offset``: m - p x f)."""
    w = msg.wrench
    f = [float(w.force.x), float(w.force.y), float(w.force.z)]
    m = [float(w.torque.x), float(w.torque.y), float(w.torque.z)]
    if not math.isfinite(sum(f) + sum(m)):
        return SkipReason.BAD_CONTACT_STATE
    force = np.array(f)
    return stamp_to_ns(msg.header.stamp), np.concatenate((np.array(m) - np.cross(offset, force), force))


class WrenchSensors:
    """The latest wrench of every contact's sensor; a contact is active when |f| exceeds the
    threshold. Paired as a whole: every sensor must have spoken within ``max_age``."""

    def __init__(self, contacts: Contacts, threshold: float) -> None:
        self._contacts, self._threshold = contacts, threshold
        self._stamps = np.zeros(contacts.k, dtype=np.int64)
        self._wrench = np.zeros((contacts.k, 6))
        self._seen = np.zeros(contacts.k, dtype=bool)

    def update(self, index: int, msg: Any) -> SkipReason | None:
        decoded = decode_contact_wrench(msg, self._contacts.offsets[index])
        if isinstance(decoded, SkipReason):
            return decoded
        self._stamps[index], self._wrench[index] = decoded
        self._seen[index] = True
        return None

    def state(self, stamp_ns: int, max_age_s: float) -> ContactState | SkipReason:
        if not self._seen.all():
            return SkipReason.NO_CONTACT_STATE
        if (np.abs(stamp_ns - self._stamps) > max_age_s * NS_PER_S).any():
            return SkipReason.STALE_CONTACT_STATE
        force = np.linalg.norm(self._wrench[:, 3:], axis=1)
        return ContactState(stamp_ns, force > self._threshold, self._wrench.copy())


def pair_contact_state(stamp_ns: int, state: ContactState | None, max_age_s: float) -> ContactState | SkipReason:
    """The contact state for a joint state stamped ``stamp_ns``: the rule of :func:`pair_odometry`."""
    if state is None:
        return SkipReason.NO_CONTACT_STATE
    if abs(stamp_ns - state.stamp_ns) > max_age_s * NS_PER_S:
        return SkipReason.STALE_CONTACT_STATE
    return state


# --------------------------------------------------------------------------------------
# Kinematics of the contact frames: the kinematic estimate and the force checks
# --------------------------------------------------------------------------------------


def contact_frames(model: Any, contacts: Contacts, q: FloatArray, base_pose: FloatArray | None,
                   fast: bool = True) -> FloatArray:
    """World poses T_world_C of the contact frames, (..., k, 4, 4) (core.constraint_frames)."""
    return core.constraint_frames(model, q, contacts.on(model), base_pose=base_pose, fast=fast)


def kinematic_contacts(contacts: Contacts, T_wc: FloatArray, point_velocity: FloatArray,
                       config: PipelineConfig) -> BoolArray:
    """Active where the contact point is within ``contact_height`` above the ground plane
    (height along ``up`` above ``ground_height``) and moves slower than ``contact_speed``.
    T_wc (..., k, 4, 4); point_velocity (..., k, 3) in any orthonormal axes."""
    height = T_wc[..., :3, 3] @ contacts.up - config.ground_height
    speed = np.linalg.norm(point_velocity, axis=-1)
    return np.asarray((height < config.contact_height) & (speed < config.contact_speed))


def contact_wrenches(contacts: Contacts, lam: FloatArray) -> FloatArray:
    """lam (..., m) stacked per contact -> (..., k, 6) wrenches (m, f) at the contact points in
    link axes (a point contact's moment is zero)."""
    return (lam @ contacts.spread.T).reshape(np.shape(lam)[:-1] + (contacts.k, 6))


def stacked_forces(contacts: Contacts, wrench: FloatArray) -> FloatArray:
    """Inverse of :func:`contact_wrenches`: (..., k, 6) -> lam (..., m)."""
    wrench = np.asarray(wrench)
    return wrench.reshape(wrench.shape[:-2] + (6 * contacts.k,)) @ contacts.spread


def wrench_at_link(contacts: Contacts, wrench: FloatArray) -> FloatArray:
    """(..., k, 6) wrenches at the contact points -> the same wrenches about the link origins
    (m + p x f, f), for messages whose frame is the contact link (``wrench`` itself, not a copy,
    when every offset is zero)."""
    if contacts.at_origins:  # the node's usual feet: no product at every sample
        return wrench
    shape = wrench.shape  # methods, not np.reshape: the node calls this at every sample
    return (wrench.reshape(shape[:-2] + (6 * contacts.k,)) @ contacts.to_link).reshape(shape)


# The base left unbalanced by more than this fraction of max(1, |tau_base|): no constraint force
# realises the motion (least squares used; ContactChecks.unbalanced).
UNBALANCED_RTOL = 1e-6


class ContactChecks(NamedTuple):
    """Violations, never hidden: per contact (..., k) pulling (normal force < 0) and slipping
    (outside the friction cone, |tangential| > mu normal), active contacts only; per sample
    (...,) unbalanced (no contact force realises the motion; least squares used)."""

    pulling: BoolArray
    slipping: BoolArray
    unbalanced: BoolArray


def check_forces(contacts: Contacts, normal: FloatArray, tangential: FloatArray,
                 active: BoolArray) -> tuple[BoolArray, BoolArray]:
    """(pulling, slipping) (..., k) of the contact forces split against the ground normal ``up``
    (core.contact_forces; the core's contact_wrench_checks takes the contact frame's z as the
    normal, which a point foot on a rotating shank does not keep)."""
    # A small tolerance keeps rounding at an unloaded contact from counting as a violation.
    tol = 1e-9 * (1.0 + np.abs(normal) + tangential)
    pulling = active & (normal < -tol)
    slipping = active & ~pulling & (tangential > contacts.mu * normal + tol)
    return np.asarray(pulling), np.asarray(slipping)


def check_forces_one(contacts: Contacts, normal: FloatArray, tangential: FloatArray,
                     active: BoolArray) -> tuple[BoolArray, BoolArray]:
    """check_forces of one sample ((k,) arrays). A force along the normal above zero and a size across
    it at most mu times that is neither pulling nor slipping by check_forces' tolerances, so when every
    active contact passes that, in Python floats (a sample's few contacts: cheaper than numpy's calls),
    the verdict is contacts.clear without check_forces."""
    mu = contacts.mu
    if all(not on or (f > 0.0 and t <= mu * f) for on, f, t in zip(active.tolist(), normal.tolist(),
                                                                      tangential.tolist())):
        return contacts.clear, contacts.clear
    return check_forces(contacts, normal, tangential, active)


def centre_of_pressure(wrench: FloatArray) -> FloatArray:
    """The centre of pressure (..., 2) of flat-contact wrenches (..., 6), (m, f) about the contact
    point in the contact frame (z the sole normal): the point of the sole plane about which the
    wrench has no tangential moment,

        p_x = -m_y / f_z,   p_y = m_x / f_z

    (forces f_i at sole points p_i give m = sum p_i x f_i, so m_x = sum p_y f_z and m_y = -sum p_x f_z:
    p is their f_z-weighted centroid). NaN where f_z = 0.
    """
    m, fz = wrench[..., :3], wrench[..., 5]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.stack((-m[..., 1] / fz, m[..., 0] / fz), axis=-1)


def check_tipping(contacts: Contacts, wrench: FloatArray, active: BoolArray, pulling: BoolArray) -> BoolArray:
    """Tipping (..., k): active flat contacts with a sole (``contacts.soles``), not pulling, whose
    centre of pressure lies outside the sole |p_x| <= a, |p_y| <= b, i.e. whose tangential moment
    no pressure on the sole carries: |m_y| > a f_z or |m_x| > b f_z (the form holds at f_z = 0 too).
    wrench (..., k, 6) as :attr:`DynamicsOutputs.contact_wrench`."""
    if contacts.soles is None:
        return np.zeros(np.shape(active), dtype=bool)
    fz = wrench[..., 5]
    a, b = contacts.soles[:, 0], contacts.soles[:, 1]
    tol = 1e-9 * (1.0 + np.abs(fz))  # rounding at an unloaded sole is no violation
    outside = (np.abs(wrench[..., 1]) > a * fz + tol) | (np.abs(wrench[..., 0]) > b * fz + tol)
    return np.asarray(active & ~pulling & (a > 0) & outside)


def check_wrenches(model: Any, contacts: Contacts, q: FloatArray, base_pose: FloatArray | None,
                   wrench: FloatArray, active: BoolArray, fast: bool = True) -> tuple[BoolArray, BoolArray]:
    """:func:`check_forces` of contact wrenches (..., k, 6) at the configuration q (frames computed here)."""
    T_wc = contact_frames(model, contacts, q, base_pose, fast)
    normal, tangential = core.contact_forces(contacts.on(model), stacked_forces(contacts, wrench), T_wc, contacts.up)
    return check_forces(contacts, normal, tangential, active)


def forces_closest_to(tau_full: FloatArray, A: FloatArray, target: FloatArray, n_base: int,
                      active_rows: BoolArray) -> FloatArray:
    """Contact forces lam (..., m) whose torques come closest to ``target`` (..., n):

        min |target - (tau_j - A_j^T lam)|  subject to  tau_b = A_b^T lam,

    tau_full = [tau_b; tau_j] the unconstrained RNEA, A = [A_b A_j] (..., m, nv) and inactive
    rows held at zero. The base rows are weighted 1e6 above the joint rows: their residual is
    then least squares on its own when the contacts cannot carry the base wrench exactly.
    """
    A = np.where(active_rows[..., None], A, 0.0)
    At = np.swapaxes(A, -1, -2)  # (..., nv, m)
    rhs = np.concatenate((tau_full[..., :n_base], tau_full[..., n_base:] - target), axis=-1)
    weight = np.ones(At.shape[-2])
    weight[:n_base] = 1e6
    lam = np.linalg.pinv(weight[:, None] * At) @ (weight * rhs)[..., None]
    return lam[..., 0]


def joint_torques(tau_full: FloatArray, A: FloatArray, lam: FloatArray, n_base: int) -> FloatArray:
    """tau = tau_j - A_j^T lam, the joint torques that realise the motion with forces lam."""
    return tau_full[..., n_base:] - np.einsum("...mi,...m->...i", A[..., n_base:], lam)

