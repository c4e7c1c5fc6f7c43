"""The `jigcmd` command line's parser: every verb, its options and what `--help` says of them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple, NoReturn

from jigcmd import __version__
from jigcmd import optionvalues as values
from jigcmd.jarvis.connections import DEFAULT_LIMITS

__all__ = ["UsageError", "parser"]


class UsageError(Exception):
    """Raised instead of argparse's exit, so that `run --json` can answer it as JSON too."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are raised as `UsageError`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


_STATE_DIR_HELP = (
    "journal and envelope slots (default: $JIGCMD_STATE_DIR, else /var/lib/jigcmd for root, "
    "else $XDG_STATE_HOME/jigcmd or ~/.local/state/jigcmd)"
)
# Where a Binding's lock is unless --lock says (`assembly.default_lock_path`).
_LOCK_DEFAULT = (
    "jigcmd.lock beside the Binding; NAME.jigcmd.lock beside a TypeScript Binding NAME.ts"
)
_BINDING_HELP = (
    "the Binding file (.toml or .json, or .ts/.js as Jig writes it) naming the reviewed commands"
)


def _binding_options(parser: argparse.ArgumentParser) -> None:
    """The Binding and its admitted lock, for a verb that runs its commands."""
    parser.add_argument("--binding", required=True, type=values.binding_file, help=_BINDING_HELP)
    parser.add_argument(
        "--lock", type=values.path, help=f"admitted lock (default: {_LOCK_DEFAULT})"
    )


def _ownership_options(parser: argparse.ArgumentParser) -> None:
    """What a verb that runs envelopes owns them through: the state directory, its slots,
    the cgroups and the key its statements are signed with."""
    parser.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)
    parser.add_argument(
        "--max-envelopes",
        type=values.positive_int,
        help="envelope slots shared by every jigcmd using the state directory (default: "
        "min(half the available memory / 256 MiB, 2 x CPUs, 16), at least 1)",
    )
    _cgroup_option(parser)
    _signing_key_option(parser)


def _signing_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--signing-key",
        type=values.path,
        help="Ed25519 PKCS#8 PEM key that signs each run's statement (default: "
        "$JIGCMD_SIGNING_KEY, a path such as /dev/fd/3, else the host key signing-key.pem in "
        "the state directory, made on first use)",
    )


def _cgroup_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cgroup-base",
        type=values.cgroup_base,
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
        "(repeatable, the last match wins): --exclude 'test/fixtures/' --exclude '*.md'; "
        "a negated one brings back what .gitignore left out: --exclude '!/bunfig.toml'",
    )


def _serve_options(serve: argparse.ArgumentParser) -> None:
    """`jigcmd serve`'s options."""
    _binding_options(serve)
    serve.add_argument(
        "--protocol",
        choices=("auto", "mcp", "flow"),
        default="auto",
        help="wire dialect; auto: the first request decides (default)",
    )
    serve.add_argument(
        "--root-deadline-unix-ms",
        type=values.unix_ms,
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
        type=values.budget,
        default=None,
        metavar="BYTES",
        help="each MCP tool result (structuredContent and content together) fits in this many "
        "bytes of JSON (default 24576, about 6k tokens; at least 4096)",
    )
    serve.add_argument(
        "--queue-wait",
        type=values.seconds,
        default=None,
        metavar="SECONDS",
        help="how long an MCP call waits for a free envelope slot, unless the session's root "
        "deadline comes first; the command then gets its whole ceiling (default 60)",
    )
    _retain_option(serve)
    _ownership_options(serve)


def _lock_options(lock: argparse.ArgumentParser) -> None:
    """`jigcmd lock`'s options."""
    lock.add_argument("--binding", required=True, type=values.binding_file, help=_BINDING_HELP)
    lock.add_argument("--lock", type=values.path, help=f"where to write (default: {_LOCK_DEFAULT})")
    lock.add_argument(
        "--check", action="store_true", help="only say whether the existing lock admits it"
    )
    # A TypeScript Binding is evaluated in an envelope: its cgroup goes where serve's would.
    _cgroup_option(lock)


def _candidate_options(verb: argparse.ArgumentParser) -> None:
    """The command and the directory it gets, as `run` and `request` read them."""
    verb.add_argument("command", help="the Binding command name")
    verb.add_argument(
        "--files",
        required=True,
        type=values.path,
        help="the project directory sent as the candidate: its text files, less .git, "
        "node_modules, .jig, top-level dotfiles, what .gitignore ignores (unless git tracks "
        "it) and binary files (each left out is named on stderr)",
    )
    _exclude_option(verb)
    verb.add_argument(
        "--stdin-file",
        type=values.path,
        help="UTF-8 text given to the command's stdin; '-' is jigcmd's own stdin",
    )


