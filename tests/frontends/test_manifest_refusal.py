"""A package manifest `serve` cannot read, as a peer and the operator meet the refusal."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jigcmd
from tests.required import require_root

EXAMPLE = Path(jigcmd.__file__).parent / "example"


@pytest.mark.envelope
def test_bad_yaml_front_matter_is_one_line_naming_the_problem_and_where(tmp_path: Path) -> None:
    """PyYAML's caret drawing spans lines; the refusal is one line with line and column."""
    require_root()
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    manifest = tmp_path / "example" / "repair" / "FLOW.md"
    manifest.write_text("---\nname: [unclosed\nuses:\n  command: {}\n---\n")
    call = {"jsonrpc": "2.0", "id": "c1", "method": "capability/call", "params": {}}
    served = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve",
         "--binding", str(tmp_path / "example" / "binding.toml"),
         "--state-dir", str(tmp_path / "state")],
        input=json.dumps(call) + "\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert served.returncode == 2
    found = (
        "repair/FLOW.md: front matter is not valid YAML: while parsing a flow sequence "
        "(line 2, column 7): expected ',' or ']', but got ':' (line 3, column 5)"
    )
    (answer,) = [json.loads(line) for line in served.stdout.splitlines()]
    assert answer["error"]["message"].endswith(f"<binding dir>/{found}")
    (said,) = [line for line in served.stderr.splitlines() if "FLOW.md" in line]
    assert said.endswith(f"{tmp_path}/example/{found}")
