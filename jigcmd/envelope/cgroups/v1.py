"""The cgroup v1 backend (and hybrid): plain files on a run's path, cgroupspy to re-open a job.

Each controller is its own hierarchy (cpu and cpuacct may be separate mounts), so a job is one
directory per hierarchy. On a hybrid host the job also gets a directory in the unified cgroup2
hierarchy, whose `cgroup.kill` kills the whole tree and whose `cpu.stat` needs no controller (so
it has no cpuacct or freezer directory); on pure v1 the freezer stops the tree so that a kill
loop can catch every task, and cpuacct counts its CPU.
Making a job, its accounting and its removal are plain system calls on paths worked out once
(a property through cgroupspy cost 53 µs against 17 for the same write and read-back, and a
job has a dozen of them per run); recovery re-opens a job through cgroupspy. This is the
only module that imports cgroupspy (untyped; its values are checked here).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from jigcmd.envelope.cgroups import files as cgroupfs
from jigcmd.envelope.cgroups import v2 as cgroup_v2
from jigcmd.envelope.cgroups.model import CgroupStats, Membership, check_job_name, is_job_name

if TYPE_CHECKING:
    from jigcmd.plan import Limits

__all__ = ["REQUIRED", "WITHOUT_UNIFIED", "V1Backend", "V1Job", "delegated_hierarchies"]

# The controllers every job needs. Without a unified hierarchy also "cpuacct" (its CPU time)
# and "freezer" (its kill); with one, its `cpu.stat` and `cgroup.kill` do both, controller-free.
REQUIRED = ("memory", "pids", "cpu")
WITHOUT_UNIFIED = ("cpuacct", "freezer")
# Used where mounted, so that a job's CPU pin is the kernel's (`V1Job.pin`); where it is not,
# the envelope pins the candidate's affinity mask alone.
CPUSET = "cpuset"
# Bun finds its heap ceiling here when its own v1 memory cgroup is the namespace root.
MEMORY_VIEW_PATH = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
# v1 charges socket buffers to a counter of their own, and only once this file was written:
# until then a job's TCP memory (queued data of orphaned sockets included, which holds no
# descriptor) is charged to nobody but the host's global tcp_mem. Written, it both turns the
# accounting on for sockets made in the job afterwards and caps them: over it the kernel
# suppresses the allocation (a send waits, loopback segments are dropped and retried). cgroup
# v2 needs no such step: it charges socket memory to memory.current (memory.stat `sock`)
# unless booted with cgroup.memory=nosocket.
TCP_LIMIT = "memory.kmem.tcp.limit_in_bytes"
TCP_PEAK = "memory.kmem.tcp.max_usage_in_bytes"
FREEZE_KILL_TIMEOUT_S = 1.0
_UNIFIED = "unified"


def _v1_controllers(*, unified: bool) -> tuple[str, ...]:
    """The v1 controllers a job needs, beside a unified hierarchy or without one."""
    return REQUIRED if unified else (*REQUIRED, *WITHOUT_UNIFIED)


def delegated_hierarchies(mode: str) -> tuple[str, ...]:
    """Where a v1 or hybrid job has a directory: what a rootless user's base must be delegated in.

    The optional cpuset is not among them (a job without it pins the candidate's mask alone).
    """
    if mode == "hybrid":
        return (*_v1_controllers(unified=True), _UNIFIED)
    return _v1_controllers(unified=False)


class _Files:
    """A cgroupspy controller bound to one directory (recovery's look at a job's settings)."""

    def __init__(self, directory: str) -> None:
        # Imported here: the server loads this module (names and pins of jobs) but re-opens a
        # job only in recovery, so its image need not carry cgroupspy (~0.9 MiB).
        from cgroupspy.controllers import MemoryController  # noqa: PLC0415 - see above
        from cgroupspy.nodes import Node  # noqa: PLC0415 - see above

        # A bare Node names the directory; the controller class gives access to its files.
        self._controller = MemoryController(Node(os.fsencode(directory)))
        self.directory = directory

    def get_int(self, attribute: str) -> int:
        """Read one integer property (cgroupspy returns None for "-1", unlimited)."""
        value = getattr(self._controller, attribute)
        if not isinstance(value, int):
            raise OSError(errno.EINVAL, f"unexpected value {value!r}", self.directory)
        return value


class V1Job:
    """One job: a directory per v1 hierarchy, plus one in the unified hierarchy on hybrid hosts."""

    def __init__(self, name: str, dirs: Mapping[str, str], memory_limit: str) -> None:
        self.name = name
        # Keyed by controller ("unified": the cgroup2 directory); comounted ones share a path.
        self._dirs = dict(dirs)
        self.paths: tuple[str, ...] = tuple(dict.fromkeys(self._dirs.values()))
        self._memory_limit = memory_limit

    def __repr__(self) -> str:
        return f"V1Job({self.name!r}, {self.paths!r})"

    def _unified(self) -> str | None:
        return self._dirs.get(_UNIFIED)

    def _v1_paths(self) -> list[str]:
        unified = self._unified()
        return [p for p in self.paths if p != unified]

    @property
    def birth_dir(self) -> str | None:
        """The unified (cgroup2) directory on hybrid hosts; None on pure v1."""
        return self._unified()

    @property
    def membership(self) -> Membership:
        """The v1 directories and the unified one (see `CgroupJob.membership`)."""
        return Membership(tuple(self._v1_paths()), self._unified())

    def join(self, born_in: str | None) -> None:
        """Move the caller into every hierarchy but `born_in` (see `CgroupJob.join`)."""
        cgroupfs.join(self.membership, born_in)

    def _procs(self) -> list[int]:
        pids: set[int] = set()
        for path in self.paths:
            pids.update(cgroupfs.pids_in(os.path.join(path, "cgroup.procs")))
        return sorted(pids)

    def pin(self, cpus: tuple[int, ...]) -> bool:
        """Confine the job to `cpus` through its cpuset; False when the host mounts none."""
        directory = self._dirs.get(CPUSET)
        if directory is None:
            return False
        cgroupfs.pin_cpus(
            os.path.join(directory, "cpuset.cpus"),
            os.path.join(directory, "cpuset.effective_cpus"),
            cpus,
        )
        return True

    def kill(self) -> None:
        """SIGKILL the whole tree: unified cgroup.kill when present, else freezer + kill loop."""
        unified = self._unified()
        if unified is not None and os.path.isdir(unified):
            cgroup_v2.kill_tree(unified)
            return
        freezer = self._dirs.get("freezer")
        if freezer is not None and os.path.isdir(freezer):
            state = os.path.join(freezer, "freezer.state")
            cgroupfs.freeze_and_kill(
                freeze=lambda: cgroupfs.write(state, "FROZEN"),
                thaw=lambda: cgroupfs.write(state, "THAWED"),
                list_pids=self._procs,
                timeout=FREEZE_KILL_TIMEOUT_S,
            )
            return
        # A job left half-made by a crash may lack both; kill what is listed, repeatedly.
        cgroupfs.freeze_and_kill(
            freeze=lambda: None,
            thaw=lambda: None,
            list_pids=self._procs,
            timeout=FREEZE_KILL_TIMEOUT_S,
        )

    def populated(self) -> bool:
        """Whether any hierarchy of the job still lists a task."""
        unified = self._unified()
        if unified is not None and cgroup_v2.populated(unified):
            return True
        return any(cgroupfs.pids_in(os.path.join(p, "cgroup.procs")) for p in self._v1_paths())

    def wait_empty(self, timeout: float) -> bool:
        """Wait until no task is left: poll(2) on the unified cgroup.events, else re-read procs."""
        unified = self._unified()
        if unified is not None and not cgroupfs.wait_unpopulated(
            os.path.join(unified, "cgroup.events"), timeout
        ):
            return False
        # Every task of the job is in the unified cgroup too, so this normally passes at once.
        return cgroupfs.poll_until(lambda: not self._procs(), timeout)

    def cpu_usage_ns(self) -> int | None:
        """CPU time so far: the unified cpu.stat, else cpuacct.usage."""
        unified = self._unified()
        if unified is not None:
            return cgroup_v2.cpu_usage_ns(unified)
        return _int_file(os.path.join(self._dirs["cpuacct"], "cpuacct.usage"))

    def stats(self) -> CgroupStats:
        """CPU time (unified cpu.stat or cpuacct.usage), memory peak, OOM kills, pids-limit hits."""
        memory = self._dirs["memory"]
        # memory.failcnt stays 0 on an OOM kill; memory.oom_control counts the kills.
        oom = cgroupfs.keyed(os.path.join(memory, "memory.oom_control"))
        pids_events = cgroupfs.keyed(os.path.join(self._dirs["pids"], "pids.events"))
        peak = _int_file(os.path.join(memory, "memory.max_usage_in_bytes"))
        tcp_peak = os.path.join(memory, TCP_PEAK)
        if os.path.exists(tcp_peak):
            # Socket buffers are a counter apart on v1 (see TCP_LIMIT): both peaks added, an
            # upper bound of the job's peak that never hides what its sockets held.
            peak += _int_file(tcp_peak)
        return CgroupStats(
            cpu_usage_ns=self.cpu_usage_ns(),
            peak_memory_bytes=peak,
            oom_killed=oom.get("oom_kill", 0) > 0,
            pids_limit_hit=pids_events.get("max", 0) > 0,
        )

    def memory_view(self) -> tuple[str, str]:
        """memory.limit_in_bytes as the candidate should see it."""
        return MEMORY_VIEW_PATH, self._memory_limit + "\n"

    def remove(self, *, wait: float = cgroupfs.REMOVE_TIMEOUT_S) -> None:
        """rmdir every directory of the job, retrying EBUSY for up to `wait` seconds."""
        cgroupfs.remove_dirs(self.paths, timeout=wait)


def _int_file(path: str) -> int:
    """A file holding one integer (OSError naming it otherwise)."""
    text = cgroupfs.read(path).strip()
    try:
        return int(text)
    except ValueError:
        raise OSError(errno.EINVAL, f"unexpected value {text!r}", path) from None


def _nearest_dir(hierarchy: str, base: str) -> str:
    """`base` in `hierarchy`, or its nearest existing ancestor (where it would be made)."""
    path = os.path.join(hierarchy, base)
    while not os.path.isdir(path) and path != hierarchy:
        path = os.path.dirname(path)
    return path


def _writable(hierarchy: str, base: str) -> bool:
    """Whether jobs can be made under `base` in `hierarchy` (the base, or where it would go)."""
    return os.access(_nearest_dir(hierarchy, base), os.W_OK)


def _inherit_cpuset(directory: str) -> None:
    """Give a cpuset its parent's CPUs and memory nodes where it has none.

    A v1 cpuset starts empty, and no task can join an empty one; the job is narrowed to its
    plan's CPUs only at the go (`V1Job.pin`), since prepared envelopes exist before that.
    """
    parent = os.path.dirname(directory)
    for name in ("cpuset.cpus", "cpuset.mems"):
        path = os.path.join(directory, name)
        if not cgroupfs.read(path).strip():
            cgroupfs.write(path, cgroupfs.read(os.path.join(parent, name)).strip())


def _prepare_cpuset_base(hierarchy: str, base: str) -> None:
    """Give the jobs' cpuset parent CPUs, and have each new job copy them as it is made.

    Every cpuset from the hierarchy's root down to `base` that has none is filled from its
    parent, top first: a nested base (`--cgroup-base top/a/b`) made at once has empty
    cpusets above it when the root's `cgroup.clone_children` is off, as after a boot. With
    `cgroup.clone_children` the kernel fills a new cpuset from its parent, so a job needs
    no write of its own (one read still checks it, see `V1Backend._make_dirs`).
    """
    chain: list[str] = []
    directory = base
    while directory.startswith(hierarchy.rstrip("/") + "/"):
        chain.append(directory)
        directory = os.path.dirname(directory)
    for each in reversed(chain):
        _inherit_cpuset(each)
    with contextlib.suppress(OSError):
        cgroupfs.write(os.path.join(base, "cgroup.clone_children"), "1")


class V1Backend:
    """Jobs under `base` in each v1 hierarchy (and in the unified hierarchy when mounted)."""

    def __init__(self, hierarchies: Mapping[str, str], base: str, unified: str | None) -> None:
        self.hierarchies = dict(hierarchies)
        self.base = base
        self.unified = unified
        self.mode: Literal["v1", "hybrid"] = "hybrid" if unified is not None else "v1"
        # Decided once: a cpuset hierarchy this user cannot write (a delegation of the
        # required controllers only) leaves jobs to the affinity pin, never unmade.
        self._cpuset = CPUSET in self.hierarchies and _writable(self.hierarchies[CPUSET], base)
        self._job_bases = self._bases()
        # Whether the bases were made (and the cpuset's prepared) by this backend already.
        self._bases_made = False
        # Whether this kernel accounts swap (memory.memsw.*), once a job showed it does.
        self._memsw = False

    def __repr__(self) -> str:
        return f"V1Backend({self.mode}, {self.base!r})"

    def _controllers(self) -> tuple[str, ...]:
        return _v1_controllers(unified=self.unified is not None)

    def _job_controllers(self) -> tuple[str, ...]:
        """The required controllers, and the cpuset where this user may make jobs in it."""
        return (*self._controllers(), CPUSET) if self._cpuset else self._controllers()

    def _roots(self) -> dict[str, str]:
        """The hierarchy's root per job controller (and the unified hierarchy's)."""
        roots = {c: self.hierarchies[c] for c in self._job_controllers() if c in self.hierarchies}
        if self.unified is not None:
            # First: pid 1 is born in it (clone3), so cgroup.kill reaches it before anything else.
            roots = {_UNIFIED: self.unified, **roots}
        return roots

    def job_mounts(self) -> list[str]:
        """The hierarchies the jobs write (others, read-only or not, are never touched)."""
        return list(self._roots().values())

    def _bases(self) -> dict[str, str]:
        """The jobs' parent directory per controller (and for the unified hierarchy)."""
        return {c: os.path.join(root, self.base) for c, root in self._roots().items()}

    def _dirs(self, name: str) -> dict[str, str]:
        return {c: b + "/" + name for c, b in self._job_bases.items()}

    def create(self, name: str, limits: Limits) -> V1Job:
        """A fresh job with memory (+memsw), pids and CFS quota written."""
        check_job_name(name)
        missing = [c for c in self._controllers() if c not in self.hierarchies]
        if missing:
            raise OSError(
                errno.EOPNOTSUPP,
                f"cgroup v1 controllers not mounted: {' '.join(missing)}",
                "/proc/self/mountinfo",
            )
        dirs = self._dirs(name)
        created: list[str] = []
        try:
            self._make_dirs(dirs, created)
            memory_limit = self._write_limits(dirs, limits)
        except OSError as e:
            try:
                cgroupfs.remove_dirs(created)
            except OSError as cleanup:
                e.add_note(f"and the partial job could not be removed: {cleanup}")
            raise
        return V1Job(name, dirs, memory_limit)

    def _make_bases(self) -> None:
        for base in dict.fromkeys(self._job_bases.values()):
            os.makedirs(base, exist_ok=True)
        if CPUSET in self._job_bases:
            _prepare_cpuset_base(self.hierarchies[CPUSET], self._job_bases[CPUSET])
        self._bases_made = True

    def _make_dirs(self, dirs: Mapping[str, str], created: list[str]) -> None:
        """mkdir the job in every hierarchy (the bases once, or again if they went away)."""
        if not self._bases_made:
            self._make_bases()
        for path in dict.fromkeys(dirs.values()):
            try:
                try:
                    os.mkdir(path)
                except FileNotFoundError:
                    self._make_bases()
                    os.mkdir(path)
            except OSError as e:
                raise OSError(e.errno, f"cannot create cgroup: {e.strerror}", path) from None
            created.append(path)
        if CPUSET in dirs and not cgroupfs.read(dirs[CPUSET] + "/cpuset.cpus").strip():
            # The base's clone_children was off, or the base was made again by someone else
            # since (empty itself): fill the base from its parent, then the job from it.
            _prepare_cpuset_base(self.hierarchies[CPUSET], os.path.dirname(dirs[CPUSET]))
            _inherit_cpuset(dirs[CPUSET])

    def _write_limits(self, dirs: Mapping[str, str], limits: Limits) -> str:
        memory = dirs["memory"]
        limit_file = memory + "/memory.limit_in_bytes"
        cgroupfs.write(limit_file, str(limits.memory_bytes))
        # memsw = memory + swap; equal to the memory limit means no swap at all.
        memsw = memory + "/memory.memsw.limit_in_bytes"
        if self._memsw or os.path.exists(memsw):
            cgroupfs.write(memsw, str(limits.memory_bytes))
            self._memsw = True
        elif cgroupfs.swap_enabled():
            raise OSError(
                errno.ENOENT,
                "swap is enabled but cannot be limited; boot with swapaccount=1 or turn swap off",
                memsw,
            )
        tcp = memory + "/" + TCP_LIMIT
        if os.path.exists(tcp):
            # Before any process joins: only sockets made after this write are charged. The
            # same ceiling as the job's memory, on a counter apart: on v1 a job holds at most
            # its limit in memory and as much again in socket buffers.
            cgroupfs.write(tcp, str(limits.memory_bytes))
        cgroupfs.write(dirs["pids"] + "/pids.max", str(limits.pids_max))
        cgroupfs.write(dirs["cpu"] + "/cpu.cfs_period_us", str(limits.cpu_period_us))
        cgroupfs.write(dirs["cpu"] + "/cpu.cfs_quota_us", str(limits.cpu_quota_us))
        # Read back: the kernel rounds the limit to pages, and the view must be the truth.
        return str(_int_file(limit_file))

    def open(self, name: str) -> V1Job | None:
        """The existing job `name` (any part of it), or None."""
        check_job_name(name)
        dirs = self._dirs(name)
        # A job an earlier jigcmd made may have a directory in a hierarchy this one no longer
        # uses (cpuacct on a hybrid host, before 2026-12-05): it is the job's to remove too.
        for controller, hierarchy in self.hierarchies.items():
            extra = os.path.join(hierarchy, self.base, name)
            if controller not in dirs and extra not in dirs.values() and os.path.isdir(extra):
                dirs[controller] = extra
        if not any(os.path.isdir(p) for p in dirs.values()):
            return None
        try:
            memory_limit = str(_Files(dirs["memory"]).get_int("limit_in_bytes"))
        except (OSError, KeyError, ValueError):
            memory_limit = "max"
        return V1Job(name, dirs, memory_limit)

    def list_jobs(self) -> list[str]:
        """Names of job directories present in any hierarchy."""
        names: set[str] = set()
        for base in set(self._bases().values()):
            try:
                entries = os.listdir(base)
            except FileNotFoundError:
                continue
            names.update(
                e for e in entries if is_job_name(e) and os.path.isdir(os.path.join(base, e))
            )
        return sorted(names)

    def pins(self) -> list[tuple[int, ...]]:
        """The cpuset.cpus of each job narrowed to fewer CPUs than the base (prepared jobs
        carry the base's until their go)."""
        if not self._cpuset:
            return []
        base = os.path.join(self.hierarchies[CPUSET], self.base)
        found = []
        with contextlib.suppress(OSError):
            wide = cgroupfs.cpu_list(cgroupfs.read(os.path.join(base, "cpuset.cpus")))
            for name in os.listdir(base):
                if not is_job_name(name):
                    continue
                with contextlib.suppress(OSError):
                    cpus = cgroupfs.cpu_list(cgroupfs.read(os.path.join(base, name, "cpuset.cpus")))
                    if cpus and cpus != wide:
                        found.append(cpus)
        return found

    def cpuset_bound(self) -> tuple[str, tuple[int, ...]] | None:
        """The base's effective cpuset, or its nearest ancestor's that has CPUs (a base not
        made yet, or made empty, gets its parent's: `_inherit_cpuset`); None: no cpuset."""
        if not self._cpuset:
            return None
        return cgroupfs.nearest_cpus(self.hierarchies[CPUSET], self.base, "cpuset.effective_cpus")

    def problems(self) -> list[str]:
        """Unmounted controllers and unwritable hierarchies."""
        found = [
            f"cgroup v1 controller {c!r} is not mounted; mount it "
            f"(mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}) or use cgroup v2"
            for c in self._controllers()
            if c not in self.hierarchies
        ]
        memory = self.hierarchies.get("memory")
        if memory is not None and not os.path.exists(os.path.join(memory, TCP_LIMIT)):
            found.append(
                f"the v1 memory controller has no {TCP_LIMIT}: a job's socket buffers would be "
                "charged to nobody; use cgroup v2 or a kernel with v1 kmem accounting"
            )
        # One sentence for every hierarchy: they are unwritable for one reason.
        unwritable: list[tuple[str, str]] = []
        for controller, root in sorted(self._roots().items()):
            # A nested base (`a/b`) is made from its nearest existing ancestor, however deep.
            target = _nearest_dir(root, self.base)
            if not os.access(target, os.W_OK):
                unwritable.append((target, controller))
        if unwritable:
            found.append(
                cgroupfs.cannot_create(
                    ", ".join(f"{target} ({controller})" for target, controller in unwritable),
                    [target for target, _ in unwritable],
                    "run as root or delegate a directory of each hierarchy to this user",
                )
            )
        return found
