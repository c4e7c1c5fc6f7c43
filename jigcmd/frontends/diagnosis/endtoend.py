"""The doctor's `end-to-end` line: one real run of `bun ./x.ts` through a real envelope."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import envelope_error
from jigcmd.envelope.api import EnvelopeFailure
from jigcmd.frontends.diagnosis.verdicts import Check, end_to_end_check
from jigcmd.plan import Bind

__all__ = ["probe_under"]


async def probe_under(
    base: str, binds: tuple[Bind, ...], state_dir: Path | None, seconds: float
) -> Check:
    """One probe run (`bun ./x.ts`, `seconds` at most) in an envelope whose jobs go under `base`."""
    from jigcmd.command.runtime import BUN_TARGET  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.envelope.native import NativeExecutor  # noqa: PLC0415 - heavy; last check
    from jigcmd.policy.planner import candidate_plan  # noqa: PLC0415 - an import that fails fails this check alone

    executor = NativeExecutor(cgroup_base=base, scratch_parent=_scratch_parent(state_dir))
    executor.stage_at_start(binds)
    try:
        # The zygote starts and stages the runtime first (seconds on a slow machine): the
        # deadline is the probe run's own, and a failed start says why, not that time ran out.
        await executor.start()
        plan = candidate_plan(
            bun=BUN_TARGET,
            runtime_binds=binds,
            kind="run",
            paths=("x.ts",),
            args=(),
            files=(("x.ts", 'console.log("ok")'),),
            stdin="",
            deadline=time.monotonic() + seconds,
            label="doctor",
        )
        outcome = await executor.execute(plan, CancelSignal())
    except EnvelopeFailure as failure:
        error = envelope_error(failure)
        return end_to_end_check(None, None, "", f"{error.code.value}: {error.message}")
    finally:
        await executor.aclose()
    return end_to_end_check(
        outcome.exit_code,
        outcome.signal,
        outcome.stdout.data.decode("utf-8", "replace"),
        None,
        outcome.report.wall_ms,
    )


def _scratch_parent(state_dir: Path | None) -> str | None:
    """Where the probe's staging point goes: the temporary directory (None), or, on a
    read-only root that has none, the state directory checked, as serve and run stage."""
    from jigcmd.durable.statedir import default_state_dir  # noqa: PLC0415 - an import that fails fails this check alone

    try:
        tempfile.gettempdir()
    except FileNotFoundError:
        path = state_dir or default_state_dir()
        return str(path) if path.is_dir() else None
    # A state directory is never written by the doctor where it need not be (docs/cli.md).
    return None
