"""Named network namespaces for envelopes: created, configured and removed with pyroute2.

A namespace is created by the host (so a candidate, even as root of its own user namespace,
cannot reconfigure it), gets `lo` up and nothing else, and is joined by the envelope with
setns(2). This is the only module that imports pyroute2; it is imported lazily because
`import pyroute2` costs ~130 ms and the server's start-up path must not pay it.
pyroute2's sync API is used: the supervisor that calls this has no event loop.
"""

from __future__ import annotations

import errno
import os
import re

__all__ = ["NETNS_DIR", "check_name", "create", "list_owned", "path_of", "remove"]

NETNS_DIR = "/run/netns"
_NAME = re.compile(r"jigcmd[A-Za-z0-9_.-]{0,58}")
_IFF_UP = 0x1


def check_name(name: str) -> None:
    """Refuse a namespace name that is not one `jigcmd…` path component."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"network namespace name {name!r} must match {_NAME.pattern}")


def path_of(name: str) -> str:
    """The bind-mounted namespace file that setns(2) opens."""
    check_name(name)
    return os.path.join(NETNS_DIR, name)


def _configure_loopback(name: str, path: str) -> None:
    """Bring `lo` up inside the namespace and prove it is the only link, and up."""
    from pyroute2 import IPRoute  # noqa: PLC0415 -- lazy: see the module docstring
    from pyroute2.netlink.exceptions import NetlinkError  # noqa: PLC0415 -- lazy, as above

    try:
        with IPRoute(netns=name) as ipr:
            found = ipr.link_lookup(ifname="lo")
            if not found:
                raise OSError(errno.ENODEV, "the new network namespace has no lo", path)
            ipr.link("set", index=found[0], state="up")
            links = [(link.get("ifname"), int(link["flags"])) for link in ipr.get_links()]
    except NetlinkError as e:
        raise OSError(e.code, f"configuring lo failed: {e}", path) from None
    if len(links) != 1 or links[0][0] != "lo" or not links[0][1] & _IFF_UP:
        raise OSError(errno.EPROTO, f"expected only lo, up; the namespace has {links}", path)


def create(name: str) -> str:
    """A fresh named namespace with only `lo`, up; returns its path for setns(2)."""
    from pyroute2 import netns  # noqa: PLC0415 -- lazy: see the module docstring

    path = path_of(name)
    if os.path.lexists(path):
        # Never reuse: a leftover from a crash is recovery's to remove, not ours to adopt.
        raise OSError(errno.EEXIST, "network namespace already exists", path)
    try:
        netns.create(name)
    except OSError as e:
        raise OSError(e.errno, f"cannot create network namespace: {e.strerror}", path) from None
    except Exception as e:
        # pyroute2 creates the namespace in a child process and re-raises its failures loosely.
        raise OSError(errno.EIO, f"cannot create network namespace: {e!r}", path) from None
    try:
        _configure_loopback(name, path)
    except BaseException as e:
        try:
            remove(name)
        except OSError as cleanup:
            e.add_note(f"and the namespace could not be removed: {cleanup}")
        raise
    return path


def _mounted(path: str) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return any(line.split()[4] == path for line in f)


def remove(name: str) -> None:
    """Unmount and unlink the namespace; raise unless it is confirmed gone."""
    from pyroute2 import netns  # noqa: PLC0415 -- lazy: see the module docstring

    path = path_of(name)
    if os.path.lexists(path):
        try:
            netns.remove(name)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OSError(e.errno, f"cannot remove network namespace: {e.strerror}", path) from None
    # pyroute2 ignores umount2's result, so check both the mount and the file ourselves.
    if _mounted(path):
        raise OSError(errno.EBUSY, "network namespace still mounted after removal", path)
    if os.path.lexists(path):
        raise OSError(errno.EEXIST, "network namespace file still present after removal", path)


def list_owned() -> list[str]:
    """Names of the jigcmd namespaces present (recovery and leak checks)."""
    try:
        entries = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(e for e in entries if _NAME.fullmatch(e))
