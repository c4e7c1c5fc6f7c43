"""Every front refuses at start, naming the cause and its fix, what would fail every call.

No user namespaces for the user, a cgroup base the process could not move a candidate into:
serve, run and jarvis stop before anything starts (never serving calls that each fail), and
the doctor's lines say the same.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups
from tests.rootless.rig import UNDELEGATED_USER, USER, Rootless, remove_tree

pytestmark = [pytest.mark.envelope, pytest.mark.slow]


@pytest.fixture
def policy() -> Iterator[Path]:
    """A jarvis policy the test user can read."""
    path = Path("/tmp") / f"jigcmd-rootless-policy-{secrets.token_hex(4)}.toml"
    path.write_text(
        '[[rule]]\nname = "true"\ndecision = "allow"\nargv0 = ["/bin/true"]\n', encoding="utf-8"
    )
    path.chmod(0o644)
    yield path
    path.unlink()


def _fronts(
    rootless: Rootless, example: Path, policy: Path, user: str = USER
) -> dict[str, subprocess.CompletedProcess[str]]:
    """serve (a Run/1 peer that sent nothing yet), run and jarvis, each started once."""
    binding = str(example / "binding.toml")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = {"JARVIS_BEARER_TOKEN": "jv_" + secrets.token_hex(16)}
    return {
        "serve": rootless.run("serve", "--binding", binding, input="", user=user),
        "run": rootless.run(
            "run",
            "--binding",
            binding,
            "tests",
            "--files",
            str(example / "candidates" / "passing"),
            user=user,
        ),
        "jarvis": rootless.run(
            "jarvis",
            "--policy",
            str(policy),
            "--port",
            str(port),
            env=token,
            timeout=60,
            user=user,
        ),
    }


_USERNS_SYSCTLS = {
    "kernel/unprivileged_userns_clone": (
        "kernel.unprivileged_userns_clone = 0 (Debian) forbids them to non-root",
        "sysctl -w kernel.unprivileged_userns_clone=1",
    ),
    "user/max_user_namespaces": (
        "user.max_user_namespaces = 0 allows no user namespace at all",
        "sysctl -w user.max_user_namespaces=15000",
    ),
}


@pytest.fixture(params=sorted(_USERNS_SYSCTLS))
def no_userns(request: pytest.FixtureRequest, example: Path) -> Iterator[tuple[str, str]]:
    """A sysctl set to 0 that refuses the user namespaces (the VM's only); restored after."""
    if os.environ.get("JIGCMD_IN_V2VM") != "1":
        # A kernel setting is the whole machine's: never changed on a host running the suite.
        pytest.skip("changes a kernel sysctl: only inside the cgroup v2 VM (tests/v2vm)")
    path = Path("/proc/sys") / request.param
    if not path.exists():
        pytest.skip(f"this kernel has no {path}")
    before = path.read_text(encoding="ascii")
    path.write_text("0\n", encoding="ascii")
    try:
        yield _USERNS_SYSCTLS[request.param]
    finally:
        path.write_text(before, encoding="ascii")


def test_without_user_namespaces_every_front_refuses_at_start_with_the_doctors_words(
    rootless: Rootless, example: Path, policy: Path, no_userns: tuple[str, str]
) -> None:
    """The sysctl and its fix, as `jigcmd doctor` words them, from serve, run and jarvis,
    each stopping at start; never "unshare: Operation not permitted" at every call."""
    why, fix = no_userns
    for verb, done in _fronts(rootless, example, policy).items():
        said = done.stdout + done.stderr
        assert done.returncode in (2, 3), (verb, said)
        assert "EXECUTION_FAILED" not in said, (verb, said)
        assert "running without root needs user namespaces" in said, (verb, said)
        assert why in said and fix in said, (verb, said)
        assert "EXECUTION_FAILED" not in said, (verb, said)
    doctor = rootless.run("doctor")
    assert "FAIL  user namespaces" in doctor.stdout and why in doctor.stdout, doctor.stdout


@pytest.fixture
def owned_base(rootless: Rootless) -> Iterator[Path]:
    """A fresh cgroup2 directory the test user owns, memory, pids and cpu offered (v2)."""
    if cgroups.detect().mode != "v2":
        pytest.skip("an explicit cgroup2 base directory is pure v2's (the cgroup v2 VM)")
    path = Path(f"/sys/fs/cgroup/jigcmd-base-u{rootless.uid}-{secrets.token_hex(4)}")
    path.mkdir()
    try:
        subprocess.run(["chown", "-R", str(rootless.uid), str(path)], check=True)
        yield path
    finally:
        remove_tree(str(path))


def test_a_base_outside_this_processs_delegated_subtree_is_refused_at_start(
    rootless: Rootless, example: Path, policy: Path, owned_base: Path
) -> None:
    """The user's own base, jigcmd started in a root-owned cgroup: the doctor's delegation
    line and every front name the real cgroup, the base and the fix, never "join cgroup"."""
    outside = dataclasses.replace(rootless, prelude="", cgroup_base=str(owned_base))
    here = (
        "/sys/fs/cgroup"
        + Path("/proc/self/cgroup").read_text(encoding="ascii").split("0::", 1)[1].strip()
    ).rstrip("/")
    reason = f"this process's cgroup {here} is outside the cgroup base {owned_base}"
    doctor = outside.run("doctor")
    lines = doctor.stdout.splitlines()
    (line,) = [i for i, text in enumerate(lines) if text[6:].startswith("delegation ")]
    assert lines[line].startswith("FAIL  delegation"), doctor.stdout
    assert reason in lines[line] and "$JIGCMD_CGROUP_BASE" in lines[line], lines[line]
    assert "systemd-run --user --scope -p Delegate=yes" in lines[line + 1], doctor.stdout
    for verb, done in _fronts(outside, example, policy).items():
        said = done.stdout + done.stderr
        assert done.returncode in (2, 3), (verb, said)
        assert "EXECUTION_FAILED" not in said, (verb, said)
        assert reason in said, (verb, said)
        assert f"Delegate=yes jigcmd {verb} …" in said, (verb, said)
        assert "cannot write '0'" not in said, (verb, said)


def test_a_root_owned_base_is_named_with_the_option_that_chose_it(
    rootless: Rootless, owned_base: Path
) -> None:
    """`--cgroup-base` naming a directory root owns: the delegation line blames that base and
    the option, not "this process's cgroup" (the process's own may be delegated)."""
    subprocess.run(["chown", "-R", "0", str(owned_base)], check=True)
    done = rootless.run("doctor", "--cgroup-base", str(owned_base))
    (line,) = [text for text in done.stdout.splitlines() if text[6:].startswith("delegation ")]
    assert line.startswith("FAIL  delegation"), done.stdout
    assert f"the cgroup base {owned_base} (--cgroup-base; owned by uid 0)" in line, line
    assert "this process's cgroup" not in line, line


def test_an_undelegated_users_refusal_names_the_verb_that_ran(
    rootless: Rootless, example: Path, policy: Path
) -> None:
    """run and jarvis, refused for want of a delegated cgroup, say to start themselves in
    one (`systemd-run … jigcmd run …`), not `jigcmd serve`; without systemd (the VM), the
    cgroupfs steps ending in `exec jigcmd run …`, never a systemd-run that is not there."""
    if cgroups.detect().mode != "v2":
        pytest.skip("a delegated cgroup of one's own is how pure cgroup v2 hosts delegate")
    systemd = os.path.isdir("/run/systemd/system")
    for verb, done in _fronts(rootless, example, policy, user=UNDELEGATED_USER).items():
        said = done.stdout + done.stderr
        assert done.returncode in (2, 3), (verb, said)
        assert "EXECUTION_FAILED" not in said, (verb, said)
        assert "is not delegated to you" in said, (verb, said)
        if systemd:
            assert f"-p Delegate=yes jigcmd {verb} …`" in said, (verb, said)
        else:
            assert "systemd-run" not in said, (verb, said)
            assert "echo +memory +pids +cpu > /sys/fs/cgroup/cgroup.subtree_control" in said
            assert f"from that shell, `exec jigcmd {verb} …`" in said, (verb, said)


@pytest.fixture
def own_cgroup(rootless: Rootless) -> Iterator[Path]:
    """A fresh cgroup2 directory for the test user's own cgroup, root's until a test chowns it."""
    if cgroups.detect().mode != "v2":
        pytest.skip("a delegated cgroup of one's own is how pure cgroup v2 hosts delegate")
    path = Path(f"/sys/fs/cgroup/jigcmd-own-u{rootless.uid}-{secrets.token_hex(4)}")
    path.mkdir()
    try:
        yield path
    finally:
        remove_tree(str(path))


def _refused_everywhere(
    started: Rootless, example: Path, policy: Path, *words: str
) -> subprocess.CompletedProcess[str]:
    """serve, run and jarvis each refuse at start with `words`, no traceback; the doctor's
    run is returned."""
    for verb, done in _fronts(started, example, policy).items():
        said = done.stdout + done.stderr
        assert done.returncode in (2, 3), (verb, said)
        assert "Traceback" not in said and "EXECUTION_FAILED" not in said, (verb, said)
        for word in words:
            assert word in said, (verb, word, said)
    return started.run("doctor")


def test_an_own_cgroup_chowned_without_r_is_refused_at_start_naming_cgroup_procs(
    rootless: Rootless, example: Path, policy: Path, own_cgroup: Path
) -> None:
    """The directory chowned, its cgroup.procs left root's: the doctor's delegation line fails
    (it said ok) and every front refuses with `chown -R` (they printed a PermissionError)."""
    subprocess.run(["chown", str(rootless.uid), str(own_cgroup)], check=True)
    started = dataclasses.replace(rootless, prelude=f"echo $$ > {own_cgroup}/cgroup.procs &&")
    fix = f"chown -R {rootless.uid} {own_cgroup}"
    doctor = _refused_everywhere(started, example, policy, "chowned without -R", fix)
    lines = doctor.stdout.splitlines()
    (at,) = [i for i, text in enumerate(lines) if text[6:].startswith("delegation ")]
    assert lines[at].startswith("FAIL  delegation"), doctor.stdout
    assert "cgroup.procs" in lines[at] and fix in lines[at + 1], doctor.stdout


def test_an_own_cgroup_on_a_read_only_cgroup2_mount_is_named_read_only(
    rootless: Rootless, example: Path, policy: Path, own_cgroup: Path
) -> None:
    """Delegated (chown -R), then the cgroup2 mount bound read-only: every front and the
    doctor name the read-only mount, never "(owned by uid N) is not delegated to uid N"."""
    subprocess.run(["chown", "-R", str(rootless.uid), str(own_cgroup)], check=True)
    # jigcmd started by the same process, in a mount namespace where cgroup2 is read-only.
    remount = 'mount -o remount,bind,ro /sys/fs/cgroup && "$@"'
    started = dataclasses.replace(
        rootless,
        prelude=f"echo $$ > {own_cgroup}/cgroup.procs && exec unshare -m --propagation private "
        f"sh -c '{remount}' sh",
    )
    reason = f"the cgroup mount holding {own_cgroup} is read-only"
    doctor = _refused_everywhere(started, example, policy, reason, "remount,rw")
    (line,) = [text for text in doctor.stdout.splitlines() if text[6:].startswith("delegation ")]
    assert line.startswith("FAIL  delegation") and reason in line, doctor.stdout
    assert "is not delegated" not in doctor.stdout, doctor.stdout
