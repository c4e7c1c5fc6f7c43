"""The Kubernetes pod spec of docs/deployment.md, run by `podman kube play` as it is written.

The image is built locally from this checkout (`kubeimage.py`, no registry) and tagged with
the name the spec gives; the spec's Secret is a podman secret holding a fresh token, its
ConfigMap the example jarvis policy (`podman kube play --configmap`). Once the pod's jarvis
serves, `jigcmd demo` runs in the same container, and an authorized `jarvis.policy.check` and
`jarvis.run.create` of an allowed `echo` are sent to that jarvis from inside the pod. The
pod, the secret and the image are removed afterwards, however the test ended. Locally the
test skips without podman, runc or catatonit (naming the package); under `CI` that is a
failure.
"""

from __future__ import annotations

import base64
import json
import re
import resource
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import detect
from tests.container.kubeimage import ROOT, build_image
from tests.container.test_container import require_engine
from tests.optional import require_tools

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

DEPLOYMENT = ROOT / "docs" / "deployment.md"
SECONDS = 300.0
_FENCE = re.compile(r"```yaml\n(.*?)```", re.S)
# Above what a root without CAP_SYS_RESOURCE may grant, runc needs the clamp (see the doc).
_PODMAN_RLIMIT = 1 << 20


def pod_spec() -> str:
    """The docs' pod spec, exactly as written."""
    specs: list[str] = [b for b in _FENCE.findall(DEPLOYMENT.read_text()) if "kind: Pod" in b]
    (spec,) = specs
    return spec


def policy_configmap(name: str) -> str:
    """The example jarvis policy as the ConfigMap `name` the spec mounts."""
    policy = (ROOT / "jigcmd" / "jarvis" / "example-policy.toml").read_text()
    body = "".join(f"    {line}\n" if line else "\n" for line in policy.splitlines())
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n"
        f"data:\n  policy.toml: |\n{body}"
    )


def _field(spec: str, pattern: str) -> str:
    found = re.search(pattern, spec)
    assert found, pattern
    return found.group(1)


def _runtime(tmp: Path) -> list[str]:
    """podman's global options: runc on a hybrid host, through the clamp when needed."""
    runtime: list[str] = []
    if detect().mode != "v2":
        runtime = ["--runtime", "/usr/sbin/runc"]
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < _PODMAN_RLIMIT:
        shim = tmp / "jigcmd-runc-clamp"
        clamp = Path(__file__).with_name("runc_clamp.py")
        runc = runtime[1] if runtime else "/usr/sbin/runc"
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} {clamp} {runc} "$@"\n')
        shim.chmod(0o755)
        runtime = ["--runtime", str(shim)]
    return runtime


def _podman(podman: list[str], *args: str, check: bool = True) -> str:
    done = subprocess.run(
        [*podman, *args], capture_output=True, text=True, timeout=SECONDS, check=False
    )
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[tuple[list[str], str, str]]:
    """The spec played: (podman, the jigcmd container's name, the token); all removed after."""
    # Before anything is created: a teardown never runs a tool that is not there.
    require_engine()
    require_tools("catatonit", what="podman kube play (the pod's pause process)")
    spec = pod_spec()
    podman = ["podman", *_runtime(tmp_path)]
    image = _field(spec, r"image: (\S+)")
    secret = _field(spec, r"secretKeyRef: \{name: ([\w-]+)")
    pod_name = _field(spec, r"metadata: \{name: ([\w-]+)\}")
    container = f"{pod_name}-{_field(spec, r'- name: ([a-z-]+)')}"
    spec_file = tmp_path / "pod.yaml"
    spec_file.write_text(spec)
    configmap = tmp_path / "configmap.yaml"
    configmap_name = _field(spec, r"configMap: \{name: ([\w-]+)\}")
    configmap.write_text(policy_configmap(configmap_name))
    token = f"jv_kube-{secrets.token_hex(12)}"
    try:
        build_image(["podman"], image)
        data = base64.b64encode(token.encode()).decode()
        subprocess.run(
            ["podman", "secret", "create", secret, "-"],
            input=f'{{"token": "{data}"}}',
            text=True,
            capture_output=True,
            check=True,
            timeout=SECONDS,
        )
        _podman(podman, "kube", "play", "--configmap", str(configmap), str(spec_file))
        yield podman, container, token
    finally:
        _podman(
            podman,
            "kube",
            "play",
            "--down",
            "--configmap",
            str(configmap),
            str(spec_file),
            check=False,
        )
        _podman(["podman"], "secret", "rm", secret, check=False)
        # `kube play` keeps a ConfigMap's volume after `--down`.
        _podman(["podman"], "volume", "rm", "-f", configmap_name, check=False)
        _podman(["podman"], "rmi", "-f", image, check=False)


def _serving(podman: list[str], container: str) -> str:
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        logs = subprocess.run(
            [*podman, "logs", container], capture_output=True, text=True, check=False
        )
        said = logs.stdout + logs.stderr
        if "jigcmd jarvis: serving http://127.0.0.1:7777/utcp" in said:
            return said
        state = _podman(podman, "inspect", container, "--format", "{{.State.Status}}")
        assert state.strip() == "running", f"the pod's jarvis is {state.strip()}: {said}"
        time.sleep(0.5)
    raise AssertionError(f"the pod's jarvis did not serve within {SECONDS} s")


_CALL = """
import json, sys, urllib.request
tool, argv = sys.argv[2], json.loads(sys.argv[3])
request = urllib.request.Request(
    "http://127.0.0.1:7777/tools/" + tool,
    data=json.dumps({"tool": tool, "args": {"argv": argv}}).encode(),
    headers={"Authorization": "Bearer " + sys.argv[1], "Content-Type": "application/json"},
)
with urllib.request.urlopen(request, timeout=60) as answer:
    print(answer.status, answer.read().decode())
"""


def test_the_documented_pod_spec_runs_jarvis_and_the_demo_passes_inside(
    pod: tuple[list[str], str, str],
) -> None:
    """`podman kube play` of the docs' spec: jarvis serves, the demo passes in its container."""
    podman, container, token = pod
    logs = _serving(podman, container)
    assert "Traceback" not in logs, logs
    demo = _podman(podman, "exec", container, "jigcmd", "demo")
    assert "demo: every step behaved as expected." in demo, demo[-3000:]
    answer = _podman(
        podman, "exec", container, "python", "-c", _CALL, token, "jarvis.policy.check",
        '["git", "status"]',
    )  # fmt: skip
    status, _, body = answer.partition(" ")
    assert status == "200", answer
    assert '"decision":' in body, body
    # A run, not only a decision: the pod's /etc holds mounts, the policy's host_dirs none.
    answer = _podman(
        podman, "exec", container, "python", "-c", _CALL, token, "jarvis.run.create",
        '["echo", "hello"]',
    )  # fmt: skip
    status, _, body = answer.partition(" ")
    assert status == "200", answer
    run = json.loads(body)
    assert (run["status"], run["exit_code"]) == ("exited", 0), run
    assert run["stdout"]["text"] == "hello\n", run
