"""Turn a validated request into a frozen `RunPlan`: exact Bun argv, environment, deadline."""

from __future__ import annotations

from collections.abc import Sequence

from jigcmd.plan import CANDIDATE_ROOT, Bind, Limits, RunPlan, ScratchFile
from jigcmd.protocol.junit import REPORT_MAX_BYTES, REPORT_NAME

__all__ = [
    "BUN_ENV",
    "BUN_FLAGS",
    "BUN_TEST_ENV",
    "CEILING_SECONDS",
    "JUNIT_FLAGS",
    "bun_argv",
    "candidate_plan",
    "effective_deadline",
    "ran_argv",
    "unix_deadline_ms",
]

# Bun's fixed posture: no .env loading, no auto-install, no bunfig.toml (so no preloads).
BUN_FLAGS = ("--no-env-file", "--no-install", "--config=/dev/null")
# Nothing but what the runtime needs: no PATH, no HOME, no credentials. The transpiler cache
# would otherwise be written for large sources.
BUN_ENV = (("BUN_RUNTIME_TRANSPILER_CACHE_PATH", "0"),)
# `bun test` in CI mode: a snapshot it would have to write (a new `.snap`, an empty
# `toMatchInlineSnapshot()`) fails the test instead of passing unwritten, and `test.only`
# fails instead of silently skipping the rest (docs/envelope.md, "CI mode").
BUN_TEST_ENV = (("CI", "true"),)
CEILING_SECONDS = 10.0


# Bun's JUnit reporter, writing into the envelope's scratch (outside the sealed /work). Only
# the last `--reporter` applies, so this is the only one.
JUNIT_FLAGS = ("--reporter=junit", f"--reporter-outfile=/tmp/{REPORT_NAME}")


def bun_argv(
    bun: str, kind: str, paths: Sequence[str], args: Sequence[str], *, junit: bool = False
) -> tuple[str, ...]:
    """The real argv inside the envelope; `./` makes test paths paths, not name filters."""
    if kind == "run":
        # Everything after the entrypoint reaches the script verbatim, never Bun's options.
        return (bun, *BUN_FLAGS, "./" + paths[0], *args)
    reporter = JUNIT_FLAGS if junit else ()
    return (bun, "test", *BUN_FLAGS, *reporter, *("./" + path for path in paths))


def ran_argv(invocation: Sequence[str], *, junit: bool) -> tuple[str, ...]:
    """The argv that ran for an evidence's logical `invocation` (`bun` names the runtime).

    A test command's invocation is `bun test PATH…`; a run command's entry point ends in
    `.ts` or `.js`, so it is never `test`.
    """
    if len(invocation) < 2:
        return tuple(invocation)
    if invocation[1] == "test":
        return bun_argv("bun", "test", invocation[2:], (), junit=junit)
    return bun_argv("bun", "run", invocation[1:2], invocation[2:])


def effective_deadline(
    now_monotonic: float,
    now_unix_ms: int,
    *deadlines_unix_ms: int | None,
    ceiling: float = CEILING_SECONDS,
) -> float:
    """min(every given Unix-ms deadline, now + ceiling), as a CLOCK_MONOTONIC time.

    Computed before setup, so setup time counts against it.
    """
    unix_ms = unix_deadline_ms(now_unix_ms, *deadlines_unix_ms, ceiling=ceiling)
    return now_monotonic + (unix_ms - now_unix_ms) / 1000


def unix_deadline_ms(
    now_unix_ms: int, *deadlines_unix_ms: int | None, ceiling: float = CEILING_SECONDS
) -> float:
    """min(every given Unix-ms deadline, now + ceiling), in Unix ms.

    The clock the callers' deadlines are given in: two deadlines are compared here, never
    as monotonic times converted at different moments (each conversion reads two clocks,
    and the same deadline comes out a fraction of a millisecond apart).
    """
    deadline = now_unix_ms + ceiling * 1000
    for unix_ms in deadlines_unix_ms:
        if unix_ms is not None:
            deadline = min(deadline, unix_ms)
    return deadline


def candidate_plan(
    *,
    bun: str,
    runtime_binds: tuple[Bind, ...],
    kind: str,
    paths: Sequence[str],
    args: Sequence[str],
    files: tuple[tuple[str, str], ...],
    stdin: str,
    deadline: float,
    limits: Limits | None = None,
    label: str = "run",
    cpus: tuple[int, ...] = (),
    junit: bool = False,
) -> RunPlan:
    """The plan for one Bun command against an exact candidate tree, pinned to `cpus`.

    With `junit`, a test command also has Bun write its JUnit report to the scratch, and the
    plan names it for the envelope to read back after the run.
    """
    junit = junit and kind == "test"
    return RunPlan(
        profile="candidate",
        argv=bun_argv(bun, kind, paths, args, junit=junit),
        env=BUN_ENV + BUN_TEST_ENV if kind == "test" else BUN_ENV,
        cwd=CANDIDATE_ROOT,
        binds=runtime_binds,
        files=files,
        stdin=stdin.encode("utf-8"),
        limits=limits or Limits(),
        deadline=deadline,
        label=label,
        cpus=cpus,
        scratch_file=ScratchFile(REPORT_NAME, REPORT_MAX_BYTES) if junit else None,
    )
