"""`jigcmd run` of a candidate that dies of a signal: evidence naming it, output kept.

Pid 1 reports the signal's number; any signal the kernel can deliver gets a name
(`jigcmd.signames`), the real-time ones (34-64, which Python's `signal.Signals` mostly lacks)
as bash's `kill -l` prints them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli_run import evidence, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

# Prints, then kills itself with the signal its argument names; it never gets further.
_CLI = """
const signal = Number(process.argv[2]);
console.log("bye " + signal);
process.kill(process.pid, signal);
await Bun.sleep(5000);
console.log("still here");
"""


@pytest.mark.parametrize(
    ("number", "name"), [(34, "SIGRTMIN"), (40, "SIGRTMIN+6"), (64, "SIGRTMAX")]
)
def test_a_candidate_killed_by_a_real_time_signal_is_evidence_naming_it(
    lock: Path, tmp_path: Path, number: int, name: str
) -> None:
    """Signal 40 (34, 64): exited, `SIGRTMIN+6`, no exit code, output kept; never "nothing ran"."""
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text(_CLI)
    done = run(lock, tmp_path / "state", "cli", files, "--json", "--", str(number))
    assert done.returncode == 0, done.stdout + done.stderr
    ended = evidence(done)
    assert (ended.stop_reason, ended.signal, ended.exit_code) == ("exited", name, None)
    assert ended.stdout.text == f"bye {number}\n"
