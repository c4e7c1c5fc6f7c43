"""The documented pod's state volume, as Kubernetes makes an `emptyDir`: mode 0777.

podman's `kube play` makes it 0755, so `test_kube_play.py` cannot see this: the docs' pod
would be refused on real Kubernetes (a state directory others may write) unless its command
makes the volume's root 0700 before jigcmd starts. Its own shell prefix is run here against
a 0777 directory standing for the volume, without podman (so it lives outside
`tests/container/`, whose tests need podman and run with only the tools they name).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from jigcmd.durable.statedir import StateDirError, prepare_state_dir
from tests.container.test_kube_play import pod_spec


def _container() -> dict[str, Any]:
    (container,) = yaml.safe_load(pod_spec())["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def _state_mount() -> str:
    """The mount path of the pod's `emptyDir` volume."""
    volumes = yaml.safe_load(pod_spec())["spec"]["volumes"]
    (name,) = [volume["name"] for volume in volumes if "emptyDir" in volume]
    (path,) = [m["mountPath"] for m in _container()["volumeMounts"] if m["name"] == name]
    found: str = path
    return found


def test_the_documented_pod_makes_its_0777_emptydir_a_state_directory_jigcmd_accepts(
    tmp_path: Path,
) -> None:
    mount = _state_mount()
    shell, flag, script = _container()["command"]
    assert (shell, flag) == ("sh", "-c")
    before, exec_, jigcmd = script.partition("exec jigcmd ")
    assert exec_, script
    assert f"--state-dir {mount}" in jigcmd
    volume = tmp_path / "volume"
    volume.mkdir()
    volume.chmod(0o777)
    with pytest.raises(StateDirError, match="writable by group or others"):
        prepare_state_dir(volume)
    # What the command runs before jigcmd, on the stand-in for the volume.
    subprocess.run(
        ["sh", "-c", before.replace(mount, str(volume)) + "true"], check=True, timeout=60
    )
    assert prepare_state_dir(volume) == volume
