"""The state directory a refusal names for example is one its user could make and use."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.required import require_root, unavailable
from tests.rootless.rig import build_kit, system_python

# Failsafe only (a run that hangs fails here instead of holding the suite), no timing claim.
_TIMEOUT_S = 120
_NAME = "jigcmdnohome"
# What serve and run say making the state directory named on the command line.
_PREPARE = """
import sys
from pathlib import Path
from jigcmd.durable.statedir import StateDirError, prepare_state_dir
try:
    prepare_state_dir(Path(sys.argv[1]))
except StateDirError as exc:
    print(exc.fix)
"""


@dataclass(frozen=True)
class Homeless:
    """An account whose passwd home was never made (`useradd -M`), and jigcmd copied to `kit`."""

    uid: int
    base: Path
    home: Path
    kit: Path
    python: str


@pytest.fixture(scope="module")
def homeless() -> Iterator[Homeless]:
    """The account and a `jigcmd-` scratch directory (root's, 0755), both removed after."""
    require_root("needs root: the test adds an account and runs jigcmd as it")
    for tool in ("setpriv", "useradd", "userdel"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is missing")
    python = system_python()
    base = Path(tempfile.mkdtemp(prefix="jigcmd-nohome-", dir="/tmp"))
    try:
        base.chmod(0o755)
        home = base / "absent"
        subprocess.run(
            ["useradd", "-M", "-d", str(home), "-s", "/usr/sbin/nologin", _NAME], check=True
        )
        try:
            build_kit(base / "kit")
            yield Homeless(pwd.getpwnam(_NAME).pw_uid, base, home, base / "kit", python)
        finally:
            subprocess.run(["userdel", _NAME], check=False)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_home_that_does_not_exist_is_not_offered_as_the_state_dir_to_use(
    homeless: Homeless,
) -> None:
    """`--state-dir ~/.local/state/jigcmd` would fail "Permission denied" too: no example."""
    elsewhere = homeless.base / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.chown(elsewhere, homeless.uid, homeless.uid)
    done = subprocess.run(
        ["setpriv", f"--reuid={homeless.uid}", f"--regid={homeless.uid}", "--clear-groups",
         "env", "-i", f"PYTHONPATH={homeless.kit}", f"HOME={elsewhere}", "LANG=C.UTF-8",
         homeless.python, "-c", _PREPARE, str(homeless.base / "forbidden" / "state")],
        capture_output=True, text=True, timeout=_TIMEOUT_S, check=False, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "use a state directory you may create: --state-dir DIR (or $JIGCMD_STATE_DIR)"
    )
    assert not homeless.home.exists()
