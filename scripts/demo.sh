#!/usr/bin/env bash
# Set up a fresh machine and run the main job: the bundled example through a real
# `jigcmd serve` (passing, failing and hostile candidates, a CLI with args and stdin).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
install_venv .
.venv/bin/jigcmd doctor
.venv/bin/jigcmd demo
echo
echo "next: . .venv/bin/activate (jigcmd on your PATH), then README.md 'Your first calls'"
