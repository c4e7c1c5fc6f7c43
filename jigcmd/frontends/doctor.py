"""`jigcmd doctor`: can this machine build the containment envelope? One line per check, with fixes.

Each check stands alone (a failing one never hides the next), the forked probes really do
what the envelope does, and the last check runs `bun ./x.ts` through a real envelope. The
exit status is 1 when any check fails: then no command could run (jigcmd fails closed).
"""

from __future__ import annotations

import contextvars
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from jigcmd.envelope import cgroupbase
from jigcmd.frontends.diagnosis import (
    container,
    containerfacts,
    hostfacts,
    hostidcheck,
    probes,
    usernsgate,
)
from jigcmd.frontends.diagnosis.delegation import delegation_check
from jigcmd.frontends.diagnosis.endtoend import probe_under
from jigcmd.frontends.diagnosis.procgate import proc_verdict
from jigcmd.frontends.diagnosis.report import render
from jigcmd.frontends.diagnosis.usernsgate import userns_verdict
from jigcmd.frontends.diagnosis.verdicts import (
    Check,
    cgroup_check,
    end_to_end_check,
    kernel_check,
    network_check,
    oom_score_check,
    platform_check,
    privilege_check,
    runtime_check,
    seccomp_check,
)
from jigcmd.jsonio import readable

__all__ = ["doctor", "run_checks"]

_E2E_SECONDS = 10.0


def _status_field(status: str | None, field: str) -> str | None:
    """One `Name:\tvalue` field of /proc/self/status text."""
    for line in (status or "").splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return value.strip()
    return None


def _platform() -> Check:
    check = platform_check(platform.system(), platform.machine())
    if check.ok:
        from jigcmd.envelope.syscalls import syscall_number  # noqa: PLC0415 - Linux only

        syscall_number("unshare")
    return check


def _privileges() -> Check:
    cap_eff = _status_field(probes.read_text("/proc/self/status"), "CapEff") or "0"
    return privilege_check(os.geteuid(), int(cap_eff, 16))


def _delegation() -> Check:
    """Rootless only: every step of the delegated cgroup subtree (see diagnosis/delegation)."""
    if os.geteuid() == 0:
        return Check("delegation", "ok", "not needed: running as root")
    from jigcmd.envelope import cgroups  # noqa: PLC0415 - Linux only

    try:
        mode = cgroups.detect().mode
    except (OSError, ValueError) as exc:
        return Check("delegation", "FAIL", f"no cgroup hierarchy to delegate: {exc}")
    return delegation_check(hostfacts.delegation_facts(mode, containerfacts.engine()))


def _rootless_without_delegation(exc: Exception) -> bool:
    """The failure is the missing delegation, which the delegation check words (once)."""
    from jigcmd.envelope.delegation import DelegationError  # noqa: PLC0415 - Linux only

    return os.geteuid() != 0 and isinstance(exc, DelegationError)


_SEE_DELEGATION = "no usable delegated cgroup subtree (the delegation check names the missing step)"
_SEE_PROCFS = "/proc is not a full procfs (the procfs check names the fix)"


def _oom_score() -> Check:
    status = probes.read_text("/proc/self/status")
    cap_eff = _status_field(status, "CapEff") or "0"
    cap_bnd = _status_field(status, "CapBnd")
    return oom_score_check(
        os.geteuid(),
        int(cap_eff, 16),
        None if cap_bnd is None else int(cap_bnd, 16),
        in_container=containerfacts.engine() is not None,
    )


def _network() -> Check:
    error = probes.probe_network()
    return network_check(
        error, os.geteuid(), usernsgate.effective_capabilities(), usernsgate.namespace_limits()
    )


def _namespaces() -> Check:
    return usernsgate.namespaces_verdict()


def _container() -> Check:
    engine = containerfacts.engine()
    if engine is None:
        return container.container_check(None, ())
    pieces = containerfacts.withheld(engine, userns_ok=probes.probe_userns() is None)
    return container.container_check(engine, pieces)


