"""The jarvis rule file: ordered `[[rule]]` tables, first match wins, default deny.

Pure: parsing works on TOML text, and evaluation sees the host only through a `HostView`
(program lookup, path resolution), so every rule can be tested without touching the disk.

A rule matches a request when all of its conditions hold:

- `argv0`: the requested program is one of these (a bare name resolved through the policy's
  `search_path`, or an absolute path). Programs are compared by their resolved real path *and*
  their name, so `/bin/echo` matches a rule for `/usr/bin/echo`, but `sh` never matches a
  rule for `dash` (a multi-call binary behaves by name).
- `cwd` (optional): the request's working directory, fully resolved, lies under one of these
  resolved prefixes. Leaving it out never widens what is allowed: an allow rule without `cwd`
  matches only requests without one (they start in the envelope's empty scratch `/tmp`, so
  no host directory is exposed by accident); a deny rule without `cwd` matches any cwd.
- `args_prefix` (optional): the arguments start with exactly these strings.
- `args_match` (optional): every argument after the prefix fully matches one of these
  regular expressions (an empty list allows no further arguments).
- `args_any` (optional): at least one argument fully matches one of these expressions
  (for deny rules such as `rm` with `-r`).
- `args_max` (optional): at most this many arguments.

An allow rule may also set `timeout_ms_max`, `writable_cwd` (default false) and `env`
(names whose values are copied from the server's environment into the run's environment).
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

__all__ = [
    "CEILING_MS",
    "DEFAULT_HOST_DIRS",
    "Decision",
    "HostView",
    "Policy",
    "PolicyError",
    "Request",
    "Rule",
    "evaluate",
    "parse_policy",
]

# The envelope's run ceiling; a policy may raise it only by saying so (`timeout_ms_ceiling`).
CEILING_MS = 10_000
# Host system directories shown read-only to every run unless the policy names its own.
DEFAULT_HOST_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc")
# Paths the envelope builds itself; neither a working directory nor a host dir may live there.
_RESERVED = ("/proc", "/dev", "/sys")
_RULE_KEYS = frozenset(
    {
        "name",
        "decision",
        "argv0",
        "cwd",
        "args_prefix",
        "args_match",
        "args_any",
        "args_max",
        "timeout_ms_max",
        "writable_cwd",
        "env",
    }
)
_TOP_KEYS = frozenset({"version", "search_path", "host_dirs", "timeout_ms_ceiling", "rule"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PROGRAM_NAME = re.compile(r"[^/\x00]{1,255}")
# The variables jarvis sets in every run itself (`planner.py`), which no rule may replace.
_FIXED_ENV = {
    "PATH": "every run's PATH is the policy's search_path, where its programs were "
    "looked up, so that a bare name it runs resolves as the rules did",
    "LANG": "jarvis sets every run's LANG to C.UTF-8 itself, so that its programs write "
    "UTF-8 whatever the server's locale",
}


class PolicyError(ValueError):
    """Raised when a rule file cannot be used; the message names the file, rule and key."""


class HostView(Protocol):
    """What evaluation may learn about the host: resolved paths, nothing else."""

    def realpath(self, path: str) -> str | None:
        """The fully resolved path of an existing file or directory, else None."""
        ...

    def is_dir(self, path: str) -> bool:
        """Whether `path` (already resolved) is a directory."""
        ...

    def is_executable(self, path: str) -> bool:
        """Whether `path` is a regular file the server could execute."""
        ...


class Rule(msgspec.Struct, frozen=True):
    """One `[[rule]]` table, validated."""

    name: str
    decision: Literal["allow", "deny"]
    argv0: tuple[str, ...]
    cwd: tuple[str, ...] | None = None
    args_prefix: tuple[str, ...] = ()
    args_match: tuple[str, ...] | None = None
    args_any: tuple[str, ...] | None = None
    args_max: int | None = None
    timeout_ms_max: int | None = None
    writable_cwd: bool = False
    env: tuple[str, ...] = ()


class Policy(msgspec.Struct, frozen=True):
    """A whole rule file, validated: rules in order plus the fixed execution settings."""

    rules: tuple[Rule, ...]
    search_path: tuple[str, ...] = ()
    host_dirs: tuple[str, ...] = DEFAULT_HOST_DIRS
    timeout_ms_ceiling: int = CEILING_MS


class Request(msgspec.Struct, frozen=True):
    """A validated `{argv, cwd?, timeout_ms?}` argument object."""

    argv: tuple[str, ...]
    cwd: str | None = None
    timeout_ms: int | None = None


class Decision(msgspec.Struct, frozen=True):
    """The outcome of evaluation; `program`, `executable`, `cwd`, `timeout_ms` only for allow.

    `program` is the program as named (its `argv[0]`, which a multi-call binary reads);
    `executable` its fully resolved path, the one the rules matched and the run executes;
    `cwd` the fully resolved working directory. Both are run exactly as resolved here: the
    envelope follows no symlink in them (`jigcmd.envelope.exact`).
    """

    decision: Literal["allow", "deny"]
    reason: str
    matched_rule: str | None
    program: str | None = None
    executable: str | None = None
    cwd: str | None = None
    timeout_ms: int | None = None
    writable_cwd: bool = False
    env: tuple[str, ...] = ()


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse and validate a rule file; raises `PolicyError` naming the exact place."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{source}: not valid TOML: {exc}") from exc
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise PolicyError(f"{source}: unknown top-level key {unknown[0]!r}")
    if raw.get("version", 1) != 1:
        raise PolicyError(f"{source}: version must be 1")
    search_path = _abs_list(raw.get("search_path", []), f"{source}: search_path")
    host_dirs = _abs_list(raw.get("host_dirs", list(DEFAULT_HOST_DIRS)), f"{source}: host_dirs")
    for path in host_dirs:
        _host_dir(path, source)
    ceiling = raw.get("timeout_ms_ceiling", CEILING_MS)
    if not _positive_int(ceiling):
        raise PolicyError(f"{source}: timeout_ms_ceiling must be a positive integer")
    tables = raw.get("rule", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise PolicyError(f"{source}: `rule` must be an array of tables ([[rule]])")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        rule = _rule(table, f"{source}: rule[{index}]", search_path)
        if rule.name in seen:
            raise PolicyError(f"{source}: rule[{index}]: duplicate rule name {rule.name!r}")
        _within_ceiling(rule, ceiling, f"{source}: rule[{index}] ({rule.name!r})", raw)
        seen.add(rule.name)
        rules.append(rule)
    return Policy(
        rules=tuple(rules),
        search_path=search_path,
        host_dirs=host_dirs,
        timeout_ms_ceiling=ceiling,
    )


def _within_ceiling(rule: Rule, ceiling: int, where: str, raw: Mapping[str, Any]) -> None:
    """Refuse a rule cap no run could reach: the policy's ceiling cuts every run first."""
    if rule.timeout_ms_max is None or rule.timeout_ms_max <= ceiling:
        return
    whose = "" if "timeout_ms_ceiling" in raw else " (the default; the policy sets none)"
    raise PolicyError(
        f"{where}: timeout_ms_max = {rule.timeout_ms_max} is above the policy's "
        f"timeout_ms_ceiling = {ceiling}{whose}: every run is cut to the ceiling, so no "
        f"call could have the {rule.timeout_ms_max} ms the rule promises. Lower "
        f"timeout_ms_max to at most {ceiling}, or raise the ceiling explicitly with "
        f"top-level timeout_ms_ceiling = {rule.timeout_ms_max}"
    )


