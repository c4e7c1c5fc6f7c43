"""Inside a test container: every front of jigcmd, then one JSON object on stdout.

Run by `test_container.py` as `python inside.py STATE_DIR` in a container whose root is the
host's (so this checkout, its venv and Bun sit at their host paths). It records:

- `doctor`: `jigcmd doctor --json` (the checks by name, and the exit status);
- `run`: `jigcmd run` of the bundled example's tests (exit status, what it printed);
- `serve`: one FLOW Run/1 call to a real `jigcmd serve` (the answer);
- `ran`: whether any candidate wrote its marker (a candidate that ran would have).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jigcmd.frontends.servechild import ServeChild

EXAMPLE = Path(__file__).resolve().parents[2] / "jigcmd" / "example"
SECONDS = 120.0
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


def main(state: str) -> dict[str, Any]:
    """Every front, as described in the module docstring."""
    results: dict[str, Any] = {}
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
    results["ran"] = MARKER in json.dumps([results["run"]["stdout"], results["serve"]])
    return results


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1])) + "\n")
