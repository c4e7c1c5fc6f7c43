"""Inside a test container: every front of jigcmd, then one JSON object on stdout.

Run by `test_container.py` as `python inside.py STATE_DIR` in a container whose root is the
host's (so this checkout, its venv and Bun sit at their host paths). It records:

- `doctor`: `jigcmd doctor --json` (the checks by name, and the exit status);
- `run`: `jigcmd run` of the bundled example's tests (exit status, what it printed);
- `serve`: one FLOW Run/1 call to a real `jigcmd serve` (the answer);
- `jarvis`: `jigcmd jarvis` with the example policy (an allowed `echo` run: its answer) and
  with the default `host_dirs` (which hold the container's /etc: its exit status and stderr);
- `ran`: whether any candidate wrote its marker (a candidate that ran would have).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import jigcmd as jigcmd_package
from jigcmd.frontends.servechild import ServeChild

EXAMPLE = Path(__file__).resolve().parents[2] / "jigcmd" / "example"
SECONDS = 120.0
EXAMPLE_POLICY = Path(jigcmd_package.__file__).with_name("jarvis") / "example-policy.toml"
TOKEN = "jv_container-token-0123456789abcdef"
_SERVING = re.compile(r"serving (http://127\.0\.0\.1:\d+)/utcp")
# The default host_dirs (no `host_dirs` key), /etc among them.
_DEFAULT_DIRS_POLICY = '[[rule]]\nname = "echo"\ndecision = "allow"\nargv0 = ["/usr/bin/echo"]\n'
# Printed by the candidate (on stdout) only if it ran.
MARKER = "jigcmd-container-candidate-ran"


def jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    """The jigcmd command line, to completion."""
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
    )


def _jarvis_argv(policy: Path, state: str) -> list[str]:
    return [
        sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy), "--port", "0",
        "--state-dir", state,
    ]  # fmt: skip


def _run_create(base: str, argv: list[str]) -> dict[str, Any]:
    body = json.dumps({"tool": "jarvis.run.create", "args": {"argv": argv}}).encode()
    request = urllib.request.Request(
        f"{base}/tools/jarvis.run.create",
        data=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=SECONDS) as answer:
        found: dict[str, Any] = json.loads(answer.read())
    return found


def _start_jarvis(
    policy: Path, state: str, stderr_path: Path
) -> tuple[subprocess.Popen[bytes], str | None]:
    """jarvis started on `policy`: the process, and its base URL once it serves (None when
    it exited first)."""
    env = {**os.environ, "JARVIS_BEARER_TOKEN": TOKEN}
    with stderr_path.open("wb") as stderr:
        server = subprocess.Popen(
            _jarvis_argv(policy, state), env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    deadline = time.monotonic() + SECONDS
    while not (found := _SERVING.search(stderr_path.read_text("utf-8", "replace"))):
        if server.poll() is not None or time.monotonic() > deadline:
            return server, None
        time.sleep(0.1)
    return server, found.group(1)


def _stop(server: subprocess.Popen[bytes]) -> int:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    return server.wait(SECONDS)


def jarvis(state: str, work: Path) -> dict[str, Any]:
    """The example policy's jarvis runs `echo hello`; the default host_dirs are refused."""
    default = work / "default-policy.toml"
    default.write_text(_DEFAULT_DIRS_POLICY)
    results: dict[str, Any] = {}
    for name, policy in (("default", default), ("example", EXAMPLE_POLICY)):
        stderr_path = work / f"jarvis-{name}.stderr"
        server, base = _start_jarvis(policy, state, stderr_path)
        try:
            results[name] = {"served": base is not None}
            if base is not None and name == "example":
                try:
                    results[name]["answer"] = _run_create(base, ["echo", "hello"])
                except OSError as exc:  # a container without a piece: recorded, not raised
                    results[name]["error"] = str(exc)
        finally:
            results[name]["status"] = _stop(server)
            results[name]["stderr"] = stderr_path.read_text("utf-8", "replace")
    return results


def main(state: str) -> dict[str, Any]:
    """Every front, as described in the module docstring."""
    results: dict[str, Any] = {}
    # Made as an operator makes it (a volume's mount point): doctor inspects a state
    # directory, it never creates one, and fails one that does not exist.
    os.makedirs(state, mode=0o700, exist_ok=True)
    done = jigcmd("doctor", "--json", "--state-dir", state)
    results["doctor"] = {
        "status": done.returncode,
        "checks": {c["check"]: c for c in json.loads(done.stdout)},
    }
    with tempfile.TemporaryDirectory(prefix="jigcmd-container-") as work:
        root = Path(work) / "example"
        shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("jigcmd.lock"))
        binding = root / "binding.toml"
        locked = jigcmd("lock", "--binding", str(binding))
        results["lock"] = locked.returncode
        candidate = root / "candidates" / "passing"
        (candidate / "src" / "cli.ts").write_text(f'console.log("{MARKER}");\n')
        run = jigcmd(
            "run", "--binding", str(binding), "cli", "--files", str(candidate),
            "--state-dir", state, "--json",
        )  # fmt: skip
        results["run"] = {"status": run.returncode, "stdout": run.stdout, "stderr": run.stderr}
        call = {
            "operationId": "jigcmd-container-1",
            "slot": "command",
            "method": "run",
            "input": {"command": "cli", "files": {"src/cli.ts": f'console.log("{MARKER}");\n'}},
        }
        with ServeChild(binding, timeout=SECONDS, args=["--state-dir", state]) as server:
            # FLOW Run/1 ids are strings.
            answer = server.request_raw("capability/call", call, request_id="jigcmd-container")
            results["serve"] = json.loads(answer)
            server.close(SECONDS)
        results["jarvis"] = jarvis(state, Path(work))
    results["ran"] = MARKER in json.dumps([results["run"]["stdout"], results["serve"]])
    return results


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1])) + "\n")
