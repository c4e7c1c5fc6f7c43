"""The UTCP manual of the real `jigcmd jarvis` admits the calls jarvis serves, not those it refuses.

Each call is validated with jsonschema against the input schema `GET /utcp` serves, and sent:
a call the schema refuses is one jarvis answers 400, one at the bound is one it serves, and a
number the schema counts as an integer (`5000.0`, `1e3`) is one jarvis takes as one. The one
gap, stated in the manual: `maxLength` counts characters, jarvis's bound is UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest

from jigcmd.jarvis.tools import ARGV_ITEM_MAX_BYTES, PATH_MAX_BYTES, TIMEOUT_MS_MAX
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth, invoke_body

ANSWER_S = 30.0
_TOOL = "jarvis.policy.check"


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child for the module."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path_factory.mktemp("jarvis")) as child:
        yield child


@pytest.fixture(scope="module")
def inputs(jarvis: JarvisChild) -> dict[str, Any]:
    """The schema of `jarvis.policy.check`'s `args`, in the input schema `GET /utcp` serves."""
    manual = httpx.get(f"{jarvis.base}/utcp", headers=auth(), timeout=ANSWER_S).json()
    (tool,) = [tool for tool in manual["tools"] if tool["name"] == _TOOL]
    schema: dict[str, Any] = tool["inputs"]["properties"]["body"]["properties"]["args"]
    return schema


def _status(jarvis: JarvisChild, args: dict[str, Any]) -> httpx.Response:
    with httpx.Client(timeout=ANSWER_S) as client:
        return client.post(
            f"{jarvis.base}/tools/{_TOOL}", json=invoke_body(_TOOL, **args), headers=auth()
        )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"argv": ["echo", "x" * (ARGV_ITEM_MAX_BYTES + 1)]}, id="long-item"),
        pytest.param({"argv": ["x" * (ARGV_ITEM_MAX_BYTES + 1)]}, id="long-program"),
        pytest.param({"argv": ["echo", "a\0b"]}, id="nul"),
        pytest.param({"argv": [""]}, id="empty-program"),
        pytest.param({"argv": ["echo"], "cwd": "relative"}, id="relative-cwd"),
        pytest.param({"argv": ["echo"], "cwd": ""}, id="empty-cwd"),
        pytest.param({"argv": ["echo"], "cwd": "/" + "d" * PATH_MAX_BYTES}, id="long-cwd"),
        pytest.param({"argv": ["echo"], "timeout_ms": TIMEOUT_MS_MAX + 1}, id="timeout"),
    ],
)
def test_a_call_the_manual_refuses_is_one_jarvis_refuses(
    jarvis: JarvisChild, inputs: dict[str, Any], args: dict[str, Any]
) -> None:
    """The schema says no, and so does jarvis (400)."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, inputs)
    answer = _status(jarvis, args)
    assert answer.status_code == 400, answer.text


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"argv": ["echo", "x" * ARGV_ITEM_MAX_BYTES]}, id="item-at-bound"),
        pytest.param({"argv": ["echo"], "cwd": "/"}, id="root-cwd"),
        pytest.param({"argv": ["echo"], "timeout_ms": TIMEOUT_MS_MAX}, id="timeout-at-bound"),
    ],
)
def test_a_call_at_the_bounds_is_admitted_by_both(
    jarvis: JarvisChild, inputs: dict[str, Any], args: dict[str, Any]
) -> None:
    """The schema admits it, and jarvis answers it (a decision, not a 400)."""
    jsonschema.validate(args, inputs)
    answer = _status(jarvis, args)
    assert answer.status_code == 200, answer.text


def test_the_manual_states_its_bound_in_utf8_bytes(inputs: dict[str, Any]) -> None:
    """`maxLength` counts characters: the description says the bound is bytes."""
    argv = inputs["properties"]["argv"]
    assert f"at most {ARGV_ITEM_MAX_BYTES} UTF-8 bytes" in argv["description"]
    assert argv["items"]["maxLength"] == ARGV_ITEM_MAX_BYTES


def _args_schema(jarvis: JarvisChild, name: str) -> dict[str, Any]:
    """The schema of tool `name`'s `args`, in the manual `GET /utcp` serves."""
    manual = httpx.get(f"{jarvis.base}/utcp", headers=auth(), timeout=ANSWER_S).json()
    (tool,) = [tool for tool in manual["tools"] if tool["name"] == name]
    schema: dict[str, Any] = tool["inputs"]["properties"]["body"]["properties"]["args"]
    return schema