def _host_dir(path: str, source: str) -> None:
    """Refuse a host dir the envelope cannot show: one in a tree it makes itself.

    (`/` never gets here: `_abs_list` refuses it by name.)
    """
    # The envelope mounts its own /proc, /dev, /sys and an empty scratch /tmp over these.
    own = [root for root in (*_RESERVED, "/tmp") if _under_any(path, (root,))]  # noqa: S108 - a path compared, no file made there
    if own:
        raise PolicyError(
            f"{source}: host_dirs: {path!r} lies in {own[0]}, which the envelope makes anew "
            "for every run (its own /proc, /dev and /sys, and an empty scratch /tmp), so no "
            "host directory there can be shown to a run. Move what runs need to a directory "
            "outside /proc, /dev, /sys and /tmp (e.g. under /opt or /srv) and list that; a "
            "directory a run works in is a rule's cwd, not a host dir"
        )


def _rule(table: Mapping[str, Any], where: str, search_path: Sequence[str]) -> Rule:
    unknown = sorted(set(table) - _RULE_KEYS)
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r}")
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PolicyError(f"{where}: name must match {_NAME.pattern}")
    where = f"{where} ({name!r})"
    decision = table.get("decision")
    if decision not in ("allow", "deny"):
        raise PolicyError(f'{where}: decision must be "allow" or "deny"')
    argv0 = _argv0(table.get("argv0"), where, search_path)
    cwd = _cwd(table["cwd"], where) if "cwd" in table else None
    args_prefix = _str_list(table.get("args_prefix", []), f"{where}: args_prefix")
    args_match = _regex_list(table, "args_match", where)
    args_any = _regex_list(table, "args_any", where)
    args_max = table.get("args_max")
    if args_max is not None and not (isinstance(args_max, int) and args_max >= 0):
        raise PolicyError(f"{where}: args_max must be a non-negative integer")
    timeout = table.get("timeout_ms_max")
    if timeout is not None and not _positive_int(timeout):
        raise PolicyError(f"{where}: timeout_ms_max must be a positive integer")
    writable = table.get("writable_cwd", False)
    if not isinstance(writable, bool):
        raise PolicyError(f"{where}: writable_cwd must be true or false")
    if writable and cwd is None:
        raise PolicyError(f"{where}: writable_cwd needs a cwd list")
    env = _env(table.get("env", []), where)
    if decision == "deny" and (timeout is not None or writable or env):
        raise PolicyError(f"{where}: a deny rule takes no timeout_ms_max, writable_cwd or env")
    return Rule(
        name=name,
        decision=decision,
        argv0=argv0,
        cwd=cwd,
        args_prefix=args_prefix,
        args_match=args_match,
        args_any=args_any,
        args_max=args_max,
        timeout_ms_max=timeout,
        writable_cwd=writable,
        env=env,
    )


