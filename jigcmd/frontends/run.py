"""`jigcmd run`: one command, once, through exactly the path the server uses.

The exit status says what happened to the call, never the candidate's own exit code (that is
in the evidence): 0 the command completed, 2 nothing ran because something given was invalid
(usage, Binding, files, request), 3 operational failure (unavailable, envelope incomplete,
uncertain), 4 deadline or cancel. With `--json` stdout carries exactly one JSON object,
`{"evidence", "report", "tests"?, "attestation"}` (`tests`, the per-test results, for a test
command) or `{"error": {code, message, details?}, "evidence"?, "attestation"?}` (a run
stopped by its deadline or a cancel ran: it has both); the error's words are on stderr too.
`attestation` is the run's signed statement: `digest` (of the bundle's bytes), `bundle`
(those bytes: JSON Lines of DSSE envelopes, what `jigcmd verify` reads) and `envelopes` (the
same, parsed).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec

from jigcmd.attest.dsse import attestation_fields
from jigcmd.cancel import CancelSignal
from jigcmd.clock import unix_ms
from jigcmd.command.assembly import STARTUP_ERRORS, FrontSettings, open_service
from jigcmd.command.failures import StoppedRun
from jigcmd.command.projectdir import CandidateError, ProjectFiles, read_project
from jigcmd.command.service import CommandService
from jigcmd.contract import MAX_STDIN_BYTES
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport
from jigcmd.frontends.runnotes import run_notes
from jigcmd.frontends.runtext import one_line, readable
from jigcmd.policy.binding import BindingError
from jigcmd.policy.candidate import Problem
from jigcmd.policy.planner import CEILING_SECONDS
from jigcmd.protocol.commands import OutputEnds, RunResult
from jigcmd.protocol.mcp_view import TestsView, full_tests
from jigcmd.server.stopsignals import watch_stop_signals

__all__ = [
    "RUN_OPERATION_ID",
    "CandidateError",
    "build_request",
    "candidate_files",
    "note_unused_pipe",
    "read_candidate",
    "read_files",
    "refusal",
    "run",
    "write_failure",
    "write_notes",
]

_EXIT_EVIDENCE, _EXIT_INVALID, _EXIT_FAILED, _EXIT_STOPPED = 0, 2, 3, 4
# The operation id a `jigcmd run` names in its statement (it keeps no journal row): outside
# the Run/1 (and MCP key) grammar, so no caller's operation, nor a command name, is ever it.
RUN_OPERATION_ID = "(jigcmd run)"
# `--stdin-file -`: jigcmd's own stdin, as `cat -` reads it.
STDIN_DASH = "-"


def read_candidate(directory: Path) -> dict[str, str]:
    """The candidate `directory` sends (see `read_project`), or `CandidateError` listing every
    rule it breaks."""
    project = read_project(directory)
    problems = project.problems()
    if problems:
        raise CandidateError(f"{directory}: " + "; ".join(p.line() for p in problems))
    return project.files


def run(
    settings: FrontSettings,
    command: str,
    *,
    files_dir: Path,
    stdin_file: Path | None,
    args: list[str],
    as_json: bool,
    excludes: Sequence[str] = (),
    timeout: float | None = None,
) -> int:
    """Run and print the evidence (or the failure); return the exit status."""
    if timeout is not None and not 0 < timeout <= CEILING_SECONDS:
        why = f"--timeout {timeout:g}: must be more than 0 and at most {CEILING_SECONDS:g} seconds"
        return write_failure(
            JigError(
                Code.INVALID_INPUT, f"{why} (the envelope's ceiling)", {"option": "--timeout"}
            ),
            as_json,
        )
    call = _Call(command, files_dir, excludes, stdin_file, args, as_json, timeout)
    return anyio.run(_run, settings, call)


@dataclass(frozen=True)
class _Call:
    """What the command line asks `run` for."""

    command: str
    files_dir: Path
    excludes: Sequence[str]
    stdin_file: Path | None
    args: list[str]
    as_json: bool
    timeout_s: float | None


async def _run(settings: FrontSettings, call: _Call) -> int:
    """The call from start to answer; a stop signal meanwhile is its cancel."""
    cancel = CancelSignal()
    async with anyio.create_task_group() as signals:
        # SIGINT, SIGTERM and SIGHUP are the caller's cancel until the answer is written: the
        # run is fenced and answered CANCELLED (status 4) with what it collected, as in `serve`.
        await signals.start(watch_stop_signals, lambda _: cancel.set())
        try:
            status = await _answered(settings, call, cancel)
        finally:
            signals.cancel_scope.cancel()
    return status


async def _answered(settings: FrontSettings, call: _Call, cancel: CancelSignal) -> int:
    """The exit status, the answer written whatever happened."""
    try:
        # Read before the envelopes start; its verdict waits for admission (below).
        project = read_files(call.files_dir, call.excludes)
        return await _run_once(settings, call, project, cancel)
    except BindingError as exc:
        details = {"binding": exc.source, "pointer": exc.pointer, "rule": exc.rule}
        return write_failure(JigError(Code.INVALID_INPUT, str(exc), details), call.as_json)
    except STARTUP_ERRORS as exc:
        # jigcmd cannot serve here (no Bun, no usable state directory or cgroup subtree).
        # The operator's own command line: the paths it names are the ones they gave.
        return write_failure(JigError(Code.UNAVAILABLE, str(exc)), call.as_json)


async def _run_once(
    settings: FrontSettings, call: _Call, project: ProjectFiles | JigError, cancel: CancelSignal
) -> int:
    """Admission, the candidate, the run, the answer; `cancel` stops the run where it is."""
    command = call.command
    # The zygote starts (and stages the runtime) before the run's ceiling begins: on a slow
    # (emulated) machine that alone took seconds of a one-shot run's 10.
    async with open_service(settings, start_envelopes=True) as assembly:
        service = assembly.service
        try:
            # Admission first: a drifted or missing lock is what to fix, whatever the files.
            await service.catalog.check_admission(command)
            request = _accepted(service, settings, call, project)
            # The timeout starts now, with the envelopes up: setup counts, start-up does not.
            timeout_s = call.timeout_s
            deadline = None if timeout_s is None else unix_ms() + int(timeout_s * 1000)
            result = await service.run(
                request,
                operation_id=RUN_OPERATION_ID,
                deadline_unix_ms=deadline,
                cancel=cancel,
                # The same per-test results an MCP result has; nothing kept to read back.
                detailed=True,
                keep_resources=False,
            )
        except JigError as exc:
            return write_failure(exc, call.as_json, timeout_s=call.timeout_s)
    _write_result(result, call.as_json)
    return _EXIT_EVIDENCE


def _accepted(
    service: CommandService, settings: FrontSettings, call: _Call, project: ProjectFiles | JigError
) -> dict[str, object]:
    """The request, checked as the run will check it, then the notes on it: none is said
    before a refusal, which is then the one thing to read."""
    if isinstance(project, JigError):
        raise project
    files = candidate_files(project, service.catalog.command_paths(call.command), call.command)
    request = build_request(call.command, files, call.stdin_file, call.args)
    service.catalog.validate(request)  # again in `service.run`: cheap beside the run
    commands = service.catalog.commands
    policy = commands[call.command]
    notes = run_notes(
        project, policy, commands, settings.binding, settings.lock, excludes=call.excludes
    )
    write_notes(project, notes)
    note_unused_pipe(call.stdin_file)
    return request


def read_files(directory: Path, excludes: Sequence[str]) -> ProjectFiles | JigError:
    """The project directory as a candidate, or why it cannot be read at all."""
    try:
        return read_project(directory, excludes)
    except CandidateError as exc:
        return _option_error("--files", directory, str(exc).removeprefix(f"{directory}: "))


def candidate_files(
    project: ProjectFiles, needed: Sequence[str], command: str, verb: str = "run"
) -> dict[str, str]:
    """The files to send; or one refusal listing every problem, after the one note that
    may explain it, what was left out (a needed file `.gitignore` ignores)."""
    problems = project.problems(needed, command)
    if problems:
        write_notes(project, [note] if (note := project.note()) is not None else [], verb)
        raise refusal("--files", project.root, problems)
    return project.files


def write_notes(project: ProjectFiles, notes: Sequence[str], verb: str = "run") -> None:
    """Each note on its own stderr line, made inert (it names the candidate's files)."""
    for note in notes:
        sys.stderr.write(one_line(f"jigcmd {verb}: --files {project.root}: {note}") + "\n")


def refusal(option: str, directory: Path, problems: Sequence[Problem]) -> JigError:
    """One `INVALID_INPUT` naming every problem (the wire message is cut at 1,024 characters;
    `details.problems` keeps them all)."""
    message = f"{option} {directory}: {_count(len(problems))}, nothing ran: " + "; ".join(
        p.line() for p in problems
    )
    details = {
        "option": option,
        "path": str(directory),
        "problems": [msgspec.structs.asdict(p) for p in problems],
    }
    return JigError(Code.INVALID_INPUT, message, details)


def _count(n: int) -> str:
    return f"{n} problem{'s' if n != 1 else ''}"


def build_request(
    command: str, files: dict[str, str], stdin_file: Path | None, args: list[str]
) -> dict[str, object]:
    """The request `serve` would get, read from the command line's files."""
    request: dict[str, object] = {"command": command, "files": files}
    if args:
        request["args"] = args
    if stdin_file is not None:
        try:
            request["stdin"] = _stdin_bytes(stdin_file).decode("utf-8")
        except FileNotFoundError:
            raise _option_error("--stdin-file", stdin_file, "no such file") from None
        except OSError as exc:
            why = f"cannot be read: {exc.strerror}"
            raise _option_error("--stdin-file", stdin_file, why) from exc
        except UnicodeDecodeError as exc:
            why = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
            raise _option_error("--stdin-file", stdin_file, why) from exc
    return request


def _stdin_bytes(stdin_file: Path) -> bytes:
    """What `--stdin-file` names: a file, or with `-` jigcmd's own stdin."""
    if str(stdin_file) == STDIN_DASH:
        # Read only as far as shows it too long: a pipe may never end.
        data, whose = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1), "jigcmd's stdin"
    else:
        data, whose = _read_stdin_file(stdin_file), "it"
    if len(data) > MAX_STDIN_BYTES:
        why = (
            f"{whose} holds more than {MAX_STDIN_BYTES:,} bytes, the most a command's "
            "stdin may (rule stdin); give the command less"
        )
        raise _option_error("--stdin-file", stdin_file, why)
    return data


