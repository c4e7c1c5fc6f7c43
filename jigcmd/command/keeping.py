"""What a detailed (MCP) call keeps for `resources/read`: its streams, report and statement.

Every end that captured output or was signed keeps them: a result, and a run stopped by its
deadline or a cancel, whose failure carries the evidence collected and the statement. The
answer links what was kept; a store that cannot write leaves the answer whole, unlinked.
"""

from __future__ import annotations

import anyio
import msgspec

from jigcmd.durable.runresources import RunResources
from jigcmd.errors import JigError
from jigcmd.evidence import Evidence
from jigcmd.protocol.commands import ResourceRef, RunResult

__all__ = ["keep_result", "keep_stopped"]


async def keep_result(
    store: RunResources | None, result: RunResult, scope: str, operation_id: str
) -> RunResult:
    """Keep the streams, the report and the statement; the result links to them."""
    junit = result.tests.raw if result.tests is not None else None
    refs = await _keep(
        store, scope, operation_id, result.evidence, junit=junit, attestation=result.attestation
    )
    return result if refs is None else msgspec.structs.replace(result, resources=refs)


async def keep_stopped(
    store: RunResources | None, error: JigError, scope: str, operation_id: str
) -> None:
    """Keep what a stopped run captured and its statement; `error.resources` links them."""
    collected = (error.details or {}).get("command")
    if collected is None and error.attestation is None:
        # A refusal: nothing ran, nothing to keep.
        return
    evidence = (
        collected
        if collected is None or isinstance(collected, Evidence)
        else msgspec.convert(collected, Evidence)
    )
    junit = error.tests.raw if error.tests is not None else None
    refs = await _keep(
        store, scope, operation_id, evidence, junit=junit, attestation=error.attestation
    )
    if refs is not None:
        error.resources = refs


async def _keep(
    store: RunResources | None,
    scope: str,
    operation_id: str,
    evidence: Evidence | None,
    *,
    junit: bytes | None = None,
    attestation: bytes | None,
) -> tuple[ResourceRef, ...] | None:
    """Keep a run's parts in the store: their references, or None when none could be."""
    if store is None:
        return None
    parts = []
    if evidence is not None:
        parts += [
            ("stdout", evidence.stdout.text.encode("utf-8")),
            ("stderr", evidence.stderr.text.encode("utf-8")),
        ]
    if junit is not None:
        parts.append(("junit", junit))
    if attestation is not None:
        parts.append(("attestation", attestation))
    try:
        # One small file, no fsync: written here, without a thread hop (it cost more CPU
        # than the write, docs/performance.md); the occasional batch prune reads every kept
        # operation's age, so it goes to a worker thread.
        refs = store.keep(scope, operation_id, parts, prune=False)
        if store.crowded(scope):
            await anyio.to_thread.run_sync(store.prune, scope)
    except OSError:
        # The answer matters more than its links: a result without them is still whole.
        return None
    return refs
