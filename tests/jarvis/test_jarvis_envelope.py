"""Allowed runs in the real envelope, called through HTTP and through the real UTCP client.

Envelope-marked: locally they skip when the machine cannot build an envelope; under CI they
fail instead. Working directories live under /var/tmp (the envelope mounts its own scratch
over /tmp) in `jigcmd-test-*` directories that are removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from jigcmd.envelope.native import NativeExecutor
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import (
    ACTOR,
    TOKEN,
    auth,
    harness,
    invoke_body,
    live_server,
    make_service,
)
from tests.jarvis.utcp_setup import body, manual_template, utcp_client
from tests.optional import require_tools
from tests.ownedmounts import tmpfs
from tests.required import unavailable, usable_cgroups

pytestmark = pytest.mark.envelope


@pytest.fixture
def workdir() -> Iterator[Path]:
    """An empty directory the envelope's unprivileged user may write, removed afterwards."""
    path = Path("/var/tmp") / f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    path.mkdir(mode=0o777)
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def policy_for(workdir: Path) -> str:
    return f"""
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "no-forbidden"
decision = "deny"
argv0 = ["touch"]
args_any = ["forbidden-.*"]

[[rule]]
name = "touch-here"
decision = "allow"
argv0 = ["touch", "sh"]
cwd = ["{workdir}/rw"]
writable_cwd = true

[[rule]]
name = "read-here"
decision = "allow"
argv0 = ["touch", "cat", "sh"]
cwd = ["{workdir}/ro"]

[[rule]]
name = "basics"
decision = "allow"
argv0 = ["echo", "true", "sh", "env", "perl"]
"""


@pytest.fixture
def dirs(workdir: Path) -> tuple[Path, Path]:
    rw, ro = workdir / "rw", workdir / "ro"
    for path in (rw, ro):
        path.mkdir()
        path.chmod(0o777)
    (ro / "note.txt").write_text("read me\n")
    return rw, ro


async def test_a_working_directory_holding_a_mount_fails_naming_the_mount(workdir: Path) -> None:
    """A cwd holding a host mount (a tmpfs of this test's): nothing runs, the detail says why."""
    usable_cgroups()
    held = workdir / "held"
    policy = f"""
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "pwd-there"
decision = "allow"
argv0 = ["pwd"]
cwd = ["{workdir}"]
"""
    # Mounted before the zygote starts: its mount namespace is a copy of the host's then.
    with tmpfs(held, "jigcmd-test", "size=64k"):
        native = NativeExecutor()
        try:
            await native.start()
            async with harness(make_service(native, policy=policy)) as h:
                response = await h.invoke("jarvis.run.create", argv=["pwd"], cwd=str(workdir))
        finally:
            await native.aclose()
    assert response.json()["status"] == "failed", response.text
    detail = response.json()["detail"]
    assert detail.startswith("EXECUTION_FAILED: containment envelope incomplete, nothing ran:")
    assert f"bind {workdir}: {workdir} holds a mount ({held})" in detail


def _mounts_under(directory: str) -> list[str]:
    """Mount points below `directory` in this process's mount table."""
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        points = [line.split()[4] for line in table]
    return [point for point in points if point.startswith(directory.rstrip("/") + "/")]


def test_the_example_policys_echo_in_tmp_runs_in_tmp(workdir: Path) -> None:
    """`echo` with cwd /tmp runs: jarvis stages its runtime in its state directory, not /tmp."""
    machine_runs_jarvis()
    if held := _mounts_under("/tmp"):
        # The host's own mounts: binding /tmp would show what they hide, so the envelope
        # refuses it by design (the test above); this one needs a /tmp that holds none,
        # which a CI machine has: there it fails rather than skip.
        unavailable(f"/tmp holds mounts on this machine: {', '.join(held)}")
    example = Path(__file__).parents[2] / "jigcmd" / "jarvis" / "example-policy.toml"
    # The state directory goes in it, outside /tmp (whose bind would show its runtime
    # mount): 0700, since a state directory in a world-writable one is refused
    # (docs/deployment.md, who may write the state directory's path).
    workdir.chmod(0o700)
    # TMPDIR=/tmp: where the zygote's staging mount point went before, whatever the rig says.
    with (
        JarvisChild(workdir, policy=example.read_text(), env={"TMPDIR": "/tmp"}) as jarvis,
        httpx.Client(base_url=jarvis.base) as client,
    ):
        response = client.post(
            "/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo", "in tmp"], cwd="/tmp"),
            headers=auth(),
        )
    answer = response.json()
    assert answer["matched_rule"] == "echo-in-tmp", answer
    assert (answer["status"], answer["stdout"]["text"]) == ("exited", "in tmp\n"), answer


