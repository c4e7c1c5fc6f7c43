#!/usr/bin/env bash
# Set up a fresh machine and run the main job: the bundled example through a real
# `jigcmd serve` (passing, failing and hostile candidates, a CLI with args and stdin).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
.venv/bin/jigcmd doctor
exec .venv/bin/jigcmd demo
