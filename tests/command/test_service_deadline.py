"""The run's 10 s ceiling starts after admission: the deferred Bun hash is not the run's time.

Its signed `startedOn` is that start, the instant the deadline runs from.
"""

from __future__ import annotations

import base64
import json
import types

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest.attester import Attester, HostIdentity
from jigcmd.attest.keys import SigningKey
from jigcmd.attest.statement import AdmissionFacts, Descriptor, RuntimeFacts, rfc3339
from jigcmd.cancel import CancelSignal
from jigcmd.command import outcomes
from jigcmd.command import service as service_module
from jigcmd.command.runtime import BunBinary
from jigcmd.command.service import CommandService
from jigcmd.envelope.api import Hooks, RunOutcome, Ticket
from jigcmd.plan import RunPlan
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.lock import ADMITTED, Admission
from jigcmd.policy.planner import CEILING_SECONDS
from jigcmd.policy.request import ValidRequest
from tests.jarvis.jarvis_harness import outcome

# Seconds the deferred runtime check takes on the fake clock: most of a ceiling.
CHECK_S = 8.0


class _Clock:
    """A monotonic and a wall clock that only the runtime check moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return int(self.now * 1e9) + 1_700_000_000_000_000_000


class _Recorder:
    """Records the plan it is asked to run; a clean exit."""

    def __init__(self) -> None:
        self.plans: list[RunPlan] = []

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        del cancel, ticket, hooks
        self.plans.append(plan)
        return outcome()


async def test_a_slow_first_admission_check_does_not_eat_the_runs_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call's deferred check takes 8 s: its run still gets the whole 10 s after it."""
    clock = _Clock()
    monkeypatch.setattr(
        service_module,
        "time",
        types.SimpleNamespace(monotonic=clock.monotonic, time_ns=clock.time_ns),
    )
    monkeypatch.setattr(service_module, "unix_ms", lambda: clock.time_ns() // 1_000_000)

    def slow_check() -> Admission:
        clock.now += CHECK_S
        return ADMITTED

    recorder = _Recorder()
    service = CommandService(
        {"main": CommandPolicy(name="main", kind="run", paths=("main.ts",))},
        admission=ADMITTED,
        runtime=BunBinary("/bin/true"),
        executor=recorder,
        runtime_check=slow_check,
    )
    start = clock.now
    result = await service.run(
        {"command": "main", "files": {"main.ts": "1"}},
        operation_id="op-1",
        deadline_unix_ms=None,
        cancel=CancelSignal(),
    )
    assert result is not None
    (plan,) = recorder.plans
    assert plan.deadline == start + CHECK_S + CEILING_SECONDS


async def test_the_statements_started_on_is_when_the_runs_deadline_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Validation takes 0.2 s after the deadline is set: startedOn is still the deadline's start."""
    clock = _Clock()
    monkeypatch.setattr(
        service_module,
        "time",
        types.SimpleNamespace(monotonic=clock.monotonic, time_ns=clock.time_ns),
    )

    def now() -> int:
        return clock.time_ns() // 1_000_000

    # One clock for both: the service sets the deadline, the signer reads the end.
    monkeypatch.setattr(service_module, "unix_ms", now)
    monkeypatch.setattr(outcomes, "unix_ms", now)
    recorder = _Recorder()
    service = CommandService(
        {"main": CommandPolicy(name="main", kind="run", paths=("main.ts",))},
        admission=ADMITTED,
        runtime=BunBinary("/bin/true"),
        executor=recorder,
    )
    sha = "sha256:" + "ab" * 32
    contract = Descriptor(id="https://jig.md/contracts/x", version="1.0.0", digest=sha)
    identity = HostIdentity(
        admission=AdmissionFacts(lock_digest=sha, binding_digest=sha, descriptor=contract),
        runtime=RuntimeFacts(bun_version="1.4.2", bun_sha256=sha),
    )
    service.attach_attester(Attester(SigningKey(Ed25519PrivateKey.generate(), "t"), identity))
    validate = service.catalog.validate

    def slow_validate(input: object) -> ValidRequest:
        clock.now += 0.2
        return validate(input)

    monkeypatch.setattr(service.catalog, "validate", slow_validate)
    accepted, start = now(), clock.now
    result = await service.run(
        {"command": "main", "files": {"main.ts": "1"}},
        operation_id="op-1",
        deadline_unix_ms=None,
        cancel=CancelSignal(),
    )
    assert result.attestation is not None
    payload = json.loads(result.attestation.decode().splitlines()[0])["payload"]
    predicate = json.loads(base64.b64decode(payload))["predicate"]
    (plan,) = recorder.plans
    assert predicate["startedOn"] == rfc3339(accepted)
    # The plan's deadline runs from that instant: the ceiling after it, on the same clock.
    assert plan.deadline == start + CEILING_SECONDS
