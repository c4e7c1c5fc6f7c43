"""`jigcmd init DIR`: a reviewed-command Binding for a person's own project, in one step.

It reads DIR as `run --files DIR` would (the same leave-outs and `--exclude`), refuses with
every problem at once when that candidate breaks a rule, finds the commands
(`command/scaffold.py`), writes the Binding (TOML, or with `--format ts` TypeScript as the
reference lays a project out) and its Flow package under `DIR/.jig/` (nothing is
overwritten: `command/scaffoldfiles.py`), checks the result loads as `lock` will load it,
and prints the next two commands. Exit 0 written, 2 nothing written.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from jigcmd.command.bindingfile import ScriptResult, is_script, load_binding, project_root
from jigcmd.command.bunposture import posture_notes
from jigcmd.command.projectdir import CandidateError, read_project
from jigcmd.command.scaffold import Scaffold, ScaffoldError, plan_scaffold
from jigcmd.command.scaffoldfiles import write_scaffold
from jigcmd.command.testcalls import only_note, spawn_note
from jigcmd.command.testscript import scripts_test_note
from jigcmd.policy.binding import BindingError
from jigcmd.policy.bindingscript import Evaluated
from jigcmd.policy.candidate import Problem
from jigcmd.policy.digests import sha256_text
from jigcmd.protocol.inert import one_line

__all__ = ["BINDING_DIR", "init"]

# Where the Binding goes inside the project: `.jig` is reserved, never part of a candidate.
BINDING_DIR = ".jig"


def init(
    directory: Path,
    *,
    name: str | None = None,
    excludes: Sequence[str] = (),
    binding_format: str = "toml",
) -> int:
    """Write the Binding for `directory`; print what it holds and the next two commands."""
    root = directory.absolute()
    try:
        project = read_project(root, excludes)
        scaffold = plan_scaffold(project, name)
    except (CandidateError, ScaffoldError) as exc:
        return _fail(str(exc))
    tests = scaffold.tests()
    said = [
        project.note(),
        project.snapshot_note(),
        only_note(project.files, tests),
        scripts_test_note(project.files) if tests else None,
        *scaffold.notes,
        *posture_notes(project.files, scaffold.needed(), project.has_package, tests),
        spawn_note(project.files, project.files),
    ]
    notes = [note for note in said if note is not None]
    for line in notes:  # made inert: each names the candidate's files
        sys.stderr.write(one_line(f"jigcmd init: {root}: {line}") + "\n")
    problems = project.problems(scaffold.needed())
    if problems:
        return _refuse(root, problems)
    try:
        binding = write_scaffold(root / BINDING_DIR, scaffold, root, binding_format)
        # Exactly what `lock` reads next (a TypeScript Binding: what it yields once evaluated).
        load_binding(binding, _as_evaluated(binding, scaffold) if is_script(binding) else None)
    except ScaffoldError as exc:
        return _fail(str(exc))
    except BindingError as exc:  # a bug of ours: say so rather than leave a Binding behind
        return _fail(f"the Binding written to {binding} does not load: {exc}")
    print(_summary(binding, scaffold, root, excludes))
    return 0


def _as_evaluated(binding: Path, scaffold: Scaffold) -> ScriptResult:
    """What the TypeScript Binding written for `scaffold` yields (`lock` evaluates it for real)."""
    commands = {
        name: {"run": paths[0]} if kind == "run" else {"test": list(paths)}
        for name, (kind, paths) in scaffold.commands.items()
    }
    document = {"package": f"flows/{scaffold.name}", "commands": commands}
    return ScriptResult(
        evaluated=Evaluated(binding=document, jig=None),
        digest=sha256_text(binding.read_bytes()),
        root=project_root(binding),
    )


def _summary(binding: Path, scaffold: Scaffold, root: Path, excludes: Sequence[str]) -> str:
    count = len(scaffold.commands)
    lines = [f"jigcmd init: wrote {binding} with {count} reviewed command{'s' * (count != 1)}:"]
    # One column for what each runs, past the longest name (`legacy-cjs`).
    width = max([8, *map(len, scaffold.commands)])
    for command, (kind, paths) in scaffold.commands.items():
        shown = f"bun test {' '.join(paths)}" if kind == "test" else f"bun {paths[0]} ARGS…"
        lines.append(f"  {command:<{width}} {shown}")
    package = root / BINDING_DIR / "flows" / scaffold.name
    lines.append(
        f"and the Flow package {package} (FLOW.md and the contract's exact descriptor copy)."
    )
    # Inert: the paths are checked already, but the directory's name is anyone's.
    return "\n".join(map(one_line, lines + _next_steps(binding, scaffold, root, excludes)))


def _next_steps(
    binding: Path, scaffold: Scaffold, root: Path, excludes: Sequence[str]
) -> list[str]:
    """`lock`, then `run` for one command; for every part of a split suite, which `tests`
    alone would run only a part of."""
    tests = [command for command, (kind, _) in scaffold.commands.items() if kind == "test"]
    runs = tests if len(tests) > 1 else [next(iter(scaffold.commands))]
    exclude = "".join(f" --exclude {shlex.quote(glob)}" for glob in excludes)
    then = (
        f"run each against the project (the tests are split across {len(runs)} commands)"
        if len(runs) > 1
        else "run one against the project"
    )
    lines = [
        f"next: review the commands and admit them, then {then}:",
        f"  jigcmd lock --binding {shlex.quote(str(binding))}",
    ]
    return lines + [
        f"  jigcmd run --binding {shlex.quote(str(binding))} {command} "
        f"--files {shlex.quote(str(root))}{exclude}"
        for command in runs
    ]


def _fail(message: str) -> int:
    sys.stderr.write(one_line(f"jigcmd init: {message}; nothing written") + "\n")
    return 2


def _refuse(root: Path, problems: Sequence[Problem]) -> int:
    plural = "s" if len(problems) != 1 else ""
    lines = [f"  {one_line(problem.line())}" for problem in problems]
    head = f"jigcmd init: {root}: {len(problems)} problem{plural} with the candidate it sends"
    sys.stderr.write(f"{one_line(head)}; nothing written:\n" + "\n".join(lines) + "\n")
    return 2
