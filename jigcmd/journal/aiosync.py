"""fdatasync without waiting for it: Linux AIO's `IOCB_CMD_FDSYNC`, completed through an eventfd.

A run's evidence is made durable while the server goes on with the run's end (the release's
report, the final statement), and the answer waits for the sync only then (docs/performance.md,
the thirteenth round of #26). The kernel runs the sync in a worker of its own (Linux 4.18 and
later) and posts its completion to the context's ring, which makes the submission's own
eventfd readable: one descriptor per sync, because anyio lets one task wait on a descriptor.

No thread: a worker thread's hop cost ~0.12 ms of CPU here, and after the sync it needs the
GIL again while the loop signs the final statement. Where the kernel refuses (no AIO, an
architecture without a table below, a file whose filesystem cannot sync through AIO),
`AioSync.open` gives None or `submit` raises `OSError`, and the caller syncs in place.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import threading
import weakref
from collections.abc import Callable

from jigcmd.fdwait import readable

__all__ = ["AioSync", "PendingSync"]

_NUMBERS = {
    "x86_64": {"io_setup": 206, "io_destroy": 207, "io_getevents": 208, "io_submit": 209},
    "aarch64": {"io_setup": 0, "io_destroy": 1, "io_submit": 2, "io_getevents": 4},
}.get(os.uname().machine)
_IOCB_CMD_FDSYNC = 3
_IOCB_FLAG_RESFD = 1
# Syncs in flight at once in one process: one per call that is ending; more wait in place.
_DEPTH = 64

_libc = ctypes.CDLL(None, use_errno=True)


def _syscall(*argtypes: type) -> Callable[..., int]:
    """syscall(2) typed for one call's arguments (its number first): no int truncated."""
    return ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, *argtypes, use_errno=True)(
        ("syscall", _libc)
    )


_io_setup = _syscall(ctypes.c_uint, ctypes.POINTER(ctypes.c_ulong))
_io_submit = _syscall(ctypes.c_ulong, ctypes.c_long, ctypes.c_void_p)
_io_getevents = _syscall(
    ctypes.c_ulong, ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p
)
_io_destroy = _syscall(ctypes.c_ulong)


class _Iocb(ctypes.Structure):
    """struct iocb (linux/aio_abi.h), little-endian field order."""

    _fields_ = [
        ("data", ctypes.c_uint64),
        ("key", ctypes.c_uint32),
        ("rw_flags", ctypes.c_int32),
        ("opcode", ctypes.c_uint16),
        ("reqprio", ctypes.c_int16),
        ("fildes", ctypes.c_uint32),
        ("buf", ctypes.c_uint64),
        ("nbytes", ctypes.c_uint64),
        ("offset", ctypes.c_int64),
        ("reserved2", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("resfd", ctypes.c_uint32),
    ]


class _Event(ctypes.Structure):
    """struct io_event."""

    _fields_ = [
        ("data", ctypes.c_uint64),
        ("obj", ctypes.c_uint64),
        ("res", ctypes.c_int64),
        ("res2", ctypes.c_int64),
    ]


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class PendingSync:
    """One sync in flight; `fileno()` turns readable once it completed.

    Its eventfd is closed by `close()` (or when it is dropped), never by a collection: a task
    may still be waiting on it in the event loop's selector.
    """

    def __init__(self, owner: AioSync, fd: int, eventfd: int) -> None:
        self._owner = owner
        self._fd = fd
        self._eventfd = eventfd
        self._closer = weakref.finalize(self, os.close, eventfd)
        # 0 once synced, else the errno; None while in flight.
        self.result: int | None = None

    def fileno(self) -> int:
        """The eventfd to wait on (readable once the sync completed)."""
        return self._eventfd

    def done(self) -> bool:
        """Whether the sync completed, either way; collects completions, never blocks."""
        if self.result is None:
            self._owner.collect()
        return self.result is not None

    def wait(self) -> None:
        """Block until the sync completed."""
        while not self.done():
            readable(self._eventfd, None)

    def close(self) -> None:
        """Let the eventfd go (idempotent); the sync itself goes on if still in flight."""
        self._closer()

    def _complete(self, res: int) -> None:
        self.result = -res if res < 0 else 0
        os.close(self._fd)


class AioSync:
    """One AIO context: `submit` a descriptor's fdatasync, `collect` what completed.

    `failed(errno)` is called for every sync that fails, whoever collects it.
    """

    def __init__(self, context: int, failed: Callable[[int], None]) -> None:
        self._context = context
        self._failed = failed
        self._tokens = itertools.count(1)
        self._pending: dict[int, PendingSync] = {}
        # Submissions come from the loop, collections from any thread that looks.
        self._lock = threading.Lock()
        self._events = (_Event * _DEPTH)()
        self._zero = _Timespec(0, 0)
        self._pid = os.getpid()

    @classmethod
    def open(cls, failed: Callable[[int], None]) -> AioSync | None:
        """A context, or None where this kernel or architecture has no AIO to give."""
        if _NUMBERS is None:
            return None
        context = ctypes.c_ulong(0)
        if _io_setup(_NUMBERS["io_setup"], _DEPTH, ctypes.byref(context)) != 0:
            return None  # ENOSYS, EPERM (a filter), EAGAIN (fs.aio-max-nr reached)
        return cls(context.value, failed)

    def submit(self, fd: int) -> PendingSync:
        """Start syncing `fd`'s data; from here on the sync owns (and closes) `fd`.

        Raises OSError, and `fd` stays the caller's, when the kernel refuses: EINVAL for a
        file whose filesystem cannot sync through AIO, EAGAIN when the context is full.
        """
        assert _NUMBERS is not None
        with self._lock:
            if len(self._pending) >= _DEPTH:
                raise OSError(errno.EAGAIN, "too many journal syncs in flight")
            eventfd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            token = next(self._tokens)
            iocb = _Iocb(
                data=token,
                opcode=_IOCB_CMD_FDSYNC,
                fildes=fd,
                flags=_IOCB_FLAG_RESFD,
                resfd=eventfd,
            )
            batch = (ctypes.c_void_p * 1)(ctypes.addressof(iocb))
            if _io_submit(_NUMBERS["io_submit"], self._context, 1, batch) != 1:
                failure = ctypes.get_errno()
                os.close(eventfd)
                raise OSError(failure, f"io_submit: {os.strerror(failure)}")
            pending = PendingSync(self, fd, eventfd)
            self._pending[token] = pending
            return pending

    def collect(self, *, block: bool = False) -> None:
        """Complete every sync the ring holds; with `block`, wait for at least one first."""
        assert _NUMBERS is not None
        with self._lock:
            if not self._pending:
                return
            count = _io_getevents(
                _NUMBERS["io_getevents"],
                self._context,
                1 if block else 0,
                _DEPTH,
                self._events,
                None if block else ctypes.byref(self._zero),
            )
            failures = []
            for event in self._events[: max(count, 0)]:
                pending = self._pending.pop(event.data, None)
                if pending is not None:
                    # Completed under the lock: a waiter in another thread never finds its
                    # sync gone from the ring and not yet marked done.
                    pending._complete(event.res)
                    if pending.result:
                        failures.append(pending.result)
        for failure in failures:
            self._failed(failure)

    def in_flight(self) -> bool:
        """Whether a sync has not been collected yet."""
        return bool(self._pending)

    def close(self) -> None:
        """Wait for every sync in flight, then let the context go."""
        if os.getpid() != self._pid:
            return  # a forked child's copy: the context is its parent's
        assert _NUMBERS is not None
        while self._pending:
            self.collect(block=True)
        _io_destroy(_NUMBERS["io_destroy"], self._context)