def _cgroups() -> Check:
    from jigcmd.envelope import owncgroup  # noqa: PLC0415 - Linux only
    from jigcmd.envelope.cgroups.v1 import V1Backend  # noqa: PLC0415 - Linux only
    from jigcmd.envelope.cgroups.v2 import V2Backend, enabling  # noqa: PLC0415 - Linux only
    from jigcmd.envelope.delegation import DelegationError, resolve_backend  # noqa: PLC0415 - Linux only

    try:
        backend, _ = resolve_backend(move_self=False)
    except (OSError, ValueError) as exc:
        if _rootless_without_delegation(exc):
            return Check("cgroups", "FAIL", f"not checked: {_SEE_DELEGATION}")
        if isinstance(exc, DelegationError):
            # Root's configured base that cannot be one: its words say what a base is here.
            return Check("cgroups", "FAIL", str(exc))
        return cgroup_check(None, (), [str(exc)])
    bases: list[str] = []
    if isinstance(backend, V2Backend):
        bases.append(backend.base_path)
    elif isinstance(backend, V1Backend):
        # One line for every v1 controller directory: they share the base name.
        bases.append(
            os.path.join(
                os.path.dirname(next(iter(backend.hierarchies.values()))),
                "<controller>",
                backend.base,
            )
        )
        if backend.unified is not None:
            bases.append(os.path.join(backend.unified, backend.base))
    # In a container the fix is the engine's option (a remount there is refused as busy).
    in_container = containerfacts.cgroup_fix()
    read_only = owncgroup.read_only_mount(backend)
    if read_only is not None:
        # Named with its fix, not the problem's words twice.
        where = f"{backend.mode}, jobs under {', '.join(bases)}"
        reason = owncgroup.read_only_reason(read_only)
        fix = in_container or owncgroup.read_only_fix(read_only)
        return Check("cgroups", "FAIL", f"{where}: {reason}", fix)
    changes = backend.host_changes() if isinstance(backend, V2Backend) else []
    enables = enabling(changes) if changes else None
    return cgroup_check(backend.mode, bases, backend.problems(), enables, fix=in_container)


def _seccomp() -> Check:
    from jigcmd.envelope import seccomp  # noqa: PLC0415 - Linux only

    mode = _status_field(probes.read_text("/proc/self/status"), "Seccomp")
    try:
        seccomp.build_filter()
    except (OSError, KeyError) as exc:
        return seccomp_check(mode, str(exc), None)
    return seccomp_check(mode, None, probes.probe_seccomp() if mode is not None else None)


def _runtime() -> Check:
    from jigcmd.command.runtime import RuntimeUnavailable, find_runtime  # noqa: PLC0415 - an import that fails fails this check alone

    try:
        runtime = find_runtime()
        version = runtime.version
        binds = runtime.binds
    except RuntimeUnavailable as exc:
        return runtime_check(None, None, None, str(exc))
    missing = [bind.source for bind in binds if not os.path.exists(bind.source)]
    if missing:
        return runtime_check(runtime.path, version, None, f"missing: {', '.join(missing)}")
    return runtime_check(runtime.path, version, len(binds), None)


async def _run_probe_plan() -> Check:
    from jigcmd.command.runtime import RuntimeUnavailable, find_runtime  # noqa: PLC0415 - an import that fails fails this check alone

    try:
        runtime = find_runtime()
        # A program that is not Bun would "run" the probe and fail it for no named reason.
        runtime.version  # noqa: B018 - the check, cached
        binds = runtime.binds
    except RuntimeUnavailable as exc:
        return end_to_end_check(None, None, "", f"not attempted: {exc}")
    from jigcmd.envelope.cgroupbase import absent_base_directories, remove_empty  # noqa: PLC0415 - Linux only
    from jigcmd.envelope.cgroups.v2 import V2Backend  # noqa: PLC0415 - Linux only
    from jigcmd.envelope.delegation import resolve_backend  # noqa: PLC0415 - Linux only

    try:
        backend, base = resolve_backend()
    except (OSError, ValueError) as exc:
        if _rootless_without_delegation(exc):
            return Check("end-to-end", "FAIL", f"not attempted: {_SEE_DELEGATION}")
        return end_to_end_check(None, None, "", f"not attempted: {exc}")
    if isinstance(backend, V2Backend) and backend.host_changes():
        # The probe would turn on what the operator turned off: the doctor only looks.
        return Check(
            "end-to-end",
            "warn",
            "not attempted: the probe run would enable controllers the host has off (the "
            "cgroups check names them), and the doctor changes nothing",
            "enable them as the cgroups check says (run, serve and jarvis do, saying so), "
            "then run the doctor again",
        )
    # The doctor only looks: a base the probe run makes goes with it (serve makes its own).
    made = absent_base_directories(backend)
    try:
        return await probe_under(base, binds, _STATE_DIR.get(), _E2E_SECONDS)
    finally:
        remove_empty(made)


