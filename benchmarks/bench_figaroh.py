"""liedyn_ros' identification beside FIGAROH's (the published toolbox, `pip install figaroh`), both
tools on the same recordings, the same derivatives and the same split (first 70 % fit, last 30 %
validate).

Recordings:
- `ur10-mujoco`, `panda-mujoco`: MuJoCo (an independent simulator) runs the arm with known joint
  friction (damping = viscous, friction loss = Coulomb) along a sum of sines (test/simulated.py);
  the recorded efforts get 1 % noise and the positions 17-bit encoder steps. The UR10 is the URDF
  of FIGAROH's examples repository (`thanhndv212/figaroh-examples`, examples/ur10/urdf), the
  Panda carries a 1.5 kg payload on its hand. The truth is known: the URDF's inertial parameters
  (with the payload) and the simulator's friction.
- `ur10-figaroh-csv`: the simulated UR10 recording of FIGAROH's examples
  (examples/ur10/data/identification_{q,tau}_simulation.csv, 98 samples at 100 Hz; derivatives by
  FIGAROH's own calculate_first_second_order_differentiation). Its true parameters are not given
  (the URDF's inertias do not reproduce its torques), so only the validation RMS is compared.

FIGAROH's pipeline is its standard one (the examples' BaseIdentification.solve): joint torque
regressor with viscous and static friction columns, zero columns eliminated, base parameters by
its double QR, ordinary least squares. liedyn_ros: `IdentificationProblem(inertia, friction)`,
physically consistent by default. Both are compared in FIGAROH's base parameters: the truth's
and liedyn_ros' identified standard parameters mapped by FIGAROH's own QR.

Printed per recording: the base-parameter error (relative, over the base parameters whose true
value is above 1e-3 of the largest: median and max; and |phi - phi_true| / |phi_true|), the
validation RMS per joint, the negative friction values, and whether every body's pseudo-inertia
is positive semidefinite (liedyn_ros; FIGAROH's base parameters do not determine bodies).

Run: python benchmarks/bench_figaroh.py FIGAROH_EXAMPLES_CHECKOUT  (a checkout of
thanhndv212/figaroh-examples; not part of this repository). Needs `pip install figaroh`.
"""
from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
from scipy.signal import butter, filtfilt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from liedyn_ros import core  # noqa: E402
from liedyn_ros.core.identification import pseudo_inertia  # noqa: E402
from liedyn_ros.core.identification.fit import IdentificationProblem, NormalEquations, identify  # noqa: E402
from robots import urdf_text  # noqa: E402
from simulated import arm_urdf, simulate  # noqa: E402
from test_identification_fit import COM, I_COM, LINK, MASS  # noqa: E402

warnings.filterwarnings("ignore", category=RuntimeWarning)  # FIGAROH's ndcurves import
from figaroh.identification.parameter import get_standard_parameters  # noqa: E402
from figaroh.tools.qrdecomposition import QRDecomposer  # noqa: E402
from figaroh.tools.regressor import build_regressor_basic, build_regressor_reduced, get_index_eliminate  # noqa: E402

FIT_SHARE = 0.7
MIN_SPEED = 0.05  # rad/s: validation rows where the joint moves (static friction is any value at rest)


@dataclass
class Recording:
    name: str
    xml: str  # the URDF both tools start from (no payload, no friction)
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    truth: dict[str, float] | None  # FIGAROH-named standard parameters (inertial + fv_j, fs_j)


def _strip(xml: str) -> str:
    xml = re.sub(r"<(visual|collision)\b.*?</\1>", "", xml, flags=re.S)
    return re.sub(r"<mimic[^>]*/>", "", xml).replace('type="prismatic"', 'type="fixed"')


def _names(pm: pin.Model) -> list[str]:
    """FIGAROH's column names: its standard parameters, then fv_j and fs_j (its extra blocks' order)."""
    joints = list(pm.names[1:])
    return list(get_standard_parameters(pm, {})) + [f"fv_{j}" for j in joints] + [f"fs_{j}" for j in joints]


def _truth(sim_xml: str, joints: list[str], viscous: np.ndarray, coulomb: np.ndarray) -> dict[str, float]:
    """The simulated arm's parameters, FIGAROH-named: Pinocchio merges the welded payload into its link."""
    pm = pin.buildModelFromXML(re.sub(r"<dynamics[^>]*/>", "", sim_xml))
    values = list(get_standard_parameters(pm, {}).values()) + list(viscous) + list(coulomb)
    return dict(zip(_names(pm), values))


