#!/usr/bin/env bash
# Set up a fresh machine and run every check: install into ./.venv, lint, type-check, test.
# The envelope tests build real namespaces and cgroups: run as root (or see README,
# "Running without root"). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
install_venv '.[test]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
