"""The namespace checks the doctor reports and every front's start refuses on.

A user namespace for a non-root user, and, for everyone, the sysctls that allow no namespace
of a kind every envelope makes: a front that started without them would fail every call
("clone3: No space left on device").
"""

from __future__ import annotations

import os

from jigcmd.frontends.diagnosis import probes
from jigcmd.frontends.diagnosis.verdicts import (
    NAMESPACE_LIMITS,
    USERNS_SYSCTLS,
    Check,
    namespaces_check,
    userns_check,
    zero_limits,
)

__all__ = [
    "EnvelopeUnavailable",
    "UserNamespaceUnavailable",
    "effective_capabilities",
    "namespace_limits",
    "namespaces_verdict",
    "refuse_without_namespaces",
    "refuse_without_userns",
    "userns_verdict",
]


class UserNamespaceUnavailable(OSError):
    """Raised at a front's start when this user can make no user namespace; says the fix."""


def userns_verdict() -> Check:
    """A forked child's unshare(CLONE_NEWUSER), explained by the sysctls that refuse it."""
    sysctls = {name: probes.read_text(path) for name, path in USERNS_SYSCTLS.items()}
    return userns_check(probes.probe_userns(), sysctls, root=os.geteuid() == 0)


def refuse_without_userns() -> None:
    """Raise `UserNamespaceUnavailable` (the doctor's words and fix) for a non-root user.

    Every envelope's staging and entry make a user namespace without root: a front that
    started anyway would fail each call ("unshare: Operation not permitted") instead.
    """
    if os.geteuid() == 0:
        return
    verdict = userns_verdict()
    if not verdict.ok:
        raise UserNamespaceUnavailable(
            f"running without root needs user namespaces: {verdict.detail}; fix: {verdict.hint}"
        )


class EnvelopeUnavailable(OSError):
    """Raised at a front's start when no envelope can be made on this host; says the fix."""


def namespace_limits() -> dict[str, str | None]:
    """Each kind's `user.max_<kind>_namespaces`, as read (None: unreadable)."""
    return {kind: probes.read_text(path) for kind, path in NAMESPACE_LIMITS.items()}


def effective_capabilities() -> int:
    """CapEff of this process (-1 when unreadable)."""
    for line in (probes.read_text("/proc/self/status") or "").splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return -1


def namespaces_verdict(limits: dict[str, str | None] | None = None) -> Check:
    """The envelope's namespaces made in a child (`probes.probe_namespaces`), explained."""
    return namespaces_check(
        probes.probe_namespaces(),
        os.geteuid(),
        effective_capabilities(),
        namespace_limits() if limits is None else limits,
    )


def refuse_without_namespaces() -> None:
    """Raise `EnvelopeUnavailable` when a `user.max_<kind>_namespaces` of a kind every
    envelope makes is 0: each call would fail ("clone3: No space left on device").

    Read, not probed: a capability a container withholds is named per call in the
    container's words (the doctor's probes name it too).
    """
    zero = zero_limits(namespace_limits(), tuple(NAMESPACE_LIMITS))
    if zero is not None:
        raise EnvelopeUnavailable(
            f"no envelope can be made here: every run's namespaces are refused ({zero[0]}); "
            f"fix: {zero[1]}"
        )
