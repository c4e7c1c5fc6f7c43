"""jarvis lets go of the library pages its imports mapped once it serves, and still signs."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth, invoke_body
from tests.server.test_residency import clean_kb, fresh_import_kb

pytestmark = pytest.mark.envelope

# How long the test waits for the release at most (never asserted as a time).
_FAILSAFE_S = 60.0


def test_serving_jarvis_lets_go_of_the_librarys_pages_and_still_signs(tmp_path: Path) -> None:
    """After its start, before any call: the signing library's clean pages are gone."""
    machine_runs_jarvis()
    fresh = fresh_import_kb()
    with JarvisChild(tmp_path) as child, httpx.Client(timeout=60) as client:
        # Imported before it says it serves (its signing key is loaded at start).
        failsafe = time.monotonic() + _FAILSAFE_S
        while clean_kb(child.pid) >= fresh // 10:
            assert time.monotonic() < failsafe, "jarvis never released the library's pages"
            time.sleep(0.05)
        created = client.post(
            f"{child.base}/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo", "signed"]),
            headers=auth(),
        ).json()
    assert created["status"] == "exited", created
    assert created["attestation"]["bundle"], created
