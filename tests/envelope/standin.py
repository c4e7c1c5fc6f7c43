"""A forked stand-in supervisor, for tests that change what only a supervisor may change."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

from jigcmd.envelope import syscalls as sc

__all__ = ["in_stand_in"]

_PR_SET_CHILD_SUBREAPER = 36


def in_stand_in(body: Callable[[int], None]) -> bytes:
    """Run `body(report_fd)` in a forked stand-in supervisor; what it and its children wrote.

    The stand-in is a subreaper like a real supervisor, so the test process itself never
    changes namespaces, groups or subreaper status. A failure of the stand-in shows in the
    test's output and fails the test.
    """
    report_r, report_w = os.pipe()
    stand_in = os.fork()
    if stand_in == 0:
        code = 1
        try:
            os.close(report_r)
            sc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
            body(report_w)
            code = 0
        except BaseException:  # noqa: BLE001 - a forked stand-in reports and exits, never returns
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(report_w)
    data = b""
    while chunk := os.read(report_r, 4096):
        data += chunk
    os.close(report_r)
    assert os.waitstatus_to_exitcode(os.waitpid(stand_in, 0)[1]) == 0
    return data
