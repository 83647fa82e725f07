#!/usr/bin/env bash
# Installs liedyn_ros into .venv and runs the built-in example.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
.venv/bin/python -m liedyn_ros.demo "$@"
