"""The spawner: it clones each pid 1 as the zygote's child, and its loss costs nothing but speed.

Each case but the last runs in a forked stand-in zygote (`in_stand_in`) that forks its own
spawner, as the zygote does; a fault is injected by replacing `syscalls.clone` in the
stand-in before the spawner is forked (the pattern of tests/envelope/test_spawn_init.py), so
that only the spawner's clones, made with `CLONE_PARENT`, see it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import anyio
import pytest

from jigcmd.envelope import cgroups, lifecycle, netns, pid1, privileges, seccomp, spawning, staging
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.loop import EventLoop
from jigcmd.envelope.spawner import Spawner, sweep
from jigcmd.envelope.states import State
from tests.envelope.hostile_harness import TracedExecutor, probe_plan
from tests.envelope.standin import in_stand_in

pytestmark = pytest.mark.envelope

_PR_SET_PDEATHSIG = 1
_real_clone = sc.clone


def _refused_clone(flags: int, cgroup_fd: int | None = None) -> int:
    """clone3 as a kernel that refuses `CLONE_PARENT` with these namespace flags answers."""
    if flags & sc.CLONE_PARENT:
        raise OSError(errno.EINVAL, "clone3: Invalid argument")
    return _real_clone(flags, cgroup_fd)


def _clone_then_die(flags: int, cgroup_fd: int | None = None) -> int:
    """The spawner clones pid 1, then is SIGKILLed before it could tell the zygote the pid."""
    pid = _real_clone(flags, cgroup_fd)
    if pid > 0 and flags & sc.CLONE_PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return pid


def _children() -> list[int]:
    tid = os.getpid()
    with open(f"/proc/{tid}/task/{tid}/children", encoding="ascii") as handle:
        return [int(pid) for pid in handle.read().split()]


def _status(pid: int, field: str) -> str:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        fields = dict(line.split(":\t", 1) for line in handle.read().splitlines())
    return fields[field]


def _caught(pid: int) -> int:
    """The signals `pid` has a handler for, as the mask `SigCgt` shows."""
    return int(_status(pid, "SigCgt"), 16)


def _ppid(pid: int) -> int:
    return int(_status(pid, "PPid"))


@contextlib.contextmanager
def _zygote(staging_dir: Path, request: bytes) -> Iterator[EventLoop]:
    """In the stand-in: what the zygote does before its loop, and a loop with a spawner."""
    os.setsid()
    netns.use_request(request)
    seccomp.build_filter()
    privileges.prepare()
    staging.enter(str(staging_dir))
    staging.stage(probe_plan("").binds)
    loop = EventLoop()
    loop.spawner = Spawner.start()
    try:
        yield loop
    finally:
        if loop.spawner is not None:
            loop.spawner.reap()


def _prepare(loop: EventLoop, backend: cgroups.CgroupBackend) -> lifecycle.Envelope:
    """An envelope prepared (raises StepError when the preparation failed at its start)."""
    envelope = lifecycle.Envelope(loop, backend, None, f"spawn{uuid.uuid4().hex[:8]}")
    loop.envelopes.add(envelope)
    try:
        envelope.prepare(probe_plan(""))
    except StepError:
        envelope.teardown()
        raise
    loop.run_until(lambda: envelope.state not in _PREPARING, 10)
    assert envelope.state is State.PREPARED
    return envelope


_PREPARING = (State.UNSHARING, State.BUILDING)


def test_pid_1_is_the_zygotes_child_and_the_spawner_keeps_nothing_of_it(
    real_cgroups: cgroups.CgroupBackend, tmp_path: Path
) -> None:
    """Cloned by the spawner, pid 1's parent is the zygote; the spawner holds only its socket."""
    request = netns.preload()

    def body(report_w: int) -> None:
        with _zygote(tmp_path, request) as loop:
            spawner = loop.spawner
            assert spawner is not None
            envelope = _prepare(loop, real_cgroups)
            init = envelope.held.init_pid
            assert init is not None
            held = []
            for name in os.listdir(f"/proc/{spawner.pid}/fd"):
                with contextlib.suppress(OSError):
                    if int(name) > 2:
                        held.append(os.readlink(f"/proc/{spawner.pid}/fd/{name}"))
            report = {
                "caught": {
                    "stand_in": _caught(os.getpid()),
                    "spawner": _caught(spawner.pid),
                    "init": _caught(init),
                },
                "init_parent": _ppid(init),
                "zygote": os.getpid(),
                "spawner_children": len(_children_of(spawner.pid)),
                "held": sorted(held),
                "host_net": os.readlink("/proc/self/ns/net"),
            }
            envelope.teardown()
        os.write(report_w, json.dumps(report).encode())

    report = json.loads(in_stand_in(body))
    assert report["init_parent"] == report["zygote"]
    assert report["spawner_children"] == 0
    # The stand-in has Python's SIGINT handler; the spawner dropped it once, for every pid
    # 1 it clones (which then skips its own check, see pid1.drop_handlers_for_clones).
    assert report["caught"]["stand_in"] != 0
    assert report["caught"] | {"stand_in": 0} == {"stand_in": 0, "spawner": 0, "init": 0}
    # Its own socket, and the host's network namespace it returns to after each clone:
    # no channel of pid 1, no other envelope's descriptor.
    sockets = [link for link in report["held"] if link.startswith("socket:")]
    assert len(sockets) == 1
    assert sorted(set(report["held"]) - set(sockets)) == [report["host_net"]]


