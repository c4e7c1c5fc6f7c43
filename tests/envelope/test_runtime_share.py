"""One staged runtime per state directory: zygotes borrow a holder's copy, or make their own.

Each test starts real zygotes (`NativeExecutor` with a state directory) and reads what they
see through `/proc/<zygote>/root`: the same file on the same tmpfs means one copy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.envelope import runtimeshare, staging
from jigcmd.envelope.cgroups import detect
from jigcmd.envelope.native import NativeExecutor
from jigcmd.journal.identity import process_start
from jigcmd.plan import Bind
from tests.envelope.hostile_harness import TracedExecutor, probe_plan
from tests.required import require_root

pytestmark = pytest.mark.envelope


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A state directory of the test's own."""
    require_root()
    state = tmp_path / "state"
    state.mkdir()
    return state


@pytest.fixture
async def executors() -> AsyncIterator[list[NativeExecutor]]:
    """Executors a test starts; each is closed at the end if the test did not."""
    started: list[NativeExecutor] = []
    try:
        yield started
    finally:
        for executor in started:
            await executor.aclose()


async def _start(
    started: list[NativeExecutor], state: Path, binds: tuple[Bind, ...] | None = None
) -> NativeExecutor:
    executor = NativeExecutor(state_dir=str(state))
    executor.stage_at_start(find_runtime().binds if binds is None else binds)
    await executor.start()
    started.append(executor)
    return executor


def _staged_bun(executor: NativeExecutor) -> os.stat_result:
    """Bun's staged copy as the executor's zygote sees it."""
    zygote = executor._zygote
    assert zygote is not None and executor._staging_dir is not None
    return os.stat(f"/proc/{zygote.pid}/root{executor._staging_dir}{BUN_TARGET}")


def _holders(state: Path) -> list[int]:
    text = (state / runtimeshare.HOLDERS).read_text("ascii")
    return [int(line.split()[0]) for line in text.splitlines()]


def _zygote_pid(executor: NativeExecutor) -> int:
    assert executor._zygote is not None
    return executor._zygote.pid


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


async def test_zygotes_on_one_state_directory_share_one_copy_that_outlives_its_maker(
    state_dir: Path, executors: list[NativeExecutor]
) -> None:
    """Three zygotes see one staged Bun; with the first two closed the third still runs Bun
    from it, and a fourth started then borrows it from the third."""
    first, second, third = [await _start(executors, state_dir) for _ in range(3)]
    copy = _staged_bun(first)
    assert _same_file(_staged_bun(second), copy) and _same_file(_staged_bun(third), copy)
    assert copy.st_size == os.stat(find_runtime().path).st_size
    assert _holders(state_dir) == [_zygote_pid(e) for e in (first, second, third)]
    for executor in (first, second):
        await executor.aclose()
    traced = TracedExecutor(third, detect())
    outcome = await traced.run(probe_plan('console.log("ran from the shared copy");\n'))
    assert outcome.exit_code == 0
    assert outcome.stdout.data == b"ran from the shared copy\n"
    assert not traced.traces[-1].leftovers
    fourth = await _start(executors, state_dir)
    assert _same_file(_staged_bun(fourth), copy)
    assert _holders(state_dir) == [_zygote_pid(third), _zygote_pid(fourth)]


async def test_a_holder_with_copies_of_other_sources_is_not_borrowed(
    state_dir: Path, tmp_path: Path, executors: list[NativeExecutor]
) -> None:
    """Another installation's Bun (same bytes, another file) is never borrowed: each zygote
    gets a copy of its own sources, both are listed, and a zygote started after them finds
    the copy of its sources past the newer holder of the other's."""
    runtime = find_runtime()
    other_bun = tmp_path / "other" / "bun"
    other_bun.parent.mkdir()
    shutil.copy2(runtime.path, other_bun)
    other = tuple(
        bind._replace(source=str(other_bun)) if bind.target == BUN_TARGET else bind
        for bind in runtime.binds
    )
    theirs = await _start(executors, state_dir, other)
    ours = await _start(executors, state_dir)
    assert not _same_file(_staged_bun(theirs), _staged_bun(ours))
    assert _holders(state_dir) == [_zygote_pid(theirs), _zygote_pid(ours)]
    newest_theirs = await _start(executors, state_dir, other)
    assert _same_file(_staged_bun(newest_theirs), _staged_bun(theirs))
    later = await _start(executors, state_dir)
    assert _same_file(_staged_bun(later), _staged_bun(ours))


