#!/usr/bin/env bash
# Installs liedyn_ros (runtime dependencies; the Panda model ships with the package) into .venv
# and runs the built-in example; the commands are then in .venv/bin (source .venv/bin/activate).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install -e .
.venv/bin/python -m liedyn_ros.demo "$@"
