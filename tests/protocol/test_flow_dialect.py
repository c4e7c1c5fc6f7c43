"""The FLOW Run/1 dialect through the sans-IO session: params, failures, identity, cancellation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence
from jigcmd.policy.digests import operation_signature
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.session import Action, Call, Cancel, Dispatch, ProtocolChoice, Send, Session
from tests.protocol.fake_server import REPORT, TOOLS, canned_evidence

EVIDENCE_JSON: dict[str, Any] = json.loads(
    json.dumps(
        {
            "candidateDigest": "sha256:" + "0" * 64,
            "command": "tests",
            "invocation": ["bun", "test", "test/a.test.ts"],
            "stdinDigest": "sha256:" + "e" * 64,
            "stdout": {"text": "1 pass\n", "truncated": False},
            "stderr": {"text": "", "truncated": False},
            "exitCode": 0,
            "signal": None,
            "stopReason": "exited",
            "cleanup": "complete",
        }
    )
)


def make_session(protocol: ProtocolChoice = "auto", slot: str | None = None) -> Session:
    return Session(TOOLS, signature=operation_signature, protocol=protocol, slot=slot)


def call_frame(
    request_id: object = "r1",
    operation_id: str = "op-1",
    rpc_method: str = "capability/call",
    **extra: object,
) -> bytes:
    params: dict[str, object] = {
        "operationId": operation_id,
        "slot": "command",
        "method": "run",
        "input": {"command": "tests", "files": {"test/a.test.ts": "x"}},
    }
    params.update(extra)
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": rpc_method, "params": params}
    ).encode()


def answers(actions: list[Action]) -> list[dict[str, Any]]:
    """Decode every frame the actions send."""
    data = b"".join(a.data for a in actions if isinstance(a, Send))
    return [json.loads(line) for line in data.splitlines()]


def decode(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def dispatched(actions: list[Action]) -> Call:
    (action,) = actions
    assert isinstance(action, Dispatch)
    return action.call


def test_a_capability_call_dispatches_and_succeeds_with_exactly_the_value() -> None:
    """A well-formed call starts the run; success is exactly `{"value": evidence}`."""
    session = make_session()
    call = dispatched(session.receive(call_frame(deadlineUnixMs=1234)))
    assert call.operation_id == "op-1"
    assert call.deadline_unix_ms == 1234
    assert call.input == {"command": "tests", "files": {"test/a.test.ts": "x"}}
    assert session.dialect == "flow"
    result = RunResult(canned_evidence("tests"), REPORT)
    assert decode(session.finish(call, result)) == [
        {"jsonrpc": "2.0", "id": "r1", "result": {"value": EVIDENCE_JSON}}
    ]


def test_effect_call_is_the_same_call_without_channels() -> None:
    """`effect/call` dispatches like `capability/call` and refuses a `channels` member."""
    session = make_session()
    assert isinstance(session.receive(call_frame(rpc_method="effect/call"))[0], Dispatch)
    (error,) = answers(make_session().receive(call_frame(rpc_method="effect/call", channels={})))
    assert error["error"] == {"code": -32602, "message": "Invalid params: unknown member /channels"}


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (call_frame(operation_id="-bad"), "Invalid params: /operationId must match"),
        (call_frame(slot="Bad Slot"), "Invalid params: /slot must be a LocalName"),
        (call_frame(extra=1), "Invalid params: unknown member /extra"),
        (call_frame(deadlineUnixMs=-1), "Invalid params: /deadlineUnixMs must be a non-negative"),
        (call_frame(deadlineUnixMs=None), "Invalid params: /deadlineUnixMs must be a non-negative"),
        (call_frame(channels=[]), "Invalid params: /channels must be an object"),
        (
            b'{"jsonrpc":"2.0","id":"r1","method":"capability/call","params":{"slot":"a"}}',
            "Invalid params: missing /operationId",
        ),
        (
            b'{"jsonrpc":"2.0","id":"r1","method":"capability/call","params":[]}',
            "Invalid params: capability/call params must be an object",
        ),
    ],
)
def test_malformed_call_params_are_invalid_params(frame: bytes, message: str) -> None:
    """Params that break the Run/1 shape are -32602 naming the member, and nothing runs."""
    (error,) = answers(make_session().receive(frame))
    assert error["id"] == "r1"
    assert error["error"]["code"] == -32602
    assert error["error"]["message"].startswith(message)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"channels": {"out": {}}}, "channels are not supported by project-command"),
        ({"method": "other"}, "method 'other' is not offered; project-command offers only 'run'"),
        (
            {"slot": "elsewhere"},
            "slot 'elsewhere' is not served here; this server serves 'command'",
        ),
    ],
)
def test_unservable_calls_are_unavailable_without_dispatch(
    extra: dict[str, object], message: str
) -> None:
    """Channels, other methods and other slots get -32000 UNAVAILABLE with only code in data."""
    actions = make_session(slot="command").receive(
        call_frame("r1", "op-1", "capability/call", **extra)
    )
    assert answers(actions) == [
        {
            "jsonrpc": "2.0",
            "id": "r1",
            "error": {"code": -32000, "message": message, "data": {"code": "UNAVAILABLE"}},
        }
    ]


def test_request_ids_outside_the_run1_grammar_are_invalid_requests() -> None:
    """An integer id, readable but not a Run/1 id, is echoed with -32600."""
    (error,) = answers(make_session().receive(call_frame(request_id=7)))
    assert error["id"] == 7
    assert error["error"]["code"] == -32600


def test_a_second_concurrent_operation_is_resource_exhausted_and_later_ones_run() -> None:
    """One active operation per session; a sequential call after it runs normally."""
    session = make_session()
    first = dispatched(session.receive(call_frame()))
    (busy,) = answers(session.receive(call_frame(request_id="r2", operation_id="op-2")))
    assert busy["error"]["data"] == {"code": "RESOURCE_EXHAUSTED"}
    assert "op-1" in busy["error"]["message"]
    session.finish(first, RunResult(canned_evidence("tests"), REPORT))
    assert isinstance(
        session.receive(call_frame(request_id="r3", operation_id="op-2"))[0], Dispatch
    )


def test_the_same_operation_joins_while_running_and_replays_when_done() -> None:
    """Same operationId and signature: a join is one more waiter, dispatched; later ones replay."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    joined = dispatched(session.receive(call_frame(request_id="r2")))
    assert (joined.request_id, joined.operation_id, joined.signature) == (
        "r2",
        "op-1",
        call.signature,
    )
    result = RunResult(canned_evidence("tests"), REPORT)
    (first,) = decode(session.finish(call, result))
    (second,) = decode(session.finish(joined, result))
    assert (first["id"], second["id"]) == ("r1", "r2")
    assert first["result"] == second["result"] == {"value": EVIDENCE_JSON}
    (replay,) = answers(session.receive(call_frame(request_id="r3")))
    assert replay["result"] == {"value": EVIDENCE_JSON}