def _filtered_derivatives(t: np.ndarray, q: np.ndarray, tau: np.ndarray, cutoff: float = 10.0):
    """The same zero-phase low-pass (Butterworth, 4th order) on positions and efforts for both
    tools, then central differences: the usual preprocessing of identification data."""
    dt = float(np.median(np.diff(t)))
    b, a = butter(4, cutoff * 2 * dt)
    qf, tf = filtfilt(b, a, q, axis=0), filtfilt(b, a, tau, axis=0)
    qd = np.gradient(qf, dt, axis=0)
    return qf, qd, np.gradient(qd, dt, axis=0), tf


def mujoco_recording(name: str, xml: str, payload: bool, seconds: float, seed: int) -> Recording:
    xml = _strip(xml)
    model = core.load_urdf(xml)
    n = model.n
    viscous, coulomb = 0.5 + 0.1 * np.arange(n), 1.0 + 0.2 * np.arange(n)
    sim = arm_urdf(xml, dict(zip(model.joint_names, viscous)), dict(zip(model.joint_names, coulomb)),
                   (LINK, MASS, COM, I_COM) if payload else None)
    rec = simulate(sim, model.joint_names, model, seconds=seconds, seed=seed, compensation=(coulomb, viscous))
    rng = np.random.default_rng(seed + 1)
    step = 2 * np.pi / 2**17
    q = np.round(rec.q / step) * step
    effort = rec.effort + 0.01 * rng.standard_normal(rec.effort.shape) * np.sqrt((rec.effort ** 2).mean(0))
    q, qd, qdd, tau = _filtered_derivatives(rec.t, q, effort)
    cut = slice(50, -50)  # the filter's ends
    return Recording(name, xml, q[cut], qd[cut], qdd[cut], tau[cut],
                     _truth(sim, list(model.joint_names), viscous, coulomb))


def figaroh_csv_recording(examples: Path) -> Recording:
    from figaroh.identification.identification_tools import calculate_first_second_order_differentiation

    ur10 = examples / "examples" / "ur10"
    xml = _strip((ur10 / "urdf" / "ur10_robot.urdf").read_text())
    q = np.loadtxt(ur10 / "data" / "identification_q_simulation.csv", delimiter=",", skiprows=1)
    tau = np.loadtxt(ur10 / "data" / "identification_tau_simulation.csv", delimiter=",", skiprows=1)
    pm = pin.buildModelFromXML(xml)
    q, qd, qdd = calculate_first_second_order_differentiation(pm, q, {"ts": 0.01})
    return Recording("ur10-figaroh-csv", xml, q, qd, qdd, tau[: len(q)], None)


class Figaroh:
    """FIGAROH's standard pipeline on the fit rows; predictions of its base parameters."""

    def __init__(self, rec: Recording, fit: slice) -> None:
        self.pm = pin.buildModelFromXML(rec.xml)
        self.robot = SimpleNamespace(model=self.pm, data=self.pm.createData())
        nv = self.pm.nv
        self.config = {"has_friction": True, "is_joint_torques": True, "act_idxv": list(range(nv))}
        self.names = _names(self.pm)
        W = self.regressor(rec, fit)
        self.idx_e, self.params_r = get_index_eliminate(W, dict.fromkeys(self.names, 0.0), 1e-6)
        self.W_e = build_regressor_reduced(W, self.idx_e)
        tau = rec.tau[fit].T.reshape(-1)  # FIGAROH stacks rows joint by joint
        self.qr = QRDecomposer()
        self.base, _ = self.qr._identify_base_parameters(self.W_e, self.params_r)
        W_b, _, self.expressions, self.phi = self.qr.double_decomposition(tau, self.W_e, self.params_r)[:4]
        assert np.allclose(W_b, self.W_e[:, self.base])

    def regressor(self, rec: Recording, rows: slice) -> np.ndarray:
        return build_regressor_basic(self.robot, rec.q[rows], rec.qd[rows], rec.qdd[rows], self.config)

    def base_values(self, standard: dict[str, float]) -> np.ndarray:
        """FIGAROH's base parameters of a standard parameter set (its own QR's regrouping)."""
        return self.qr.double_decomposition(np.zeros(self.W_e.shape[0]), self.W_e, self.params_r, standard)[4]

    def predict(self, rec: Recording, rows: slice) -> np.ndarray:
        W_b = build_regressor_reduced(self.regressor(rec, rows), self.idx_e)[:, self.base]
        return (W_b @ self.phi).reshape(self.pm.nv, -1).T


