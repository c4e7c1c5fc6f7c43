"""The lifetime of one run in a real envelope: how it ends, what it sees, what it may touch.

Every run goes through `TracedExecutor`, which fails the test when the job's cgroups, a
process of the envelope or a host mount outlive the run. Assertions are on evidence and the
resource report, never on durations.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable

import anyio
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.api import Assigned, EnvelopeIdentity, RunOutcome
from jigcmd.envelope.native import NativeExecutor
from jigcmd.evidence import OUTPUT_CAP_BYTES, decode_output
from jigcmd.plan import RunPlan
from tests.envelope.hostile_harness import DEADLINE_S, Attempt, TracedExecutor, attempts, probe_plan
from tests.garbage import cyclic_garbage

pytestmark = pytest.mark.envelope

# Blocks the main thread for good without spinning or an empty event loop (which would exit).
PR_SET_CHILD_SUBREAPER = 36
BLOCK_FOREVER = "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\n"


async def run(
    envelope: TracedExecutor,
    plan: RunPlan,
    on_started: Callable[[EnvelopeIdentity], None] | None = None,
    cancel: CancelSignal | None = None,
) -> RunOutcome:
    return await envelope.run(plan, cancel, on_started)


async def test_an_exit_code_is_reported_as_is(envelope: TracedExecutor) -> None:
    """A candidate that exits 3 ends `exited` with exit code 3 and no signal."""
    outcome = await run(envelope, probe_plan("process.exit(3);\n"))
    assert (outcome.exit_code, outcome.signal, outcome.stop_reason) == (3, None, "exited")
    assert not outcome.report.deadline_hit


async def test_a_finished_runs_collector_is_freed_without_the_garbage_collector(
    envelope: TracedExecutor,
) -> None:
    """No helper task of the run ends by a cancel, so no cycle keeps the run's objects."""
    with cyclic_garbage() as kept:
        outcome = await run(envelope, probe_plan("process.exit(0);\n"))
    assert outcome.exit_code == 0
    assert kept.isdisjoint({"RunCollector", "CancelledError"})


async def test_a_fatal_signal_is_reported_by_name(envelope: TracedExecutor) -> None:
    """A candidate killed by SIGSEGV ends `exited` with signal "SIGSEGV" and no exit code."""
    outcome = await run(envelope, probe_plan('process.kill(process.pid, "SIGSEGV");\n'))
    assert (outcome.exit_code, outcome.signal, outcome.stop_reason) == (None, "SIGSEGV", "exited")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("for (;;) {}\n", id="spin"),
        pytest.param(BLOCK_FOREVER, id="block"),
        pytest.param("await Bun.sleep(1e9);\n", id="sleep"),
    ],
)
async def test_at_the_deadline_the_whole_tree_is_killed(
    envelope: TracedExecutor, source: str
) -> None:
    """A candidate still running at the plan's deadline is SIGKILLed with stop reason "deadline"."""
    outcome = await run(envelope, probe_plan(source, seconds=DEADLINE_S))
    assert (outcome.exit_code, outcome.signal, outcome.stop_reason) == (
        None,
        "SIGKILL",
        "deadline",
    )
    assert outcome.report.deadline_hit


async def test_a_cancel_kills_the_whole_tree(envelope: TracedExecutor) -> None:
    """Setting the cancel event after the start SIGKILLs the tree with stop reason "cancelled"."""
    cancel = CancelSignal()
    outcome = await run(
        envelope,
        probe_plan(BLOCK_FOREVER),
        on_started=lambda _started: cancel.set(),
        cancel=cancel,
    )
    assert (outcome.exit_code, outcome.signal, outcome.stop_reason) == (
        None,
        "SIGKILL",
        "cancelled",
    )
    assert not outcome.report.deadline_hit