def test_a_join_is_not_refused_as_a_second_operation_but_another_operation_is() -> None:
    """One operation at a time: its joins pass the guard, another operation is busy."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    joined = dispatched(session.receive(call_frame(request_id="r2")))
    session.finish(call, JigError(Code.CANCELLED, "request cancelled"))
    # The joiner still waits: the operation is still running in this session.
    (busy,) = answers(session.receive(call_frame(request_id="r3", operation_id="op-2")))
    assert busy["error"]["data"] == {"code": "RESOURCE_EXHAUSTED"}
    session.finish(joined, RunResult(canned_evidence("tests"), REPORT))
    assert isinstance(session.receive(call_frame("r4", operation_id="op-2"))[0], Dispatch)


def test_a_waiters_own_cancelled_answer_is_not_the_operations_outcome() -> None:
    """One waiter's own CANCELLED (another waits) is not recorded, so not kept; the result is."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    joined = dispatched(session.receive(call_frame(request_id="r2")))
    left = JigError(Code.CANCELLED, "request cancelled; op-1 continues")
    (answer,) = decode(session.finish(call, left))
    assert (answer["id"], answer["error"]["data"]["code"]) == ("r1", "CANCELLED")
    session.finish(joined, RunResult(canned_evidence("tests"), REPORT))
    (replay,) = answers(session.receive(call_frame(request_id="r3")))
    assert replay["result"] == {"value": EVIDENCE_JSON}


