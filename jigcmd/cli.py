"""The `jigcmd` command line: one verb per front (serve, run, init, attest, doctor, …)."""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import sys

from jigcmd.cliparser import UsageError, parser
from jigcmd.server import stderrlog
from jigcmd.server.fds import fill_standard_fds
from jigcmd.workdir import settle_working_directory

__all__ = ["main"]


# What a shell reports for a program SIGPIPE ended (`yes | head`): not all of it was read.
_EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jigcmd` console script."""
    closed = fill_standard_fds()
    try:
        status = _verb(argv, stdout_closed=1 in closed)
        # Flushed here, not at exit, so that a reader gone is found where it is handled.
        sys.stdout.flush()
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        if not (_broken_pipes(exc) and _stdout_closed()):
            raise
        # `jigcmd … | head`: whatever the verb did stands (a lock written, a run answered);
        # the rest of its output has no reader, so it goes nowhere, and quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _EXIT_STDOUT_CLOSED
    return status


def _broken_pipes(exc: BaseException) -> bool:
    """Whether `exc` is a broken pipe, or a group (from a task group) of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(BrokenPipeError)[1] is None
    return isinstance(exc, BrokenPipeError)


def _stdout_closed() -> bool:
    """Whether stdout's reader went away (a pipe whose read end closed reports POLLERR);
    a broken pipe elsewhere (a child's stdin) is a failure to report, not this."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, 0)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _verb(argv: list[str] | None, *, stdout_closed: bool = False) -> int:
    """Parse the command line and run its verb; the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if stdout_closed and _help_asked(argv):
        return _refuse_closed_stdout("jigcmd", "its help or version")
    # Everything after the first `--` belongs to the candidate, verbatim (argparse would
    # otherwise read options in it).
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1 :]
    try:
        args = parser().parse_args(argv)
        if extra and args.verb not in ("run", "request"):
            parser().error("arguments after `--` are only for `jigcmd run` and `jigcmd request`")
    except UsageError as exc:
        return _usage_failure(exc, argv)
    if stdout_closed and _writes_stdout(args):
        what = "its answers" if args.verb == "serve" else "its result"
        return _refuse_closed_stdout(f"jigcmd {args.verb}", what)
    lost = settle_working_directory(args)
    if lost is not None:
        return _refuse(args, f"{lost}; nothing ran")
    # Never a blocking write from the event loop: a host may not drain our stderr.
    stderrlog.install(logging.DEBUG if args.verbose else logging.WARNING)
    # Each verb imports what it needs, so each command's start-up stays light (serve answers
    # within ~150 ms).
    if args.verb in ("serve", "run"):
        return _front(args, extra)
    if args.verb == "request":
        from jigcmd.frontends.request import request  # noqa: PLC0415 - imported per verb to keep start-up light

        return request(
            args.command,
            files_dir=args.files,
            stdin_file=args.stdin_file,
            args=extra,
            protocol=args.protocol,
            excludes=args.exclude,
            operation_id=args.operation_id,
        )
    return _tool(args)


def _refuse(args: argparse.Namespace, message: str) -> int:
    """Status 2 before the verb ran: one stderr line (`run --json`: its one JSON object)."""
    if args.verb == "run" and args.json:
        from jigcmd.errors import Code, JigError  # noqa: PLC0415 - imported per verb to keep start-up light
        from jigcmd.frontends.run import write_failure  # noqa: PLC0415 - imported per verb to keep start-up light

        return write_failure(JigError(Code.INVALID_INPUT, message), as_json=True)
    sys.stderr.write(f"jigcmd {args.verb}: {message}\n")
    if args.verb == "serve":
        _serve_cannot_start(message)
    return 2


def _serve_cannot_start(reason: str) -> None:
    """`serve` refused at start: what its peer already sent is answered naming the reason, as
    every other start-up failure of serve is (`server.refusal`), not met with a bare EOF."""
    from jigcmd.server.hostpaths import HostPaths  # noqa: PLC0415 - imported per verb to keep start-up light
    from jigcmd.server.refusal import answer_pending  # noqa: PLC0415 - imported per verb to keep start-up light

    answer_pending(HostPaths.of_host().scrub(reason))


def _help_asked(argv: list[str]) -> bool:
    """Whether argparse would print help or the version (to stdout) and exit; what follows
    `--` is the candidate's."""
    ours = argv[: argv.index("--")] if "--" in argv else argv
    return any(word in ("-h", "--help", "--version") for word in ours)


def _writes_stdout(args: argparse.Namespace) -> bool:
    """Whether the verb's result goes to stdout: all but jarvis (HTTP) and `attest --out`."""
    return args.verb != "jarvis" and not (args.verb == "attest" and args.out is not None)


def _refuse_closed_stdout(who: str, what: str) -> int:
    """Status 2 before anything ran: with fd 1 closed (`>&-`) the result would reach nobody
    (it is /dev/null now, so that no file opened later takes fd 1), yet a run would stand."""
    sys.stderr.write(
        f"{who}: standard output is closed: {what} would go there and reach nobody; "
        "give it a pipe or a file (>/dev/null to discard it), not `>&-`; nothing ran\n"
    )
    return 2


def _front(args: argparse.Namespace, extra: list[str]) -> int:
    """`jigcmd serve` and `jigcmd run`: the command path, over stdio or once."""
    from jigcmd.command.assembly import FrontSettings  # noqa: PLC0415 - imported per verb to keep start-up light
    from jigcmd.envelope.delegation import VERB  # noqa: PLC0415 - imported per verb to keep start-up light

    VERB.set(args.verb)  # so that a delegation fix restarts the verb that ran
    settings = FrontSettings(
        binding=args.binding,
        lock=args.lock,
        state_dir=args.state_dir,
        max_envelopes=args.max_envelopes,
        root_deadline_unix_ms=getattr(args, "root_deadline_unix_ms", None),
        cgroup_base=args.cgroup_base,
        queue_wait=getattr(args, "queue_wait", None),
        signing_key=args.signing_key,
    )
    if args.verb == "serve":
        from jigcmd.frontends.serve import serve  # noqa: PLC0415 - imported per verb to keep start-up light

        return serve(
            settings,
            args.protocol,
            args.run_id,
            result_budget=args.result_budget,
            retain_s=args.retain,
        )
    from jigcmd.frontends.run import run  # noqa: PLC0415 - imported per verb to keep start-up light

    return run(
        settings,
        args.command,
        files_dir=args.files,
        stdin_file=args.stdin_file,
        args=extra,
        as_json=args.json,
        excludes=args.exclude,
        timeout=args.timeout,
    )


def _tool(args: argparse.Namespace) -> int:
    """Every other verb: the lock, the project's init, statements, the state directory, jarvis."""
    verb: str = args.verb
    if verb == "lock":
        from jigcmd.frontends.lock import lock  # noqa: PLC0415 - imported per verb to keep start-up light

        return lock(args.binding, args.lock, check=args.check, cgroup_base=args.cgroup_base)
    if verb == "init":
        from jigcmd.frontends.init import init  # noqa: PLC0415 - imported per verb to keep start-up light

        return init(
            args.directory, name=args.name, excludes=args.exclude, binding_format=args.format
        )
    if verb in ("attest", "verify", "key"):
        from jigcmd.frontends import attest  # noqa: PLC0415 - imported per verb to keep start-up light

        if verb == "attest":
            return attest.attest(args.state_dir, args.run_id, args.operation_id, args.out)
        if verb == "verify":
            expected = attest.Expecting(args.run_id, args.operation_id, args.lock)
            return attest.verify(args.file, args.key, args.evidence, args.state_dir, expected)
        return attest.key(args.state_dir, args.signing_key)
    if verb == "recover":
        from jigcmd.frontends.recover import recover  # noqa: PLC0415 - imported per verb to keep start-up light

        return recover(args.state_dir, args.cgroup_base)
    if verb == "runs":
        from jigcmd.frontends.runs import runs  # noqa: PLC0415 - imported per verb to keep start-up light

        return runs(args.state_dir, run_id=args.run_id, as_json=args.json)
    if verb == "prune":
        from jigcmd.frontends.prune import prune  # noqa: PLC0415 - imported per verb to keep start-up light

        return prune(args.state_dir, args.older_than, dry_run=args.dry_run, as_json=args.json)
    if verb == "jarvis":
        from jigcmd.envelope.delegation import VERB  # noqa: PLC0415 - imported per verb to keep start-up light
        from jigcmd.frontends.jarvis import jarvis  # noqa: PLC0415 - imported per verb to keep start-up light

        VERB.set(verb)
        return jarvis(
            args.policy,
            args.host,
            args.port,
            args.state_dir,
            cgroup_base=args.cgroup_base,
            max_envelopes=args.max_envelopes,
            max_connections=args.max_connections,
            queue_wait=args.queue_wait,
            signing_key=args.signing_key,
            retain_s=args.retain,
        )
    if verb == "jarvis-audit":
        from jigcmd.frontends.jarvis import jarvis_audit  # noqa: PLC0415 - imported per verb to keep start-up light

        return jarvis_audit(args.state_dir, args.limit)
    if verb == "doctor":
        from jigcmd.frontends.doctor import doctor  # noqa: PLC0415 - imported per verb to keep start-up light

        return doctor(
            as_json=args.json,
            state_dir=args.state_dir,
            binding=args.binding,
            jarvis_policy=args.jarvis_policy,
            cgroup_base=args.cgroup_base,
        )
    from jigcmd.frontends.demo import demo  # noqa: PLC0415 - imported per verb to keep start-up light

    return demo(args.state_dir)


def _usage_failure(exc: UsageError, argv: list[str]) -> int:
    """argparse's words on stderr (and, for `run --json`, as its one JSON object); status 2."""
    exc.parser.print_usage(sys.stderr)
    verb = next((word for word in argv if not word.startswith("-")), None)
    message = exc.message
    if verb in ("run", "request"):
        from jigcmd.frontends.argshint import dashes_hint  # noqa: PLC0415 - imported per verb to keep start-up light

        message += dashes_hint(exc.message, argv)
    if verb == "run" and "--json" in argv:
        from jigcmd.errors import Code, JigError  # noqa: PLC0415 - imported per verb to keep start-up light
        from jigcmd.frontends.run import write_failure  # noqa: PLC0415 - imported per verb to keep start-up light

        return write_failure(JigError(Code.INVALID_INPUT, message), as_json=True)
    sys.stderr.write(f"{exc.parser.prog}: error: {message}\n")
    if verb == "serve":
        _serve_cannot_start(message)
    return 2


if __name__ == "__main__":
    os._exit(main())
