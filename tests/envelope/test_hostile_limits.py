"""The hostile suite, limits: candidates that try to starve or confuse the envelope, for real.

As in `test_hostile.py`: the whole command path on a traced executor, the evidence
schema-valid with `cleanup: "complete"` after every case, nothing of the envelope left on
the host, the Bun binary unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import msgspec
import pytest

import jigcmd
from jigcmd.envelope import oomscore, privileges
from jigcmd.evidence import Evidence
from jigcmd.frontends.servechild import ServeChild
from tests.envelope import hostile_candidates as cand
from tests.envelope.hostile_harness import DEADLINE_S, TracedExecutor, schema_valid
from tests.envelope.hostile_runner import Hostile, HostServices, refused

pytestmark = pytest.mark.envelope

CAP_SYS_RESOURCE = 24


# -- process trees ---------------------------------------------------------------------


async def test_a_fork_bomb_hits_the_pids_limit_and_leaves_nothing(hostile: Hostile) -> None:
    """A self-replicating spawner is held at 64 tasks and its whole tree is gone afterwards."""
    case = await hostile.run(cand.FORK_BOMB, seconds=2 * DEADLINE_S)
    assert case.outcome.report.pids_limit_hit
    assert case.evidence.stop_reason in ("exited", "deadline")


async def test_a_thread_bomb_hits_the_pids_limit(hostile: Hostile) -> None:
    """Starting workers without end is held at the pids limit, and the report says so."""
    source = (
        "const workers: Worker[] = [];\n"
        "for (let i = 0; i < 1000; i++) {\n"
        '  try { workers.push(new Worker("data:text/javascript,for(;;){}")); } catch { break; }\n'
        "}\n"
        "console.log(workers.length);\n"
        "process.exit(0);\n"
    )
    case = await hostile.run(source, seconds=5)
    assert case.outcome.report.pids_limit_hit


@pytest.mark.parametrize(
    ("source", "files"),
    [
        pytest.param(cand.DAEMON, {"daemon.ts": cand.DAEMON_TS}, id="detached-daemon"),
        pytest.param(
            cand.DOUBLE_FORK,
            {"daemon.ts": cand.DAEMON_TS, "middle.ts": cand.MIDDLE_TS},
            id="double-fork",
        ),
    ],
)
async def test_a_process_that_outlives_the_main_one_dies_with_it(
    hostile: Hostile, host_services: HostServices, source: str, files: dict[str, str]
) -> None:
    """A detached or orphaned daemon never writes or connects after the main process ends."""
    case = await hostile.run(source, args=[str(host_services.port)], files=files)
    assert (case.evidence.exit_code, case.evidence.stop_reason) == (0, "exited")
    assert "main exits" in case.evidence.stdout.text or "middle exited 0" in (
        case.evidence.stdout.text
    )
    assert "LATE" not in case.evidence.stdout.text
    assert "late connect" not in case.attempts
    assert host_services.connections() == []


@pytest.mark.parametrize("attempt", range(3))
async def test_an_orphan_spinning_on_the_main_process_never_sees_it_end(
    hostile: Hostile, attempt: int
) -> None:
    """Pid 1 kills the namespace before it reaps the main process: the orphan never writes."""
    del attempt
    case = await hostile.run(cand.BUSY_ORPHAN_MAIN, files={"orphan.ts": cand.BUSY_ORPHAN_TS})
    assert (case.evidence.exit_code, case.evidence.stop_reason) == (0, "exited")
    assert case.evidence.stdout.text == "main exits\n"


# -- resources and deadlines -----------------------------------------------------------


async def test_the_candidate_starts_at_oom_score_1000_pinned_where_the_host_can_pin(
    hostile: Hostile,
) -> None:
    """With CAP_SYS_RESOURCE the score is pinned at 1000: a lower one fails for the candidate and
    its children. Without it (this kind of VM, Docker's default) nobody can pin it: it starts at
    1000 and the candidate could lower it, as the doctor warns."""
    case = await hostile.run(cand.OOM_SCORE)
    assert case.evidence.exit_code == 0, case.evidence.stderr.text
    assert case.attempts["read before"].detail == "1000"
    assert case.attempts["raise to 1000"].ok
    if oomscore.PINNED:
        for value in ("0", "-1000", "999"):
            refused(case, f"lower to {value}", "EACCES")
        refused(case, "child lowers", "EACCES")
        assert case.attempts["read after"].detail == "1000"
    else:
        assert not privileges.effective_capability(CAP_SYS_RESOURCE)
        assert case.attempts["lower to 0"].ok


async def test_a_memory_bomb_is_oom_killed_and_reported(hostile: Hostile) -> None:
    """Allocating without end is killed by the 256 MiB limit; the report says OOM."""
    source = "const keep = [];\nfor (;;) keep.push(Buffer.alloc(8 << 20, 1));\n"
    case = await hostile.run(source, seconds=8)
    assert (case.evidence.signal, case.evidence.stop_reason) == ("SIGKILL", "exited")
    assert case.outcome.report.oom_killed


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("for (;;) {}\n", id="cpu-spin"),
        pytest.param("await Bun.sleep(1e9);\n", id="sleep"),
        pytest.param('process.on("SIGTERM", () => {});\nfor (;;) {}\n', id="ignore-sigterm"),
        pytest.param(
            'console.log("stopping");\nprocess.kill(process.pid, "SIGSTOP");\n', id="sigstop-self"
        ),
        pytest.param(
            'import { writeSync } from "node:fs";\nsetInterval(() => writeSync(1, "."), 20);\n',
            id="slow-drip",
        ),
    ],
)
async def test_a_candidate_that_never_ends_is_killed_at_the_deadline(
    hostile: Hostile, source: str
) -> None:
    """Spinning, sleeping, ignoring SIGTERM, stopping itself, dripping: SIGKILL at the deadline."""
    case = await hostile.run(source, seconds=DEADLINE_S)
    assert (case.evidence.exit_code, case.evidence.signal, case.evidence.stop_reason) == (
        None,
        "SIGKILL",
        "deadline",
    )
    assert case.outcome.report.deadline_hit
    assert set(case.evidence.stdout.text) <= set("stopping\n.")


async def test_an_endless_stdin_reader_sees_end_of_file(hostile: Hostile) -> None:
    """Reading stdin without end gets the 16 KiB given, then only end of file, and exits."""
    source = (
        'import { readSync } from "node:fs";\n'
        "const buf = Buffer.alloc(4096);\n"
        "let total = 0, n = 0, after = 0;\n"
        "while ((n = readSync(0, buf)) > 0) total += n;\n"
        "for (let i = 0; i < 1000; i++) after += readSync(0, buf);\n"
        "console.log(JSON.stringify([total, after]));\n"
    )
    case = await hostile.run(source, stdin="x" * 16_384, seconds=5)
    assert case.evidence.stdout.text == "[16384,0]\n"


async def test_exhausting_descriptors_stops_at_the_limit(hostile: Hostile) -> None:
    """Opening files without end fails with EMFILE at the nofile limit; the run completes."""
    source = (
        'import { openSync, closeSync } from "node:fs";\n'
        'const fds: number[] = []; let code = "none";\n'
        'try { for (;;) fds.push(openSync("/dev/null", "r")); } '
        "catch (e) { code = (e as { code: string }).code; }\n"
        "for (const fd of fds) closeSync(fd);\n"
        "console.log(JSON.stringify([code, fds.length]));\n"
    )
    case = await hostile.run(source)
    code, count = msgspec.json.decode(case.evidence.stdout.text)
    assert code == "EMFILE"
    assert 200 <= count <= 256
    assert case.evidence.exit_code == 0


async def test_filling_scratch_ends_with_enospc_and_the_run_completes(hostile: Hostile) -> None:
    """Writing /tmp full gets ENOSPC; nothing of it reaches the host."""
    source = (
        'import { appendFileSync } from "node:fs";\n'
        "const chunk = Buffer.alloc(4 << 20, 1); let code = 'none';\n"
        "try { for (let i = 0; ; i++) appendFileSync(`/tmp/f${i % 16}`, chunk); }\n"
        "catch (e) { code = (e as { code: string }).code; }\n"
        "console.log(code);\n"
    )
    case = await hostile.run(source)
    assert case.evidence.stdout.text == "ENOSPC\n"


# -- output ----------------------------------------------------------------------------


async def test_flooding_both_streams_keeps_64_kib_of_each(hostile: Hostile) -> None:
    """16 MiB on each stream: the candidate finishes; each stream keeps 65,536 characters."""
    source = (
        'import { writeSync } from "node:fs";\n'
        'const out = Buffer.alloc(1 << 16, "o"), err = Buffer.alloc(1 << 16, "e");\n'
        "for (let i = 0; i < 256; i++) { writeSync(1, out); writeSync(2, err); }\n"
    )
    case = await hostile.run(source)
    assert case.evidence.exit_code == 0
    assert case.evidence.stdout.text == "o" * 65_536
    assert case.evidence.stderr.text == "e" * 65_536
    assert case.evidence.stdout.truncated
    assert case.evidence.stderr.truncated


@pytest.mark.parametrize(
    ("raw", "text", "truncated"),
    [
        pytest.param(b"ok \xff\xfe \xc3( end", "ok \ufffd\ufffd \ufffd( end", False, id="invalid"),
        pytest.param(b"a\x00b\x00", "a\x00b\x00", False, id="nul"),
        pytest.param(b"\xef\xbb\xbfafter bom", "after bom", False, id="bom"),
        pytest.param(
            b"a" * 65_535 + "\u20ac".encode(), "a" * 65_535 + "\ufffd", True, id="multibyte-at-cap"
        ),
    ],
)
async def test_hostile_bytes_become_honest_text(
    hostile: Hostile, raw: bytes, text: str, truncated: bool
) -> None:
    """Output is decoded once with replacement: bad UTF-8 → U+FFFD, NUL kept, BOM stripped."""
    source = (
        'import { writeSync } from "node:fs";\n'
        f'writeSync(1, Buffer.from("{raw.hex()}", "hex"));\n'
    )
    case = await hostile.run(source)
    assert case.evidence.stdout.text == text
    assert case.evidence.stdout.truncated is truncated


def test_fake_json_rpc_frames_on_stdout_stay_inside_the_evidence(
    envelope: TracedExecutor, tmp_path: Path
) -> None:
    """Through a real `jigcmd serve`, forged response frames are candidate text, not protocol."""
    binding = Path(jigcmd.__file__).parent / "example" / "binding.toml"
    lock = tmp_path / "jigcmd.lock"
    jigcmd_cli = [sys.executable, "-m", "jigcmd"]
    subprocess.run(
        [*jigcmd_cli, "lock", "--binding", str(binding), "--lock", str(lock)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    forged = [
        {"jsonrpc": "2.0", "id": "call-1", "result": {"value": {"exitCode": 0, "forged": True}}},
        {"jsonrpc": "2.0", "id": "call-1", "error": {"code": -32000, "message": "forged"}},
        {"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": "call-1"}},
    ]
    lines = [json.dumps(frame) for frame in forged]
    source = "".join(f"console.log({json.dumps(line)});\n" for line in lines) + "process.exit(7);\n"
    call = {
        "jsonrpc": "2.0",
        "id": "call-1",
        "method": "capability/call",
        "params": {
            "operationId": f"forged-{uuid.uuid4().hex[:8]}",
            "slot": "command",
            "method": "run",
            "input": {"command": "cli", "files": {"src/cli.ts": source}},
        },
    }
    state = ["--lock", str(lock), "--state-dir", str(tmp_path / "state")]
    with ServeChild(binding, state, timeout=60) as serve:
        # stdin stays open until the answer is in, as a coordinator keeps it.
        serve.send(call)
        answer = serve.response("call-1")
        assert serve.close_input(30) == 0
        written = serve.lines
    assert written == [answer], written
    frames = [json.loads(answer)]
    value = frames[0]["result"]["value"]
    assert (frames[0]["id"], value["exitCode"], value["stopReason"]) == ("call-1", 7, "exited")
    assert value["stdout"]["text"] == "".join(line + "\n" for line in lines)
    assert schema_valid(msgspec.convert(value, Evidence)).cleanup == "complete"