def test_a_reused_operation_id_with_other_params_conflicts_before_dispatch() -> None:
    """A different signature under the same operationId is OPERATION_CONFLICT, running or done."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    different = call_frame(request_id="r2", slot="other")
    (conflict,) = answers(session.receive(different))
    assert conflict["error"] == {
        "code": -32000,
        "message": "operationId 'op-1' was reused differently (a different request is "
        "running under it)",
        "data": {"code": "OPERATION_CONFLICT"},
    }
    session.finish(call, RunResult(canned_evidence("tests"), REPORT))
    (again,) = answers(session.receive(call_frame(request_id="r3", slot="other")))
    assert again["error"]["data"] == {"code": "OPERATION_CONFLICT"}
    assert "a different request was recorded under it" in again["error"]["message"]


def test_the_same_operation_with_another_deadline_joins_and_replays_not_a_conflict() -> None:
    """The deadline is timing, not identity: re-sent with another one it joins, then replays."""
    session = make_session()
    call = dispatched(session.receive(call_frame(deadlineUnixMs=1_000)))
    joined = dispatched(session.receive(call_frame(request_id="r2", deadlineUnixMs=2_000)))
    assert joined.deadline_unix_ms == 2_000
    result = RunResult(canned_evidence("tests"), REPORT)
    done = decode(session.finish(call, result) + session.finish(joined, result))
    assert [answer["id"] for answer in done] == ["r1", "r2"]
    (replay,) = answers(session.receive(call_frame(request_id="r3", deadlineUnixMs=3_000)))
    assert replay["result"] == done[0]["result"]


def test_an_uncertain_outcome_is_replayed_and_never_run_again() -> None:
    """A recorded UNCERTAIN stays the operation's answer."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    uncertain = JigError(Code.UNCERTAIN, "cleanup could not be confirmed", recorded=True)
    session.finish(call, uncertain)
    (replay,) = answers(session.receive(call_frame(request_id="r2")))
    assert replay["error"]["data"] == {"code": "UNCERTAIN"}


def test_a_failure_the_journal_recorded_is_kept_and_replayed_byte_for_byte() -> None:
    """A run stopped by its deadline, recorded with its evidence, is the operation's answer."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    evidence: Evidence = canned_evidence("tests", "deadline")
    stopped = JigError(
        Code.DEADLINE_EXCEEDED, "the deadline passed", {"command": evidence}, recorded=True
    )
    (answer,) = decode(session.finish(call, stopped))
    (replay,) = answers(session.receive(call_frame(request_id="r2", deadlineUnixMs=9)))
    assert replay["error"] == answer["error"]


@pytest.mark.parametrize(
    "refusal",
    [
        JigError(Code.DEADLINE_EXCEEDED, "the deadline had passed before dispatch; nothing ran"),
        JigError(Code.CANCELLED, "cancelled before dispatch; nothing ran"),
        JigError(Code.UNAVAILABLE, "command 'tests': the Binding changed since it was locked"),
        JigError(Code.INVALID_INPUT, "/command: unknown command 'tests'"),
    ],
    ids=["deadline", "cancel", "unavailable", "invalid"],
)
def test_a_refusal_before_dispatch_is_not_kept_so_the_operation_is_asked_again(
    refusal: JigError,
) -> None:
    """Nothing ran and the journal holds nothing: re-sent, even without a deadline, it is
    dispatched (the journal, not the session, answers it), never the stale refusal."""
    session = make_session()
    call = dispatched(session.receive(call_frame(deadlineUnixMs=1)))
    (answer,) = decode(session.finish(call, refusal))
    assert answer["error"]["data"]["code"] == refusal.code.value
    again = dispatched(session.receive(call_frame(request_id="r2")))
    assert (again.operation_id, again.signature) == (call.operation_id, call.signature)


def test_a_resource_exhausted_outcome_is_not_recorded_so_a_retry_runs() -> None:
    """When no envelope slot was free nothing ran; the same operation may be retried."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    session.finish(call, JigError(Code.RESOURCE_EXHAUSTED, "no envelope slot is free"))
    assert isinstance(session.receive(call_frame(request_id="r2"))[0], Dispatch)


