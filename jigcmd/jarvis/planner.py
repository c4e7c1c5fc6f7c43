"""Turn an allow decision into a frozen host-profile `RunPlan`. Pure.

The run sees the policy's host directories read-only at their own paths (a symlinked one,
such as `/bin → usr/bin` on merged-/usr systems, is bound from its real directory), its
working directory at its own path (read-only unless the rule makes it writable), a fresh
scratch `/tmp`, and a fixed environment: `PATH` = the policy's search path, `LANG`, and the
rule's allow-listed variables copied from the server's environment.
"""

from __future__ import annotations

from collections.abc import Mapping

from jigcmd.jarvis.policy import Decision, HostView, Policy
from jigcmd.plan import Bind, Limits, RunPlan

__all__ = ["SCRATCH_CWD", "host_plan", "system_binds"]

# Where a run without a `cwd` starts: the envelope's empty, private scratch directory.
SCRATCH_CWD = "/tmp"  # noqa: S108 - the envelope's own private tmpfs, not the host's /tmp
_FIXED_ENV = (("LANG", "C.UTF-8"),)


def system_binds(policy: Policy, host: HostView) -> tuple[Bind, ...]:
    """Read-only binds of the policy's host directories that exist, symlinks resolved."""
    binds: list[Bind] = []
    for target in policy.host_dirs:
        source = host.realpath(target)
        if source is not None and host.is_dir(source):
            binds.append(Bind(source=source, target=target))
    return tuple(binds)


def host_plan(
    decision: Decision,
    *,
    policy: Policy,
    argv: tuple[str, ...],
    binds: tuple[Bind, ...],
    host_env: Mapping[str, str],
    now_monotonic: float,
    limits: Limits | None = None,
    label: str = "jarvis",
) -> RunPlan:
    """The plan for one allowed run: `argv[0]` names the program as found on the search
    path, and the plan executes its resolved path (`program`), which is what the rules
    matched; the cwd is bound from its resolved path. The envelope follows no symlink in
    either (`RunPlan`), so a link swapped in after the check cannot change what runs."""
    if (
        decision.decision != "allow"
        or decision.program is None
        or decision.executable is None
        or decision.timeout_ms is None
    ):
        raise ValueError("only an allow decision with a resolved program can be planned")
    env = list(_FIXED_ENV)
    if policy.search_path:
        env.insert(0, ("PATH", ":".join(policy.search_path)))
    env.extend((name, host_env[name]) for name in decision.env if name in host_env)
    all_binds = binds
    if decision.cwd is not None:
        all_binds = (*binds, Bind(decision.cwd, decision.cwd, writable=decision.writable_cwd))
    return RunPlan(
        profile="host",
        argv=(decision.program, *argv[1:]),
        env=tuple(env),
        cwd=decision.cwd or SCRATCH_CWD,
        binds=all_binds,
        files=(),
        stdin=b"",
        limits=limits or Limits(),
        # Computed before any setup, so setup time counts against the run's budget.
        deadline=now_monotonic + decision.timeout_ms / 1000,
        label=label,
        program=decision.executable,
    )