def _end_to_end() -> Check:
    if not proc_verdict().ok:
        # Its steps would each fail on a bare ENOENT under /proc/sys.
        return Check("end-to-end", "FAIL", f"not attempted: {_SEE_PROCFS}")
    return anyio.run(_run_probe_plan)


# The state directory `doctor --state-dir` inspects (checks take no arguments).
_STATE_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("state_dir", default=None)


def _state() -> Check:
    """The journal: cleanups that could not be confirmed, runs left open, slots in use.

    It creates nothing: the directory and journal are read as they are (`jigcmd runs` reads
    them so too), and what serve and run would meet writing them is judged, not tried.
    """
    from jigcmd.durable.statedir import (  # noqa: PLC0415 - an import that fails fails this check alone
        StateDirError,
        checked_state_dir,
        default_state_dir,
        unmade_state_dir,
    )
    from jigcmd.frontends.diagnosis.statecheck import journal_check  # noqa: PLC0415 - an import that fails fails this check alone

    if not proc_verdict().ok:
        # The journal names processes by the boot id /proc/sys holds: it cannot be read.
        return Check("state", "warn", f"not checked: {_SEE_PROCFS}")
    explicit = _STATE_DIR.get()
    try:
        path = explicit or default_state_dir()
        # Not made yet (the default or --state-dir, which serve and run make alike): judged
        # as they would make it, failing with their reason.
        if unmade_state_dir(path) is not None:
            return Check(
                "state",
                "warn",
                f"{path} does not exist yet (nothing was created); serve and run create it "
                "0700 on first use",
            )
        return journal_check(checked_state_dir(path))
    except StateDirError as exc:
        return Check("state", "FAIL", exc.reason, exc.fix)


def _signing_key() -> Check:
    """The key serve and run would sign with, read as they read it; nothing made."""
    from jigcmd.frontends.diagnosis.keycheck import signing_key_check  # noqa: PLC0415 - an import that fails fails this check alone

    return signing_key_check(_STATE_DIR.get())


# The Binding `doctor --binding` checks, if one was given.
_BINDING: contextvars.ContextVar[Path | None] = contextvars.ContextVar("binding", default=None)


def _binding() -> Check:
    """The Binding (any form; a TypeScript one evaluated in an envelope) and its admission."""
    from jigcmd.command.assembly import default_lock_path, lock_runtime, locked_file  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.command.runtime import RuntimeUnavailable, find_runtime  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.command.scriptbinding import load_any_binding  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.policy.binding import BindingError  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.policy.lock import LockError, check_admission, decode_lock  # noqa: PLC0415 - an import that fails fails this check alone

    path = _BINDING.get()
    assert path is not None
    try:
        loaded = load_any_binding(path)
        runtime = lock_runtime(find_runtime())
    except (BindingError, RuntimeUnavailable) as exc:
        return Check("binding", "FAIL", str(exc), "fix the Binding; nothing of it is admitted")
    lock_path = default_lock_path(path)
    try:
        lock = decode_lock(lock_path.read_bytes(), source=str(lock_path))
    except FileNotFoundError:
        lock = None
    except (OSError, LockError) as exc:
        return Check("binding", "warn", str(exc), f"run `jigcmd lock --binding {path}`")
    admission = check_admission(
        loaded.binding,
        lock,
        runtime,
        lock_path=str(lock_path),
        binding_path=str(path),
        file=locked_file(loaded, lock_path),
        script=loaded.script,
    )
    form = "TypeScript, evaluated in an envelope" if loaded.script else "declarative"
    detail = (
        f"{path} ({form}): {len(loaded.binding.commands)} command(s), policy "
        f"{loaded.binding.digest()}"
    )
    if not admission.admitted:
        return Check("binding", "warn", f"{detail}; not admitted: {admission.reason}")
    return Check("binding", "ok", f"{detail}; admitted by {lock_path}")


# The jarvis policy `doctor --jarvis-policy` checks, if one was given.
_JARVIS_POLICY: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "jarvis_policy", default=None
)


