"""The candidate tree at /work: an empty tmpfs mounted with the root, sealed read-only by pid 1
before the candidate starts, and written only through a detached copy of its mount."""

from __future__ import annotations

import os
import posixpath

from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.roottree import REMOUNT, RootfsError, Tree, step
from jigcmd.plan import CANDIDATE_ROOT

__all__ = ["mount_candidate_tree", "open_candidate_tree", "seal_candidate"]

_CANDIDATE_TREE_BYTES = 4 * 1024 * 1024
_CANDIDATE_TREE_INODES = 2048
# A candidate file, made once on the empty tree; never through a link. Its mode lets its
# owner (the candidate's uid) write, so that a write fails on the read-only mount with EROFS
# like every other change, not on the mode with EACCES: the mount is what holds it.
_CANDIDATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def mount_candidate_tree(root: str) -> None:
    # Empty and writable until `open_candidate_tree` seals it, after the pivot.
    step(
        "mount candidate tree",
        sc.mount,
        "jigcmd-candidate",
        root + CANDIDATE_ROOT,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        f"mode=0755,size={_CANDIDATE_TREE_BYTES},nr_inodes={_CANDIDATE_TREE_INODES}",
    )


def open_candidate_tree() -> int:
    """A writable copy of the empty candidate tree's mount; the tree itself read-only for good.

    Called by pid 1 after the pivot, while it prepares and may still mount. The copy is a
    detached mount of the same tmpfs (`open_tree` with `OPEN_TREE_CLONE`: no path leads to
    it) and keeps the flags it was made with, so the remount below does not reach it. From
    then on it is the one way into the tmpfs: `seal_candidate` writes the request's files
    through it at the go, where pid 1 already runs under the seccomp filter that denies
    every mount call, and closes it before the candidate starts. The remount is the mount's
    own (`MS_BIND`): the candidate, without capabilities and with mount denied, cannot
    undo it, and can neither change, add nor remove a file in the tree.
    """
    try:
        tree = sc.open_tree(CANDIDATE_ROOT, sc.OPEN_TREE_CLONE)
    except OSError as exc:
        raise RootfsError("copy candidate tree", exc.strerror or str(exc)) from exc
    try:
        flags = sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
        step("seal candidate tree", sc.mount, None, CANDIDATE_ROOT, None, REMOUNT | flags)
    except BaseException:
        os.close(tree)
        raise
    return tree


def seal_candidate(files: tuple[tuple[str, str], ...], tree: int) -> None:
    """Write the candidate files through `tree` (`open_candidate_tree`), then close it."""
    # On the request's path: each directory is made once, by this loop, on the empty tree.
    made = Tree(".", dir_fd=tree)
    try:
        for rel, text in files:
            path = posixpath.join(".", rel)
            try:
                made.makedirs(posixpath.dirname(path))
                fd = os.open(path, _CANDIDATE_FILE, 0o644, dir_fd=tree)
                try:
                    os.write(fd, text.encode("utf-8"))
                finally:
                    os.close(fd)
            except OSError as exc:
                raise RootfsError(f"write candidate file {rel}", exc.strerror or "") from exc
            except RootfsError as exc:
                detail = str(exc).partition(": ")[2]
                raise RootfsError(f"write candidate file {rel}", detail) from exc
    finally:
        os.close(tree)