async def test_the_example_git_status_rule_runs_git_status_in_a_repository(
    executor: NativeExecutor, workdir: Path
) -> None:
    """The documented call works as uid 65534: no `dubious ownership` refusal."""
    require_tools("git", what="the example policy's git-status rule")
    repo = workdir / "repo"
    repo.mkdir()
    await anyio.run_process(["git", "init", "-q", str(repo)])
    (repo / "new.txt").write_text("x\n")
    example = Path(__file__).parents[2] / "jigcmd" / "jarvis" / "example-policy.toml"
    policy = example.read_text().replace('"/srv/projects"', f'"{workdir}"')
    argv = ["git", "-c", "safe.directory=*", "status", "--short"]
    async with harness(make_service(executor, policy=policy)) as h:
        response = await h.invoke("jarvis.run.create", argv=argv, cwd=str(repo))
    answer = response.json()
    assert answer["matched_rule"] == "git-status", answer
    assert (answer["exit_code"], answer["stdout"]["text"]) == (0, "?? new.txt\n"), answer


async def test_a_denied_argv_never_starts_a_process(
    executor: NativeExecutor, workdir: Path, dirs: tuple[Path, Path]
) -> None:
    """`touch forbidden-…` is denied and no file appears; the allowed twin does create one."""
    rw, _ = dirs
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        denied = await h.invoke("jarvis.run.create", argv=["touch", "forbidden-1"], cwd=str(rw))
        allowed = await h.invoke("jarvis.run.create", argv=["touch", "allowed-1"], cwd=str(rw))
    assert denied.json()["decision"] == "deny"
    assert denied.json()["run_id"] is None
    assert not (rw / "forbidden-1").exists()
    assert allowed.json()["status"] == "exited", allowed.text
    assert allowed.json()["exit_code"] == 0, allowed.text
    assert (rw / "allowed-1").exists()


async def test_cwd_is_read_only_unless_the_rule_makes_it_writable(
    executor: NativeExecutor, workdir: Path, dirs: tuple[Path, Path]
) -> None:
    """In a read-only cwd the program reads files but cannot create one."""
    _, ro = dirs
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        read = await h.invoke("jarvis.run.create", argv=["cat", "note.txt"], cwd=str(ro))
        write = await h.invoke("jarvis.run.create", argv=["touch", "new"], cwd=str(ro))
    assert read.json()["stdout"]["text"] == "read me\n"
    assert write.json()["exit_code"] != 0
    assert "Read-only file system" in write.json()["stderr"]["text"]
    assert not (ro / "new").exists()


