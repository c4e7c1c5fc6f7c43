"""The spawner's request: the directory the spawner reads, the blueprint only pid 1 reads."""

from __future__ import annotations

import os

from jigcmd.envelope import records
from jigcmd.envelope.spawner import _become_init, _request, _split

_UNIFIED = "/sys/fs/cgroup/unified/jigcmd/jigcmd-0123456789abcdef"


def test_the_spawner_reads_the_directory_and_leaves_the_blueprint_as_bytes() -> None:
    """The head is the born-in directory (None when there is none); the rest is the frame."""
    plain = (("candidate", 256), "0-1", None)
    split = _split(_request(_UNIFIED, plain))
    assert split is not None
    unified, frame = split
    assert unified == _UNIFIED
    assert records.loads(frame) == plain
    without = _split(_request(None, plain))
    assert without is not None
    assert without[0] is None
    assert records.loads(without[1]) == plain


def test_a_request_cut_inside_its_head_is_refused() -> None:
    """A head longer than the request: nothing is cloned for it."""
    data = _request(_UNIFIED, ())
    assert _split(data[: len(_UNIFIED) // 2]) is None
    assert _split(b"") is None


def test_a_blueprint_pid_1_cannot_read_fails_its_preparation_with_the_reason() -> None:
    """In the clone: a `fail blueprint` line on the status pipe, exit status 1, nothing run."""
    status_r, status_w = os.pipe()
    control_ours, control_theirs = os.pipe()
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(status_r)
        _become_init(memoryview(b"\xffnot a frame"), (control_theirs, status_w, go_r), None)
    os.close(status_w)
    line = os.read(status_r, 4096).decode()
    _pid, status = os.waitpid(child, 0)
    for fd in (status_r, control_ours, control_theirs, go_r, go_w):
        os.close(fd)
    assert line.startswith("fail blueprint\tnot a frame"), line
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 1
