"""The rootless rig: an unprivileged test user, a kit it can read, a delegated cgroup subtree.

The kit exists because the project's interpreter and checkout may sit under a directory the
test user cannot enter (pyenv under /root, a checkout in /root): it holds a copy of the
jigcmd package and its runtime dependencies, world-readable, and runs under the system
Python of the same minor version (the compiled wheels are ABI-compatible within it).
"""

from __future__ import annotations

import contextlib
import importlib.metadata as metadata
import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jigcmd
from jigcmd.envelope import cgroups
from jigcmd.envelope.cgroups import files as cgroupfs
from tests.required import unavailable

__all__ = [
    "UNDELEGATED_USER",
    "USER",
    "Rootless",
    "build_kit",
    "delegate",
    "ensure_user",
    "remove_tree",
    "system_python",
    "unused_uid",
]

USER = "jigcmdtest"
UNDELEGATED_USER = "jigcmdtest2"
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
# jigcmd's own runtime requirements, as installed (so a new dependency is never missed).
_DEPENDENCIES = tuple(
    re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0]
    for requirement in metadata.requires("jigcmd") or []
    if "extra ==" not in requirement
)


@dataclass(frozen=True)
class Rootless:
    """How to run jigcmd as the unprivileged test user."""

    uid: int
    gid: int
    home: Path
    python: str
    kit: Path
    # Commands run as root just before dropping to the user (e.g. entering a cgroup).
    prelude: str
    cgroup_base: str | None

    def command(
        self,
        *args: str,
        user: str = USER,
        env: dict[str, str] | None = None,
        stays: bool = False,
    ) -> list[str]:
        """A shell command that runs `python -m jigcmd args…` as `user`.

        With `stays`, the shell does not exec jigcmd: it stays, jigcmd's parent in the cgroup
        the prelude put it in (a scope's shell that typed `jigcmd …`, or a wrapper).
        """
        entry = pwd.getpwnam(user)
        environment = {"HOME": entry.pw_dir, "PYTHONPATH": str(self.kit), "LANG": "C.UTF-8"}
        environment |= env or {}
        if self.cgroup_base is not None and user == USER:
            environment["JIGCMD_CGROUP_BASE"] = self.cgroup_base
        assignments = " ".join(f"{k}={_quote(v)}" for k, v in environment.items())
        quoted = " ".join(_quote(a) for a in args)
        prelude = self.prelude if user == USER else ""
        start = "" if stays else "exec "
        return [
            "sh",
            "-c",
            f"{prelude} {start}setpriv --reuid={entry.pw_uid} --regid={entry.pw_gid} "
            f"--init-groups env -i {assignments} {self.python} -m jigcmd {quoted}"
            # A command after it: no shell may exec the last command in its stead.
            + ("; exit $?" if stays else ""),
        ]

    def run(
        self,
        *args: str,
        user: str = USER,
        timeout: float = 60,
        input: str | None = None,
        stays: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `jigcmd args…` as `user` from / (never from a checkout on sys.path)."""
        return subprocess.run(
            self.command(*args, user=user, env=env, stays=stays),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
            check=False,
            input=input,
        )


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def system_python() -> str:
    for candidate in _SYSTEM_PYTHONS:
        if not os.path.exists(candidate):
            continue
        version = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if version == str(tuple(sys.version_info[:2])):
            return candidate
    unavailable(f"no system Python {sys.version_info[0]}.{sys.version_info[1]} for the test user")


def ensure_user(name: str, created: list[str]) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
        created.append(name)
        return pwd.getpwnam(name)


def build_kit(root: Path) -> None:
    """Copy the jigcmd package and the files of its runtime dependencies into `root`."""
    shutil.copytree(
        Path(jigcmd.__file__).parent, root / "jigcmd", ignore=shutil.ignore_patterns("__pycache__")
    )
    todo, seen = list(_DEPENDENCIES), set()
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        todo += [
            re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]
            for r in dist.requires or []
            if "extra ==" not in r
        ]
        for file in dist.files or []:
            source = Path(str(file.locate()))
            relative = str(file)
            if relative.startswith("..") or not source.is_file():
                continue
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)


def delegate(backend: cgroups.CgroupBackend, uid: int, made: list[str]) -> tuple[str, str | None]:
    """Create and chown the delegated directories; (shell prelude, explicit base or None)."""
    root = "/sys/fs/cgroup"
    if backend.mode == "v2":
        # As `systemd-run --user -p Delegate=yes` does: a directory owned by the user with
        # memory, pids and cpu available, the user's process inside a leaf of it.
        base = f"{root}/jigcmd-delegated-u{uid}"
        os.makedirs(f"{base}/jigcmd-server", exist_ok=True)
        made.append(base)
        with open(f"{root}/cgroup.subtree_control", "w", encoding="ascii") as handle:
            handle.write("+memory +pids +cpu")
        subprocess.run(["chown", "-R", str(uid), base], check=True)
        return f"echo $$ > {base}/jigcmd-server/cgroup.procs &&", None
    name = f"jigcmd-u{uid}"
    # Exactly what jigcmd names (and the doctor asks for): the suite proves it is enough.
    for controller in cgroups.delegated_hierarchies(backend.mode):
        path = f"{root}/{controller}/{name}"
        os.makedirs(path, exist_ok=True)
        made.append(path)
        subprocess.run(["chown", "-R", str(uid), path], check=True)
    if backend.mode == "hybrid":
        # A cgroup2 move needs write access to the common ancestor: start inside it.
        return f"echo $$ > {root}/unified/{name}/cgroup.procs &&", None
    return "", None


def remove_tree(path: str, *, within_s: float = 10.0) -> None:
    """rmdir a cgroup directory and its children, deepest first; fail if one outlives `within_s`.

    The test user's last processes (a zygote releasing its envelopes after `serve` exited)
    may still be inside when the session ends: EBUSY is waited out (`remove_dirs`, as a
    job's removal does), not ignored, so a directory is never left behind silently.
    """
    if not os.path.isdir(path):
        return
    tree = [
        os.path.join(current, name)
        for current, dirs, _ in os.walk(path, topdown=False)
        for name in dirs
    ]
    try:
        cgroupfs.remove_dirs([*tree, path], timeout=within_s)
    except OSError as exc:
        left: list[str] = []
        with contextlib.suppress(OSError, TypeError):  # TypeError: no path named
            left = Path(exc.filename, "cgroup.procs").read_text(encoding="ascii").split()
        raise AssertionError(f"{exc}; processes left: {left}") from None


def unused_uid() -> int:
    """A uid no account has (61000-61999), for a throw-away process that owns nothing."""
    for uid in range(61_000, 62_000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no unused uid in 61000-61999")