def _run_options(run: argparse.ArgumentParser) -> None:
    """`jigcmd run`'s options."""
    _binding_options(run)
    _candidate_options(run)
    run.add_argument(
        "--timeout",
        type=values.decimal,
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


def _request_options(request: argparse.ArgumentParser) -> None:
    """`jigcmd request`'s options."""
    _candidate_options(request)
    request.add_argument(
        "--protocol",
        choices=("flow", "mcp"),
        default="flow",
        help="flow: one FLOW Run/1 capability/call line (default); mcp: initialize, "
        "notifications/initialized and one tools/call line",
    )
    request.add_argument(
        "--operation-id",
        metavar="ID",
        help="the call's operation id, a Run/1 id: FLOW's operationId (default: request- and "
        "16 hex digits of the request's SHA-256, so the same request is the same operation); "
        'MCP\'s _meta["dev.jigcmd/operationId"] (default: none, so a retry is a new call)',
    )


def _attest_options(attest: argparse.ArgumentParser) -> None:
    """`jigcmd attest`'s options."""
    attest.add_argument("--run-id", required=True, help="the caller's run the operation is in")
    attest.add_argument("operation_id", metavar="OP", help="the operation id")
    attest.add_argument("--out", type=values.path, help="write it to FILE instead of stdout")
    attest.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)


def _verify_options(verify: argparse.ArgumentParser) -> None:
    """`jigcmd verify`'s options."""
    verify.add_argument(
        "file",
        type=values.path,
        help="the statement: a bundle (from attest), or an answer carrying one in `attestation` "
        "(run --json, jarvis run.get); - reads stdin",
    )
    verify.add_argument(
        "--key",
        type=values.path,
        help="the signer's public key (default: this host's, `jigcmd key`)",
    )
    verify.add_argument(
        "--evidence",
        type=values.path,
        help="what the run answered, to check against the statement: its evidence (a Run/1 "
        "result or answer line, run --json, an MCP tools/call answer or its structuredContent, a "
        "jarvis record); - reads stdin; without it the output is not checked",
    )
    verify.add_argument(
        "--run-id",
        metavar="RUN",
        help="the caller's run the statement must be of (serve --run-id): a Run/1 answer names "
        "none, so without it the statement's run is a skip line",
    )
    verify.add_argument(
        "--operation-id",
        metavar="OP",
        help="the operation id the statement must be of (the call's operationId)",
    )
    verify.add_argument(
        "--lock",
        type=values.path,
        metavar="LOCK",
        help="the lock the caller's serve admitted: the statement's lockDigest, Binding, "
        "contract and Bun must be its",
    )
    verify.add_argument(
        "--state-dir",
        type=values.path,
        help="where this host's public key is read when --key is not given (default: "
        "$JIGCMD_STATE_DIR, else /var/lib/jigcmd for root, else $XDG_STATE_HOME/jigcmd or "
        "~/.local/state/jigcmd)",
    )


def _key_options(key: argparse.ArgumentParser) -> None:
    """`jigcmd key`'s options."""
    key.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)
    _signing_key_option(key)


def _init_options(init: argparse.ArgumentParser) -> None:
    """`jigcmd init`'s options."""
    init.add_argument("directory", type=values.path, metavar="DIR", help="the project's directory")
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
    recover.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)
    _cgroup_option(recover)


def _runs_options(runs: argparse.ArgumentParser) -> None:
    """`jigcmd runs`'s options."""
    runs.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)
    runs.add_argument("--run-id", help="only this run")
    runs.add_argument("--json", action="store_true", help="one JSON object per run")


def _retain_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retain",
        type=values.retain,
        default=None,
        metavar="DURATION",
        help="prune what closed longer ago than this (7d; at least 1h) at start and hourly, as "
        "`jigcmd prune --older-than` does (default: keep everything)",
    )


def _prune_options(prune: argparse.ArgumentParser) -> None:
    """`jigcmd prune`'s options."""
    prune.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)
    prune.add_argument(
        "--older-than",
        type=values.older_than,
        required=True,
        metavar="DURATION",
        help="prune what closed longer ago than this: a whole number and s, m, h, d or w (7d)",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what it would remove; remove nothing"
    )
    prune.add_argument("--json", action="store_true", help="one JSON object")


def _jarvis_options(jarvis: argparse.ArgumentParser) -> None:
    """`jigcmd jarvis`'s options."""
    jarvis.add_argument("--policy", required=True, type=values.path, help="the TOML rule file")
    jarvis.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    jarvis.add_argument(
        "--port", type=values.port, default=7777, help="port (default 7777; 0: any free one)"
    )
    jarvis.add_argument(
        "--max-connections",
        type=values.positive_int,
        default=DEFAULT_LIMITS.max_connections,
        help="open connections at most, within the descriptor limit less 64 (default "
        f"{DEFAULT_LIMITS.max_connections}); past it the longest waiting connection gives way, "
        "or the newcomer gets 503",
    )
    jarvis.add_argument(
        "--queue-wait",
        type=values.seconds,
        default=None,
        metavar="SECONDS",
        help="how long a run.create waits for a free envelope slot before a 429, unless its "
        "own timeout_ms is shorter; never past the early answer at 25 s (default 20)",
    )
    _retain_option(jarvis)
    _ownership_options(jarvis)


