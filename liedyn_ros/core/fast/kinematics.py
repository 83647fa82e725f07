"""Compiled forward pass shared by the kernels: joint transforms, input checks, body rates."""
from __future__ import annotations

from numba import carray, types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from .layout import COORD, HEADER, INERTIA, LINK_WIDTH, MI_WIDTH, MULT, PARENT, SCREW, WIDTH
from .spatial import all_finite, bracket, gravity_in_base, ijit, joint_transform, pose_is_valid, twist_to_child, \
    wrench_to_parent

OK, BAD_INPUT, SINGULAR = 0, 1, 2


@ijit
def sizes(mi):
    """(nb, n, nv) of the packed model."""
    nb = mi.shape[0] - 1
    return nb, mi[nb, 0], mi[nb, 1]


@ijit
def inputs_valid(mi, q, T):
    """Length and finiteness of q and the SE(3) pose, as checks.prepare demands (it says what is wrong)."""
    nb, n, nv = sizes(mi)
    return q.shape[0] == n and all_finite(q) and pose_is_valid(T)


@ijit
def vectors_valid(mi, vectors):
    """Every generalized vector has length nv and finite entries."""
    nb, n, nv = sizes(mi)
    for x in vectors:
        if x.shape[0] != nv or not all_finite(x):
            return False
    return True


@ijit
def wrenches_valid(mi, f_body, f_base):
    """One sample's external wrenches: f_body (1, nb, 6) and f_base (1, 6), all finite."""
    nb = mi.shape[0] - 1
    if f_body.shape[0] != 1 or f_body.shape[1] != nb or f_base.shape[0] != 1:
        return False
    for i in range(nb):
        if not all_finite(f_body[0, i]):
            return False
    return all_finite(f_base[0])


@ijit
def pose_of(T, b):
    """Sample b's base pose: T[b] of T (B, 4, 4), or T[0] when one pose (1, 4, 4) serves every sample."""
    return T[b if T.shape[0] != 1 else 0]


@ijit
def joint_transforms(mf, mi, q, R, p):
    """(R_i, p_i) of every f_{lambda(i), i}."""
    for i in range(mi.shape[0] - 1):
        joint_transform(mf, i, q[mi[i, COORD]], R[i], p[i])


@ijit
def body_rate(mf, mi, i, x):
    """Rate of body i's joint from a generalized vector x (the base part, if any, comes first)."""
    nb, n, nv = sizes(mi)
    return mf[i, MULT] * x[nv - n + mi[i, COORD]]


@ijit
def body_velocities(mf, mi, R, p, v, V, eta):
    """V_i and eta_i of every body (body_velocity).

    Row nb of V holds the base twist (zero for a fixed base), set by the caller; the parent of a
    root body is that row.
    """
    for i in range(mi.shape[0] - 1):
        body_velocity(mf, mi, i, R[i], p[i], v, V, eta[i])


@ijit
def body_velocity(mf, mi, i, R, p, v, V, eta):
    """V_i = Ad_{f_i^-1} V_lambda(i) + S_i qd_i and eta = ad_{V_i} S_i qd_i (Kim Table 3); (R, p) = f_i."""
    twist_to_child(R, p, V[parent_row(mi, i)], V[i])
    qd = body_rate(mf, mi, i, v)
    S = screw(mf, i)
    for r in range(6):
        V[i, r] += S[r] * qd
    bracket(V[i], S, eta)
    for r in range(6):
        eta[r] *= qd


@ijit
def base_motion(mf, nb, T, v, a, base, V, dV):
    """Row nb of V and dV: the base's twist and rate (zero twist for a fixed base), with gravity as a
    base acceleration (0, -R^T g)."""
    gravity_in_base(mf, nb, T, dV[nb])
    for r in range(6):
        V[nb, r] = v[r] if base else 0.0
        dV[nb, r] += a[r] if base else 0.0


@ijit
def body_motion(mf, mi, i, q, v, a, R, p, V, dV, eta):
    """The forward step of body i: f_i = (R_i, p_i), V_i (body_velocity) and
    dV_i = Ad_{f_i^-1} dV_lambda(i) + ad_{V_i} S_i qd_i + S_i qdd_i; eta is scratch (6,)."""
    joint_transform(mf, i, q[mi[i, COORD]], R[i], p[i])
    body_velocity(mf, mi, i, R[i], p[i], v, V, eta)
    twist_to_child(R[i], p[i], dV[parent_row(mi, i)], dV[i])
    qdd = body_rate(mf, mi, i, a)
    S = screw(mf, i)
    for r in range(6):
        dV[i, r] += eta[r] + S[r] * qdd


@ijit
def screw(mf, i):
    """S_i, a borrowed view of body i's row of the model."""
    return borrowed(mf[i, SCREW:SCREW + 6])


@ijit
def parent_row(mi, i):
    """lambda(i), or the base row nb for a root body."""
    parent = mi[i, PARENT]
    return parent if parent >= 0 else mi.shape[0] - 1


