"""How many connections jarvis holds, and which one gives way when a new one arrives.

Any local process can connect to jarvis, so every connection it holds is bounded:

- at most `capacity()` are open at once: the configured cap, and never more than the file
  descriptor limit leaves after a reserve for the journal, the envelopes and their runs
  (read at every accept, so a limit lowered from outside is honoured at once);
- a connection that waits for a request head (just accepted, or idle after an answer) gives
  way: when the cap is reached, the one that has waited longest is closed to make room
  (those that never presented the token before those that did), once it has waited at
  least `min_wait_s` (a fair chance to send its head: in a burst of callers the head of a
  just-accepted one may simply not have been read yet);
- a connection whose client does not take its answer (stalled writing: what it was sent
  fills the socket and more waits in jarvis, or an idle one whose last answer the kernel
  still holds unacknowledged) gives way too, after the unauthenticated waiting ones and
  before the authorized idle ones, once it has been stalled `min_wait_s`; while any
  unauthenticated connection waits, none of these gives way (one too young to go makes the
  newcomer wait instead);
- while no connection may give way the newcomers wait in the listen backlog, and only when
  that lasts (every held connection busy with a request) is one refused with 503.

So connections that never finish their headers, or never read their answers, cannot keep an
authorized caller out: each new connection pushes the oldest of them out, and the header and
write deadlines end the rest.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from jigcmd.jarvis.headsize import MAX_HEAD_BYTES

__all__ = ["DEFAULT_LIMITS", "ConnectionLimits", "Connections", "fd_capacity"]

C = TypeVar("C")
State = Literal["waiting", "stalled", "authorized-waiting", "busy"]


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds on every connection jarvis holds."""

    # Open connections at most (further bounded by the file descriptor limit).
    max_connections: int = 256
    # From accept (or the end of the previous answer) until the request head is complete.
    header_timeout_s: float = 5.0
    # From the complete head until the last byte of the body (at most MAX_BODY_BYTES).
    body_timeout_s: float = 10.0
    # From the moment an answer no longer fits in the socket until the client took all of it
    # (a deadline: reading a byte now and then does not extend it).
    write_timeout_s: float = 10.0
    # A request head's size at most, complete or not (h11's own bound on an incomplete one).
    max_head_bytes: int = MAX_HEAD_BYTES
    # File descriptors kept free for everything else: the journal, envelopes, their runs, and
    # the connections that gave way while their 503 waits to be read (`max_leaving`).
    reserved_fds: int = 64
    # How long a waiting connection is left alone before it may give way to a newcomer.
    min_wait_s: float = 0.5
    # How long newcomers wait in the backlog for room before one is refused with 503.
    refuse_after_s: float = 1.0
    # A connection that gave way keeps its socket open this long at most, its 503 written and
    # no FIN yet, so that a client still about to send its request sends it and reads the 503
    # (a client that sees the end of stream first fails to write, not knowing why) ...
    leaving_linger_s: float = 1.0
    # ... and at most this many do so at once (the oldest is closed first): they live off the
    # descriptor reserve, not off the cap.
    max_leaving: int = 16


DEFAULT_LIMITS = ConnectionLimits()


def fd_capacity(limits: ConnectionLimits) -> int:
    """The connection cap now: the configured one, within the current RLIMIT_NOFILE."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limits.max_connections
    return max(1, min(limits.max_connections, soft - limits.reserved_fds))


class Connections(Generic[C]):
    """The open connections by state, each state in the order it was entered."""

    def __init__(
        self,
        capacity: Callable[[], int],
        min_wait_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._capacity = capacity
        self._min_wait = min_wait_s
        self._clock = clock
        # Since when each connection waits; dicts keep insertion order (the first waited longest).
        self._waiting: dict[C, float] = {}
        self._authorized: dict[C, float] = {}
        self._stalled: dict[C, float] = {}
        self._busy: dict[C, None] = {}

    def __len__(self) -> int:
        return len(self._waiting) + len(self._stalled) + len(self._authorized) + len(self._busy)

    def capacity(self) -> int:
        """The cap now."""
        return self._capacity()

    def has_room(self) -> bool:
        """Whether a newcomer may be held now (room left, or a connection may give way)."""
        return len(self) < self.capacity() or self._giving_way() is not None

    def admit(self, *, force: bool = False) -> tuple[bool, C | None]:
        """Whether a new connection may be held, and the waiting one to close for it.

        With `force` (no descriptor is left, whatever the count) the longest waiting one
        gives way, however briefly it has waited.
        """
        if not force and len(self) < self.capacity():
            return True, None
        oldest = self._giving_way(ignore_min_wait=force)
        if oldest is None:
            return False, None
        self.remove(oldest)
        return True, oldest

    def _giving_way(self, *, ignore_min_wait: bool = False) -> C | None:
        """The connection that gives way to a newcomer, if one may.

        Unauthenticated ones first, then those that do not take their answers (their clients
        lose what they did not read), then idle authorized ones (theirs lose nothing, but
        they are the well-behaved callers' connections).
        """
        now = self._clock()
        for queue in (self._waiting, self._stalled, self._authorized):
            if queue:
                oldest, since = next(iter(queue.items()))
                if ignore_min_wait or now - since >= self._min_wait:
                    return oldest
                if queue is self._waiting:
                    # Its turn comes first: an unauthenticated waiter too young to go makes
                    # the newcomer wait, never pushes out an authorized caller's connection.
                    return None
        return None

    def waiting(self, connection: C, *, authorized: bool) -> None:
        """`connection` waits for a request head (it joins the end of its queue)."""
        self.remove(connection)
        (self._authorized if authorized else self._waiting)[connection] = self._clock()

    def stalled(self, connection: C) -> None:
        """`connection`'s answer waits for its client to read: it may give way, whatever its
        request's state (it joins the end of its queue)."""
        self.remove(connection)
        self._stalled[connection] = self._clock()

    def busy(self, connection: C) -> None:
        """`connection` has a request in progress: it never gives way to a newcomer."""
        self.remove(connection)
        self._busy[connection] = None

    def remove(self, connection: C) -> None:
        """Forget `connection` (closed or given way); a no-op for one not held."""
        self._waiting.pop(connection, None)
        self._authorized.pop(connection, None)
        self._stalled.pop(connection, None)
        self._busy.pop(connection, None)

    def counts(self) -> dict[State, int]:
        """How many connections are in each state."""
        return {
            "waiting": len(self._waiting),
            "stalled": len(self._stalled),
            "authorized-waiting": len(self._authorized),
            "busy": len(self._busy),
        }
