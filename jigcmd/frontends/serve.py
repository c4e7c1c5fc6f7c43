"""`jigcmd serve`: one stdio JSON-RPC session (FLOW Run/1 or MCP) over the admitted Binding.

A session belongs to one caller's run, the scope of operation identity: named by `--run-id`
or `JIGCMD_RUN_ID` (a coordinator that restarts its child passes the same one to recover its
operations), otherwise a fresh run with a generated id. Its deadline, `--root-deadline-unix-ms`
or `JIGCMD_ROOT_DEADLINE_UNIX_MS`, bounds every command: the reference's Flow SDK sends no
per-call `deadlineUnixMs`, so without it a command is bounded only by the 10 s ceiling.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import os
import uuid
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import anyio

from jigcmd import __version__
from jigcmd.command.assembly import (
    STARTUP_ERRORS,
    FrontSettings,
    open_service,
    watch_admission,
)
from jigcmd.command.bindingfile import project_root
from jigcmd.command.service import CommandService
from jigcmd.durable.statedir import StateDirError, default_state_dir
from jigcmd.envelope.native import NativeExecutor
from jigcmd.frontends.retaining import keep_pruning
from jigcmd.optionvalues import unix_ms
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.dialect import DEFAULT_BUDGET_BYTES
from jigcmd.protocol.session import ProtocolChoice
from jigcmd.server import residency
from jigcmd.server.hostpaths import HostPaths
from jigcmd.server.refusal import answer_pending
from jigcmd.server.stderrlog import say
from jigcmd.server.stdio import serve_stdio

__all__ = [
    "ROOT_DEADLINE_VARIABLE",
    "RUN_ID_VARIABLE",
    "RunIdError",
    "resolve_root_deadline",
    "resolve_run_id",
    "serve",
]

RUN_ID_VARIABLE = "JIGCMD_RUN_ID"
ROOT_DEADLINE_VARIABLE = "JIGCMD_ROOT_DEADLINE_UNIX_MS"

logger = logging.getLogger("jigcmd.serve")

_SESSION_REMEMBERS = 16


class RunIdError(ValueError):
    """Raised when a given run id or root deadline is not one (a Run/1 id, Unix ms)."""


def resolve_run_id(given: str | None, environ: Mapping[str, str]) -> tuple[str, bool]:
    """The session's run id (`--run-id`, else `JIGCMD_RUN_ID`, else a new one); and if generated."""
    if given is not None:
        return _checked_run_id(given, f"--run-id {given!r}"), False
    named = environ.get(RUN_ID_VARIABLE)
    if named is None:
        return f"run-{uuid.uuid4().hex[:20]}", True
    # Set but empty is refused, not taken as unset: a runtime that meant to pass its run
    # (`JIGCMD_RUN_ID=$RUN`, the variable unset) must not get a run of its own.
    shown = f"{RUN_ID_VARIABLE}={named!r}"
    return _checked_run_id(named, shown, " (unset it for a generated run id)"), False


def _checked_run_id(run_id: str, shown: str, fix: str = "") -> str:
    """`run_id` when it is a Run/1 id; else RunIdError naming it as it was given (`shown`)."""
    if not jsonrpc.is_run1_id(run_id):
        raise RunIdError(f"{shown} must match {jsonrpc.RUN1_ID_RULE}{fix}")
    return run_id


def resolve_root_deadline(given: int | None, environ: Mapping[str, str]) -> int | None:
    """The root deadline (`--root-deadline-unix-ms`, else `JIGCMD_ROOT_DEADLINE_UNIX_MS`)."""
    if given is not None:
        return _deadline(str(given), "--root-deadline-unix-ms")
    named = environ.get(ROOT_DEADLINE_VARIABLE)
    if named is None:
        return None
    # Set but empty is refused too, as an empty JIGCMD_RUN_ID is: a runtime that meant to
    # pass a deadline (`…_MS=$DEADLINE`, the variable unset) must not run without one.
    return _deadline(named, ROOT_DEADLINE_VARIABLE, "; unset it for no root deadline")


def _deadline(text: str, source: str, fix: str = "") -> int:
    """`text` read by the flag's own parser, so the flag and the variable take the same texts."""
    try:
        return unix_ms(text)
    except argparse.ArgumentTypeError as exc:
        raise RunIdError(f"{source}: {exc}{fix}") from None


