"""JSON-RPC classification, id grammars and single-line encoding."""

from __future__ import annotations

import json

import pytest

from jigcmd.jsonio import faults
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.jsonrpc import Notification, Rejected, Request, Response


def test_a_request_and_a_notification_are_told_apart_by_the_id_member() -> None:
    """A message with an id is a request; without one it is a notification."""
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","id":7,"method":"ping"}') == Request(7, "ping", None)
    assert jsonrpc.parse(b'{"jsonrpc":"2.0","method":"n","params":[1]}') == Notification("n", [1])


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (
            b"{",
            Rejected(
                -32700, "Parse error: malformed JSON: input ends before the value is complete"
            ),
        ),
        (b"[]", Rejected(-32600, "Invalid Request: batches are not supported")),
        (b"42", Rejected(-32600, "Invalid Request: a message must be a JSON object")),
        (
            b'{"id":3,"method":"ping"}',
            Rejected(-32600, 'Invalid Request: "jsonrpc" must be "2.0"', 3),
        ),
        (
            b'{"jsonrpc":"2.0","id":"a"}',
            Rejected(-32600, 'Invalid Request: "method" must be a string', "a"),
        ),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', Response(1)),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}', Response(None)),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":3}',
            Rejected(-32600, 'Invalid Request: "params" must be an object or an array', 1),
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":null}',
            Rejected(-32600, 'Invalid Request: "params" must not be null', 1),
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","extra":0}',
            Rejected(-32600, "Invalid Request: unknown members: extra", 1),
        ),
        (
            b'{"jsonrpc":"2.0","id":null,"method":"m"}',
            Rejected(
                -32600,
                'Invalid Request: "id" must be a string or an integer',
                bad_id=True,
                method="m",
            ),
        ),
        (
            b'{"jsonrpc":"2.0","id":1.5,"method":"m"}',
            Rejected(
                -32600,
                'Invalid Request: "id" must be a string or an integer',
                bad_id=True,
                method="m",
            ),
        ),
        (
            b'{"jsonrpc":"2.0","id":true,"method":"m"}',
            Rejected(
                -32600,
                'Invalid Request: "id" must be a string or an integer',
                bad_id=True,
                method="m",
            ),
        ),
    ],
)
def test_frames_that_are_not_requests_are_rejected_with_the_right_code(
    frame: bytes, expected: Rejected
) -> None:
    """Parse errors are -32700; everything else that is not a request is -32600."""
    assert jsonrpc.parse(frame) == expected


def test_a_fault_only_in_a_calls_input_is_the_request_carrying_its_pointer() -> None:
    """The rest of the frame read as written; the input's first fault named, never run."""
    frame = (
        b'{"jsonrpc":"2.0","id":"d1","method":"capability/call","params":{"operationId":"o",'
        b'"slot":"command","method":"run","input":{"files":{"a":"1","a":"2"},"x":NaN}}}'
    )
    parsed = jsonrpc.parse(frame)
    assert type(parsed) is Request and parsed.id == "d1"
    assert parsed.fault == jsonrpc.Fault("/files/a", 'duplicate key "a"')
    assert type(parsed.params) is dict and type(parsed.params["input"]) is dict


@pytest.mark.parametrize(
    "frame",
    [
        # A byte order mark breaks no rule inside the input: the text is refused as a whole.
        b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}',
        # A fault outside the input too: the frame is no request.
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b",'
        b'"arguments":{"x":NaN}}}',
    ],
)
def test_a_frame_broken_outside_a_calls_input_stays_a_parse_error(frame: bytes) -> None:
    """-32700 with the id: nothing but a fault inside the input becomes a call."""
    parsed = jsonrpc.parse(frame)
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32700, 1)


def test_a_byte_order_mark_is_named_before_a_fault_inside_the_input() -> None:
    """The BOM is the frame's fault, not the input's: -32700 naming it, under the id."""
    frame = (
        b'\xef\xbb\xbf{"jsonrpc":"2.0","id":"b1","method":"capability/call","params":'
        b'{"input":{"command":"main","command":"main"}}}'
    )
    assert jsonrpc.parse(frame) == Rejected(
        -32700, "Parse error: byte order mark is not allowed (byte 0)", "b1"
    )


@pytest.mark.parametrize(
    "rest",
    [
        b'"x":"\xff"',
        b'"x":' + b"9" * 5000,
        b'"x":-NaN',
        b'"x":"\\ud800","y":"\xff"',
    ],
)
@pytest.mark.parametrize("second", [b'"id":"B"', b'"\\u0069d":"B"'])
def test_a_repeated_id_is_answered_with_null_whatever_else_is_wrong(
    rest: bytes, second: bytes
) -> None:
    """Invalid UTF-8, an integer too long to decode, -NaN: the id is still known repeated."""
    frame = b'{"jsonrpc":"2.0","id":"A",' + second + b',"method":"ping",' + rest + b"}"
    parsed = jsonrpc.parse(frame)
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32700, None)


