"""When the zygote prepares its next envelope: the pool's refill policy, without I/O.

Preparing an envelope costs ~3.5 ms of CPU across the zygote, the spawner and the new pid 1
(docs/envelope.md). On two cores it slows whatever it runs beside, so the policy picks the
moment that costs the caller least:

- **Never between a launch and its candidate's start.** That window is the request's own
  path (the go, the server's durable begin, the gate); a preparation there competes with it
  directly. The refill waits until the candidate has started.
- **While runs are in flight, one ready envelope is enough**: the next launch never waits for
  a preparation, and the rest waits until no run is in flight.
- **After a run, the answer first.** While one envelope is still ready, the refill waits until
  the server says it wrote that call's answer (`Answered`), so that it does not compete with
  the server's last steps; a caller that never says so gets it `refill_after` after the run's
  end.
- **A caller calling back to back gets its next call first.** When the last launch came within
  `BACK_TO_BACK_S` of the answer before it, the next call is likely already on its way: the
  refill after the next answer waits that long for it. If it comes, it takes the ready
  envelope and the refill runs beside its candidate instead (the rule above); if not, the
  refill goes ahead once the caller is quiet. A caller with gaps between its calls is
  refilled at once, in the gap, as before.
- With no envelope ready, the refill starts as soon as no launch is starting: a launch never
  waits for a hint.

Measured in docs/envelope.md, "The refill and a caller calling back to back".
"""

from __future__ import annotations

__all__ = ["BACK_TO_BACK_S", "RETRY_PREPARE_S", "Refill"]

# A launch this soon after the previous answer marks a caller calling back to back: from its
# reading one answer to its next launch reaching the zygote takes ~1-2.5 ms here.
BACK_TO_BACK_S = 0.003
# After a preparation ahead of any request failed, the next is tried this much later.
RETRY_PREPARE_S = 1.0


class Refill:
    """The refill's state: what it waits for, and until when."""

    __slots__ = (
        "answered_at",
        "back_to_back",
        "pool_size",
        "quiet_until",
        "refill_after",
        "refill_at",
        "retry_at",
        "unanswered",
    )

    def __init__(self, refill_after: float) -> None:
        self.pool_size = 0
        self.refill_after = refill_after
        # Runs released whose answer the server has not said it wrote, and when the refill
        # they hold back goes ahead anyway.
        self.unanswered = 0
        self.refill_at = 0.0
        # When the server last said it answered, whether the launch after the answer before
        # came back to back, and until when the refill waits for the next call.
        self.answered_at = float("-inf")
        self.back_to_back = False
        self.quiet_until = 0.0
        self.retry_at = 0.0

    def warmed(self, pool_size: int, refill_after: float) -> None:
        """The server asked for `pool_size` envelopes of a (new) shape."""
        self.pool_size = pool_size
        self.refill_after = refill_after
        self.retry_at = 0.0

    def launched(self, now: float) -> None:
        """A launch arrived: whether it came back to back after the last answer."""
        self.back_to_back = now - self.answered_at < BACK_TO_BACK_S

    def released(self, now: float) -> None:
        """A launched envelope was released: its answer comes next."""
        self.unanswered += 1
        self.refill_at = now + self.refill_after

    def answered(self, now: float) -> None:
        """The server wrote an answer (a late or spare one holds nothing back)."""
        self.unanswered = max(0, self.unanswered - 1)
        self.answered_at = now
        if self.back_to_back:
            self.quiet_until = now + BACK_TO_BACK_S

    def failed(self, now: float) -> None:
        """A preparation ahead of any request failed: try again later."""
        self.retry_at = now + RETRY_PREPARE_S

    def timers(self) -> tuple[float, float, float]:
        """When the answer of `wanted` may change on its own (past ones are ignored)."""
        return (self.retry_at, self.refill_at, self.quiet_until)

    def wanted(self, now: float, *, ready: int, running: int, starting: bool) -> bool:
        """Whether to start a preparation now (the caller runs one at a time).

        `ready`: envelopes prepared and not launched; `running`: launched and not released;
        `starting`: one of those has not started its candidate yet.
        """
        if starting or now < self.retry_at:
            return False
        target = min(self.pool_size, 1) if running else self.pool_size
        if ready >= target:
            return False
        return not ready or not self._held_back(now)

    def _held_back(self, now: float) -> bool:
        """While one envelope is ready: whether an answer, or the next call, comes first."""
        if self.unanswered:
            if now < self.refill_at:
                return True
            self.unanswered = 0  # the fallback: a caller that never says it answered
        return now < self.quiet_until