def _children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
        return [int(child) for child in handle.read().split()]


def test_a_spawner_killed_mid_clone_fails_that_preparation_and_the_next_one_works(
    real_cgroups: cgroups.CgroupBackend, tmp_path: Path
) -> None:
    """Killed with pid 1 cloned and untold: fenced, job removed, pid 1 reaped; the next works."""
    request = netns.preload()

    def body(report_w: int) -> None:
        sc.clone = _clone_then_die  # this stand-in and the spawner it forks only
        with _zygote(tmp_path, request) as loop:
            spawner = loop.spawner
            assert spawner is not None
            try:
                _prepare(loop, real_cgroups)
                failed = ""
            except StepError as exc:
                failed = str(exc)
            left_in_loop = bool(loop.envelopes)
            # The spawner's pidfd turns readable: it is gone (the zygote's loop reaps it).
            select.select([spawner.pidfd], [], [], 10)
            orphans = spawner.orphans
            spawner.reap()
            loop.spawner = None
            # Its pid 1 exits once fenced (the job killed, its go pipe closed); a child of
            # ours exits, and the sweep reaps it. The alarm is the deadline.
            signal.alarm(30)
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            signal.alarm(0)
            reaped = sweep(set())
            jobs_left = [job for job in real_cgroups.list_jobs() if job.startswith("jigcmd-spawn")]
            envelope = _prepare(loop, real_cgroups)
            init = envelope.held.init_pid
            assert init is not None
            report = {
                "failed": failed,
                "left_in_loop": left_in_loop,
                "orphans": orphans,
                "reaped": reaped,
                "jobs_left": jobs_left,
                "next_parent": _ppid(init),
                "zygote": os.getpid(),
            }
            envelope.teardown()
            report["children_left"] = _children()
        os.write(report_w, json.dumps(report).encode())

    report = json.loads(in_stand_in(body))
    assert "the spawner went away" in report["failed"]
    assert report["left_in_loop"] is False
    assert report["orphans"] is True
    # The pid 1 it cloned before it died, never named to the zygote, is reaped by the sweep.
    assert report["reaped"] == 1
    assert report["jobs_left"] == []
    assert report["next_parent"] == report["zygote"]
    assert report["children_left"] == []


