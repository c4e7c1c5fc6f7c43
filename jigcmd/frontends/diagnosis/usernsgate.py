"""The user-namespace check the doctor reports and every front's start refuses on."""

from __future__ import annotations

import os

from jigcmd.frontends.diagnosis import probes
from jigcmd.frontends.diagnosis.verdicts import USERNS_SYSCTLS, Check, userns_check

__all__ = ["UserNamespaceUnavailable", "refuse_without_userns", "userns_verdict"]


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
