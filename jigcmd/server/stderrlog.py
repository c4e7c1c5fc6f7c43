"""Logging to stderr that never blocks the caller: bounded, rate-limited, written by a thread.

A host that does not drain our stderr must never stall the event loop (not even `ping`
answers then). So a log call only formats the record, cuts it to `MAX_RECORD_CHARS`, takes a
token from a bucket (`BURST` records at once, `PER_SECOND` sustained) and queues it, at most
`MAX_QUEUED_BYTES` in all; a daemon thread does the blocking writes. Whatever does not fit
is dropped and counted, and the count is written before the next record that gets through.
`say` puts a front's own lines (`jigcmd serve: run id …`) on the same queue, as they are.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = [
    "BURST",
    "MAX_QUEUED_BYTES",
    "MAX_RECORD_CHARS",
    "PER_SECOND",
    "StderrHandler",
    "install",
    "say",
]

MAX_RECORD_CHARS: Final = 8 * 1024
MAX_QUEUED_BYTES: Final = 256 * 1024
BURST: Final = 50
PER_SECOND: Final = 10.0
_FORMAT: Final = "jigcmd: %(levelname)s %(name)s: %(message)s"


class StderrHandler(logging.Handler):
    """A handler whose `emit` never waits for the file descriptor it writes to."""

    def __init__(self, fd: int = 2, clock: Callable[[], float] = time.monotonic) -> None:
        """Write to `fd`; `clock` refills the rate limit's bucket (a test may freeze it)."""
        super().__init__()
        self._fd = fd
        self._clock = clock
        self._ready = threading.Condition(threading.Lock())
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._dropped = 0
        self._tokens = float(BURST)
        self._refilled = clock()
        self._writer: threading.Thread | None = None
        self._closing = False
        os.register_at_fork(after_in_child=self._forget)

    def emit(self, record: logging.LogRecord) -> None:
        """Queue the record (cut to size) if the rate and the queue allow; else count it."""
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 - a broken record must not reach stderr through handleError
            text = f"jigcmd: unformattable log record from {record.name}"
        self._enqueue(text, limited=True)

    def say(self, line: str) -> None:
        """Queue `line` as it is (no level, no logger name), past the rate limit; never wait."""
        self._enqueue(line, limited=False)

    def _enqueue(self, text: str, *, limited: bool) -> None:
        """Queue `text`, cut to size, if the queue (and if `limited` the rate) allow; else count."""
        if len(text) > MAX_RECORD_CHARS:
            text = f"{text[:MAX_RECORD_CHARS]}… ({len(text) - MAX_RECORD_CHARS:,} more characters)"
        data = (text + "\n").encode("utf-8", "replace")
        with self._ready:
            if self._closing:
                return
            # A front's own lines are few (one at start, one an hour): only the bound holds them.
            if (limited and not self._take_token()) or self._queued + len(data) > MAX_QUEUED_BYTES:
                self._dropped += 1
                return
            if self._dropped:
                notice = f"jigcmd: WARNING {self._dropped} log records dropped (stderr slow)\n"
                self._queue.append(notice.encode())
                self._queued += len(notice)
                self._dropped = 0
            self._queue.append(data)
            self._queued += len(data)
            self._ready.notify_all()
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_forever, name="jigcmd-stderr", daemon=True
                )
                self._writer.start()

    def flush(self, timeout: float = 0.2) -> None:
        """Wait (bounded) for the queue to be written; never longer than `timeout`."""
        deadline = time.monotonic() + timeout
        with self._ready:
            while self._queue and time.monotonic() < deadline:
                self._ready.wait(max(0.0, min(0.05, deadline - time.monotonic())))

    def close(self) -> None:
        """Drop what is queued and let the writer thread end after its current write.

        The descriptor is the caller's: once `stopped` says so, closing it can no longer
        send a late record to whatever file reuses its number.
        """
        with self._ready:
            self._closing = True
            self._queue.clear()
            self._queued = 0
            self._ready.notify_all()
        super().close()

    def stopped(self, timeout: float) -> bool:
        """Wait up to `timeout` for the writer thread to end (True when there is none)."""
        writer = self._writer
        if writer is not None:
            writer.join(timeout)
            return not writer.is_alive()
        return True

    @property
    def dropped(self) -> int:
        """Records dropped since the last notice."""
        with self._ready:
            return self._dropped

    def _take_token(self) -> bool:
        now = self._clock()
        self._tokens = min(float(BURST), self._tokens + (now - self._refilled) * PER_SECOND)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def _is_closing(self) -> bool:
        # A call, not the attribute: `close` sets it from another thread between two reads.
        return self._closing

    def _write_forever(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._is_closing():
                    self._ready.wait()
                if self._is_closing():
                    return
                data = self._queue[0]
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:
                pass  # stderr is gone; logging must never fail the program
            with self._ready:
                if self._is_closing():
                    return
                self._queue.popleft()
                self._queued -= len(data)
                self._ready.notify_all()

    def _forget(self) -> None:
        # A forked child has no writer thread and must not wait on the parent's lock state.
        self._ready = threading.Condition(threading.Lock())
        self._queue = collections.deque()
        self._queued = 0
        self._writer = None


_installed: StderrHandler | None = None


def install(level: int) -> StderrHandler:
    """Make a `StderrHandler` the root logger's only handler, at `level`."""
    global _installed  # noqa: PLW0603 - the one handler per process that `say` shares
    handler = _installed = StderrHandler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def say(line: str) -> None:
    """Put one line on stderr without ever waiting for it: through the installed handler's
    queue (a host that does not drain our stderr, or closed it, must not stall a session)."""
    global _installed  # noqa: PLW0603 - made here when no verb installed one (a library caller)
    if _installed is None:
        _installed = StderrHandler()
    _installed.say(line)
