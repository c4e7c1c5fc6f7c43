"""`jigcmd demo`: the bundled example through a real `jigcmd serve` child, as a readable account.

The demo is also a smoke test: it admits a copy of `jigcmd/example`, speaks MCP and then
FLOW Run/1 to real server children by hand-written JSON-RPC frames, checks every answer, and
exits 0 only when every step behaved as expected (otherwise it lists what did not).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jigcmd import __version__
from jigcmd.envelope.delegation import resolve_backend
from jigcmd.frontends.run import read_candidate
from jigcmd.frontends.servechild import ServeChild, WireError
from jigcmd.jsonio import readable, strict
from jigcmd.protocol.inert import code_span
from jigcmd.protocol.invocation import invocation_line

__all__ = ["demo"]

# The bundled example lives at the package's top, beside the fronts.
_EXAMPLE = Path(__file__).parents[1] / "example"
_INDENT = "     "


class _Account:
    """Prints the account and keeps the list of steps that did not behave as expected."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def section(self, title: str) -> None:
        print(f"\n== {title}")

    def say(self, text: str) -> None:
        print(f"   {text}")

    def block(self, text: str, limit: int = 40) -> None:
        lines = text.rstrip("\n").splitlines() or ["(empty)"]
        for line in lines[:limit]:
            print(f"{_INDENT}| {line}")
        if len(lines) > limit:
            print(f"{_INDENT}| … {len(lines) - limit} more lines")

    def expect(self, condition: bool, what: str) -> bool:
        if not condition:
            self.failures.append(what)
            print(f"   !! UNEXPECTED: {what}")
        return condition


def _files(root: Path, candidate: str) -> dict[str, str]:
    return read_candidate(root / "candidates" / candidate)


def _report_line(result: dict[str, Any]) -> str | None:
    report = (result.get("_meta") or {}).get("jigcmd/report")
    if not isinstance(report, dict):
        return None
    cpu = report.get("cpuMs")
    memory = report.get("peakMemoryBytes")
    return (
        f"resources: wall {report.get('wallMs', 0):.0f} ms (setup {report.get('setupMs', 0):.0f}"
        f" ms), cpu {'n/a' if cpu is None else f'{cpu:.0f} ms'}, peak memory "
        f"{'n/a' if memory is None else f'{memory / 2**20:.1f} MiB'}, oom killed "
        f"{report.get('oomKilled')}, pids limit hit {report.get('pidsLimitHit')}"
    )


def _text(view: dict[str, Any], name: str) -> str:
    """What the result shows of one stream: its head and tail (all of it when short)."""
    stream = view.get(name, {})
    return str(stream.get("head", "")) + str(stream.get("tail", ""))


def _evidence(account: _Account, result: dict[str, Any], what: str) -> dict[str, Any]:
    """The evidence of a completed tool call, with its summary and resource report printed."""
    if not account.expect(result.get("isError") is False, f"{what}: the call was refused"):
        account.block(readable.dumps(result.get("content")))
        return {}
    evidence: dict[str, Any] = result.get("structuredContent") or {}
    ended = (
        f"exit code {evidence.get('exitCode')}"
        if evidence.get("signal") is None
        else f"signal {evidence.get('signal')}"
    )
    account.say(
        f"<- {code_span(invocation_line(evidence.get('invocation', [])))}: {ended}, stop reason "
        f"{evidence.get('stopReason')}, cleanup {evidence.get('cleanup')}"
    )
    account.expect(evidence.get("cleanup") == "complete", f"{what}: cleanup not complete")
    if (line := _report_line(result)) is not None:
        account.say(line)
    return evidence


