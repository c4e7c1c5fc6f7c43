"""Pid 1's status lines are read by their exact shape; signal numbers get their Linux names."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from jigcmd.envelope.failure import StepError
from jigcmd.envelope.lifecycle import Envelope
from jigcmd.envelope.states import State
from jigcmd.envelope.statusline import Status, parse
from jigcmd.signames import signal_name


def test_each_line_pid_1_writes_is_read_with_its_number_and_moment() -> None:
    """`ready`, `exit`, `signal` carry a number and a moment in nanoseconds; the others none."""
    assert parse("unshared") == Status("unshared")
    assert parse("prepared") == Status("prepared")
    assert parse("ready 17 2500000000") == Status("ready", 17, 2.5)
    assert parse("exit 0 1000000000") == Status("exit", 0, 1.0)
    assert parse("signal 40 3000000000") == Status("signal", 40, 3.0)


@pytest.mark.parametrize(
    "line",
    [
        "ready 17",  # the moment missing: it would be read as the pid, a negative setup
        "exit 0",
        "signal 9",
        "exit 0 12 junk",
        "ready 17 12.5",
        "exit +1 5",
        "exit 1_0 5",
        "exit  0 5",
        "exit 0 5 ",
        "exit 256 5",
        "exit -1 5",
        "ready 0 5",
        "signal 0 5",
        "signal 65 5",
        "prepared 5",
        "unshared now",
        "preparedX",
        "ready",
        "",
        "bye 1 2",
    ],
)
def test_a_line_of_any_other_shape_is_refused(line: str) -> None:
    """A missing, extra or non-decimal field, an exit code or signal out of range: ValueError."""
    with pytest.raises(ValueError, match="malformed status line"):
        parse(line)


class _Run:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: object) -> None:
        self.sent.append(message)

    def ended(self, ending: object) -> None:
        self.sent.append(ending)


def _envelope(state: State) -> Envelope:
    """An envelope in `state`, its run's reports recorded (no kernel resources)."""
    envelope = object.__new__(Envelope)
    envelope.state, envelope.launched, envelope.started = state, 1000.0, 1000.5
    envelope.ending = (None, "SIGKILL", "deadline")
    envelope.run = _Run()  # type: ignore[assignment]
    return envelope


@pytest.mark.parametrize(
    ("state", "line"),
    [
        (State.STAGED, "ready 17"),
        (State.RUNNING, "exit 0"),
        (State.RUNNING, "signal 9"),
        (State.FENCING, "exit 0 junk"),
        (State.FENCING, "signal 9"),
        (State.BUILDING, "prepared 5"),
    ],
)
def test_the_envelope_fails_closed_on_a_malformed_line_never_timing_it(
    state: State, line: str
) -> None:
    """No negative setup or wall time from a line without its moment: the step fails."""
    envelope = _envelope(state)
    with pytest.raises(StepError, match="malformed status line"):
        envelope._line(line)
    assert envelope.run is not None and envelope.run.sent == []  # type: ignore[attr-defined]
    assert (envelope.started, envelope.ending) == (1000.5, (None, "SIGKILL", "deadline"))


def test_a_signal_after_a_stop_is_named_too() -> None:
    """Signal 40 while fencing a deadline: the candidate's own end, named, is the evidence."""
    envelope = _envelope(State.FENCING)
    envelope._line("signal 40 2000000000000")
    assert envelope.ending == (None, "SIGRTMIN+6", "exited")


def test_every_signal_is_named_as_bash_kill_l_names_it() -> None:
    """1-64 but 32 and 33 (glibc's own, unnamed by bash) as `kill -l N`; those two SIG32, SIG33."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to compare with")
    numbers = [n for n in range(1, 65) if n not in (32, 33)]
    listed = subprocess.run(
        [bash, "-c", 'for n in "$@"; do kill -l "$n"; done', "bash", *map(str, numbers)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [signal_name(n) for n in numbers] == [f"SIG{name}" for name in listed]
    assert (signal_name(32), signal_name(33)) == ("SIG32", "SIG33")
    for number in (0, 65, -9):
        with pytest.raises(ValueError, match="no Linux signal"):
            signal_name(number)
