"""A signed statement's `setupMs` and `wallMs` fit in its `startedOn`..`finishedOn` span.

docs/evidence.md: setup runs from the supervisor taking the launch to the candidate's start,
wall from that start to its end; docs/attestation.md: `startedOn` comes before the setup and
`finishedOn` after the end. Each instant is Unix ms rounded down, so the real span is less
than `finishedOn - startedOn + 1`: that is the exact bound. Driven as callers do, through
`jigcmd run --json` and a `jigcmd serve` child's Run/1 answers (the statement from `jigcmd
attest`); the wall must also cover what the candidate saw pass by its own clock.
"""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.frames import flow_call
from tests.test_cli_run import BINDING, answer, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

# Each prints, last, how long it has run by its own clock (ns since Bun started).
QUICK = "console.log(Bun.nanoseconds());\n"
FAILING = "console.log(Bun.nanoseconds());\nprocess.exit(3);\n"
# Sleeps until its own clock says 300 ms passed since it began this loop.
SLEEPING = (
    "const begun = Bun.nanoseconds();\n"
    "while (Bun.nanoseconds() - begun < 300e6) await Bun.sleep(50);\n"
    "console.log(Bun.nanoseconds());\n"
)
SLEEP_MS = 300
CANDIDATES = {"quick": QUICK, "exit-3": FAILING, "sleep": SLEEPING}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _unix_ms(instant: str) -> int:
    """An RFC 3339 UTC instant with milliseconds, as whole Unix ms (exact integer arithmetic)."""
    parsed = datetime.datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return (parsed - _EPOCH) // datetime.timedelta(milliseconds=1)


def _predicate(envelope: dict[str, Any]) -> dict[str, Any]:
    predicate: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    return predicate


def _check(predicate: dict[str, Any], own_ns: int | None, slept: bool) -> None:
    """The documented order of the statement's instants and times, exactly."""
    resources = predicate["ending"]["resources"]
    setup, wall = resources["setupMs"], resources["wallMs"]
    span = _unix_ms(predicate["finishedOn"]) - _unix_ms(predicate["startedOn"])
    facts = f"span {span} ms (rounded down), setupMs {setup}, wallMs {wall}"
    assert setup >= 0 and wall >= 0, facts
    assert setup + wall < span + 1, facts
    if own_ns is not None:
        assert wall * 1e6 >= own_ns, f"{facts}; the candidate saw {own_ns} ns of its own"
    if slept:
        assert wall >= SLEEP_MS, facts


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_run_json_signs_setup_and_wall_inside_the_statements_span(
    lock: Path, tmp_path: Path, name: str
) -> None:
    """`jigcmd run --json cli`: setupMs + wallMs < finishedOn - startedOn + 1."""
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text(CANDIDATES[name])
    done = run(lock, tmp_path / "state", "cli", files, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found = answer(done)
    predicate = _predicate(found["attestation"]["envelopes"][0])
    own_ns = int(found["evidence"]["stdout"]["text"].split()[-1])
    _check(predicate, own_ns, slept=name == "sleep")


def test_a_deadline_runs_statement_keeps_them_inside_its_span(lock: Path, tmp_path: Path) -> None:
    """A candidate stopped at `--timeout`: the wall runs to the stop, still inside the span."""
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text("for (;;) {}\n")
    done = run(lock, tmp_path / "state", "cli", files, "--json", "--timeout", "1")
    assert done.returncode == 4, done.stdout + done.stderr
    envelope = answer(done)["attestation"]["envelopes"][0]
    _check(_predicate(envelope), None, slept=False)


def test_serve_run1_statements_keep_setup_and_wall_inside_their_span(
    lock: Path, tmp_path: Path
) -> None:
    """Run/1 calls to the `serve` child, one per candidate: each statement `jigcmd attest`
    fetches keeps the order."""
    state = tmp_path / "state"
    run_id = "run-signed-times"
    args = ["--lock", str(lock), "--state-dir", str(state), "--run-id", run_id]
    outputs: dict[str, str] = {}
    with ServeChild(BINDING, args, timeout=60) as server:
        for name, source in CANDIDATES.items():
            call = {"command": "cli", "files": {"src/cli.ts": source}, "args": []}
            server.send(flow_call(f"c-{name}", f"op-{name}", call))
            found = server.answer(f"c-{name}")
            outputs[name] = found["result"]["value"]["stdout"]["text"]
        assert server.close(60) == 0
    for name, text in outputs.items():
        fetched = subprocess.run(
            [sys.executable, "-m", "jigcmd", "attest", "--run-id", run_id, f"op-{name}",
             "--state-dir", str(state)],
            capture_output=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        first = json.loads(fetched.stdout.splitlines()[0])
        _check(_predicate(first), int(text.split()[-1]), slept=name == "sleep")
