"""A frozen execution plan: everything the envelope needs, decided before anything runs.

Policy (`jigcmd.policy`) builds plans; the envelope (`jigcmd.envelope`) executes them and
decides nothing. A plan is plain data, so it can be tested without root, hashed into the
journal and sent to the zygote and pid 1 in a control frame.

Its types are `NamedTuple`s, not msgspec Structs: every pid 1 is a clone of the zygote's
image, and msgspec with its imports would be most of it (`jigcmd.envelope.stdjson`). The
server still encodes and checks them with msgspec, which handles a NamedTuple as the array of
its fields (validated: types and length).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = [
    "CANDIDATE_ROOT",
    "Bind",
    "Limits",
    "RunPlan",
    "ScratchFile",
    "plan_digest",
]

# Where the candidate tree appears inside the envelope; also the working directory.
CANDIDATE_ROOT = "/work"


class Limits(NamedTuple):
    """Resource ceilings of one envelope."""

    memory_bytes: int = 256 * 1024 * 1024
    pids_max: int = 64
    cpu_quota_us: int = 50_000
    cpu_period_us: int = 100_000
    scratch_bytes: int = 64 * 1024 * 1024
    nofile: int = 256
    fsize_bytes: int = 64 * 1024 * 1024


class Bind(NamedTuple):
    """A host path made visible inside the envelope (read-only unless `writable`).

    `staged`: bound from a read-only copy on a tmpfs of jigcmd's (one per state directory), so
    that the candidate's mount table never names the host path (for the runtime's files).
    """

    source: str
    target: str
    writable: bool = False
    staged: bool = False


class ScratchFile(NamedTuple):
    """A file the candidate may write at `/tmp/<name>` (its scratch), read back after the run.

    `name` is one path component. The envelope reads at most `max_bytes` of a regular file
    there once every process of the run is gone, and never follows a link or waits on a
    FIFO: the candidate owns that directory, so what it holds is candidate-influenced.
    """

    name: str
    max_bytes: int


class RunPlan(NamedTuple):
    """One single-use envelope run.

    `profile` "candidate": a minimal root with the runtime binds and the candidate `files`
    written into an immutable tree at `CANDIDATE_ROOT`. `profile` "host": host system
    directories read-only (jarvis), with `binds` adding the working directory.

    A host plan names host paths a policy checked after resolving them, and another process
    may swap a symlink into one between that check and the run. So in a host plan every
    bind's source and the `program` are exact: fully resolved paths that the envelope opens
    without following any symlink (openat2 `RESOLVE_NO_SYMLINKS`), failing the run when one
    appeared in them or they are gone, instead of showing or running what a link now points
    to. A candidate plan's sources are jigcmd's own runtime files, opened as they are.
    """

    profile: Literal["candidate", "host"]
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cwd: str
    binds: tuple[Bind, ...]
    files: tuple[tuple[str, str], ...]
    stdin: bytes
    limits: Limits
    # Absolute CLOCK_MONOTONIC time (seconds) at which the whole tree is killed.
    deadline: float
    label: str = "run"
    # The host CPUs the candidate is pinned to (cpuset where the host offers it, and its
    # affinity mask in any case), so that what it reads as the CPU count is what its quota
    # pays for; chosen outside the envelope (`jigcmd.command.placement`). Empty: not pinned. Not
    # part of a prepared envelope's shape: applied at the go.
    cpus: tuple[int, ...] = ()
    # A report the runner writes in the scratch (Bun's JUnit file), returned with the outcome.
    # Not part of a prepared envelope's shape: read after the run.
    scratch_file: ScratchFile | None = None
    # The file to execute when it is not `argv[0]` (whose name a multi-call program such as
    # busybox reads): a host plan's program as the policy resolved it, an exact path (see
    # above). Empty: `argv[0]`. Not part of a prepared envelope's shape: sent with the go.
    program: str = ""


def plan_digest(plan: RunPlan) -> str:
    """A stable identity for a plan, for the journal."""
    # Imported here: the zygote imports this module, and every pid 1 is cloned from its
    # image; hashlib would bring OpenSSL's libcrypto into it, and msgspec its ~70 modules
    # (the server has both anyway).
    import hashlib  # noqa: PLC0415 - see the comment above

    import msgspec  # noqa: PLC0415 - likewise

    return "sha256:" + hashlib.sha256(msgspec.msgpack.encode(_as_map(plan))).hexdigest()


# Fields added after plan digests were first recorded, with their default: left out of the
# digest while they hold it, so that a plan which does not use one keeps its digest.
_LATER_FIELDS: dict[str, object] = {"program": ""}


def _as_map(value: object) -> object:
    # The digest is of the plan as a map of its fields (nested ones too), in their order:
    # the bytes msgspec gave when these were Structs, so a plan keeps its digest.
    if isinstance(value, tuple):
        if hasattr(value, "_asdict"):
            return {
                name: _as_map(item)
                for name, item in value._asdict().items()
                if name not in _LATER_FIELDS or item != _LATER_FIELDS[name]
            }
        return [_as_map(item) for item in value]
    return value
