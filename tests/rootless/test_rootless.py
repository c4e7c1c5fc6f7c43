"""Every front works for an unprivileged user given only a delegated cgroup subtree."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jigcmd.envelope import cgroups
from tests.rootless.rig import UNDELEGATED_USER, Rootless, remove_tree

pytestmark = [pytest.mark.envelope, pytest.mark.slow]


def _converse(
    command: list[str], frames: list[dict[str, Any]], ids: set[object]
) -> dict[object, dict[str, Any]]:
    """Send `frames` to a server and read until every id in `ids` is answered, then close stdin.

    stdin stays open until the answers are in, as a coordinator keeps it (end of input
    would also wait for them).
    """
    server = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert server.stdin is not None and server.stdout is not None
    answers: dict[object, dict[str, Any]] = {}
    try:
        server.stdin.write("".join(json.dumps(f) + "\n" for f in frames))
        server.stdin.flush()
        while not ids <= answers.keys():
            line = server.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            answers[message.get("id")] = message
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
        if server.stderr is not None:
            server.stderr.close()
    return answers


def test_doctor_passes_for_a_delegated_unprivileged_user(rootless: Rootless) -> None:
    """Every doctor check is ok as the test user, and it names the delegated subtree."""
    done = rootless.run("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok    delegation         jigcmd-u{rootless.uid} in every hierarchy" in done.stdout or (
        "ok    delegation         this process's cgroup" in done.stdout
    )


def _run_as_user(rootless: Rootless, example: Path, candidate: str) -> dict[str, Any]:
    """`jigcmd run tests` as the user on one example candidate; the evidence of a clean exit."""
    done = rootless.run(
        "run",
        "--binding",
        str(example / "binding.toml"),
        "tests",
        "--files",
        str(example / "candidates" / candidate),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    evidence: dict[str, Any] = json.loads(done.stdout)["evidence"]
    assert (evidence["exitCode"], evidence["stopReason"], evidence["cleanup"]) == (
        0,
        "exited",
        "complete",
    )
    return evidence


def test_run_contains_the_example_as_an_unprivileged_user(
    rootless: Rootless, example: Path
) -> None:
    """`jigcmd run` as the user: the example passes in the full envelope; the state is private."""
    _run_as_user(rootless, example, "passing")
    state = rootless.home / ".local" / "state" / "jigcmd"
    assert state.is_dir()
    assert (state.stat().st_uid, state.stat().st_mode & 0o777) == (rootless.uid, 0o700)


def test_an_unprivileged_users_envelope_contains_the_hostile_example(
    rootless: Rootless, example: Path
) -> None:
    """Every escape the hostile example tries fails in the rootless envelope too.

    Not in the cgroup v2 VM's subset: emulated, this suite can outlast the 10 s ceiling.
    """
    stderr = _run_as_user(rootless, example, "hostile")["stderr"]["text"]
    assert "ESCAPED" not in stderr
    assert stderr.count("contained") == 5


def test_serve_answers_run1_and_mcp_calls_as_an_unprivileged_user(
    rootless: Rootless, example: Path
) -> None:
    """A Flow call and an MCP tools/call through `jigcmd serve` started by the user."""
    files = {
        str(p.relative_to(example / "candidates" / "passing")): p.read_text()
        for p in (example / "candidates" / "passing").rglob("*")
        if p.is_file()
    }
    flow = {
        "jsonrpc": "2.0",
        "id": "f1",
        "method": "capability/call",
        "params": {
            "operationId": "rootless-op-1",
            "slot": "command",
            "method": "run",
            "input": {"command": "tests", "files": files},
        },
    }
    answers = _converse(
        rootless.command("serve", "--binding", str(example / "binding.toml")), [flow], {"f1"}
    )
    assert answers["f1"]["result"]["value"]["exitCode"] == 0, answers
    frames: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "cli", "arguments": {"files": files, "args": ["x"], "stdin": "a\n"}},
        },
    ]
    results = _converse(
        rootless.command("serve", "--binding", str(example / "binding.toml")), frames, {1, 2}
    )
    call = results[2]["result"]
    assert call["isError"] is False, results
    assert json.loads(call["structuredContent"]["stdout"]["head"]) == {
        "args": ["x"],
        "records": ["a"],
    }


class _Session:
    """A `jigcmd serve` the test user started, answering Flow calls one at a time."""

    def __init__(self, rootless: Rootless, example: Path) -> None:
        self.example = example
        self.process = subprocess.Popen(
            rootless.command("serve", "--binding", str(example / "binding.toml")),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd="/",
        )

    def call(self, operation: str) -> dict[str, Any]:
        """One `run` of the passing candidate's tests; the answer."""
        files = {
            str(p.relative_to(self.example / "candidates" / "passing")): p.read_text()
            for p in (self.example / "candidates" / "passing").rglob("*")
            if p.is_file()
        }
        frame = {
            "jsonrpc": "2.0",
            "id": operation,
            "method": "capability/call",
            "params": {
                "operationId": operation,
                "slot": "command",
                "method": "run",
                "input": {"command": "tests", "files": files},
            },
        }
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(frame) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def zygote(self) -> int:
        """The pid of this server's zygote."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        for pid in children.read_text().split():
            if Path(f"/proc/{pid}/comm").read_text().strip() == "jigcmd-zygote":
                return int(pid)
        raise AssertionError("the server has no zygote")

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


def test_an_unprivileged_users_sessions_share_one_staged_runtime(
    rootless: Rootless, example: Path
) -> None:
    """Two servers of the user on one state directory: the second zygote joins the first's
    user namespace and mounts its copy (one file on one tmpfs), and still runs Bun from it
    once the first server has exited."""
    sessions = [_Session(rootless, example), _Session(rootless, example)]
    try:
        for index, session in enumerate(sessions):
            assert session.call(f"share-{index}")["result"]["value"]["exitCode"] == 0
        staged = rootless.home / ".local/state/jigcmd/runtime/opt/bun/bin/bun"
        first, second = (os.stat(f"/proc/{s.zygote()}/root{staged}") for s in sessions)
        assert (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
        users = {os.stat(f"/proc/{s.zygote()}/ns/user").st_ino for s in sessions}
        assert len(users) == 1
        sessions[0].close()
        assert sessions[1].call("share-after")["result"]["value"]["exitCode"] == 0
    finally:
        for session in sessions:
            if session.process.poll() is None:
                session.close()


def test_jarvis_runs_an_allowed_program_as_an_unprivileged_user(
    rootless: Rootless, tmp_path: Path
) -> None:
    """`jigcmd jarvis` started by the user runs an allowed /bin/true contained, exit 0."""
    policy = Path("/tmp") / f"jigcmd-rootless-policy-{secrets.token_hex(4)}.toml"
    policy.write_text(
        '[[rule]]\nname = "true"\ndecision = "allow"\nargv0 = ["/bin/true"]\n', encoding="utf-8"
    )
    policy.chmod(0o644)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = "jv_" + secrets.token_hex(16)
    command = rootless.command(
        "jarvis",
        "--policy",
        str(policy),
        "--port",
        str(port),
        env={"JARVIS_BEARER_TOKEN": token},
    )
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/"
    )
    try:
        body = json.dumps({"tool": "jarvis.run.create", "args": {"argv": ["/bin/true"]}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/tools/jarvis.run.create",
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        answer = None
        for _ in range(200):
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    answer = json.loads(response.read())
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None:
                    break
                time.sleep(0.05)
        assert answer is not None, "jarvis did not answer"
        assert (answer["decision"], answer["status"], answer["exit_code"]) == (
            "allow",
            "exited",
            0,
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        policy.unlink()


def test_without_delegation_the_server_refuses_and_says_what_to_configure(
    rootless: Rootless, example: Path
) -> None:
    """A user with no delegated subtree: serve exits 2 naming the fix; doctor fails the check."""
    served = rootless.run(
        "serve",
        "--binding",
        str(example / "binding.toml"),
        user=UNDELEGATED_USER,
        input="",
    )
    assert served.returncode == 2
    assert "delegat" in served.stderr or "cgroup" in served.stderr
    assert "chown" in served.stderr or "Delegate=yes" in served.stderr
    doctor = rootless.run("doctor", user=UNDELEGATED_USER)
    assert doctor.returncode == 1
    assert "FAIL  delegation" in doctor.stdout


def test_nothing_is_left_in_the_delegated_subtree(rootless: Rootless, example: Path) -> None:
    """After a run as the user, the delegated base holds no job and no process of it."""
    done = rootless.run(
        "run",
        "--binding",
        str(example / "binding.toml"),
        "tests",
        "--files",
        str(example / "candidates" / "passing"),
    )
    assert done.returncode == 0, done.stderr
    mode = cgroups.detect().mode
    base = (
        f"jigcmd-u{rootless.uid}"
        if mode != "v2"
        else (f"/sys/fs/cgroup/jigcmd-delegated-u{rootless.uid}/jigcmd")
    )
    assert cgroups.detect(base=base).list_jobs() == []


def test_doctor_names_the_unified_step_a_half_set_up_hybrid_host_misses(
    rootless: Rootless,
) -> None:
    """Delegated directories made, the shell not moved into unified/jigcmd-u<uid>: the
    delegation line names that step and the exact command, before any run fails."""
    if cgroups.detect().mode != "hybrid":
        pytest.skip("the unified-hierarchy step exists on hybrid hosts only")
    half = dataclasses.replace(rootless, prelude="")
    done = half.run("doctor")
    assert done.returncode == 1, done.stdout
    lines = done.stdout.splitlines()
    (failed,) = [i for i, line in enumerate(lines) if line.startswith("FAIL  delegation")]
    unified = f"/sys/fs/cgroup/unified/jigcmd-u{rootless.uid}"
    assert f"outside the delegated {unified}" in lines[failed]
    assert "join cgroup: Permission denied" in lines[failed]
    fix = lines[failed + 1]
    # The doctor's parent is this test process: setpriv and env exec the shell away.
    assert f"echo {os.getpid()} > {unified}/cgroup.procs" in fix, fix
    assert "mkdir" not in fix
    assert "ok    privileges" in done.stdout


def test_an_undelegated_user_hears_each_cause_once(rootless: Rootless) -> None:
    """No delegated subtree: one line says what to create (not four), the others point to it,
    and the container line does not blame the container."""
    done = rootless.run("doctor", user=UNDELEGATED_USER)
    assert done.returncode == 1
    out = done.stdout
    assert out.count("mkdir -p") == 1, out
    assert "FAIL  delegation" in out
    assert "FAIL  cgroups            not checked: no usable delegated cgroup subtree" in out
    assert "FAIL  end-to-end         not attempted: no usable delegated cgroup subtree" in out
    assert "FAIL  container" not in out
    assert "mount cgroup2" not in out  # a fix for another host


def test_a_half_set_up_hybrid_host_is_refused_at_start_not_at_every_run(
    rootless: Rootless, example: Path
) -> None:
    """serve and run name the unified step and exit 2 before anything runs, instead of
    failing each run at "join cgroup: Permission denied"."""
    if cgroups.detect().mode != "hybrid":
        pytest.skip("the unified-hierarchy step exists on hybrid hosts only")
    half = dataclasses.replace(rootless, prelude="")
    unified = f"/sys/fs/cgroup/unified/jigcmd-u{rootless.uid}"
    binding = str(example / "binding.toml")
    served = half.run("serve", "--binding", binding, input="")
    ran = half.run(
        "run", "--binding", binding, "tests", "--files", str(example / "candidates" / "passing")
    )
    for done in (served, ran):
        assert done.returncode in (2, 3), done.stdout + done.stderr
        assert f"outside the delegated {unified}" in done.stderr, done.stderr
        assert "join cgroup" not in done.stdout + done.stderr


@pytest.fixture
def fresh_cgroup(rootless: Rootless) -> Iterator[Path]:
    """A fresh cgroup2 directory delegated to the test user, as a new scope is (v2 only)."""
    if cgroups.detect().mode != "v2":
        pytest.skip(
            "a delegated cgroup of one's own is how pure cgroup v2 hosts delegate"
            " (run in the cgroup v2 VM: tests/v2vm/test_v2vm.py)"
        )
    path = Path(f"/sys/fs/cgroup/jigcmd-scope-u{rootless.uid}-{secrets.token_hex(4)}")
    path.mkdir()
    try:
        subprocess.run(["chown", "-R", str(rootless.uid), str(path)], check=True)
        yield path
    finally:
        remove_tree(str(path))


def test_a_shell_that_stays_in_the_delegated_cgroup_is_named_before_any_run(
    rootless: Rootless, example: Path, fresh_cgroup: Path
) -> None:
    """jigcmd started by a shell that stays in the delegated scope (no `exec`): the delegation
    line names that shell and the fix, the others point at it, run and serve refuse at start
    with the same words, and no `jigcmd-server` is left; exec'd alone, it is delegated."""
    shared = dataclasses.replace(rootless, prelude=f"echo $$ > {fresh_cgroup}/cgroup.procs &&")
    binding = str(example / "binding.toml")
    named = f"(sh) shares your delegated cgroup {fresh_cgroup}"
    doctor = shared.run("doctor", stays=True)
    assert doctor.returncode == 1, doctor.stdout
    lines = doctor.stdout.splitlines()
    (failed,) = [i for i, line in enumerate(lines) if line.startswith("FAIL  delegation")]
    assert named in lines[failed], lines[failed]
    assert "systemd-run --user --scope -p Delegate=yes" in lines[failed + 1]
    assert "exec jigcmd" in lines[failed + 1]
    assert "FAIL  cgroups            not checked: no usable delegated" in doctor.stdout
    assert "FAIL  end-to-end         not attempted: no usable delegated" in doctor.stdout
    assert doctor.stdout.count("shares your delegated cgroup") == 1, doctor.stdout
    served = shared.run("serve", "--binding", binding, input="", stays=True)
    ran = shared.run(
        "run",
        "--binding",
        binding,
        "tests",
        "--files",
        str(example / "candidates" / "passing"),
        stays=True,
    )
    for done in (served, ran):
        assert done.returncode in (2, 3), done.stdout + done.stderr
        assert named in done.stderr, done.stderr
        assert "contains processes" not in done.stdout + done.stderr
    assert [p.name for p in fresh_cgroup.iterdir() if p.is_dir()] == []
    alone = shared.run("doctor")
    assert f"ok    delegation         this process's cgroup {fresh_cgroup} is" in alone.stdout, (
        alone.stdout
    )
    assert "ok    cgroups" in alone.stdout, alone.stdout


