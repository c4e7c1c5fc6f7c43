"""The envelope's `/etc`: five fixed files jigcmd writes itself, nothing from the host.

What reads them, measured inside the envelope (Bun 1.4.2, its glibc 2.36 and bundled c-ares;
the candidate traced from the host):

- glibc's `getaddrinfo` (`Bun.serve`'s and `node:net`'s `hostname`, `node:dns` `lookup`,
  `fetch`) reads `nsswitch.conf`, then `hosts`; c-ares (`Bun.dns.lookup`'s default backend)
  reads the `hosts:` line of `nsswitch.conf`, then `hosts`. `hosts: files` is what keeps both
  from sending a DNS query: without it each asked 127.0.0.1:53 for every name, `localhost`
  included, and glibc's refusal read `EAGAIN`/`ETIMEOUT`. Any other name now fails at once
  (`ENOTFOUND`; c-ares says `DNS_ECONNREFUSED`), with no packet sent.
- `node:dns` `resolve*` (c-ares) queries a DNS server whatever the files say: the one in
  `resolv.conf`, 127.0.0.1 without it, where its retries spun a CPU until the run's deadline.
  192.0.2.1 (TEST-NET-1, RFC 5737, never routed) has no route in the envelope, which holds
  only `lo`: `connect` fails with `ENETUNREACH` and the call at once with `ECONNREFUSED`.
- `os.homedir()` and `os.userInfo()` (no `HOME` in the envelope) read the `passwd` entry of
  the uid the candidate runs as, which the kernel calls 0 inside its user namespace
  (`idmap.INSIDE_ID`; on the host the envelope's own leased uid, or the server's own uid
  rootless, see hostids.py: neither is named here).
  Its home is `/tmp`, the scratch tmpfs: the one writable directory, gone with the envelope.
  Its shell is `/nonexistent`, which says what is true: the envelope holds no shell.
"""

from __future__ import annotations

from jigcmd.envelope.idmap import INSIDE_ID

__all__ = ["ETC_FILES"]

# (name below /etc, content); written on the root tmpfs, read-only before the candidate starts.
ETC_FILES: tuple[tuple[str, bytes], ...] = (
    ("hosts", b"127.0.0.1 localhost\n::1 localhost\n"),
    ("passwd", f"root:x:{INSIDE_ID}:{INSIDE_ID}:root:/tmp:/nonexistent\n".encode("ascii")),
    ("group", f"root:x:{INSIDE_ID}:\n".encode("ascii")),
    ("nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files\n"),
    ("resolv.conf", b"nameserver 192.0.2.1\n"),
)
