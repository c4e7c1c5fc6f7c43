"""The steps of building an envelope's root: the error naming a step, the tree of made
directories, and new files written on the root tmpfs (rootfs.py, candidatetree.py)."""

from __future__ import annotations

import os
import posixpath

from jigcmd.envelope import syscalls as sc

__all__ = ["NEW_FILE", "REMOUNT", "RootfsError", "Tree", "step", "write_new_files"]

# A file made on the root tmpfs (a bind's target, a memory view, /etc); never through a link.
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
# A remount of one mount's own flags, not of its filesystem's.
REMOUNT = sc.MS_REMOUNT | sc.MS_BIND


class RootfsError(Exception):
    """Raised when a step of building the root fails; `step` names it for the caller."""

    def __init__(self, step: str, error: BaseException | str) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step


def step(name: str, func: object, *args: object) -> None:
    try:
        func(*args)  # type: ignore[operator]
    except OSError as exc:
        raise RootfsError(name, exc.strerror or str(exc)) from exc


class Tree:
    """A root being built below `root`, and the directories made in it so far.

    The root tmpfs starts empty, so a directory is made once and never looked up again.
    With `dir_fd` the root is "." of that directory descriptor (the candidate tree's copy).
    """

    def __init__(self, root: str, dir_fd: int | None = None) -> None:
        self.root = root
        self.dir_fd = dir_fd
        self.made: set[str] = set()

    def inside(self, path: str) -> str:
        """`path` as the envelope will see it."""
        return path.removeprefix(self.root) or "/"

    def makedirs(self, path: str) -> None:
        """`os.makedirs(path, exist_ok=True)` below the root."""
        if path in self.made or not path.startswith(self.root + "/"):
            return
        self.makedirs(posixpath.dirname(path))
        try:
            os.mkdir(path, 0o755, dir_fd=self.dir_fd)
        except FileExistsError:
            pass  # a directory of a bind below the root, or one made by an earlier build
        except OSError as exc:
            raise RootfsError(f"create {self.inside(path)}", exc.strerror or "") from exc
        self.made.add(path)


def write_new_files(tree: Tree, files: tuple[tuple[str, bytes], ...], under: str) -> None:
    """Write each (path, content) of `files`, `under` prefixed, as a new file on the root tmpfs."""
    # The tmpfs was mounted empty just now, so a file already there (O_EXCL) or a link
    # (O_NOFOLLOW) is refused; the tmpfs is read-only before the candidate starts.
    for name, data in files:
        inside = under + name
        path = tree.root + inside
        tree.makedirs(posixpath.dirname(path))
        try:
            fd = os.open(path, NEW_FILE | os.O_EXCL, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise RootfsError(f"write {inside}", exc.strerror or "") from exc
