"""`jigcmd init`'s dependency note never hides a single package or file behind `and 1 more`,
which costs as many words as its name (the tester's `deps`: zod went unnamed)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd


def _note(root: Path, packages: list[str], importers: int = 1) -> str:
    """The dependency note for a project whose test imports each of `packages`, the first
    of them from `importers` files."""
    manifest = {"name": "lists", "dependencies": dict.fromkeys(packages, "1")}
    files = {
        "package.json": json.dumps(manifest),
        "test/a.test.ts": "".join(f'import "{name}";\n' for name in packages),
    }
    for n in range(1, importers):
        files[f"test/more{n}.test.ts"] = f'import "{packages[0]}";\n'
    done = jigcmd("init", str(project(root, files)))
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stderr.splitlines() if "package.json declares" in line]
    return note


def test_a_fourth_package_is_named_not_counted(tmp_path: Path) -> None:
    """Four packages: all four named; five: three and `and 2 more`."""
    four = _note(tmp_path / "four", ["date-fns", "hono", "lodash-es", "zod"])
    assert (
        "4 dependencies (date-fns: test/a.test.ts; hono: test/a.test.ts; lodash-es: "
        "test/a.test.ts; zod: test/a.test.ts) that"
    ) in four
    assert "more" not in four
    five = _note(tmp_path / "five", ["a", "b", "c", "d", "e"])
    assert "c: test/a.test.ts; and 2 more) that" in five


def test_a_third_importing_file_is_named_not_counted(tmp_path: Path) -> None:
    """Three files import the package: all named; four: two and `and 2 more`."""
    three = _note(tmp_path / "three", ["zod"], importers=3)
    assert "(zod: test/a.test.ts, test/more1.test.ts, test/more2.test.ts) that" in three
    four = _note(tmp_path / "four", ["zod"], importers=4)
    assert "(zod: test/a.test.ts, test/more1.test.ts and 2 more) that" in four
