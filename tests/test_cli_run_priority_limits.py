"""`jigcmd run` under a server allowed a lower nice and a real-time policy: the candidate is not.

Pid 1 shares the candidate's CPU; a candidate at nice -20 or under SCHED_FIFO could starve it
of the collection. Raising the limits needs `CAP_SYS_RESOURCE`, which the v2 VM's root has
(this module is in its guest suites) and a hybrid development host's root may lack.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import require_tools
from tests.test_cli_run import BINDING, evidence, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

# Its own limits as the kernel reports them, then what each attempt to use them returns.
_CLI = """
import { readFileSync } from "fs";
import { dlopen, FFIType } from "bun:ffi";
import os from "os";
for (const line of readFileSync("/proc/self/limits", "utf8").split("\\n")) {
  const limit = /^Max (nice|realtime) priority/.test(line);
  if (limit) console.log(line.trim().split(/\\s{2,}/).join("|"));
}
try { os.setPriority(-5); console.log("nice -5 ok"); } catch { console.log("nice -5 refused"); }
const libc = dlopen("libc.so.6", {
  sched_setscheduler: { args: [FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
});
const param = new Int32Array([1]);
console.log("SCHED_FIFO", libc.symbols.sched_setscheduler(0, 1, param));
"""


def test_the_candidate_gets_no_nice_and_no_real_time_priority_the_server_has(
    lock: Path, tmp_path: Path
) -> None:
    """Server at RLIMIT_NICE 30 and RLIMIT_RTPRIO 50: the candidate's are 0, using them fails."""
    require_tools("prlimit", what="raising the server's priority limits")
    raised = subprocess.run(
        ["prlimit", "--nice=30:30", "--rtprio=50:50", "true"], capture_output=True, check=False
    )
    if raised.returncode != 0:
        pytest.skip("this host's root cannot raise RLIMIT_NICE (no CAP_SYS_RESOURCE)")
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text(_CLI)
    done = subprocess.run(
        ["prlimit", "--nice=30:30", "--rtprio=50:50", sys.executable, "-m", "jigcmd", "run",
         "--binding", str(BINDING), "--lock", str(lock), "--state-dir", str(tmp_path / "state"),
         "cli", "--files", str(files), "--json"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ended = evidence(done)
    assert ended.exit_code == 0, ended
    assert ended.stdout.text.splitlines() == [
        "Max nice priority|0|0",
        "Max realtime priority|0|0",
        "nice -5 refused",
        "SCHED_FIFO -1",
    ], ended.stdout.text
