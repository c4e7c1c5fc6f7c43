"""`jigcmd recover`: close every run a dead server left open; never re-run anything."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from jigcmd.durable.host import open_host
from jigcmd.durable.recovery import RecoveredRun, RecoveryReport
from jigcmd.durable.recovery import recover as recover_runs
from jigcmd.durable.recoverylock import WAIT_LIMIT
from jigcmd.durable.statedir import StateDirError, default_state_dir
from jigcmd.envelope.cgroups import CgroupUnavailable
from jigcmd.envelope.delegation import DelegationError
from jigcmd.envelope.hostids import DIRECTORY
from jigcmd.frontends.diagnosis.procgate import ProcUnavailable
from jigcmd.journal.failures import JournalUnusable, unusable
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import Journal

__all__ = ["recover"]


def _say_waiting(holder: str) -> None:
    sys.stderr.write(
        f"jigcmd recover: waiting for the recovery pass held by {holder} to end (at most "
        f"{WAIT_LIMIT:.0f} s, then recovering anyway)\n"
    )
    sys.stderr.flush()


def recover(state_dir: Path | None, cgroup_base: str | None = None) -> int:
    """Fence, release and record; 0 when every cleanup was confirmed, 1 otherwise, 2 unusable.

    A state directory that does not exist holds no run to recover: it is never created here
    (a mistyped `--state-dir` is refused, the default is "nothing to recover").
    """
    target = state_dir or default_state_dir()
    if not target.exists() and not target.is_symlink():
        if state_dir is not None:
            sys.stderr.write(
                f"jigcmd recover: --state-dir {state_dir}: no such directory, so no run of it "
                "to recover (nothing was created); give the directory serve and run use\n"
            )
            return 2
        print(f"nothing to recover: no state directory at {target} yet")
        return 0
    try:
        # It only removes jobs: a scope it shares with its shell is still the user's.
        host = open_host(state_dir, cgroup_base, move_self=False, for_jobs=False)
    except (StateDirError, CgroupUnavailable, ValueError, DelegationError, ProcUnavailable) as exc:
        sys.stderr.write(f"jigcmd recover: {exc}\n")
        return 2
    try:
        journal = Journal.open(host.state_dir)
        try:
            assert host.backend is not None  # cgroups are not tolerated missing here
            report = recover_runs(journal, host.backend, waiting=_say_waiting)
        except (sqlite3.Error, OSError) as exc:
            raise unusable(journal.path, exc) from exc
        finally:
            journal.close()
    except (JournalUnusable, SchemaError) as exc:
        sys.stderr.write(f"jigcmd recover: {exc}\n")
        return 2
    _print_report(report)
    return 0 if report.clean else 1


def _print_report(report: RecoveryReport) -> None:
    """Every thing the pass did or found, a line each; "nothing to recover" only if none."""
    for run in report.closed:
        _print_run(run, "closed", " as uncertain")
    for run in report.rechecked:
        # A closed row whose cleanup was recorded failed (or not yet confirmed): proved again.
        _print_run(run, "re-checked the cleanup of", ", recorded as not confirmed")
    for name in report.envelopes_released:
        print(f"released: envelope {name} of a dead server (its job proved empty and removed)")
    for problem in report.envelope_problems:
        print(f"  problem: {problem}")
    for run_id in report.jarvis_closed:
        print(f"closed jarvis run {run_id} as uncertain (its server is gone)")
    for problem in report.jarvis_problems:
        print(f"  problem: {problem}")
    for name in report.stale_jobs_removed:
        print(f"removed: cgroup job {name} (empty, left by a dead jigcmd, named by no journal)")
    if report.unowned_jobs:
        # Jobs of other state directories, or of servers still alive: not this journal's.
        count = len(report.unowned_jobs)
        names = ", ".join(report.unowned_jobs[:3]) + (" …" if count > 3 else "")
        jobs = "cgroup job" + ("s" if count != 1 else "")
        print(
            f"left alone: {count} {jobs} no row of this journal names ({names}): another "
            "state directory's or a live server's, not this recovery's business"
        )
    acted = (
        report.closed,
        report.rechecked,
        report.envelopes_released,
        report.envelope_problems,
        report.jarvis_closed,
        report.jarvis_problems,
        report.stale_jobs_removed,
    )
    if not any(acted):
        print("nothing to recover")
    _print_tidied(report)


def _print_run(run: RecoveredRun, did: str, how: str) -> None:
    outcome = "cleanup complete" if run.cleanup_complete else "CLEANUP FAILED"
    caller = f"run {run.root_run}" if run.root_run else "recorded before run ids"
    print(f"{did} {run.operation_id} ({caller}; envelope {run.run_id}){how}: {outcome}")
    for problem in run.problems:
        print(f"  problem: {problem}")


def _print_tidied(report: RecoveryReport) -> None:
    """The host-wide tidying of the pass: no run of this state directory's, so it is said
    apart from "nothing to recover" (another state directory's zygote may have left them)."""
    if report.leases_removed:
        files = "file" + ("s" if report.leases_removed != 1 else "")
        print(
            f"tidied: {report.leases_removed} host id lease {files} no process held "
            f"({DIRECTORY}, host-wide)"
        )
    for problem in report.lease_problems:
        print(f"left in place: host id lease: {problem}")