def _post_raw(jarvis: JarvisChild, name: str, args: str) -> httpx.Response:
    """`args` sent as written (a literal `1e3`, digits no JSON encoder would write)."""
    body = f'{{"tool": "{name}", "args": {args}}}'
    headers = {**auth(), "Content-Type": "application/json"}
    return httpx.post(f"{jarvis.base}/tools/{name}", content=body, headers=headers, timeout=30)


def test_an_integer_written_with_a_zero_fraction_is_taken_as_the_schema_takes_it(
    jarvis: JarvisChild,
) -> None:
    """JSON Schema counts `5000.0` and `1e3` as integers: valid, and jarvis serves them."""
    create, get = (_args_schema(jarvis, n) for n in ("jarvis.run.create", "jarvis.run.get"))
    validator = jsonschema.Draft202012Validator
    validator(create).validate({"argv": ["echo", "x"], "timeout_ms": 5000.0})
    with httpx.Client(timeout=ANSWER_S) as client:
        made = jarvis.call(client, "jarvis.run.create", argv=["echo", "x"], timeout_ms=5000.0)
        assert made.status_code == 200, made.text
        run_id = made.json()["run_id"]
        assert made.json()["status"] == "exited", made.text
        validator(get).validate({"run_id": float(run_id)})
        read = jarvis.call(client, "jarvis.run.get", run_id=float(run_id))
        assert read.status_code == 200, read.text
        assert read.json()["run_id"] == run_id
    checked = _post_raw(jarvis, _TOOL, '{"argv": ["echo"], "timeout_ms": 1e3}')
    assert checked.status_code == 200, checked.text


@pytest.mark.parametrize(
    ("name", "args", "words"),
    [
        pytest.param(
            "jarvis.run.get", {"run_id": 2**53}, "at '/args/run_id' is beyond", id="run-id-2^53"
        ),
        pytest.param(
            "jarvis.run.get", {"run_id": 2**64}, "at '/args/run_id' is beyond", id="run-id-2^64"
        ),
        pytest.param(
            "jarvis.run.get",
            {"run_id": 1.5},
            "args.run_id must be an integer (a number with no fraction), not 1.5",
            id="run-id-fraction",
        ),
        pytest.param(
            _TOOL,
            {"argv": ["echo"], "timeout_ms": 5000.5},
            "args.timeout_ms must be an integer (a number with no fraction), not 5000.5",
            id="timeout-fraction",
        ),
    ],
)
def test_a_number_the_schema_refuses_is_refused_saying_what_is_wrong_with_it(
    jarvis: JarvisChild, name: str, args: dict[str, Any], words: str
) -> None:
    """Past `maximum` or with a fraction: the schema says no, jarvis answers 400 saying why."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(_args_schema(jarvis, name)).validate(args)
    with httpx.Client(timeout=ANSWER_S) as client:
        answer = jarvis.call(client, name, **args)
    assert answer.status_code == 400, answer.text
    assert words in answer.json()["error"], answer.text
    assert "from 1 to" not in answer.json()["error"], answer.text


def test_an_integer_too_long_to_decode_is_refused_in_the_words_of_a_20_digit_one(
    jarvis: JarvisChild,
) -> None:
    """5000 digits: where it is and that it is beyond ±(2^53-1), not the decoder's words."""
    answer = _post_raw(jarvis, "jarvis.run.get", '{"run_id": ' + "9" * 5000 + "}")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error == (
        "request body is not strict JSON: integer 999999999999999999999999… (5000 digits) "
        "at '/args/run_id' is beyond ±(2^53-1)"
    ), error
