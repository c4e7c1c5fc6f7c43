# Sourced by demo.sh and test.sh: make ./.venv and install jigcmd into it, saying what happens.
# A fresh install is minutes of downloads (the test environment is ~290 MB on disk, Bun alone
# 79 MB), so pip shows its own progress: a line per package and a bar per download. Once .venv
# holds jigcmd, a rerun only checks what is installed, and pip's line per satisfied
# requirement would be all noise: it runs quietly.
install_venv() {
    local target=$1 quiet=()
    python3 -m venv .venv
    if [ -x .venv/bin/jigcmd ]; then
        echo "setup: .venv already holds jigcmd; checking ${target} quietly"
        quiet=(--quiet)
    else
        echo "setup: installing ${target} into ./.venv (first time: pip's own progress below)"
    fi
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install "${quiet[@]}" -e "${target}"
    echo "setup: done; . .venv/bin/activate puts jigcmd on your PATH"
}