class Liedyn:
    """liedyn_ros' fit of the inertias and friction; its standard parameters FIGAROH-named."""

    def __init__(self, rec: Recording, fit: slice, validation: slice) -> None:
        self.model = core.load_urdf(rec.xml)
        self.problem = IdentificationProblem(self.model, friction=True, inertia=True, min_speed=MIN_SPEED)
        p = self.problem.size
        equations = []
        for rows in (fit, validation):
            ne = NormalEquations(self.model.n, p)
            ne.add(*self.problem.columns(rec.q[rows], rec.qd[rows], rec.qdd[rows], rec.tau[rows]))
            equations.append(ne)
        self.result = identify(self.problem, *equations)

    def standard(self, names: list[str]) -> dict[str, float]:
        friction = self.result.friction
        assert friction is not None and self.result.parameters is not None
        return dict(zip(names, [*self.result.parameters, *friction.viscous, *friction.coulomb]))

    def predict(self, rec: Recording, rows: slice) -> np.ndarray:
        everywhere = IdentificationProblem(self.model, friction=True, inertia=True, min_speed=0.0)
        G, r = everywhere.columns(rec.q[rows], rec.qd[rows], rec.qdd[rows], rec.tau[rows])
        return rec.tau[rows] - (r - G @ self.result.x)

    def consistent(self) -> bool:
        pi = self.result.parameters.reshape(-1, 10)
        friction = self.result.friction
        psd = all(np.linalg.eigvalsh(pseudo_inertia(p)).min() >= -1e-9 for p in pi)
        return psd and (friction.coulomb >= 0).all() and (friction.viscous >= 0).all()


def compare(rec: Recording) -> None:
    N = len(rec.q)
    fit, validation = slice(0, int(FIT_SHARE * N)), slice(int(FIT_SHARE * N), N)
    fig, ours = Figaroh(rec, fit), Liedyn(rec, fit, validation)
    print(f"\n== {rec.name}: {N} samples, {fig.pm.nv} joints, {len(fig.phi)} FIGAROH base parameters ==")
    moving = np.abs(rec.qd[validation]) >= MIN_SPEED
    for tool, pred in (("FIGAROH", fig.predict(rec, validation)), ("liedyn_ros", ours.predict(rec, validation))):
        err = np.where(moving, pred - rec.tau[validation], np.nan)
        rms = np.sqrt(np.nanmean(err ** 2, axis=0))
        print(f"  validation RMS [N m] {tool:10}: {np.array2string(rms, precision=3)}  (mean {np.nanmean(rms):.4f}; "
              "nan: the joint never moves in the validation part)")
    if rec.truth is not None:
        true = fig.base_values(rec.truth)
        big = np.abs(true) > 1e-3 * np.abs(true).max()
        for tool, phi in (("FIGAROH", fig.phi), ("liedyn_ros", fig.base_values(ours.standard(fig.names)))):
            rel = np.abs(phi - true)[big] / np.abs(true)[big]
            print(f"  base parameter error {tool:10}: |phi - true| / |true| = "
                  f"{np.linalg.norm(phi - true) / np.linalg.norm(true):.2e}; per parameter median "
                  f"{np.median(rel):.2%}, max {rel.max():.1%} ({big.sum()} parameters)")
    friction = [(e, v) for e, v in zip(fig.expressions, fig.phi) if re.match(r"^f[vs]_\w+$", e.strip())]
    negative = [f"{e}={v:.3g}" for e, v in friction if v < 0]
    print(f"  FIGAROH negative friction: {', '.join(negative) or 'none'} (of {len(friction)} friction base parameters)")
    print(f"  liedyn_ros physically consistent (every pseudo-inertia PSD, friction >= 0): {ours.consistent()}")


def main(examples: Path) -> None:
    ur10 = (examples / "examples" / "ur10" / "urdf" / "ur10_robot.urdf").read_text()
    panda = urdf_text("panda")
    for rec in (mujoco_recording("ur10-mujoco", ur10, False, 40.0, 11),
                mujoco_recording("panda-mujoco", panda, True, 40.0, 3),
                figaroh_csv_recording(examples)):
        compare(rec)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
