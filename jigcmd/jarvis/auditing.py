"""The jarvis audit trail: one durable row per decision, refusal and run end.

Every row is written even while the call that caused it is being cancelled (a refusal or a
run's end must never go unrecorded because its caller left), one store call at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import anyio

from jigcmd.jarvis.policy import Decision, Request
from jigcmd.jarvis.refusals import UNAUTHENTICATED, Unauthenticated, sent
from jigcmd.jarvis.tools import ToolError
from jigcmd.journal.store import Journal, JournalUnusable

__all__ = ["AuditTrail"]

_T = TypeVar("_T")


class AuditTrail:
    """Writes the audit rows of one jarvis service through its store calls (`db`)."""

    def __init__(
        self,
        store: Journal,
        db: Callable[[Callable[[], int]], Awaitable[int]],
        unauthenticated: Unauthenticated,
    ) -> None:
        self._store = store
        self._db = db
        self.unauthenticated = unauthenticated

    async def decision(
        self, actor: str, tool: str, request: Request, decision: Decision, outcome: str
    ) -> None:
        """A row for a decided call: what it asked, what policy said, what came of it."""
        await self.row(
            actor=actor,
            tool=tool,
            argv=request.argv,
            cwd=request.cwd or "",
            decision=decision.decision,
            matched_rule=decision.matched_rule,
            outcome=outcome,
        )

    async def decoded(
        self,
        decode: Callable[[Mapping[str, Any]], _T],
        actor: str,
        tool: str,
        args: Mapping[str, Any],
    ) -> _T:
        """`decode(args)`; a refusal of the arguments is audited with what they were."""
        try:
            return decode(args)
        except ToolError as exc:
            await self.refusal(actor, tool, exc, args)
            raise

    async def refusal(self, actor: str, tool: str, refusal: ToolError, args: object = None) -> None:
        """Audit a call refused before policy evaluation, with the argv and cwd it sent.

        `forbidden` for a 403 (a missing capability), `invalid` for any other status.
        """
        argv, cwd = sent(args)
        await self.row(
            actor=actor,
            tool=tool[:128],
            argv=argv,
            cwd=cwd,
            decision="forbidden" if refusal.status == 403 else "invalid",
            outcome=f"refused: {refusal.message}",
        )

    async def unauthenticated_row(self, outcome: str) -> None:
        """The periodic row counting requests refused before they authenticated.

        Written by the service's own task, no call waiting for it: a journal lost meanwhile
        is left for the server to report as it stops (`journalcalls.py`), not raised here.
        """
        with contextlib.suppress(JournalUnusable):
            await self.row(actor=UNAUTHENTICATED, tool="", decision="forbidden", outcome=outcome)

    async def row(
        self,
        *,
        actor: str,
        tool: str,
        argv: tuple[str, ...] = (),
        cwd: str = "",
        decision: str,
        matched_rule: str | None = None,
        outcome: str,
    ) -> None:
        """One durable audit row, written even while the call is being cancelled."""
        with anyio.CancelScope(shield=True):
            await self._db(
                partial(
                    self._store.audit,
                    actor=actor,
                    tool=tool,
                    argv=argv,
                    cwd=cwd,
                    decision=decision,
                    matched_rule=matched_rule,
                    outcome=outcome,
                )
            )
