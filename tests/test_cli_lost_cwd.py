"""`jigcmd` started in a working directory that was removed (`cd d; rmdir d`).

Absolute paths everywhere: it works as anywhere else. A relative path given (or in
$JIGCMD_STATE_DIR) cannot be found any more: status 2, one line naming it, no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example

_GONE = "the working directory no longer exists"


def _from_removed_directory(
    tmp_path: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m jigcmd ARGS` started in a directory removed just before."""
    gone = tmp_path / "gone"
    gone.mkdir()
    shell = 'cd "$0" && rmdir "$0" && exec "$@"'
    return subprocess.run(
        ["sh", "-c", shell, str(gone), sys.executable, "-m", "jigcmd", *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.mark.envelope
def test_serve_with_absolute_paths_answers_from_a_removed_directory(tmp_path: Path) -> None:
    """The Flow call is answered and the session ends with status 0 (was a traceback, 1)."""
    binding = admit_example(tmp_path)
    sent = (binding.parent / "requests" / "flow.jsonl").read_bytes()
    state = str(tmp_path / "state")
    done = _from_removed_directory(
        tmp_path, "serve", "--binding", str(binding), "--state-dir", state, stdin=sent
    )
    assert done.returncode == 0, done.stderr
    answers = done.stdout.splitlines()
    assert len(answers) == 1 and '"result"' in answers[0], done.stdout


def test_lock_with_absolute_paths_works_from_a_removed_directory(tmp_path: Path) -> None:
    """`lock --check` of an admitted Binding named absolutely: admitted, status 0."""
    binding = admit_example(tmp_path)
    done = _from_removed_directory(tmp_path, "lock", "--binding", str(binding), "--check")
    assert (done.returncode, done.stdout) == (0, "admitted\n"), done.stderr


@pytest.mark.parametrize("verb", ["serve", "lock"])
def test_a_relative_binding_is_a_usage_error_naming_it(tmp_path: Path, verb: str) -> None:
    """argparse's error names --binding and the fix; no traceback."""
    done = _from_removed_directory(tmp_path, verb, "--binding", "binding.toml")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"argument --binding: binding.toml: {_GONE}: give absolute paths" in done.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["runs", "--state-dir", "state"], "'state'"),
        (["init", "."], "'.'"),
        (["request", "tests", "--files", "project"], "'project'"),
        (["runs"], "$JIGCMD_STATE_DIR='state'"),
    ],
)
def test_a_relative_path_is_refused_by_name(tmp_path: Path, args: list[str], named: str) -> None:
    """Status 2, one stderr line naming the path and the fix; nothing made."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if args == ["runs"]:
        env["JIGCMD_STATE_DIR"] = "state"
    done = _from_removed_directory(tmp_path, *args, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"jigcmd {args[0]}: {_GONE}, so the relative path {named} cannot be found: "
        "give absolute paths or cd elsewhere; nothing ran\n"
    )
    assert done.stdout == ""
    assert not Path("/state").exists()


def test_run_json_answers_the_refusal_as_its_one_object(tmp_path: Path) -> None:
    """`run --json` keeps its promise of one stdout object (INVALID_INPUT), status 2."""
    binding = admit_example(tmp_path)
    done = _from_removed_directory(
        tmp_path, "run", "--binding", str(binding), "tests", "--files", ".", "--json"
    )
    assert done.returncode == 2, done.stderr
    assert '"code":"INVALID_INPUT"' in done.stdout
    assert f"{_GONE}, so the relative path '.' cannot be found" in done.stdout


def test_a_dash_is_standard_input_not_a_relative_path(tmp_path: Path) -> None:
    """`verify -` reads the bundle from stdin: it gets as far as reading it (was refused)."""
    done = _from_removed_directory(tmp_path, "verify", "-", stdin=b"not a bundle\n")
    assert _GONE not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert "jigcmd verify: -: not a bundle: not JSON Lines of DSSE envelopes" in done.stderr


def test_a_relative_signing_key_variable_is_refused_by_name(tmp_path: Path) -> None:
    """$JIGCMD_SIGNING_KEY=k.pem would quietly have become /k.pem."""
    env = {"PATH": "/usr/bin:/bin", "JIGCMD_SIGNING_KEY": "k.pem"}
    done = _from_removed_directory(tmp_path, "key", env=env)
    assert done.returncode == 2, done.stderr
    assert "$JIGCMD_SIGNING_KEY='k.pem'" in done.stderr and _GONE in done.stderr
