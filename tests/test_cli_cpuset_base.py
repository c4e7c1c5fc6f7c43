"""A cgroup base whose cpuset is narrower than the server's affinity, through `jigcmd run`:
the envelope is placed on a CPU both allow, and where none is, the run is refused naming the
base's CPUs and the fix (the kernel's "cannot write '0': Permission denied" said neither)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.cpusetbase import narrow_cpuset_base

narrow_base = pytest.fixture(name="narrow_base")(narrow_cpuset_base)


def _run(tmp_path: Path, base: str, cpus: set[int] | None) -> subprocess.CompletedProcess[str]:
    """`jigcmd run` of the example's passing tests under `base`, on `cpus` (None: ours)."""
    binding = admit_example(tmp_path)
    candidate = binding.parent / "candidates" / "passing"
    argv = ["--binding", str(binding), "--state-dir", str(tmp_path / "state")]
    argv += ["--cgroup-base", base, "tests", "--files", str(candidate), "--json"]
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "run", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    )


def test_a_run_is_placed_on_a_cpu_the_bases_cpuset_allows(
    tmp_path: Path, narrow_base: tuple[str, int]
) -> None:
    """Affinity 0..n, base cpuset {n}: the run completes, pinned to CPU n."""
    base, cpu = narrow_base
    done = _run(tmp_path, base, None)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["evidence"]["exitCode"] == 0, answer["evidence"]
    # The envelope as enforced, in the run's signed statement.
    statement = json.loads(base64.b64decode(answer["attestation"]["envelopes"][0]["payload"]))
    assert statement["predicate"]["envelope"]["cpus"] == [cpu]


def test_a_base_sharing_no_cpu_with_the_server_is_refused_naming_its_cpus_and_the_fix(
    tmp_path: Path, narrow_base: tuple[str, int]
) -> None:
    """Affinity {0}, base cpuset {n}: EXECUTION_FAILED (exit 3) naming both and taskset."""
    base, cpu = narrow_base
    first = min(os.sched_getaffinity(0))
    done = _run(tmp_path, base, {first})
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert "EXECUTION_FAILED" in said
    assert f"/cpuset/{base}/cpuset.effective_cpus) gives its jobs CPUs {cpu}," in said
    assert f"this process may run on CPUs {first} only; nothing ran" in said
    assert f"taskset -c {cpu} jigcmd" in said
