"""The `jigcmd` command line: one verb per front (serve, run, init, attest, doctor, …)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import NoReturn

from jigcmd import __version__
from jigcmd.jarvis.connections import DEFAULT_LIMITS
from jigcmd.server import stderrlog

__all__ = ["main"]


class _UsageError(Exception):
    """Raised instead of argparse's exit, so that `run --json` can answer it as JSON too."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are raised as `_UsageError`."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


_STATE_DIR_HELP = (
    "journal and envelope slots (default: $JIGCMD_STATE_DIR, else /var/lib/jigcmd for root, "
    "else $XDG_STATE_HOME/jigcmd or ~/.local/state/jigcmd)"
)
_BINDING_HELP = (
    "the Binding file (.toml or .json, or .ts/.js as Jig writes it) naming the reviewed commands"
)


def _ownership_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)
    parser.add_argument(
        "--max-envelopes",
        type=int,
        help="envelope slots shared by every jigcmd using the state directory (default: "
        "min(half the available memory / 256 MiB, 2 x CPUs, 16), at least 1)",
    )
    _cgroup_option(parser)


def _budget(text: str) -> int:
    """`--result-budget`: whole bytes, at least what the counts and digests need."""
    from jigcmd.protocol.dialect import MIN_BUDGET_BYTES  # noqa: PLC0415 - imported per verb to keep start-up light

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value < MIN_BUDGET_BYTES:
        raise argparse.ArgumentTypeError(f"at least {MIN_BUDGET_BYTES} bytes, not {value}")
    return value


def _seconds(text: str) -> float:
    """`--queue-wait`: seconds, more than 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"more than 0 and at most 86400 seconds, not {text}")
    return value


def _signing_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--signing-key",
        type=Path,
        help="Ed25519 PKCS#8 PEM key that signs each run's statement (default: "
        "$JIGCMD_SIGNING_KEY, a path such as /dev/fd/3, else the host key signing-key.pem in "
        "the state directory, made on first use)",
    )


def _cgroup_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cgroup-base",
        help="where envelope cgroups go (default: jigcmd as root; without root a delegated "
        "subtree, see docs/rootless.md); also $JIGCMD_CGROUP_BASE",
    )


def _exclude_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out what this .gitignore pattern matches, relative to the directory "
        "(repeatable): --exclude 'test/fixtures/' --exclude '*.snap'",
    )


def _serve_options(serve: argparse.ArgumentParser) -> None:
    """`jigcmd serve`'s options."""
    serve.add_argument("--binding", required=True, type=Path, help=_BINDING_HELP)
    serve.add_argument(
        "--lock", type=Path, help="admitted lock (default: jigcmd.lock beside the Binding)"
    )
    serve.add_argument(
        "--protocol",
        choices=("auto", "mcp", "flow"),
        default="auto",
        help="wire dialect; auto: the first request decides (default)",
    )
    serve.add_argument(
        "--root-deadline-unix-ms",
        type=int,
        default=None,
        help="the caller's run's deadline (Unix ms); every command ends by then (default: "
        "$JIGCMD_ROOT_DEADLINE_UNIX_MS; a Flow runtime must pass one, its SDK sends no "
        "per-call deadlineUnixMs)",
    )
    serve.add_argument(
        "--run-id",
        help="the caller's run this session belongs to: operation ids are scoped to it, and a "
        "restart with the same run id replays, joins or conflicts (default: $JIGCMD_RUN_ID, "
        "else a new run with a generated id, printed on stderr)",
    )
    serve.add_argument(
        "--result-budget",
        type=_budget,
        default=None,
        metavar="BYTES",
        help="each MCP tool result (structuredContent and content together) fits in this many "
        "bytes of JSON (default 24576, about 6k tokens; at least 4096)",
    )
    serve.add_argument(
        "--queue-wait",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long an MCP call waits for a free envelope slot, unless the session's root "
        "deadline comes first; the command then gets its whole ceiling (default 60)",
    )
    _ownership_options(serve)
    _signing_key_option(serve)


def _lock_options(lock: argparse.ArgumentParser) -> None:
    """`jigcmd lock`'s options."""
    lock.add_argument("--binding", required=True, type=Path, help=_BINDING_HELP)
    lock.add_argument("--lock", type=Path, help="where to write (default: beside the Binding)")
    lock.add_argument(
        "--check", action="store_true", help="only say whether the existing lock admits it"
    )


def _run_options(run: argparse.ArgumentParser) -> None:
    """`jigcmd run`'s options."""
    run.add_argument("--binding", required=True, type=Path, help=_BINDING_HELP)
    run.add_argument(
        "--lock", type=Path, help="admitted lock (default: jigcmd.lock beside the Binding)"
    )
    run.add_argument("command", help="the Binding command name")
    run.add_argument(
        "--files",
        required=True,
        type=Path,
        help="the project directory sent as the candidate: its text files, less .git, "
        "node_modules, .jig, top-level dotfiles, what .gitignore ignores and binary files "
        "(each left out is named on stderr)",
    )
    _exclude_option(run)
    run.add_argument("--stdin-file", type=Path, help="UTF-8 text given to the command's stdin")
    run.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop the command (its whole process tree) after SECONDS, setup included; at "
        "most 10, the envelope's ceiling (default 10)",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object: {"evidence", "report", "attestation"}, or {"error", '
        '"evidence"?} on failure',
    )
    _ownership_options(run)
    _signing_key_option(run)


