"""The zygote's pool refills after a run: when the server says it answered, or on its own.

Driven through a real `NativeExecutor` and its zygote. Each test waits for events (the
zygote naming a prepared envelope, `Ready`), never for a duration: with the fallback out of
reach, only `answered` can refill the pool; with no `answered`, only the fallback can.
"""

from __future__ import annotations

import anyio
import pytest

from jigcmd.envelope.native import NativeExecutor
from tests.envelope.hostile_harness import TracedExecutor, probe_plan

pytestmark = pytest.mark.envelope

# Never reached by a test: the refill can then only come from `answered`.
OUT_OF_REACH_MS = 3_600_000.0
# Long enough for a run's `answered` to matter, short enough for a test to wait for.
FALLBACK_MS = 50.0
READY_WITHIN_S = 10


def native_of(envelope: TracedExecutor) -> NativeExecutor:
    native = envelope.inner
    assert isinstance(native, NativeExecutor)
    return native


async def until_ready(native: NativeExecutor, count: int) -> None:
    """Until the zygote has named `count` prepared envelopes to the server."""
    with anyio.fail_after(READY_WITHIN_S):
        while True:
            assert native._control is not None
            native._collect_ready(native._control)
            if len(native._ready) >= count:
                return
            await anyio.wait_readable(native._control)


async def test_the_pool_refills_once_the_answer_is_said_written(
    envelope: TracedExecutor,
) -> None:
    """With the fallback out of reach, `answered` after a run brings the pool back to two."""
    native = native_of(envelope)
    before = set(envelope.backend.list_jobs())
    await native.prepare(probe_plan(""), pool=2, refill_after_ms=OUT_OF_REACH_MS)
    await until_ready(native, 2)
    outcome = await envelope.run(probe_plan('console.log("ran");\n'))
    assert outcome.stdout.data == b"ran\n"
    native.answered()
    await until_ready(native, 2)
    await native.prepare(probe_plan(""), pool=0)
    # Whatever was prepared here is ours: the module's teardown waits for it to be gone.
    envelope.jobs |= set(envelope.backend.list_jobs()) - before


async def test_the_pool_refills_without_an_answer(envelope: TracedExecutor) -> None:
    """A caller that never says it answered (jarvis) still finds the pool back at two."""
    native = native_of(envelope)
    before = set(envelope.backend.list_jobs())
    await native.prepare(probe_plan(""), pool=2, refill_after_ms=FALLBACK_MS)
    await until_ready(native, 2)
    outcome = await envelope.run(probe_plan('console.log("ran");\n'))
    assert outcome.stdout.data == b"ran\n"
    await until_ready(native, 2)
    await native.prepare(probe_plan(""), pool=0)
    envelope.jobs |= set(envelope.backend.list_jobs()) - before


async def test_the_pool_refills_after_a_back_to_back_streak(envelope: TracedExecutor) -> None:
    """Calls answered back to back hold the refill for the next one; once they stop, the pool
    is back at two (the zygote's quiet timer, refill.py), with the fallback out of reach."""
    native = native_of(envelope)
    before = set(envelope.backend.list_jobs())
    await native.prepare(probe_plan(""), pool=2, refill_after_ms=OUT_OF_REACH_MS)
    await until_ready(native, 2)
    for n in range(3):
        outcome = await envelope.run(probe_plan(f'console.log("ran {n}");\n'))
        assert outcome.stdout.data == f"ran {n}\n".encode()
        native.answered()
    await until_ready(native, 2)
    await native.prepare(probe_plan(""), pool=0)
    envelope.jobs |= set(envelope.backend.list_jobs()) - before
