"""What `jigcmd doctor` checks: pure verdicts (`verdicts`) and forked probes (`probes`)."""
