"""jarvis under a cgroup base whose cpuset shares no CPU with the server: each allowed run is
refused 503 naming both CPU sets, and the refusal is in the audit log like every run that
never started (it once reached the caller only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cpusetbase import narrow_cpuset_base
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth, invoke_body

narrow_base = pytest.fixture(name="narrow_base")(narrow_cpuset_base)


def _audit(state_dir: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "jarvis-audit", "--state-dir", str(state_dir)],
        capture_output=True, text=True, timeout=60, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_run_with_no_cpu_to_place_it_on_is_refused_and_audited(
    tmp_path: Path, narrow_base: tuple[str, int]
) -> None:
    """Server on CPU {0}, base cpuset {n}: 503 naming both, one `refused: …` audit row."""
    machine_runs_jarvis()
    base, cpu = narrow_base
    first = min(os.sched_getaffinity(0))
    with JarvisChild(tmp_path, ("--cgroup-base", base), cpus={first}) as jarvis:
        with httpx.Client(timeout=60) as client:
            answer = client.post(
                f"{jarvis.base}/tools/jarvis.run.create",
                json=invoke_body("jarvis.run.create", argv=["echo", "hi"]),
                headers=auth(),
            )
        assert answer.status_code == 503, answer.text
        assert f"gives its jobs CPUs {cpu}," in answer.text
        assert f"may run on CPUs {first} only; nothing ran" in answer.text
        rows = _audit(jarvis.state_dir)
    refused = [row for row in rows if str(row["outcome"]).startswith("refused: no CPU")]
    assert len(refused) == 1, rows
    assert (refused[0]["argv"], refused[0]["decision"]) == (["echo", "hi"], "allow")
    assert not [row for row in rows if str(row["outcome"]).startswith("started run")], rows
