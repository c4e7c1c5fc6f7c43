"""One run's socket to the server: the envelope's reports, a cancel, and a lost server.

The server records every outcome it is told. When it went away mid-run (its end of the run
socket closed, or a report could not be delivered), nobody else will: the envelope closes the
journal row itself, with the cleanup it proved (`ledger.Owner.lost`).
"""

from __future__ import annotations

import select
import socket
from typing import TYPE_CHECKING

from jigcmd.envelope import cgroups
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.ledger import Owner
from jigcmd.envelope.marshalcodec import MARSHAL
from jigcmd.envelope.messages import (
    Cancel,
    Ended,
    Failed,
    Finished,
    Started,
    recv_message,
    send_message,
)

if TYPE_CHECKING:
    # For the types alone: evidence's msgspec stays out of the zygote's image.
    from jigcmd.envelope.scratchfile import ScratchRead
    from jigcmd.evidence import StopReason

    # How the candidate ended: exit code, signal name, why it stopped.
    Ending = tuple[int | None, str | None, StopReason]

__all__ = ["RunChannel", "finished", "init_lost"]


class RunChannel:
    """The run socket of one launch, and the journal row it answers to."""

    def __init__(self, fd: int, owner: Owner | None) -> None:
        self.sock = socket.socket(fileno=fd)
        self.owner = owner
        # The server closed the run socket mid-run: nobody will record the outcome.
        self.server_lost = False

    def fileno(self) -> int:
        """The socket's descriptor (the loop watches it while the candidate runs)."""
        return self.sock.fileno()

    def peer_gone(self) -> bool:
        """Whether the server closed its end (a pending message is not EOF)."""
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN | select.POLLRDHUP)
        for _fd, events in poller.poll(0):
            if events & (select.POLLHUP | select.POLLRDHUP):
                return True
            if events & select.POLLIN:
                try:
                    return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    return False
                except OSError:
                    return True
        return False

    def stop_wanted(self) -> StopReason | None:
        """The socket turned readable: the stop that asks for (a cancel and its reason, or
        the server going away: `cancelled`), or None."""
        try:
            message = recv_message(self.sock, codec=MARSHAL)
        except (OSError, EOFError, ValueError):
            message = None
        self.server_lost = message is None
        if message is None:
            return "cancelled"
        return message[0].reason if isinstance(message[0], Cancel) else None

    def send(self, message: Started | Ended | Finished | Failed) -> bool:
        """Report to the server; False when it is gone."""
        try:
            send_message(self.sock, message, codec=MARSHAL)
        except OSError:
            return False
        return True

    def ended(self, ending: Ending) -> None:
        """The candidate ended: the server completes the output while the cleanup runs."""
        if not self.server_lost:
            self.send(Ended(exit_code=ending[0], signal=ending[1], stop_reason=ending[2]))

    def finished(self, message: Finished) -> None:
        """Everything is released (or what is not is named): the run's last report."""
        ok, problems = message.cleanup_complete, message.cleanup_problems
        if self.server_lost and self.owner is not None:
            # Nobody will record this run's outcome: the server is gone, and with it the
            # output. Record what is proved: fenced, cleanup as confirmed, no result.
            self.owner.lost(ok, problems)
        if not self.send(message) and self.owner is not None and not self.server_lost:
            # The server vanished just as the run ended; nobody else can record it.
            self.owner.lost(ok, problems)

    def failed(self, exc: StepError, ok: bool, problems: tuple[str, ...]) -> None:
        """A step failed and the envelope is released: say which, and what is left."""
        if self.owner is not None and (exc.step == "server" or self.server_lost):
            self.owner.lost(ok, problems)
        self.send(
            Failed(step=exc.step, error=exc.error, cleanup_complete=ok, cleanup_problems=problems)
        )

    def close(self) -> None:
        """Close the socket (the server sees EOF after the last report)."""
        self.sock.close()


def finished(
    ending: Ending,
    *,
    wall_ms: float,
    stats: cgroups.CgroupStats | None,
    cpu_at_go: int | None,
    cleanup: tuple[bool, tuple[str, ...]],
    scratch: ScratchRead | None,
) -> Finished:
    """The `Finished` report of a run: how it ended, what it used since the go, the cleanup."""
    stats = stats or cgroups.CgroupStats(None, None, False, False)
    cpu_ms = None
    if stats.cpu_usage_ns is not None:
        cpu_ms = (stats.cpu_usage_ns - (cpu_at_go or 0)) / 1e6
    return Finished(
        exit_code=ending[0],
        signal=ending[1],
        stop_reason=ending[2],
        wall_ms=wall_ms,
        cpu_ms=cpu_ms,
        peak_memory_bytes=stats.peak_memory_bytes,
        oom_killed=stats.oom_killed,
        pids_limit_hit=stats.pids_limit_hit,
        cleanup_complete=cleanup[0],
        cleanup_problems=cleanup[1],
        scratch_file=scratch,
    )


def init_lost(started: str, oom_killed: bool | None, memory_limit: int) -> str:
    """Why pid 1 died without reporting the candidate's end, as far as the job's OOM kill
    count tells: `oom_killed` True (some process of the job was OOM-killed), False (none
    was: killed from outside), None (the count could not be read: the cause is unknown).

    The count says an OOM killer killed in the job at some time, not whom: a child the
    candidate let be OOM-killed earlier counts the same, so pid 1 is named only as maybe
    killed. The OOM kill is not turned into the memory-limit outcome (evidence with
    `oomKilled`): that evidence says how the candidate ended as pid 1 saw it, and nobody saw
    it. A SIGKILL would be invented (the candidate may have ended on its own just before), and
    a run that "exited" with neither code nor signal would be evidence of nothing. Where the
    candidate's OOM score is not pinned, the candidate can bring this about (docs/security.md).
    """
    lost = "pid 1 of the envelope died without reporting how the candidate ended"
    if oom_killed is None:
        return (
            f"{lost} (cause unknown: the job's OOM kill count could not be read); {started}, "
            "its outcome is unknown"
        )
    if not oom_killed:
        return f"{lost} (killed from outside); {started}, its outcome is unknown"
    limit = (
        f"{memory_limit >> 20} MiB" if memory_limit % (1 << 20) == 0 else f"{memory_limit} bytes"
    )
    return (
        f"{lost}: the kernel's OOM killer killed at least one process of the job (memory "
        f"limit {limit}) and may have killed pid 1; {started}, its own exit status is unknown"
    )
