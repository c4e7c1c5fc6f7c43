"""The capabilities root's envelope needs in the host's user namespace, and what each is for.

Read from the envelope's own steps: `CAP_SYS_ADMIN` creates the namespaces and pivots into
the new root; `CAP_NET_ADMIN` brings up `lo` in the envelope's network namespace
(`envelope/netns.py`); `CAP_SETGID` clears the zygote's supplementary groups before any pid 1
is cloned (`envelope/spawning.py`) and writes the user namespace's gid map; `CAP_SETUID`
writes its uid map (`envelope/idmap.py`): the envelope's root is a host uid of its own
(`envelope/hostids.py`), not the writer's own, and only a writer holding these in the
parent namespace may map another id. Everything pid 1 does after that it does with the
capabilities its own user namespace gives it, and the zygote, that namespace's owner, may
signal its processes without `CAP_KILL`.
`CAP_SYS_RESOURCE` (the OOM score) is optional: the doctor's `oom score` line warns.
A container engine's default set holds `CAP_SETUID` and `CAP_SETGID`; `--cap-drop ALL`
(Kubernetes `drop: [ALL]`) takes them too.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENVELOPE_CAPABILITIES", "Capability", "grant", "lacking"]


@dataclass(frozen=True)
class Capability:
    """One capability: its name, its bit in `CapEff`, what the envelope uses it for, and
    whether container engines grant it by default (podman's and docker's default set)."""

    name: str
    bit: int
    why: str
    engine_default: bool = False

    @property
    def short(self) -> str:
        """The name engines take (`--cap-add SETUID`): without the `CAP_` prefix."""
        return self.name.removeprefix("CAP_")


ENVELOPE_CAPABILITIES = (
    Capability("CAP_SYS_ADMIN", 21, "mount, pid and uts namespaces, the new root"),
    Capability("CAP_NET_ADMIN", 12, "lo in the envelope's network namespace"),
    Capability(
        "CAP_SETUID",
        7,
        "the user namespace's uid map: its root is a host uid of its own",
        engine_default=True,
    ),
    Capability(
        "CAP_SETGID",
        6,
        "the supplementary groups dropped, the user namespace's gid map",
        engine_default=True,
    ),
)


def lacking(cap_eff: int) -> list[Capability]:
    """The envelope's capabilities missing from the effective set `cap_eff`, in table order."""
    return [cap for cap in ENVELOPE_CAPABILITIES if not cap_eff >> cap.bit & 1]


def grant(caps: list[Capability]) -> str:
    """The hint that gives root `caps` (non-empty): by name, and as a container's options."""
    names = [cap.name for cap in caps]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    options = " ".join(f"--cap-add {cap.short}" for cap in caps)
    return f"grant {listed} (in a container: {options})"
