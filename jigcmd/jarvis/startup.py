"""What jarvis closes as it starts: the runs and envelopes a dead jigcmd left behind.

Its own rows first, each run a dead jarvis left `running` closed `uncertain` and audited
(its outcome is unknown); then, as `serve` does at its start, `durable.recovery` for the
rest of the shared state directory: the envelopes' registry entries of dead owners, their
cgroup jobs, and the rows of a dead `serve`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from jigcmd.durable.recovery import RecoveryReport
from jigcmd.jarvis.auditing import AuditTrail
from jigcmd.jarvis.journalcalls import JournalCalls
from jigcmd.journal import liveness
from jigcmd.journal.store import Journal

__all__ = ["DIED", "recover_at_start"]

logger = logging.getLogger("jigcmd.jarvis")
# The detail of a run whose jarvis process died while it ran.
DIED = "its jarvis process died while it ran"


async def recover_at_start(
    store: Journal,
    db: JournalCalls,
    trail: AuditTrail,
    recovery: Callable[[], RecoveryReport] | None,
) -> None:
    """Close the dead jarvis runs (audited), then run `recovery` (`durable.recovery`)."""
    for run in await db(store.jarvis_running):
        # From any PID namespace sharing the state directory (`jigcmd.journal.liveness`).
        if liveness.alive(store.path.parent, run.owner):
            continue
        await db(partial(store.jarvis_finish, run.run_id, status="uncertain", detail=DIED))
        await trail.row(
            actor=run.actor,
            tool=run.tool,
            argv=run.argv,
            cwd=run.cwd,
            decision=run.decision,
            matched_rule=run.matched_rule,
            outcome=f"run {run.run_id}: uncertain ({DIED})",
        )
    if recovery is not None:
        report = await db(recovery)
        if not report.clean:
            logger.warning("recovery could not confirm every cleanup: %s", report)
