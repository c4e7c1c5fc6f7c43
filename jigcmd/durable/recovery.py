"""Closing every run a dead server left open: fence what is alive, release and verify, never re-run.

Run at server start-up and by `jigcmd recover --state-dir DIR`. For each open ownership row:

1. Whose row is it? A row written by a server that is still alive (this very process; one
   of its PID namespace with the same pid, start time and boot; one of another namespace
   still holding its liveness lock, `jigcmd.journal.liveness`) is left alone: several
   jigcmd servers may share one state directory, in containers too. Only rows whose owner
   is dead are recovered.
2. Close it first: the row becomes `uncertain` ("a prior command dispatch was fenced
   without a proved result") with cleanup `failed` until proved otherwise. Closing before
   touching anything means the row can no longer be moved to running (a late
   `record_envelope` writes nothing); a crash of recovery itself leaves the
   cleanup recorded as failed, never as complete.
3. The supervisor: it fences its own run when its run socket closes (the server is gone),
   so recovery waits for it (at most `supervisor_grace` seconds, shared by all rows), then
   SIGKILLs it through a pidfd (a recycled pid is never signalled). One of another PID
   namespace cannot be signalled from here: past the grace it is a problem recorded (the
   cleanup is not proved), and the run is fenced through its cgroup all the same.
4. The cgroup job `jigcmd-<run_id>`: kill every task, wait until it is empty, remove it,
   then verify that no directory of it (nor any recorded cgroup path) remains and that no
   process still sits in the run's network namespace. The namespace, the mount namespace
   and the scratch tmpfs have no name: they are released with the last process of the
   run, which the empty cgroup proves (every envelope process is born in the cgroup).
5. Record the cleanup outcome: `complete` only when all of step 4 was confirmed.

`sweep_own` is the same proof at a server's clean exit, for what its own killed envelopes
left (so that a clean exit leaves nothing for the next start).

One pass runs at a time per state directory (`jigcmd.durable.recoverylock`); a row closed
in step 2 is `pending` until its pass records step 5, and a pass that died in between
leaves it to the next pass, which re-checks it as below.

Nothing is ever re-dispatched. Closed rows whose cleanup failed are re-checked the same
way (their run is over, so fencing their leftovers is safe), and become `complete` only
once confirmed. Jarvis runs left `running` by a dead server are fenced and closed as
`uncertain`. A `jigcmd…` cgroup job that no row of this journal names is only reported (it
may belong to another state directory or to a test), unless it is provably a dead jigcmd
tree's leftover: named exactly like jigcmd's own jobs (`jigcmd-` and 16 hex digits), in no
registry entry, empty, and unchanged for `STALE_AFTER_S` (a live jigcmd never keeps an empty
job: pid 1 is born into it, and the job is removed as soon as it is empty again). Such a job
is removed (the kernel refuses to remove a populated one).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from jigcmd.durable import recoverylock
from jigcmd.envelope import hostids
from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.journal import identity, liveness
from jigcmd.journal.envelopes import EnvelopeRegistry
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.rows import Row
from jigcmd.journal.store import Journal

logger = logging.getLogger(__name__)

__all__ = [
    "STALE_AFTER_S",
    "UNCERTAIN_REASON",
    "RecoveredRun",
    "RecoveryReport",
    "owner_alive",
    "owner_gone",
    "pending",
    "recover",
    "recover_unless_running",
    "sweep_own",
]

UNCERTAIN_REASON = "a prior command dispatch was fenced without a proved result"
_IN_PROGRESS = "recovery started; cleanup not yet confirmed"
_JOB_PREFIX = "jigcmd-"
# The names jigcmd gives its own jobs: a run id or an envelope id, 16 lowercase hex digits.
_OWN_JOB = re.compile(r"jigcmd-[0-9a-f]{16}")
# How long an empty job of that name must have been left unchanged to count as a leftover.
STALE_AFTER_S = 30.0


class RecoveredRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What recovery did for one run."""

    operation_id: str
    # The caller's run the operation belongs to ("" for rows from before runs).
    root_run: str
    run_id: str
    supervisor_killed: bool
    cleanup_complete: bool
    problems: tuple[str, ...]


class RecoveryReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything one `recover` pass closed, re-checked, left alone and found."""

    closed: tuple[RecoveredRun, ...]
    rechecked: tuple[RecoveredRun, ...]
    live: tuple[str, ...]
    jarvis_closed: tuple[int, ...]
    jarvis_problems: tuple[str, ...]
    unowned_jobs: tuple[str, ...]
    envelopes_released: tuple[str, ...] = ()
    envelope_problems: tuple[str, ...] = ()
    # Empty jobs a dead jigcmd tree left that no journal names, removed (see the module doc).
    stale_jobs_removed: tuple[str, ...] = ()
    # Unheld host id lease files removed host-wide (hostids.sweep), and entries it skipped.
    leases_removed: int = 0
    lease_problems: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """Whether every cleanup recovery attempted was confirmed."""
        runs = self.closed + self.rechecked
        return (
            all(r.cleanup_complete for r in runs)
            and not self.jarvis_problems
            and not self.envelope_problems
        )


def owner_alive(state_dir: Path, owner: ProcessIdentity) -> bool:
    """Whether the server that wrote a row is still running (this process counts as alive)."""
    return owner == identity.current() or liveness.alive(state_dir, owner)


def owner_gone(state_dir: Path, row: Row) -> bool:
    """Whether `row` is open and its owner provably dead: the row recovery fences and closes.

    Changes nothing (a dead owner's liveness file is left): for `runs` and `doctor`.
    """
    if not row.is_open or row.owner == identity.current():
        return False
    return not liveness.alive(state_dir, row.owner, tidy=False)


def pending(row: Row) -> bool:
    """Whether `row` is one a recovery pass closed but has not yet fenced (not final yet)."""
    return not row.is_open and row.cleanup == "failed" and row.problems == _IN_PROGRESS


def recover(
    journal: Journal,
    backend: CgroupBackend,
    *,
    supervisor_grace: float = 3.0,
    empty_wait: float = 2.0,
    waiting: Callable[[str], None] | None = None,
) -> RecoveryReport:
    """Close every open row of a dead server as uncertain, fencing and verifying its run.

    Waits for a pass another thread or process is running to end first (`recoverylock`), at
    most `recoverylock.WAIT_LIMIT` (its holder may be stopped), telling `waiting` the holder;
    then runs anyway. Server start-up and `jigcmd recover` promise a whole pass.
    """
    state_dir = journal.path.parent
    tell = waiting or _log_waiting
    with recoverylock.held_within(state_dir, recoverylock.WAIT_LIMIT, tell) as mine:
        if not mine:
            logger.warning(
                "the recovery pass of %s did not end within %.0f s; running this one anyway",
                recoverylock.holder(state_dir),
                recoverylock.WAIT_LIMIT,
            )
        return _pass(journal, backend, supervisor_grace, empty_wait)


def _log_waiting(holder: str) -> None:
    logger.warning("waiting for the recovery pass of %s to end", holder)


def recover_unless_running(journal: Journal, backend: CgroupBackend) -> RecoveryReport | None:
    """`recover`, or None at once when another pass is running (it fences what this would)."""
    with recoverylock.held(journal.path.parent, wait=False) as mine:
        return _pass(journal, backend, 3.0, 2.0) if mine else None


def _pass(
    journal: Journal, backend: CgroupBackend, supervisor_grace: float, empty_wait: float
) -> RecoveryReport:
    """One recovery pass, the pass lock held (see `recover`)."""
    live, orphans, ended = _orphaned_rows(journal)
    closed_ids = {r.run_id for r in orphans}
    retry = [r for r in journal.cleanup_failures() if r.run_id not in closed_ids]

    state_dir = journal.path.parent
    fence = _Fence(backend, empty_wait, state_dir)
    deadline = time.monotonic() + supervisor_grace
    # Envelopes registered by a dead server's supervisors, claimed by a run or still idle.
    registry = EnvelopeRegistry(state_dir)
    orphaned = [e for e in registry.entries() if not owner_alive(state_dir, e.owner)]
    stopped_envelopes = {e.name: fence.stop_supervisor(e.supervisor, deadline) for e in orphaned}
    killed = {
        r.run_id: fence.stop_supervisor(r.supervisor, deadline)
        for r in orphans + retry
        if r.supervisor is not None
    }
    reports: list[RecoveredRun] = []
    envelopes_released: list[str] = []
    envelope_problems: list[str] = []
    for envelope in orphaned:
        problems = stopped_envelopes[envelope.name][1]
        problems = problems + fence.release(envelope.name, (), None)
        if problems:
            envelope_problems += [f"envelope {envelope.name}: {p}" for p in problems]
        else:
            registry.drop(envelope.name)
            envelopes_released.append(envelope.name)
    for row in orphans + retry:
        stopped, problems = killed.get(row.run_id, (False, []))
        problems = problems + fence.release(_job_of(row), row.cgroup_paths, row.netns)
        if row.run_id in ended:
            journal.close_lost(
                row.operation_id,
                root_run=row.root_run,
                reason=UNCERTAIN_REASON,
                cleanup_complete=not problems,
                problems="; ".join(problems),
            )
        reports.append(_record_cleanup(journal, row, problems, supervisor_killed=stopped))

    jarvis_closed, jarvis_problems = _recover_jarvis(journal, fence)
    # Joins of processes that died waiting (a live one removes its own).
    journal.forget_dead_waiters()
    liveness.prune(state_dir)
    # A lease file no one holds is a killed zygote's: its envelopes died with it (pdeathsig).
    leases_removed, lease_problems = hostids.sweep()
    unowned = _unowned_jobs(journal, backend)
    stale = [name for name in unowned if _remove_if_stale(backend, name)]
    return RecoveryReport(
        closed=tuple(reports[: len(orphans)]),
        rechecked=tuple(reports[len(orphans) :]),
        live=tuple(live),
        jarvis_closed=tuple(jarvis_closed),
        jarvis_problems=tuple(jarvis_problems),
        unowned_jobs=tuple(name for name in unowned if name not in stale),
        envelopes_released=tuple(envelopes_released),
        envelope_problems=tuple(envelope_problems),
        stale_jobs_removed=tuple(stale),
        leases_removed=leases_removed,
        lease_problems=tuple(lease_problems),
    )


def _orphaned_rows(journal: Journal) -> tuple[list[str], list[Row], set[str]]:
    """The open rows of dead servers, each closed uncertain unless its evidence was recorded.

    Returns the operation ids live servers still hold, the dead servers' rows (as closed, or
    still open with their evidence), and the envelope run ids of the rows left open: those
    close only after the fence, `done` when the cleanup is proved (`Journal.close_lost`).
    Rows are told apart by their envelope's run id: the same operation id may be open in
    several callers' runs, and every one of them is recovered.
    """
    live: list[str] = []
    orphans: list[Row] = []
    ended: set[str] = set()
    for row in journal.open_rows():
        if owner_alive(journal.path.parent, row.owner):
            live.append(row.operation_id)
            continue
        if row.outcome == "evidence":
            ended.add(row.run_id)
            orphans.append(row)
            continue
        journal.mark_uncertain(
            row.operation_id,
            root_run=row.root_run,
            reason=UNCERTAIN_REASON,
            cleanup_complete=False,
            problems=_IN_PROGRESS,
        )
        # Re-read after closing: the supervisor identity can no longer change.
        closed = journal.get(row.operation_id, root_run=row.root_run)
        if closed is not None:
            orphans.append(closed)
    return live, orphans, ended


def _recover_jarvis(journal: Journal, fence: _Fence) -> tuple[list[int], list[str]]:
    """Close the jarvis runs of dead servers uncertain, their envelopes released first."""
    closed: list[int] = []
    problems: list[str] = []
    for run in journal.jarvis_running():
        if owner_alive(journal.path.parent, run.owner):
            continue
        if run.envelope_run_id is not None:
            problems += [
                f"jarvis run {run.run_id}: {p}"
                for p in fence.release(_JOB_PREFIX + run.envelope_run_id, (), None)
            ]
        if journal.jarvis_finish(run.run_id, status="uncertain"):
            closed.append(run.run_id)
    return closed, problems


def sweep_own(
    journal: Journal, backend: CgroupBackend, *, empty_wait: float = 1.0
) -> RecoveryReport:
    """At this process's clean exit: release what its killed envelopes left, as recovery would.

    Call it once this process's executor is closed, so that none of its envelopes may still
    be in use: its registry entries and its closed rows whose cleanup was not proved, whose
    supervisor is dead (killed from outside), are released with the proof `recover` uses
    (job killed, empty and removed, no directory or netns holder left); an entry is dropped,
    and a row's cleanup recorded `complete`, only then. An envelope whose supervisor still
    lives is tearing itself down and is left to it (and to `recover` should it die too), as
    are other processes' entries and rows.
    """
    me = identity.current()
    fence = _Fence(backend, empty_wait, journal.path.parent)
    registry = EnvelopeRegistry(journal.path.parent)
    released: list[str] = []
    envelope_problems: list[str] = []
    for entry in registry.entries():
        if entry.owner != me or liveness.alive(fence.state_dir, entry.supervisor):
            continue
        problems = fence.release(entry.name, (), None)
        if problems:
            envelope_problems += [f"envelope {entry.name}: {p}" for p in problems]
        else:
            registry.drop(entry.name)
            released.append(entry.name)
    rechecked: list[RecoveredRun] = []
    for row in journal.cleanup_failures():
        if row.owner != me or (
            row.supervisor is not None and liveness.alive(fence.state_dir, row.supervisor)
        ):
            continue
        problems = fence.release(_job_of(row), row.cgroup_paths, row.netns)
        rechecked.append(_record_cleanup(journal, row, problems, supervisor_killed=False))
    # This process's own zygote, killed from outside, left its leases' files too.
    leases_removed, lease_problems = hostids.sweep()
    return RecoveryReport(
        closed=(),
        rechecked=tuple(rechecked),
        live=(),
        jarvis_closed=(),
        jarvis_problems=(),
        unowned_jobs=(),
        envelopes_released=tuple(released),
        envelope_problems=tuple(envelope_problems),
        leases_removed=leases_removed,
        lease_problems=tuple(lease_problems),
    )


def _job_of(row: Row) -> str:
    """A run's cgroup job: a prepared envelope's is named after itself, its paths recorded."""
    return os.path.basename(row.cgroup_paths[0]) if row.cgroup_paths else row.cgroup_job


def _record_cleanup(
    journal: Journal, row: Row, problems: list[str], *, supervisor_killed: bool
) -> RecoveredRun:
    """Record whether the run's cleanup is proved, and report it."""
    journal.record_cleanup(
        row.operation_id,
        root_run=row.root_run,
        complete=not problems,
        problems="; ".join(problems),
    )
    return RecoveredRun(
        operation_id=row.operation_id,
        root_run=row.root_run,
        run_id=row.run_id,
        supervisor_killed=supervisor_killed,
        cleanup_complete=not problems,
        problems=tuple(problems),
    )


