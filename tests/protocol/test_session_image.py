"""A session imports MCP's modules only once it speaks MCP (the idle server's image)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROBE = """
import sys
import jigcmd.frontends.serve
from jigcmd.protocol.session import Session
Session((), signature=lambda method, params: "", protocol={protocol!r})
print(" ".join(sys.modules))
"""


def _modules_after(protocol: str) -> set[str]:
    return set(
        subprocess.run(
            [sys.executable, "-c", _PROBE.format(protocol=protocol)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    )


@pytest.mark.parametrize("protocol", ["flow", "auto"])
def test_a_server_not_speaking_mcp_holds_none_of_its_dialect(protocol: str) -> None:
    """`serve` with a FLOW Run/1 session (or one not yet decided) imports no `protocol.mcp`."""
    modules = _modules_after(protocol)
    assert "jigcmd.protocol.session" in modules
    assert "jigcmd.protocol.mcp" not in modules
    assert "jigcmd.protocol.mcp_view" not in modules


def test_a_session_told_to_speak_mcp_imports_it_at_its_start() -> None:
    """`--protocol mcp` imports the dialect when the session is made, not at the first call."""
    assert "jigcmd.protocol.mcp" in _modules_after("mcp")


def test_the_server_compiles_none_of_the_zygotes_frame_readers() -> None:
    """`marshalcodec` (generated Python, compiled at import) stays in the zygote's image."""
    modules = _modules_after("auto")
    assert "jigcmd.envelope.messages" in modules  # the server does speak the control channel
    assert "jigcmd.envelope.marshalcodec" not in modules
