"""Compare FLOW Run/1 transcripts of this checkout against another revision's source, byte for byte.

    git archive <rev> jigcmd | tar -x -C /tmp/jigcmd-base
    .venv/bin/python scripts/compare_run1.py /tmp/jigcmd-base

Both servers get the same sequence (the example's passing, failing and hostile candidates,
the cli with arguments and stdin, an invalid request, a run printing 2 x 200 KB; each sent
twice, the second a replay of the same operation) through a real `jigcmd serve --protocol
flow`; the base runs with its source first on PYTHONPATH. Bun's own timing lines
(`[0.25ms]`) are the only bytes allowed to differ. Needs root (real envelopes).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import EXAMPLE, admit_example

_TIMING = re.compile(rb"\[\d+(\.\d+)?ms\]")


def _files(name: str) -> dict[str, str]:
    root = EXAMPLE / "candidates" / name
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


def _inputs() -> list[dict[str, object]]:
    chatty = 'process.stdout.write("o".repeat(200000));process.stderr.write("é".repeat(100000));'
    return [
        {"command": "tests", "files": _files("passing")},
        {"command": "tests", "files": _files("failing")},
        {"command": "cli", "files": _files("passing"), "args": ["--x", "y"], "stdin": "a\nb\n"},
        {"command": "tests", "files": _files("hostile")},
        {"command": "tests", "files": {"../x": "1"}},
        {"command": "cli", "files": {"src/cli.ts": chatty}},
    ]


def transcript(pythonpath: str | None) -> bytes:
    """Every answer of one serve, in order."""
    tmp = Path(tempfile.mkdtemp(prefix="jigcmd-run1-"))
    env = dict(os.environ)
    try:
        binding = admit_example(tmp)
        if pythonpath is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = pythonpath
        args = ["--protocol", "flow", "--state-dir", str(tmp / "state"), "--run-id", "run-proof"]
        lines = []
        with ServeChild(binding, args, timeout=120) as server:
            for index, request in enumerate(_inputs()):
                params = {
                    "operationId": f"op-{index}",
                    "slot": "command",
                    "method": "run",
                    "input": request,
                }
                for request_id in (f"call-{index}", f"again-{index}"):
                    lines.append(server.request_raw("capability/call", params, request_id))
        return b"\n".join(lines)
    finally:
        os.environ.clear()
        os.environ.update(env)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    """0 when the transcripts match but for Bun's timings; 1 with the differing lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="a directory holding the base revision's jigcmd/")
    base_dir = parser.parse_args().base.resolve()
    base, now = transcript(str(base_dir)), transcript(None)
    same = _TIMING.sub(b"[T]", base) == _TIMING.sub(b"[T]", now)
    print(f"answers: {len(now.splitlines())}; bytes: base {len(base)}, now {len(now)}")
    print("identical but for Bun's timings" if same else "DIFFERENT")
    for old, new in zip(base.splitlines(), now.splitlines(), strict=True):
        if _TIMING.sub(b"[T]", old) != _TIMING.sub(b"[T]", new):
            print(f"base: {old[:300]!r}\nnow:  {new[:300]!r}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