def _remove_if_stale(backend: CgroupBackend, name: str) -> bool:
    """Remove an unowned job that is provably a dead jigcmd tree's empty leftover."""
    if _OWN_JOB.fullmatch(name) is None:
        return False
    try:
        job = backend.open(name)
        if job is None or job.populated():
            return False
        changed = max(os.stat(path).st_mtime for path in job.paths)
        if time.time() - changed < STALE_AFTER_S:
            return False
        job.remove()
    except (OSError, ValueError):
        return False  # populated after all (EBUSY), gone, or unreadable: leave it
    return True


class _Fence:
    def __init__(self, backend: CgroupBackend, empty_wait: float, state_dir: Path) -> None:
        self.backend = backend
        self.empty_wait = empty_wait
        self.state_dir = state_dir

    def stop_supervisor(
        self, supervisor: ProcessIdentity | None, deadline: float
    ) -> tuple[bool, list[str]]:
        """Let the supervisor fence its own run until `deadline`, then SIGKILL it."""
        if supervisor is None:
            return False, []
        grace = max(0.0, deadline - time.monotonic())
        if liveness.wait_exit(self.state_dir, supervisor, grace):
            return False, []
        if not identity.local(supervisor):
            # No pid of ours names it; its envelopes are fenced through their cgroups.
            return False, [
                f"supervisor pid {supervisor.pid} of another PID namespace "
                f"(pid:[{supervisor.pidns}]) still runs; it cannot be signalled from here"
            ]
        if identity.kill_and_wait(supervisor, self.empty_wait):
            return True, []
        return True, [f"supervisor pid {supervisor.pid} did not exit after SIGKILL"]

    def release(self, name: str, paths: tuple[str, ...], netns: str | None) -> list[str]:
        """Kill, empty and remove the cgroup job `name`; verify nothing of the run remains."""
        problems: list[str] = []
        try:
            job = self.backend.open(name)
            if job is not None:
                job.kill()
                if not job.wait_empty(self.empty_wait):
                    problems.append(f"cgroup job {name} still populated after kill")
                else:
                    job.remove()
            if self.backend.open(name) is not None and not problems:
                problems.append(f"cgroup job {name} still exists after removal")
        except OSError as exc:
            # Released under it by another pass (one ran on past a stopped holder's lock).
            if exc.errno not in (errno.ENOENT, errno.ENODEV) or self._exists(name):
                problems.append(f"cgroup job {name}: {exc}")
        problems += [f"cgroup directory {p} still exists" for p in paths if os.path.exists(p)]
        if netns is not None:
            holders = netns_holders(netns, name)
            if holders:
                pids = ", ".join(map(str, holders))
                problems.append(f"network namespace {netns} still held by pid {pids}")
        return problems

    def _exists(self, name: str) -> bool:
        try:
            return self.backend.open(name) is not None
        except OSError:
            return True  # unreadable: not proved gone