@pytest.mark.parametrize(
    ("rest", "problem"),
    [
        (b'"x":"\xff"', "invalid UTF-8 at byte 47"),
        (b'"x":' + b"9" * 5000, "integer 9999"),
        (b'"x":-NaN', "NaN and Infinity are not JSON numbers at '/x'"),
    ],
)
def test_a_sound_id_is_answered_whatever_else_is_wrong(rest: bytes, problem: str) -> None:
    """The same frames with one id: -32700 naming the rule, under that id."""
    parsed = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"A","method":"ping",' + rest + b"}")
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32700, "A")
    assert parsed.message.startswith(f"Parse error: {problem}")


def test_an_id_with_invalid_utf8_is_not_answered() -> None:
    """Bytes that are not UTF-8 in the id: no answer can carry the id the client sent."""
    parsed = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"a\xff","method":"ping"}')
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32700, None)


@pytest.mark.parametrize(
    "frame",
    [
        b'[{"\\ud800":1,"\\ud800":2}]',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[{"\\ud800":1,"\\ud800":2}]}',
        b'{"\\ud800":1,"\\ud800":2}',
    ],
)
def test_a_repeated_lone_surrogate_key_is_answered_in_words_that_encode(frame: bytes) -> None:
    """A top-level array too: the key shown as `\\ud800`, never the raw surrogate."""
    parsed = jsonrpc.parse(frame)
    assert type(parsed) is Rejected and parsed.code == -32700
    answer = jsonrpc.encode_error(parsed.id, parsed.code, parsed.message)
    assert "\\ud800" in json.loads(answer)["error"]["message"]


def test_a_frame_too_deep_with_a_repeated_id_is_answered_with_null() -> None:
    """Past the decoder's own depth the ids are found by a scan of the first 64 KiB."""
    deep = b"[" * 2000 + b"]" * 2000
    for ids, expected in ((b'"id":1', 1), (b'"id":1,"id":2', None)):
        parsed = jsonrpc.parse(b'{"jsonrpc":"2.0",' + ids + b',"method":"m","x":' + deep + b"}")
        assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32600, expected)


def test_a_frame_over_the_value_budget_is_a_parse_error_under_its_id() -> None:
    """Its fault is not looked for (the rule is named, not its pointer); the id is scanned."""
    zeros = b"0," * faults.MAX_VALUES + b"0"
    frame = b'{"jsonrpc":"2.0","id":"v1","method":"ping","params":[' + zeros + b",NaN]}"
    parsed = jsonrpc.parse(frame)
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32700, "v1")
    assert parsed.message.startswith("Parse error: NaN and Infinity are not JSON numbers")
    twice = jsonrpc.parse(frame.replace(b'"id":"v1",', b'"id":"v1","id":"v2",'))
    assert type(twice) is Rejected and (twice.code, twice.id) == (-32700, None)


def test_scanned_id_is_null_when_the_two_ends_name_an_id_each() -> None:
    """The head and the tail of an oversized frame: two "id" members leave it unknown."""
    head = b'{"jsonrpc":"2.0","id":"h","params":[1,'
    assert jsonrpc.scanned_id(head, b'2],"id":"t"}') is None
    assert jsonrpc.scanned_id(head, b"2]}") == "h"
    assert jsonrpc.scanned_id(b'{"params":[1,', b'2],"id":"t"}') == "t"
    assert jsonrpc.scanned_id(b'{"id":"h","id":"g","params":[1,', b"2]}") is None


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("A9._:/-x", True),
        ("x" * 128, True),
        ("x" * 129, False),
        ("", False),
        ("-a", False),
        ("a b", False),
        ("é", False),
        (7, False),
    ],
)
def test_run1_request_ids_follow_the_grammar(value: object, valid: bool) -> None:
    """Run/1 ids are 1-128 bytes of [A-Za-z0-9][A-Za-z0-9._:/-]*."""
    assert jsonrpc.is_run1_id(value) is valid


