"""A state directory removed under a live `serve`: nothing runs unrecorded, one line, exit 2."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest

from tests.lifetime.candidates import QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope


def _one_line_exit_2(stderr: str, state: str) -> None:
    """The server's last words: one `jigcmd serve: journal …; fix: …` line, no traceback."""
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("jigcmd serve: journal ")]
    assert f"{state}/journal.sqlite3: the journal file was removed while in use" in line, line
    assert f"; fix: leave {state} in place while jigcmd uses it" in line, line


def test_a_state_dir_removed_under_serve_ends_at_end_of_input_in_one_line_and_exit_2(
    rig: Rig,
) -> None:
    """rm -rf of the state directory mid-session: at EOF one line naming it, exit 2."""
    server = rig.serve()
    rig.prepared(server)
    shutil.rmtree(rig.state_dir)
    assert server.close_input() == 2
    _one_line_exit_2(server.stderr(), str(rig.state_dir))


def test_a_call_after_the_state_dir_was_removed_runs_nothing_and_says_why(rig: Rig) -> None:
    """The call is EXECUTION_FAILED (nothing ran, not kept): no journal, no run."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    rig.prepared(server)
    shutil.rmtree(rig.state_dir)
    server.send(flow_call("call-1", "op-lost", cli_input(QUICK, token)))
    error = server.answer("call-1")["error"]
    assert error["data"]["code"] == "EXECUTION_FAILED", error
    assert "nothing ran" in error["message"], error
    # In the words docs/protocols.md gives (not the slots' ENOENT that follows from it),
    # never with the host's path (the stderr line names it).
    assert "the journal file was removed while in use" in error["message"], error
    assert "slot" not in error["message"], error
    assert str(rig.state_dir) not in str(error), error
    assert rig.watch.runs(token) == 0
    assert server.close_input() == 2
    _one_line_exit_2(server.stderr(), str(rig.state_dir))
    answers = [json.loads(line) for line in server.lines]
    assert [a["id"] for a in answers if "id" in a].count("call-1") == 1