def test_a_conflict_reported_by_the_journal_is_not_kept_so_the_stored_request_is_asked() -> None:
    """OPERATION_CONFLICT from the backend is not this operation's outcome in the session."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    conflict = JigError(Code.OPERATION_CONFLICT, "operationId 'op-1' was reused differently")
    (answer,) = decode(session.finish(call, conflict))
    assert answer["error"]["data"] == {"code": "OPERATION_CONFLICT"}
    other_input = call_frame(request_id="r2")
    other_input = other_input.replace(b'"x"', b'"y"')
    assert isinstance(session.receive(other_input)[0], Dispatch)


def test_every_call_carries_the_run_the_session_belongs_to() -> None:
    """The session's run id travels with each call: the backend scopes identity by it."""
    session = Session(TOOLS, signature=operation_signature, root_run="run-42")
    assert dispatched(session.receive(call_frame())).root_run == "run-42"


def test_a_failure_that_neither_ran_nor_was_recorded_is_not_kept_so_a_retry_runs() -> None:
    """An EXECUTION_FAILED the journal could not record (nothing ran) is not kept."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    failed = JigError(Code.EXECUTION_FAILED, "journal full; nothing ran")
    (answer,) = decode(session.finish(call, failed))
    assert answer["error"]["data"] == {"code": "EXECUTION_FAILED"}
    assert isinstance(session.receive(call_frame(request_id="r2"))[0], Dispatch)


def test_cancel_of_the_dispatching_request_stops_the_run_and_it_answers_once() -> None:
    """request/cancel yields a Cancel; the call still gets exactly one answer, with evidence."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    cancel = b'{"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"r1"}}'
    assert session.receive(cancel) == [Cancel("r1")]
    evidence: Evidence = canned_evidence("tests", "cancelled")
    outcome = JigError(Code.CANCELLED, "the call was cancelled", {"command": evidence})
    (answer,) = decode(session.finish(call, outcome))
    assert answer["error"]["code"] == -32000
    assert answer["error"]["data"]["code"] == "CANCELLED"
    assert answer["error"]["data"]["details"]["command"]["stopReason"] == "cancelled"
    assert set(answer["error"]) == {"code", "message", "data"}
    assert session.receive(cancel) == []


def test_cancel_of_unknown_ids_is_a_no_op_and_any_waiter_may_be_cancelled() -> None:
    """Unknown ids do nothing; the first request and a joined one each get their own Cancel."""
    session = make_session()
    call = dispatched(session.receive(call_frame()))
    joined = dispatched(session.receive(call_frame(request_id="r2")))
    assert (
        session.receive(b'{"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"zz"}}')
        == []
    )
    cancel = b'{"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"%s"}}'
    assert session.receive(cancel % b"r1") == [Cancel("r1")]
    assert session.receive(cancel % b"r2") == [Cancel("r2")]
    session.finish(call, JigError(Code.CANCELLED, "request cancelled"))
    assert session.receive(cancel % b"r1") == []
    session.finish(joined, RunResult(canned_evidence("tests"), REPORT))
    assert session.receive(cancel % b"r2") == []


def test_a_flow_session_does_not_speak_mcp() -> None:
    """Once Flow is chosen (or forced), MCP methods are not found."""
    session = make_session("flow")
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "i",
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18"},
        }
    ).encode()
    (error,) = answers(session.receive(init))
    assert error["error"]["code"] == -32601
    (pong,) = answers(session.receive(b'{"jsonrpc":"2.0","id":"p","method":"ping"}'))
    assert pong == {"jsonrpc": "2.0", "id": "p", "result": {}}


