#!/usr/bin/env bash
# Installs liedyn_ros with its test dependencies into .venv and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install -e ".[test]"   # pip's own progress, not a silent minute
PYTHON=.venv/bin/python bash scripts/typecheck.sh
.venv/bin/python -m pytest -rs --doctest-modules test liedyn_ros/core "$@"
