"""The zygote: a pre-started, single-threaded fork server that turns `Launch` messages into supervisors.

Why a separate process: the anyio server is multi-threaded (worker threads), and forking a
multithreaded Python then running Python before exec can deadlock; starting a fresh
interpreter per run costs ~30 ms. The zygote is started once, with a minimal environment
(so `/proc/<pid>/environ` of anything forked from it holds no credentials), imports
everything a run needs up front, and forks one supervisor per run (~1 ms).

Run as `python -m jigcmd.envelope.zygote FD` where FD is a connected unix stream socket.
When the server goes away (EOF), the zygote exits; running supervisors are not its
children's keepers — each fences its own run when its run socket closes.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

from jigcmd.envelope import cgroups, netns, privileges, seccomp
from jigcmd.envelope.supervisor import supervise
from jigcmd.envelope.wire import Launch, recv_message

__all__ = ["main"]

_FDS_PER_LAUNCH = 4


def main(argv: list[str]) -> int:
    """Serve launches on the socket whose fd is `argv[0]` until EOF."""
    control = socket.socket(fileno=int(argv[0]))
    control.set_inheritable(False)
    # Supervisors are reaped automatically; each supervisor resets this for its own children.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    backend = cgroups.detect()
    seccomp.build_filter()
    privileges.prepare()
    netns.preload()
    while True:
        try:
            received = recv_message(control, max_fds=_FDS_PER_LAUNCH)
        except (OSError, EOFError, ValueError):
            return 1
        if received is None:
            return 0
        message, fds = received
        if not isinstance(message, Launch) or len(fds) != _FDS_PER_LAUNCH:
            for fd in fds:
                os.close(fd)
            continue
        stdin_r, stdout_w, stderr_w, run_fd = fds
        pid = os.fork()
        if pid == 0:
            control.close()
            run_sock = socket.socket(fileno=run_fd)
            supervise(
                message.run_id, message.plan, (stdin_r, stdout_w, stderr_w), run_sock, backend
            )
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
