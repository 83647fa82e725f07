"""Link inertias: read from <inertial>, and lumped into the body a fixed joint welds them to."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from ..model import Flaw, URDFError
from ..spatial import Ad_inv, spatial_inertia
from .values import MAX_MASS, number, origin

__all__ = ["link_inertia", "transform_inertia"]

_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
_EYE = np.eye(4)


def link_inertia(link: ET.Element, flaws: list[Flaw]) -> np.ndarray:
    """Spatial inertia of a URDF link in its own frame; zero for a link without <inertial>.

    A rotational inertia that is not positive semi-definite is used as given (as Pinocchio and
    KDL do) and recorded in `flaws` with its size.
    """
    name = link.get("name")
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros((6, 6))
    T = origin(inertial.find("origin"), f"link {name!r} inertial origin")
    mass_el = inertial.find("mass")
    mass = number(mass_el.get("value") if mass_el is not None else "0", 0.0, f"link {name!r} mass value", MAX_MASS)
    if mass < 0:  # no library gives a meaning to it (Pinocchio's torques come out near 1e30)
        raise URDFError(f"link {name!r}: negative mass {mass}; give its <mass value=...> a value >= 0")
    I_el = inertial.find("inertia")
    ixx, ixy, ixz, iyy, iyz, izz = (number(I_el.get(k, "0") if I_el is not None else "0", 0.0,
                                           f"link {name!r} inertia {k}", MAX_MASS) for k in _KEYS)
    I_inertial = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    eig = np.linalg.eigvalsh(I_inertial)
    if eig[0] < -1e-9 * max(1.0, abs(eig[-1])):
        flaws.append(Flaw("link", name, f"link {name!r}: inertia matrix is not positive semi-definite (smallest "
                                        f"eigenvalue {eig[0]:.3g} kg m^2, largest {eig[-1]:.3g}, mass {mass:.3g} kg)",
                          "an <inertia> whose eigenvalues are all >= 0", "used as given"))
    R = T[:3, :3]
    # The inertia is given in the <inertial> frame: rotate it into the link axes (R I R^T).
    return spatial_inertia(mass, T[:3, 3], R @ I_inertial @ R.T)


def transform_inertia(J: np.ndarray, T_body_link: np.ndarray) -> np.ndarray:
    """Inertia given in {link} expressed in {body}: X^T J X with X = Ad_{T_body_link^-1}."""
    if not J.any() or (T_body_link == _EYE).all():  # most links: a massless link, or the body's own frame
        return J
    X = Ad_inv(T_body_link)
    return X.T @ J @ X
