"""Survey of real robot descriptions: does each load, with which accepted flaws, or why not.

    python scripts/survey_urdfs.py                       # the URDFs of example-robot-data
    python scripts/survey_urdfs.py DIR_OR_FILE ... [--packages ROOT ...] [--xacro-arg NAME:=VALUE ...]

A folder stands for the *.urdf and *.urdf.xacro files under it. Xacro files are expanded with
the `xacro` package (pip install xacro); `$(find PKG)` resolves to the folder holding PKG's
package.xml under a --packages root (the folders given are searched too), so a description
repository works without a ROS install. Each file prints one line: `ok` with the model's size,
`flawed` with the accepted flaws (load_urdf's warnings), or `refused` with load_urdf's message,
and what Pinocchio says of the same XML when it is installed. A summary closes the run.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from liedyn_ros import core


def _packages(roots: list[Path]) -> dict[str, Path]:
    """PKG -> its folder, for every package.xml under the roots."""
    import xml.etree.ElementTree as ET

    found: dict[str, Path] = {}
    for root in roots:
        for manifest in root.rglob("package.xml"):
            name = ET.parse(manifest).getroot().findtext("name")
            if name:
                found.setdefault(name.strip(), manifest.parent)
    return found


def _expander(package_roots: list[Path], mappings: dict[str, str]):
    """A function XACRO_PATH -> URDF text; `$(find PKG)` looks PKG up under package_roots."""
    import xacro
    import xacro.substitution_args

    packages = _packages(package_roots)

    def find(pkg: str) -> str:
        if pkg not in packages:
            raise RuntimeError(f"$(find {pkg}): no package.xml naming {pkg} under {[str(r) for r in package_roots]}")
        return str(packages[pkg])

    # xacro finds packages through the ament index; without ROS the survey supplies its own lookup.
    xacro.substitution_args._eval_find = find

    def expand(path: Path) -> str:
        return xacro.process_file(str(path), mappings=dict(mappings)).toprettyxml(indent="  ")

    return expand


def _pinocchio_verdict(xml: str) -> str:
    try:
        import pinocchio as pin
    except ImportError:
        return ""
    try:
        model = pin.buildModelFromXML(xml)
    except Exception as exc:  # noqa: BLE001 - any refusal is the verdict
        return f"pinocchio refuses: {str(exc).strip().splitlines()[0][:100]}"
    return f"pinocchio nv={model.nv}"


def survey_one(path: Path, expand) -> tuple[str, str]:
    """(verdict, line) for one file; verdict is 'ok', 'flawed', 'refused' or 'xacro failed'."""
    if path.suffix == ".xacro":
        try:
            xml = expand(path)
        except Exception as exc:  # noqa: BLE001 - xacro's own message says what is missing
            return "xacro failed", f"xacro failed: {type(exc).__name__}: {str(exc).strip()[:160]}"
    else:
        xml = path.read_text()
    pin_says = _pinocchio_verdict(xml)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", core.URDFWarning)
        try:
            model = core.load_urdf(xml)
        except ValueError as exc:
            return "refused", f"refused: {exc}  [{pin_says}]"
    size = f"n={model.n} bodies={model.nb}"
    if model.flaws:
        notes = " | ".join(str(w.message) for w in caught if issubclass(w.category, core.URDFWarning))
        return "flawed", f"flawed ({size}): {notes}  [{pin_says}]"
    return "ok", f"ok ({size})  [{pin_says}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="URDF/xacro files or folders (default: example-robot-data)")
    parser.add_argument("--packages", action="append", type=Path, default=[],
                        help="a folder searched for package.xml files, for $(find PKG) (repeatable)")
    parser.add_argument("--xacro-arg", action="append", default=[], metavar="NAME:=VALUE",
                        help="an argument for every xacro file (repeatable)")
    args = parser.parse_args(argv)
    if args.paths:
        roots = args.paths
    else:
        from liedyn_ros.robot_data import robots_dir

        roots = [robots_dir()]
    files: list[Path] = []
    for root in roots:
        if root.is_dir():
            files += sorted(p for p in root.rglob("*") if p.name.endswith((".urdf", ".urdf.xacro")))
        else:
            files.append(root)
    mappings = dict(a.split(":=", 1) for a in args.xacro_arg)
    expand = _expander(args.packages + [r for r in roots if r.is_dir()], mappings) \
        if any(f.suffix == ".xacro" for f in files) else None
    counts: dict[str, int] = {}
    common = Path(os.path.commonpath([str(f.resolve()) for f in files])) if len(files) > 1 else Path()
    for f in files:
        verdict, line = survey_one(f, expand)
        counts[verdict] = counts.get(verdict, 0) + 1
        name = f.resolve().relative_to(common) if common != Path() else f
        print(f"{name}: {line}")
    print(f"{len(files)} files: " + ", ".join(f"{v} {counts[v]}" for v in ("ok", "flawed", "refused", "xacro failed")
                                              if v in counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
