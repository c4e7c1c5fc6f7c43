"""A Binding's Flow fields `settings` and `slots`: closed, checked, pinned, digest-stable."""

from __future__ import annotations

import datetime
import hashlib

import msgspec
import pytest

from jigcmd.policy.binding import BindingError, parse_binding, parse_binding_file

COMMANDS = {"cli": {"run": "src/cli.ts"}}


def test_settings_and_slots_are_part_of_the_canonical_policy() -> None:
    """Both are pinned: a change to either changes the digest."""
    plain = parse_binding({"package": "p", "commands": COMMANDS})
    fields = parse_binding(
        {
            "package": "p",
            "settings": {"style": "compact", "depth": 2},
            "slots": {"agent": "binding:reviewer", "child": "flow:flows/child"},
            "commands": COMMANDS,
        }
    )
    assert fields.settings == {"style": "compact", "depth": 2}
    assert fields.slots == {"agent": "binding:reviewer", "child": "flow:flows/child"}
    document = msgspec.to_builtins(fields.document())
    assert document["settings"] == {"style": "compact", "depth": 2}
    assert len({plain.digest(), fields.digest()}) == 2
    changed = parse_binding({"package": "p", "settings": {"style": "full"}, "commands": COMMANDS})
    assert changed.digest() not in {plain.digest(), fields.digest()}


def test_empty_settings_and_slots_keep_the_digest_a_binding_always_had() -> None:
    """A Binding without them (or with them empty) hashes exactly as before they existed."""
    plain = parse_binding({"package": "p", "commands": COMMANDS})
    empty = parse_binding({"package": "p", "settings": {}, "slots": {}, "commands": COMMANDS})
    assert plain.digest() == empty.digest()
    assert set(msgspec.to_builtins(plain.document())) == {"package", "commands"}
    # The digest of {"commands":{"cli":{"run":"src/cli.ts"}},"package":"p"}, as locks hold it.
    canonical = b'{"commands":{"cli":{"run":"src/cli.ts"}},"package":"p"}'
    assert plain.digest() == "sha256:" + hashlib.sha256(canonical).hexdigest()


def test_toml_settings_and_slots_read_as_json_does() -> None:
    """The TOML form of the fields is the same policy as the JSON form."""
    toml = parse_binding_file(
        b'package = "p"\n[settings]\nstyle = "compact"\nratio = 1.0\n'
        b'[slots]\nagent = "binding:reviewer"\n[commands.cli]\nrun = "src/cli.ts"\n',
        suffix=".toml",
        source="b.toml",
    )
    json = parse_binding(
        {
            "package": "p",
            "settings": {"style": "compact", "ratio": 1},
            "slots": {"agent": "binding:reviewer"},
            "commands": COMMANDS,
        }
    )
    assert toml.digest() == json.digest()


@pytest.mark.parametrize(
    ("fields", "pointer", "reason"),
    [
        ({"settings": []}, "/settings", "must be an object, got an array"),
        ({"settings": {"at": datetime.date(2026, 1, 1)}}, "/settings/at", "not a date or time"),
        ({"settings": {"n": 2**53}}, "/settings/n", "beyond"),
        ({"settings": {"x": [float("nan")]}}, "/settings/x/0", "not a JSON number"),
        ({"slots": "x"}, "/slots", "must be an object"),
        ({"slots": {"Agent": "binding:x"}}, "/slots/Agent", "not a LocalName"),
        ({"slots": {"a": "binding:Bad"}}, "/slots/a", "flow:<path> or binding:<id>"),
        ({"slots": {"a": "agent:x"}}, "/slots/a", "flow:<path> or binding:<id>"),
        ({"slots": {"a": "flow:../up"}}, "/slots/a", "'..'"),
        ({"slots": {f"s{i}": "binding:x" for i in range(257)}}, "/slots", "at most 256"),
        ({"http": {}}, "/http", "a Binding has only 'package', 'settings', 'slots' and"),
    ],
)
def test_each_field_rule_is_enforced(fields: dict[str, object], pointer: str, reason: str) -> None:
    """A malformed field is refused, naming where and why."""
    with pytest.raises(BindingError) as caught:
        parse_binding({"package": "p", **fields}, source="b.toml")
    assert caught.value.pointer == pointer
    assert reason in caught.value.reason
