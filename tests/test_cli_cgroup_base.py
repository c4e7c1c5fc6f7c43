"""An operator's cgroup base through the real command line: `$JIGCMD_CGROUP_BASE` is
`--cgroup-base`, and a base that cannot be one on this host is refused at start, naming
where it came from, never replaced by the default; the doctor leaves no cgroup behind."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from jigcmd.envelope import cgroups
from jigcmd.envelope.cgroups.v1 import V1Backend
from jigcmd.envelope.cgroups.v2 import V2Backend
from tests.admitted_example import admit_example
from tests.required import require_root, require_runtime, unavailable, usable_cgroups
from tests.rootless.rig import remove_tree


def _not_a_base() -> str:
    """A value that cannot be a base on this host (the tester's, on a hybrid one)."""
    try:
        mode = cgroups.detect().mode
    except (OSError, ValueError) as exc:
        unavailable(f"no cgroup hierarchy to name a base in: {exc}")
    # v1 and hybrid: one absolute path names one hierarchy; v2: outside the cgroup2 mount.
    return "/tmp/jigcmd-not-a-cgroup" if mode == "v2" else "/sys/fs/cgroup/unified/jigcmd-u1001"


@pytest.mark.parametrize("given", ["$JIGCMD_CGROUP_BASE", "--cgroup-base"])
def test_a_base_that_cannot_be_one_is_refused_by_run_and_serve_at_start(
    tmp_path: Path, given: str
) -> None:
    """Both fronts exit before anything runs, with the reason and the source named."""
    binding = admit_example(tmp_path)
    bad = _not_a_base()
    environ = {k: v for k, v in os.environ.items() if k != "JIGCMD_CGROUP_BASE"}
    option: list[str] = ["--cgroup-base", bad]
    if given == "$JIGCMD_CGROUP_BASE":
        environ["JIGCMD_CGROUP_BASE"], option = bad, []
    common = ["--binding", str(binding), "--state-dir", str(tmp_path / "state"), *option]
    candidate = binding.parent / "candidates" / "passing"
    for argv in (["run", *common, "tests", "--files", str(candidate)], ["serve", *common]):
        done = subprocess.run(
            [sys.executable, "-m", "jigcmd", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=environ,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode in (2, 3), done.stdout + done.stderr
        assert f": the cgroup base {bad!r} ({given}) is " in done.stderr, done.stderr
        assert "ended:" not in done.stdout
        # Judged before the state directory is made: a refused start leaves nothing behind.
        assert not (tmp_path / "state").exists()


def _jigcmd(*argv: str, base: str | None = None, cwd: Path | None = None) -> CompletedProcess[str]:
    """`python -m jigcmd argv…` with `$JIGCMD_CGROUP_BASE` set to `base` (unset for None)."""
    environ = {k: v for k, v in os.environ.items() if k != "JIGCMD_CGROUP_BASE"}
    if base is not None:
        environ["JIGCMD_CGROUP_BASE"] = base
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_an_empty_cgroup_base_option_is_refused_not_read_as_the_default(tmp_path: Path) -> None:
    """`--cgroup-base "$UNSET"`: status 2 saying so, as every empty path option is."""
    binding = admit_example(tmp_path)
    candidate = binding.parent / "candidates" / "passing"
    done = _jigcmd(
        "run", "--binding", str(binding), "--cgroup-base", "", "tests", "--files", str(candidate)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "argument --cgroup-base: an empty cgroup base" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "base", [" ", ".", "/", "a/../b", "jigcmdx$(id>pwned)'", "cgroup.procs", "jigcmdx/tasks"]
)
def test_the_doctor_refuses_an_odd_base_and_makes_nothing_for_it(tmp_path: Path, base: str) -> None:
    """Root's doctor: FAIL, the base in no command text, no cgroup made for it."""
    require_root("root's doctor judges (and would make) the base")
    backend = usable_cgroups()
    before = _top_level_cgroups(backend)
    done = _jigcmd("doctor", base=base, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "FAIL  cgroups            the cgroup base" in done.stdout, done.stdout
    # The base shows only as the refusal's quoted value: no command text carries it.
    assert "id>pwned" not in done.stdout.replace(repr(base), ""), done.stdout
    assert not (tmp_path / "pwned").exists()
    assert _top_level_cgroups(backend) == before


@pytest.mark.parametrize("below", ["", "/a/b"])
def test_the_doctors_probe_run_leaves_no_base_it_made(tmp_path: Path, below: str) -> None:
    """A base that did not exist (nested too, judged writable at the hierarchy it is made in):
    the end-to-end line makes it for its run, then removes it."""
    require_root("root's doctor makes its base")
    backend = usable_cgroups()
    require_runtime()
    top = f"jigcmd-doctor-{secrets.token_hex(4)}"
    try:
        done = _jigcmd("doctor", "--cgroup-base", top + below, cwd=tmp_path)
        assert "ok    end-to-end" in done.stdout, done.stdout
        assert "FAIL" not in done.stdout, done.stdout
        assert [d for d in _top_level_cgroups(backend) if top in d] == []
    finally:
        _remove_top(backend, top)


def test_roots_run_makes_a_missing_nested_base(tmp_path: Path) -> None:
    """Root makes its base however deep: a run in `jigcmd-…/a/b`, none of it there, passes."""
    require_root("root makes its base")
    backend = usable_cgroups()
    require_runtime()
    binding = admit_example(tmp_path)
    candidate = binding.parent / "candidates" / "passing"
    top = f"jigcmd-nested-{secrets.token_hex(4)}"
    state = ["--state-dir", str(tmp_path / "state")]
    try:
        done = _jigcmd(
            "run", "--binding", str(binding), *state, "tests", "--files", str(candidate),
            base=f"{top}/a/b",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        _remove_top(backend, top)


def _remove_top(backend: cgroups.CgroupBackend, top: str) -> None:
    for directory in _top_level_cgroups(backend):
        if directory.endswith("/" + top):
            remove_tree(directory)


def _top_level_cgroups(backend: cgroups.CgroupBackend) -> set[str]:
    """The directories directly in each hierarchy's root."""
    if isinstance(backend, V2Backend):
        roots = [backend.mount]
    else:
        assert isinstance(backend, V1Backend)
        roots = [*backend.hierarchies.values(), *([backend.unified] if backend.unified else [])]
    return {
        os.path.join(root, entry.name)
        for root in roots
        for entry in os.scandir(root)
        if entry.is_dir()
    }
