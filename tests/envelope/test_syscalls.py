"""The ctypes bindings: each resolved once, at import, so a cloned pid 1 only calls them."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.native import ZYGOTE_FLAGS
from tests.required import require_root

# Every wrapper once, as a harmless call or one the kernel refuses, then a plain clone3 child
# that exits at once; prints what the calls cached on `libc` and `pythonapi` by name.
_PROBE = """
import ctypes, os, signal
from jigcmd.envelope import syscalls as sc
def names():
    return set(vars(sc.libc)) | {"py." + n for n in vars(ctypes.pythonapi)}
before = names()
calls = (
    lambda: sc.unshare(0),
    lambda: sc.setns(-1, sc.CLONE_NEWNET),
    lambda: sc.mount(None, "/nonexistent-jigcmd-probe", None, sc.MS_REMOUNT),
    lambda: sc.umount2("/nonexistent-jigcmd-probe", sc.MNT_DETACH),
    lambda: sc.pivot_root("/nonexistent-jigcmd-a", "/nonexistent-jigcmd-b"),
    lambda: sc.prctl(3),
    lambda: sc.close_range(1000, 1001),
    lambda: sc.default_signal(signal.SIGUSR1),
    lambda: sc.open_tree("/nonexistent-jigcmd-probe", sc.OPEN_TREE_CLONE),
)
for call in calls:
    try:
        call()
    except OSError:
        pass
pid = sc.clone(0)
if pid == 0:
    os._exit(7)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 7, status
print(" ".join(sorted(names() - before)) or "-")
"""


def _probe(code: str) -> list[str]:
    """What `code` prints, run by an interpreter started as the zygote is, word by word."""
    probe = subprocess.run(
        [sys.executable, *ZYGOTE_FLAGS, "-c", f"import sys; sys.path[:] = {sys.path!r}\n{code}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return probe.stdout.split()


def test_no_binding_is_looked_up_on_first_use() -> None:
    """A wrapper that resolved its function on first use wrote that lookup into every pid 1."""
    assert _probe(_PROBE) == ["-"]


def test_a_refused_call_raises_with_the_kernels_errno() -> None:
    with pytest.raises(OSError, match="setns") as refused:
        sc.setns(-1, sc.CLONE_NEWNET)
    assert refused.value.errno == errno.EBADF


def test_unsigned_arguments_keep_their_full_width() -> None:
    """close_range's `last` is an unsigned int: ~0 closes to the end, it is no -1 refused."""
    sc.close_range(0xFFFFFFF0, 0xFFFFFFFF)


# Names of lengths no call made before, each read back from the kernel; counts the ctypes
# array types alive around the calls.
_NAMING = """
import ctypes, gc
from jigcmd.envelope import syscalls as sc
def array_types():
    return sum(isinstance(o, type) and issubclass(o, ctypes.Array) for o in gc.get_objects())
before = array_types()
for name in ("j", "jigcmd-init", "jigcmd-a-name-longer-than-fifteen"):
    sc.set_name(name)
    print(open("/proc/self/comm").read().strip())
print(array_types() - before)
"""


def test_naming_a_process_makes_no_ctypes_type() -> None:
    """A new buffer length made a new array type: ~30 copied pages in every pid 1."""
    assert _probe(_NAMING) == ["j", "jigcmd-init", "jigcmd-a-name-l", "0"]


@pytest.mark.envelope
def test_open_tree_clones_a_mount_the_original_s_remount_does_not_reach(tmp_path: Path) -> None:
    """A detached copy stays writable after its original is remounted read-only (rootfs.py)."""
    require_root()
    probe = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path[:] = {sys.path!r}\n{_COPY_PROBE}"],
        check=False,
        capture_output=True,
        text=True,
        env={"JIGCMD_PROBE_DIR": str(tmp_path)},
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["EROFS", "written", "EBADF"], probe.stdout


# In a mount namespace of its own: a tmpfs, its copy, the original read-only (per mount).
_COPY_PROBE = """
import errno, os
from jigcmd.envelope import syscalls as sc
point = os.environ["JIGCMD_PROBE_DIR"]
sc.unshare(sc.CLONE_NEWNS)
sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
sc.mount("jigcmd-probe", point, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=64k")
copy = sc.open_tree(point, sc.OPEN_TREE_CLONE)
sc.mount(None, point, None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY)
try:
    os.open(point + "/a", os.O_WRONLY | os.O_CREAT, 0o644)
except OSError as exc:
    print(errno.errorcode[exc.errno])
fd = os.open("b", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=copy)
os.write(fd, b"through the copy")
os.close(fd)
with open(point + "/b", "rb") as seen:
    print("written" if seen.read() == b"through the copy" else "lost")
os.close(copy)
try:
    os.fstat(copy)
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""