def _audit_options(audit: argparse.ArgumentParser) -> None:
    """`jigcmd jarvis-audit`'s options."""
    audit.add_argument("--state-dir", type=values.path, help=_STATE_DIR_HELP)
    audit.add_argument(
        "--limit", type=values.whole_number, default=100, help="newest rows to print (default 100)"
    )


def _doctor_options(doctor: argparse.ArgumentParser) -> None:
    """`jigcmd doctor`'s options."""
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.add_argument("--state-dir", type=values.path, help="the state directory to inspect")
    doctor.add_argument(
        "--binding",
        type=values.binding_file,
        help="also load this Binding (.toml/.json/.ts/.js) and its lock",
    )
    doctor.add_argument(
        "--jarvis-policy",
        type=values.path,
        help="also check this jarvis policy (its host_dirs against this machine's mounts)",
    )
    _cgroup_option(doctor)


def _demo_options(demo: argparse.ArgumentParser) -> None:
    """`jigcmd demo`'s options."""
    demo.add_argument(
        "--state-dir",
        type=values.path,
        help="keep the demo's journal there (default: a temporary directory, removed after)",
    )


class _Verb(NamedTuple):
    """A verb: its name, what `jigcmd --help` says of it, and what adds its options."""

    name: str
    help: str
    options: Callable[[argparse.ArgumentParser], None]
    description: str | None = None
    epilog: str | None = None


_VERBS = (
    _Verb("serve", "serve FLOW Run/1 or MCP JSON-RPC on stdio", _serve_options),
    _Verb("lock", "review a Binding and write its admitted lock", _lock_options),
    _Verb(
        "run",
        "run one command once, through the same path as serve",
        _run_options,
        epilog="Arguments for a run command follow `--`: jigcmd run ... cli --files DIR -- a b",
    ),
    _Verb(
        "request",
        "print the request lines serve takes for a command and a directory (runs nothing)",
        _request_options,
        description="Read DIR as run --files does and print, as JSON Lines, the FLOW Run/1 "
        "call or the MCP initialize and tools/call that `jigcmd serve` answers: "
        "jigcmd request tests --files DIR | jigcmd serve --binding B",
        epilog="Arguments for a run command follow `--`: jigcmd request cli --files DIR -- a b",
    ),
    _Verb("attest", "print the signed statement of one recorded run", _attest_options),
    _Verb("verify", "check a run's signed statement: signature, schema, evidence", _verify_options),
    _Verb("key", "print the public half of the key runs are signed with", _key_options),
    _Verb(
        "init",
        "write a reviewed-command Binding for a project directory (DIR/.jig/)",
        _init_options,
        description="Find the commands a project has (its *.test.ts files, the entry point "
        "package.json names), write the Binding and its Flow package under DIR/.jig/ and print "
        "the next two commands. Overwrites nothing.",
    ),
    _Verb(
        "recover",
        "close every run a dead server left open (fence, release, record)",
        _recover_options,
    ),
    _Verb(
        "runs",
        "list the state directory's serve runs (Run/1, MCP) and their operations (read only; "
        "jarvis's runs: jarvis-audit)",
        _runs_options,
    ),
    _Verb(
        "prune",
        "remove closed operations' evidence and resources past an age (tombstones kept)",
        _prune_options,
    ),
    _Verb(
        "jarvis",
        "serve the jarvis UTCP tools on loopback HTTP (needs JARVIS_BEARER_TOKEN)",
        _jarvis_options,
    ),
    _Verb("jarvis-audit", "print jarvis's audit log as JSON lines", _audit_options),
    _Verb("doctor", "check that this machine can build the envelope", _doctor_options),
    _Verb("demo", "run the bundled example through a real `jigcmd serve` child", _demo_options),
)


def parser() -> argparse.ArgumentParser:
    """A fresh parser of `jigcmd`'s command line."""
    top = _Parser(
        prog="jigcmd",
        description="Run operator-reviewed Bun commands against exact candidate projects "
        "inside a native Linux containment envelope.",
    )
    top.add_argument("--version", action="version", version=f"jigcmd {__version__}")
    _verbose(top, default=False)
    sub = top.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    for verb in _VERBS:
        options = sub.add_parser(
            verb.name, help=verb.help, description=verb.description, epilog=verb.epilog
        )
        # Absent after the verb, the top level's answer stands (SUPPRESS sets nothing).
        _verbose(options, default=argparse.SUPPRESS)
        verb.options(options)
    return top


def _verbose(options: argparse.ArgumentParser, *, default: object) -> None:
    """`-v`/`--verbose`, taken before the verb (`jigcmd -v serve`) or after it."""
    options.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="debug logs on stderr"
    )
