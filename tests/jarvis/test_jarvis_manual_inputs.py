"""The UTCP manual of the real `jigcmd jarvis` admits the calls jarvis serves, not those it refuses.

Each call is validated with jsonschema against the input schema `GET /utcp` serves, and sent:
a call the schema refuses is one jarvis answers 400, one at the bound is one it serves. The one
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
