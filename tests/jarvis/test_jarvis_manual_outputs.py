"""The UTCP manual of the real `jigcmd jarvis` describes its answers exactly, as a client reads it.

Real answers (signed runs included) are validated against the manual's own output schemas
with jsonschema; the schemas are closed, so a field an answer carries and the manual does
not list fails. And the manual read under another name, as python-utcp names its tools.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from utcp.data.auth_implementations.api_key_auth import ApiKeyAuth  # type: ignore[import-untyped]
from utcp.utcp_client import UtcpClient  # type: ignore[import-untyped]
from utcp_http.http_call_template import HttpCallTemplate  # type: ignore[import-untyped]

from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body
from tests.jarvis.utcp_setup import body

pytestmark = pytest.mark.envelope

ANSWER_S = 30.0


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child (it signs every completed run) for the whole module."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path_factory.mktemp("jarvis")) as child:
        yield child


def _call(jarvis: JarvisChild, tool: str, **args: Any) -> dict[str, Any]:
    with httpx.Client(timeout=ANSWER_S) as client:
        answer = client.post(
            f"{jarvis.base}/tools/{tool}", json=invoke_body(tool, **args), headers=auth()
        )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _outputs(jarvis: JarvisChild) -> dict[str, Any]:
    """Each tool's output schema, as `GET /utcp` serves it."""
    manual = httpx.get(f"{jarvis.base}/utcp", headers=auth(), timeout=ANSWER_S).json()
    return {tool["name"]: tool["outputs"] for tool in manual["tools"]}


def _answers(jarvis: JarvisChild) -> list[tuple[str, dict[str, Any]]]:
    """(tool, answer) for each shape: a check either way, a run allowed and denied, a record."""
    created = _call(jarvis, "jarvis.run.create", argv=["echo", "hi"])
    assert created["attestation"] is not None, created
    fetched = _call(jarvis, "jarvis.run.get", run_id=created["run_id"])
    assert fetched["attestation"] is not None, fetched
    return [
        ("jarvis.policy.check", _call(jarvis, "jarvis.policy.check", argv=["echo"])),
        ("jarvis.policy.check", _call(jarvis, "jarvis.policy.check", argv=["rm", "-rf", "/"])),
        ("jarvis.run.create", created),
        ("jarvis.run.create", _call(jarvis, "jarvis.run.create", argv=["rm", "-rf", "/"])),
        ("jarvis.run.get", fetched),
    ]


def test_every_answer_is_valid_against_the_manuals_output_schema(jarvis: JarvisChild) -> None:
    """policy.check, run.create (allowed, signed; denied) and run.get, `attestation` and all."""
    outputs = _outputs(jarvis)
    for tool, answer in _answers(jarvis):
        jsonschema.validate(answer, outputs[tool])
        # Every field it carries is one the manual lists (`attestation` among them).
        assert set(answer) <= set(outputs[tool]["properties"]), (tool, answer.keys())


@pytest.mark.parametrize(
    ("where", "field"),
    [((), "note"), (("attestation",), "note"), (("stdout",), "note")],
    ids=["top-level", "attestation", "stdout"],
)
def test_a_field_the_manual_does_not_list_fails_its_schema(
    jarvis: JarvisChild, where: tuple[str, ...], field: str
) -> None:
    """The schemas are closed: an answer with one more field is not what the manual says."""
    outputs = _outputs(jarvis)
    created = _call(jarvis, "jarvis.run.create", argv=["echo", "hi"])
    fetched = _call(jarvis, "jarvis.run.get", run_id=created["run_id"])
    for tool, answer in (("jarvis.run.create", created), ("jarvis.run.get", fetched)):
        changed = copy.deepcopy(answer)
        target = changed
        for key in where:
            target = target[key]
        target[field] = "reviewed and approved"
        with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
            jsonschema.validate(changed, outputs[tool])


async def test_a_manual_registered_under_another_name_prefixes_every_tool_name(
    jarvis: JarvisChild,
) -> None:
    """`my_jarvis`: its token variable is `my__jarvis_…`, its tools `my_jarvis.jarvis.…`, and
    the body still names the tool `jarvis.policy.check`."""
    client = await UtcpClient.create(
        config={"variables": {"my__jarvis_JARVIS_BEARER_TOKEN": TOKEN}}
    )
    try:
        registered = await client.register_manual(
            HttpCallTemplate(
                name="my_jarvis",
                url=f"{jarvis.base}/utcp",
                http_method="GET",
                auth=ApiKeyAuth(
                    api_key="Bearer ${JARVIS_BEARER_TOKEN}",
                    var_name="Authorization",
                    location="header",
                ),
            )
        )
        assert registered.success, registered.errors
        names = {tool.name for tool in registered.manual.tools}
        checked = await client.call_tool(
            "my_jarvis.jarvis.policy.check", body("jarvis.policy.check", argv=["echo"])
        )
    finally:
        await client.close()
    assert names == {
        "my_jarvis.jarvis.policy.check",
        "my_jarvis.jarvis.run.create",
        "my_jarvis.jarvis.run.get",
    }
    assert checked["decision"] == "allow"