async def test_dead_and_foreign_holders_are_skipped_and_the_dead_dropped(
    state_dir: Path, executors: list[NativeExecutor]
) -> None:
    """A listed pid that is gone, a live pid whose start time is not the listed one, and a
    live process whose mount point is no staging tmpfs (this test's: a plain directory with
    a forged Bun and a manifest naming the real sources) are all passed over."""
    me = os.getpid()
    started = process_start(me)
    assert started is not None
    _forge(state_dir / "runtime")
    (state_dir / runtimeshare.HOLDERS).write_text(
        f"{_gone_pid()} {started}\n{me} {started + 1}\n{me} {started}\n", "ascii"
    )
    executor = await _start(executors, state_dir)
    assert _staged_bun(executor).st_size == os.stat(find_runtime().path).st_size
    assert _holders(state_dir) == [me, _zygote_pid(executor)]


def _forge(root: Path) -> None:
    lines = []
    for bind in find_runtime().binds:
        path = root / bind.target.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\necho forged\n", "ascii")
        lines.append(f"{bind.target}\t{staging.identity(bind.source)}\n")
    (root / ".manifest").write_text("".join(lines), "utf-8")


def _gone_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


_FORGER = textwrap.dedent(
    """
    import os, sys, time
    from jigcmd.envelope import idmap, staging, syscalls as sc
    from jigcmd.command.runtime import BUN_TARGET, find_runtime
    mount_point, kind = sys.argv[1:3]
    if kind == "userns":
        sc.unshare(sc.CLONE_NEWUSER | sc.CLONE_NEWNS)
        idmap.map_ids("self", inside=(0, 0), outside=(0, 0))
    else:
        sc.unshare(sc.CLONE_NEWNS)
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    source = "tmpfs" if kind == "other-source" else "jigcmd-runtime"
    sc.mount(source, mount_point, "tmpfs", 0, "mode=0755")
    lines = []
    for bind in find_runtime().binds:
        path = mount_point + bind.target
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fake:
            fake.write("#!/bin/sh\\necho forged\\n")
        lines.append(f"{bind.target}\\t{staging.identity(bind.source)}\\n")
    with open(mount_point + "/.manifest", "w") as manifest:
        manifest.write("".join(lines))
    if kind != "writable":
        sc.mount(None, mount_point, None, sc.MS_REMOUNT | sc.MS_RDONLY, "mode=0755")
    print(os.stat(mount_point + BUN_TARGET).st_dev, flush=True)
    sys.stdin.read()
    """
)


@contextlib.contextmanager
def _forged(state_dir: Path, kind: str) -> Iterator[tuple[int, int]]:
    """A process holding, at the staging mount point, a tmpfs with a forged Bun and a
    manifest naming the real sources, in a mount namespace of its own (`kind`: owned by a
    user namespace of its own too, or named otherwise, or left writable): (its pid, the
    forged tmpfs's device)."""
    mount_point = state_dir / "runtime"
    mount_point.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _FORGER, str(mount_point), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdout is not None
        device = int(child.stdout.readline())
        yield child.pid, device
    finally:
        child.communicate(b"")


@pytest.mark.parametrize(
    "kind",
    [
        # Its namespace is not owned by our user namespace: no host root was needed to forge
        # the copy and its manifest.
        pytest.param("userns", id="a-namespace-anyone-could-make"),
        # In our own user namespace, but the mount is a tmpfs named otherwise, or writable.
        pytest.param("other-source", id="not-named-jigcmd-runtime"),
        pytest.param("writable", id="not-read-only"),
    ],
)
async def test_a_forged_copy_is_never_borrowed(
    state_dir: Path, kind: str, executors: list[NativeExecutor]
) -> None:
    """A holder whose copy and manifest may be forged is passed over, however fitting its
    manifest: the zygote makes a copy of its own."""
    with _forged(state_dir, kind) as (pid, forged_device):
        started = process_start(pid)
        (state_dir / runtimeshare.HOLDERS).write_text(f"{pid} {started}\n", "ascii")
        executor = await _start(executors, state_dir)
        bun = _staged_bun(executor)
        assert bun.st_dev != forged_device
        assert bun.st_size == os.stat(find_runtime().path).st_size


async def test_concurrent_starts_make_one_copy(
    state_dir: Path, executors: list[NativeExecutor]
) -> None:
    """Four zygotes starting at once: the lock lets one copy and the others borrow it."""
    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(_start, executors, state_dir)
    copies = {(_staged_bun(e).st_dev, _staged_bun(e).st_ino) for e in executors}
    assert len(copies) == 1
    assert sorted(_holders(state_dir)) == sorted(_zygote_pid(e) for e in executors)


def test_a_fifo_where_the_holders_file_belongs_is_refused_not_waited_on(tmp_path: Path) -> None:
    """OSError naming the file and the fix, at the open (a child, its timeout a failsafe)."""
    fifo = tmp_path / runtimeshare.HOLDERS
    os.mkfifo(fifo, 0o600)
    probe = (
        "from jigcmd.envelope import runtimeshare\n"
        "try:\n"
        f"    runtimeshare.lock({str(fifo)!r})\n"
        "except OSError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert f"{fifo} is not a regular file; remove it" in done.stdout
