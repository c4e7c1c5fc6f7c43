"""The doctor's `state` line reads the envelope registry, not only the journal (r32 ct 4).

A server killed with envelopes prepared leaves their entries in `<state>/envelopes/` (and
their jobs on the host) with no journal row naming them: the line warns, counting them and
naming `jigcmd recover`, instead of "every recorded cleanup confirmed".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from jigcmd.journal.identity import ProcessIdentity, current, identify
from jigcmd.journal.store import Journal
from tests.frontends.test_doctor_cli import checks, doctor

pytestmark = pytest.mark.envelope


def _dead_process() -> ProcessIdentity:
    """The identity of a process of this boot that has exited (a killed server)."""
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as child:
        who = identify(child.pid)
        child.kill()
    assert who is not None
    return who


def test_envelopes_a_dead_server_registered_are_counted_with_recover(tmp_path: Path) -> None:
    """Two entries of a dead server: warn, 2 of them, `jigcmd recover`; a live one's is not."""
    state_dir = prepare_state_dir(tmp_path / "state")
    with Journal.open(state_dir):
        pass
    registry = EnvelopeRegistry(state_dir)
    registry.create()
    dead = _dead_process()
    for name in ("jigcmd-0def33d900000000", "jigcmd-b28ed92300000000"):
        registry.register(EnvelopeEntry(name=name, supervisor=dead, owner=dead))
    # This test's process outlives the doctor: its envelope is a live server's.
    registry.register(
        EnvelopeEntry(name="jigcmd-live000000000000", supervisor=dead, owner=current())
    )
    state = checks(doctor("--json", "--state-dir", str(state_dir), home=tmp_path))["state"]
    assert state["status"] == "warn", state
    assert "every recorded cleanup confirmed" not in state["detail"], state
    assert "2 envelope(s) registered by a server that is gone" in state["detail"], state
    assert "jigcmd-0def33d900000000" in state["detail"], state
    assert "jigcmd-live" not in state["detail"], state
    assert "jigcmd recover" in state["hint"], state
    # Read, not recovered: the entries stay for `jigcmd recover`.
    assert len(registry.entries()) == 3
