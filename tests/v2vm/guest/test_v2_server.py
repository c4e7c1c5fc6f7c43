"""`jigcmd doctor` and a server killed with SIGKILL mid-run, on a pure cgroup v2 machine.

Runs only inside the VM of `scripts/v2vm.py`, as root, through the real command line.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import files as cgroupfs
from jigcmd.envelope.cgroups.v2 import V2Backend
from jigcmd.journal.store import DB_NAME, Journal

pytestmark = pytest.mark.envelope

EXAMPLE = Path(__file__).parents[3] / "jigcmd" / "example"
# Generous for an emulated machine (process start-up there is up to 40x slower).
SECONDS = 180.0
OPERATION = "v2vm-kill-9"
RUN = "v2vm-run"


def jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the jigcmd command line to completion."""
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
    )


# Only the cgroups check is asserted: the probes that start processes under a wall-clock
# bound (network namespace, end-to-end) can overrun it on an emulated machine.
def test_doctor_reports_the_v2_backend_with_jobs_under_the_cgroup2_mount(v2: V2Backend) -> None:
    """The cgroups check of `jigcmd doctor --json` passes and names v2 and the jobs' base; the
    VM is no container."""
    done = jigcmd("doctor", "--json")
    checks = {check["check"]: check for check in json.loads(done.stdout)}
    assert checks["cgroups"]["ok"], checks["cgroups"]
    assert checks["cgroups"]["detail"] == f"v2, jobs under {v2.base_path}"
    assert checks["kernel"]["ok"], checks["kernel"]
    # The host's /.dockerenv is hidden from the guest (scripts/v2vm.py): a VM is no container.
    assert checks["container"]["detail"] == "not in a container", checks["container"]


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The bundled example's Binding, copied and admitted (`jigcmd lock`)."""
    root = tmp_path / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("jigcmd.lock", "__pycache__"))
    done = jigcmd("lock", "--binding", str(root / "binding.toml"))
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "binding.toml"


@pytest.fixture
def server(binding: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`jigcmd serve` with its own state directory; killed by its pid if a test leaves it."""
    # stdout too: an answer before the kill (a refusal) explains a run that never started.
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(tmp_path / "state"),
            "--run-id",
            RUN,
        ],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=log,
    )
    log.close()
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()
    assert process.stdin is not None
    process.stdin.close()


def test_a_server_killed_mid_run_is_recovered_with_its_job_gone_and_its_row_uncertain(
    server: subprocess.Popen[bytes], tmp_path: Path, v2: V2Backend
) -> None:
    """SIGKILL to a server whose candidate spins; `jigcmd recover` leaves no job, row uncertain."""
    call = {
        "jsonrpc": "2.0",
        "id": "v2vm-1",
        "method": "capability/call",
        "params": {
            "operationId": OPERATION,
            "slot": "command",
            "method": "run",
            "input": {"command": "cli", "files": {"src/cli.ts": "for (;;) {}\n"}},
        },
    }
    assert server.stdin is not None
    state_dir = tmp_path / "state"
    log = tmp_path / "server.log"
    # Once the server keeps an envelope prepared (its zygote is up, the runtime staged): under
    # emulation the zygote's start alone can take longer than the call's 10 s ceiling, and
    # what is tested here is a kill mid-run, not a cold start.
    assert cgroupfs.poll_until(lambda: bool(v2.list_jobs()), SECONDS), log.read_text()
    server.stdin.write(json.dumps(call).encode() + b"\n")
    server.stdin.flush()
    assert cgroupfs.poll_until((state_dir / DB_NAME).exists, SECONDS), log.read_text()
    with Journal.open(state_dir) as journal:

        def running() -> bool:
            found = journal.get(OPERATION, root_run=RUN)
            return found is not None and found.state == "running" and bool(found.cgroup_paths)

        assert cgroupfs.poll_until(running, SECONDS), log.read_text()
        before = journal.get(OPERATION, root_run=RUN)
    assert before is not None
    assert before.cgroup_job in v2.list_jobs()
    assert cgroupfs.pids_in(os.path.join(before.cgroup_paths[0], "cgroup.procs"))

    server.send_signal(signal.SIGKILL)
    assert server.wait(timeout=SECONDS) == -signal.SIGKILL
    done = jigcmd("recover", "--state-dir", str(state_dir))
    assert done.returncode == 0, done.stdout + done.stderr

    with Journal.open(state_dir) as journal:
        after = journal.get(OPERATION, root_run=RUN)
    assert after is not None
    # Closed by recovery, or already by the zygote, which fences its runs once the server is
    # gone; either way the run is uncertain and its cleanup proved.
    assert (after.state, after.cleanup) == ("uncertain", "complete")
    assert after.reason.endswith("without a proved result"), after.reason
    assert before.cgroup_job not in v2.list_jobs()
    assert not os.path.exists(before.cgroup_paths[0])
    # Envelopes the dead server had prepared ahead are torn down by their zygote as it exits
    # (or fenced by recovery, which kills a zygote that outlives its grace).
    assert cgroupfs.poll_until(lambda: v2.list_jobs() == [], SECONDS), v2.list_jobs()