@pytest.fixture
def pretend_docker() -> Iterator[None]:
    """In the v2 VM, a docker container's marker (the VM itself is none); elsewhere as is."""
    made = os.environ.get("JIGCMD_IN_V2VM") == "1" and not os.path.exists("/.dockerenv")
    if made:
        Path("/.dockerenv").touch()
    try:
        yield
    finally:
        if made:
            os.unlink("/.dockerenv")


def test_a_delegation_without_cpu_is_blamed_on_the_delegation_not_the_container(
    rootless: Rootless, example: Path, fresh_cgroup: Path, pretend_docker: None
) -> None:
    """The user's delegated cgroup offers memory and pids only: the delegation line names cpu
    and how to delegate it, the cgroups and container lines do not repeat it, and run
    refuses at start with the same words."""
    (fresh_cgroup / "cgroup.subtree_control").write_text("+memory +pids", encoding="ascii")
    scope = fresh_cgroup / "jigcmd-nocpu"
    scope.mkdir()
    subprocess.run(["chown", "-R", str(rootless.uid), str(scope)], check=True)
    nocpu = dataclasses.replace(rootless, prelude=f"echo $$ > {scope}/cgroup.procs &&")
    doctor = nocpu.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    said = f"the delegated cgroup {scope} offers no cpu controller (it has: memory pids)"
    assert f"FAIL  delegation         {said}" in doctor.stdout, doctor.stdout
    assert "FAIL  cgroups            not checked: no usable delegated" in doctor.stdout
    assert "FAIL  container" not in doctor.stdout
    assert "not available at" not in doctor.stdout
    ran = nocpu.run(
        "run",
        "--binding",
        str(example / "binding.toml"),
        "tests",
        "--files",
        str(example / "candidates" / "passing"),
    )
    assert ran.returncode in (2, 3), ran.stdout + ran.stderr
    assert said in ran.stderr and "Delegate=memory pids cpu" in ran.stderr, ran.stderr
    assert [p.name for p in scope.iterdir() if p.is_dir()] == []
