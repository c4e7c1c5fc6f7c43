"""The resource report's setup and wall time follow each other inside the run (docs/evidence.md).

Only logical invariants, on the one monotonic clock the envelope times on: setup and wall
together fit between the moment the run was asked for and the moment the server heard of
its end (setup starts after the first, the candidate's end comes before the second), and
the wall covers what the candidate itself saw pass (`Bun.nanoseconds()`, from its own start).
"""

from __future__ import annotations

import time

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.envelope.api import Ending
from tests.envelope.hostile_harness import DEADLINE_S, TracedExecutor, probe_plan

pytestmark = pytest.mark.envelope

# Each prints how long it has run by its own clock (ns since Bun started), last.
QUICK = "console.log(Bun.nanoseconds());\n"
FAILING = "console.log(Bun.nanoseconds());\nprocess.exit(3);\n"
# Sleeps until its own clock says 300 ms passed since it began this loop.
SLEEPING = (
    "const begun = Bun.nanoseconds();\n"
    "while (Bun.nanoseconds() - begun < 300e6) await Bun.sleep(50);\n"
    "console.log(Bun.nanoseconds());\n"
)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(QUICK, id="quick"),
        pytest.param(FAILING, id="exit-3"),
        pytest.param(SLEEPING, id="sleep-300ms"),
    ],
)
async def test_setup_and_wall_fit_between_the_launch_and_the_end_heard(
    envelope: TracedExecutor, source: str
) -> None:
    """setup + wall <= asked-to-heard-of-the-end, and the wall holds the candidate's own time."""
    heard: list[float] = []

    async def on_ended(_ending: Ending) -> None:
        heard.append(time.monotonic())

    asked = time.monotonic()
    outcome = await envelope.run(probe_plan(source), CancelSignal(), on_ended=on_ended)
    assert outcome.stop_reason == "exited", outcome.stderr
    report = outcome.report
    (end,) = heard
    assert report.setup_ms >= 0 and report.wall_ms >= 0, report
    assert report.setup_ms + report.wall_ms <= (end - asked) * 1000, report
    own_ns = int(outcome.stdout.data.decode().split()[-1])
    assert report.wall_ms * 1e6 >= own_ns, (report, own_ns)
    if source is SLEEPING:
        assert report.wall_ms >= 300, report


async def test_a_run_stopped_at_its_deadline_fits_too(envelope: TracedExecutor) -> None:
    """The wall runs to the stop: setup + wall still fit before the end is heard."""
    heard: list[float] = []

    async def on_ended(_ending: Ending) -> None:
        heard.append(time.monotonic())

    asked = time.monotonic()
    plan = probe_plan("for (;;) {}\n", seconds=DEADLINE_S)
    outcome = await envelope.run(plan, CancelSignal(), on_ended=on_ended)
    assert outcome.stop_reason == "deadline"
    (end,) = heard
    report = outcome.report
    assert report.setup_ms + report.wall_ms <= (end - asked) * 1000, report