def _jarvis_policy() -> Check:
    """The jarvis policy parses, others may write none of its directories, none holds a mount."""
    from jigcmd.envelope.cgroups import read_mounts  # noqa: PLC0415 - Linux only
    from jigcmd.jarvis.hostmounts import held_mounts, held_mounts_message  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.jarvis.hosttrust import untrusted_dirs_message  # noqa: PLC0415 - an import that fails fails this check alone
    from jigcmd.jarvis.policy import PolicyError, parse_policy  # noqa: PLC0415 - an import that fails fails this check alone

    path = _JARVIS_POLICY.get()
    assert path is not None
    try:
        policy = parse_policy(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, PolicyError) as exc:
        return Check("jarvis policy", "FAIL", str(exc), "fix the policy; jarvis refuses it")
    untrusted = untrusted_dirs_message(policy, str(path))
    if untrusted is not None:
        return Check(
            "jarvis policy",
            "FAIL",
            untrusted,
            "list only directories no one but root and jarvis's user may write; "
            "jarvis refuses to start with this policy",
        )
    held = held_mounts(policy.host_dirs, [m.point for m in read_mounts()], os.path.realpath)
    if held:
        return Check(
            "jarvis policy",
            "FAIL",
            held_mounts_message(str(path), held),
            "narrow host_dirs; jarvis refuses to start with this policy",
        )
    detail = f"{path}: {len(policy.rules)} rule(s); host_dirs {' '.join(policy.host_dirs)}"
    return Check(
        "jarvis policy",
        "ok",
        f"{detail} hold no mount; only root and jarvis's user may write them and search_path",
    )


# In order; the end-to-end run starts threads, so it comes after every forked probe.
_CHECKS: tuple[tuple[str, Callable[[], Check]], ...] = (
    ("platform", _platform),
    ("kernel", lambda: kernel_check(platform.release())),
    ("procfs", proc_verdict),
    ("privileges", _privileges),
    ("delegation", _delegation),
    ("oom score", _oom_score),
    ("container", _container),
    ("user namespaces", userns_verdict),
    (hostidcheck.NAME, hostidcheck.host_id_check),
    ("namespaces", _namespaces),
    ("cgroups", _cgroups),
    ("seccomp", _seccomp),
    ("network namespace", _network),
    ("bun runtime", _runtime),
    ("end-to-end", _end_to_end),
    ("state", _state),
    ("signing key", _signing_key),
)


def run_checks(
    state_dir: Path | None = None,
    binding: Path | None = None,
    jarvis_policy: Path | None = None,
) -> list[Check]:
    """Every check, each isolated: one that crashes becomes a FAIL line, the rest still run."""
    _STATE_DIR.set(state_dir)
    _BINDING.set(binding)
    _JARVIS_POLICY.set(jarvis_policy)
    results = []
    checks = _CHECKS if binding is None else (*_CHECKS, ("binding", _binding))
    if jarvis_policy is not None:
        checks = (*checks, ("jarvis policy", _jarvis_policy))
    for name, check in checks:
        try:
            results.append(check())
        except Exception as exc:  # noqa: BLE001 - a crashed check is a failed check, not a crashed doctor
            results.append(
                Check(
                    name,
                    "FAIL",
                    f"the check itself failed: {exc!r}",
                    "report this with the output of `jigcmd -v doctor`",
                )
            )
    return results


def doctor(
    *,
    as_json: bool = False,
    state_dir: Path | None = None,
    binding: Path | None = None,
    jarvis_policy: Path | None = None,
    cgroup_base: str | None = None,
) -> int:
    """Print the checks (a JSON list with `as_json`); 0 when the envelope can be built, else 1.

    With `binding`, a check loads that Binding and says whether its lock admits it; with
    `jarvis_policy`, the last check says whether jarvis would start with that policy here;
    `cgroup_base` is the base the checks judge, as `--cgroup-base` is serve's.
    """
    if cgroup_base is not None:
        # Each check reads the base where serve reads it when no option is given, and the
        # end-to-end run's zygote inherits it: the option is the variable for this process,
        # and refusals name the option.
        os.environ[cgroupbase.ENV] = cgroup_base
        cgroupbase.OPTION.set(cgroup_base)
    results = run_checks(state_dir, binding, jarvis_policy)
    if as_json:
        print(readable.dumps([result.as_json() for result in results], indent=2))
    else:
        print(render(results))
    sys.stdout.flush()
    return 0 if all(result.ok for result in results) else 1
