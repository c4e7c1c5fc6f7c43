"""`jigcmd serve`: one stdio JSON-RPC session (FLOW Run/1 or MCP) over the admitted Binding."""

from __future__ import annotations

import logging
import sys

import anyio

from jigcmd import __version__
from jigcmd.assembly import STARTUP_ERRORS, FrontSettings, open_service
from jigcmd.envelope.native import NativeExecutor
from jigcmd.protocol.session import ProtocolChoice
from jigcmd.server.refusal import answer_pending
from jigcmd.server.stdio import serve_stdio
from jigcmd.service import CommandService

__all__ = ["serve"]

logger = logging.getLogger("jigcmd.serve")

_SESSION_REMEMBERS = 16


def serve(settings: FrontSettings, protocol: ProtocolChoice) -> int:
    """Serve until EOF or SIGTERM; 0 on a clean end, 2 when it cannot start."""
    return anyio.run(_serve, settings, protocol)


async def _serve(settings: FrontSettings, protocol: ProtocolChoice) -> int:
    try:
        async with open_service(settings) as assembly:
            service = assembly.service
            slots = assembly.loaded.slots
            executor = service.executor
            async with anyio.create_task_group() as tg:
                # Off the path to the first answer: the zygote, a prepared envelope, the hash.
                if isinstance(executor, NativeExecutor):
                    tg.start_soon(_warm_up, executor, service)
                await serve_stdio(
                    service,
                    protocol=protocol,
                    server_name="jigcmd",
                    server_version=__version__,
                    slot=slots[0] if len(slots) == 1 else None,
                    # The journal keeps every operation; the session only the recent ones.
                    remember=_SESSION_REMEMBERS,
                )
                tg.cancel_scope.cancel()
    except STARTUP_ERRORS as exc:
        sys.stderr.write(f"jigcmd serve: {exc}\n")
        # A peer that already sent its first requests gets an answer, not a bare EOF.
        answer_pending(str(exc))
        return 2
    return 0


async def _warm_up(executor: NativeExecutor, service: CommandService) -> None:
    try:
        await executor.start()
        # Abandoned on cancel: the session's end must not wait for a thread hashing the
        # 80 MB Bun binary (the server exits within 2 s of EOF).
        template = await anyio.to_thread.run_sync(service.template_plan, abandon_on_cancel=True)
        await executor.prepare(template)
        await anyio.to_thread.run_sync(service.warm_up, abandon_on_cancel=True)
    except Exception as exc:
        logger.warning("warm-up failed: %s", exc)