def netns_holders(netns: str, job: str) -> list[int]:
    """Pids of the processes whose network namespace is `netns` (`net:[inode]`), except
    those of another envelope's job: the kernel gives a freed namespace's inode number to
    the next one made, often the next envelope's, so those hold a namespace of their own."""
    holders = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            # The process may exit or be inaccessible between listing and reading.
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry.name}/ns/net") != netns:
                    continue
                with open(f"/proc/{entry.name}/cgroup", encoding="utf-8") as handle:
                    if not in_other_job(handle.read(), job):
                        holders.append(int(entry.name))
    return holders


def in_other_job(cgroups: str, job: str) -> bool:
    """Whether a /proc/PID/cgroup text places the process in a jigcmd job other than `job`.

    An envelope's processes cannot leave their job (no cgroup file is theirs to write), so
    one found in another job belongs to that envelope.
    """
    for line in cgroups.splitlines():
        leaf = line.split(":", 2)[-1].removesuffix(" (deleted)").rpartition("/")[2]
        if _OWN_JOB.fullmatch(leaf) is not None and leaf != job:
            return True
    return False


def _unowned_jobs(journal: Journal, backend: CgroupBackend) -> list[str]:
    """cgroup jobs that no operation of this journal names (reported, never touched)."""
    try:
        names = backend.list_jobs()
    except OSError:
        return []
    registered = {e.name for e in EnvelopeRegistry(journal.path.parent).entries()}
    return sorted(
        name
        for name in names
        if name not in registered
        and (
            not name.startswith(_JOB_PREFIX)
            or journal.by_run_id(name.removeprefix(_JOB_PREFIX)) is None
        )
    )
