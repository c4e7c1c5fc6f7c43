"""`open_service`: the service a front (serve, run) is handed, with its executor and journal."""

from __future__ import annotations

from pathlib import Path

import pytest

import jigcmd
from jigcmd.command.assembly import FrontSettings, open_service
from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.envelope.native import NativeExecutor

BINDING = Path(jigcmd.__file__).parent / "example" / "binding.toml"


async def test_a_zygote_that_cannot_start_is_left_for_the_run_to_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starting the envelopes early is best effort: the service is handed over all the same."""
    tried: list[NativeExecutor] = []

    async def cannot_start(self: NativeExecutor) -> None:
        tried.append(self)
        raise EnvelopeFailure(FailureKind.ZYGOTE_NOT_STARTED, "zygote", "No such file")

    monkeypatch.setattr(NativeExecutor, "start", cannot_start)
    settings = FrontSettings(binding=BINDING, state_dir=tmp_path / "state")
    async with open_service(settings, start_envelopes=True) as assembly:
        assert assembly.service.executor is tried[0]
