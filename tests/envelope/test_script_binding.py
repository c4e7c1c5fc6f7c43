"""TypeScript Bindings evaluated in a real envelope: the reference's layout, its rules, hostiles.

Each evaluation goes through the module's traced executor, which fails the test if anything
of the envelope is left on the host after the run.
"""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from pathlib import Path

import pytest

from jigcmd.command.bindingfile import load_binding
from jigcmd.command.runtime import find_runtime
from jigcmd.command.scriptbinding import evaluate_script
from jigcmd.policy.binding import BindingError
from tests.envelope.hostile_harness import TracedExecutor

pytestmark = [pytest.mark.envelope, pytest.mark.anyio]

DESCRIPTOR = Path(__file__).parents[2] / "schemas" / "project-command.capability.json"
JIG_TS = """import { defineJig, discover } from '@jigging/jig'

export default defineJig({
  flows: discover('./flows'),
  bindings: discover('./bindings'),
})
"""
COMMANDS_TS = "{ tests: { test: ['test/project.test.ts'] }, cli: { run: 'src/cli.ts' } }"
COMMANDS_TOML = (
    '[commands]\ntests = { test = ["test/project.test.ts"] }\ncli = { run = "src/cli.ts" }\n'
)


def binding_ts(commands: str = COMMANDS_TS, *, before: str = "", extra: str = "") -> str:
    """A Binding as the reference writes it, with `before` its definition."""
    return (
        "import { defineBinding } from '@jigging/jig'\n"
        f"{before}\n"
        "export default defineBinding({\n"
        "  package: 'flows/command',\n"
        f"  commands: {commands},{extra}\n"
        "})\n"
    )


def reference_project(root: Path, binding: str) -> Path:
    """`jig.ts`, `bindings/command.ts`, `flows/command/FLOW.md` and its contract copy."""
    (root / "bindings").mkdir(parents=True)
    (root / "flows" / "command" / "contracts").mkdir(parents=True)
    shutil.copyfile(DESCRIPTOR, root / "flows/command/contracts/project-command.capability.json")
    (root / "flows/command/FLOW.md").write_text(
        "---\nname: flows/command\nuses:\n  command:\n"
        "    contract: ./contracts/project-command.capability.json\n---\n\n# command\n"
    )
    (root / "jig.ts").write_text(JIG_TS)
    path = root / "bindings" / "command.ts"
    path.write_text(binding)
    return path


def files_of(root: Path) -> dict[Path, bytes]:
    """Every file under `root` and its bytes."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def exists(path: Path) -> bool:
    """Whether `path` exists on the host."""
    return path.exists()


async def evaluated_error(envelope: TracedExecutor, path: Path) -> BindingError:
    with pytest.raises(BindingError) as caught:
        load_binding(path, await evaluate_script(path, envelope, find_runtime()))
    return caught.value


async def test_a_reference_binding_is_the_same_policy_and_digest_as_its_toml(
    envelope: TracedExecutor, tmp_path: Path
) -> None:
    """bindings/command.ts and a binding.toml of the same policy lock to one digest."""
    path = reference_project(tmp_path, binding_ts())
    script = await evaluate_script(path, envelope, find_runtime())
    loaded = load_binding(path, script)
    toml = tmp_path / "binding.toml"
    toml.write_text('package = "flows/command"\n' + COMMANDS_TOML)
    from_toml = load_binding(toml)
    assert loaded.binding.document() == from_toml.binding.document()
    assert loaded.binding.digest() == from_toml.binding.digest()
    assert loaded.package_dir == (tmp_path / "flows" / "command").resolve()
    assert loaded.slots == ("command",)
    assert loaded.script and not from_toml.script
    assert loaded.digest == script.digest != from_toml.digest


@pytest.mark.parametrize(
    ("commands_ts", "commands_json"),
    [
        ("null", None),
        ("{ cli: { shell: 'bun test' } }", {"cli": {"shell": "bun test"}}),
        ("{ cli: { run: '../bad.ts' } }", {"cli": {"run": "../bad.ts"}}),
        ("{ cli: { run: '/tmp/bad.ts' } }", {"cli": {"run": "/tmp/bad.ts"}}),
        (
            "{ cli: { run: 'x.ts', test: ['x.test.ts'] } }",
            {"cli": {"run": "x.ts", "test": ["x.test.ts"]}},
        ),
        ("{ test: { test: [] } }", {"test": {"test": []}}),
    ],
)
async def test_the_references_invalid_commands_are_refused_from_ts_as_from_json(
    envelope: TracedExecutor, tmp_path: Path, commands_ts: str, commands_json: object
) -> None:
    """Each of the reference's bad `commands` gets the very refusal its JSON form gets."""
    path = reference_project(tmp_path, binding_ts(commands_ts))
    from_ts = await evaluated_error(envelope, path)
    json_path = tmp_path / "binding.json"
    json_path.write_text(json.dumps({"package": "flows/command", "commands": commands_json}))
    with pytest.raises(BindingError) as from_json:
        load_binding(json_path)
    assert (from_ts.rule, from_ts.pointer, from_ts.reason) == (
        from_json.value.rule,
        from_json.value.pointer,
        from_json.value.reason,
    )
    assert from_ts.source == str(path)


