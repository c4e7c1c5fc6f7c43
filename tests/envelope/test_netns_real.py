"""The envelope's network namespace for real: only lo, up, host-owned, no way out."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jigcmd
from jigcmd.envelope import netns

REPO = str(Path(jigcmd.__file__).resolve().parent.parent)

# Enters a fresh namespace, then reports what it sees as one JSON line.
PROBE = textwrap.dedent(
    """
    import errno, json, os, socket, sys
    from jigcmd.envelope import netns
    from jigcmd.envelope.syscalls import CLONE_NEWUSER, unshare

    host_ns = os.stat("/proc/self/ns/net").st_ino
    netns.enter_fresh()
    links = [name for _, name in socket.if_nameindex()]
    server = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(server.getsockname(), timeout=5).close()
    def attempt(address):
        try:
            socket.create_connection(address, timeout=5).close()
            return "connected"
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e))
    host = attempt(("127.0.0.1", int(sys.argv[1])))
    external = attempt(("192.0.2.1", 80))
    fresh = os.stat("/proc/self/ns/net").st_ino != host_ns
    # Root of a new user namespace still holds no CAP_NET_ADMIN over a host-owned netns.
    unshare(CLONE_NEWUSER)
    try:
        import fcntl, struct
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sh22x", b"lo", 0))  # SIOCSIFFLAGS: down
        reconfigure = "allowed"
    except OSError as e:
        reconfigure = errno.errorcode.get(e.errno, str(e))
    print(json.dumps({"links": links, "host": host, "external": external, "fresh": fresh,
                      "reconfigure": reconfigure}))
    """
)


def test_the_loopback_request_is_an_acked_rtm_newlink_for_lo() -> None:
    """pyroute2 encodes RTM_NEWLINK (16) with NLM_F_REQUEST|NLM_F_ACK for index 1, IFF_UP."""
    request = netns.loopback_request()
    length, kind, flags = int.from_bytes(request[0:4], "little"), request[4], request[6]
    assert (length, kind, flags) == (len(request), 16, 0x05)
    assert int.from_bytes(request[20:24], "little") == 1  # ifi_index
    assert int.from_bytes(request[24:28], "little") == 1  # ifi_flags: IFF_UP


@pytest.mark.envelope
@pytest.mark.usefixtures("real_netns")
def test_a_fresh_namespace_has_only_lo_up_and_cannot_reach_anything() -> None:
    """Only lo, up; the host's loopback and external addresses are unreachable; lo is locked."""
    with socket.create_server(("127.0.0.1", 0)) as host_server:
        port = host_server.getsockname()[1]
        seen = subprocess.run(
            [sys.executable, "-c", PROBE, str(port)],
            capture_output=True,
            check=True,
            env={"PYTHONPATH": REPO},
            timeout=30,
        )
    assert json.loads(seen.stdout) == {
        "links": ["lo"],
        "host": "ECONNREFUSED",
        "external": "ENETUNREACH",
        "fresh": True,
        "reconfigure": "EPERM",
    }


def test_a_forked_child_encodes_the_same_request_and_the_caller_never_imports_pyroute2() -> None:
    """`encode_in_child` gives pyroute2's bytes while pyroute2 stays out of the caller."""
    script = textwrap.dedent(
        """
        import json, sys
        from jigcmd.envelope import netns
        request = netns.encode_in_child()
        loaded = sorted(name for name in sys.modules if name.split(".")[0] == "pyroute2")
        print(json.dumps({"request": request.hex(), "loaded": loaded}))
        """
    )
    seen = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        check=True,
        env={"PYTHONPATH": REPO},
        timeout=60,
    )
    assert json.loads(seen.stdout) == {"request": netns.loopback_request().hex(), "loaded": []}


@pytest.mark.envelope
def test_a_server_that_started_its_zygote_never_imported_pyroute2(
    real_cgroups: object,
) -> None:
    """The executor's process (the server) holds no pyroute2: 24 MB and 370 modules."""
    del real_cgroups  # only for its check that the envelope is available here
    script = textwrap.dedent(
        """
        import json, sys
        import anyio
        from jigcmd.envelope.native import NativeExecutor

        async def main():
            executor = NativeExecutor()
            try:
                await executor.start()
            finally:
                await executor.aclose()

        anyio.run(main)
        print(json.dumps(sorted(name for name in sys.modules if name.startswith("pyroute2"))))
        """
    )
    seen = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        check=True,
        env={"PYTHONPATH": REPO},
        timeout=60,
    )
    assert json.loads(seen.stdout) == []