def _run_to_completion(session: Session, request_id: str, operation_id: str) -> list[Action]:
    actions = session.receive(call_frame(request_id, operation_id))
    dispatched = [a for a in actions if isinstance(a, Dispatch)]
    for dispatch in dispatched:
        session.finish(dispatch.call, RunResult(evidence=canned_evidence("tests"), report=REPORT))
    return actions


def test_a_bounded_session_forgets_old_outcomes_and_dispatches_them_again() -> None:
    """With `remember=2`, the oldest finished operation is asked of the backend again."""
    session = Session(TOOLS, signature=operation_signature, protocol="flow", remember=2)
    for index in range(3):
        assert any(
            isinstance(a, Dispatch) for a in _run_to_completion(session, f"r{index}", f"op-{index}")
        )
    # op-2 and op-1 are remembered: answered at once, nothing dispatched.
    again = session.receive(call_frame("r9", "op-2"))
    assert not any(isinstance(a, Dispatch) for a in again)
    assert answers(again)[0]["result"]["value"]["exitCode"] == 0
    # op-0 was forgotten: the backend (the journal, in `jigcmd serve`) answers it.
    assert any(isinstance(a, Dispatch) for a in session.receive(call_frame("r10", "op-0")))


def test_an_unbounded_session_replays_every_outcome_itself() -> None:
    """Without `remember`, every finished operation is replayed from the session."""
    session = make_session("flow")
    for index in range(20):
        _run_to_completion(session, f"r{index}", f"op-{index}")
    assert not any(isinstance(a, Dispatch) for a in session.receive(call_frame("r99", "op-0")))


@pytest.mark.parametrize("depth", [330, 1000, 100_000])
def test_a_deeply_nested_input_is_an_invalid_request_answered_with_its_id(depth: int) -> None:
    """Nesting beyond the frame limit: -32600 naming the limit, with the request's id; no crash."""
    session = make_session()
    frame = call_frame(request_id="deep-1").replace(
        b'"input": {', b'"input": {"deep": ' + b"[" * depth + b"]" * depth + b", ", 1
    )
    (answer,) = answers(session.receive(frame))
    assert answer["id"] == "deep-1"
    assert answer["error"]["code"] == -32600
    assert "nesting deeper than 64 levels" in answer["error"]["message"]
    assert isinstance(session.receive(call_frame(request_id="r2"))[0], Dispatch)


def test_a_refused_call_is_not_remembered_so_its_id_is_free_for_a_servable_call() -> None:
    """Refusals (an unserved slot, channels) keep nothing: 100k of them cost no memory."""
    session = make_session(slot="command")
    for index in range(3):
        (refused,) = answers(session.receive(call_frame(operation_id=f"op-{index}", slot="x")))
        assert refused["error"]["data"] == {"code": "UNAVAILABLE"}
    assert isinstance(session.receive(call_frame(operation_id="op-0"))[0], Dispatch)


def test_an_oversized_frame_naming_an_id_in_flight_is_refused_under_null() -> None:
    """The oversize refusal, too, is never sent under the id of a call still in flight."""
    session = make_session("flow")
    (dispatch,) = session.receive(call_frame("r1", "op-1"))
    assert isinstance(dispatch, Dispatch)
    (refused,) = [json.loads(session.oversized(1 << 25, b'{"id":"r1","method":"ping"'))]
    assert refused["id"] is None
    assert 'id "r1" is already in flight' in refused["error"]["message"]
    session.finish(dispatch.call, RunResult(evidence=canned_evidence("tests"), report=REPORT))
    # Answered, the id is free again: the same frame's refusal names it.
    assert json.loads(session.oversized(1 << 25, b'{"id":"r1","method":"ping"'))["id"] == "r1"
    (pong,) = answers(session.receive(b'{"jsonrpc":"2.0","id":"r1","method":"ping"}'))
    assert pong == {"jsonrpc": "2.0", "id": "r1", "result": {}}