def _attest_options(attest: argparse.ArgumentParser) -> None:
    """`jigcmd attest`'s options."""
    attest.add_argument("--run-id", required=True, help="the caller's run the operation is in")
    attest.add_argument("operation_id", metavar="OP", help="the operation id")
    attest.add_argument("--out", type=Path, help="write it to FILE instead of stdout")
    attest.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)


def _verify_options(verify: argparse.ArgumentParser) -> None:
    """`jigcmd verify`'s options."""
    verify.add_argument("file", type=Path, help="the statement (from attest, or run --json)")
    verify.add_argument(
        "--key", type=Path, help="the signer's public key (default: this host's, `jigcmd key`)"
    )
    verify.add_argument(
        "--evidence", type=Path, help="evidence JSON whose candidate and streams must match"
    )
    verify.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)


def _key_options(key: argparse.ArgumentParser) -> None:
    """`jigcmd key`'s options."""
    key.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)
    _signing_key_option(key)


def _init_options(init: argparse.ArgumentParser) -> None:
    """`jigcmd init`'s options."""
    init.add_argument("directory", type=Path, metavar="DIR", help="the project's directory")
    init.add_argument(
        "--name", help="the Flow package's name (default: package.json's name, else DIR's)"
    )
    init.add_argument(
        "--format",
        choices=("toml", "ts"),
        default="toml",
        help="the Binding file's format: toml (.jig/binding.toml, the default) or ts, as the "
        "reference lays a project out (.jig/bindings/command.ts with defineBinding, .jig/jig.ts)",
    )
    _exclude_option(init)


def _recover_options(recover: argparse.ArgumentParser) -> None:
    """`jigcmd recover`'s options."""
    recover.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)
    _cgroup_option(recover)


def _runs_options(runs: argparse.ArgumentParser) -> None:
    """`jigcmd runs`'s options."""
    runs.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)
    runs.add_argument("--run-id", help="only this run")
    runs.add_argument("--json", action="store_true", help="one JSON object per run")


def _jarvis_options(jarvis: argparse.ArgumentParser) -> None:
    """`jigcmd jarvis`'s options."""
    jarvis.add_argument("--policy", required=True, type=Path, help="the TOML rule file")
    jarvis.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    jarvis.add_argument("--port", type=int, default=7777, help="port (default 7777)")
    jarvis.add_argument(
        "--max-connections",
        type=_positive_int,
        default=DEFAULT_LIMITS.max_connections,
        help="open connections at most, within the descriptor limit less 64 (default "
        f"{DEFAULT_LIMITS.max_connections}); past it the longest waiting connection gives way, "
        "or the newcomer gets 503",
    )
    jarvis.add_argument(
        "--queue-wait",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long a run.create waits for a free envelope slot before a 429, unless its "
        "own timeout_ms is shorter; never past the early answer at 25 s (default 20)",
    )
    _ownership_options(jarvis)
    _signing_key_option(jarvis)


def _audit_options(audit: argparse.ArgumentParser) -> None:
    """`jigcmd jarvis-audit`'s options."""
    audit.add_argument("--state-dir", type=Path, help=_STATE_DIR_HELP)
    audit.add_argument("--limit", type=int, default=100, help="newest rows to print (default 100)")


def _doctor_options(doctor: argparse.ArgumentParser) -> None:
    """`jigcmd doctor`'s options."""
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.add_argument("--state-dir", type=Path, help="the state directory to inspect")
    doctor.add_argument(
        "--binding", type=Path, help="also load this Binding (.toml/.json/.ts/.js) and its lock"
    )


