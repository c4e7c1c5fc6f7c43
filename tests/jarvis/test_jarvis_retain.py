"""`jigcmd jarvis --retain`: closed runs past the bound are pruned at start; the audit is kept."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis

# A failsafe for the prune's line to reach the stderr file, never a timing claim.
LINE_S = 60.0
PRUNED = "jigcmd jarvis: retention: pruned 0 operation(s) and 1 jarvis run(s) closed before"


def _closed_runs(state_dir: Path) -> tuple[int, int]:
    """Two closed runs, one of them made to look two days old; each with its audit row."""
    prepare_state_dir(state_dir)
    with Journal.open(state_dir) as journal:
        ids = []
        for _ in range(2):
            run = journal.jarvis_begin(
                tool="jarvis.run.create", argv=["echo", "hi"], cwd="/", actor="a",
                decision="allow", matched_rule="echo", reason="allowed",
            )  # fmt: skip
            journal.jarvis_finish(run, status="exited", exit_code=0, stdout="hi\n")
            journal.audit(
                actor="a", tool="jarvis.run.create", argv=["echo", "hi"], cwd="/",
                decision="allow", matched_rule="echo", outcome="exited",
            )  # fmt: skip
            ids.append(run)
        # The test backdates what only time would change.
        with journal._db.write() as conn:
            conn.execute(
                "UPDATE jarvis_runs SET finished_unix_ms = finished_unix_ms - ?,"
                " created_unix_ms = created_unix_ms - ? WHERE run_id = ?",
                (2 * 86_400_000, 2 * 86_400_000, ids[0]),
            )
    return ids[0], ids[1]


def test_jarvis_with_retain_prunes_old_closed_runs_and_keeps_the_audit(tmp_path: Path) -> None:
    machine_runs_jarvis()
    old, new = _closed_runs(tmp_path / "jarvis-state")
    with JarvisChild(tmp_path, ["--retain", "1d"]) as jarvis:
        deadline = time.monotonic() + LINE_S
        while PRUNED not in jarvis.stderr():
            assert time.monotonic() < deadline, jarvis.stderr()
            time.sleep(0.05)
        jarvis.signal(signal.SIGTERM)
        assert jarvis.wait() == 0
    with Journal.open_read_only(jarvis.state_dir) as journal:
        assert journal.jarvis_get(old) is None
        assert journal.jarvis_get(new) is not None
        assert len(journal.audit_rows()) == 2
