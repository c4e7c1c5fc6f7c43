"""jigcmd inside a podman container: the documented options give the complete envelope, and a
container that withholds any one of them is diagnosed by `jigcmd doctor` and runs nothing.

The container is built locally, with no registry: its root is an overlay of the host's own
root (`podman run --rootfs /:O`), so this checkout, its venv, Python and Bun sit at their host
paths, and the overlay's writes vanish with the container (which costs about a second to
start). Every container is named `jigcmd-test-…` and removed (`--rm`, and by name after a
failure). Locally the tests skip without podman; under `CI` that is a failure (`.ci/run`
installs podman and runc).
"""

from __future__ import annotations

import json
import resource
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from jigcmd.envelope.cgroups import detect
from jigcmd.frontends.diagnosis.container import recipe
from scripts.v2vm import ROOT
from tests.optional import require_tools
from tests.required import require_root

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

INSIDE = Path(__file__).with_name("inside.py")
SECONDS = 300.0


def require_engine() -> None:
    """Root and podman (with runc where crun cannot run), or the test is unavailable."""
    require_root()
    # crun refuses a hybrid host whose cgroup2 hierarchy has a controller ("cgroups in
    # hybrid mode not supported"); runc does not.
    tools = ("podman",) if detect().mode == "v2" else ("podman", "runc")
    require_tools(*tools, what="jigcmd in a container")


def engine() -> list[str]:
    """podman with the runtime that works here, or the test is unavailable."""
    require_engine()
    runtime = ["--runtime", "runc"] if shutil.which("runc") else []
    return ["podman", "run", *runtime]


def rlimits() -> list[str]:
    """Ulimits no higher than this process's: podman's defaults (a million files) exceed what
    a host without CAP_SYS_RESOURCE may grant, and raising a hard limit is then refused."""
    out = []
    # nproc stays low too: the runtime's parent may run with fewer (32768 here) than we do.
    for name, which, cap in (
        ("nofile", resource.RLIMIT_NOFILE, 1 << 16),
        ("nproc", resource.RLIMIT_NPROC, 1 << 14),
    ):
        hard = resource.getrlimit(which)[1]
        value = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
        out += ["--ulimit", f"{name}={value}:{value}"]
    return out


@pytest.fixture(scope="module")
def options() -> dict[str, list[str]]:
    """The documented options for this host's cgroup layout, piece by piece."""
    return recipe("podman", detect().mode)


@pytest.fixture
def container() -> Iterator[str]:
    """A fresh container name; the container is gone afterwards, however the test ended."""
    # Before the yield: a teardown must never run a podman that is not there.
    require_engine()
    name = f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    yield name
    subprocess.run(["podman", "rm", "-f", "-i", name], capture_output=True, check=False)


