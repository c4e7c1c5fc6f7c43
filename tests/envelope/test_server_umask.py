"""A server started under umask 077 (systemd's `UMask=0077`) still runs candidates.

The envelope's root directories are 0755 and the staged runtime readable by the candidate's
uid whatever the server's umask: `run` and `serve` answer with evidence, not
"exec runtime: Permission denied".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example, jigcmd_cli
from tests.required import unavailable

pytestmark = pytest.mark.envelope


@pytest.fixture(scope="module")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example admitted, on a machine whose envelope the doctor can build."""
    state = tmp_path_factory.mktemp("doctor-state")
    doctor = jigcmd_cli("doctor", "--state-dir", str(state))
    if doctor.returncode != 0:
        unavailable(f"jigcmd doctor says the envelope cannot be built:\n{doctor.stdout}")
    return admit_example(tmp_path_factory.mktemp("umask"))


def _under_umask_077(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
        umask=0o077,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def test_run_under_umask_077_gives_evidence(binding: Path, tmp_path: Path) -> None:
    """`jigcmd run` started with umask 077: the passing tests pass, exit status 0."""
    files = binding.parent / "candidates" / "passing"
    done = _under_umask_077(
        "run", "--binding", str(binding), "--state-dir", str(tmp_path / "state"),
        "tests", "--files", str(files), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["evidence"]["exitCode"] == 0


def test_serve_under_umask_077_answers_with_evidence(binding: Path, tmp_path: Path) -> None:
    """`jigcmd serve` started with umask 077 answers the example's first call with a result."""
    flow = (binding.parent / "requests" / "flow.jsonl").read_bytes().splitlines(keepends=True)
    done = _under_umask_077(
        "serve", "--binding", str(binding), "--state-dir", str(tmp_path / "state"), stdin=flow[0]
    )
    answer = json.loads(done.stdout.splitlines()[-1])
    assert "result" in answer, answer
    assert answer["result"]["value"]["exitCode"] == 0, answer
