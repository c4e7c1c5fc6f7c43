"""Generated JSON Schemas and the Run/1 call params type."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

from jigcmd.contract import CallParams, RequestInput
from jigcmd.policy.schemas import generate

ROOT = Path(__file__).parents[2]


def load_generator() -> ModuleType:
    """Import scripts/gen_schemas.py, which is not part of the package."""
    spec = importlib.util.spec_from_file_location(
        "gen_schemas", ROOT / "scripts" / "gen_schemas.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_schemas_match_the_msgspec_types() -> None:
    """schemas/*.schema.json are exactly what the generator produces; rerun it if this fails."""
    stale = [
        name
        for name, content in generate().items()
        if not (ROOT / "schemas" / name).is_file()
        or (ROOT / "schemas" / name).read_bytes() != content
    ]
    assert stale == [], "run scripts/gen_schemas.py"


def test_the_check_mode_reports_stale_files(tmp_path: Path) -> None:
    """The generator's check finds missing or changed files in a schemas directory."""
    generator = load_generator()
    (tmp_path / "lock.schema.json").write_text("{}\n")
    stale = generator.stale_files(tmp_path)
    assert "lock.schema.json" in stale
    assert set(stale) == set(generate())


def test_the_package_carries_the_published_schemas_byte_for_byte() -> None:
    """An installed jigcmd finds schemas/ as it is, in the package's `schemas` directory."""
    packaged = resources.files("jigcmd") / "schemas"
    held = {entry.name: entry.read_bytes() for entry in packaged.iterdir()}
    published = {path.name: path.read_bytes() for path in (ROOT / "schemas").glob("*.json")}
    assert set(held) == set(published), "run scripts/gen_schemas.py"
    assert held == published, "run scripts/gen_schemas.py"


def test_the_check_mode_reports_a_stale_copy(tmp_path: Path) -> None:
    """A copy changed, missing or left over from a removed schema is stale."""
    generator = load_generator()
    source, copy = tmp_path / "schemas", tmp_path / "copy"
    source.mkdir()
    copy.mkdir()
    for name in ("same.json", "changed.json", "missing.json"):
        (source / name).write_text(f'"{name}"\n')
    (copy / "same.json").write_text('"same.json"\n')
    (copy / "changed.json").write_text('"old"\n')
    (copy / "removed.json").write_text('"removed.json"\n')
    stale = generator.stale_copies(source, copy)
    assert stale == ["changed.json", "missing.json", "removed.json"]


def test_schemas_are_sorted_indented_and_end_with_a_newline() -> None:
    """Every generated file is sorted-key, 2-space JSON with a trailing newline."""
    for content in generate().values():
        text = content.decode()
        assert (
            text
            == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        )


def test_call_params_schema_points_input_at_the_request_input() -> None:
    """The Run/1 params schema describes `input` by the run input definition."""
    document = json.loads(generate()["run-call-params.schema.json"])
    assert document["$ref"] == "#/$defs/CallParams"
    assert document["$defs"]["CallParams"]["properties"]["input"] == {
        "$ref": "#/$defs/RequestInput"
    }
    assert "RequestInput" in document["$defs"]


def test_evidence_schema_has_exactly_the_ten_fields() -> None:
    """The evidence schema lists the contract's ten fields and forbids others."""
    evidence = json.loads(generate()["evidence.schema.json"])["$defs"]["Evidence"]
    assert len(evidence["properties"]) == 10
    assert evidence["additionalProperties"] is False


def test_call_params_decode_with_input_left_for_validation() -> None:
    """CallParams accepts any input value; request validation judges it later, rule by rule."""
    params = msgspec.convert(
        {"operationId": "op-1", "slot": "project", "method": "run", "input": [1]}, CallParams
    )
    assert params.input == [1]
    assert params.channels is msgspec.UNSET
    assert params.deadline_unix_ms is msgspec.UNSET


def test_call_params_accept_the_optional_extensions() -> None:
    """channels and deadlineUnixMs are optional params."""
    params = msgspec.convert(
        {
            "operationId": "op-1",
            "slot": "project",
            "method": "run",
            "input": {},
            "channels": {},
            "deadlineUnixMs": 1_700_000_000_000,
        },
        CallParams,
    )
    assert params.deadline_unix_ms == 1_700_000_000_000


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"operationId": ""}, "operationId"),
        ({"operationId": "-x"}, "operationId"),
        ({"slot": "Project"}, "slot"),
        ({"extra": 1}, "extra"),
        ({"deadlineUnixMs": -1}, "deadlineUnixMs"),
    ],
)
def test_call_params_refuse_bad_fields(change: dict[str, object], where: str) -> None:
    """Bad ids, names, unknown fields and negative deadlines fail decoding at the field."""
    params = {"operationId": "op-1", "slot": "project", "method": "run", "input": {}} | change
    with pytest.raises(msgspec.ValidationError, match=where):
        msgspec.convert(params, CallParams)


def test_request_input_defaults() -> None:
    """The run input type defaults args to [] and stdin to ""."""
    value = msgspec.convert({"command": "cli", "files": {"a.ts": ""}}, RequestInput)
    assert (value.args, value.stdin) == ([], "")