async def test_the_run_sees_a_fixed_environment_without_the_servers_secrets(
    executor: NativeExecutor, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`env` inside the envelope shows PATH and LANG only, never JARVIS_BEARER_TOKEN."""
    monkeypatch.setenv("JARVIS_BEARER_TOKEN", TOKEN)
    service = make_service(executor, policy=policy_for(workdir), host_env=dict(os.environ))
    async with harness(service) as h:
        response = await h.invoke("jarvis.run.create", argv=["env"])
    lines = set(response.json()["stdout"]["text"].splitlines())
    assert lines == {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
    assert TOKEN not in response.text


# perl (Debian's perl-base, always there) makes one socket per family and says what happened.
SOCKETS_PL = (
    "for my $f (40, 17, 44, 1, 2, 10) "
    '{ print "$f ", (socket(my $s, $f, $f == 17 ? 3 : 1, 0) ? "ok" : "$!"), "\\n" }'
)


async def test_a_host_program_gets_the_same_socket_family_rule(
    executor: NativeExecutor, workdir: Path
) -> None:
    """Under jarvis too, vsock, packet and xdp sockets are refused; unix, inet, inet6 work."""
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        response = await h.invoke("jarvis.run.create", argv=["perl", "-e", SOCKETS_PL])
    assert response.json()["exit_code"] == 0, response.text
    lines = response.json()["stdout"]["text"].splitlines()
    refused = "Address family not supported by protocol"
    assert lines == [f"40 {refused}", f"17 {refused}", f"44 {refused}", "1 ok", "2 ok", "10 ok"]


async def test_a_run_past_its_timeout_ends_at_the_deadline(
    executor: NativeExecutor, workdir: Path
) -> None:
    """`sh -c 'while :; do :; done'` with timeout_ms 300 ends with status deadline."""
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        response = await h.invoke(
            "jarvis.run.create", argv=["sh", "-c", "while :; do :; done"], timeout_ms=300
        )
    assert response.json()["status"] == "deadline"
    assert response.json()["signal"] == "SIGKILL"


async def test_a_host_program_killed_by_a_real_time_signal_exited_naming_it(
    executor: NativeExecutor, workdir: Path
) -> None:
    """Perl killing itself with signal 40: exited, `SIGRTMIN+6`, its output kept."""
    program = '$| = 1; print "bye\\n"; kill 40, $$; sleep 5; print "still here\\n"'
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        response = await h.invoke("jarvis.run.create", argv=["perl", "-e", program])
    answer = response.json()
    assert (answer["status"], answer["signal"], answer["exit_code"]) == (
        "exited",
        "SIGRTMIN+6",
        None,
    ), answer
    assert answer["stdout"]["text"] == "bye\n", answer


async def test_twenty_concurrent_allowed_runs_all_complete_and_are_recorded(
    executor: NativeExecutor, workdir: Path
) -> None:
    """20 simultaneous `echo <n>` calls each get their own run_id and their own output."""
    results: dict[int, dict[str, Any]] = {}
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:

        async def one(n: int) -> None:
            response = await h.invoke("jarvis.run.create", argv=["echo", str(n)])
            results[n] = response.json()

        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(one, n)
        records = [h.store.jarvis_get(r["run_id"]) for r in results.values()]
    assert sorted(results) == list(range(20))
    for n, answer in results.items():
        assert (answer["status"], answer["exit_code"]) == ("exited", 0), answer
        assert answer["stdout"]["text"] == f"{n}\n"
    assert len({r["run_id"] for r in results.values()}) == 20
    assert all(r is not None and r.status == "exited" for r in records)


async def test_the_utcp_client_discovers_and_calls_the_tools(
    executor: NativeExecutor, workdir: Path
) -> None:
    """The real UTCP client registers GET /utcp, runs an allowed argv, and gets a denied one."""
    service = make_service(executor, policy=policy_for(workdir))
    async with live_server(service) as base:
        client = await utcp_client()
        try:
            registered = await client.register_manual(manual_template(base))
            assert registered.success, registered.errors
            names = {tool.name for tool in registered.manual.tools}
            allowed = await client.call_tool(
                "jarvis.run.create", body("jarvis.run.create", argv=["echo", "via utcp"])
            )
            denied = await client.call_tool(
                "jarvis.run.create", body("jarvis.run.create", argv=["rm", "-rf", "/"])
            )
            fetched = await client.call_tool(
                "jarvis.run.get", body("jarvis.run.get", run_id=allowed["run_id"])
            )
        finally:
            await client.close()
    assert names == {"jarvis.policy.check", "jarvis.run.create", "jarvis.run.get"}
    assert allowed["decision"] == "allow"
    assert (allowed["status"], allowed["exit_code"]) == ("exited", 0)
    assert allowed["stdout"]["text"] == "via utcp\n"
    assert (denied["decision"], denied["run_id"]) == ("deny", None)
    assert fetched["argv"] == ["echo", "via utcp"]
    rows = service.store.audit_rows(10)
    assert {row.actor for row in rows} == {ACTOR}


async def test_the_utcp_client_discovers_only_the_granted_tools(
    executor: NativeExecutor, workdir: Path
) -> None:
    """With only policy:check granted, the manual lists that tool alone; run.create is 403."""
    service = make_service(executor, policy=policy_for(workdir))
    async with live_server(service, capabilities="policy:check") as base:
        client = await utcp_client()
        try:
            registered = await client.register_manual(manual_template(base))
            assert registered.success, registered.errors
            names = {tool.name for tool in registered.manual.tools}
            checked = await client.call_tool(
                "jarvis.policy.check", body("jarvis.policy.check", argv=["echo"])
            )
            with pytest.raises(Exception, match="not found"):
                await client.call_tool(
                    "jarvis.run.create", body("jarvis.run.create", argv=["echo"])
                )
        finally:
            await client.close()
        async with httpx.AsyncClient(base_url=base) as raw:
            refused = await raw.post(
                "/tools/jarvis.run.create",
                json={"tool": "jarvis.run.create", "args": {"argv": ["echo"]}},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
    assert names == {"jarvis.policy.check"}
    assert checked["decision"] == "allow"
    assert refused.status_code == 403
    assert refused.json()["reason"] == "capability denied"