@intrinsic
def borrowed(typingctx, arr):
    """The array `arr` without its reference to the owner's memory (a null meminfo).

    Every row view a kernel takes (R[i], dV[i], ...) and every array it hands to an inlined step
    otherwise costs an atomic increment and decrement of the owner's count, which numba does not
    prune inside loops and which cost more than the arithmetic of a small robot (the Panda's
    mass matrix took twice as long). A borrowed array is valid while `arr` is: the *_sample
    kernels borrow their arguments and workspace views, which their callers hold, and no
    borrowed array leaves them.
    """
    def codegen(context, builder, signature, args):
        src = make_array(signature.args[0])(context, builder, value=args[0])
        out = make_array(signature.return_type)(context, builder)
        populate_array(out, data=src.data, shape=src.shape, strides=src.strides, itemsize=src.itemsize,
                       meminfo=None)
        return out._getvalue()

    return arr(arr), codegen


def _pointer_intrinsic(dtype):
    """An intrinsic that turns an int64 address into a pointer to `dtype`."""
    @intrinsic
    def pointer(typingctx, address):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

        return types.CPointer(dtype)(types.int64), codegen

    return pointer


_float_pointer, _int_pointer = _pointer_intrinsic(types.float64), _pointer_intrinsic(types.int64)


@ijit
def model_arrays(handle):
    """(mf, mi) of the FastModel whose `handle` this is: the address of its header (see layout).

    Single-sample kernels take the model as this one integer: numba unboxes an int for a fraction
    of an array's cost, and the arrays made here carry no reference count (like `borrowed`). Valid
    while the FastModel lives, which the caller holds.
    """
    header = carray(_int_pointer(handle), HEADER)
    mf = carray(_float_pointer(header[0]), (header[1], WIDTH))
    mi = carray(_int_pointer(header[2]), (header[3], MI_WIDTH))
    return mf, mi


@ijit
def link_table(handle):
    """The FastModel's table of links (see layout): row k = the body of link k (-1: the root link), R, p."""
    header = carray(_int_pointer(handle), HEADER)
    return carray(_float_pointer(header[4]), (header[5], LINK_WIDTH))


@ijit
def link_wrench(handle, ws, nb, w, link):
    """(valid, f_body (1, nb, 6), f_base (1, 6)): the wrench w (m, f) on link row `link`, in its body's frame
    as Ad_{T_body_link^-1}^T w, zero on every other body; in the workspace's last 6 (nb + 1) floats.

    valid is False for a row outside the table or a w that is not 6 finite numbers.
    """
    links = link_table(handle)
    start = ws.shape[0] - 6 * (nb + 1)
    f_body, f_base = reshaped(ws, start, (1, nb, 6)), reshaped(ws, start + 6 * nb, (1, 6))
    if not (0 <= link < links.shape[0] and w.shape[0] == 6 and all_finite(w)):
        return False, f_body, f_base
    f_body[:, :, :] = 0.0
    f_base[:, :] = 0.0
    body = int(links[link, 0])
    row = LINK_WIDTH * link
    wrench_to_parent(reshaped(links, row + 1, (3, 3)), reshaped(links, row + 10, (3,)), w,
                     f_base[0] if body < 0 else f_body[0, body])
    return True, f_body, f_base


@intrinsic
def _address(typingctx, arr):
    """The address of the first element of a contiguous array, as an int64."""
    def codegen(context, builder, signature, args):
        data = make_array(signature.args[0])(context, builder, value=args[0]).data
        return builder.ptrtoint(data, context.get_value_type(types.int64))

    return types.int64(arr), codegen


@ijit
def reshaped(ws, start, shape):
    """A C-contiguous view of the float array ws from `start` with the given shape (borrowed).

    Built from the address, not by `ws[...].reshape(shape)`: numba calls a C routine for every
    reshape, which a kernel taking ten views per sample paid for in every sample.
    """
    return carray(_float_pointer(_address(ws) + 8 * start), shape)


@ijit
def at(address, n):
    """The n floats at `address` as a C-contiguous (n,) array (borrowed): an output core.Data owns, passed to a
    single-sample kernel as its address, an int, which numba unboxes for a fraction of an array's cost."""
    return carray(_float_pointer(address), (n,))


@ijit
def fixed_pose(ws, nb):
    """The identity base pose (4, 4) of a fixed base, in the workspace just before link_wrench's tail."""
    T = reshaped(ws, ws.shape[0] - 6 * (nb + 1) - 16, (4, 4))
    for r in range(4):
        for c in range(4):
            T[r, c] = 1.0 if r == c else 0.0
    return T


@ijit
def block(ws, start, rows, cols):
    """A (rows, cols) view of the workspace at `start` (borrowed), and the offset after it."""
    return reshaped(ws, start, (rows, cols)), start + rows * cols


@ijit
def workspace(mf, mi):
    """The single-sample workspace: the rows of mf after the model's (see layout)."""
    return reshaped(mf, mi.shape[0] * mf.shape[1], ((mf.shape[0] - mi.shape[0]) * mf.shape[1],))


@ijit
def transforms_block(ws, start, nb):
    """Views R (nb, 3, 3) and p (nb, 3) for the joint transforms (borrowed), and the offset after them."""
    return reshaped(ws, start, (nb, 3, 3)), reshaped(ws, start + 9 * nb, (nb, 3)), start + 12 * nb


@ijit
def inertias_block(ws, start, rows):
    """A (rows, 6, 6) view of the workspace at `start` (borrowed), and the offset after it."""
    return reshaped(ws, start, (rows, 6, 6)), start + 36 * rows


@ijit
def load_inertias(mf, nb, J):
    """J[i] = J_i for every body and J[nb] = J_base."""
    for i in range(nb + 1):
        for r in range(6):
            for c in range(6):
                J[i, r, c] = mf[i, INERTIA + 6 * r + c]
