"""A project laid out as the reference lays it out, locked, served and run as it is written."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.frontends.servechild import ServeChild
from tests.envelope.test_script_binding import (
    COMMANDS_TOML,
    JIG_TS,
    binding_ts,
    reference_project,
)
from tests.lifetime.watch import wait_for

pytestmark = pytest.mark.envelope

CLI = 'console.log("ran " + process.argv.slice(2).join(" "))\n'


def jigcmd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def call(server: ServeChild, request_id: str) -> dict[str, object]:
    server.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "capability/call",
            "params": {
                "operationId": request_id,
                "slot": "command",
                "method": "run",
                "input": {"command": "cli", "files": {"src/cli.ts": CLI}, "args": ["a", "b"]},
            },
        }
    )
    answer: dict[str, object] = json.loads(server.response(request_id))
    return answer


def test_a_reference_project_locks_serves_and_runs_with_no_file_rewritten(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """jig.ts, bindings/command.ts, flows/command/FLOW.md: lock, serve, run; nothing edited."""
    project = tmp_path / "project"
    path = reference_project(project, binding_ts())
    written = tree(project)
    locked = jigcmd("lock", "--binding", str(path))
    assert locked.returncode == 0, locked.stderr
    assert "Binding:   command.ts sha256:" in locked.stdout
    lock = project / "bindings" / "command.jigcmd.lock"
    assert tree(project) == {**written, "bindings/command.jigcmd.lock": lock.read_bytes()}
    recorded = json.loads(lock.read_bytes())
    assert recorded["bindingFile"]["path"] == "command.ts"
    state = ["--state-dir", str(tmp_path / "state")]
    with ServeChild(path, [*state, "--protocol", "flow", "--run-id", "run-ts"]) as server:
        answer = call(server, "call-1")
        assert server.close_input() == 0
    value = answer["result"]["value"]  # type: ignore[index]
    assert value["stdout"]["text"] == "ran a b\n" and value["exitCode"] == 0
    files = tmp_path / "candidate" / "src"
    files.mkdir(parents=True)
    (files / "cli.ts").write_text(CLI)
    ran = jigcmd("run", "--binding", str(path), *state, "cli", "--files", str(files.parent))
    assert ran.returncode == 0, ran.stderr
    assert "ran" in ran.stdout
    assert tree(project) == {**written, "bindings/command.jigcmd.lock": lock.read_bytes()}
    # The TOML form of the same policy is the same admission digest.
    toml = project / "binding.toml"
    toml.write_text('package = "flows/command"\n' + COMMANDS_TOML)
    assert jigcmd("lock", "--binding", str(toml)).returncode == 0
    toml_lock = json.loads((project / "jigcmd.lock").read_bytes())
    assert toml_lock["bindingDigest"] == recorded["bindingDigest"]
    assert toml_lock["policy"] == recorded["policy"]


def test_a_ts_binding_named_from_inside_bindings_is_the_one_its_absolute_path_names(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """`--binding command.ts` from `bindings/`: its package is found from the project's root
    (jig.ts), it is admitted and run as by its absolute path, and jig.ts's list still rules."""
    project = tmp_path / "project"
    path = reference_project(project, binding_ts())
    here = path.parent
    locked = jigcmd("lock", "--binding", "command.ts", cwd=here)
    assert locked.returncode == 0, locked.stderr
    assert jigcmd("lock", "--check", "--binding", str(path)).returncode == 0
    files = tmp_path / "candidate" / "src"
    files.mkdir(parents=True)
    (files / "cli.ts").write_text(CLI)
    state = ["--state-dir", str(tmp_path / "state")]
    ran = jigcmd(
        "run", "--binding", "./command.ts", *state, "cli", "--files", str(files.parent), cwd=here
    )
    assert ran.returncode == 0, ran.stderr
    (project / "jig.ts").write_text(JIG_TS.replace("'./bindings'", "'./elsewhere'"))
    refused = jigcmd("lock", "--binding", "command.ts", cwd=here)
    assert refused.returncode == 2
    assert "it is not one of the project's Bindings" in refused.stderr