def test_a_kernel_refusing_clone_parent_makes_the_zygote_clone_pid_1_itself(
    real_cgroups: cgroups.CgroupBackend, tmp_path: Path
) -> None:
    """CLONE_PARENT refused: the spawner is let go of, and the preparation succeeds anyway."""
    request = netns.preload()

    def body(report_w: int) -> None:
        sc.clone = _refused_clone  # this stand-in and the spawner it forks only
        with _zygote(tmp_path, request) as loop:
            spawner = loop.spawner
            assert spawner is not None
            envelope = _prepare(loop, real_cgroups)
            init = envelope.held.init_pid
            assert init is not None
            # Let go of for good: the spawner is killed, its pidfd turns readable.
            gone = bool(select.select([spawner.pidfd], [], [], 10)[0])
            report = {
                "usable": spawner.usable,
                "gone": gone,
                "init_parent": _ppid(init),
                "zygote": os.getpid(),
            }
            second = _prepare(loop, real_cgroups)
            report["second_parent"] = _ppid(second.held.init_pid or 0)
            envelope.teardown()
            second.teardown()
        os.write(report_w, json.dumps(report).encode())

    report = json.loads(in_stand_in(body))
    assert report["usable"] is False
    assert report["gone"] is True
    assert report["init_parent"] == report["zygote"]
    assert report["second_parent"] == report["zygote"]


def test_the_spawner_is_back_in_the_host_network_namespace_after_a_clone_or_a_refusal(
    real_netns: None,
) -> None:
    """A fresh namespace for each clone; the caller returns to the host's whatever happens."""
    request = netns.preload()

    def body(report_w: int) -> None:
        netns.use_request(request)
        host = os.readlink("/proc/self/ns/net")
        go_r, go_w = os.pipe()
        pid, _born_in = spawning.spawn_sibling(None, (go_r,))
        if pid == 0:
            os.read(go_r, 1)  # pid 1's stand-in: in its fresh namespace until told
            os._exit(0)
        child_net = os.readlink(f"/proc/{pid}/ns/net")
        after_clone = os.readlink("/proc/self/ns/net")
        os.close(go_w)  # it exits; with CLONE_PARENT it is the test process's to reap
        sc.clone = _refused_clone
        try:
            spawning.spawn_sibling(None, ())
            refused = False
        except OSError:
            refused = True
        finally:
            sc.clone = _real_clone
        report = {
            "pid": pid,
            "host": host,
            "child": child_net,
            "after_clone": after_clone,
            "refused": refused,
            "after_refusal": os.readlink("/proc/self/ns/net"),
        }
        os.write(report_w, json.dumps(report).encode())

    report = json.loads(in_stand_in(body))
    os.waitpid(report["pid"], 0)
    assert report["child"] != report["host"]
    assert report["after_clone"] == report["host"]
    assert report["refused"] is True
    assert report["after_refusal"] == report["host"]


class _Armed:
    """A stand-in pid 1: sets its death signal as pid 1 does once prepared, then blocks."""

    def __init__(self, blueprint: pid1.Blueprint, control: socket.socket, status_w: int) -> None:
        self.status_w = status_w

    def start(self, born_in: str | None, go_r: int) -> NoReturn:
        sc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # Blocked on a pipe whose writer it holds itself: only a signal ends it, not the
        # zygote's descriptors closing.
        hold_r, _hold_w = os.pipe()
        os.write(self.status_w, b"armed\n")
        os.read(hold_r, 1)
        os._exit(0)


