"""The host's paths are taken out of what a caller reads, whole path prefixes only."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.errors import Code, JigError
from jigcmd.server.hostpaths import HostPaths


def test_each_known_path_becomes_its_placeholder_longest_first(tmp_path: Path) -> None:
    home = tmp_path / "home" / "ada"
    state = home / ".local" / "state" / "jigcmd"
    paths = HostPaths({"~": home, "<state dir>": state})
    assert paths.scrub(f"all slots in use ({state}); see {home}/notes") == (
        "all slots in use (<state dir>); see ~/notes"
    )


def test_a_path_is_replaced_only_as_a_whole_prefix(tmp_path: Path) -> None:
    paths = HostPaths({"<state dir>": tmp_path / "state"})
    assert paths.scrub(f"{tmp_path}/state-old and {tmp_path}/state/slots") == (
        f"{tmp_path}/state-old and <state dir>/slots"
    )


def test_short_and_missing_paths_are_left_alone() -> None:
    paths = HostPaths({"<cwd>": "/", "~": None, "<tmp>": "/tmp"})
    assert paths.scrub("/tmp/x and /etc") == "/tmp/x and /etc"


def test_a_refusal_keeps_its_code_and_collected_evidence(tmp_path: Path) -> None:
    paths = HostPaths({"<state dir>": tmp_path})
    error = JigError(
        Code.RESOURCE_EXHAUSTED,
        f"no slot in {tmp_path}",
        {"path": str(tmp_path), "command": {"stdout": str(tmp_path)}, "n": 3},
        recorded=True,
    )
    scrubbed = paths.scrub_error(error)
    assert (scrubbed.code, scrubbed.recorded, scrubbed.message) == (
        Code.RESOURCE_EXHAUSTED,
        True,
        "no slot in <state dir>",
    )
    assert scrubbed.details == {"path": "<state dir>", "command": {"stdout": str(tmp_path)}, "n": 3}


def test_a_stopped_runs_statement_and_proved_cleanup_survive_the_scrub(tmp_path: Path) -> None:
    """A deadline's or a cancel's answer keeps its signed statement (MCP's `_meta` has it)."""
    paths = HostPaths({"<state dir>": tmp_path})
    error = JigError(Code.UNCERTAIN, f"lost in {tmp_path}", cleanup_proved=True, recorded=True)
    error.attestation = b"bundle"
    scrubbed = paths.scrub_error(error)
    assert (scrubbed.attestation, scrubbed.cleanup_proved, scrubbed.recorded) == (
        b"bundle",
        True,
        True,
    )
    assert scrubbed.message == "lost in <state dir>"


def test_the_usual_host_paths_include_home_and_the_state_dir(tmp_path: Path) -> None:
    paths = HostPaths.of_host(
        state_dir=tmp_path / "s",
        binding=tmp_path / "b" / "binding.toml",
        environ={"HOME": "/home/zed"},
    )
    text = paths.scrub(f"/home/zed/x {tmp_path}/s/slots {tmp_path}/b/binding.toml")
    assert text == "~/x <state dir>/slots <binding dir>/binding.toml"


def test_a_working_directory_removed_under_us_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose directory was `rmdir`ed still scrubs (os.getcwd() raised before)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    paths = HostPaths.of_host(state_dir=tmp_path / "s", environ={"HOME": "/home/zed"})
    assert paths.scrub(f"/home/zed/x {tmp_path}/s/slots") == "~/x <state dir>/slots"
    # A relative path given before the removal can no longer be made absolute: left out.
    relative = HostPaths.of_host(state_dir="state", environ={"HOME": "/home/zed"})
    assert relative.scrub("/home/zed/state") == "~/state"
