"""What `jigcmd doctor` checks: pure verdicts (`verdicts`) and forked probes (`probes`)."""

__all__: list[str] = []
