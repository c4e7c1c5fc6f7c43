"""The cgroup v2 backend: plain reads and writes of the unified hierarchy's files.

Jobs are directories under one parent (`base_path`) that enables `memory pids cpu` for its
children and holds no process itself (the no-internal-process rule). `base_path` may be a
delegated subtree owned by an unprivileged user. The functions at the bottom are also used by
the hybrid backend, which keeps a v2 directory per job for `cgroup.kill` and `cpu.stat`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from jigcmd.envelope.cgroups import files as cgroupfs
from jigcmd.envelope.cgroups.model import CgroupStats, Membership, check_job_name, is_job_name

if TYPE_CHECKING:
    from jigcmd.plan import Limits

__all__ = [
    "CONTROLLERS",
    "KILL_TIMEOUT_S",
    "V2Backend",
    "V2Job",
    "enabling",
    "kill_tree",
    "populated",
]

CONTROLLERS = ("memory", "pids", "cpu")
# Enabled where the parent offers it, so that a job's CPU pin is the kernel's (`V2Job.pin`);
# where it is not, the envelope pins the candidate's affinity mask alone.
CPUSET = "cpuset"
# Bun reads its heap ceiling here (its own cgroup is the namespace root inside the envelope).
MEMORY_VIEW_PATH = "/sys/fs/cgroup/memory.max"
# Only kernels without cgroup.kill (< 5.14) need the freeze-and-kill loop.
KILL_TIMEOUT_S = 1.0


def kill_tree(path: str) -> None:
    """SIGKILL every task in the v2 cgroup at `path` and below."""
    kill_file = os.path.join(path, "cgroup.kill")
    if os.path.exists(kill_file):
        cgroupfs.write(kill_file, "1")
        return
    freeze_file = os.path.join(path, "cgroup.freeze")
    cgroupfs.freeze_and_kill(
        freeze=lambda: cgroupfs.write(freeze_file, "1"),
        thaw=lambda: cgroupfs.write(freeze_file, "0"),
        list_pids=lambda: cgroupfs.pids_in(os.path.join(path, "cgroup.procs")),
        timeout=KILL_TIMEOUT_S,
    )


def enabling(changes: list[tuple[str, tuple[str, ...]]]) -> tuple[str, str]:
    """(what, the commands) for `V2Backend.host_changes`: "+pids in <file>", "echo +pids > …"."""
    what = "; ".join(f"{' '.join('+' + c for c in cs)} in {path}" for path, cs in changes)
    commands = " && ".join(
        f"echo {' '.join('+' + c for c in cs)} > {shlex.quote(path)}" for path, cs in changes
    )
    return what, commands


def populated(path: str) -> bool:
    """Whether the v2 cgroup at `path` (or a descendant) still has a task; gone counts as empty."""
    try:
        text = cgroupfs.read(os.path.join(path, "cgroup.events"))
    except OSError as e:
        if e.errno == errno.ENOENT and not os.path.exists(path):
            return False
        raise
    return "populated 0" not in text.splitlines()


def cpu_usage_ns(path: str) -> int | None:
    """CPU time charged to the v2 cgroup at `path` (cpu.stat works without any controller)."""
    usec = cgroupfs.keyed(os.path.join(path, "cpu.stat")).get("usage_usec")
    return None if usec is None else usec * 1000


class V2Job:
    """One job directory in a v2 hierarchy."""

    def __init__(
        self, name: str, path: str, memory_max: str, rmdir: Callable[[str], None] = os.rmdir
    ) -> None:
        self.name = name
        self.path = path
        self.paths: tuple[str, ...] = (path,)
        self._memory_max = memory_max
        self._rmdir = rmdir

    def __repr__(self) -> str:
        return f"V2Job({self.path!r})"

    @property
    def birth_dir(self) -> str:
        """The job directory (children can be born in it with clone3)."""
        return self.path

    @property
    def membership(self) -> Membership:
        """The job directory alone (see `CgroupJob.membership`)."""
        return Membership((), self.path)

    def join(self, born_in: str | None) -> None:
        """Move the caller into the job unless it was born there."""
        cgroupfs.join(self.membership, born_in)

    def pin(self, cpus: tuple[int, ...]) -> bool:
        """Confine the job to `cpus` through its cpuset; False when the job has no cpuset."""
        cpus_file = os.path.join(self.path, "cpuset.cpus")
        if not os.path.exists(cpus_file):
            return False
        cgroupfs.pin_cpus(cpus_file, os.path.join(self.path, "cpuset.cpus.effective"), cpus)
        return True

    def kill(self) -> None:
        """SIGKILL the whole tree."""
        kill_tree(self.path)

    def populated(self) -> bool:
        """Whether any task is left."""
        return populated(self.path)

    def wait_empty(self, timeout: float) -> bool:
        """Wait (in poll(2)) until cgroup.events reports no task."""
        return cgroupfs.wait_unpopulated(os.path.join(self.path, "cgroup.events"), timeout)

    def cpu_usage_ns(self) -> int | None:
        """CPU time so far (cpu.stat)."""
        return cpu_usage_ns(self.path)

    def stats(self) -> CgroupStats:
        """cpu.stat, memory.peak, memory.events and pids.events of the job."""
        peak_file = os.path.join(self.path, "memory.peak")
        peak = None
        # memory.peak exists from Linux 5.19 on.
        if os.path.exists(peak_file):
            peak = int(cgroupfs.read(peak_file).split()[0])
        memory_events = cgroupfs.keyed(os.path.join(self.path, "memory.events"))
        pids_events = cgroupfs.keyed(os.path.join(self.path, "pids.events"))
        return CgroupStats(
            cpu_usage_ns=cpu_usage_ns(self.path),
            peak_memory_bytes=peak,
            oom_killed=memory_events.get("oom_kill", 0) > 0,
            pids_limit_hit=pids_events.get("max", 0) > 0,
        )

    def memory_view(self) -> tuple[str, str]:
        """memory.max as the candidate should see it."""
        return MEMORY_VIEW_PATH, self._memory_max + "\n"

    def remove(self, *, wait: float = cgroupfs.REMOVE_TIMEOUT_S) -> None:
        """rmdir the job directory, retrying EBUSY for up to `wait` seconds."""
        cgroupfs.remove_dirs(self.paths, timeout=wait, rmdir=self._rmdir)


class V2Backend:
    """Jobs under `base_path` inside the cgroup2 mount at `mount`."""

    mode: Literal["v2"] = "v2"

    def __init__(
        self,
        mount: str,
        base_path: str,
        *,
        mkdir: Callable[[str], None] = os.mkdir,
        rmdir: Callable[[str], None] = os.rmdir,
    ) -> None:
        rel = os.path.relpath(base_path, mount)
        if rel == "." or rel.startswith(".."):
            raise ValueError(
                f"the jobs' base {base_path!r} must lie below the cgroup2 mount {mount!r}"
            )
        self.mount = mount
        self.base_path = base_path
        # Replaceable so that a fake cgroupfs (a plain directory tree) can act like the kernel.
        self._mkdir = mkdir
        self._rmdir = rmdir

    def __repr__(self) -> str:
        return f"V2Backend({self.base_path!r})"

    def _chain(self) -> list[str]:
        """The mount root and every directory down to the base."""
        chain = [self.mount]
        for part in os.path.relpath(self.base_path, self.mount).split(os.sep):
            chain.append(os.path.join(chain[-1], part))
        return chain

    def _enable_controllers(self, directory: str) -> None:
        subtree_file = os.path.join(directory, "cgroup.subtree_control")
        enabled = cgroupfs.read(subtree_file).split()
        missing = [c for c in CONTROLLERS if c not in enabled]
        if not missing:
            return
        controllers_file = os.path.join(directory, "cgroup.controllers")
        available = cgroupfs.read(controllers_file).split()
        absent = [c for c in missing if c not in available]
        if absent:
            raise OSError(
                errno.EOPNOTSUPP,
                f"controllers {' '.join(absent)} are not available here; enable them in the "
                "parent's cgroup.subtree_control or delegate them (systemd: Delegate=yes)",
                controllers_file,
            )
        if CPUSET in available and CPUSET not in enabled:
            # Optional, and only along with the required ones (a directory that has those
            # is left as it is): where it cannot be handed down, jobs keep the affinity pin.
            with contextlib.suppress(OSError):
                cgroupfs.write(subtree_file, " ".join("+" + c for c in (*missing, CPUSET)))
                return
        try:
            cgroupfs.write(subtree_file, " ".join("+" + c for c in missing))
        except OSError as e:
            if e.errno == errno.EBUSY:
                raise OSError(
                    e.errno,
                    f"cannot enable {' '.join(missing)}: {directory} contains processes "
                    "(no-internal-process rule); move them into a leaf cgroup",
                    subtree_file,
                ) from None
            raise

    def host_changes(self) -> list[tuple[str, tuple[str, ...]]]:
        """The controllers a job's creation would enable in the host's directories down to
        the base: (cgroup.subtree_control path, controllers), for each that would change.

        As `_enable_controllers` does: the required ones missing, with cpuset where offered
        (a controller enabled above is offered below, so the chain is read top down). The
        host's are root's files that exist now: a directory jigcmd makes, or a user's own
        delegated cgroup, is jigcmd's to set up.
        """
        changes: list[tuple[str, tuple[str, ...]]] = []
        enabled_above: list[str] = []
        for directory in self._chain():
            subtree_file = os.path.join(directory, "cgroup.subtree_control")
            try:
                enabled = cgroupfs.read(subtree_file).split()
                offered = cgroupfs.read(os.path.join(directory, "cgroup.controllers")).split()
                owner = os.stat(subtree_file).st_uid
            except OSError:
                break  # not there yet: jigcmd makes it
            missing = [c for c in CONTROLLERS if c not in enabled]
            if missing and CPUSET not in enabled and CPUSET in (*offered, *enabled_above):
                missing.append(CPUSET)
            if missing and owner == 0:
                changes.append((subtree_file, tuple(missing)))
            enabled_above = missing
        return changes

    def _ensure_base(self) -> None:
        for directory in self._chain():
            if not os.path.isdir(directory):
                try:
                    self._mkdir(directory)
                except FileExistsError:
                    pass
                except OSError as e:
                    raise OSError(
                        e.errno, f"cannot create cgroup: {e.strerror}", directory
                    ) from None
            self._enable_controllers(directory)

    def create(self, name: str, limits: Limits) -> V2Job:
        """A fresh job with memory (no swap), pids and cpu limits written."""
        check_job_name(name)
        self._ensure_base()
        path = os.path.join(self.base_path, name)
        try:
            self._mkdir(path)
        except OSError as e:
            raise OSError(e.errno, f"cannot create cgroup: {e.strerror}", path) from None
        try:
            cgroupfs.write(os.path.join(path, "memory.max"), str(limits.memory_bytes))
            swap_file = os.path.join(path, "memory.swap.max")
            if os.path.exists(swap_file):
                cgroupfs.write(swap_file, "0")
            elif cgroupfs.swap_enabled():
                raise OSError(
                    errno.ENOENT,
                    "swap is enabled but cannot be limited; turn on swap accounting "
                    "(kernel option swapaccount=1) or turn swap off",
                    swap_file,
                )
            cgroupfs.write(os.path.join(path, "pids.max"), str(limits.pids_max))
            cgroupfs.write(
                os.path.join(path, "cpu.max"), f"{limits.cpu_quota_us} {limits.cpu_period_us}"
            )
            memory_max = cgroupfs.read(os.path.join(path, "memory.max")).strip()
        except OSError as e:
            try:
                cgroupfs.remove_dirs([path], rmdir=self._rmdir)
            except OSError as cleanup:
                e.add_note(f"and the partial job could not be removed: {cleanup}")
            raise
        return V2Job(name, path, memory_max, self._rmdir)

    def open(self, name: str) -> V2Job | None:
        """The existing job `name`, or None."""
        check_job_name(name)
        path = os.path.join(self.base_path, name)
        if not os.path.isdir(path):
            return None
        try:
            memory_max = cgroupfs.read(os.path.join(path, "memory.max")).strip()
        except OSError:
            memory_max = "max"
        return V2Job(name, path, memory_max, self._rmdir)

    def list_jobs(self) -> list[str]:
        """Names of the job directories under the base."""
        try:
            entries = os.listdir(self.base_path)
        except FileNotFoundError:
            return []
        return sorted(
            e for e in entries if is_job_name(e) and os.path.isdir(os.path.join(self.base_path, e))
        )

    def pins(self) -> list[tuple[int, ...]]:
        """The cpuset.cpus of each job that has one written (a prepared job's is empty)."""
        found = []
        for name in self.list_jobs():
            with contextlib.suppress(OSError):
                cpus = cgroupfs.cpu_list(
                    cgroupfs.read(os.path.join(self.base_path, name, "cpuset.cpus"))
                )
                if cpus:
                    found.append(cpus)
        return found

    def cpuset_bound(self) -> tuple[str, tuple[int, ...]] | None:
        """The base's effective cpuset, or its nearest ancestor's (where the base offers no
        cpuset, its jobs still run within that); None where the host has no cpuset at all."""
        return cgroupfs.nearest_cpus(
            self.mount, os.path.relpath(self.base_path, self.mount), "cpuset.cpus.effective"
        )

    def problems(self) -> list[str]:
        """Missing controllers, unwritable directories, processes in the base."""
        found: list[str] = []
        existing = [d for d in self._chain() if os.path.isdir(d)]
        if not existing:
            return [f"{self.mount} is not a directory; mount cgroup2 there"]
        deepest = existing[-1]
        try:
            available = cgroupfs.read(os.path.join(deepest, "cgroup.controllers")).split()
            enabled = cgroupfs.read(os.path.join(deepest, "cgroup.subtree_control")).split()
        except OSError as e:
            return [f"cannot read the cgroup controllers at {deepest}: {e}"]
        for controller in CONTROLLERS:
            if controller not in available and controller not in enabled:
                found.append(
                    f"cgroup v2 controller {controller!r} is not available at {deepest}; "
                    "enable it in the parent's cgroup.subtree_control or delegate it"
                )
        if not os.access(deepest, os.W_OK):
            found.append(
                cgroupfs.cannot_create(
                    deepest,
                    [deepest],
                    "run as root or use a delegated subtree (systemd-run --user -p Delegate=yes)",
                )
            )
        if deepest == self.base_path and cgroupfs.pids_in(os.path.join(deepest, "cgroup.procs")):
            found.append(
                f"{deepest} contains processes, so it cannot enable controllers for jobs "
                "(no-internal-process rule); move them into a leaf cgroup"
            )
        return found