def test_mcp_ids_are_strings_or_integers_but_not_booleans() -> None:
    """MCP allows string and integer ids only."""
    assert [jsonrpc.is_mcp_id(v) for v in ("x", 0, True, None, 1.0)] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_encoded_frames_are_one_line_of_json_ending_in_lf() -> None:
    """Results, errors and notifications each encode to exactly one LF-terminated line."""
    frames = [
        jsonrpc.encode_result("r", {"text": "a\nb"}),
        jsonrpc.encode_raw_result(5, b'{"tools":[]}'),
        jsonrpc.encode_error(None, jsonrpc.PARSE_ERROR, "bad"),
        jsonrpc.encode_error(1, jsonrpc.OPERATION_FAILED, "no", {"code": "CANCELLED"}),
        jsonrpc.encode_notification("notifications/progress", {"progress": 1}),
    ]
    for frame in frames:
        assert frame.endswith(b"\n")
        assert frame.count(b"\n") == 1
    assert [json.loads(f) for f in frames] == [
        {"jsonrpc": "2.0", "id": "r", "result": {"text": "a\nb"}},
        {"jsonrpc": "2.0", "id": 5, "result": {"tools": []}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "bad"}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32000, "message": "no", "data": {"code": "CANCELLED"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
    ]


def test_a_head_ending_inside_a_string_still_names_the_id() -> None:
    """A string left open is one token to the end, read once (not again at each quote)."""
    assert jsonrpc.leading_id(b'{"id":"h1","x":"' + b'\\"' * 1000) == "h1"
    assert jsonrpc.leading_id(b'{"x":"a","id":"h') is None


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (b"null", None),
        (b"true", None),
        (b"false", None),
        (b"NaN", None),
        (b"Infinity", None),
        (b"-Infinity", None),
        (b"1.5", None),
        (b"-2e3", None),
        (b"1E+2", None),
        (b"007", None),
        (b"-", None),
        (b"{}", None),
        (b'["a"]', None),
        (b"-12", -12),
        (b"0", 0),
        (b' "s" ', "s"),
    ],
)
def test_a_scanned_id_is_exactly_the_value_after_its_key(written: bytes, expected: object) -> None:
    """Literals, fractions and containers are whole values, never the next key taken for it."""
    frame = b'{"jsonrpc":"2.0","id":' + written + b',"method":"ping","params":{"x":[1]}}'
    assert jsonrpc.leading_id(frame) == expected
    assert jsonrpc.scanned_id(frame, b"") == expected


def test_a_frame_over_the_value_budget_with_a_null_id_is_answered_with_null() -> None:
    """The tester's frame: `"id":null` and 1,000,001 values, then NaN."""
    zeros = b"0," * faults.MAX_VALUES + b"0"
    frame = b'{"jsonrpc":"2.0","id":null,"method":"ping","params":{"p":[' + zeros + b'],"x":NaN}}'
    parsed = jsonrpc.parse(frame)
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32700, None)


def test_a_frame_too_deep_with_a_null_id_is_answered_with_null() -> None:
    """A small frame nested 3,000 deep: its `"id":null` is the id, not `"method"`."""
    deep = b"[" * 3000 + b"]" * 3000
    parsed = jsonrpc.parse(b'{"jsonrpc":"2.0","id":null,"method":"ping","params":' + deep + b"}")
    assert type(parsed) is Rejected and (parsed.code, parsed.id) == (-32600, None)


def _cut_at_64_kib(before_cut: bytes, after_cut: bytes) -> bytes:
    """A frame whose first 64 KiB end with `before_cut` (padding fills a string before it)."""
    start = b'{"jsonrpc":"2.0","method":"ping","pad":"'
    pad = b"x" * (64 * 1024 - len(start) - len(before_cut))
    return start + pad + before_cut + after_cut


@pytest.mark.parametrize(
    ("before_cut", "after_cut"),
    [
        (b'","id":', b'"A","id":"B"}'),
        (b'","id"', b':"A","id":"B"}'),
        (b'","i', b'd":"A","id":"B"}'),
        (b'","id":12', b'34,"id":"B"}'),
        (b'","id":12', b"34}"),
    ],
)
def test_an_id_the_64_kib_cut_off_leaves_the_frame_id_unknown(
    before_cut: bytes, after_cut: bytes
) -> None:
    """A key or value straddling the scanned head: not the tail's id, nor a shortened one."""
    frame = _cut_at_64_kib(before_cut, after_cut)
    assert jsonrpc.scanned_id(frame[: 64 * 1024], frame[64 * 1024 :]) is None


def test_an_id_wholly_in_the_head_is_still_named_next_to_the_cut() -> None:
    """The cut ends after the id's value (or inside another key): the id is known."""
    frame = _cut_at_64_kib(b'","id":"A","z', b'":1}')
    assert jsonrpc.scanned_id(frame[: 64 * 1024], frame[64 * 1024 :]) == "A"
