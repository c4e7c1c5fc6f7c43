"""`jigcmd serve`: one stdio JSON-RPC session (FLOW Run/1 or MCP) over the admitted Binding."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio

from jigcmd import __version__
from jigcmd.assembly import assemble
from jigcmd.envelope.native import NativeExecutor
from jigcmd.policy.binding import BindingError
from jigcmd.protocol.session import ProtocolChoice
from jigcmd.runtime import RuntimeUnavailable
from jigcmd.server.stdio import serve_stdio
from jigcmd.service import CommandService

__all__ = ["serve"]

logger = logging.getLogger("jigcmd.serve")


def serve(
    binding: Path, lock: Path | None, protocol: ProtocolChoice, root_deadline_unix_ms: int | None
) -> int:
    """Serve until EOF or SIGTERM; 0 on a clean end, 2 when the Binding cannot be loaded."""
    return anyio.run(_serve, binding, lock, protocol, root_deadline_unix_ms)


async def _serve(
    binding: Path, lock: Path | None, protocol: ProtocolChoice, root_deadline_unix_ms: int | None
) -> int:
    executor = NativeExecutor()
    try:
        assembly = assemble(binding, lock, executor, root_deadline_unix_ms=root_deadline_unix_ms)
    except (BindingError, RuntimeUnavailable) as exc:
        sys.stderr.write(f"jigcmd serve: {exc}\n")
        return 2
    service = assembly.service
    slots = assembly.loaded.slots
    try:
        async with anyio.create_task_group() as tg:
            # Off the path to the first answer: the zygote's start and the runtime hash.
            tg.start_soon(_warm_up, executor, service)
            await serve_stdio(
                service,
                protocol=protocol,
                server_name="jigcmd",
                server_version=__version__,
                slot=slots[0] if len(slots) == 1 else None,
            )
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await executor.aclose()
    return 0


async def _warm_up(executor: NativeExecutor, service: CommandService) -> None:
    try:
        await executor.start()
        await executor.prepare(await anyio.to_thread.run_sync(service.template_plan))
        await anyio.to_thread.run_sync(service.warm_up)
    except Exception as exc:
        logger.warning("warm-up failed: %s", exc)
