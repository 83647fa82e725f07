"""CPU time per sample of the loops' route (pipeline.routes.loops) on the five-bar of test_loops_pipeline: its sample
kernel (core.constraints.fast_loop_sample.loop_sample_one, one compiled call per sample) against its general path
(LoopRoute.general, the sample kernel declining: the route before it), all compiled under it (the constraint terms by
fast_closures.constraint_terms_many, the least-norm minimisers and flight's closest forces by fast_minimisers), the
general path with the numpy minimisers (the kernels of fast_minimisers declining: the route before them), with the
numpy terms too (jacobian.compiled_terms declining loop sets as well: the route before constraint_terms_many), and the
reference path (algorithms=core.reference, what the node runs while its kernels compile), same run.

Cases: fixed base; floating base standing on a flat contact under its ground link; the same in flight. Each row
is this thread's CPU time (time.thread_time: on a shared machine the time other processes hold the core is left
out) per route.outputs call, best and median of ``--rounds`` bursts of ``--number`` calls, the variants taking
turns burst by burst. Then the constraint terms alone (compiled_terms against constraint_terms, a (2, nv) batch
as the route's stacked call), the least-norm minimisers alone on it (fast_minimisers against their numpy
references), and flight's closest forces alone (pipeline.loops.closest_loop_forces, fast against fast=False, on the
floating five-bar's stacked flight batch). The ratios are the figures; the absolute times depend on the machine's
load.

Run: python benchmarks/bench_loops.py [--number N] [--rounds R]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
from test_loops_pipeline import LOOP, Reference, state  # noqa: E402

from liedyn_ros import core  # noqa: E402
from liedyn_ros.core.checks import prepare  # noqa: E402
from liedyn_ros.core.constraints import inverse, jacobian, state as constraint_state  # noqa: E402
from liedyn_ros.core.constraints.inverse import passive_mask  # noqa: E402
from liedyn_ros.core.fast.entry import single  # noqa: E402
from liedyn_ros.core.fast.kinematics import BAD_INPUT  # noqa: E402
from liedyn_ros.pipeline import PipelineConfig  # noqa: E402
from liedyn_ros.pipeline.contacts import resolve_contacts  # noqa: E402
from liedyn_ros.pipeline.loops import closest_loop_forces, resolve_loops  # noqa: E402
from liedyn_ros.pipeline.payload import Dynamics  # noqa: E402
from liedyn_ros.pipeline.routes.loops import LoopRoute  # noqa: E402

_COMPILED_TERMS = jacobian.compiled_terms
_SAMPLE = LoopRoute.sample
MINIMISERS = ("least_norm_forces_many", "psd_solve_many", "closest_forces_many")
_COMPILED_MINIMISERS = {name: getattr(single, name) for name in MINIMISERS}


def numpy_terms(on: bool) -> None:
    """Route the loop sets' terms to the numpy reference (as before the kernel), or back to the kernel."""
    def declining(cs, batch, rows):
        return None if cs._fast is None else _COMPILED_TERMS(cs, batch, rows)

    for module in (jacobian, constraint_state):
        module.compiled_terms = declining if on else _COMPILED_TERMS


def numpy_minimisers(on: bool) -> None:
    """Let the numpy minimisers answer (the compiled ones declining, as before them), or the compiled ones."""
    for name in MINIMISERS:
        setattr(single, name, (lambda *args: BAD_INPUT) if on else _COMPILED_MINIMISERS[name])


def general_path(on: bool) -> None:
    """Let the route's general path answer its samples (the sample kernel declining), or the sample kernel."""
    LoopRoute.sample = (lambda *args, **kwargs: None) if on else _SAMPLE  # type: ignore[method-assign]


def variant(name: str) -> None:
    """Set up the named variant: "sample kernel" (the route as it is), "numpy minimisers", "numpy terms" (both
    numpy, the general path) or any other (the general path, all compiled)."""
    general_path(name != "sample kernel")
    numpy_terms(name == "numpy terms")
    numpy_minimisers(name in ("numpy minimisers", "numpy terms"))


