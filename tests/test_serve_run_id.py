"""`jigcmd serve`'s run id: given, from the environment, or generated; a bad one is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.frontends.serve import (
    ROOT_DEADLINE_VARIABLE,
    RUN_ID_VARIABLE,
    RunIdError,
    resolve_root_deadline,
    resolve_run_id,
)
from jigcmd.protocol import jsonrpc


def test_the_option_wins_over_the_environment() -> None:
    """--run-id names the run even when JIGCMD_RUN_ID is set."""
    assert resolve_run_id("run-7", {RUN_ID_VARIABLE: "run-env"}) == ("run-7", False)


def test_the_environment_names_the_run_without_the_option() -> None:
    """JIGCMD_RUN_ID is used as given."""
    assert resolve_run_id(None, {RUN_ID_VARIABLE: "coordinator/run:42"}) == (
        "coordinator/run:42",
        False,
    )


def test_without_either_each_session_is_a_fresh_run() -> None:
    """Two sessions without a run id get two different, well-formed generated ids."""
    first, generated = resolve_run_id(None, {})
    second, _ = resolve_run_id(None, {})
    assert generated and first != second
    assert jsonrpc.is_run1_id(first) and first.startswith("run-")


@pytest.mark.parametrize("bad", ["", "-leading-dash", "has space", "x" * 129, "ümlaut"])
def test_a_run_id_outside_the_run1_id_grammar_is_refused(bad: str) -> None:
    """The grammar of Run/1 ids, 1-128 bytes; anything else is a usage error."""
    with pytest.raises(RunIdError, match="must match"):
        resolve_run_id(bad, {})


def test_serve_with_a_bad_run_id_exits_2_naming_the_rule(tmp_path: Path) -> None:
    """Refused before anything starts: exit status 2 and the rule on stderr."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(tmp_path / "missing.toml"),
            "--run-id",
            "has space",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--run-id 'has space' must match" in done.stderr
    assert done.stdout == ""


def test_serve_with_an_empty_run_id_variable_exits_2_naming_it(tmp_path: Path) -> None:
    """`JIGCMD_RUN_ID=` is not a run id: refused naming the variable, not a generated run."""
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve", "--binding", str(tmp_path / "missing.toml")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, RUN_ID_VARIABLE: ""},
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"jigcmd serve: {RUN_ID_VARIABLE}='' must match [A-Za-z0-9][A-Za-z0-9._:/-]* "
        "(1-128 bytes) (unset it for a generated run id)\n"
    )


def test_the_root_deadline_comes_from_the_flag_else_the_environment() -> None:
    """`--root-deadline-unix-ms` wins; else `JIGCMD_ROOT_DEADLINE_UNIX_MS`; else none."""
    environ = {ROOT_DEADLINE_VARIABLE: "1798761600000"}
    assert resolve_root_deadline(5, environ) == 5
    assert resolve_root_deadline(None, environ) == 1798761600000
    assert resolve_root_deadline(None, {}) is None


@pytest.mark.parametrize("bad", ["", "soon", "-1", "1.5", "\uff11\uff12"])
def test_a_root_deadline_that_is_not_unix_milliseconds_is_refused_naming_the_variable(
    bad: str,
) -> None:
    """A malformed environment deadline is refused, never read as no deadline."""
    with pytest.raises(RunIdError, match=ROOT_DEADLINE_VARIABLE):
        resolve_root_deadline(None, {ROOT_DEADLINE_VARIABLE: bad})


def test_serve_with_an_empty_root_deadline_variable_exits_2_naming_it(tmp_path: Path) -> None:
    """`JIGCMD_ROOT_DEADLINE_UNIX_MS=` is not Unix milliseconds: refused, not no deadline."""
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve",
         "--binding", str(tmp_path / "missing.toml"), "--run-id", "run-1"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, ROOT_DEADLINE_VARIABLE: ""},
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{ROOT_DEADLINE_VARIABLE}: '' is not Unix milliseconds" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("flag", "variable"),
    [(["--root-deadline-unix-ms", "99999999999999999999"], None), ([], "9007199254740992")],
)
def test_serve_refuses_a_root_deadline_beyond_what_a_call_may_carry(
    tmp_path: Path, flag: list[str], variable: str | None
) -> None:
    """The flag and the variable are bounded as a call's `deadlineUnixMs` is: 2^53-1."""
    env = dict(os.environ)
    env.pop(ROOT_DEADLINE_VARIABLE, None)
    if variable is not None:
        env[ROOT_DEADLINE_VARIABLE] = variable
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve",
         "--binding", str(tmp_path / "missing.toml"), "--run-id", "run-1", *flag],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is beyond 2^53-1 (9007199254740991)" in done.stderr
    assert done.stdout == ""
