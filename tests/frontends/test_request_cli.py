"""`jigcmd request`: the request lines `serve` takes for a directory, read as `run --files`
reads it; piped into a real `jigcmd serve`, the same candidate as `run` gets."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jigcmd
from tests.gitrepo import git
from tests.required import require_root

EXAMPLE = Path(jigcmd.__file__).parent / "example"
BINDING = EXAMPLE / "binding.toml"


def jigcmd_cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True, text=True, timeout=120, check=False, input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The passing example with what `--files` leaves out: an ignored log, an excluded file."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLE / "candidates" / "passing", root)
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("x\n")
    (root / "notes.md").write_text("# notes\n")
    (root / "stdin.txt").write_text("a\nb\n")
    return root


def request(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = ("cli", "--files", str(project), "--exclude", "/notes.md", "--exclude", "/stdin.txt")
    stdin = ("--stdin-file", str(project / "stdin.txt"))
    return jigcmd_cli("request", *argv, *stdin, *extra, "--", "--greeting", "hi")


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_flow_is_one_capability_call_of_the_directory_read_as_run_reads_it(
    project: Path,
) -> None:
    """Left out as `run` leaves out (and said on stderr), stdin and arguments in the input."""
    done = request(project)
    assert done.returncode == 0, done.stderr
    (call,) = lines(done.stdout)
    assert call["method"] == "capability/call"
    params = call["params"]
    assert call["id"] == params["operationId"] and params["operationId"].startswith("request-")
    assert (params["slot"], params["method"]) == ("command", "run")
    assert params["input"]["command"] == "cli"
    assert params["input"]["args"] == ["--greeting", "hi"]
    assert params["input"]["stdin"] == "a\nb\n"
    assert sorted(params["input"]["files"]) == sorted(
        p.relative_to(EXAMPLE / "candidates" / "passing").as_posix()
        for p in (EXAMPLE / "candidates" / "passing").rglob("*")
        if p.is_file()
    )
    assert "jigcmd request: --files" in done.stderr and "debug.log (.gitignore;" in done.stderr
    # The same request is the same operation; a changed one is another.
    assert lines(request(project).stdout) == [call]
    (project / "src" / "value.ts").write_text("export const value = 3\n")
    assert lines(request(project).stdout)[0]["params"]["operationId"] != params["operationId"]


def test_mcp_is_the_handshake_then_one_tools_call(project: Path) -> None:
    done = request(project, "--protocol", "mcp")
    assert done.returncode == 0, done.stderr
    initialize, initialized, call = lines(done.stdout)
    assert initialize["method"] == "initialize" and "protocolVersion" in initialize["params"]
    assert initialized == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert call["method"] == "tools/call" and call["params"]["name"] == "cli"
    assert set(call["params"]["arguments"]) == {"files", "args", "stdin"}


def test_a_directory_that_cannot_be_a_candidate_prints_nothing_and_exits_2(
    tmp_path: Path,
) -> None:
    """Every problem on stderr, as `run` says it; nothing on stdout to pipe anywhere."""
    missing = jigcmd_cli("request", "tests", "--files", str(tmp_path / "none"))
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "jigcmd request: INVALID_INPUT: --files" in missing.stderr
    (tmp_path / "bad name.ts").write_text("1\n")
    refused = jigcmd_cli("request", "tests", "--files", str(tmp_path))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "1 problem, nothing ran" in refused.stderr and "bad name.ts" in refused.stderr


@pytest.mark.envelope
@pytest.mark.parametrize("protocol", ["flow", "mcp"])
def test_piped_into_serve_it_is_the_candidate_run_sends(
    project: Path, tmp_path: Path, protocol: str
) -> None:
    """The candidate and stdin digests and the invocation `serve` answers are `run`'s."""
    require_root()
    lock = tmp_path / "jigcmd.lock"
    locked = jigcmd_cli("lock", "--binding", str(BINDING), "--lock", str(lock))
    assert locked.returncode == 0, locked.stderr
    state = ("--state-dir", str(tmp_path / "state"))
    admitted = ("--binding", str(BINDING), "--lock", str(lock), *state)
    ran = jigcmd_cli(
        "run", *admitted, "cli", "--files", str(project), "--exclude", "/notes.md",
        "--exclude", "/stdin.txt", "--stdin-file", str(project / "stdin.txt"), "--json",
        "--", "--greeting", "hi",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    evidence = json.loads(ran.stdout)["evidence"]
    lines_in = request(project, "--protocol", protocol)
    assert lines_in.returncode == 0, lines_in.stderr
    served = jigcmd_cli("serve", *admitted, stdin=lines_in.stdout)
    assert served.returncode == 0, served.stderr
    answer = lines(served.stdout)[-1]["result"]
    got = answer["value"] if protocol == "flow" else answer["structuredContent"]
    for key in ("candidateDigest", "stdinDigest", "invocation", "exitCode"):
        assert got[key] == evidence[key], key


@pytest.mark.parametrize("bad", ["bad id", "x" * 200, "", "_under", "ümlaut"])
def test_an_operation_id_serve_would_refuse_is_status_2_with_nothing_written(
    project: Path, bad: str
) -> None:
    """The Run/1 id grammar, as `serve` words it; nothing on stdout to pipe anywhere."""
    for protocol in ("flow", "mcp"):
        done = request(project, "--protocol", protocol, "--operation-id", bad)
        assert (done.returncode, done.stdout) == (2, ""), protocol
        assert done.stderr == (
            f"jigcmd request: --operation-id {bad!r} must match [A-Za-z0-9][A-Za-z0-9._:/-]* "
            "(1-128 bytes), as serve requires of an operation id; nothing written\n"
        )


def test_mcp_carries_the_operation_id_as_the_calls_key(project: Path) -> None:
    """`_meta["dev.jigcmd/operationId"]`, the key serve replays a retry under; none without."""
    keyed = request(project, "--protocol", "mcp", "--operation-id", "op-9")
    assert keyed.returncode == 0, keyed.stderr
    call = lines(keyed.stdout)[-1]["params"]
    assert call["_meta"] == {"dev.jigcmd/operationId": "op-9"}
    assert "_meta" not in lines(request(project, "--protocol", "mcp").stdout)[-1]["params"]


@pytest.mark.envelope
def test_serve_journals_the_mcp_call_under_the_operation_id_given(
    project: Path, tmp_path: Path
) -> None:
    """Piped into a real `serve`: `jigcmd runs` lists the call under op-9 in the run given."""
    require_root()
    lock = tmp_path / "jigcmd.lock"
    locked = jigcmd_cli("lock", "--binding", str(BINDING), "--lock", str(lock))
    assert locked.returncode == 0, locked.stderr
    state = ("--state-dir", str(tmp_path / "state"))
    sent = request(project, "--protocol", "mcp", "--operation-id", "op-9")
    served = jigcmd_cli(
        "serve", "--binding", str(BINDING), "--lock", str(lock), *state, "--run-id", "run-9",
        stdin=sent.stdout,
    )  # fmt: skip
    assert served.returncode == 0, served.stderr
    assert lines(served.stdout)[-1]["result"]["isError"] is False
    listed = jigcmd_cli("runs", *state, "--run-id", "run-9", "--json")
    (run,) = lines(listed.stdout)
    assert [operation["operationId"] for operation in run["operations"]] == ["op-9"]


def test_what_git_info_exclude_leaves_out_is_named_by_that_file(project: Path) -> None:
    """`.git/info/exclude` is named as the reason, not `.gitignore`; each comes back the
    same way, with a negated --exclude."""
    git(project, "init", "-q")
    (project / ".git" / "info" / "exclude").write_text("secret.txt\n")
    (project / "secret.txt").write_text("s\n")
    done = jigcmd_cli("request", "cli", "--files", str(project))
    assert done.returncode == 0, done.stderr
    assert "debug.log (.gitignore; bring one back with --exclude '!/debug.log')" in done.stderr
    assert (
        "secret.txt (.git/info/exclude; bring one back with --exclude '!/secret.txt')"
    ) in done.stderr
    brought = jigcmd_cli("request", "cli", "--files", str(project), "--exclude", "!/secret.txt")
    assert "secret.txt" in lines(brought.stdout)[0]["params"]["input"]["files"]


def test_a_fix_never_leaves_out_what_the_directorys_tests_import(tmp_path: Path) -> None:
    """The tester's big6: with no Binding, the directory's tests (as `init` finds them) are
    what a fix keeps: the handler and the fixture the test imports are never `--exclude`d,
    and the size fix says no `--exclude` helps, as `init` says it."""
    root = tmp_path / "big6"
    files = {
        f"src/handlers/h{i}.ts": f"export const h{i} = (x: number) => x + {i};\n"
        for i in range(1, 71)
    }
    files["test/users.test.ts"] = (
        'import { test, expect } from "bun:test";\n'
        'import users from "../fixtures/users.json";\n'
        'import { h1 } from "../src/handlers/h1.ts";\n'
        'test("fixture loads", () => expect(users.length).toBe(1));\n'
        'test("h1", () => expect(h1(1)).toBe(2));\n'
    )
    files["fixtures/users.json"] = f'["{"u" * 300_000}"]'
    files["package.json"] = '{"name": "big-app", "type": "module"}'
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    done = jigcmd_cli("request", "tests", "--files", str(root))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "--exclude '/src/'" not in done.stderr
    assert "--exclude '/fixtures/users.json'" not in done.stderr
    (count,) = [line for line in done.stderr.splitlines() if "(rule files)" in line]
    assert "--exclude '/src/handlers/*' --exclude '!/src/handlers/h1.ts'" in count
    (size,) = [line for line in done.stderr.splitlines() if "(rule candidate-size)" in line]
    assert "fixtures/users.json (300,004 bytes) alone is more than that, and " in size
    assert "test/users.test.ts imports it" in size
