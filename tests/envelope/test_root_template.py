"""The template root: made once per shape in the zygote's namespace, read-only, bound per run."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.envelope import rootfs, staging
from jigcmd.envelope.native import NativeExecutor
from jigcmd.plan import Limits, RunPlan
from jigcmd.policy.planner import candidate_plan
from tests.envelope.hostile_harness import probe_plan
from tests.envelope.standin import in_stand_in
from tests.required import require_root

pytestmark = pytest.mark.envelope

_LIMIT = "268435456\n"


def _template_facts(root: str) -> dict[str, object]:
    """What a template holds, as a stand-in zygote sees it."""
    try:
        os.mkdir(root + "/added")
        refused = ""
    except OSError as exc:
        refused = exc.strerror or str(exc)
    with open(root + "/sys/fs/cgroup/memory/memory.limit_in_bytes", encoding="ascii") as view:
        limit = view.read()
    return {
        "read_only": bool(os.statvfs(root).f_flag & os.ST_RDONLY),
        "refused": refused,
        "runtime_read_only": bool(os.statvfs(root + BUN_TARGET).f_flag & os.ST_RDONLY),
        "null_is_a_device": stat.S_ISCHR(os.stat(root + "/dev/null").st_mode),
        "limit": limit,
        "mount_points": [os.path.isdir(root + name) for name in ("/tmp", "/work", "/proc")],
        "etc": sorted(os.listdir(root + "/etc")),
    }


def test_a_shape_gets_one_read_only_template_and_the_host_profile_none(tmp_path: Path) -> None:
    """One template per binds and memory limit, reused; read-only; none for a host plan."""
    require_root()
    plan = probe_plan("")

    def body(report_w: int) -> None:
        without = rootfs.template(plan, _LIMIT)
        staging.enter(str(tmp_path / "staging"))
        staging.stage(plan.binds)
        first = rootfs.template(plan, _LIMIT)
        assert first is not None
        other = rootfs.template(plan, "134217728\n")
        host = rootfs.template(plan._replace(profile="host"), _LIMIT)
        with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
            mounted_here = any(f" {first} " in line for line in mountinfo)
        report = {
            "without_staging": without,
            "again": rootfs.template(plan, _LIMIT) == first,
            "other": other is not None and other != first,
            "host": host,
            "facts": _template_facts(first),
            "mounted_here": mounted_here,
            "first": first,
        }
        os.write(report_w, json.dumps(report).encode())

    report = json.loads(in_stand_in(body))
    assert report["without_staging"] is None
    assert report["again"] is True and report["other"] is True
    assert report["host"] is None
    assert report["facts"] == {
        "read_only": True,
        "refused": "Read-only file system",
        "runtime_read_only": True,
        "null_is_a_device": True,
        "limit": _LIMIT,
        "mount_points": [True, True, True],
        # jigcmd's own files (etcfiles.py; their content: tests/test_cli_run_etc.py).
        "etc": ["group", "hosts", "nsswitch.conf", "passwd", "resolv.conf"],
    }
    # The stand-in's own mount namespace holds it; the test's (the host's) never did.
    assert report["mounted_here"] is True
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        assert not any(f" {report['first']} " in line for line in mountinfo)


@pytest.fixture
async def executor() -> AsyncIterator[NativeExecutor]:
    require_root()
    native = NativeExecutor()
    native.stage_at_start(find_runtime().binds)
    await native.start()
    try:
        yield native
    finally:
        await native.aclose()


def _limit_plan(memory_bytes: int) -> RunPlan:
    """A plan whose candidate prints the memory limit it is shown, and whether / is writable."""
    source = (
        'import { readFileSync, writeFileSync } from "node:fs";\n'
        'let root = "writable";\n'
        'try { writeFileSync("/added", "x"); } catch (e) { root = String(e.code); }\n'
        'const limit = readFileSync("/sys/fs/cgroup/memory/memory.limit_in_bytes", "utf8");\n'
        "console.log(limit.trim(), root);\n"
    )
    plan = candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=find_runtime().binds,
        kind="run",
        paths=("main.ts",),
        args=(),
        files=(("main.ts", source),),
        stdin="",
        deadline=time.monotonic() + 20,
    )
    return plan._replace(limits=Limits(memory_bytes=memory_bytes))


async def test_each_shape_sees_its_own_limit_and_a_replaced_template_is_made_again(
    executor: NativeExecutor,
) -> None:
    """Six shapes through four template slots, then the first again: each run its own view."""
    mib = 1024 * 1024
    sizes = [256, 192, 160, 144, 136, 128, 256]
    seen = []
    for size in sizes:
        outcome = await executor.execute(_limit_plan(size * mib), CancelSignal())
        assert outcome.exit_code == 0, outcome.stderr.data
        seen.append(outcome.stdout.data.decode().split())
    assert seen == [[str(size * mib), "EROFS"] for size in sizes]