def _read_stdin_file(path: Path) -> bytes:
    """A file's bytes, no more of them than shows it too long: the path may name a device
    that never ends (/dev/zero) or a pipe (`<(cmd)`). O_NONBLOCK: opening a FIFO no process
    writes to returns at once (and reads as empty) instead of waiting for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        # A pipe with a writer is then waited on, as `--stdin-file -` waits on jigcmd's own.
        os.set_blocking(fd, True)
        return handle.read(MAX_STDIN_BYTES + 1)


def note_unused_pipe(stdin_file: Path | None, verb: str = "run") -> None:
    """One line when jigcmd's stdin is a pipe the command will not see (`echo x | jigcmd
    run …` gave the command an empty stdin without a word); a terminal or /dev/null is
    the usual case and says nothing."""
    if stdin_file is not None:
        return
    try:
        piped = stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return  # no stdin at all: nothing was dropped
    if piped:
        sys.stderr.write(
            f"jigcmd {verb}: stdin is a pipe, and the command's stdin is empty; give it with "
            "--stdin-file -\n"
        )


def _option_error(option: str, path: Path, why: str) -> JigError:
    return JigError(
        Code.INVALID_INPUT, f"{option} {path}: {why}", {"option": option, "path": str(path)}
    )


def _exit_status(code: Code) -> int:
    """The documented exit status of a failed call."""
    if code == Code.INVALID_INPUT:
        return _EXIT_INVALID
    if code in (Code.DEADLINE_EXCEEDED, Code.CANCELLED):
        return _EXIT_STOPPED
    return _EXIT_FAILED


def write_failure(
    exc: JigError, as_json: bool, verb: str = "run", timeout_s: float | None = None
) -> int:
    """Say why the call failed (stderr; with `as_json` also the one stdout object);
    `timeout_s`: the `--timeout` a run stopped at its deadline had."""
    details = dict(exc.details or {})
    problems = details.get("problems")
    if problems:
        # Every problem on its own line: the message may have been cut.
        lines = [f"  {one_line(msgspec.convert(p, Problem).line())}" for p in problems]
        head = f"{details['option']} {details['path']}: {_count(len(problems))}, nothing ran"
        sys.stderr.write(
            f"jigcmd {verb}: {exc.code.value}: {one_line(head)}:\n" + "\n".join(lines) + "\n"
        )
    else:
        # Inert: a message may name what a directory's writer chose (a file name).
        sys.stderr.write(f"jigcmd {verb}: {exc.code.value}: {one_line(exc.message)}\n")
    # Deadline and cancel carry what was collected: the same evidence a completed run has,
    # and the resources it used, which is when a person wants them most.
    collected = details.pop("command", None)
    report = exc.report if isinstance(exc, StoppedRun) else None
    ends = exc.ends if isinstance(exc, StoppedRun) else None
    # A test command's results: what its report says, or why there is none (a stop before
    # Bun wrote it), as a completed run's.
    tests = full_tests(exc.tests) if exc.tests is not None else None
    if as_json:
        error: dict[str, Any] = {"code": exc.code.value, "message": exc.message}
        if details:
            error["details"] = details
        answer: dict[str, Any] = {"error": error}
        if collected is not None:
            answer["evidence"] = collected
        if report is not None:
            answer["report"] = report
        if tests is not None:
            answer["tests"] = tests
        if exc.attestation is not None:
            answer["attestation"] = attestation_fields(exc.attestation)
        if _cut(ends):
            answer["output"] = ends
        sys.stdout.write(msgspec.json.encode(answer).decode() + "\n")
    elif collected is not None:
        evidence = msgspec.convert(collected, Evidence)
        _write_text(evidence, report, tests, timeout_s=timeout_s, ends=ends)
    return _exit_status(exc.code)


def _write_result(result: RunResult, as_json: bool) -> None:
    tests = full_tests(result.tests) if result.tests is not None else None
    if as_json:
        answer: dict[str, Any] = {"evidence": result.evidence, "report": result.report}
        if tests is not None:
            answer["tests"] = tests
        if result.attestation is not None:
            answer["attestation"] = attestation_fields(result.attestation)
        if _cut(result.ends):
            answer["output"] = result.ends
        sys.stdout.write(msgspec.json.encode(answer).decode() + "\n")
    else:
        _write_text(result.evidence, result.report, tests, ends=result.ends)


def _cut(ends: OutputEnds | None) -> bool:
    """Whether a stream went past the cap: `output` is then in the `--json` answer."""
    return ends is not None and bool(ends.stdout.dropped_bytes or ends.stderr.dropped_bytes)


def _write_text(
    evidence: Evidence,
    report: ResourceReport | None,
    tests: TestsView | None = None,
    timeout_s: float | None = None,
    ends: OutputEnds | None = None,
) -> None:
    sys.stdout.write(readable(evidence, report, tests, timeout_s, ends))