def test_pid_1_cloned_by_the_spawner_dies_with_the_zygote_not_with_the_spawner(
    tmp_path: Path, real_netns: None
) -> None:
    """PR_SET_PDEATHSIG names the zygote: the spawner's SIGKILL leaves pid 1, the zygote's not."""
    request = netns.preload()

    def body(report_w: int) -> None:
        netns.use_request(request)
        pid1.Init = _Armed  # type: ignore[misc, assignment]  # the spawner forked below clones this
        spawner = Spawner.start()
        assert spawner is not None
        status_r, status_w = os.pipe()
        go_r, _go_w = os.pipe()
        _control, init_end = socket.socketpair()
        blueprint = pid1.Blueprint(
            pid1.shaped(probe_plan("")), cgroups.Membership((), None), "max", None, ()
        )
        init = spawner.clone(blueprint, (init_end.fileno(), status_w, go_r))
        assert init is not None
        os.close(status_w)
        assert os.read(status_r, 16) == b"armed\n"
        parent = _ppid(init)
        os.kill(spawner.pid, signal.SIGKILL)
        spawner.reap()
        alive = os.waitid(os.P_PID, init, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        report = {"init": init, "parent": parent, "zygote": os.getpid(), "alive": alive}
        os.write(report_w, json.dumps(report).encode())
        # The stand-in (the zygote) exits now, holding every channel of pid 1.

    report = json.loads(in_stand_in(body))
    assert report["parent"] == report["zygote"]
    assert report["alive"] is True
    try:
        pidfd = os.pidfd_open(report["init"])
    except ProcessLookupError:
        return  # gone already, with its zygote
    try:
        assert select.select([pidfd], [], [], 10)[0], "pid 1 outlived its zygote"
    finally:
        os.close(pidfd)


def test_a_prepared_pid_1_dies_with_its_zygote_whoever_holds_its_control_socket(
    real_cgroups: cgroups.CgroupBackend, tmp_path: Path
) -> None:
    """The death signal is set once pid 1 is prepared, not only at the go.

    A prepared pid 1 waits on its control socket, whose EOF also ends it; here another
    process keeps the zygote's end open, so only the death signal can.
    """
    request = netns.preload()
    holder_r, holder_w = os.pipe()

    def body(report_w: int) -> None:
        with _zygote(tmp_path, request) as loop:
            envelope = _prepare(loop, real_cgroups)
            assert envelope.held.control is not None and envelope.held.job is not None
            holder = os.fork()
            if holder == 0:
                # A copy of the zygote's end of pid 1's control socket, and nothing else.
                spawning.close_all_but((envelope.held.control.fileno(), holder_r))
                os.read(holder_r, 1)  # until the test closes its end
                os._exit(0)
            report = {
                "init": envelope.held.init_pid,
                "holder": holder,
                "job": list(envelope.held.job.paths),
            }
            os.write(report_w, json.dumps(report).encode())
            # The stand-in (the zygote) exits here, its envelope still prepared.
            os._exit(0)

    report = json.loads(in_stand_in(body))
    os.close(holder_r)
    try:
        try:
            pidfd = os.pidfd_open(report["init"])
        except ProcessLookupError:
            pidfd = -1  # gone already, with its zygote
        if pidfd >= 0:
            try:
                assert select.select([pidfd], [], [], 10)[0], "pid 1 outlived its zygote"
            finally:
                os.close(pidfd)
    finally:
        os.close(holder_w)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(report["holder"], 0)
        deadline = time.monotonic() + 10
        for path in reversed(report["job"]):
            while os.path.isdir(path) and time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                time.sleep(0.01)


def _zygote_of(server: int) -> int:
    for child in _children_of(server):
        with contextlib.suppress(OSError), open(f"/proc/{child}/cmdline", "rb") as f:
            if b"jigcmd.envelope.zygote" in f.read():
                return child
    raise AssertionError("no zygote")


def _spawner_of(zygote: int) -> int | None:
    for child in _children_of(zygote):
        with contextlib.suppress(OSError), open(f"/proc/{child}/comm", encoding="ascii") as f:
            if f.read().strip() == "jigcmd-spawner":
                return child
    return None


@pytest.mark.anyio
async def test_after_the_spawner_is_killed_the_next_call_runs(envelope: TracedExecutor) -> None:
    """The zygote sees its spawner die (pidfd), clones pid 1 itself, and the next call runs."""
    zygote = _zygote_of(os.getpid())
    first = await envelope.run(probe_plan("console.log('before');\n"))
    assert first.exit_code == 0
    spawner = _spawner_of(zygote)
    assert spawner is not None, "the zygote has no spawner"
    pidfd = os.pidfd_open(spawner)
    try:
        os.kill(spawner, signal.SIGKILL)
        with anyio.fail_after(10):
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    parents: list[int] = []
    # The candidate outlives the start's report: pid 1 is still there to be looked at (a
    # bare console.log could end, and pid 1 with it, before the report is read).
    outcome = await envelope.run(
        probe_plan("setTimeout(() => console.log('after'), 1000);\n"),
        on_started=lambda started: parents.append(_ppid(started.init_pid)),
    )
    assert outcome.exit_code == 0
    assert parents == [zygote]
    # Reaped, not a zombie child of the zygote; and no new spawner.
    assert spawner not in _children_of(zygote)
    assert _spawner_of(zygote) is None
