"""`jigcmd doctor` as a non-root user whose default state directory cannot be made or trusted.

The doctor's state line fails with the reason serve and run give when they try to make it
(`prepare_state_dir`, run here as the same user), and makes nothing. The user is a
throw-away uid no account has, running jigcmd from a copy of it and its dependencies
(`tests.rootless.rig.build_kit`) with the system's Python, as docs/rootless.md's user does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.required import require_root, unavailable
from tests.rootless.rig import build_kit, system_python, unused_uid

# Every doctor run forks its namespace probes (the end-to-end run is not attempted: this
# user has no delegated cgroup subtree).
pytestmark = pytest.mark.envelope

# Failsafe only (a run that hangs fails here instead of holding the suite), no timing claim.
_TIMEOUT_S = 120
# serve's and run's own step: the reason they refuse the default state directory with.
_PREPARE = """
from jigcmd.durable.statedir import StateDirError, default_state_dir, prepare_state_dir
try:
    print(prepare_state_dir(default_state_dir()))
except StateDirError as exc:
    print(exc.reason)
"""


@dataclass(frozen=True)
class User:
    """A uid with a home of its own in `base` (root's, 0755), and jigcmd copied to `kit`."""

    uid: int
    base: Path
    home: Path
    kit: Path
    python: str

    def python_as(self, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
        """`python argv…` as the user, from /, with only `env` (and the kit) in its environment."""
        assignments = [f"{name}={value}" for name, value in env.items()]
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
             "env", "-i", f"PYTHONPATH={self.kit}", "LANG=C.UTF-8", *assignments,
             self.python, *argv],
            capture_output=True, text=True, timeout=_TIMEOUT_S, check=False, cwd="/",
        )  # fmt: skip

    def state_line(self, env: dict[str, str]) -> dict[str, Any]:
        """The doctor's state check (`--json`) with `env`."""
        done = self.python_as(env, "-m", "jigcmd", "doctor", "--json")
        found = {check["check"]: check for check in json.loads(done.stdout)}
        assert done.returncode == (0 if all(c["ok"] for c in found.values()) else 1)
        state: dict[str, Any] = found["state"]
        return state | {"key": found["signing key"]}

    def refusal(self, env: dict[str, str]) -> str:
        """What serve and run say making the default state directory with `env`."""
        done = self.python_as(env, "-c", _PREPARE)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture(scope="module")
def user() -> Iterator[User]:
    """The uid, its home and the kit, in a `jigcmd-` scratch directory removed after."""
    require_root("needs root: the test runs jigcmd as another uid")
    if shutil.which("setpriv") is None:
        unavailable("setpriv (util-linux) is missing")
    python = system_python()
    base = Path(tempfile.mkdtemp(prefix="jigcmd-nonroot-", dir="/tmp"))
    try:
        base.chmod(0o755)
        uid = unused_uid()
        home = base / "home"
        home.mkdir(mode=0o700)
        os.chown(home, uid, uid)
        build_kit(base / "kit")
        yield User(uid, base, home, base / "kit", python)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _fails_as_serve_refuses(user: User, env: dict[str, str], reason: str) -> None:
    line = user.state_line(env)
    assert (line["status"], line["detail"]) == ("FAIL", reason), line
    assert user.refusal(env) == reason
    assert line["key"]["status"] == "warn", line["key"]


def test_a_home_under_a_directory_the_user_may_not_write_fails_with_runs_reason(
    user: User,
) -> None:
    """HOME=/nonexistent: not a warning that serve will make it, but its Permission denied."""
    missing = user.base / "nonexistent"
    reason = f"state directory {missing} cannot be created: Permission denied"
    _fails_as_serve_refuses(user, {"HOME": str(missing)}, reason)
    assert not missing.exists()


def test_an_xdg_state_home_in_a_group_writable_directory_fails_and_nothing_is_made(
    user: User,
) -> None:
    """Doctor and serve refuse it alike; neither leaves a directory in the untrusted one."""
    shared = user.base / "shared"
    shared.mkdir(mode=0o777, exist_ok=True)
    shared.chmod(0o777)
    env = {"HOME": str(user.home), "XDG_STATE_HOME": str(shared / "state")}
    reason = (
        f"{shared}, on the state directory's path, is writable by group or others "
        "(owner uid 0, mode 0777): another user could replace what follows it"
    )
    _fails_as_serve_refuses(user, env, reason)
    assert os.listdir(shared) == []
    # Not the user's directory: no chmod it cannot run, but one of its own to use.
    fix = user.state_line(env)["hint"]
    assert fix.startswith("use a state directory whose every parent only root or you may")
    assert fix.endswith(f"or ask its owner (uid 0) to run chmod go-w {shared}")


def test_an_xdg_state_home_dangling_into_a_directory_the_user_may_not_write_fails(
    user: User,
) -> None:
    """The link is followed as serve follows it, and its target judged."""
    link = user.base / "dangling"
    link.unlink(missing_ok=True)
    link.symlink_to(user.base / "gone" / "state")
    env = {"HOME": str(user.home), "XDG_STATE_HOME": str(link)}
    reason = f"state directory {user.base / 'gone'} cannot be created: Permission denied"
    _fails_as_serve_refuses(user, env, reason)


def test_an_empty_home_is_said_to_be_empty_not_resolved_to_root(user: User) -> None:
    """HOME="" is not `/` (whose /.local no user may create)."""
    reason = "no state directory: HOME is empty, and XDG_STATE_HOME is not set to an absolute path"
    line = user.state_line({"HOME": ""})
    assert (line["status"], line["detail"]) == ("FAIL", reason), line


def test_a_default_state_dir_the_user_may_make_is_a_warning_and_stays_unmade(
    user: User,
) -> None:
    """The one case serve and run make it on first use: said so, and not made."""
    line = user.state_line({"HOME": str(user.home)})
    default = user.home / ".local" / "state" / "jigcmd"
    assert line["status"] == "warn", line
    assert line["detail"].startswith(f"{default} does not exist yet (nothing was created)")
    assert line["key"]["status"] == "ok", line["key"]
    assert os.listdir(user.home) == []