def test_editing_the_ts_binding_is_drift_even_when_its_policy_is_unchanged(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """The lock pins the .ts file's bytes: a comment added is drift; serve refuses commands."""
    path = reference_project(tmp_path, binding_ts())
    assert jigcmd("lock", "--binding", str(path)).returncode == 0
    assert jigcmd("lock", "--check", "--binding", str(path)).returncode == 0
    path.write_text("// reviewed again?\n" + path.read_text())
    check = jigcmd("lock", "--check", "--binding", str(path))
    assert check.returncode == 1
    assert "command.ts changed since admission" in check.stdout
    state = ["--state-dir", str(tmp_path / "state")]
    with ServeChild(path, [*state, "--protocol", "flow", "--run-id", "run-drift"]) as server:
        answer = call(server, "call-1")
        assert server.close_input() == 0
    error = answer["error"]
    assert error["data"] == {"code": "UNAVAILABLE"}  # type: ignore[index]
    assert "command.ts changed since admission" in error["message"]  # type: ignore[index]


def test_a_hostile_ts_binding_stops_serve_at_start_naming_the_file(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """A Binding that throws: lock and serve refuse it (exit 2) with the file and line."""
    path = reference_project(tmp_path, binding_ts(before="\nthrow new Error('no')"))
    locked = jigcmd("lock", "--binding", str(path))
    assert locked.returncode == 2
    assert f"{path}: evaluating it threw Error at {path}:3:" in locked.stderr
    assert not (tmp_path / "bindings" / "command.jigcmd.lock").exists()
    served = subprocess.run(
        [
            sys.executable,
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(path),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert served.returncode == 2
    assert f"evaluating it threw Error at {path}:3:" in served.stderr


def test_doctor_checks_a_ts_binding_and_says_whether_its_lock_admits_it(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """doctor --binding evaluates the .ts in an envelope and reports its admission."""
    path = reference_project(tmp_path, binding_ts())
    state = ["--state-dir", str(tmp_path / "state")]
    before = jigcmd("doctor", "--json", *state, "--binding", str(path))
    (binding,) = [c for c in json.loads(before.stdout) if c["check"] == "binding"]
    assert binding["status"] == "warn" and "no lock at" in binding["detail"]
    assert "TypeScript, evaluated in an envelope" in binding["detail"]
    assert jigcmd("lock", "--binding", str(path)).returncode == 0
    after = jigcmd("doctor", "--json", *state, "--binding", str(path))
    (binding,) = [c for c in json.loads(after.stdout) if c["check"] == "binding"]
    assert binding["status"] == "ok" and "admitted by" in binding["detail"]
    path.write_text(binding_ts(before="process.exit(0)"))
    broken = jigcmd("doctor", "--json", *state, "--binding", str(path))
    (binding,) = [c for c in json.loads(broken.stdout) if c["check"] == "binding"]
    assert binding["status"] == "FAIL" and "before its default export was read" in binding["detail"]
    assert broken.returncode == 1


def test_init_format_ts_writes_a_binding_that_locks_to_the_toml_forms_digest_and_runs(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """init --format ts, lock, run: the same policy digest as init's TOML for the same project."""
    projects = {}
    for form in ("toml", "ts"):
        root = tmp_path / form
        (root / "test").mkdir(parents=True)
        (root / "src").mkdir()
        (root / "src" / "add.ts").write_text("export const add = (a: number, b: number) => a + b\n")
        (root / "test" / "add.test.ts").write_text(
            'import { test, expect } from "bun:test"\nimport { add } from "../src/add.ts"\n'
            'test("add", () => expect(add(2, 2)).toBe(4))\n'
        )
        (root / "package.json").write_text('{"name": "my-app", "module": "src/add.ts"}')
        assert jigcmd("init", "--format", form, str(root)).returncode == 0
        projects[form] = root
    ts = projects["ts"] / ".jig" / "bindings" / "command.ts"
    toml = projects["toml"] / ".jig" / "binding.toml"
    assert jigcmd("lock", "--binding", str(ts)).returncode == 0
    assert jigcmd("lock", "--binding", str(toml)).returncode == 0
    digest_ts = json.loads((ts.parent / "command.jigcmd.lock").read_bytes())["bindingDigest"]
    digest_toml = json.loads((toml.parent / "jigcmd.lock").read_bytes())["bindingDigest"]
    assert digest_ts == digest_toml
    state = ["--state-dir", str(tmp_path / "state")]
    ran = jigcmd("run", "--binding", str(ts), *state, "tests", "--files", str(projects["ts"]))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "exit code 0" in ran.stdout


def _until(server: ServeChild, prefix: str, admitted: bool) -> dict[str, object]:
    """The first answer once the serving front's admission is `admitted` (60 s failsafe)."""
    answers: list[dict[str, object]] = []
    attempts = itertools.count()

    def settled() -> bool:
        answers.append(call(server, f"{prefix}-{next(attempts)}"))
        return ("result" in answers[-1]) == admitted

    wait_for(settled, 60, "the serving front to re-admit the Binding")
    return answers[-1]


def test_a_served_ts_binding_edited_then_locked_again_is_re_evaluated_and_re_admitted(
    real_cgroups: CgroupBackend, tmp_path: Path
) -> None:
    """While serving: an edit to the .ts drifts its commands; `jigcmd lock` admits them again."""
    path = reference_project(tmp_path, binding_ts())
    assert jigcmd("lock", "--binding", str(path)).returncode == 0
    state = ["--state-dir", str(tmp_path / "state")]
    with ServeChild(path, [*state, "--protocol", "flow", "--run-id", "run-watch"]) as server:
        assert "result" in call(server, "before")
        path.write_text("// edited\n" + path.read_text())
        drifted = _until(server, "drift", admitted=False)
        assert "command.ts changed since admission" in drifted["error"]["message"]  # type: ignore[index]
        assert jigcmd("lock", "--binding", str(path)).returncode == 0
        again = _until(server, "again", admitted=True)
        assert again["result"]["value"]["exitCode"] == 0  # type: ignore[index]
        assert server.close_input() == 0


@pytest.mark.parametrize(
    ("binding", "jig", "said"),
    [
        (
            "export default { package: 'flows/command' }\n",
            JIG_TS,
            "<binding dir>/command.ts: its default export is object, not a defineBinding(...) "
            "result; nothing was admitted",
        ),
        (
            binding_ts(),
            "export default 5\n",
            "<binding dir>/command.ts: <project>/jig.ts: its default export is number, not a "
            "defineJig(...) result; nothing was admitted",
        ),
        (
            binding_ts(),
            JIG_TS.replace("discover('./bindings')", "[]"),
            "<binding dir>/command.ts: it is not one of the project's Bindings: <project>/jig.ts "
            "lists its bindings as [], which does not include 'bindings/command.ts'; nothing "
            "was admitted",
        ),
    ],
)
def test_a_refused_ts_binding_is_named_once_and_no_host_path_reaches_the_wire(
    real_cgroups: CgroupBackend, tmp_path: Path, binding: str, jig: str, said: str
) -> None:
    """The Binding's path once, then why; `jig.ts` above `bindings/` is `<project>/jig.ts`."""
    project = tmp_path / "project"
    path = reference_project(project, binding)
    (project / "jig.ts").write_text(jig)
    request = {"jsonrpc": "2.0", "id": "c1", "method": "capability/call", "params": {}}
    served = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve", "--binding", str(path),
         "--state-dir", str(tmp_path / "state")],
        input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=120,
        check=False, cwd="/",
    )  # fmt: skip
    assert served.returncode == 2
    (answer,) = [json.loads(line) for line in served.stdout.splitlines()]
    assert answer["error"]["message"] == f"jigcmd cannot serve: {said}"
    host = said.replace("<binding dir>", str(path.parent)).replace("<project>", str(project))
    assert f"jigcmd serve: {host}\n" in served.stderr
