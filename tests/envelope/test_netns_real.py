"""Named network namespaces for real: only lo, up, no way to the host's loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jigcmd
from jigcmd.envelope import netns

REPO = str(Path(jigcmd.__file__).resolve().parent.parent)

# Joins the namespace with setns(2), then reports what it sees as one JSON line.
PROBE = textwrap.dedent(
    """
    import errno, fcntl, json, os, socket, struct, sys
    from jigcmd.envelope.syscalls import CLONE_NEWNET, setns

    fd = os.open(sys.argv[1], os.O_RDONLY)
    setns(fd, CLONE_NEWNET)
    links = [name for _, name in socket.if_nameindex()]
    probe = socket.socket()
    ifreq = fcntl.ioctl(probe.fileno(), 0x8913, struct.pack("16sh22x", b"lo", 0))  # SIOCGIFFLAGS
    lo_up = bool(struct.unpack("16sh22x", ifreq)[1] & 0x1)
    server = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(server.getsockname(), timeout=5).close()
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5).close()
        host = "connected"
    except OSError as e:
        host = errno.errorcode.get(e.errno, str(e))
    print(json.dumps({"links": links, "lo_up": lo_up, "host": host}))
    """
)


def test_names_outside_the_jigcmd_prefix_are_refused() -> None:
    """Only one-component jigcmd names can be created or removed."""
    for name in ("other", "jigcmd/../x", ""):
        with pytest.raises(ValueError, match="must match"):
            netns.path_of(name)


@pytest.mark.envelope
@pytest.mark.usefixtures("real_netns")
def test_a_new_namespace_has_only_lo_up_and_cannot_reach_the_host(netns_name: str) -> None:
    """A joined process sees only lo, up, and cannot reach a server on the host's loopback."""
    with socket.create_server(("127.0.0.1", 0)) as host_server:
        port = host_server.getsockname()[1]
        path = netns.create(netns_name)
        assert path == f"/run/netns/{netns_name}"
        assert netns_name in netns.list_owned()
        seen = subprocess.run(
            [sys.executable, "-c", PROBE, path, str(port)],
            capture_output=True,
            check=True,
            env={"PYTHONPATH": REPO},
            timeout=30,
        )
    assert json.loads(seen.stdout) == {"links": ["lo"], "lo_up": True, "host": "ECONNREFUSED"}


@pytest.mark.envelope
@pytest.mark.usefixtures("real_netns")
def test_remove_leaves_no_namespace_behind(netns_name: str) -> None:
    """After remove the file and its mount are gone and the name is not listed."""
    path = netns.create(netns_name)
    netns.remove(netns_name)
    assert not os.path.lexists(path)
    with open("/proc/self/mountinfo") as f:
        assert all(line.split()[4] != path for line in f)
    assert netns_name not in netns.list_owned()


@pytest.mark.envelope
@pytest.mark.usefixtures("real_netns")
def test_an_existing_namespace_is_never_reused(netns_name: str) -> None:
    """create refuses a name that exists, and leaves that namespace alone."""
    path = netns.create(netns_name)
    with pytest.raises(FileExistsError):
        netns.create(netns_name)
    assert os.path.lexists(path)
    netns.remove(netns_name)


@pytest.mark.envelope
@pytest.mark.usefixtures("real_netns")
def test_removing_an_absent_namespace_confirms_it_is_gone(netns_name: str) -> None:
    """Recovery may remove what a crash already released; that is not an error."""
    netns.remove(netns_name)
    assert netns_name not in netns.list_owned()
