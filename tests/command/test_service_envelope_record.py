"""Which envelope serves a run is recorded once: at admission when it was prepared, else at start.

A stub executor plays the envelope's side of the hooks (admit told the prepared envelope,
then the start), so the test sees exactly which journal writes the service makes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BunBinary
from jigcmd.command.service import CommandService
from jigcmd.durable.ownership import Ownership
from jigcmd.envelope.api import Assigned, EnvelopeIdentity, Hooks, RunOutcome, Ticket
from jigcmd.journal.identity import current
from jigcmd.plan import RunPlan, plan_digest
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.lock import ADMITTED
from tests.jarvis.jarvis_harness import outcome

PATHS = ("/sys/fs/cgroup/pids/jigcmd/jigcmd-00112233aabbccdd",)
PREPARED = Assigned(run_id="00112233aabbccdd", supervisor=current(), cgroup_paths=PATHS)
RUN = "run-test"


class _Stub:
    """Admits with `assigned`, then reports the envelope `started` and a clean exit."""

    def __init__(self, assigned: Assigned | None, started: EnvelopeIdentity) -> None:
        self.assigned = assigned
        self.started = started
        self.tickets: list[Ticket] = []
        self.plans: list[RunPlan] = []

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        del cancel
        assert ticket is not None and hooks is not None and hooks.admit is not None
        self.tickets.append(ticket)
        self.plans.append(plan)
        assert await hooks.admit(self.assigned)
        assert hooks.on_started is not None
        work = hooks.on_started(self.started)
        if work is not None:
            await work
        return outcome()


def _started(paths: tuple[str, ...]) -> EnvelopeIdentity:
    return EnvelopeIdentity(
        supervisor_pid=current().pid, init_pid=2, cgroup_paths=paths, netns="net:[1]"
    )


async def _run(
    tmp_path: Path, stub: _Stub, monkeypatch: pytest.MonkeyPatch
) -> tuple[Ownership, list[str]]:
    ownership = Ownership.open(tmp_path / "state", max_envelopes=1, memory_bytes=256 << 20)
    recorded: list[str] = []
    record: Callable[..., object] = ownership.record_envelope

    async def counted(operation_id: str, envelope: EnvelopeIdentity, *, root_run: str) -> None:
        recorded.append(operation_id)
        await record(operation_id, envelope, root_run=root_run)  # type: ignore[misc]

    monkeypatch.setattr(ownership, "record_envelope", counted)
    service = CommandService(
        {"main": CommandPolicy(name="main", kind="run", paths=("main.ts",))},
        admission=ADMITTED,
        runtime=BunBinary("/bin/true"),
        executor=stub,
        ownership=ownership,
    )
    await service.run(
        {"command": "main", "files": {"main.ts": "1"}},
        operation_id="op-1",
        deadline_unix_ms=None,
        cancel=CancelSignal(),
        signature="sig",
        root_run=RUN,
    )
    return ownership, recorded


async def test_a_prepared_envelope_is_recorded_with_the_row_and_not_again_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ownership, recorded = await _run(tmp_path, _Stub(PREPARED, _started(PATHS)), monkeypatch)
    row = ownership.journal.get("op-1", root_run=RUN)
    assert recorded == []
    assert row is not None and row.state == "done"
    assert (row.run_id, row.supervisor, row.cgroup_paths) == (
        PREPARED.run_id,
        PREPARED.supervisor,
        PATHS,
    )


async def test_an_envelope_made_for_the_launch_is_recorded_once_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = _Stub(None, _started(PATHS))
    ownership, recorded = await _run(tmp_path, stub, monkeypatch)
    row = ownership.journal.get("op-1", root_run=RUN)
    assert recorded == ["op-1"]
    assert row is not None and row.run_id == stub.tickets[0].run_id
    assert row.cgroup_paths == PATHS


async def test_a_prepared_envelope_made_again_under_another_name_is_recorded_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = ("/sys/fs/cgroup/pids/jigcmd/jigcmd-ffeeddccbbaa9988",)
    ownership, recorded = await _run(tmp_path, _Stub(PREPARED, _started(elsewhere)), monkeypatch)
    row = ownership.journal.get("op-1", root_run=RUN)
    assert recorded == ["op-1"]
    assert row is not None and row.cgroup_paths == elsewhere


@pytest.mark.parametrize("prepared", [PREPARED, None], ids=["prepared", "made-for-the-launch"])
async def test_the_row_keeps_the_digest_of_the_plan_its_envelope_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepared: Assigned | None
) -> None:
    """Written with the row at admission, and kept when the envelope is recorded at start."""
    stub = _Stub(prepared, _started(PATHS))
    ownership, _ = await _run(tmp_path, stub, monkeypatch)
    row = ownership.journal.get("op-1", root_run=RUN)
    assert row is not None and len(stub.plans) == 1
    assert row.plan_digest == plan_digest(stub.plans[0])
    assert row.plan_digest.startswith("sha256:")


async def test_the_plan_digest_is_worked_out_once_after_the_executor_has_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off the path to the launch: at admission (the row), reused by the statement."""
    stub = _Stub(PREPARED, _started(PATHS))
    launched_before: list[bool] = []

    def digest(plan: RunPlan) -> str:
        launched_before.append(bool(stub.plans))
        return plan_digest(plan)

    monkeypatch.setattr("jigcmd.command.dispatch.plan_digest", digest)
    ownership, _ = await _run(tmp_path, stub, monkeypatch)
    row = ownership.journal.get("op-1", root_run=RUN)
    assert launched_before == [True]
    assert row is not None and row.plan_digest == plan_digest(stub.plans[0])
