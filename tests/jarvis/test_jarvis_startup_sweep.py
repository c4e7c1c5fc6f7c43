"""`jigcmd jarvis`'s start-up recovery sweeps what a dead jigcmd left, as `serve`'s does.

A registry entry for an envelope whose owner is gone (a jarvis killed mid-run, its
supervisor with it) names nothing alive: the real `jigcmd jarvis` releases and drops it
before it serves, like every other recovery of `jigcmd.durable.recovery`.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from jigcmd.journal.identity import ProcessIdentity
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis

pytestmark = pytest.mark.envelope

# An identity no process has: its owner and supervisor are dead.
_GONE = ProcessIdentity(pid=1, start=0, boot_id="gone")
_NAME = "jigcmd-jarvis2-gone-envelope"


def test_a_dead_owners_envelope_registry_entry_is_swept_at_start(tmp_path: Path) -> None:
    """The entry is gone once jarvis serves, and jarvis still answers."""
    machine_runs_jarvis()
    state = tmp_path / "jarvis-state"
    state.mkdir(mode=0o700)
    registry = EnvelopeRegistry(state)
    registry.create()
    registry.register(EnvelopeEntry(name=_NAME, supervisor=_GONE, owner=_GONE))
    assert [entry.name for entry in registry.entries()] == [_NAME]
    with JarvisChild(tmp_path) as jarvis, httpx.Client(timeout=60.0) as client:
        assert jarvis.state_dir == state
        assert [entry.name for entry in registry.entries()] == []
        assert jarvis.check(client).status_code == 200
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
