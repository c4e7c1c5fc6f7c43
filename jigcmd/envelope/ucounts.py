"""The envelope's bounds on the counts the kernel charges up the user-namespace chain.

Some per-user counts are not the cgroup's: inotify instances and watches, fanotify groups and
marks, namespaces (`/proc/sys/user/max_*`, per user namespace since Linux 4.9) and, since
5.14, the bytes of POSIX message queues and the queued signals (`RLIMIT_MSGQUEUE`,
`RLIMIT_SIGPENDING`). The kernel charges each one to the caller's uid in its own user namespace
*and* to the namespace's creator in every ancestor: an envelope's candidate spends host root's
budget (measured before 2026-12-06: 128 inotify instances held made host root's own
`inotify_init1` fail with EMFILE for the whole run, 192,540 watches its `inotify_add_watch`
with ENOSPC, 9 message queues its `mq_open` with EMFILE). Bounded in the envelope's own
namespace, the candidate is refused at these numbers and its charge to the host is at most
them.

`bound_namespace()` writes the `/proc/sys/user` limits of the caller's user namespace: pid 1
calls it as root of that namespace, while it still holds `CAP_SYS_RESOURCE` there (the kernel
lets only that capability write them; the candidate, holding none, can only read them) and
while a procfs is still mounted whose `sys` it can reach (the host's, before the pivot: the
envelope's own `/proc` is `subset=pid`). Which procfs does not matter: `/proc/sys/user` shows
the reader's user namespace. The rlimits are set with the others (privileges.py), soft and
hard alike.
"""

from __future__ import annotations

import os
import resource

__all__ = ["NAMESPACE_LIMITS", "RLIMITS", "bound_namespace"]

# Bun's own use, measured with strace (Bun 1.4.2): `bun test` and `bun run` make no inotify
# instance; `fs.watch` makes one per process, shared by every watcher of that process, and a
# watch per watched file or per directory of a recursive watch. The host's defaults here are
# 128 instances and 192,540 watches per user, shared by every envelope and by host root itself.
NAMESPACE_LIMITS: tuple[tuple[str, int], ...] = (
    ("max_inotify_instances", 8),
    ("max_inotify_watches", 1024),
    # Unprivileged fanotify (5.13) is charged the same way; Bun never uses it.
    ("max_fanotify_groups", 0),
    ("max_fanotify_marks", 0),
    # Namespaces are charged the same way, but the candidate makes none: the seccomp filter
    # refuses unshare, setns, clone's namespace flags and clone3, so no count is written for
    # them (eight more writes in every pid 1 for what the filter already refuses).
)

# Checked against the caller's count in its own namespace (all of the envelope is uid 0
# there: one count per envelope). Bun makes no message queue and queues no real-time
# signal (strace: no mq_open, rt_sigqueueinfo; its thread suspension sends SIGPWR, a standard
# signal, which the kernel delivers even over the limit, without its siginfo).
RLIMITS: tuple[tuple[int, int], ...] = (
    # 0: every mq_open with O_CREAT fails with EMFILE (a queue costs at least its header).
    (resource.RLIMIT_MSGQUEUE, 0),
    (resource.RLIMIT_SIGPENDING, 256),
)

_USER_SYSCTLS = "/proc/sys/user/"


def bound_namespace() -> None:
    """Write `NAMESPACE_LIMITS` into the caller's user namespace; OSError naming a file."""
    for name, value in NAMESPACE_LIMITS:
        path = _USER_SYSCTLS + name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            # An older kernel has no such count (time namespaces 5.6, fanotify 5.13): nothing
            # of that kind is charged up the chain there.
            continue
        try:
            os.write(fd, b"%d\n" % value)
        except OSError as exc:
            raise OSError(exc.errno, f"{exc.strerror}: {path}") from None
        finally:
            os.close(fd)
