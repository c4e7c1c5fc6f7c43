"""Turn a validated request into a frozen `RunPlan`: exact Bun argv, environment, deadline."""

from __future__ import annotations

from collections.abc import Sequence

from jigcmd.plan import CANDIDATE_ROOT, Bind, Limits, RunPlan

__all__ = [
    "BUN_ENV",
    "BUN_FLAGS",
    "CEILING_SECONDS",
    "bun_argv",
    "candidate_plan",
    "effective_deadline",
]

# Bun's fixed posture: no .env loading, no auto-install, no bunfig.toml (so no preloads).
BUN_FLAGS = ("--no-env-file", "--no-install", "--config=/dev/null")
# Nothing but what the runtime needs: no PATH, no HOME, no credentials. The transpiler cache
# would otherwise be written for large sources.
BUN_ENV = (("BUN_RUNTIME_TRANSPILER_CACHE_PATH", "0"),)
CEILING_SECONDS = 10.0


def bun_argv(bun: str, kind: str, paths: Sequence[str], args: Sequence[str]) -> tuple[str, ...]:
    """The real argv inside the envelope; `./` makes test paths paths, not name filters."""
    if kind == "run":
        # Everything after the entrypoint reaches the script verbatim, never Bun's options.
        return (bun, *BUN_FLAGS, "./" + paths[0], *args)
    return (bun, "test", *BUN_FLAGS, *("./" + path for path in paths))


def effective_deadline(
    now_monotonic: float,
    now_unix_ms: int,
    *deadlines_unix_ms: int | None,
    ceiling: float = CEILING_SECONDS,
) -> float:
    """min(every given Unix-ms deadline, now + ceiling), as a CLOCK_MONOTONIC time.

    Computed before setup, so setup time counts against it.
    """
    deadline = now_monotonic + ceiling
    for unix_ms in deadlines_unix_ms:
        if unix_ms is not None:
            deadline = min(deadline, now_monotonic + (unix_ms - now_unix_ms) / 1000)
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
) -> RunPlan:
    """The plan for one Bun command against an exact candidate tree, pinned to `cpus`."""
    return RunPlan(
        profile="candidate",
        argv=bun_argv(bun, kind, paths, args),
        env=BUN_ENV,
        cwd=CANDIDATE_ROOT,
        binds=runtime_binds,
        files=files,
        stdin=stdin.encode("utf-8"),
        limits=limits or Limits(),
        deadline=deadline,
        label=label,
        cpus=cpus,
    )