def serve(
    settings: FrontSettings,
    protocol: ProtocolChoice,
    run_id: str | None = None,
    *,
    result_budget: int | None = None,
    retain_s: int | None = None,
) -> int:
    """Serve until EOF or SIGTERM; 0 on a clean end, 2 when it cannot start.

    `retain_s`: prune what closed longer ago, at start and hourly (`jigcmd prune`); None
    keeps everything.
    """
    try:
        root_run, generated = resolve_run_id(run_id, os.environ)
        deadline = resolve_root_deadline(settings.root_deadline_unix_ms, os.environ)
    except RunIdError as exc:
        _say(str(exc))
        answer_pending(_startup_paths(settings).scrub(str(exc)))
        return 2
    settings = dataclasses.replace(settings, root_deadline_unix_ms=deadline)
    budget = result_budget if result_budget is not None else DEFAULT_BUDGET_BYTES
    return anyio.run(
        partial(_serve, settings, protocol, root_run, generated, budget=budget, retain_s=retain_s)
    )


def _say_run_id(root_run: str, generated: bool) -> None:
    """One stderr line naming the session's run, once it serves (a failed start has none)."""
    if generated:
        _say(
            f"run id {root_run} (generated; start again with --run-id {root_run} to resume "
            "this run's operations)"
        )
    else:
        _say(f"run id {root_run}")


async def _serve(
    settings: FrontSettings,
    protocol: ProtocolChoice,
    root_run: str,
    generated: bool,
    *,
    budget: int,
    retain_s: int | None,
) -> int:
    try:
        async with open_service(settings) as assembly:
            _say_run_id(root_run, generated)
            service = assembly.service
            slots = assembly.loaded.slots
            executor = service.executor
            async with anyio.create_task_group() as tg:
                # Off the path to the first answer: the zygote, a prepared envelope, the hash.
                if isinstance(executor, NativeExecutor):
                    tg.start_soon(_warm_up, executor, service)
                # A lock written while serving (a review) re-admits; tools/list_changed follows.
                tg.start_soon(watch_admission, assembly, settings.binding)
                if retain_s is not None and service.state_dir is not None:
                    tg.start_soon(keep_pruning, service.state_dir, retain_s, _say)
                ended = await serve_stdio(
                    service,
                    protocol=protocol,
                    server_name="jigcmd",
                    server_version=__version__,
                    slot=slots[0] if len(slots) == 1 else None,
                    # The journal keeps every operation; the session only the recent ones.
                    remember=_SESSION_REMEMBERS,
                    root_run=root_run,
                    result_budget=budget,
                    host_paths=_host_paths(service.state_dir, settings.binding),
                    # Work kept for another process's waiter cannot outlive this one.
                    on_lost=service.fence,
                )
                tg.cancel_scope.cancel()
            if ended.eof and not ended.frames:
                # An engine's `run` without -i (or a host that spawned us with /dev/null)
                # closes stdin at once: without this line nothing says why nothing happened.
                _say(
                    "stdin closed before any request: nothing to answer "
                    "(a container engine passes stdin only with -i)"
                )
    except STARTUP_ERRORS as exc:
        _say(str(exc))
        # A peer that already sent its first requests gets an answer, not a bare EOF; the
        # host's paths stay on the operator's stderr.
        answer_pending(_startup_paths(settings).scrub(str(exc)))
        return 2
    return 0


def _say(line: str) -> None:
    """One `jigcmd serve:` line on stderr, queued: a host that does not drain our stderr (or
    closed it, or made it /dev/full) must still get its answers (docs/protocols.md)."""
    say(f"jigcmd serve: {line}")


def _startup_paths(settings: FrontSettings) -> HostPaths:
    """The host paths a start-up failure may name, before the state directory was opened."""
    try:
        state_dir = settings.state_dir or default_state_dir()
    except StateDirError:
        state_dir = None
    return _host_paths(state_dir, settings.binding)


def _host_paths(state_dir: str | os.PathLike[str] | None, binding: Path) -> HostPaths:
    """What a refusal on the wire must not name: the state and Binding directories, the
    project root of a TypeScript Binding (its `jig.ts`), cwd, home, Python."""
    root = project_root(binding)
    # A TOML or JSON Binding's (or one beside its jig.ts) is its own directory: <binding dir>.
    project = None if root == binding.absolute().parent else root
    return HostPaths.of_host(state_dir=state_dir, binding=binding, project=project)


async def _warm_up(executor: NativeExecutor, service: CommandService) -> None:
    try:
        await executor.start()
        # Abandoned on cancel: the session's end must not wait for a thread hashing the
        # 80 MB Bun binary (the server exits within 2 s of EOF).
        template = await anyio.to_thread.run_sync(service.template_plan, abandon_on_cancel=True)
        await executor.prepare(template)
        await anyio.to_thread.run_sync(service.catalog.warm_up, abandon_on_cancel=True)
    except Exception as exc:  # noqa: BLE001 - best effort: serve goes on cold, each call meets it
        logger.warning("warm-up failed: %s", exc)
    # What the server built to start lives as long as it does: frozen, the collector's
    # full passes no longer walk it (one took 9 ms, every ~200 calls; docs/performance.md).
    gc.collect()
    gc.freeze()
    # The library pages the imports mapped and the calls never touch (see residency.py).
    residency.release_after_start(logger)
