"""Robot models: the Panda description shipped with liedyn_ros, and where the `example-robot-data`
package keeps its URDFs.

It is a cmeel package: the files sit under site-packages/cmeel.prefix/share, with no Python
module to import, so the folder is found from the installed distribution's file list.
"""
from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

__all__ = ["panda_urdf", "robots_dir"]

_RELATIVE = Path("cmeel.prefix/share/example-robot-data/robots")


def panda_urdf() -> Path:
    """The Franka Panda URDF shipped with liedyn_ros (franka_ros' kinematics and inertial parameters,
    no meshes: its source is named in the file), the built-in example's robot."""
    return Path(__file__).resolve().parent / "robots" / "panda.urdf"


def robots_dir() -> Path:
    """example-robot-data's robots/ folder; FileNotFoundError when the package is not installed."""
    try:
        for f in importlib.metadata.files("example-robot-data") or ():
            parts = Path(str(f)).parts
            if "robots" in parts and "example-robot-data" in parts:
                path = Path(str(f.locate())).resolve()
                while path.name != "robots":
                    path = path.parent
                return path
    except importlib.metadata.PackageNotFoundError:
        pass
    for entry in sys.path:
        candidate = Path(entry or ".") / _RELATIVE
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("example-robot-data is not installed: pip install example-robot-data")
