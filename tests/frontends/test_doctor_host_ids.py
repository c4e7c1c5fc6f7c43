"""The doctor's `host ids` line: whoever in /etc holds an id of the envelopes' lease range."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.envelope import hostids
from jigcmd.frontends.diagnosis import containerfacts
from jigcmd.frontends.diagnosis.hostidcheck import briefly, overlapping
from tests.frontends.test_doctor_cli import checks, doctor
from tests.required import unavailable

pytestmark = pytest.mark.envelope

_FIRST, _COUNT = hostids.RANGE


def test_users_groups_and_subordinate_ranges_inside_the_range_are_each_named() -> None:
    """Each holder inside the range is one phrase; those outside, or malformed, are none."""
    found = overlapping(
        _FIRST,
        _COUNT,
        passwd=f"root:x:0:0::/root:/bin/sh\nodd:x:{_FIRST + 5}:1::/:/bin/false\nbroken\n",
        group=f"root:x:0:\npod:x:{_FIRST + _COUNT - 1}:\nafter:x:{_FIRST + _COUNT}:\n",
        subuid=f"me:100000:65536\nwide:{_FIRST - 10}:20\n",
        subgid="me:100000:65536\nbad:line\n",
    )
    assert found == [
        f"user odd ({_FIRST + 5})",
        f"group pod ({_FIRST + _COUNT - 1})",
        f"subordinate uids of wide ({_FIRST - 10}-{_FIRST + 9})",
    ]


def test_a_block_of_users_in_the_range_is_named_by_a_few_and_counted() -> None:
    """65,536 users inside the range: five named, the rest a count, not a line of megabytes."""
    passwd = "".join(f"u{n}:x:{n}:{n}::/:/bin/sh\n" for n in range(_FIRST, _FIRST + _COUNT))
    said = briefly(overlapping(_FIRST, _COUNT, passwd=passwd, group="", subuid="", subgid=""))
    assert said.startswith(f"user u{_FIRST} ({_FIRST}); ")
    assert said.endswith(f"; and {_COUNT - 5:,} more") and len(said) < 200


def test_the_doctor_names_the_range_envelopes_lease_from(tmp_path: Path) -> None:
    """As root on a host whose /etc holds none of it: ok, naming the range and the directory."""
    if os.geteuid() != 0:
        unavailable("needs root: rootless, no id is leased (the line says so)")
    found = checks(doctor("--json", "--state-dir", str(tmp_path / "state"), home=tmp_path))
    line = found["host ids"]
    # In a container of its own /run/jigcmd (this suite's CI) the line warns, naming the bind.
    own = containerfacts.engine() is not None and "/run/jigcmd is its own" in line["detail"]
    assert line["status"] == ("warn" if own else "ok"), line
    assert line["detail"].startswith(f"{_FIRST}-{_FIRST + _COUNT - 1}, "), line
    assert hostids.DIRECTORY in line["detail"]