def _call(
    account: _Account, server: ServeChild, what: str, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    shown = {k: (f"<{len(v)} files>" if k == "files" else v) for k, v in arguments.items()}
    account.section(what)
    account.say(f"-> tools/call {name} {readable.dumps(shown)}")
    response = server.request("tools/call", {"name": name, "arguments": arguments})
    result: dict[str, Any] = response.get("result") or {}
    account.expect("result" in response, f"{what}: a JSON-RPC error {response.get('error')}")
    return result


def _handshake(account: _Account, server: ServeChild) -> None:
    init = server.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "jigcmd-demo", "version": __version__},
        },
    )
    info = init.get("result", {})
    server_info = info.get("serverInfo", {})
    account.say(
        f"-> initialize   <- server {server_info.get('name')} {server_info.get('version')}, "
        f"protocol {info.get('protocolVersion')}"
    )
    account.expect("result" in init, f"initialize answered {init}")
    server.notify("notifications/initialized", None)
    account.say("-> notifications/initialized (no answer expected)")
    tools = server.request("tools/list", {}).get("result", {}).get("tools", [])
    account.say("-> tools/list")
    for tool in tools:
        # The title names the command; the description (for a model) runs to a paragraph.
        account.say(f"<- {tool.get('name')}: {tool.get('title') or tool.get('description')}")
    names = sorted(tool.get("name") for tool in tools)
    account.expect(names == ["cli", "tests"], f"tools/list named {names}, not cli and tests")


def _passing(account: _Account, server: ServeChild, root: Path) -> None:
    files = _files(root, "passing")
    result = _call(account, server, "tests on the passing candidate", "tests", {"files": files})
    evidence = _evidence(account, result, "passing tests")
    account.expect(evidence.get("exitCode") == 0, "passing tests did not exit 0")
    account.block(_text(evidence, "stderr").strip("\n"), limit=12)


def _failing(account: _Account, server: ServeChild, root: Path) -> None:
    files = _files(root, "failing")
    result = _call(account, server, "tests on the failing candidate", "tests", {"files": files})
    evidence = _evidence(account, result, "failing tests")
    account.expect(evidence.get("exitCode") == 1, "failing tests did not exit 1")
    lines = _text(evidence, "stderr").splitlines()
    assertion = [line for line in lines if line.lstrip().startswith(("Expected", "Received"))]
    account.expect(bool(assertion), "the failing test's assertion is not in stderr")
    account.say("the assertion that failed:")
    account.block("\n".join(assertion))
    failed = [t for t in evidence.get("tests", {}).get("tests", []) if t.get("status") == "failed"]
    account.expect(bool(failed), "the result's per-test results name no failing test")
    for test in failed:
        account.say(f"failing test: {test.get('name')} ({test.get('filePath')}:{test.get('line')})")


def _cli(account: _Account, server: ServeChild, root: Path) -> None:
    arguments = {"files": _files(root, "passing"), "args": ["--greeting", "hi"], "stdin": "a\nb\n"}
    result = _call(account, server, "the cli entry point with args and stdin", "cli", arguments)
    stdout = _text(_evidence(account, result, "cli"), "stdout")
    account.say("stdout:")
    account.block(stdout)
    expected = {"args": ["--greeting", "hi"], "records": ["a", "b"]}
    account.expect(_json_or_none(stdout) == expected, f"cli printed {stdout!r}")


def _hostile(account: _Account, server: ServeChild, root: Path) -> None:
    files = _files(root, "hostile")
    result = _call(account, server, "tests on the hostile candidate", "tests", {"files": files})
    lines = _text(_evidence(account, result, "hostile tests"), "stderr").splitlines()
    contained = [line for line in lines if line.startswith(("contained ", "visible root:"))]
    escaped = [line for line in lines if "ESCAPED" in line]
    account.block("\n".join(contained + escaped))
    account.expect(len(contained) >= 3, "the hostile candidate reported fewer than 3 attempts")
    account.expect(not escaped, f"the hostile candidate escaped: {escaped}")


def _invalid(account: _Account, server: ServeChild, root: Path) -> None:
    bad = {"files": {"../outside.ts": "export {}", **_files(root, "passing")}}
    result = _call(account, server, "an invalid request (a path with ..)", "tests", bad)
    account.expect(result.get("isError") is True, "the invalid request was not refused")
    for item in result.get("content", []):
        account.say(f"<- refused: {item.get('text')}")
    error = (result.get("_meta") or {}).get("jigcmd/error", {})
    account.say(f"   _meta jigcmd/error: {readable.dumps(error)}")
    account.expect(error.get("code") == "INVALID_INPUT", f"refusal code {error.get('code')}")
    pointer = (error.get("details") or {}).get("pointer")
    account.expect(pointer == "/files/..~1outside.ts", f"the refusal points at {pointer}")