def run_in_container(name: str, options: Sequence[str], argv: Sequence[str]) -> str:
    """`argv` inside a container with `options` (the host's root as an overlay); its stdout."""
    done = subprocess.run(
        [
            *engine(), "--rm", "--name", name, "--network", "none", *rlimits(), *options,
            "--workdir", str(ROOT), "--env", "CI=true",
            "--rootfs", "/:O", *argv,
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"container exited {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout


def inside(name: str, options: Sequence[str]) -> dict[str, Any]:
    """Every front of jigcmd inside a container with `options` (see inside.py)."""
    stdout = run_in_container(name, options, [sys.executable, str(INSIDE), "/tmp/jigcmd-state"])
    found: dict[str, Any] = json.loads(stdout.splitlines()[-1])
    return found


def test_the_demo_passes_inside_a_container_with_the_documented_options(
    container: str, options: dict[str, list[str]]
) -> None:
    """`jigcmd demo` (MCP and FLOW Run/1 through a real serve child) behaves as expected."""
    every = [arg for piece in options.values() for arg in piece]
    # The demo's server uses the default state directory: the container's own, empty one.
    stdout = run_in_container(
        container,
        [*every, "--tmpfs", "/var/lib/jigcmd:notmpcopyup"],
        [sys.executable, "-m", "jigcmd", "demo"],
    )
    assert "demo: every step behaved as expected." in stdout, stdout[-3000:]


def dropped_all() -> dict[str, list[str]]:
    """After `--cap-drop ALL` (Kubernetes `drop: [ALL]`), every capability the envelope uses
    is added back, the engine's default CAP_SETUID and CAP_SETGID with the rest."""
    return {"no default capabilities": ["--cap-drop", "ALL"]} | recipe(
        "podman", detect().mode, dropped_all=True
    )


@pytest.mark.parametrize("capabilities", ["the engine's default", "--cap-drop ALL"])
def test_with_the_documented_options_every_check_and_every_front_passes(
    container: str, options: dict[str, list[str]], capabilities: str
) -> None:
    """doctor passes and names the container complete; run and serve run the candidate."""
    given = options if capabilities == "the engine's default" else dropped_all()
    every = [arg for piece in given.values() for arg in piece]
    found = inside(container, every)
    checks = found["doctor"]["checks"]
    assert found["doctor"]["status"] == 0, [c for c in checks.values() if not c["ok"]]
    assert checks["container"]["detail"] == "podman container with every piece the envelope needs"
    assert found["run"]["status"] == 0, found["run"]["stderr"]
    assert "result" in found["serve"], found["serve"]
    assert found["ran"]


def test_jarvis_runs_an_allowed_command_and_refuses_host_dirs_holding_the_containers_mounts(
    container: str, options: dict[str, list[str]]
) -> None:
    """The example policy's `echo hello` exits 0; the default host_dirs (with the container's
    /etc, which holds /etc/hostname) make jarvis refuse to start, naming the mount and fix."""
    every = [arg for piece in options.values() for arg in piece]
    found = inside(container, every)["jarvis"]
    example = found["example"].get("answer")
    assert example is not None, found["example"]
    assert (example["status"], example["exit_code"]) == ("exited", 0), example
    assert example["stdout"]["text"] == "hello\n", example
    default = found["default"]
    assert (default["served"], default["status"]) == (False, 2), default
    (line,) = default["stderr"].splitlines()
    assert "/etc holds a mount (/etc/h" in line, line
    assert 'host_dirs = ["/usr", "/bin", "/sbin", "/lib", "/lib64"]' in line, line


@pytest.mark.parametrize(
    "withheld",
    [
        "CAP_SYS_ADMIN",
        "CAP_NET_ADMIN",
        "unmasked /proc",
        "writable cgroups",
        # In the engine's default set: withheld by `--cap-drop ALL` without adding them back.
        "CAP_SETUID",
        "CAP_SETGID",
    ],
)
def test_a_container_without_one_piece_is_diagnosed_and_every_front_fails_closed(
    container: str, options: dict[str, list[str]], withheld: str
) -> None:
    """doctor names the piece and its exact option, and so do run's and serve's refusals;
    nothing ran."""
    if withheld in ("CAP_SETUID", "CAP_SETGID"):
        options = dropped_all()
    kept = {piece: args for piece, args in options.items() if not piece.startswith(withheld)}
    given = [arg for args in kept.values() for arg in args]
    (missing,) = [args for piece, args in options.items() if piece not in kept]
    found = inside(container, given)
    checks = found["doctor"]["checks"]
    check = checks["container"]
    option = shlex.join(missing)  # as a shell reads it: zsh globs an unquoted /proc/*
    assert found["doctor"]["status"] == 1
    assert check["status"] == "FAIL"
    assert withheld in check["detail"]
    assert option in check["detail"]
    assert option in check["hint"]
    # Exactly this piece: the others were given.
    for args in kept.values():
        assert shlex.join(args) not in check["detail"], check["detail"]
    assert found["run"]["status"] == 3, found["run"]
    refusals = {
        "run": found["run"]["stderr"] + found["run"]["stdout"],
        "serve": found["serve"]["error"]["message"],
        "end-to-end": checks["end-to-end"]["detail"],
    }
    for front, said in refusals.items():
        # The kernel's refusal (EPERM, EROFS) alone does not say what to change.
        assert f"withholds {withheld}" in said, (front, said)
        assert option in said, (front, said)
        assert "run as root" not in said, (front, said)  # the container's root is root
    jarvis_run = found["jarvis"]["example"].get("answer")
    if jarvis_run is not None:
        # A jarvis whose zygote started: the run fails closed with the same words.
        assert jarvis_run["status"] == "failed", jarvis_run
        assert f"withholds {withheld}" in jarvis_run["detail"], jarvis_run
        assert option in jarvis_run["detail"], jarvis_run
    assert "EXECUTION_FAILED" in refusals["run"]
    assert found["serve"]["error"]["data"]["code"] == "EXECUTION_FAILED", found["serve"]
    for name, line in checks.items():
        assert "run jigcmd as root" not in (line["hint"] or ""), (name, line)
    if withheld == "CAP_SYS_ADMIN":
        # unshare is what fails there: the network line must not blame NET_ADMIN, given.
        network = checks["network namespace"]["hint"]
        assert "--cap-add SYS_ADMIN" in network and "NET_ADMIN" not in network, network
    assert not found["ran"]


_OOM = """
import json, subprocess, sys
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
done = subprocess.run([sys.executable, "-m", "jigcmd", "doctor", "--json"],
                      capture_output=True, text=True, check=False)
checks = {c["check"]: c for c in json.loads(done.stdout)}
print(json.dumps({"cap_bnd": int(status["CapBnd"], 16), "oom": checks["oom score"]}))
"""


def test_cap_sys_resource_is_offered_only_where_the_bounding_set_can_hold_it(
    container: str, options: dict[str, list[str]]
) -> None:
    """With --cap-add SYS_RESOURCE the score is pinned, or (a host whose own bounding set
    lacks it, the runtime dropping it silently) the doctor says why the option cannot help."""
    every = [arg for piece in options.values() for arg in piece]
    stdout = run_in_container(
        container,
        [*every, "--cap-add", "SYS_RESOURCE", "--tmpfs", "/var/lib/jigcmd:notmpcopyup"],
        [sys.executable, "-c", _OOM],
    )
    found = json.loads(stdout.splitlines()[-1])
    oom = found["oom"]
    if found["cap_bnd"] >> 24 & 1:
        assert oom["status"] == "ok", oom
        return
    assert oom["status"] == "warn", oom
    assert "bounding set" in oom["detail"], oom
    assert "host's own bounding set lacks it" in oom["hint"], oom