def _argv0(value: object, where: str, search_path: Sequence[str]) -> tuple[str, ...]:
    """A rule's programs: normalised absolute paths, or bare names found on `search_path`."""
    argv0 = _str_list(value, f"{where}: argv0")
    if not argv0:
        raise PolicyError(f"{where}: argv0 must name at least one program")
    for program in argv0:
        if program.startswith("/"):
            if posixpath.normpath(program) != program:
                raise PolicyError(f"{where}: argv0 {program!r} is not a normalised path")
        elif not _PROGRAM_NAME.fullmatch(program) or program in (".", ".."):
            raise PolicyError(f"{where}: argv0 {program!r} is neither a name nor absolute")
        elif not search_path:
            raise PolicyError(
                f"{where}: argv0 {program!r} is a bare name but the policy has no search_path"
            )
    return argv0


def _cwd(value: object, where: str) -> tuple[str, ...]:
    """A rule's working directory prefixes: absolute, none of them a root or reserved."""
    cwd = _abs_list(value, f"{where}: cwd")
    if not cwd:
        raise PolicyError(f"{where}: cwd, when given, must list at least one directory")
    for prefix in cwd:
        if _under_any(prefix, _RESERVED) or prefix == "/":
            raise PolicyError(f"{where}: cwd {prefix!r} may not be a working directory root")
    return cwd


def _env(value: object, where: str) -> tuple[str, ...]:
    """The host variables a rule passes on: names only, never the server's own."""
    env = _str_list(value, f"{where}: env")
    for var in env:
        if not _ENV_NAME.fullmatch(var):
            raise PolicyError(f"{where}: env name {var!r} is not a variable name")
        # The server's own secrets live in JARVIS_*; no rule may hand them to a program.
        if var.upper().startswith("JARVIS_"):
            raise PolicyError(
                f"{where}: env may not pass {var!r}: JARVIS_* variables hold the server's "
                "own settings and secrets (its bearer token among them)"
            )
        if var in _FIXED_ENV:
            raise PolicyError(f"{where}: env may not pass {var!r}: {_FIXED_ENV[var]}")
    return env


def evaluate(policy: Policy, request: Request, host: HostView) -> Decision:
    """First matching rule decides; no match (or an unresolvable program or cwd) denies."""
    name = request.argv[0]
    program = _resolve_program(name, policy.search_path, host)
    if program is None:
        where = "" if name.startswith("/") else " in the policy's search_path"
        return _deny(f"program {name!r} is not an executable file{where}")
    cwd: str | None = None
    if request.cwd is not None:
        cwd = host.realpath(request.cwd)
        if cwd is None or not host.is_dir(cwd):
            return _deny(f"cwd {request.cwd!r} is not an existing directory")
        if _under_any(cwd, (*_RESERVED, *policy.host_dirs)):
            return _deny(f"cwd {cwd!r} lies in a directory the envelope provides itself")
    for rule in policy.rules:
        if not _matches(
            rule,
            policy=policy,
            program=program,
            name=name,
            cwd=cwd,
            args=request.argv[1:],
            host=host,
        ):
            continue
        if rule.decision == "deny":
            return Decision("deny", f"denied by rule {rule.name!r}", rule.name)
        hidden = _hidden(program, (*policy.host_dirs, *((cwd,) if cwd is not None else ())))
        if hidden is not None:
            return Decision("deny", f"rule {rule.name!r} matched, but {hidden}", rule.name)
        cap = min(rule.timeout_ms_max or policy.timeout_ms_ceiling, policy.timeout_ms_ceiling)
        timeout = min(request.timeout_ms or cap, cap)
        return Decision(
            "allow",
            f"allowed by rule {rule.name!r}",
            rule.name,
            program=program[0],
            executable=program[1],
            cwd=cwd,
            timeout_ms=timeout,
            writable_cwd=rule.writable_cwd,
            env=rule.env,
        )
    return _deny("no rule matched (default deny)")


