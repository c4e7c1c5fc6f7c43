"""The signed statement of a completed jarvis run: what was asked, under which policy, how it ended.

`RunSigning` holds the host's `Attester` and the policy file's digest; `signer` makes, for one
allowed request, what the service calls once the run's end and cleanup are proved. The
streams are hashed exactly as the journal keeps them and `jarvis.run.get` returns them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jigcmd.attest.attester import Attester, JarvisRecord
from jigcmd.attest.statement import JarvisPolicyFacts, JarvisRequestFactsV2, JarvisRunFacts
from jigcmd.clock import unix_ms
from jigcmd.envelope.api import RunOutcome, enforced
from jigcmd.evidence import StreamText, decode_output
from jigcmd.jarvis.policy import Decision
from jigcmd.journal.toolruns import JARVIS_OUTPUT_CAP_CHARS
from jigcmd.plan import RunPlan, plan_digest

__all__ = ["RunSigning", "Sign", "stored"]

# Signs a completed run's statement: its jarvis run id, its envelope's run id, its outcome.
Sign = Callable[[int, str, RunOutcome], bytes]


def stored(data: bytes, truncated: bool) -> StreamText:
    """A stream as the journal keeps it and `jarvis.run.get` returns it."""
    text = decode_output(data, truncated)
    return StreamText(
        text=text.text[:JARVIS_OUTPUT_CAP_CHARS],
        truncated=text.truncated or len(text.text) > JARVIS_OUTPUT_CAP_CHARS,
    )


@dataclass(frozen=True)
class RunSigning:
    """The key that signs jarvis runs and the policy they were allowed under."""

    attester: Attester
    # `sha256:` and the hex SHA-256 of the policy file's bytes.
    policy_digest: str

    def signer(
        self, *, actor: str, tool: str, argv: Sequence[str], decision: Decision, plan: RunPlan
    ) -> Sign:
        """How one allowed request's run is signed once it completed.

        The statement names the file the plan executes (`argv[0]` keeps the caller's name for
        it) and the cwd as resolved: what ran, not only what was asked.
        """
        request = JarvisRequestFactsV2(
            tool=tool,
            argv=list(argv),
            # What the envelope executes (`RunPlan.program`; empty would mean `argv[0]`).
            executable=plan.program or plan.argv[0],
            cwd=decision.cwd or "",
            actor=actor,
        )
        policy = JarvisPolicyFacts(
            policy_digest=self.policy_digest,
            matched_rule=decision.matched_rule,
            reason=decision.reason,
        )
        enforcement, digest = enforced(plan), plan_digest(plan)
        started = unix_ms()

        def sign(run_id: int, envelope_run_id: str, outcome: RunOutcome) -> bytes:
            return self.attester.attest_jarvis(
                JarvisRecord(
                    run=JarvisRunFacts(run_id=run_id, envelope_run_id=envelope_run_id),
                    request=request,
                    policy=policy,
                    enforced=enforcement,
                    plan_digest=digest,
                    exit_code=outcome.exit_code,
                    signal=outcome.signal,
                    stop_reason=outcome.stop_reason,
                    stdout_text=stored(outcome.stdout.data, outcome.stdout.truncated),
                    stderr_text=stored(outcome.stderr.data, outcome.stderr.truncated),
                    stdout=outcome.stdout.data,
                    stderr=outcome.stderr.data,
                    resources=outcome.report,
                    started_unix_ms=started,
                    finished_unix_ms=unix_ms(),
                )
            )

        return sign
