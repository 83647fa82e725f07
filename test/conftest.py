"""Test modules that need an optional extra are left out where it is missing, before pytest
imports them: a module-level skip raised while launch_testing's collection hook imports every file
of this folder would skip the whole folder, the launch tests with it (a ROS 2 workspace without
the fleet extra). The header of the run says what was left out and why."""
from __future__ import annotations

import importlib.util

# module -> the distributions it imports at module level (besides the base test extra)
_NEEDS = {
    "test_fleet.py": ("duckdb", "distributed", "pyarrow"),
    "test_fleet_split.py": ("duckdb", "distributed", "pyarrow"),
    "test_fleet_store.py": ("duckdb", "distributed", "pyarrow"),
}
_MISSING = {name: [m for m in mods if importlib.util.find_spec(m) is None] for name, mods in _NEEDS.items()}
collect_ignore = [name for name, missing in _MISSING.items() if missing]


def pytest_report_header() -> list[str]:
    return [f"left out {name}: no {', '.join(missing)} (pip install -e '.[test]')"
            for name, missing in _MISSING.items() if missing]
