"""Single-sample kernels locked to one signature, so that a call with anything else is cheap to refuse.

The public functions hand the caller's arrays straight to these kernels. Locked to float64
C-contiguous arrays, the numba dispatcher raises TypeError for lists, other dtypes, strided or
read-only arrays and batches, and the caller then takes the general path; lengths, NaN and the
pose are checked inside the kernel. Each kernel is compiled (or loaded from numba's cache) on
its first use in a process, so that a program calling rnea alone never waits for the others.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from numba import types

__all__ = ["single", "drop_stale_cache"]

_VEC = types.float64[::1]
_MAT = types.float64[:, ::1]
_WRENCH = types.float64[:, :, ::1]  # f_body (1, nb, 6)


def _signature(name: str) -> tuple:
    """(kernel, its one signature) by name."""
    from ..constraints import fast as constraints, fast_closures, fast_loop_sample, fast_minimisers, fast_sample
    from ..derivatives import fast as derivatives, time_fast
    from . import aba, coriolis, crba, observer, regressor, rnea

    model = types.int64  # FastModel.handle
    ints, flags, b, f = types.int64[::1], types.boolean[::1], types.boolean, types.float64
    return {
        # constraints: (handle, ci, cf, scratch, ...) of core.constraints.fast.FastConstraints
        "constrained_aba_one": (constraints.constrained_aba_one,
                                types.int64(model, ints, _MAT, _VEC, _VEC, _VEC, _VEC, _MAT, flags, _VEC, _VEC, _VEC)),
        "constrained_rnea_one": (constraints.constrained_rnea_one,
                                 types.int64(model, ints, _MAT, _VEC, _VEC, _VEC, _VEC, _MAT, flags, flags, _VEC, b, f,
                                             _VEC, _VEC)),
        "contact_kinematics_many": (constraints.contact_kinematics_many,
                                    types.int64(model, ints, _MAT, _VEC, _MAT, _WRENCH, types.float64[:, :, :, ::1],
                                                types.float64[:, :, ::1])),
        "contact_fit_many": (constraints.contact_fit_many,
                             types.int64(model, ints, _MAT, _VEC, _MAT, _WRENCH, _MAT, types.boolean[:, ::1], _VEC,
                                         types.float64[:, :, ::1], _MAT)),
        "constrained_terms_one": (constraints.constrained_terms_one,
                                  types.int64(model, ints, _MAT, _VEC, _VEC, _VEC, _VEC, _VEC, _MAT, flags, flags, _VEC,
                                              b, b, f, b, _VEC, _VEC)),
        # constrained_terms_one with the checks of what a node publishes: (..., up, bound, mu, tau, out, verdict)
        "contact_sample_one": (fast_sample.contact_sample_one,
                               types.int64(model, ints, _MAT, _VEC, _VEC, _VEC, _VEC, _VEC, _MAT, flags, flags, _VEC,
                                           b, b, f, b, _VEC, _VEC, f, _VEC, _VEC, ints)),
        # any constraint set (loop closures): (handle, ci, cb, cf, scratch, ...) of fast_closures.ClosureArrays
        "constraint_terms_many": (fast_closures.constraint_terms_many,
                                  types.int64(model, ints, ints, _MAT, _VEC, _MAT, _MAT, _WRENCH, types.boolean[:, ::1],
                                              types.float64[:, :, ::1], _MAT, _MAT, _MAT)),
        # the constrained algorithms' least-norm minimisers (rank-deficient sets alike): (..., rtol, outputs)
        "least_norm_forces_many": (fast_minimisers.least_norm_forces_many,
                                   types.int64(types.float64[:, :, ::1], _MAT, flags, types.boolean[:, ::1], _VEC,
                                               types.int64, f, _MAT, _VEC, _VEC, _VEC)),
        "psd_solve_many": (fast_minimisers.psd_solve_many, types.int64(types.float64[:, :, ::1], _MAT, f, _MAT)),
        "closest_forces_many": (fast_minimisers.closest_forces_many,
                                types.int64(_MAT, types.float64[:, :, ::1], _MAT, flags, types.boolean[:, ::1], flags, f,
                                            f, f, _MAT, _MAT, flags)),
        # the loops' route sample (fast_loop_sample): (handle, ci, cb, cf, scratch of ClosureArrays, q, v, a,
        # q_ff, v_ff, effort, T, active, passive, w, mode, has_tau, params, up, out)
        "loop_sample_one": (fast_loop_sample.loop_sample_one,
                            types.int64(model, ints, ints, _MAT, _VEC, _VEC, _VEC, _VEC, _VEC, _VEC, _VEC, _MAT, flags,
                                        flags, _VEC, types.int64, b, _VEC, _VEC, _VEC)),
        "rnea_one": (rnea.rnea_one, types.int64(model, _VEC, _VEC, _VEC, _MAT, _VEC)),
        # core.Data on a fixed base: no pose, the output by its address (an int)
        "rnea_fixed_at": (rnea.rnea_fixed_at, types.int64(model, _VEC, _VEC, _VEC, types.int64)),
        "rnea_link_fixed_at": (rnea.rnea_link_fixed_at, types.int64(model, _VEC, _VEC, _VEC, _VEC, types.int64,
                                                                    types.int64)),
        "gravity_fixed_at": (rnea.gravity_fixed_at, types.int64(model, _VEC, types.int64)),
        "gravity_one": (rnea.gravity_one, types.int64(model, _VEC, _MAT, _VEC)),
        "mass_matrix_one": (crba.mass_matrix_one, types.int64(model, _VEC, _MAT, _MAT)),
        "coriolis_one": (coriolis.coriolis_one, types.int64(model, _VEC, _VEC, _MAT, _MAT)),
        "observer_one": (observer.observer_one, types.int64(model, _VEC, _VEC, _VEC, _MAT, types.float64, _VEC, _MAT,
                                                            _MAT, types.float64[:, :, ::1])),
        "hybrid_one": (aba.hybrid_one, types.int64(model, _VEC, _VEC, _VEC, types.boolean[::1], _MAT, _VEC, _VEC)),
        "rnea_wrench_one": (rnea.rnea_wrench_one, types.int64(model, _VEC, _VEC, _VEC, _MAT, _WRENCH, _MAT, _VEC)),
        "hybrid_wrench_one": (aba.hybrid_wrench_one, types.int64(model, _VEC, _VEC, _VEC, types.boolean[::1], _MAT,
                                                                 _WRENCH, _MAT, _VEC, _VEC)),
        # one link's wrench: (w, the link's row in FastModel.links)
        "rnea_link_one": (rnea.rnea_link_one, types.int64(model, _VEC, _VEC, _VEC, _MAT, _VEC, types.int64, _VEC)),
        "hybrid_link_one": (aba.hybrid_link_one, types.int64(model, _VEC, _VEC, _VEC, types.boolean[::1], _MAT, _VEC,
                                                             types.int64, _VEC, _VEC)),
        "derivatives_one": (derivatives.derivatives_one,
                            types.int64(model, _VEC, _VEC, _VEC, _VEC, _MAT, types.boolean, types.float64[:, :, ::1])),
        "regressor_one": (regressor.regressor_one, types.int64(model, _VEC, _VEC, _VEC, _MAT, _MAT)),
        "rnea_time_one": (time_fast.rnea_time_one, types.int64(model, _VEC, _MAT, _MAT, _MAT)),
        "aba_time_one": (time_fast.aba_time_one, types.int64(model, _VEC, _VEC, _MAT, _MAT, _MAT)),
    }[name]


class _SingleKernels:
    """`single.rnea_one` etc.: the kernel, compiled for its signature when first looked up.

    __getattr__ runs only for a name not yet set, so later lookups are plain attribute reads.
    """

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        kernel, signature = _signature(name)
        kernel.compile(signature)
        kernel.disable_compile()
        setattr(self, name, kernel)
        return kernel


single = _SingleKernels()


def _cache_dirs(folder: Path) -> list[tuple[Path, bool]]:
    """(where numba may keep the cached kernels of `folder`'s sources, whether it will write there
    first): its __pycache__, the mirror in NUMBA_CACHE_DIR when that is set (numba then uses it
    alone), and the user-wide cache numba falls back to when __pycache__ is not writable."""
    from numba.core import caching, config
    from numba.misc.appdirs import AppDirs

    mirror = caching.UserWideCacheLocator.get_suitable_cache_subpath(str(folder / "__init__.py"))
    user_wide = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / mirror
    if config.CACHE_DIR:
        return [(Path(config.CACHE_DIR) / mirror, True), (folder / "__pycache__", False), (user_wide, False)]
    return [(folder / "__pycache__", True), (user_wide, False)]


def drop_stale_cache() -> None:
    """Delete numba's cached kernels when any source file of the compiled paths changed.

    Numba keys a cached function on its own file only: a kernel in rnea.py would keep an old
    inlined step of spatial.py, and the derivative and constraint kernels inline these steps too. A stamp of
    the sources of fast/, derivatives/, the constraint kernels that others call (constraints/fast.py,
    fast_closures.py, fast_minimisers.py) and singular.py (the rule every kernel inlines, its tolerance a
    compile-time constant) beside each cache (in __pycache__, in NUMBA_CACHE_DIR, in the user-wide cache)
    catches that wherever numba reads from.
    """
    here = Path(__file__).parent
    folders = [here, here.parent / "derivatives", here.parent / "constraints"]
    called = [folders[2] / name for name in ("fast.py", "fast_closures.py", "fast_minimisers.py")]
    sources = sorted(f for folder in folders[:2] for f in folder.glob("*.py")) + called + [here.parent / "singular.py"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in sources)).hexdigest()
    for cache, used in (d for folder in folders for d in _cache_dirs(folder)):
        stamp = cache / "liedyn_fast.stamp"
        try:
            if stamp.read_text() == digest:
                continue
        except OSError:
            pass
        try:
            if used:  # stamped before numba writes there, so that its first kernels are not dropped
                cache.mkdir(parents=True, exist_ok=True)
            elif not cache.is_dir():
                continue
            for f in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
                f.unlink()
            stamp.write_text(digest)
        except OSError:  # a cache no one can write: numba does not use it either
            pass
