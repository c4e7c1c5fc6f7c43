"""The doctor's `host ids` line: the ids envelopes lease (envelope/hostids.py) are no one else's.

As root each envelope runs as a host uid and gid leased from one range. An id there that a
host user, group or subordinate-id range also has would share that user's per-user kernel
counts (and its files' ownership) with an envelope. Only the files are read (`/etc/passwd`,
`/etc/group`, `/etc/subuid`, `/etc/subgid`), not a directory service behind NSS.

An id is leased and let go as an envelope leases one: refused (the directory cannot be made
or trusted, or no lease file written), the line fails with the fix for what refused it. In a
container without a user namespace, a `/run/jigcmd` of the container's own (no mount from
the host) is a warning: its leases are invisible to every other container's
(docs/deployment.md, "Host ids in a container").
"""

from __future__ import annotations

import os

from jigcmd.envelope import hostids, idmap
from jigcmd.frontends.diagnosis import containerfacts
from jigcmd.frontends.diagnosis.container import host_uid
from jigcmd.frontends.diagnosis.leasedir import refused_fix, shared_from_host
from jigcmd.frontends.diagnosis.probes import read_text
from jigcmd.frontends.diagnosis.verdicts import Check

__all__ = ["NAME", "briefly", "host_id_check", "overlapping"]

NAME = "host ids"
_SHARED = (
    "-v /run/jigcmd:/run/jigcmd (the host's directory: make it first, as root: "
    'install -d -m 0755 /run/jigcmd; docs/deployment.md, "Host ids in a container")'
)


def host_id_check() -> Check:
    """ok when no user, group or subordinate range in /etc holds an id of the lease range."""
    if idmap.rootless():
        return Check(
            NAME,
            "ok",
            f"not leased: without root every envelope runs as this user (uid {os.geteuid()}), "
            "sharing its per-user kernel counts (docs/rootless.md)",
        )
    try:
        first, count = hostids.lease_range()
        hostids.let_go(hostids.take("candidate"))
    except hostids.HostIdError as exc:
        if exc.path:
            return Check(NAME, "FAIL", str(exc), refused_fix(exc.path))
        return Check(NAME, "FAIL", str(exc), "run jigcmd where the host ids can be mapped")
    texts = {
        name: read_text(f"/etc/{name}") or "" for name in ("passwd", "group", "subuid", "subgid")
    }
    found = overlapping(first, count, **texts)
    last = first + count - 1
    if found:
        return Check(
            NAME,
            "warn",
            f"{briefly(found)} within {first}-{last}, the range envelopes lease a host uid "
            "and gid from: such an envelope would share that owner's per-user kernel counts",
            "give those ids elsewhere (docs/security.md, counters shared with the host)",
        )
    detail = (
        f"{first}-{last}, a host uid and gid per envelope leased in {hostids.DIRECTORY}: "
        "no user, group or subordinate range in /etc holds one"
    )
    engine = containerfacts.engine()
    # Without a user namespace (uid 0 is host uid 0) the container leases host ids.
    if (
        engine is not None
        and host_uid(read_text("/proc/self/uid_map")) == 0
        and not shared_from_host(read_text("/proc/self/mountinfo") or "")
    ):
        return Check(
            NAME,
            "warn",
            f"{detail}; but this {engine} container's /run/jigcmd is its own (no mount "
            "from the host): its envelopes and another container's may lease the same "
            "host id and share its per-user kernel counts",
            f"give every jigcmd container on the host {_SHARED}",
        )
    return Check(NAME, "ok", detail)


def briefly(found: list[str]) -> str:
    """The first few of `found`, and how many more: a block of users is one line, not one each."""
    shown = "; ".join(found[:_SHOWN])
    more = len(found) - _SHOWN
    return shown if more <= 0 else f"{shown}; and {more:,} more"


# How many ids a warning names before it counts the rest.
_SHOWN = 5


def overlapping(
    first: int, count: int, *, passwd: str, group: str, subuid: str, subgid: str
) -> list[str]:
    """Who in these files' texts holds an id of first..first+count-1, one phrase each."""
    last = first + count - 1
    found = []
    for kind, text in (("user", passwd), ("group", group)):
        for line in text.splitlines():
            fields = line.split(":")
            if len(fields) > 2 and fields[2].isdigit() and first <= int(fields[2]) <= last:
                found.append(f"{kind} {fields[0]} ({fields[2]})")
    for kind, text in (("uids", subuid), ("gids", subgid)):
        for line in text.splitlines():
            fields = line.split(":")
            if len(fields) != 3 or not (fields[1].isdigit() and fields[2].isdigit()):
                continue
            start, length = int(fields[1]), int(fields[2])
            if start <= last and first < start + length:
                end = start + length - 1
                found.append(f"subordinate {kind} of {fields[0]} ({start}-{end})")
    return found