def _mcp_session(account: _Account, binding: Path, root: Path, state: Path) -> None:
    account.section(
        f"MCP session: {sys.executable} -m jigcmd serve --binding {binding} --state-dir {state}"
    )
    with ServeChild(binding, ["--state-dir", str(state)]) as server:
        _handshake(account, server)
        for step in (_passing, _failing, _cli, _hostile, _invalid):
            step(account, server, root)
        _close(account, server)


def _flow_session(account: _Account, binding: Path, root: Path, state: Path) -> None:
    account.section("FLOW Run/1 session (a new child: the first request chooses the dialect)")
    params = {
        "operationId": "demo-op-1",
        "slot": "command",
        "method": "run",
        "input": {"command": "tests", "files": _files(root, "passing")},
    }
    with ServeChild(binding, ["--state-dir", str(state)]) as server:
        account.say(
            '-> {"jsonrpc":"2.0","id":"demo-1","method":"capability/call","params":'
            '{"operationId":"demo-op-1","slot":"command","method":"run","input":'
            '{"command":"tests","files":{…}}}}'
        )
        raw = server.request_raw("capability/call", params, request_id="demo-1")
        account.say("<- (raw)")
        account.block(raw.decode("utf-8", "replace"), limit=5)
        response = strict.loads(raw)
        result = response.get("result") if isinstance(response, dict) else None
        account.expect(
            isinstance(result, dict) and list(result) == ["value"],
            "the Run/1 result is not exactly {value: evidence}",
        )
        value = result.get("value", {}) if isinstance(result, dict) else {}
        account.expect(len(value) == 10, f"the evidence has {len(value)} fields, not 10")
        account.expect(value.get("exitCode") == 0, "the Run/1 tests run did not exit 0")
        _close(account, server)


def _close(account: _Account, server: ServeChild) -> None:
    status = server.close(2.0)
    account.say(f"-> stdin closed; server exited with status {status}")
    account.expect(status == 0, f"the server did not exit cleanly within 2 s (status {status})")


def _json_or_none(text: str) -> object:
    try:
        return strict.loads(text.encode("utf-8"))
    except strict.StrictJSONError:
        return None


def _admit(account: _Account, binding: Path) -> bool:
    account.section(f"admission: jigcmd lock --binding {binding}")
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    account.block(done.stdout + done.stderr, limit=60)
    return account.expect(done.returncode == 0, f"jigcmd lock exited {done.returncode}")


def _step_aside() -> None:
    """Leave a delegated cgroup for its `jigcmd-server` leaf, as `serve` does (rootless v2).

    Else this process, staying in the scope, would be the other process its `serve` child
    refuses to share the delegated cgroup with (docs/rootless.md). A delegation that fails
    here is the child's to report, in its words.
    """
    with contextlib.suppress(OSError, ValueError):
        resolve_backend()


def demo(state_dir: Path | None = None) -> int:
    """Run the account; 0 when every step behaved as expected, 1 otherwise.

    The journal goes to `state_dir`, else to a temporary directory removed afterwards: a
    demonstration leaves nothing in the machine's state directory.
    """
    account = _Account()
    _step_aside()
    with tempfile.TemporaryDirectory(prefix="jigcmd-demo-") as scratch:
        root = Path(scratch) / "example"
        shutil.copytree(_EXAMPLE, root, ignore=shutil.ignore_patterns("jigcmd.lock", "__pycache__"))
        binding = root / "binding.toml"
        state = state_dir if state_dir is not None else Path(scratch) / "state"
        kept = "" if state_dir is not None else " (temporary; --state-dir DIR keeps it)"
        print(f"jigcmd demo: the bundled example, copied to {root}; journal in {state}{kept}")
        if _admit(account, binding):
            for session in (_mcp_session, _flow_session):
                try:
                    session(account, binding, root, state)
                except WireError as exc:
                    account.expect(False, f"the server misbehaved: {exc.message}")
                    account.say("server stderr:")
                    account.block(exc.stderr)
    print()
    if account.failures:
        print(f"demo: {len(account.failures)} step(s) did not behave as expected:")
        for failure in account.failures:
            print(f"  - {failure}")
        return 1
    print("demo: every step behaved as expected.")
    return 0
