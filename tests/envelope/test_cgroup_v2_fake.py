"""The cgroup v2 backend against a fake cgroupfs: a directory tree that acts like the kernel's.

The fake creates a cgroup's interface files on mkdir (controller files only for controllers
the parent enables), refuses rmdir while `cgroup.events` says populated, and lets each test
play the kernel by editing files (cgroup.events, memory.peak, memory.events, …).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import detect
from jigcmd.envelope.cgroups import files as cgroupfs
from jigcmd.envelope.cgroups.v2 import V2Backend, V2Job
from jigcmd.plan import Limits

CORE_FILES = {
    "cgroup.controllers": "",
    "cgroup.subtree_control": "",
    "cgroup.procs": "",
    "cgroup.events": "populated 0\nfrozen 0\n",
    "cgroup.kill": "",
    "cgroup.freeze": "0\n",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
}
CONTROLLER_FILES = {
    "memory": {
        "memory.max": "max\n",
        "memory.swap.max": "max\n",
        "memory.peak": "0\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
    },
    "pids": {"pids.max": "max\n", "pids.events": "max 0\n"},
    "cpu": {"cpu.max": "max 100000\n"},
    "cpuset": {"cpuset.cpus": "\n", "cpuset.cpus.effective": "0-31\n"},
}


class FakeCgroupFs:
    """A cgroup2 mount simulated in a temporary directory."""

    def __init__(self, root: Path, controllers: str = "cpuset cpu io memory pids") -> None:
        self.root = root
        self.omit: set[str] = set()
        root.mkdir()
        for name, text in CORE_FILES.items():
            (root / name).write_text(text)
        (root / "cgroup.controllers").write_text(controllers + "\n")
        (root / "cgroup.procs").write_text("1\n")

    def enabled(self, directory: Path) -> list[str]:
        # Our writes are "+memory +pids +cpu" and the fake does not rewrite them as the kernel does.
        text = (directory / "cgroup.subtree_control").read_text()
        return [word.lstrip("+") for word in text.split()]

    def mkdir(self, path: str) -> None:
        os.mkdir(path)
        directory = Path(path)
        enabled = self.enabled(directory.parent)
        for name, text in CORE_FILES.items():
            (directory / name).write_text(text)
        (directory / "cgroup.controllers").write_text(" ".join(enabled) + "\n")
        for controller in enabled:
            for name, text in CONTROLLER_FILES.get(controller, {}).items():
                if name not in self.omit:
                    (directory / name).write_text(text)

    def rmdir(self, path: str) -> None:
        directory = Path(path)
        if not directory.is_dir():
            raise FileNotFoundError(errno.ENOENT, "no such cgroup", path)
        if "populated 1" in (directory / "cgroup.events").read_text() or any(
            p.is_dir() for p in directory.iterdir()
        ):
            raise OSError(errno.EBUSY, "Device or resource busy", path)
        shutil.rmtree(path)

    def backend(self, base: str = "jigcmd") -> V2Backend:
        return V2Backend(str(self.root), str(self.root / base), mkdir=self.mkdir, rmdir=self.rmdir)


@pytest.fixture
def fake(tmp_path: Path) -> FakeCgroupFs:
    return FakeCgroupFs(tmp_path / "cgroup")


def job_dir(fake: FakeCgroupFs, name: str = "jigcmd-1") -> Path:
    return fake.root / "jigcmd" / name


def test_create_writes_every_limit_and_no_swap(fake: FakeCgroupFs) -> None:
    """memory.max, memory.swap.max 0, pids.max and cpu.max carry the plan's limits."""
    fake.backend().create("jigcmd-1", Limits())
    d = job_dir(fake)
    assert (d / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (d / "memory.swap.max").read_text() == "0"
    assert (d / "pids.max").read_text() == "64"
    assert (d / "cpu.max").read_text() == "50000 100000"


def test_create_enables_the_controllers_on_the_root_and_the_base(fake: FakeCgroupFs) -> None:
    """Without +memory +pids +cpu in subtree_control the job would have no limit files; the
    cpuset comes along where the parent offers it."""
    fake.backend().create("jigcmd-1", Limits())
    for directory in (fake.root, fake.root / "jigcmd"):
        assert fake.enabled(directory) == ["memory", "pids", "cpu", "cpuset"]


def test_a_job_pins_its_cpus_through_its_cpuset_and_checks_the_effective_set(
    fake: FakeCgroupFs,
) -> None:
    """pin() writes cpuset.cpus and passes only when cpuset.cpus.effective is exactly that."""
    job = fake.backend().create("jigcmd-1", Limits())
    (job_dir(fake) / "cpuset.cpus.effective").write_text("7\n")
    assert job.pin((7,)) is True
    assert (job_dir(fake) / "cpuset.cpus").read_text() == "7"
    with pytest.raises(OSError, match=r"the kernel pins to \[7\], not \[3, 9\]"):
        job.pin((9, 3))


def test_without_a_cpuset_on_offer_jobs_are_made_and_left_to_the_affinity_pin(
    tmp_path: Path,
) -> None:
    """A parent without cpuset still gives jobs; pin() says the cgroup does not pin them."""
    fake = FakeCgroupFs(tmp_path / "cgroup", controllers="cpu io memory pids")
    job = fake.backend().create("jigcmd-1", Limits())
    assert fake.enabled(fake.root) == ["memory", "pids", "cpu"]
    assert job.pin((0,)) is False


def test_controllers_already_enabled_are_not_written_again(fake: FakeCgroupFs) -> None:
    """Only the missing controllers are enabled (a delegated parent may refuse writes)."""
    (fake.root / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    fake.backend().create("jigcmd-1", Limits())
    assert (fake.root / "cgroup.subtree_control").read_text() == "cpu io memory pids\n"


def test_a_delegated_base_below_existing_cgroups_is_used_as_is(fake: FakeCgroupFs) -> None:
    """Rootless: jobs go under the given absolute directory, whose ancestors already delegate."""
    (fake.root / "cgroup.subtree_control").write_text("memory pids cpu\n")
    fake.mkdir(str(fake.root / "user.slice"))
    (fake.root / "user.slice" / "cgroup.subtree_control").write_text("memory pids cpu\n")
    backend = fake.backend("user.slice/jigcmd")
    job = backend.create("jigcmd-1", Limits())
    assert job.paths == (str(fake.root / "user.slice" / "jigcmd" / "jigcmd-1"),)
    assert backend.list_jobs() == ["jigcmd-1"]


def test_a_controller_missing_from_the_root_fails_closed_naming_the_file(
    fake: FakeCgroupFs,
) -> None:
    """No pids controller means no job at all, and the error names cgroup.controllers."""
    (fake.root / "cgroup.controllers").write_text("cpu memory\n")
    backend = fake.backend()
    with pytest.raises(OSError, match="controllers pids are not available") as caught:
        backend.create("jigcmd-1", Limits())
    assert caught.value.filename == str(fake.root / "cgroup.controllers")
    assert backend.list_jobs() == []


def test_a_limit_file_that_cannot_be_written_fails_closed_and_leaves_no_job(
    fake: FakeCgroupFs,
) -> None:
    """A missing pids.max is an error naming it, and the half-made job is removed."""
    fake.omit.add("pids.max")
    backend = fake.backend()
    with pytest.raises(OSError, match="cannot open for writing") as caught:
        backend.create("jigcmd-1", Limits())
    assert caught.value.filename == str(job_dir(fake) / "pids.max")
    assert not job_dir(fake).exists()


def test_swap_that_cannot_be_limited_fails_closed(
    fake: FakeCgroupFs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With swap on and no memory.swap.max, the memory limit would not hold."""
    fake.omit.add("memory.swap.max")
    monkeypatch.setattr(cgroupfs, "swap_enabled", lambda: True)
    with pytest.raises(OSError, match="swap is enabled but cannot be limited"):
        fake.backend().create("jigcmd-1", Limits())
    assert not job_dir(fake).exists()


def test_without_swap_a_missing_swap_control_is_fine(
    fake: FakeCgroupFs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No swap device, nothing to limit."""
    fake.omit.add("memory.swap.max")
    monkeypatch.setattr(cgroupfs, "swap_enabled", lambda: False)
    fake.backend().create("jigcmd-1", Limits())
    assert (job_dir(fake) / "memory.max").exists()


def test_an_existing_job_is_never_reused(fake: FakeCgroupFs) -> None:
    """Envelopes are single-use: creating the same name twice fails."""
    backend = fake.backend()
    backend.create("jigcmd-1", Limits())
    with pytest.raises(FileExistsError):
        backend.create("jigcmd-1", Limits())


def test_a_process_born_in_the_job_joins_without_a_write(fake: FakeCgroupFs) -> None:
    """Born there by clone3(CLONE_INTO_CGROUP): no migration, so nothing is written."""
    job = fake.backend().create("jigcmd-1", Limits())
    (job_dir(fake) / "cgroup.procs").write_text("untouched")
    assert job.birth_dir == str(job_dir(fake))
    job.join(born_in=job.birth_dir)
    assert (job_dir(fake) / "cgroup.procs").read_text() == "untouched"


def test_a_process_born_elsewhere_joins_itself_through_cgroup_procs(fake: FakeCgroupFs) -> None:
    """Without clone3 (old kernel, refused) the caller moves itself: "0" to cgroup.procs."""
    fake.backend().create("jigcmd-1", Limits()).join(born_in=None)
    assert (job_dir(fake) / "cgroup.procs").read_text() == "0"


def test_kill_writes_cgroup_kill(fake: FakeCgroupFs) -> None:
    """Whole-tree SIGKILL is one write of 1 to cgroup.kill."""
    fake.backend().create("jigcmd-1", Limits()).kill()
    assert (job_dir(fake) / "cgroup.kill").read_text() == "1"


def test_populated_and_wait_empty_follow_cgroup_events(fake: FakeCgroupFs) -> None:
    """The job is populated exactly while cgroup.events says so."""
    job = fake.backend().create("jigcmd-1", Limits())
    events = job_dir(fake) / "cgroup.events"
    assert not job.populated()
    assert job.wait_empty(0)
    events.write_text("populated 1\nfrozen 0\n")
    assert job.populated()
    assert not job.wait_empty(0)


def test_stats_read_cpu_peak_oom_and_pids_events(fake: FakeCgroupFs) -> None:
    """cpu.stat usage_usec, memory.peak, memory.events oom_kill and pids.events max."""
    job = fake.backend().create("jigcmd-1", Limits())
    d = job_dir(fake)
    (d / "cpu.stat").write_text("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n")
    (d / "memory.peak").write_text("123456\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 0\n")
    (d / "pids.events").write_text("max 3\n")
    stats = job.stats()
    assert stats.cpu_usage_ns == 1_500_000
    assert stats.peak_memory_bytes == 123456
    assert stats.oom_killed
    assert stats.pids_limit_hit


def test_a_quiet_job_reports_no_oom_and_no_pids_hit(fake: FakeCgroupFs) -> None:
    """Counters at zero are reported as false, and a kernel without memory.peak as None."""
    job = fake.backend().create("jigcmd-1", Limits())
    (job_dir(fake) / "memory.peak").unlink()
    stats = job.stats()
    assert stats.peak_memory_bytes is None
    assert not stats.oom_killed
    assert not stats.pids_limit_hit


def test_memory_view_is_the_v2_path_with_the_limit_read_back(fake: FakeCgroupFs) -> None:
    """Bun reads /sys/fs/cgroup/memory.max inside the envelope."""
    job = fake.backend().create("jigcmd-1", Limits(memory_bytes=128 * 1024 * 1024))
    assert job.memory_view() == ("/sys/fs/cgroup/memory.max", f"{128 * 1024 * 1024}\n")


def test_remove_deletes_the_job_and_it_can_no_longer_be_opened(fake: FakeCgroupFs) -> None:
    """After remove, nothing is left to list or re-open."""
    backend = fake.backend()
    backend.create("jigcmd-1", Limits()).remove()
    assert not job_dir(fake).exists()
    assert backend.list_jobs() == []
    assert backend.open("jigcmd-1") is None


def test_remove_of_a_populated_job_raises_naming_the_directory(fake: FakeCgroupFs) -> None:
    """A job the kernel keeps busy is reported, never assumed gone."""
    job = fake.backend().create("jigcmd-1", Limits())
    (job_dir(fake) / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    with pytest.raises(OSError, match="cannot remove cgroup") as caught:
        job.remove()
    assert caught.value.errno == errno.EBUSY
    assert caught.value.filename == str(job_dir(fake))


def test_a_job_survives_a_restart_and_is_reopened_by_name(fake: FakeCgroupFs) -> None:
    """Recovery re-opens a job left by a crashed process, with the same paths and view."""
    made = fake.backend().create("jigcmd-1", Limits())
    reopened = fake.backend().open("jigcmd-1")
    assert isinstance(reopened, V2Job)
    assert reopened.paths == made.paths
    assert reopened.memory_view() == made.memory_view()


def test_list_jobs_ignores_foreign_directories(fake: FakeCgroupFs) -> None:
    """Only jigcmd-named directories are ours to recover or remove."""
    backend = fake.backend()
    backend.create("jigcmd-b", Limits())
    backend.create("jigcmd-a", Limits())
    fake.mkdir(str(fake.root / "jigcmd" / "someone-else"))
    assert backend.list_jobs() == ["jigcmd-a", "jigcmd-b"]


def test_problems_name_missing_controllers_and_processes_in_the_base(fake: FakeCgroupFs) -> None:
    """doctor is told what to enable and what breaks the no-internal-process rule."""
    (fake.root / "cgroup.controllers").write_text("memory\n")
    assert [p.split(" is ")[0] for p in fake.backend().problems()] == [
        "cgroup v2 controller 'pids'",
        "cgroup v2 controller 'cpu'",
    ]
    (fake.root / "cgroup.controllers").write_text("memory pids cpu\n")
    fake.backend().create("jigcmd-1", Limits())
    (fake.root / "jigcmd" / "cgroup.procs").write_text("77\n")
    assert "no-internal-process rule" in fake.backend().problems()[0]


def test_a_base_at_the_mount_root_is_refused(fake: FakeCgroupFs) -> None:
    """Jobs need a parent that holds no process; the root cgroup holds every process."""
    with pytest.raises(ValueError, match="must lie below"):
        V2Backend(str(fake.root), str(fake.root))


def test_detect_on_a_fake_mount_table_drives_the_fake_tree(tmp_path: Path) -> None:
    """detect() resolves the base below whatever root the mount table names."""
    info = tmp_path / "mountinfo"
    info.write_text(f"30 22 0:26 / {tmp_path}/cgroup rw - cgroup2 cgroup2 rw\n")
    backend = detect(root=str(tmp_path / "cgroup"), mountinfo=str(info))
    assert isinstance(backend, V2Backend)
    assert backend.base_path == str(tmp_path / "cgroup" / "jigcmd")


def test_the_live_pins_are_the_jobs_written_cpusets_and_prepared_jobs_have_none(
    fake: FakeCgroupFs,
) -> None:
    """A job pinned to 7 is in the record; a job whose cpuset is still empty is not."""
    backend = fake.backend()
    pinned = backend.create("jigcmd-1", Limits())
    backend.create("jigcmd-2", Limits())
    (job_dir(fake) / "cpuset.cpus.effective").write_text("7\n")
    pinned.pin((7,))
    assert backend.pins() == [(7,)]


def test_the_cpus_a_base_gives_its_jobs_are_its_effective_cpuset_or_its_nearest_ancestors(
    fake: FakeCgroupFs,
) -> None:
    """Placing reads the base's cpuset.cpus.effective (a narrower base's CPUs, not the
    host's); before the base exists, the nearest ancestor's; with none anywhere, None."""
    backend = fake.backend()
    assert backend.cpuset_bound() is None  # the fake's root has no cpuset file
    (fake.root / "cpuset.cpus.effective").write_text("0-3\n")
    assert backend.cpuset_bound() == (str(fake.root / "cpuset.cpus.effective"), (0, 1, 2, 3))
    backend.create("jigcmd-1", Limits())
    (fake.root / "jigcmd" / "cpuset.cpus.effective").write_text("1,3\n")
    assert backend.cpuset_bound() == (str(fake.root / "jigcmd" / "cpuset.cpus.effective"), (1, 3))
