#!/usr/bin/env bash
# Set up a fresh machine and run every check: install into ./.venv, lint, type-check, test.
# The envelope tests build real namespaces and cgroups: run as root (or see
# docs/rootless.md). Optional tools (podman, runc, uidmap, qemu, busybox-static) add suites;
# each one missing is a skip naming its Debian package, and a failure when CI is set.
#
#   scripts/test.sh [--quick] [PYTEST-ARGS...]
#
# --quick: the pure and process-level tests only, no envelope, no VM, nothing slow
# (`-m "not envelope and not v2vm and not slow"`, a minute or two on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
if [[ "${1:-}" == "--quick" ]]; then
    shift
    quick=(-m "not envelope and not v2vm and not slow")
fi
. scripts/venv.sh
install_venv '.[test]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
exec .venv/bin/python -m pytest "${quick[@]}" "$@"
