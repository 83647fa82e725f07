"""The output directory: a replay clears what an earlier replay wrote there, and nothing else.

Each replay ends by listing the names it wrote in DIR/.liedyn-replay. The next replay into
DIR removes those names first, so no plot or CSV of an earlier run with other settings is
left next to the new ones; a directory holding anything else is refused.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

from .errors import ReplayError

if TYPE_CHECKING:
    from pathlib import Path

MANIFEST = ".liedyn-replay"
# What replays wrote before the manifest existed (a summary.json beside them tells them apart).
_LEGACY_SUFFIXES = (".csv", ".png", ".json", ".yaml")


def claim(out: Path) -> None:
    """Makes `out` an empty directory for this replay (see the module docstring)."""
    if out.exists() and not out.is_dir():
        raise ReplayError(f"--out {out} is a file; give a directory (new, empty, or an earlier replay's)")
    if not out.exists():
        try:
            out.mkdir(parents=True)
        except OSError as err:
            raise ReplayError(f"--out {out}: cannot create it ({err.strerror or err})") from err
        return
    owned = _owned(out)
    foreign = sorted(p.name for p in out.iterdir() if p.name not in owned)
    if foreign:
        shown = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
        raise ReplayError(f"--out {out} holds files that no replay wrote ({shown}); give a new or empty directory")
    for name in owned:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def record(out: Path) -> None:
    """Lists what this replay wrote into `out`, for the next replay to clear."""
    names = sorted(p.name for p in out.iterdir() if p.name != MANIFEST)
    (out / MANIFEST).write_text("".join(f"{name}\n" for name in names))


def _owned(out: Path) -> set[str]:
    manifest = out / MANIFEST
    if manifest.is_file():
        return {line for line in manifest.read_text().splitlines() if line not in ("", ".", "..") and "/" not in line} | {MANIFEST}
    summary = out / "summary.json"
    try:
        legacy = "joints" in json.loads(summary.read_text())
    except (OSError, ValueError):
        legacy = False
    if not legacy:
        return set()
    return {p.name for p in out.iterdir() if p.suffix in _LEGACY_SUFFIXES or (p.name == "outputs" and p.is_dir())}
