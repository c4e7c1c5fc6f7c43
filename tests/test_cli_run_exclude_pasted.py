"""The `--exclude` a refused name's fix suggests works when pasted into a shell as shown.

The problem list shows a name's newline or U+202E as its escape (right for a terminal), and
the suggested pattern was once built from the raw name and then shown escaped: pasted, it
held a literal `\\n` and matched nothing, so the same refusal came back. Pasted here through
bash, exactly as `jigcmd run` printed it, the pattern leaves the file out and the run goes on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.admitted_example import admit_example

NAMES = ("y\nended: x.ts", "z\u202egpj.ts", "w\x1b[2Jv.ts", "it's\ta.ts")
FIX = ", or leave it out with --exclude "


def _run(binding: Path, tmp_path: Path, excludes: list[str]) -> subprocess.CompletedProcess[str]:
    """`jigcmd run … --exclude X…` as bash runs it, each X pasted as printed."""
    words = [sys.executable, "-m", "jigcmd", "run", "--binding", str(binding)]
    words += ["--state-dir", str(tmp_path / "state"), "cli", "--files", str(tmp_path / "d")]
    line = " ".join(f"'{word}'" for word in words) + "".join(f" --exclude {x}" for x in excludes)
    return subprocess.run(
        ["bash", "-c", line],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_suggested_exclude_pasted_leaves_each_refused_name_out(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    (tmp_path / "d" / "src").mkdir(parents=True)
    (tmp_path / "d" / "src" / "cli.ts").write_text('console.log("ran")\n')
    for name in NAMES:
        (tmp_path / "d" / name).write_text("1\n")
    refused = _run(binding, tmp_path, [])
    assert refused.returncode == 2, refused.stderr
    fixes = [line.split(FIX, 1)[1] for line in refused.stderr.splitlines() if FIX in line]
    assert len(fixes) == len(NAMES), refused.stderr
    done = _run(binding, tmp_path, fixes)
    assert done.returncode == 0, (fixes, done.stderr)
    assert "| ran" in done.stdout.splitlines()