async def test_settings_slots_and_the_reference_fields_jigcmd_lacks(
    envelope: TracedExecutor, tmp_path: Path
) -> None:
    """settings and slots are read as TOML's are; http is refused as an unknown field."""
    path = reference_project(
        tmp_path,
        binding_ts(extra="\n  settings: { style: 'compact' },\n  slots: { agent: 'binding:a' },"),
    )
    loaded = load_binding(path, await evaluate_script(path, envelope, find_runtime()))
    assert (dict(loaded.binding.settings), dict(loaded.binding.slots)) == (
        {"style": "compact"},
        {"agent": "binding:a"},
    )
    path.write_text(binding_ts(extra="\n  http: {},"))
    error = await evaluated_error(envelope, path)
    assert (error.pointer, error.rule) == ("/http", "binding-keys")


@pytest.fixture
def listener() -> object:
    """A TCP listener on the host's loopback that no Binding may reach."""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    yield server
    server.close()


def _reached(server: socket.socket) -> bool:
    try:
        connection, _ = server.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


async def test_a_binding_that_reaches_for_the_network_is_refused_and_reaches_nothing(
    envelope: TracedExecutor, tmp_path: Path, listener: socket.socket
) -> None:
    """A fetch to the host's loopback before the export: refused, no connection made."""
    port = listener.getsockname()[1]
    path = reference_project(
        tmp_path, binding_ts(before=f"await fetch('http://127.0.0.1:{port}/')")
    )
    error = await evaluated_error(envelope, path)
    assert error.rule == "binding-script"
    assert f"{path}:2:" in error.reason or str(path) in error.reason
    assert not _reached(listener)


async def test_a_binding_that_writes_outside_is_refused_and_nothing_is_written(
    envelope: TracedExecutor, tmp_path: Path
) -> None:
    """Writes to the host's files or its own project fail inside and are refused; the host
    is unchanged. Its scratch `/tmp` is the envelope's own: a write there is discarded."""
    write = "import {{ writeFileSync }} from 'node:fs'\nwriteFileSync('{}', 'x')"
    path = reference_project(tmp_path, binding_ts())
    for target in (tmp_path / "evil.txt", Path("/etc/jigcmd-evil"), path):
        before = files_of(tmp_path)
        path.write_text(binding_ts(before=write.format(target)))
        error = await evaluated_error(envelope, path)
        assert f"{path}:3:" in error.reason, error.reason
        assert files_of(tmp_path).keys() == before.keys()
        assert not exists(tmp_path / "evil.txt") and not exists(Path("/etc/jigcmd-evil"))
    scratch = Path("/tmp") / f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    path.write_text(binding_ts(before=write.format(scratch)))
    try:
        load_binding(path, await evaluate_script(path, envelope, find_runtime()))
        assert not exists(scratch), "the envelope's scratch reached the host's /tmp"
    finally:
        scratch.unlink(missing_ok=True)


async def test_a_binding_that_loops_is_stopped_at_the_deadline_and_refused(
    envelope: TracedExecutor, tmp_path: Path
) -> None:
    """while (true) {} before the export: killed at the ceiling, refused."""
    path = reference_project(tmp_path, binding_ts(before="while (true) {}"))
    error = await evaluated_error(envelope, path)
    assert "did not finish within 10 s" in error.reason


@pytest.mark.parametrize(
    ("before", "commands", "reason"),
    [
        ("process.exit(0)", COMMANDS_TS, "ended (exit code 0) before its default export was read"),
        ("console.log('hello')", COMMANDS_TS, "printed while being evaluated"),
        ("import pad from 'left-pad'\npad", COMMANDS_TS, "Cannot find package 'left-pad'"),
        ("\nthrow new Error('not today')", COMMANDS_TS, "command.ts:3:"),
        ("const f = () => 1", "{ cli: { run: f } }", "contains a non-JSON value"),
        ("Bun.spawnSync(['/bin/sh', '-c', 'true'])", COMMANDS_TS, "threw"),
    ],
)
async def test_a_binding_that_does_more_than_define_is_refused_naming_the_file(
    envelope: TracedExecutor, tmp_path: Path, before: str, commands: str, reason: str
) -> None:
    """Exiting, printing, an absent import, a throw, a non-JSON value, a spawn: refused."""
    path = reference_project(tmp_path, binding_ts(commands, before=before))
    error = await evaluated_error(envelope, path)
    assert error.rule == "binding-script"
    assert reason in error.reason, error.reason
    assert str(error).startswith(f"{path}: ")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            "export default { package: 'flows/command' }\n",
            "its default export is object, not a defineBinding(...) result",
        ),
        (
            "import { defineBinding } from '@jigging/jig'\n"
            "export const extra = 1\nexport default defineBinding({ package: 'flows/command' })\n",
            "exports 'extra' beside its default",
        ),
        ("export const x = 1\n", "has no default export"),
    ],
)
async def test_a_binding_that_exports_something_else_is_refused(
    envelope: TracedExecutor, tmp_path: Path, source: str, reason: str
) -> None:
    """Only a defineBinding(...) result, as the default export and alone, is a Binding."""
    path = reference_project(tmp_path, source)
    error = await evaluated_error(envelope, path)
    assert reason in error.reason, error.reason


async def test_a_binding_the_projects_jig_does_not_list_is_refused(
    envelope: TracedExecutor, tmp_path: Path
) -> None:
    """jig.ts names its Bindings: a Binding outside them is refused, naming jig.ts."""
    path = reference_project(tmp_path, binding_ts())
    (tmp_path / "jig.ts").write_text(JIG_TS.replace("'./bindings'", "'./elsewhere'"))
    error = await evaluated_error(envelope, path)
    assert "discover('./elsewhere')" in error.reason
