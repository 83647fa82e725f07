"""Input checks at the boundary of every algorithm: clear ValueErrors, never garbage out.

`prepare` validates and broadcasts the arguments of an algorithm call and flattens the leading
batch dimensions, so that the algorithms work on arrays of shape (B, ...) only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import Model

__all__ = ["Batch", "prepare", "check_model", "check_vector", "check_pose", "check_f_ext"]


def check_model(model) -> None:
    """TypeError naming the argument when `model` is not a Model (a URDF path, a Pinocchio model)."""
    if not isinstance(model, Model):
        hint = ": load it first, model = load_urdf(...)" if isinstance(model, str) else ""
        raise TypeError(f"model: expected a liedyn_ros.core.Model (from load_urdf), got {type(model).__name__}{hint}")


def check_vector(name: str, x, length: int) -> np.ndarray:
    """x as a float array of shape (..., length) with finite entries, else ValueError."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not an array of numbers ({exc})") from exc
    if arr.ndim == 0 or arr.shape[-1] != length:
        raise ValueError(f"{name}: expected length {length} in the last dimension, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return arr


def check_pose(name: str, T, tol: float = 1e-6) -> np.ndarray:
    """T as a (..., 4, 4) homogeneous matrix in SE(3), else ValueError."""
    try:
        arr = np.asarray(T, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not an array of numbers ({exc})") from exc
    if arr.ndim < 2 or arr.shape[-2:] != (4, 4):
        raise ValueError(f"{name}: expected shape (..., 4, 4), got {arr.shape}")
    if arr.size <= 16 * FEW_POSES and all(_in_se3(T, tol) for T in arr.reshape(-1, 4, 4).tolist()):
        return arr
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    R = arr[..., :3, :3]
    if np.max(np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)), initial=0.0) > tol:
        raise ValueError(f"{name}: rotation part is not orthonormal (R R^T != I)")
    if np.min(np.linalg.det(R), initial=1.0) < 0:
        raise ValueError(f"{name}: rotation part has determinant -1 (a reflection, not in SE(3))")
    if np.max(np.abs(arr[..., 3, :] - np.array([0.0, 0.0, 0.0, 1.0])), initial=0.0) > tol:
        raise ValueError(f"{name}: last row must be [0, 0, 0, 1]")
    return arr


# Up to this many poses are checked in plain floats first (microseconds, where numpy's dozen calls take tens):
# a pose passes there only if the numpy checks below pass it too, and these word every refusal.
FEW_POSES = 4


def _in_se3(T: list, tol: float) -> bool:
    """check_pose's tests of one pose (4 rows of 4 floats), True where it passes them all: finite, R R^T = I
    (its six distinct entries), det R > 0 and the last row [0, 0, 0, 1], each within tol."""
    (a, b, c, x), (d, e, f, y), (g, h, i, z), (r, s, t, u) = T
    if not all(map(math.isfinite, (a, b, c, x, d, e, f, y, g, h, i, z, r, s, t, u))):
        return False
    return (max(abs(a * a + b * b + c * c - 1.0), abs(d * d + e * e + f * f - 1.0), abs(g * g + h * h + i * i - 1.0),
                abs(a * d + b * e + c * f), abs(a * g + b * h + c * i), abs(d * g + e * h + f * i)) <= tol
            and a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g) >= 0.0
            and max(abs(r), abs(s), abs(t), abs(u - 1.0)) <= tol)


def check_f_ext(model: Model, f_ext) -> dict[str, np.ndarray]:
    if f_ext is None:
        return {}
    if not isinstance(f_ext, dict):
        raise ValueError("f_ext: expected a dict mapping link names to wrenches (m, f)")
    out = {}
    for link, w in f_ext.items():
        if link not in model.link_frames:
            raise ValueError(f"f_ext: unknown link {link!r}")
        out[link] = check_vector(f"f_ext[{link!r}]", w, 6)
    return out


@dataclass
class Batch:
    """Arguments of one call, validated, broadcast and flattened to a batch of B samples."""

    shape: tuple[int, ...]  # the caller's leading batch shape, restored on output
    q: np.ndarray  # (B, n)
    vectors: list[np.ndarray]  # each (B, nv)
    base_pose: np.ndarray  # (B, 4, 4), or (1, 4, 4) for every sample; the identity for a fixed base
    f_body: np.ndarray | None  # (B, nb, 6) external wrenches on the bodies, in body frames
    f_base: np.ndarray | None  # (B, 6) external wrench on the root link (floating base only)

    def restore(self, x: np.ndarray) -> np.ndarray:
        """Give x of shape (B, ...) the caller's batch shape back."""
        return x.reshape(self.shape + x.shape[1:])


def prepare(model: Model, q, vectors: dict[str, object] | None = None, *, base_pose=None,
            f_ext=None, needs_pose: bool = True) -> Batch:
    """Validate (model, q, vectors..., base_pose, f_ext) and flatten their common batch dimensions."""
    check_model(model)
    q = check_vector("q", q, model.n)
    vecs = [check_vector(name, x, model.nv) for name, x in (vectors or {}).items()]
    shapes = [q.shape[:-1]] + [x.shape[:-1] for x in vecs]
    if model.floating_base:
        if base_pose is None:
            if needs_pose:
                raise ValueError("base_pose: required for a floating-base model (4x4 T_world_base)")
            base_pose = np.eye(4)
        pose = check_pose("base_pose", base_pose)
        shapes.append(pose.shape[:-2])
    else:
        if base_pose is not None:
            raise ValueError("base_pose: this model has a fixed base; pass base_pose only to floating-base models")
        pose = np.eye(4)
    fext = check_f_ext(model, f_ext)
    shapes += [w.shape[:-1] for w in fext.values()]
    try:  # (the same shapes everywhere, the common case, need no broadcasting)
        shape = shapes[0] if shapes.count(shapes[0]) == len(shapes) else np.broadcast_shapes(*shapes)
    except ValueError as exc:
        raise ValueError(f"batch dimensions do not broadcast: {shapes}") from exc
    B = math.prod(shape)

    def kernel_ready(x: np.ndarray) -> np.ndarray:
        # Writeable as well as contiguous: the compiled kernels are built for writeable arrays only.
        out = np.ascontiguousarray(x)
        return out if out.flags.writeable else out.copy()

    def flat(x: np.ndarray, tail: tuple[int, ...]) -> np.ndarray:
        # An argument of the full shape is only reshaped (a view; broadcast_to would make it read-only).
        if x.shape != shape + tail:
            x = np.broadcast_to(x, shape + tail)
        return kernel_ready(x.reshape((B,) + tail))

    f_body = f_base = None
    if fext:
        f_body = np.zeros((B, model.nb, 6))
        f_base = np.zeros((B, 6))
        for link, w in fext.items():
            body, X = model._wrench_maps[link]
            Fb = flat(w, (6,)) if X is None else flat(w, (6,)) @ X
            if body < 0:
                f_base += Fb
            else:
                f_body[:, body] += Fb
    # One pose for every sample stays one: the kernels read row 0 then, and no (B, 4, 4) copy is made.
    poses = kernel_ready(pose.reshape((1, 4, 4))) if pose.ndim == 2 else flat(pose, (4, 4))
    return Batch(shape, flat(q, (model.n,)), [flat(x, (model.nv,)) for x in vecs], poses, f_body, f_base)