def cpu_per_call(variants: dict[str, Callable[[], object]], number: int, rounds: int) -> dict[str, tuple]:
    """(best, median) thread CPU seconds per call of each variant, taking turns in bursts of `number` calls."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            variant(name)
            t = time.thread_time()
            for _ in range(number):
                fn()
            times[name].append((time.thread_time() - t) / number)
    variant("sample kernel")
    return {name: (min(x), float(np.median(x))) for name, x in times.items()}


def cases(rng: np.random.Generator) -> dict[str, Callable[[dict], object]]:
    """Per case, a call of route.outputs taking `algorithms` (None: fast)."""
    fixed, floating = Reference(False), Reference(True)
    q, v, a = state(fixed, rng)
    effort = rng.normal(size=4)
    effort[[1, 3]] = 0.0
    out = {}
    model = fixed.t.model
    route = LoopRoute(Dynamics(model, None), resolve_loops(model, PipelineConfig(**LOOP), None))
    out["fixed"] = lambda kw: route.outputs(q, v, a, effort, None, None, **kw)
    fm = floating.t.model
    config = PipelineConfig(contact_links=("ground",), contact_types=("flat",), base_link="ground", **LOOP)
    loops = resolve_loops(fm, config, resolve_contacts(fm, config))
    froute = LoopRoute(Dynamics(fm, None), loops)
    pose = np.eye(4)
    pose[2, 3] = 0.3
    vf, af = np.concatenate([np.zeros(6), v]), np.concatenate([np.zeros(6), a])
    for name, down in (("floating, standing", True), ("floating, in flight", False)):
        flags = np.array([down])
        out[name] = lambda kw, flags=flags: froute.outputs(q, vf, af, effort, pose, flags, **kw)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=100, help="calls per burst")
    parser.add_argument("--rounds", type=int, default=7, help="bursts per variant")
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    print(f"route.outputs, thread CPU per sample (best / median of {args.rounds} x {args.number} calls), "
          f"load {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
    names = ("sample kernel", "general path", "numpy minimisers", "numpy terms", "reference path")
    print(f"{'case':22s} " + " ".join(f"{k:>20s}" for k in names) + "   ratios to the sample kernel (best, median)")
    for name, call in cases(rng).items():
        variants = {k: (lambda call=call: call({})) for k in names[:4]}
        variants["reference path"] = lambda call=call: call({"algorithms": core.reference})
        outputs = []
        for k in names[:4]:
            variant(k)
            outputs.append(call({}))
        variant("sample kernel")
        for out in outputs[1:]:
            for field in ("tau_ff", "tau_g", "qdd_pred"):
                assert np.allclose(getattr(out, field), getattr(outputs[0], field), rtol=1e-10, atol=1e-10), field
        t = cpu_per_call(variants, args.number, args.rounds)
        cells = " ".join(f"{t[k][0] * 1e3:8.3f} / {t[k][1] * 1e3:6.3f} ms" for k in variants)
        ratios = "   ".join(f"{t[k][0] / t[names[0]][0]:.2f}, {t[k][1] / t[names[0]][1]:.2f}" for k in names[1:])
        print(f"{name:22s} {cells}   {ratios}")
    # The terms alone: the stacked (2, nv) batch of the route's constrained_rnea.
    fixed = Reference(False)
    model = fixed.t.model
    cs = resolve_loops(model, PipelineConfig(**LOOP), None).on(model)
    q, v, _ = state(fixed, rng)
    batch = prepare(model, np.stack((q, q)), {"v": np.stack((v, np.zeros_like(v)))})
    rows = np.ones((2, cs.m), dtype=bool)
    terms = {"compiled": lambda: _COMPILED_TERMS(cs, batch, rows),
             "numpy": lambda: jacobian.constraint_terms(cs, batch, batch.vectors[0])}
    t = cpu_per_call(terms, args.number, args.rounds)
    print(f"terms of a (2, nv) batch, fixed five-bar: compiled {t['compiled'][0] * 1e6:.1f} us, numpy "
          f"{t['numpy'][0] * 1e6:.1f} us (best): numpy/compiled {t['numpy'][0] / t['compiled'][0]:.1f}")
    # The minimisers alone on that batch: constrained_rnea's (min_torque, the passive joints) and the
    # (A M^-1 A^T)^+ solve of constrained_aba, here with K = A A^T (the same rank 2 of 3).
    A = _COMPILED_TERMS(cs, batch, rows).A
    p = passive_mask(model, LOOP["passive_joints"])
    tau = rng.normal(size=(2, model.nv))
    w = np.ones(int((~p).sum()))
    K = A @ np.swapaxes(A, -1, -2)
    rhs = rng.normal(size=(2, cs.m))
    parts = {"compiled forces": lambda: inverse.least_norm_forces(A, tau, p, rows, "min_torque", w, True),
             "numpy forces": lambda: inverse.readable_forces(A, tau, p, rows, "min_torque", w),
             "compiled solve": lambda: constraint_state.solve_psd(K, rhs),
             "numpy solve": lambda: constraint_state.readable_psd_solve(K, rhs)}
    t = cpu_per_call(parts, args.number, args.rounds)
    for what in ("forces", "solve"):
        c, n = t[f"compiled {what}"][0], t[f"numpy {what}"][0]
        print(f"least-norm {what} of that batch: compiled {c * 1e6:.1f} us, numpy {n * 1e6:.1f} us (best): "
              f"numpy/compiled {n / c:.1f}")
    # Flight's closest forces alone: the floating five-bar's (2, nv) batch, contact lifted, loop on.
    floating = Reference(True)
    fm = floating.t.model
    config = PipelineConfig(contact_links=("ground",), contact_types=("flat",), base_link="ground", **LOOP)
    loops = resolve_loops(fm, config, resolve_contacts(fm, config))
    fcs, act = loops.on(fm), np.array([[False, True], [False, True]])
    qs, vf = np.stack((q, q)), np.concatenate([np.zeros((2, 6)), np.stack((v, np.zeros_like(v)))], 1)
    poses = np.stack((np.eye(4), np.eye(4)))
    A = core.constraint_jacobian(fm, qs, fcs, base_pose=poses)
    tau = core.rnea(fm, qs, vf, np.zeros_like(vf), base_pose=poses)
    forces = (fm, loops, tau, A, np.zeros((2, fm.n)), fcs.row_mask(act), np.zeros(2, dtype=bool))
    t = cpu_per_call({"compiled": lambda: closest_loop_forces(*forces),
                      "numpy": lambda: closest_loop_forces(*forces, fast=False)}, args.number, args.rounds)
    c, n = t["compiled"][0], t["numpy"][0]
    print(f"flight's closest forces of the floating five-bar's (2, nv) batch: compiled {c * 1e6:.1f} us, numpy "
          f"{n * 1e6:.1f} us (best): numpy/compiled {n / c:.1f}")


if __name__ == "__main__":
    main()
