"""What "prepared" means: every process of the envelope is armed and waits for the go.

The zygote reads the cgroup's CPU baseline when pid 1 reports "prepared" (off the request's
path), so from then on nothing of the envelope may still be working: pid 1 must already
have dropped half its privileges and be blocked on the go. The preparation runs in a forked
stand-in zygote (its loop turned until the envelope is prepared), which reports what pid 1's
/proc status says at that moment.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups, hostids, lifecycle, netns, privileges, seccomp, staging
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.loop import EventLoop
from jigcmd.envelope.messages import Launch
from jigcmd.envelope.reporting import RunChannel
from jigcmd.envelope.states import State
from tests.envelope.hostile_harness import probe_plan
from tests.envelope.standin import in_stand_in

pytestmark = pytest.mark.envelope

_FIELDS = (
    "Uid",
    "Gid",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
    "SigCgt",
)


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        lines = handle.read().splitlines()
    fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    return {key: " ".join(fields[key].split()) for key in _FIELDS}


@contextlib.contextmanager
def _prepared(
    backend: cgroups.CgroupBackend, request: bytes, staging_dir: Path
) -> Iterator[tuple[lifecycle.Envelope, int]]:
    """In the stand-in: do what the zygote does, prepare an envelope; yield it and pid 1.

    The envelope is torn down on the way out.
    """
    os.setsid()
    netns.use_request(request)
    # Everything pid 1 and the candidate need is loaded while the host's files are in view.
    seccomp.build_filter()
    privileges.prepare()
    plan = probe_plan("")
    staging.enter(str(staging_dir))
    staging.stage(plan.binds)
    loop = EventLoop()
    envelope = lifecycle.Envelope(loop, backend, None, f"prep{uuid.uuid4().hex[:8]}")
    loop.envelopes.add(envelope)
    try:
        envelope.prepare(plan)
        assert loop.run_until(lambda: envelope.state is not State.UNSHARING, 10)
        assert loop.run_until(lambda: envelope.state is not State.BUILDING, 10)
        assert envelope.state is State.PREPARED
        assert envelope.held.init_pid is not None
        yield envelope, envelope.held.init_pid
    finally:
        envelope.teardown()


def _prepared_envelope(backend: cgroups.CgroupBackend, staging_dir: Path) -> dict[str, object]:
    """Prepare an envelope in a stand-in zygote; pid 1's children and status right after."""
    request = netns.preload()

    def prepare(report_w: int) -> None:
        with _prepared(backend, request, staging_dir) as (envelope, init):
            with open(f"/proc/{init}/task/{init}/children", encoding="ascii") as handle:
                children = [int(pid) for pid in handle.read().split()]
            report = {
                "children": len(children),
                "init": _status(init),
                "cpu_at_go": envelope.cpu_at_go,
            }
        os.write(report_w, json.dumps(report).encode())

    seen: dict[str, object] = json.loads(in_stand_in(prepare))
    return seen


@pytest.mark.parametrize("attempt", range(3))
def test_when_prepare_returns_pid_1_waits_alone_without_a_signal_handler(
    real_cgroups: cgroups.CgroupBackend, attempt: int, tmp_path: Path
) -> None:
    """No candidate before the go, no handler it could trigger, the drop done, baseline read.

    The stand-in runs Python's default SIGINT handler: pid 1 must have dropped it.
    """
    del attempt  # repeated: a preparation still under way is a race, not a certainty
    report = _prepared_envelope(real_cgroups, tmp_path)
    assert report["children"] == 0
    init = report["init"]
    assert isinstance(init, dict)
    assert init["SigCgt"] == "0000000000000000"
    # Its own host uid (hostids.py), root of its own namespace, dropped as far as the candidate
    # will be: nothing it does at the go needs a capability or a mount (the candidate files
    # go through the tree's writable copy), so the filter's install is off the request's path.
    assert init["Uid"].split()[0] != "0"
    if os.geteuid() == 0:
        first, count = hostids.lease_range()
        assert first <= int(init["Uid"].split()[0]) < first + count, init["Uid"]
        assert init["Gid"].split()[0] == init["Uid"].split()[0], init["Gid"]
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert init[caps] == "0000000000000000", caps
    assert (init["NoNewPrivs"], init["Seccomp"]) == ("1", "2")
    assert isinstance(report["cpu_at_go"], int) and report["cpu_at_go"] > 0