def _demo_options(demo: argparse.ArgumentParser) -> None:
    """`jigcmd demo`'s options."""
    demo.add_argument(
        "--state-dir",
        type=Path,
        help="keep the demo's journal there (default: a temporary directory, removed after)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="jigcmd",
        description="Run operator-reviewed Bun commands against exact candidate projects "
        "inside a native Linux containment envelope.",
    )
    parser.add_argument("--version", action="version", version=f"jigcmd {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="serve FLOW Run/1 or MCP JSON-RPC on stdio")
    _serve_options(serve)

    lock = sub.add_parser("lock", help="review a Binding and write its admitted lock")
    _lock_options(lock)

    run = sub.add_parser(
        "run",
        help="run one command once, through the same path as serve",
        epilog="Arguments for a run command follow `--`: jigcmd run ... cli --files DIR -- a b",
    )
    _run_options(run)

    attest = sub.add_parser("attest", help="print the signed statement of one recorded run")
    _attest_options(attest)

    verify = sub.add_parser(
        "verify", help="check a run's signed statement: signature, schema, evidence"
    )
    _verify_options(verify)

    key = sub.add_parser("key", help="print the public half of the key runs are signed with")
    _key_options(key)

    init = sub.add_parser(
        "init",
        help="write a reviewed-command Binding for a project directory (DIR/.jig/)",
        description="Find the commands a project has (its *.test.ts files, the entry point "
        "package.json names), write the Binding and its Flow package under DIR/.jig/ and print "
        "the next two commands. Overwrites nothing.",
    )
    _init_options(init)

    recover = sub.add_parser(
        "recover", help="close every run a dead server left open (fence, release, record)"
    )
    _recover_options(recover)

    runs = sub.add_parser(
        "runs", help="list the state directory's runs and their operations (read only)"
    )
    _runs_options(runs)

    jarvis = sub.add_parser(
        "jarvis", help="serve the jarvis UTCP tools on loopback HTTP (needs JARVIS_BEARER_TOKEN)"
    )
    _jarvis_options(jarvis)

    audit = sub.add_parser("jarvis-audit", help="print jarvis's audit log as JSON lines")
    _audit_options(audit)

    doctor = sub.add_parser("doctor", help="check that this machine can build the envelope")
    _doctor_options(doctor)

    demo = sub.add_parser(
        "demo", help="run the bundled example through a real `jigcmd serve` child"
    )
    _demo_options(demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jigcmd` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # Everything after the first `--` belongs to the candidate, verbatim (argparse would
    # otherwise read options in it).
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1 :]
    try:
        args = _parser().parse_args(argv)
        if extra and args.verb != "run":
            _parser().error("arguments after `--` are only for `jigcmd run`")
    except _UsageError as exc:
        return _usage_failure(exc, argv)
    # Never a blocking write from the event loop: a host may not drain our stderr.
    stderrlog.install(logging.DEBUG if args.verbose else logging.WARNING)
    # Each verb imports what it needs, so each command's start-up stays light (serve answers
    # within ~150 ms).
    if args.verb in ("serve", "run"):
        return _front(args, extra)
    return _tool(args)


def _front(args: argparse.Namespace, extra: list[str]) -> int:
    """`jigcmd serve` and `jigcmd run`: the command path, over stdio or once."""
    from jigcmd.command.assembly import FrontSettings  # noqa: PLC0415 - imported per verb to keep start-up light

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

        return serve(settings, args.protocol, args.run_id, result_budget=args.result_budget)
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

        return lock(args.binding, args.lock, check=args.check)
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
            return attest.verify(args.file, args.key, args.evidence, args.state_dir)
        return attest.key(args.state_dir, args.signing_key)
    if verb == "recover":
        from jigcmd.frontends.recover import recover  # noqa: PLC0415 - imported per verb to keep start-up light

        return recover(args.state_dir, args.cgroup_base)
    if verb == "runs":
        from jigcmd.frontends.runs import runs  # noqa: PLC0415 - imported per verb to keep start-up light

        return runs(args.state_dir, run_id=args.run_id, as_json=args.json)
    if verb == "jarvis":
        from jigcmd.frontends.jarvis import jarvis  # noqa: PLC0415 - imported per verb to keep start-up light

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
        )
    if verb == "jarvis-audit":
        from jigcmd.frontends.jarvis import jarvis_audit  # noqa: PLC0415 - imported per verb to keep start-up light

        return jarvis_audit(args.state_dir, args.limit)
    if verb == "doctor":
        from jigcmd.frontends.doctor import doctor  # noqa: PLC0415 - imported per verb to keep start-up light

        return doctor(as_json=args.json, state_dir=args.state_dir, binding=args.binding)
    from jigcmd.frontends.demo import demo  # noqa: PLC0415 - imported per verb to keep start-up light

    return demo(args.state_dir)


def _usage_failure(exc: _UsageError, argv: list[str]) -> int:
    """argparse's words on stderr (and, for `run --json`, as its one JSON object); status 2."""
    exc.parser.print_usage(sys.stderr)
    verb = next((word for word in argv if not word.startswith("-")), None)
    message = exc.message + (_dashes_hint(exc.message, argv) if verb == "run" else "")
    if verb == "run" and "--json" in argv:
        from jigcmd.errors import Code, JigError  # noqa: PLC0415 - imported per verb to keep start-up light
        from jigcmd.frontends.run import write_failure  # noqa: PLC0415 - imported per verb to keep start-up light

        return write_failure(JigError(Code.INVALID_INPUT, message), as_json=True)
    sys.stderr.write(f"{exc.parser.prog}: error: {message}\n")
    return 2


def _dashes_hint(message: str, argv: list[str]) -> str:
    """For `run`: words argparse did not know are most likely the command's own arguments,
    which follow `--`; the same command line with them moved there."""
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return ""
    unknown = message.removeprefix(prefix).split(" ")
    kept = list(argv)
    for word in unknown:
        if word in kept:
            kept.remove(word)
    suggestion = shlex.join(["jigcmd", *kept, "--", *unknown])
    return f"; a command's own arguments follow `--`: {suggestion}"


if __name__ == "__main__":
    os._exit(main())
