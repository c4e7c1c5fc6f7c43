"""A command name too long to be one is refused with the rule it breaks, whatever its length.

The refusal's message is cut at 1,024 characters, keeping its start: `jigcmd run` quotes a
name of 2,000 characters by its start, so the rule after it (a LocalName, at most 64
characters, and the commands admitted) is whole in the message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli_run import CANDIDATES, answer, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py


def test_a_long_command_name_is_refused_with_its_rule_said(lock: Path, tmp_path: Path) -> None:
    """2,000 characters: the name is quoted by its start, the rule and the admitted whole."""
    done = run(lock, tmp_path / "state", "X" * 2000, CANDIDATES / "passing", "--json")
    assert done.returncode == 2
    message = answer(done)["error"]["message"]
    assert message.startswith("/command: 'XXX"), message
    assert message.endswith("at most 64 characters; admitted: cli, tests)"), message
