"""The limits a tool's description states are the envelope's, in its words: tasks, not processes.

The pids controller counts every task, so a thread counts as a process does: a model told
"64 processes" plans 64 processes of many threads each. Read through the MCP Python SDK.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.plan import Limits
from jigcmd.policy.planner import CEILING_SECONDS
from tests.admitted_example import admit_example
from tests.mcpsession import mcp_session as client

pytestmark = pytest.mark.envelope


async def test_every_tool_states_the_envelope_limits_with_threads_counted(tmp_path: Path) -> None:
    """Each description names the task limit with threads counted, and no process limit."""
    limits = Limits()
    stated = (
        f"at most {CEILING_SECONDS:g} s, {limits.memory_bytes // 2**20} MiB and "
        f"{limits.pids_max} tasks (threads count)."
    )
    async with client(admit_example(tmp_path), tmp_path / "state") as session:
        listed = await session.list_tools()
    assert listed.tools
    for tool in listed.tools:
        assert tool.description is not None and stated in tool.description, tool.name
        assert "processes" not in tool.description, tool.name