def _hidden(program: tuple[str, str], visible: Sequence[str]) -> str | None:
    """Why the envelope cannot show the program (as named, resolved), or None when it can.

    Both paths must lie in what the envelope shows (deny by default): the file it executes,
    and the path the caller named it by, which the run keeps as `argv[0]`. The reason says
    which one is outside, naming what the program resolves to.
    """
    named, real = program
    if not _under_any(real, visible):
        what = f"program {named!r}" + (f" resolves to {real!r}, which" if real != named else "")
        return f"{what} is outside host_dirs and cwd, so the envelope cannot show it"
    if not _under_any(named, visible):
        return (
            f"program {named!r} is named by a path outside host_dirs and cwd (it resolves to "
            f"{real!r}, which the envelope shows): call it by that path"
        )
    return None


def _deny(reason: str) -> Decision:
    return Decision("deny", reason, None)


def _resolve_program(
    name: str, search_path: Sequence[str], host: HostView
) -> tuple[str, str] | None:
    """(the path as named, its real path) for a bare name or an absolute path."""
    if name.startswith("/"):
        path = posixpath.normpath(name)
        candidates: Sequence[str] = (path,)
    elif "/" in name or name in (".", "..") or not name:
        return None
    else:
        candidates = [posixpath.join(directory, name) for directory in search_path]
    for candidate in candidates:
        real = host.realpath(candidate)
        if real is not None and host.is_executable(real):
            return candidate, real
    return None


def _matches(
    rule: Rule,
    *,
    policy: Policy,
    program: tuple[str, str],
    name: str,
    cwd: str | None,
    args: Sequence[str],
    host: HostView,
) -> bool:
    base = posixpath.basename(name)
    for entry in rule.argv0:
        if posixpath.basename(entry) != base:
            continue
        resolved = _resolve_program(entry, policy.search_path, host)
        if resolved is not None and resolved[1] == program[1]:
            break
    else:
        return False
    if rule.cwd is None:
        if cwd is not None and rule.decision == "allow":
            return False
    else:
        if cwd is None:
            return False
        prefixes = [real for p in rule.cwd if (real := host.realpath(p)) is not None]
        if not _under_any(cwd, prefixes):
            return False
    if rule.args_max is not None and len(args) > rule.args_max:
        return False
    if tuple(args[: len(rule.args_prefix)]) != rule.args_prefix:
        return False
    rest = args[len(rule.args_prefix) :]
    if rule.args_match is not None and not all(
        any(re.fullmatch(p, arg) for p in rule.args_match) for arg in rest
    ):
        return False
    return rule.args_any is None or any(re.fullmatch(p, arg) for p in rule.args_any for arg in args)


def _under_any(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _str_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where} must be a list of strings")
    if any("\x00" in v for v in value):
        raise PolicyError(f"{where} may not contain NUL")
    return tuple(value)


def _abs_list(value: object, where: str) -> tuple[str, ...]:
    paths = _str_list(value, where)
    for path in paths:
        if path == "/":
            raise PolicyError(
                f"{where}: '/' is the whole host, which jarvis never shows or searches: name "
                "the directories themselves (e.g. '/usr/bin', '/opt/tools')"
            )
        if (
            not path.startswith("/")
            or posixpath.normpath(path) != path.rstrip("/")
            or path.endswith("/")
        ):
            raise PolicyError(f"{where}: {path!r} must be an absolute, normalised path")
    return paths


def _regex_list(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    if key not in table:
        return None
    patterns = _str_list(table[key], f"{where}: {key}")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PolicyError(f"{where}: {key} pattern {pattern!r}: {exc}") from exc
    return patterns