# The supervisor must reap pid 1 itself: otherwise a dead init is reparented to the host's
# pid 1 (or the nearest subreaper) and lingers as a zombie, holding the pid namespace and a
# dying cgroup, until that process reaps it (never, under a pid 1 that does not reap). The
# test makes itself the subreaper, so that a zombie stays visible whatever the machine's pid 1
# does; the race was lost in most runs, so a few runs show it for sure.
async def test_pid_1_is_reaped_before_the_outcome_is_reported(envelope: TracedExecutor) -> None:
    """When the outcome arrives not even a dead, unreaped pid 1 of the envelope is left."""
    zombies: list[int] = []
    sc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        for _ in range(8):
            await run(envelope, probe_plan("process.exit(0);\n"))
            zombies += envelope.traces[-1].zombies
    finally:
        sc.prctl(PR_SET_CHILD_SUBREAPER, 0)
        for pid in zombies:
            with contextlib.suppress(ChildProcessError):
                await anyio.to_thread.run_sync(os.waitpid, pid, 0)
    assert zombies == []


async def test_a_flood_keeps_the_first_64_kib_and_never_blocks_the_child(
    envelope: TracedExecutor,
) -> None:
    """16 MiB of synchronous writes complete; exactly the first 65,536 bytes are kept."""
    source = (
        'import { writeSync } from "node:fs";\n'
        'const chunk = Buffer.from("0123456789abcdef".repeat(4096));\n'
        "for (let i = 0; i < 256; i++) writeSync(1, chunk);\n"
        'writeSync(2, "flood done\\n");\n'
    )
    outcome = await run(envelope, probe_plan(source))
    assert outcome.exit_code == 0
    assert outcome.stdout.data == b"0123456789abcdef" * (OUTPUT_CAP_BYTES // 16)
    assert outcome.stdout.truncated
    assert outcome.stderr.data == b"flood done\n"
    assert not outcome.stderr.truncated


async def test_a_multibyte_character_cut_at_the_cap_decodes_to_a_replacement(
    envelope: TracedExecutor,
) -> None:
    """A three-byte character straddling the cap leaves one byte, which decodes to U+FFFD."""
    source = 'process.stdout.write("a".repeat(65535) + "\\u20ac tail");\n'
    outcome = await run(envelope, probe_plan(source))
    assert outcome.stdout.data == b"a" * 65535 + b"\xe2"
    text = decode_output(outcome.stdout.data, outcome.stdout.truncated)
    assert text.text == "a" * 65535 + "\ufffd"
    assert text.truncated


async def test_output_bytes_are_kept_raw_and_decoded_once_with_replacement(
    envelope: TracedExecutor,
) -> None:
    """A BOM is stripped, invalid UTF-8 becomes U+FFFD and NUL survives, on both streams."""
    raw = b"\xef\xbb\xbfA\x00B\xffC\xc3(D"
    source = (
        'import { writeSync } from "node:fs";\n'
        f"const raw = new Uint8Array({list(raw)});\n"
        "writeSync(1, raw);\nwriteSync(2, raw);\n"
    )
    outcome = await run(envelope, probe_plan(source))
    for stream in (outcome.stdout, outcome.stderr):
        assert stream.data == raw
        decoded = decode_output(stream.data, stream.truncated)
        assert decoded.text == "A\x00B\ufffdC\ufffd(D"
        assert not decoded.truncated


async def test_stdin_is_delivered_exactly(envelope: TracedExecutor) -> None:
    """The candidate reads exactly the plan's stdin bytes, then end of file."""
    stdin = ("h\u00e9llo\r\nw\u00f6rld\t\x00\n" * 1024)[:16_000]
    source = "process.stdout.write(new Uint8Array(await Bun.stdin.arrayBuffer()));\n"
    outcome = await run(envelope, probe_plan(source, stdin=stdin))
    assert outcome.exit_code == 0
    assert outcome.stdout.data == stdin.encode()


async def test_empty_stdin_is_end_of_file(envelope: TracedExecutor) -> None:
    """With no stdin, a read returns end of file at once (the run exits, no deadline)."""
    source = (
        'import { readSync } from "node:fs";\n'
        "const buf = Buffer.alloc(16);\n"
        "const text = await Bun.stdin.text();\n"
        "console.log(JSON.stringify([text, readSync(0, buf), readSync(0, buf)]));\n"
    )
    outcome = await run(envelope, probe_plan(source))
    assert (outcome.exit_code, outcome.stop_reason) == (0, "exited")
    assert json.loads(outcome.stdout.data) == ["", 0, 0]


async def test_arguments_reach_the_script_verbatim(envelope: TracedExecutor) -> None:
    """Arguments that look like Bun's own flags reach the script untouched, in order."""
    args = ["--smol", "-e", "process.exit(9)", "--", "--config=/etc/x", "a b", "\u00fcn\u00ef", ""]
    source = "console.log(JSON.stringify(process.argv.slice(2)));\n"
    outcome = await run(envelope, probe_plan(source, args=args))
    assert outcome.exit_code == 0
    assert json.loads(outcome.stdout.data) == args


async def test_the_environment_is_exactly_the_plans(envelope: TracedExecutor) -> None:
    """The candidate sees the plan's environment and nothing else (no PATH, no HOME)."""
    plan = probe_plan("console.log(JSON.stringify(process.env));\n")
    outcome = await run(envelope, plan)
    assert json.loads(outcome.stdout.data) == dict(plan.env)


async def test_the_working_directory_is_the_candidate_root(envelope: TracedExecutor) -> None:
    """The candidate starts in /work, which holds exactly its files."""
    source = (
        'import { readdirSync } from "node:fs";\n'
        "console.log(JSON.stringify([process.cwd(), readdirSync('.').sort(), "
        "readdirSync('sub')]));\n"
    )
    outcome = await run(envelope, probe_plan(source, files=[("sub/data.txt", "x")]))
    assert json.loads(outcome.stdout.data) == [
        "/work",
        ["main.ts", "probe.ts", "sub"],
        ["data.txt"],
    ]


async def test_the_candidate_tree_is_read_only_and_unchanged(envelope: TracedExecutor) -> None:
    """Every way of changing, adding or removing a candidate file fails; the file is intact."""
    source = (
        'import { attempt } from "./probe.ts";\n'
        'import * as fs from "node:fs";\n'
        'attempt("overwrite", () => fs.writeFileSync("main.ts", "pwned"));\n'
        'attempt("append", () => fs.appendFileSync("sub/data.txt", "more"));\n'
        'attempt("create", () => fs.writeFileSync("new.ts", "x"));\n'
        'attempt("unlink", () => fs.unlinkSync("sub/data.txt"));\n'
        'attempt("rename", () => fs.renameSync("main.ts", "moved.ts"));\n'
        'attempt("mkdir", () => fs.mkdirSync("dir"));\n'
        'attempt("rmdir", () => fs.rmSync("sub", { recursive: true }));\n'
        'attempt("chmod", () => fs.chmodSync("main.ts", 0o777));\n'
        'attempt("symlink", () => fs.symlinkSync("/tmp", "link"));\n'
        'attempt("utimes", () => fs.utimesSync("main.ts", 0, 0));\n'
        'attempt("sha256", () => new Bun.CryptoHasher("sha256")'
        '.update(fs.readFileSync("main.ts")).digest("hex"));\n'
    )
    outcome = await run(envelope, probe_plan(source, files=[("sub/data.txt", "x")]))
    found = attempts(outcome.stdout.data.decode())
    sha = found.pop("sha256")
    assert sha.detail == hashlib.sha256(source.encode()).hexdigest()
    assert len(found) == 10
    assert {name: (a.ok, a.detail) for name, a in found.items()} == {
        name: (False, "EROFS") for name in found
    }


async def test_scratch_is_writable_and_bounded(envelope: TracedExecutor) -> None:
    """/tmp takes writes until it is full (ENOSPC at 64 MiB), and the run still completes."""
    source = (
        'import { writeFileSync, readFileSync, appendFileSync } from "node:fs";\n'
        'writeFileSync("/tmp/note", "kept");\n'
        "const chunk = Buffer.alloc(1 << 20, 120);\n"
        'let total = 0, code = "none";\n'
        "try {\n"
        "  for (let i = 0; i < 256; i++) {\n"
        "    for (let j = 0; j < 8; j++) {\n"
        "      appendFileSync(`/tmp/fill-${i}`, chunk);\n"
        "      total += chunk.length;\n"
        "    }\n"
        "  }\n"
        "} catch (error) { code = (error as { code: string }).code; }\n"
        'console.log(JSON.stringify([readFileSync("/tmp/note", "utf8"), code, total]));\n'
    )
    outcome = await run(envelope, probe_plan(source))
    assert (outcome.exit_code, outcome.stop_reason) == (0, "exited")
    note, code, total = json.loads(outcome.stdout.data)
    assert (note, code) == ("kept", "ENOSPC")
    assert 48 * 2**20 <= total <= 64 * 2**20


async def test_a_memory_hog_is_oom_killed_and_reported(envelope: TracedExecutor) -> None:
    """Allocating past 256 MiB gets the candidate SIGKILLed, and the report says OOM."""
    source = (
        "const keep: Buffer[] = [];\n"
        "for (let i = 0; i < 64; i++) keep.push(Buffer.alloc(16 << 20, 1));\n"
        'console.log("survived");\n'
    )
    outcome = await run(envelope, probe_plan(source))
    assert (outcome.signal, outcome.stop_reason) == ("SIGKILL", "exited")
    assert outcome.report.oom_killed
    assert b"survived" not in outcome.stdout.data


async def test_hitting_the_pids_limit_is_reported(envelope: TracedExecutor) -> None:
    """Starting workers until the kernel refuses ends the run with `pids_limit_hit`."""
    source = (
        "const workers: Worker[] = [];\n"
        "try {\n"
        "  for (let i = 0; i < 200; i++) "
        'workers.push(new Worker("data:text/javascript,setInterval(() => {}, 1000)"));\n'
        '} catch (error) { console.log("refused after", workers.length); }\n'
        "process.exit(0);\n"
    )
    outcome = await run(envelope, probe_plan(source))
    assert outcome.stop_reason == "exited"
    assert outcome.report.pids_limit_hit


async def test_bun_sees_its_memory_limit(envelope: TracedExecutor) -> None:
    """Where Bun looks for its cgroup memory limit it finds the real 256 MiB, read-only."""
    source = (
        'import { attempt } from "./probe.ts";\n'
        'import { readFileSync, writeFileSync } from "node:fs";\n'
        'for (const path of ["/sys/fs/cgroup/memory.max", '
        '"/sys/fs/cgroup/memory/memory.limit_in_bytes"]) {\n'
        '  attempt("read " + path, () => readFileSync(path, "utf8").trim());\n'
        '  attempt("write " + path, () => writeFileSync(path, "max"));\n'
        "}\n"
    )
    outcome = await run(envelope, probe_plan(source))
    found = attempts(outcome.stdout.data.decode())
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        assert found["read " + path] == Attempt("read " + path, ok=True, detail="268435456")
        assert not found["write " + path].ok


async def test_the_candidate_holds_no_descriptor_of_ours_beyond_stdio(
    envelope: TracedExecutor,
) -> None:
    """fds 0-2 are the run's pipes; any other fd is one Bun opened itself (no socket, no pipe)."""
    source = (
        'import { readdirSync, readlinkSync } from "node:fs";\n'
        "const fds: Record<string, string> = {};\n"
        'for (const fd of readdirSync("/proc/self/fd")) {\n'
        '  try { fds[fd] = readlinkSync("/proc/self/fd/" + fd); } catch { /* the dir fd */ }\n'
        "}\n"
        "console.log(JSON.stringify(fds));\n"
    )
    outcome = await run(envelope, probe_plan(source))
    fds: dict[str, str] = json.loads(outcome.stdout.data)
    assert all(fds[str(fd)].startswith("pipe:[") for fd in (0, 1, 2))
    own = {fd: target for fd, target in fds.items() if int(fd) > 2}
    # Bun's event loop (epoll, eventfd), its entropy source and its own /proc files.
    assert all(
        target.startswith(("anon_inode:", "/dev/urandom", "/proc/")) for target in own.values()
    ), own


async def test_a_prepared_envelope_serves_one_run_and_is_never_reused(
    envelope: TracedExecutor,
) -> None:
    """With envelopes prepared ahead, each run still gets a fresh cgroup, namespaces and /tmp."""
    before = set(envelope.backend.list_jobs())
    await envelope.inner.prepare(probe_plan(""), pool=1)
    leave = (
        'import { existsSync, writeFileSync } from "node:fs";\n'
        'console.log(existsSync("/tmp/left-behind"));\n'
        'writeFileSync("/tmp/left-behind", "x");\n'
    )
    first = await run(envelope, probe_plan(leave))
    second = await run(envelope, probe_plan(leave))
    await envelope.inner.prepare(probe_plan(""), pool=0)
    # Whatever was prepared here is ours: the module's teardown waits for it to be gone.
    envelope.jobs |= set(envelope.backend.list_jobs()) - before
    assert (first.stdout.data, second.stdout.data) == (b"false\n", b"false\n")
    one, two = envelope.traces[-2].started, envelope.traces[-1].started
    assert one is not None and two is not None
    assert one.cgroup_paths != two.cgroup_paths
    assert one.init_pid != two.init_pid


async def test_a_launch_to_a_prepared_envelope_names_it_before_admission(
    envelope: TracedExecutor,
) -> None:
    """`admit` is told which prepared envelope took the launch; that is the one that runs it."""
    before = set(envelope.backend.list_jobs())
    native = envelope.inner
    assert isinstance(native, NativeExecutor)
    await native.prepare(probe_plan(""), pool=1)
    # The zygote hands the prepared supervisor over at once; wait until the server has it.
    with anyio.fail_after(10):
        while not native._ready:
            assert native._control is not None
            native._collect_ready(native._control)
            await anyio.sleep(0.01)
    told: list[Assigned | None] = []

    async def admit(assigned: Assigned | None) -> bool:
        told.append(assigned)
        return True

    outcome = await envelope.run(probe_plan('console.log("ran");\n'), admit=admit)
    await native.prepare(probe_plan(""), pool=0)
    envelope.jobs |= set(envelope.backend.list_jobs()) - before
    assert outcome.stdout.data == b"ran\n"
    started = envelope.traces[-1].started
    assert started is not None
    [assigned] = told
    assert assigned is not None
    assert assigned.serves(started)
    assert assigned.supervisor.pid == started.supervisor_pid
    assert {os.path.basename(path) for path in started.cgroup_paths} == {
        f"jigcmd-{assigned.run_id}"
    }


async def test_while_the_candidate_runs_pid_1_holds_no_privilege_and_catches_no_signal(
    envelope: TracedExecutor,
) -> None:
    """Pid 1 dropped as far as the candidate before spawning it, and stays without handlers."""
    seen: dict[str, str] = {}

    def look(started: EnvelopeIdentity) -> None:
        with open(f"/proc/{started.init_pid}/status", encoding="ascii") as handle:
            fields = dict(line.split(":\t", 1) for line in handle.read().splitlines())
        seen.update({key: fields[key].strip() for key in _PID_1_FIELDS})
        with open(f"/proc/{started.init_pid}/task/{started.init_pid}/children") as handle:
            children = handle.read().split()
        seen["children"] = str(len(children))
        # The candidate tree's writable copy (candidatetree.open_candidate_tree) goes at the go.
        seen["directories held"] = str(_directories_held(started.init_pid))
        # The candidate inherited 1000 at its spawn; pid 1 is back at its own score.
        with open(f"/proc/{started.init_pid}/oom_score_adj", encoding="ascii") as handle:
            seen["init oom"] = handle.read().strip()
        with open(f"/proc/{children[0]}/oom_score_adj", encoding="ascii") as handle:
            seen["candidate oom"] = handle.read().strip()

    outcome = await envelope.run(probe_plan("await Bun.sleep(300);\n"), on_started=look)
    assert outcome.exit_code == 0
    assert seen == {
        "SigCgt": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapPrm": "0000000000000000",
        "CapBnd": "0000000000000000",
        "NoNewPrivs": "1",
        "Seccomp": "2",
        "children": "1",
        "directories held": "0",
        # What the zygote inherited from this process, and pid 1 from the zygote.
        "init oom": _own_oom_score(),
        "candidate oom": "1000",
    }


def _directories_held(pid: int) -> int:
    """How many of `pid`'s descriptors are directories (the tree's copy would be one)."""
    held = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed meanwhile
            held += stat.S_ISDIR(os.stat(f"/proc/{pid}/fd/{name}").st_mode)
    return held


def _own_oom_score() -> str:
    with open("/proc/self/oom_score_adj", encoding="ascii") as handle:
        return handle.read().strip()


_PID_1_FIELDS = ("SigCgt", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")
