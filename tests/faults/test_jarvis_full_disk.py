"""jarvis on a nearly full state disk: it refuses each run it could not record, as serve does."""

from __future__ import annotations

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.frontends.diagnosis.statecheck import journal_check
from jigcmd.journal.failures import LEAST_FREE_BYTES
from jigcmd.journal.store import Journal
from tests.faults.disk import SmallDisk
from tests.jarvis.jarvis_harness import SpyExecutor, harness, make_service


async def test_below_the_least_free_space_a_run_is_refused_and_a_recorded_one_answered(
    small_disk: SmallDisk,
) -> None:
    """503 in doctor's words, nothing ran (it ran, with no room kept to record it); a run
    recorded before is still read, and once space is back runs go on."""
    spy = SpyExecutor()
    store = Journal.open(prepare_state_dir(small_disk.path))
    try:
        async with harness(make_service(spy, store=store)) as h:
            ran = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
            small_disk.leave(LEAST_FREE_BYTES // 2)
            check = journal_check(small_disk.path)
            assert check.status == "warn" and check.hint is not None, check
            refused = await h.invoke("jarvis.run.create", argv=["echo", "again"])
            assert refused.status_code == 503, refused.text
            message = refused.json()["error"]
            assert "nothing ran" in message and check.hint in message, message
            cause = check.detail.split(": ", 1)[1].split("; ")[0]
            assert f"{cause}; nothing ran" in message, message
            assert spy.entered == 1
            got = await h.invoke("jarvis.run.get", run_id=ran["run_id"])
            assert got.status_code == 200 and got.json()["status"] == ran["status"], got.text
            small_disk.free()
            assert (await h.invoke("jarvis.run.create", argv=["echo", "x"])).status_code == 200
            assert spy.entered == 2
    finally:
        store.close()
