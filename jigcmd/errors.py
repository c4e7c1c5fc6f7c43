"""The closed set of operational failure codes and the one exception type that carries them.

Every failure jigcmd reports to a caller is a `JigError` with one of the `Code` values. The
protocol layers turn it into a wire error in exactly one place each (Run/1: JSON-RPC -32000
with `data.code`; MCP: a tool result with `isError: true`).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from jigcmd.protocol.inert import one_line

if TYPE_CHECKING:
    from jigcmd.protocol.commands import OutputEnds, ResourceRef, TestResults

__all__ = [
    "MESSAGE_MAX_CHARS",
    "Code",
    "JigError",
    "bounded",
    "bounded_details",
    "operation_conflict",
]

MESSAGE_MAX_CHARS = 1024
# A JSON pointer a message quotes that would push the rule after it past the cut: quoted by
# its first and last characters, this many in all with the `…` between them.
_POINTER_HEAD = 120
_POINTER_TAIL = 40


def bounded(text: str) -> str:
    """`text` cut to `MESSAGE_MAX_CHARS`, keeping its start (which names the rule).

    Every error message on the wire passes through here: many quote the peer's own text (a
    method name, a member, an id), which may be megabytes long.
    """
    if len(text) > MESSAGE_MAX_CHARS:
        return text[: MESSAGE_MAX_CHARS - 1] + "…"
    return text


class Code(enum.StrEnum):
    """Operational failure codes of FLOW Run/1 (spec-notes §6.1)."""

    CANCELLED = "CANCELLED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    OWNER_CLOSED = "OWNER_CLOSED"
    OPERATION_CONFLICT = "OPERATION_CONFLICT"
    UNAVAILABLE = "UNAVAILABLE"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    INVALID_INPUT = "INVALID_INPUT"
    INVALID_RESULT = "INVALID_RESULT"
    UNCERTAIN = "UNCERTAIN"
    EXECUTION_FAILED = "EXECUTION_FAILED"


class JigError(Exception):
    """Raised when an operation fails for a reason the caller must be told about."""

    def __init__(
        self,
        code: Code,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        cleanup_proved: bool = False,
        recorded: bool = False,
    ) -> None:
        """`cleanup_proved` (an `UNCERTAIN` outcome): the envelope proved that nothing of the
        run is left, so only the run's end is unknown, not its leftovers.

        `recorded`: the operation's journal row holds this outcome (or, left open, will be
        closed with it by recovery), so a replay answers the same. Only such a failure is the
        operation's own; any other (a refusal before dispatch, one waiter's cancel, a slot or
        a row that could not be written) leaves the same call free to be sent again.
        """
        # The wire allows 1-1,024 characters; keep the start, which names the rule. One line
        # of jigcmd's on every front, as `jigcmd run` shows it: a name it quotes is the
        # caller's (a file's), and its newline or bidi control must not start a line there.
        message = bounded(one_line(_pointer_cut(message.strip(), details)) or code.value)
        super().__init__(message)
        self.code = code
        self.message = message
        # Whole: the operator's CLI shows them so (a long `--files` path); each wire form cuts
        # them where a peer reads them (`bounded_details`).
        self.details = details
        self.cleanup_proved = cleanup_proved
        self.recorded = recorded
        # The signed statement of a run that did run and ended so (its deadline, a cancel):
        # kept and delivered beside the error, never in its wire form.
        self.attestation: bytes | None = None
        # What such a run kept for `resources/read` (its streams, its statement): linked from
        # an MCP answer, never in the wire form either.
        self.resources: tuple[ResourceRef, ...] = ()
        # A test command's results from such a run's report, or why there are none (never
        # in the wire form either: the fronts that show a completed run's show these).
        self.tests: TestResults | None = None
        # When the journal row that holds it says the operation ended (`RunResult`'s too).
        self.ended_unix_ms: int | None = None
        # The call's notes (`RunResult`'s), for such a run's MCP answer.
        self.notes: tuple[str, ...] = ()
        # Each stream past the cap, for such a run answered live (`RunResult`'s too).
        self.ends: OutputEnds | None = None

    def reworded(self, message: str, details: dict[str, Any] | None) -> JigError:
        """The same failure in other words: its code, cleanup, record, statement and view kept."""
        error = JigError(
            self.code,
            message,
            details,
            cleanup_proved=self.cleanup_proved,
            recorded=self.recorded,
        )
        error.attestation = self.attestation
        error.resources = self.resources
        error.tests = self.tests
        error.ended_unix_ms = self.ended_unix_ms
        error.notes = self.notes
        error.ends = self.ends
        return error

    def __repr__(self) -> str:
        return f"JigError({self.code.value}, {self.message!r})"


def _pointer_cut(message: str, details: dict[str, Any] | None) -> str:
    """`message` with the pointer `details` names cut to its start and end where it quotes
    it, when whole it would leave no room for what the message says is wrong there.

    The pointer is the peer's (a 1 MB key, a long path): the reason after it is jigcmd's, the
    part a reader acts on, and the one `bounded` would otherwise cut away. `details` keeps
    the pointer itself, cut on the wire by `bounded_details` with its length said.
    """
    pointer = details.get("pointer") if details else None
    if len(message) <= MESSAGE_MAX_CHARS or not isinstance(pointer, str):
        return message
    if len(pointer) <= _POINTER_HEAD + _POINTER_TAIL:
        return message
    return message.replace(pointer, f"{pointer[:_POINTER_HEAD]}…{pointer[-_POINTER_TAIL:]}")


def bounded_details(details: dict[str, Any] | None) -> dict[str, Any] | None:
    """`details` with each text longer than a message cut as a message is, its length said.

    For the wire (Run/1's `data.details`, MCP's `_meta["jigcmd/error"].details`): a detail
    may quote the peer (a JSON pointer to a 1 MB key), bounded like the message that quotes
    it too. `<key>Chars`, present only when cut, tells the cut from a key of the peer's that
    ends in "…".
    """
    if not details:
        return details
    bounded = dict(details)
    for key, value in details.items():
        if isinstance(value, str) and len(value) > MESSAGE_MAX_CHARS:
            bounded[key] = value[: MESSAGE_MAX_CHARS - 1] + "…"
            bounded[f"{key}Chars"] = len(value)
    return bounded


def operation_conflict(operation_id: str, *, running: bool) -> JigError:
    """`OPERATION_CONFLICT`: a different request under a used operation id, worded alike by
    every path that finds it (the session, the shared work, the journal), saying whether the
    request holding the id is running or recorded."""
    holds = "is running" if running else "was recorded"
    return JigError(
        Code.OPERATION_CONFLICT,
        f"operationId {operation_id!r} was reused differently (a different request {holds} "
        "under it)",
    )
