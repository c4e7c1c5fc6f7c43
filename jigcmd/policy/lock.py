"""Admission: the lock that pins a reviewed Binding, the contract and the Bun runtime.

`jigcmd lock` prints `review_text` and writes the lock; a server compares its Binding and
runtime with the lock (`check_admission`) and refuses to run commands on any drift.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import msgspec

from jigcmd.contract import CONTRACT_DIGEST, CONTRACT_ID, CONTRACT_VERSION
from jigcmd.jsonio import strict
from jigcmd.plan import Limits
from jigcmd.policy.binding import (
    Binding,
    BindingError,
    CommandPolicy,
    PolicyDocument,
    parse_binding,
)
from jigcmd.policy.planner import (
    BUN_ENV,
    BUN_FLAGS,
    BUN_TEST_ENV,
    CEILING_SECONDS,
    bun_argv,
)

__all__ = [
    "LOCK_VERSION",
    "Admission",
    "Drift",
    "Lock",
    "LockContract",
    "LockError",
    "LockRuntime",
    "LockedFile",
    "RuntimeIdentity",
    "build_lock",
    "check_admission",
    "check_policy",
    "check_runtime",
    "decode_lock",
    "encode_lock",
    "review_text",
]

LOCK_VERSION: Literal[1] = 1
# The per-envelope wall-clock ceiling (spec-notes §5); also what the review promises.

Drift = Literal["no-lock", "lock", "policy", "contract", "runtime"]


class LockError(ValueError):
    """Raised when a lock file cannot be decoded or contradicts itself.

    The message names the file and the problem; how to re-admit is each front's to say.
    """


class LockContract(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The contract identity a lock was admitted against."""

    id: str
    version: str
    digest: str


