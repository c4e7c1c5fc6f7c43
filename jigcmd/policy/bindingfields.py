"""A Binding's Flow fields beside its commands: `settings` and `slots` (the reference's shapes).

jigcmd runs no Flow, so neither grants anything here; both are part of the reviewed policy
all the same (a lock pins them, a change is drift), so that a Binding written for the
reference host is admitted as it is written. `settings` is a JSON object; `slots` maps at
most 256 LocalNames to a run-target selector, `flow:<path>` or `binding:<LocalName>`.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from typing import Any, Final

from jigcmd.contract import LOCAL_NAME_MAX_CHARS
from jigcmd.policy.paths import is_local_name, path_problem
from jigcmd.policy.pointers import escape, kind

__all__ = ["MAX_SLOTS", "parse_settings", "parse_slots"]

MAX_SLOTS: Final = 256
# JSON/1's integers: what a JavaScript number holds exactly.
_SAFE_INTEGER: Final = 2**53 - 1

# (pointer, rule, reason) -> the error to raise.
Fail = Callable[[str, str, str], Exception]


def parse_settings(value: object, fail: Fail) -> dict[str, Any]:
    """`settings`: an object of JSON values (no TOML dates, no NaN, no unsafe integers)."""
    if not isinstance(value, dict):
        raise fail("/settings", "settings", f"must be an object, got {kind(value)}")
    _check_json(value, "/settings", fail)
    return value


def _check_json(value: object, pointer: str, fail: Fail) -> None:
    if value is None or isinstance(value, str | bool):
        return
    if isinstance(value, int):
        if abs(value) > _SAFE_INTEGER:
            raise fail(pointer, "settings", f"integer {value} is beyond ±(2^53-1), not JSON/1")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise fail(pointer, "settings", f"{value} is not a JSON number")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_json(item, f"{pointer}/{escape(str(key))}", fail)
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{pointer}/{index}", fail)
        return
    what = "a date or time" if isinstance(value, datetime.date | datetime.time) else kind(value)
    raise fail(pointer, "settings", f"settings hold JSON values only, not {what}")


def parse_slots(value: object, fail: Fail) -> dict[str, str]:
    """`slots`: LocalName -> `flow:<project path>` or `binding:<LocalName>`."""
    if not isinstance(value, dict):
        raise fail("/slots", "slots", f"must be an object, got {kind(value)}")
    if len(value) > MAX_SLOTS:
        raise fail("/slots", "slots", f"at most {MAX_SLOTS} slots, got {len(value)}")
    slots: dict[str, str] = {}
    for name, target in value.items():
        pointer = f"/slots/{escape(str(name))}"
        if not isinstance(name, str) or not is_local_name(name):
            raise fail(
                pointer,
                "slots",
                f"slot name {name!r} is not a LocalName (at most {LOCAL_NAME_MAX_CHARS} "
                "characters)",
            )
        slots[name] = _selector(target, pointer, fail)
    return slots


def _selector(target: object, pointer: str, fail: Fail) -> str:
    if isinstance(target, str):
        if target.startswith("flow:"):
            problem = path_problem(target[5:])
            if problem is None:
                return target
            raise fail(pointer, "slots", f"flow path {target[5:]!r}: {problem}")
        if target.startswith("binding:") and is_local_name(target[8:]):
            return target
    raise fail(pointer, "slots", f"must select flow:<path> or binding:<id>, got {_shown(target)}")


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else kind(value)
