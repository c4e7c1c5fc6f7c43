"""`jigcmd verify` takes what a caller holds: the answers themselves, as they came.

A Run/1 answer line (a completed call's, and a deadline's carrying its evidence), the
`jigcmd run --json` answer (as the statement and as the evidence), a bundle piped from
`jigcmd attest` on stdin; and without `--evidence` it says what it did not check.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import jigcmd
from tests.lifetime.candidates import QUICK, SPIN, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

PASSING = Path(jigcmd.__file__).parent / "example" / "candidates" / "passing"


def _jigcmd(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        timeout=120,
        check=False,
        input=stdin,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _attest(rig: Rig, operation_id: str) -> bytes:
    fetched = subprocess.run(
        [sys.executable, "-m", "jigcmd", "attest", "--run-id", rig.run_id, operation_id,
         "--state-dir", str(rig.state_dir)],
        capture_output=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return fetched.stdout


def test_a_run1_answer_line_is_the_evidence_and_a_piped_bundle_verifies(
    rig: Rig, tmp_path: Path
) -> None:
    """The answer line saved as it came: `.result.value` checked; `attest | verify -` reads
    stdin; without --evidence every output check is a `skip` line, and exit stays 0."""
    server = rig.serve()
    server.send(flow_call("c1", "op-line", cli_input(QUICK, f"tok-{uuid.uuid4().hex}")))
    answer = server.answer("c1")
    assert server.close_input() == 0
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    bundle = _attest(rig, "op-line")
    state = ("--state-dir", str(rig.state_dir))
    checked = _jigcmd(
        "verify", "-", *state, "--evidence", str(tmp_path / "answer.json"), stdin=bundle
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert [line.split(":")[0] for line in checked.stdout.splitlines()[-5:]] == [
        "ok   candidate", "ok   stdout", "ok   stderr", "ok   ending", "verified",
    ]  # fmt: skip
    bare = _jigcmd("verify", "-", *state, stdin=bundle)
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert bare.stdout.splitlines()[-5:] == [
        "skip candidate: no --evidence",
        "skip stdout: no --evidence",
        "skip stderr: no --evidence",
        "skip ending: no --evidence",
        "verified",
    ]
    (tmp_path / "b.jsonl").write_bytes(bundle)
    both = _jigcmd("verify", "-", *state, "--evidence", "-", stdin=bundle)
    assert both.returncode == 2
    assert both.stderr == "jigcmd verify: only one of FILE and --evidence can be - (stdin)\n"


def test_a_deadline_answer_line_carries_its_evidence_at_details_command(
    rig: Rig, tmp_path: Path
) -> None:
    """DEADLINE_EXCEEDED: `.error.data.details.command` is the evidence its statement binds."""
    server = rig.serve()
    deadline = int(time.time() * 1000) + 3000
    server.send(flow_call("d1", "op-stop", cli_input(SPIN, "tok"), deadlineUnixMs=deadline))
    answer = server.answer("d1")
    assert server.close_input() == 0
    assert answer["error"]["data"]["code"] == "DEADLINE_EXCEEDED"
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    (tmp_path / "b.jsonl").write_bytes(_attest(rig, "op-stop"))
    checked = _jigcmd(
        "verify", str(tmp_path / "b.jsonl"), "--state-dir", str(rig.state_dir),
        "--evidence", str(tmp_path / "answer.json"),
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok   ending:" in checked.stdout
    assert "ok   error: DEADLINE_EXCEEDED, as the statement's stop reason says" in checked.stdout
    # Its code is signed (the stop reason), its words are not: each said, none passed over.
    data = answer["error"]["data"]
    forged = {
        **answer,
        "error": {
            **answer["error"],
            "message": "cancelled by the operator",
            "data": {**data, "code": "CANCELLED", "note": "approved"},
        },
    }
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    checked = _jigcmd(
        "verify", str(tmp_path / "b.jsonl"), "--state-dir", str(rig.state_dir),
        "--evidence", str(tmp_path / "forged.json"),
    )  # fmt: skip
    assert checked.returncode == 1, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert (
        "FAIL error: the answer's error is -32000 'CANCELLED', but the statement's is "
        "DEADLINE_EXCEEDED (-32000)"
    ) in lines
    assert "skip error words: $.error.message: the words, not signed" in lines
    assert (
        "skip answer line: jigcmd writes no Run/1 answer with these, so they are no fact of the "
        "run: $.error.data.note"
    ) in lines


def test_the_run_json_answer_is_both_the_statement_and_the_evidence(
    rig: Rig, tmp_path: Path
) -> None:
    """`run --json > a.json; verify a.json --evidence a.json`: `.attestation.bundle` and
    `.evidence`; a null `attestation` is said to carry no statement."""
    done = _jigcmd(
        "run", "--binding", str(rig.binding), "--state-dir", str(rig.state_dir), "tests",
        "--files", str(PASSING), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (tmp_path / "a.json").write_text(done.stdout)
    a = str(tmp_path / "a.json")
    checked = _jigcmd("verify", a, "--state-dir", str(rig.state_dir), "--evidence", a)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok   test result: PASSED" in checked.stdout
    assert "ok   ending:" in checked.stdout
    answer = json.loads(done.stdout)
    # Alone, the answer is its own evidence, checked whole: its copy of the statement and its
    # report against the bundle it carries; the runner's test view and a field jigcmd never
    # writes are said to be unchecked.
    alone = _jigcmd("verify", a, "--state-dir", str(rig.state_dir))
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "no --evidence" not in alone.stdout
    assert (
        "ok   attestation: bundle, digest and envelopes are the verified bundle's" in alone.stdout
    )
    attestation = answer["attestation"]
    forged = {
        **answer,
        "attestation": {
            **attestation,
            "digest": "sha256:" + "0" * 64,
            "envelopes": [{**attestation["envelopes"][0], "payload": "AAAA"}],
        },
        "report": {**answer["report"], "oomKilled": True, "wallMs": 1},
        "tests": {**answer["tests"], "summary": {**answer["tests"]["summary"], "failed": 5}},
        "note": "reviewed",
    }
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    f = str(tmp_path / "forged.json")
    for args in ((), ("--evidence", f)):
        lines = _jigcmd("verify", f, "--state-dir", str(rig.state_dir), *args).stdout.splitlines()
        assert lines[-1] == "NOT verified", lines
        assert [line for line in lines if not line.startswith("ok   ")] == [
            "FAIL report: the answer's report differs from the signed resource report in "
            "wallMs, oomKilled",
            "skip tests: the runner's per-test view, its summary too, is candidate-influenced "
            "and not signed; the test result statement is what binds the tests",
            "FAIL attestation: the answer's attestation is not the verified bundle's in digest, "
            "envelopes",
            "skip unknown fields: not fields of a `jigcmd run --json` answer, so no fact of the "
            "run: $.note",
            "NOT verified",
        ]
    # Another file as the evidence: FILE's own fields beside its bundle are said unchecked.
    beside = _jigcmd("verify", f, "--state-dir", str(rig.state_dir), "--evidence", a)
    assert beside.returncode == 0, beside.stdout + beside.stderr
    assert "skip FILE's answer: FILE is an answer, but --evidence is another file" in beside.stdout
    (tmp_path / "none.json").write_text(json.dumps({**answer, "attestation": None}))
    none = _jigcmd("verify", str(tmp_path / "none.json"), "--state-dir", str(rig.state_dir))
    assert none.returncode == 2
    assert "no statement was made for this run" in none.stderr


def test_verify_reads_every_json_strictly_and_keeps_the_bundle_forms(
    rig: Rig, tmp_path: Path
) -> None:
    """A duplicate key (a first-wins reader sees a failed run) or nesting past 64 levels, in
    the evidence, the file or a bundle line, is one line naming the file; CRLF, blank lines
    and a pretty-printed envelope still verify."""
    done = _jigcmd(
        "run", "--binding", str(rig.binding), "--state-dir", str(rig.state_dir), "tests",
        "--files", str(PASSING), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    state = ("--state-dir", str(rig.state_dir))
    (tmp_path / "a.json").write_text(done.stdout)
    a = str(tmp_path / "a.json")
    failed = '{"exitCode": 1, "stderr": {"text": "(fail) a\\n", "truncated": false}, '
    (tmp_path / "dup.json").write_text(failed + json.dumps(answer["evidence"])[1:])
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    first, second = answer["attestation"]["bundle"].splitlines()
    (tmp_path / "line.jsonl").write_text(f'{first}\n{{"payload": "e30=", {second[1:]}\n')
    deep = "not strict JSON: nesting deeper than 64 levels (too deep to decode at all)"
    for args, path, said in (
        (("--evidence", "dup.json"), "dup.json", 'not strict JSON: duplicate key "stderr"'),
        (("--evidence", "deep.json"), "deep.json", deep),
        ((), "deep.json", deep),
        ((), "line.jsonl", 'line 2: not strict JSON: duplicate key "payload"'),
    ):
        file = str(tmp_path / path) if not args else a
        extra = (args[0], str(tmp_path / args[1])) if args else ()
        refused = _jigcmd("verify", file, *state, *extra)
        assert refused.returncode == 2, (path, refused.stdout, refused.stderr)
        assert refused.stderr == f"jigcmd verify: {tmp_path / path}: {said}\n"
        assert refused.stdout == ""
    bundle = "\r\n" + answer["attestation"]["bundle"].replace("\n", "\r\n\r\n")
    (tmp_path / "crlf.jsonl").write_text(bundle, newline="")
    crlf = _jigcmd("verify", str(tmp_path / "crlf.jsonl"), *state, "--evidence", a)
    assert crlf.returncode == 0, crlf.stdout + crlf.stderr
    (tmp_path / "pretty.json").write_text(json.dumps(json.loads(first), indent=2))
    pretty = _jigcmd("verify", str(tmp_path / "pretty.json"), *state)
    lines = pretty.stdout.splitlines()
    assert lines[0] == "ok   bundle: 1 DSSE envelope(s)", lines
    assert lines[1].startswith("ok   signature: "), lines


def test_the_reviewers_sample_in_the_docs_is_what_verify_prints(rig: Rig, tmp_path: Path) -> None:
    """docs/attestation.md's sample output, line for line: digests whole, as printed; only
    the host's key id, the envelope's run id, the lock's digest and the streams' lengths (the
    runner prints its timings) differ. As the reviewer does it: the Flow call under run
    `first-calls`, its answer checked with its run, its operation and its lock."""
    files = {
        str(path.relative_to(PASSING)): path.read_text()
        for path in sorted(PASSING.rglob("*"))
        if path.is_file()
    }
    server = rig.serve(run_id="first-calls")
    server.send(flow_call("c1", "example-passing-tests", {"command": "tests", "files": files}))
    (tmp_path / "answer.json").write_text(json.dumps(server.answer("c1")))
    assert server.close_input() == 0
    fetched = _jigcmd(
        "attest", "--run-id", "first-calls", "example-passing-tests",
        "--state-dir", str(rig.state_dir), "--out", str(tmp_path / "passing.intoto.jsonl"),
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    shutil.copy(rig.binding.parent / "jigcmd.lock", tmp_path / "jigcmd.lock")
    checked = subprocess.run(
        [sys.executable, "-m", "jigcmd", "verify", "passing.intoto.jsonl", "--state-dir",
         str(rig.state_dir), "--evidence", "answer.json", "--run-id", "first-calls",
         "--operation-id", "example-passing-tests", "--lock", "jigcmd.lock"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    doc = (Path(__file__).parents[2] / "docs" / "attestation.md").read_text()
    sample = doc.split("# the call's answer as it came")[1].split("```\n")[2]

    def same(text: str) -> list[str]:
        text = re.sub(r"key [0-9a-f]{64}", "key KEY", text)
        text = re.sub(r"runId [0-9a-f]+,", "runId RUN,", text)
        text = re.sub(r"lockDigest sha256:[0-9a-f]{64}", "lockDigest LOCK", text)
        return re.sub(r"\d+ characters", "N characters", text).splitlines()

    assert same(checked.stdout) == same(sample)
