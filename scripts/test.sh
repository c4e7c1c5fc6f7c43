#!/usr/bin/env bash
# Set up a fresh machine and run every check: install into ./.venv, lint, type-check, test.
# The envelope tests build real namespaces and cgroups: run as root (or see README,
# "Running without root"). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
