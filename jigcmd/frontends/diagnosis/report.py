"""What `jigcmd doctor` prints: a line per check, the fixes, and a verdict naming what failed."""

from __future__ import annotations

from jigcmd.frontends.diagnosis.verdicts import Check

__all__ = ["render"]


def render(results: list[Check]) -> str:
    """The doctor's text: one line per check, its fix under a failed one, then the verdict."""
    width = max(len(result.check) for result in results)
    lines = ["jigcmd doctor: can this machine build the containment envelope?", ""]
    for result in results:
        lines.append(f"{result.status:<4}  {result.check:<{width}}  {result.detail}")
        if result.hint is not None and result.status != "ok":
            lines.append(f"{'':4}  {'':<{width}}  fix: {result.hint}")
    failed = [result for result in results if not result.ok]
    lines.append("")
    if failed:
        lines.append(_failed(failed, len(results)))
    else:
        lines.append(f"{_passed(results)}: jigcmd can build the envelope here.")
    return "\n".join(lines)


# What a failed check of each kind means; every check but these is the envelope's.
_CONSEQUENCES = {
    "envelope": "the envelope cannot be built here, so jigcmd would refuse every command "
    "(it never runs one uncontained)",
    "state": "the state directory cannot be used as it is, so serve and run would not start",
    "signing key": "serve and run would not start: they sign every run with that key",
    "binding": "the Binding cannot be loaded, so serve and run would refuse it",
    "jarvis policy": "jarvis would refuse to start with this policy",
}
# The checks that are not the envelope's, each its own kind in the summary.
_OWN_KINDS = ("state", "signing key", "binding", "jarvis policy")


def _failed(failed: list[Check], total: int) -> str:
    """The summary of a failure, naming which kinds of check failed and what each means."""
    kinds = dict.fromkeys(
        result.check if result.check in _OWN_KINDS else "envelope" for result in failed
    )
    named = ", ".join("state directory" if kind == "state" else kind for kind in kinds)
    said = "; ".join(_CONSEQUENCES[kind] for kind in kinds)
    return f"{len(failed)} of {total} checks failed ({named}): {said}."


def _passed(results: list[Check]) -> str:
    """The summary of a pass: "all N checks passed", or how many passed with a warning."""
    warned = sum(result.status == "warn" for result in results)
    if not warned:
        return f"all {len(results)} checks passed"
    return f"{len(results)} checks passed, {warned} with a warning"
