# Sourced by demo.sh and test.sh: make ./.venv and install jigcmd into it, saying what happens.
# A fresh install is minutes of downloads (the test environment is ~290 MB on disk, Bun alone
# 79 MB), so pip shows its own progress: a line per package and a bar per download. jigcmd is
# installed editable, so code changes need no reinstall: a rerun whose pyproject.toml and
# target are those of the last install (recorded in .venv/.jigcmd-install) installs nothing,
# and any other rerun checks what is installed quietly.
install_venv() {
    local target=$1 quiet=() stamp=.venv/.jigcmd-install wanted
    wanted="$(sha256sum pyproject.toml | cut -d' ' -f1) ${target}"
    if [ -x .venv/bin/jigcmd ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
        echo "setup: .venv already holds jigcmd ${target} for this pyproject.toml"
        return 0
    fi
    python3 -m venv .venv
    if [ -x .venv/bin/jigcmd ]; then
        echo "setup: .venv already holds jigcmd; checking ${target} quietly"
        quiet=(--quiet)
    else
        echo "setup: installing ${target} into ./.venv (first time: pip's own progress below)"
    fi
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install "${quiet[@]}" -e "${target}"
    echo "${wanted}" > "${stamp}"
    echo "setup: done; . .venv/bin/activate puts jigcmd on your PATH"
}
