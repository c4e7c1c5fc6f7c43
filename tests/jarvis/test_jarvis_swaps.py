"""A symlink swapped in between the policy check and the run: what runs is what was checked.

Envelope-marked, in the real envelope. The swap is made at a fixed point, deterministically:
by an executor that the service calls after it evaluated the request, which swaps, then
hands the plan to the real `NativeExecutor`. Directories live under /var/tmp in
`jigcmd-test-*` directories removed afterwards (see test_jarvis_envelope.py).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.envelope.api import RunOutcome
from jigcmd.envelope.native import NativeExecutor
from jigcmd.plan import RunPlan
from tests.jarvis.jarvis_harness import harness, make_service

pytestmark = pytest.mark.envelope

# What the policy resolves `cat` to (on merged-/usr hosts /usr/bin/cat itself).
CAT = os.path.realpath("/usr/bin/cat")
# And `sh` (dash on Debian): named by `argv[0]` as found on the search path, not resolved.
SH = os.path.realpath("/usr/bin/sh")


@pytest.fixture
def workdir() -> Iterator[Path]:
    """`allowed/` (the rule's cwd) and `outside/`, each holding a `which.txt` saying which."""
    path = Path("/var/tmp") / f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    for name in ("allowed", "outside"):
        (path / name).mkdir(parents=True)
        (path / name / "which.txt").write_text(f"{name}\n")
    (path / "allowed" / "dir").mkdir()
    (path / "allowed" / "dir" / "which.txt").write_text("allowed\n")
    for sub in (path, *path.rglob("*")):
        sub.chmod(0o777 if sub.is_dir() else 0o666)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def policy_for(workdir: Path) -> str:
    return f"""
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "read-allowed"
decision = "allow"
argv0 = ["cat", "sh", "{workdir}/allowed/cat", "{workdir}/allowed/tools/tool"]
cwd = ["{workdir}/allowed"]
"""


class SwapAfterCheck:
    """The real executor, with `swap` run once the service decided and planned the run."""

    def __init__(self, executor: NativeExecutor, swap: Callable[[], None]) -> None:
        self.executor = executor
        self.swap = swap

    async def execute(
        self, plan: RunPlan, cancel: CancelSignal, ticket: object = None, hooks: object = None
    ) -> RunOutcome:
        """Swap, then run `plan` for real."""
        self.swap()
        return await self.executor.execute(plan, cancel, ticket, hooks)  # type: ignore[arg-type]


def into_symlink(path: Path, target: Path) -> Callable[[], None]:
    """A swap that moves the directory at `path` aside and puts a symlink to `target` there."""

    def swap() -> None:
        path.rename(path.with_name(path.name + ".aside"))
        path.symlink_to(target)

    return swap


async def test_a_cwd_swapped_for_a_symlink_after_the_check_runs_nothing(
    executor: NativeExecutor, workdir: Path
) -> None:
    """`allowed/dir` becomes a link to `outside/`: the run fails naming why; nothing is read."""
    cwd = workdir / "allowed" / "dir"
    swapping = SwapAfterCheck(executor, into_symlink(cwd, workdir / "outside"))
    async with harness(make_service(swapping, policy=policy_for(workdir))) as h:
        response = await h.invoke("jarvis.run.create", argv=["cat", "which.txt"], cwd=str(cwd))
    body = response.json()
    assert (body["decision"], body["status"]) == ("allow", "failed"), body
    assert body["stdout"]["text"] == ""
    assert body["detail"] == (
        f"EXECUTION_FAILED: cwd changed after the policy check: {cwd} has a symlink in it now; "
        "nothing ran"
    )


async def test_a_program_link_retargeted_after_the_check_still_runs_the_matched_program(
    executor: NativeExecutor, workdir: Path
) -> None:
    """`allowed/cat → /usr/bin/cat` becomes `→ /usr/bin/id`: cat (what matched) runs."""
    link = workdir / "allowed" / "cat"
    link.symlink_to("/usr/bin/cat")

    def retarget() -> None:
        link.with_name("cat.new").symlink_to("/usr/bin/id")
        link.with_name("cat.new").replace(link)

    cwd = workdir / "allowed"
    service = make_service(SwapAfterCheck(executor, retarget), policy=policy_for(workdir))
    async with harness(service) as h:
        response = await h.invoke("jarvis.run.create", argv=[str(link), "which.txt"], cwd=str(cwd))
        rows = h.store.audit_rows(2)
    body = response.json()
    assert (body["status"], body["exit_code"]) == ("exited", 0), body
    assert body["stdout"]["text"] == "allowed\n"
    assert rows[-1].outcome == f"started run {body['run_id']} (executes {CAT} in {cwd})"


async def test_a_program_whose_resolved_path_gains_a_symlink_after_the_check_runs_nothing(
    executor: NativeExecutor, workdir: Path
) -> None:
    """`allowed/tools/tool` (a script) checked, then `tools` links to a twin: nothing runs.

    The twin sits in the cwd, so the envelope shows it: only the link stands in the way.
    """
    tools, elsewhere = workdir / "allowed" / "tools", workdir / "allowed" / "twin"
    for directory, says in ((tools, "checked"), (elsewhere, "swapped")):
        directory.mkdir()
        (directory / "tool").write_text(f"#!/bin/sh\necho {says}\n")
        (directory / "tool").chmod(0o755)
    cwd = workdir / "allowed"
    swapping = SwapAfterCheck(executor, into_symlink(tools, elsewhere))
    async with harness(make_service(swapping, policy=policy_for(workdir))) as h:
        response = await h.invoke("jarvis.run.create", argv=[str(tools / "tool")], cwd=str(cwd))
    body = response.json()
    assert (body["decision"], body["status"]) == ("allow", "failed"), body
    assert body["stdout"]["text"] == ""
    assert body["detail"] == (
        f"EXECUTION_FAILED: program changed after the policy check: {tools / 'tool'} has a "
        "symlink in it now; nothing ran"
    )


async def test_a_program_runs_by_its_descriptor_under_the_name_it_was_called_by(
    executor: NativeExecutor, workdir: Path
) -> None:
    """`sh` (a binary) runs through pid 1's descriptor: `$0` as named, the kernel's name the fd."""
    cwd = workdir / "allowed"
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        response = await h.invoke(
            "jarvis.run.create",
            argv=["sh", "-c", 'echo "$0"; cat /proc/$$/comm; readlink /proc/$$/exe'],
            cwd=str(cwd),
        )
    body = response.json()
    assert (body["status"], body["exit_code"]) == ("exited", 0), body
    name, comm, exe = body["stdout"]["text"].splitlines()
    assert name == "/usr/bin/sh"
    assert comm.isdigit()  # the exec named /proc/self/fd/N (see envelope/exact.py)
    assert exe == SH


async def test_a_script_runs_by_its_checked_path(executor: NativeExecutor, workdir: Path) -> None:
    """A `#!` script is executed by its path: its `$0` names the script, not a descriptor."""
    tool = workdir / "allowed" / "tools" / "tool"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\necho "$0"\n')
    tool.chmod(0o755)
    async with harness(make_service(executor, policy=policy_for(workdir))) as h:
        response = await h.invoke(
            "jarvis.run.create", argv=[str(tool)], cwd=str(workdir / "allowed")
        )
    body = response.json()
    assert (body["status"], body["exit_code"]) == ("exited", 0), body
    assert body["stdout"]["text"] == f"{tool}\n"