class LockRuntime(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The Bun runtime a lock was admitted with."""

    bun_version: str
    bun_sha256: str


class LockedFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The Binding file a lock admitted: its path from the lock's directory, and its bytes'.

    For a TypeScript Binding the bytes are its identity (what it yields is only known by
    running it), so any edit is drift; for TOML and JSON the canonical policy is.
    """

    path: str
    sha256: str


class Lock(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An admission: the canonical policy and its digest, the contract and the runtime."""

    lock_version: Literal[1]
    binding_digest: str
    policy: PolicyDocument
    contract: LockContract
    runtime: LockRuntime
    # Absent in locks written before it was recorded.
    binding_file: LockedFile | None = None


@dataclass(frozen=True)
class RuntimeIdentity:
    """The Bun runtime in use; `bun_sha256` may be a callable so hashing can be deferred."""

    bun_version: str
    bun_sha256: str | Callable[[], str]

    def sha256(self) -> str:
        """The binary hash, computed now if it was deferred."""
        return self.bun_sha256() if callable(self.bun_sha256) else self.bun_sha256


@dataclass(frozen=True)
class Admission:
    """Whether a Binding may run commands, and if not, exactly what drifted and how to fix it."""

    admitted: bool
    drift: Drift | None = None
    reason: str = ""


ADMITTED = Admission(admitted=True)


def build_lock(binding: Binding, runtime: RuntimeIdentity, file: LockedFile | None = None) -> Lock:
    """Pin a Binding (and the file it came from), the contract and the runtime into a lock."""
    return Lock(
        lock_version=LOCK_VERSION,
        binding_digest=binding.digest(),
        policy=binding.document(),
        contract=_contract(),
        runtime=LockRuntime(bun_version=runtime.bun_version, bun_sha256=runtime.sha256()),
        binding_file=file,
    )


def _contract() -> LockContract:
    return LockContract(id=CONTRACT_ID, version=CONTRACT_VERSION, digest=CONTRACT_DIGEST)


def encode_lock(lock: Lock) -> bytes:
    """Pretty, stable lock bytes: sorted keys, 2-space indent, trailing newline."""
    return msgspec.json.format(msgspec.json.encode(lock, order="sorted"), indent=2) + b"\n"


def decode_lock(data: bytes, *, source: str = "lock") -> Lock:
    """Decode and self-check lock bytes; raises LockError naming what is wrong."""
    try:
        raw = strict.loads(data)
    except strict.DuplicateKey as exc:
        raise LockError(f"{source}: duplicate key {exc.key!r}") from None
    except strict.StrictJSONError as exc:
        raise LockError(f"{source}: not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise LockError(f"{source}: a lock is a JSON object")
    version = raw.get("lockVersion")
    if version != LOCK_VERSION:
        raise LockError(
            f"{source}: unsupported lockVersion {version!r} (this jigcmd reads {LOCK_VERSION})"
        )
    try:
        lock = msgspec.convert(raw, type=Lock)
    except msgspec.ValidationError as exc:
        raise LockError(f"{source}: {exc}") from exc
    # The pinned policy must itself be a valid Binding and hash to the recorded digest;
    # otherwise the lock was edited by hand and proves nothing.
    try:
        pinned = parse_binding(msgspec.to_builtins(lock.policy), source=f"{source}#/policy")
    except BindingError as exc:
        raise LockError(f"{source}: the pinned policy is not a valid Binding: {exc}") from exc
    if pinned.digest() != lock.binding_digest:
        raise LockError(
            f"{source}: bindingDigest {lock.binding_digest} does not match the pinned policy "
            f"({pinned.digest()}): the lock was altered"
        )
    return lock


def _readmit(binding_path: str) -> str:
    return f"run `jigcmd lock --binding {binding_path}` to review and re-admit"


def check_policy(
    binding: Binding,
    lock: Lock | None,
    *,
    lock_path: str,
    binding_path: str,
    file: LockedFile | None = None,
    script: bool = False,
) -> Admission:
    """Compare the Binding (its `file`, for a `script` its bytes) and contract with the lock."""
    if lock is None:
        return Admission(
            admitted=False,
            drift="no-lock",
            reason=f"no lock at {lock_path}: run `jigcmd lock --binding {binding_path}` "
            "to review and admit",
        )
    moved = _file_drift(lock.binding_file, file, script=script)
    if moved is not None:
        return Admission(
            admitted=False, drift="policy", reason=f"{moved}; " + _readmit(binding_path)
        )
    if binding.digest() != lock.binding_digest:
        return Admission(
            admitted=False,
            drift="policy",
            reason=f"Binding changed since admission ({_policy_difference(binding, lock)}); "
            + _readmit(binding_path),
        )
    if lock.contract != _contract():
        admitted = lock.contract
        return Admission(
            admitted=False,
            drift="contract",
            reason=(
                "the Project Command contract differs from the admitted one "
                f"({CONTRACT_ID} {CONTRACT_VERSION} {CONTRACT_DIGEST} vs "
                f"{admitted.id} {admitted.version} {admitted.digest}); " + _readmit(binding_path)
            ),
        )
    return ADMITTED


def _file_drift(
    admitted: LockedFile | None, file: LockedFile | None, *, script: bool
) -> str | None:
    """Why the Binding file is not the one the lock admitted, if it is not."""
    if file is None:
        return None
    if admitted is None:
        if script:
            return "the lock records no Binding file, so it admitted no TypeScript Binding"
        return None
    if admitted.path != file.path:
        return f"the lock admitted the Binding {admitted.path!r}, not {file.path!r}"
    if script and admitted.sha256 != file.sha256:
        return (
            f"{file.path} changed since admission (now {file.sha256}, admitted {admitted.sha256})"
        )
    return None


def _policy_difference(binding: Binding, lock: Lock) -> str:
    current = binding.document()
    pinned = lock.policy
    if current.package != pinned.package:
        return f"package {current.package!r} differs from admitted {pinned.package!r}"
    differences: list[str] = [
        f"{field} differ"
        for field in ("settings", "slots")
        if getattr(current, field) != getattr(pinned, field)
    ]
    for name in sorted(set(current.commands) | set(pinned.commands)):
        if name not in pinned.commands:
            differences.append(f"command {name!r} added")
        elif name not in current.commands:
            differences.append(f"command {name!r} removed")
        elif current.commands[name] != pinned.commands[name]:
            differences.append(f"command {name!r} differs")
    return ", ".join(differences) or "digest differs"


def check_runtime(lock: Lock, runtime: RuntimeIdentity, *, binding_path: str) -> Admission:
    """Compare the runtime with the lock: the version first, the binary hash only if needed."""
    admitted = lock.runtime
    if runtime.bun_version == admitted.bun_version:
        sha256 = runtime.sha256()
        if sha256 == admitted.bun_sha256:
            return ADMITTED
    else:
        # A version mismatch is already decisive; do not pay for hashing the binary.
        sha256 = "(not hashed)"
    return Admission(
        admitted=False,
        drift="runtime",
        reason=(
            "Bun runtime differs from the admitted one "
            f"(now {runtime.bun_version} {sha256} vs admitted "
            f"{admitted.bun_version} {admitted.bun_sha256}); " + _readmit(binding_path)
        ),
    )


def check_admission(
    binding: Binding,
    lock: Lock | None,
    runtime: RuntimeIdentity,
    *,
    lock_path: str = "jigcmd.lock",
    binding_path: str = "binding.toml",
    file: LockedFile | None = None,
    script: bool = False,
) -> Admission:
    """Policy and contract first, then the runtime; the first drift found is reported."""
    admission = check_policy(
        binding, lock, lock_path=lock_path, binding_path=binding_path, file=file, script=script
    )
    if not admission.admitted or lock is None:
        return admission
    return check_runtime(lock, runtime, binding_path=binding_path)


def review_text(
    binding: Binding,
    runtime: RuntimeIdentity,
    *,
    slots: tuple[str, ...] = (),
    file: LockedFile | None = None,
) -> str:
    """The human review `jigcmd lock` prints before admitting a Binding."""
    limits = Limits()
    cpu = limits.cpu_quota_us / limits.cpu_period_us
    lines = [
        "jigcmd admission review",
        "",
        *([f"Binding:   {file.path} {file.sha256}"] if file is not None else []),
        f"Package:   {binding.package}"
        + (f" (capability slot: {', '.join(slots)})" if slots else ""),
        f"Contract:  {CONTRACT_ID} {CONTRACT_VERSION}",
        f"           {CONTRACT_DIGEST}",
        f"Runtime:   Bun {runtime.bun_version} {runtime.sha256()}",
        f"Policy:    {binding.digest()}",
        "",
    ]
    if binding.settings:
        lines.append(
            f"Settings:  {', '.join(sorted(binding.settings))} (for the Flow; none grants)"
        )
    if binding.slots:
        shown = ", ".join(f"{name} → {target}" for name, target in sorted(binding.slots.items()))
        lines.append(f"Slots:     {shown} (for the Flow; none grants)")
    if not binding.commands:
        lines.append("Commands:  none (this Binding grants nothing)")
    else:
        lines.append(f"Commands ({len(binding.commands)}), each run exactly as:")
        width = max(len(name) for name in binding.commands)
        for name, command in binding.commands.items():
            note = "" if command.accepts_args else "   (no arguments accepted)"
            lines.append(f"  {name:<{width}}  {command.kind:<4}  {_shown_argv(command)}{note}")
    lines += [
        "",
        "Every command runs in a fresh envelope:",
        f"  - Bun posture flags {' '.join(BUN_FLAGS)}:",
        "    .env files, bunfig.toml preloads and auto-install are inert",
        "  - the candidate's files only, read-only, as the working directory; no network;",
        "    environment only "
        + " ".join(f"{k}={v}" for k, v in BUN_ENV)
        + " (bun test also "
        + " ".join(f"{k}={v}" for k, v in BUN_TEST_ENV)
        + ", and Bun adds NODE_ENV=test;",
        "    no PATH, HOME or credentials)",
        f"  - limits: {limits.memory_bytes // (1024 * 1024)} MiB memory (no swap), "
        f"{limits.pids_max} tasks, {_cpu_words(cpu)} CPU, {CEILING_SECONDS:g} s",
        "  - stopped with SIGKILL to the whole process tree at the deadline",
    ]
    return "\n".join(lines) + "\n"


def _shown_argv(command: CommandPolicy) -> str:
    """The argv `command` runs with, on every front: a test command's with Bun's JUnit
    reporter (its per-test results, and the names its signed test result gives)."""
    if command.kind != "test":
        return " ".join(command.bun_argv("bun", ["<args…>"] if command.accepts_args else []))
    return " ".join(bun_argv("bun", command.kind, command.paths, (), junit=True))


def _cpu_words(fraction: float) -> str:
    return "half a" if fraction == 0.5 else f"{fraction:g} of a"
