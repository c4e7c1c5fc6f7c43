"""Assemble a `CommandService` from a Binding file, its lock and the installed runtime."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from jigcmd.attest.attester import Attester, HostIdentity
from jigcmd.attest.keys import SigningKey, SigningKeyError, open_signing_key
from jigcmd.command.bindingfile import (
    LoadedBinding,
    ScriptResult,
    is_script,
    load_binding,
    project_root,
)
from jigcmd.command.placement import Placement
from jigcmd.command.runtime import BunBinary, RuntimeUnavailable, find_runtime
from jigcmd.command.scriptbinding import evaluate_script
from jigcmd.command.service import CommandService
from jigcmd.durable.host import Host, open_host
from jigcmd.durable.ownership import Ownership
from jigcmd.durable.statedir import StateDirError
from jigcmd.envelope.api import EnvelopeFailure, Executor
from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.envelope.delegation import DelegationError
from jigcmd.envelope.native import NativeExecutor
from jigcmd.frontends.diagnosis.procgate import ProcUnavailable
from jigcmd.frontends.diagnosis.usernsgate import EnvelopeUnavailable, UserNamespaceUnavailable
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import JournalError, JournalUnusable
from jigcmd.plan import Limits
from jigcmd.policy.binding import BindingError
from jigcmd.policy.bindingscript import JIG_NAMES
from jigcmd.policy.lock import (
    Admission,
    Lock,
    LockedFile,
    LockError,
    RuntimeIdentity,
    check_policy,
    check_runtime,
    decode_lock,
)

__all__ = [
    "READMIT_POLL_S",
    "STARTUP_ERRORS",
    "Assembly",
    "FrontSettings",
    "admit",
    "assemble",
    "default_lock_path",
    "lock_runtime",
    "locked_file",
    "open_service",
    "watch_admission",
]

logger = logging.getLogger("jigcmd.command.assembly")

# How often a serving front looks at its Binding and lock for a re-admission.
READMIT_POLL_S = 1.0


def default_lock_path(binding: Path) -> Path:
    """`jigcmd.lock` next to the Binding file; `<name>.jigcmd.lock` for a TypeScript one.

    A project's `bindings/` holds many TypeScript Bindings, each admitted on its own.
    """
    if is_script(binding):
        return binding.with_name(f"{binding.stem}.jigcmd.lock")
    return binding.parent / "jigcmd.lock"


def locked_file(loaded: LoadedBinding, lock_path: Path) -> LockedFile:
    """The Binding file as a lock at `lock_path` records it (its path from the lock's directory)."""
    relative = os.path.relpath(loaded.path.absolute(), lock_path.absolute().parent)
    return LockedFile(path=Path(relative).as_posix(), sha256=loaded.digest)


def lock_runtime(runtime: BunBinary) -> RuntimeIdentity:
    """The runtime identity a lock pins; the hash is computed only when someone asks."""
    return RuntimeIdentity(bun_version=runtime.version, bun_sha256=lambda: runtime.sha256)


@dataclass(frozen=True)
class Assembly:
    """Everything a front needs to serve one Binding."""

    loaded: LoadedBinding
    lock_path: Path
    runtime: BunBinary
    service: CommandService
    # What the lock admits (its digest, the Binding's, the contract, Bun), for the statements
    # of runs; None when there is no usable lock (then nothing runs).
    identity: HostIdentity | None = None


def assemble(
    binding_path: Path,
    lock_path: Path | None,
    executor: Executor,
    *,
    root_deadline_unix_ms: int | None = None,
    bun: str | None = None,
    script: ScriptResult | None = None,
) -> Assembly:
    """Load and admit the Binding; an unadmitted one gives a service whose commands are unavailable.

    A TypeScript Binding comes evaluated (`script`, `jigcmd.command.scriptbinding`).
    Raises `BindingError` for a broken Binding and `RuntimeUnavailable` when no Bun is installed.
    """
    lock_path = lock_path or default_lock_path(binding_path)
    runtime = find_runtime(bun)
    loaded, lock, lock_bytes, admission, runtime_check = admit(
        binding_path, lock_path, runtime, script
    )
    service = CommandService(
        loaded.binding.commands,
        admission=admission,
        runtime=runtime,
        executor=executor,
        root_deadline_unix_ms=root_deadline_unix_ms,
        runtime_check=runtime_check,
    )
    identity = None if lock is None else HostIdentity.from_lock(lock, lock_bytes)
    return Assembly(
        loaded=loaded, lock_path=lock_path, runtime=runtime, service=service, identity=identity
    )


def admit(
    binding_path: Path, lock_path: Path, runtime: BunBinary, script: ScriptResult | None = None
) -> tuple[LoadedBinding, Lock | None, bytes, Admission, Callable[[], Admission] | None]:
    """The Binding as it is now, its lock, whether it admits it, the deferred runtime check.

    A TypeScript Binding comes evaluated (`script`). Raises `BindingError` for a broken Binding.
    """
    loaded = load_binding(binding_path, script)
    lock, lock_bytes, problem = _read_lock(lock_path)
    if problem is not None:
        admission = Admission(
            admitted=False,
            drift="lock",
            reason=f"{problem}; run `jigcmd lock --binding {binding_path}` to re-admit",
        )
    else:
        admission = check_policy(
            loaded.binding,
            lock,
            lock_path=str(lock_path),
            binding_path=str(binding_path),
            file=locked_file(loaded, lock_path),
            script=loaded.script,
        )
    runtime_check: Callable[[], Admission] | None = None
    if lock is not None and admission.admitted:
        admitted_lock = lock

        def runtime_check() -> Admission:
            try:
                identity = lock_runtime(runtime)
            except RuntimeUnavailable as exc:
                # Nothing ran, and nothing will until the runtime is fixed: each call is refused.
                return Admission(admitted=False, drift="runtime", reason=str(exc))
            return check_runtime(admitted_lock, identity, binding_path=str(binding_path))

    return loaded, lock, lock_bytes, admission, runtime_check


def _signature(*paths: Path) -> tuple[tuple[int, int, int, int] | None, ...]:
    """What changes when a file is edited, replaced or removed (inode, size, mtime, ctime).

    The change time too: an edit that keeps the size can put the modification time back
    (`touch -d`, `utime`), and nothing but the kernel sets the change time."""
    found: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            found.append(None)
        else:
            found.append((info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(found)


def _watched(binding_path: Path, lock_path: Path, loaded: LoadedBinding) -> tuple[Path, ...]:
    """Every file an admission reads: the Binding, its lock, a TypeScript Binding's `jig.ts`,
    and its package's manifest and the contract copies that names (docs/binding.md)."""
    project = [project_root(binding_path) / name for name in JIG_NAMES]
    return (
        binding_path,
        lock_path,
        *(project if is_script(binding_path) else []),
        *loaded.package_files,
    )


def _said(binding_path: Path, admission: Admission) -> None:
    """One line for the operator once the catalog changed: available again, or why not."""
    if admission.admitted:
        logger.warning("re-admitted %s: its commands are available", binding_path)
    else:
        logger.warning(
            "%s is not admitted: its commands are unavailable: %s", binding_path, admission.reason
        )


async def watch_admission(
    assembly: Assembly, binding_path: Path, interval: float = READMIT_POLL_S
) -> None:
    """While serving, re-admit whenever a file the admission read changes on disk (`_watched`).

    A new lock (`jigcmd lock` after a review) admits the commands it pins; an edit drifts
    them to unavailable. The service tells the sessions when its catalog changed. Never
    returns; cancel it with the front.
    """
    files = _watched(binding_path, assembly.lock_path, assembly.loaded)
    seen = _signature(*files)
    while True:
        await anyio.sleep(interval)
        now = await anyio.to_thread.run_sync(_signature, *files)
        if now == seen:
            continue
        seen = now
        try:
            # A TypeScript Binding is evaluated again, in an envelope, before it is re-read.
            script = (
                await evaluate_script(binding_path, assembly.service.executor, assembly.runtime)
                if is_script(binding_path)
                else None
            )
            loaded, lock, lock_bytes, admission, check = await anyio.to_thread.run_sync(
                admit, binding_path, assembly.lock_path, assembly.runtime, script
            )
        except BindingError as exc:
            commands = assembly.service.catalog.commands
            admission = Admission(
                admitted=False, drift="policy", reason=f"the Binding cannot be read: {exc}"
            )
            if assembly.service.catalog.readmit(commands, admission, None):
                _said(binding_path, admission)
            continue
        attester = assembly.service.attester
        if attester is not None:
            # Runs admitted from now on are signed as admitted by the new lock; calls already
            # admitted keep the attester they captured.
            identity = None if lock is None else HostIdentity.from_lock(lock, lock_bytes)
            assembly.service.attach_attester(Attester(attester.key, identity))
        if assembly.service.catalog.readmit(loaded.binding.commands, admission, check):
            _said(binding_path, admission)
        watched = _watched(binding_path, assembly.lock_path, loaded)
        if watched != files:
            # The manifest now names other contract copies: watch those from here.
            files, seen = watched, await anyio.to_thread.run_sync(_signature, *watched)


def _read_lock(path: Path) -> tuple[Lock | None, bytes, str | None]:
    """The lock at `path` (None when absent) and its bytes, or the reason it cannot be used."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, b"", None
    except OSError as exc:
        return None, b"", f"lock {path} cannot be read: {exc.strerror}"
    try:
        return decode_lock(data, source=str(path)), data, None
    except LockError as exc:
        # Its message begins with the path already.
        return None, b"", f"lock {path} is unusable: {str(exc).removeprefix(f'{path}: ')}"


# Why a front (serve, run) cannot start: each names the file, setting or piece to fix.
STARTUP_ERRORS: tuple[type[Exception], ...] = (
    BindingError,
    RuntimeUnavailable,
    StateDirError,
    DelegationError,
    UserNamespaceUnavailable,
    ProcUnavailable,
    EnvelopeUnavailable,
    JournalError,
    JournalUnusable,
    SchemaError,
    SigningKeyError,
)


@dataclass(frozen=True)
class FrontSettings:
    """What every command front (serve, run) is started with."""

    binding: Path
    lock: Path | None = None
    state_dir: Path | None = None
    max_envelopes: int | None = None
    root_deadline_unix_ms: int | None = None
    cgroup_base: str | None = None
    # How long a queued call may wait for an envelope slot (None: the service's default).
    queue_wait: float | None = None
    # The operator's signing key (else $JIGCMD_SIGNING_KEY, else the host key).
    signing_key: Path | None = None


@asynccontextmanager
async def open_service(
    settings: FrontSettings, *, start_envelopes: bool = False
) -> AsyncIterator[Assembly]:
    """The admitted service with its executor, journal and slots; recovery runs first.

    Raises `BindingError`, `RuntimeUnavailable`, `StateDirError`, `DelegationError` (no
    cgroup subtree this user may use) or `SigningKeyError` before anything starts. With
    `start_envelopes` the envelope zygote is started (and the runtime staged) before the
    service is handed over, so that a one-shot run's ceiling does not pay for it; a zygote
    that cannot start is reported by the run itself.
    """
    host, ownership, key = await _open_state(settings)
    backend = host.backend
    executor = NativeExecutor(cgroup_base=host.cgroup_base, state_dir=str(ownership.state_dir))
    try:
        assembly = await _assemble(settings, executor)
        if backend is not None:
            report = await anyio.to_thread.run_sync(ownership.recover, backend)
            if not report.clean:
                logger.warning("recovery could not confirm every cleanup: %s", report)
            # A caller joining a dead server's run fences it as this did (`durable.joining`).
            ownership.backend = backend
        _attach(assembly, settings, ownership, key, backend)
        if start_envelopes:
            with contextlib.suppress(EnvelopeFailure):
                await executor.start()
        # Every front's operations are shared by their live waiters (`command.sharing`).
        async with assembly.service.sharing():
            yield assembly
    finally:
        with anyio.CancelScope(shield=True):
            await executor.aclose()
            if backend is not None:
                # What killed supervisors or pid 1s of this process left goes now, not at
                # the next start (the proof `recover` uses; see `recovery.sweep_own`).
                await anyio.to_thread.run_sync(ownership.sweep, backend)
        ownership.close()


async def _open_state(settings: FrontSettings) -> tuple[Host, Ownership, SigningKey]:
    """The host (state directory, cgroups), its journal and slots, and the signing key."""
    host = await anyio.to_thread.run_sync(
        functools.partial(
            open_host, settings.state_dir, settings.cgroup_base, tolerate_no_cgroups=True
        )
    )
    if host.cgroup_problem is not None:
        # Every command will fail closed (EXECUTION_FAILED naming the cgroup piece).
        logger.warning("cgroups unavailable: %s", host.cgroup_problem)
    ownership = await anyio.to_thread.run_sync(
        Ownership.open, host.state_dir, settings.max_envelopes, Limits().memory_bytes
    )
    try:
        # After the journal (whose failure, a full disk say, is the one to name first): a
        # key that cannot be read or made fails the start, with the reason.
        key = await anyio.to_thread.run_sync(open_signing_key, host.state_dir, settings.signing_key)
    except BaseException:
        ownership.close()
        raise
    if key.replaced is not None:
        # `verify` without --key trusted that file: what it held is said, not lost unsaid.
        logger.warning("%s: written again with its own", key.replaced)
    return host, ownership, key


async def _assemble(settings: FrontSettings, executor: NativeExecutor) -> Assembly:
    """The Binding admitted (a script Binding evaluated first), its runtime staged at start."""
    script = None
    if is_script(settings.binding):
        # Evaluated in an envelope of this executor's before anything is admitted.
        runtime = find_runtime()
        executor.stage_at_start(await anyio.to_thread.run_sync(lambda: runtime.binds))
        script = await evaluate_script(settings.binding, executor, runtime)
    assembly = assemble(
        settings.binding,
        settings.lock,
        executor,
        root_deadline_unix_ms=settings.root_deadline_unix_ms,
        script=script,
    )
    # A runtime whose binds cannot be read fails closed at its first plan instead.
    with contextlib.suppress(RuntimeUnavailable):
        runtime = assembly.runtime
        executor.stage_at_start(await anyio.to_thread.run_sync(lambda: runtime.binds))
    return assembly


def _attach(
    assembly: Assembly,
    settings: FrontSettings,
    ownership: Ownership,
    key: SigningKey,
    backend: CgroupBackend | None,
) -> None:
    """Give the service its journal and slots, its queue bound, its signer and the CPU pins."""
    service = assembly.service
    service.attach_ownership(ownership)
    if settings.queue_wait is not None:
        service.set_queue_wait(settings.queue_wait)
    # Attached even without a lock: a lock made while serving gives it its identity.
    service.attach_attester(Attester(key, assembly.identity))
    if backend is not None:
        service.attach_placement(Placement(backend.pins, backend.cpuset_bound))
