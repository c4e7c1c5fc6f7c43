"""Where one call's time goes: the median gap before each traced stage, over many calls.

Starts one `jigcmd serve` with `JIGCMD_TRACE=1` (every process of the envelope writes
`jigcmd-trace <monotonic ms> <pid> <label>` to stderr, see `jigcmd/trace.py`), sends `bun test`
calls on the bundled example with `--idle-ms` of idle before each, and prints, per stage in
the order of the first call, the median time since the previous stage. Tracing itself costs
a little at every mark; compare runs of this script, not its totals with the benchmark's.

Run as root: python scripts/trace_stages.py [--calls 30] [--idle-ms 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import jigcmd

EXAMPLE = Path(jigcmd.__file__).parent / "example"
BINDING = EXAMPLE / "binding.toml"
PASSING = EXAMPLE / "candidates" / "passing"
WARMUP = 3


def candidate_files() -> dict[str, str]:
    return {
        path.relative_to(PASSING).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(PASSING.rglob("*"))
        if path.is_file()
    }


def call(server: subprocess.Popen[bytes], number: int, files: dict[str, str]) -> None:
    assert server.stdin is not None and server.stdout is not None
    request = {
        "jsonrpc": "2.0",
        "id": f"t{number}",
        "method": "capability/call",
        "params": {
            "operationId": f"trace-{uuid.uuid4().hex}",
            "slot": "command",
            "method": "run",
            "input": {"command": "tests", "files": files},
        },
    }
    server.stdin.write(json.dumps(request).encode() + b"\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline() or b"{}")
    if answer.get("result", {}).get("value", {}).get("exitCode") != 0:
        raise SystemExit(f"the call failed: {answer}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="measured calls")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each call")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-trace-"))
    lock = work / "jigcmd.lock"
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(BINDING), "--lock", str(lock)],
        check=True,
        capture_output=True,
    )
    log_path = work / "stderr"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jigcmd",
                "serve",
                "--binding",
                str(BINDING),
                "--lock",
                str(lock),
                "--state-dir",
                str(work / "state"),
                "--protocol",
                "flow",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "JIGCMD_TRACE": "1"},
        )
        files = candidate_files()
        windows: list[tuple[float, float]] = []
        for number in range(WARMUP + options.calls):
            time.sleep(options.idle_ms / 1000)
            start = time.monotonic() * 1000
            call(server, number, files)
            if number >= WARMUP:
                windows.append((start, time.monotonic() * 1000))
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    marks = sorted(
        (float(fields[1]), fields[3])
        for line in log_path.read_text(errors="replace").splitlines()
        if line.startswith("jigcmd-trace ") and len(fields := line.split(None, 3)) == 4
    )
    gaps: defaultdict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    for index, (start, end) in enumerate(windows):
        previous = start
        for stamp, label in marks:
            if start <= stamp <= end:
                gaps[label].append(stamp - previous)
                previous = stamp
                if index == 0:
                    order.append(label)
        gaps["(answer read by the client)"].append(end - previous)
    order.append("(answer read by the client)")
    total = statistics.median(end - start for start, end in windows)
    print(f"{options.calls} calls, {options.idle_ms:g} ms idle before each; median {total:.2f} ms")
    print("median ms since the previous stage, stage (calls that had it)")
    for label in order:
        values = gaps[label]
        print(f"{statistics.median(values):8.3f}  {label}  ({len(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