def _namespace_links(pid: int | str) -> set[str]:
    """The envelope namespaces `pid` has open as descriptors (links like `mnt:[4026532301]`).

    The host's own network namespace, which the zygote holds to return to, is left out.
    """
    links = set()
    host_net = os.readlink(f"/proc/{pid}/ns/net")
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, closed meanwhile
        if target.split(":", 1)[0] in _KINDS and target != host_net:
            links.add(target)
    return links


_KINDS = ("mnt", "net", "ipc", "uts", "pid", "cgroup", "user")


def test_pid_1s_namespaces_outlive_it_until_the_zygote_lets_go(
    real_cgroups: cgroups.CgroupBackend, tmp_path: Path
) -> None:
    """Pid 1's exit does not tear its namespaces down: the zygote does, after answering."""
    request = netns.preload()

    def hold(report_w: int) -> None:
        with _prepared(real_cgroups, request, tmp_path) as (envelope, init):
            own = {os.readlink(f"/proc/{init}/ns/{kind}") for kind in _KINDS}
            prepared = _namespace_links("self")
            envelope.held.kill_and_wait()
            released = envelope._release()
            after_release = _namespace_links("self")
            init_gone = not os.path.exists(f"/proc/{init}")
        report = {
            "own": sorted(own),
            "prepared": sorted(prepared),
            "released": released[0],
            "after_release": sorted(after_release),
            "init_gone": init_gone,
            "after_let_go": sorted(_namespace_links("self")),
        }
        os.write(report_w, json.dumps(report).encode())

    report = json.loads(in_stand_in(hold))
    # Held from the preparation on, all seven, and still held once pid 1 is gone and
    # the cgroup removed (the answer goes out then) ...
    assert len(report["own"]) == len(_KINDS)
    assert report["prepared"] == report["own"]
    assert report["released"] is True
    assert report["init_gone"] is True
    assert report["after_release"] == report["own"]
    # ... and none is left once the zygote lets go.
    assert report["after_let_go"] == []


def test_a_go_goes_only_to_an_envelope_prepared_for_the_launch_s_shape(
    real_cgroups: cgroups.CgroupBackend, tmp_path: Path
) -> None:
    """Pid 1 runs a go with its prepared binds and limits, so the zygote checks the shape."""
    request = netns.preload()

    def go(report_w: int) -> None:
        with _prepared(real_cgroups, request, tmp_path) as (envelope, init):
            assert envelope.shape is not None
            plan = probe_plan("")
            other = plan._replace(limits=plan.limits._replace(pids_max=plan.limits.pids_max + 1))
            run_here, run_there = socket.socketpair()
            envelope.launch = Launch(run_id="r", plan=other)
            envelope.run = RunChannel(run_here.detach(), None)
            stdio = [os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC) for _ in range(4)]
            envelope.held.stdio = (stdio[0], stdio[1], stdio[2], stdio[3])
            try:
                envelope._go()
                refused = ""
            except StepError as exc:
                refused = str(exc)
            # A go would have reached a gate that reads EOF (/dev/null): pid 1 would have
            # given up at once ("withdrawn") and exited. It still waits.
            time.sleep(0.3)
            with open(f"/proc/{init}/stat", encoding="ascii") as handle:
                state = handle.read().rpartition(")")[2].split()[0]
            run_there.close()
        os.write(report_w, json.dumps({"refused": refused, "state": state}).encode())

    report = json.loads(in_stand_in(go))
    assert "the launch's shape is not the prepared one" in report["refused"]
    assert report["state"] == "S"
