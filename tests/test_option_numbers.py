"""A number on the command line is digits 0-9 alone, as `JIGCMD_ROOT_DEADLINE_UNIX_MS` is.

`int()` and `float()` also take " 5000", "+5000", "5_000", "-0", other scripts' digits and
(for seconds) "1e0" or "nan": `--root-deadline-unix-ms 1_000` became a deadline in 1970.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jigcmd.cli import main
from jigcmd.frontends.serve import ROOT_DEADLINE_VARIABLE, RunIdError, resolve_root_deadline

_LOOSE = [" 5000", "5000 ", "+5000", "5_000", "-0", "\uff15\uff10\uff10\uff10", "0x10"]


def _verbs(tmp_path: Path) -> dict[str, list[str]]:
    """Each verb with a number option, up to the option (nothing it names exists)."""
    binding = ["--binding", str(tmp_path / "missing.toml")]
    state = ["--state-dir", str(tmp_path / "state")]
    return {
        "--root-deadline-unix-ms": ["serve", *binding, *state],
        "--max-envelopes": ["serve", *binding, *state],
        "--result-budget": ["serve", *binding, *state],
        "--queue-wait": ["serve", *binding, *state],
        "--timeout": ["run", *binding, *state, "tests", "--files", str(tmp_path)],
        "--port": ["jarvis", "--policy", str(tmp_path / "missing.toml"), *state],
        "--limit": ["jarvis-audit", *state],
    }


@pytest.mark.parametrize("text", _LOOSE)
@pytest.mark.parametrize(
    "option",
    [
        "--root-deadline-unix-ms",
        "--max-envelopes",
        "--result-budget",
        "--queue-wait",
        "--timeout",
        "--port",
        "--limit",
    ],
)
def test_a_number_option_refuses_what_is_not_plain_digits(
    tmp_path: Path, option: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A usage error (exit 2) naming the option and the rule, before anything is opened."""
    assert main([*_verbs(tmp_path)[option], f"{option}={text}"]) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {text!r} is not" in err
    assert "digits 0-9" in err
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("text", ["1e0", "nan", "inf", ".", "1.5.0"])
@pytest.mark.parametrize("option", ["--queue-wait", "--timeout"])
def test_seconds_are_digits_and_a_decimal_point_only(
    tmp_path: Path, option: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No exponent, no nan or inf: what is not written as seconds is refused as such."""
    assert main([*_verbs(tmp_path)[option], f"{option}={text}"]) == 2
    assert f"argument {option}: {text!r} is not a number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize("text", _LOOSE)
def test_the_deadline_variable_refuses_exactly_what_the_flag_refuses(text: str) -> None:
    """One rule for both: the variable's refusal names it, and the text, as the flag's does."""
    refused = re.escape(f"{ROOT_DEADLINE_VARIABLE}: {text!r} is not Unix milliseconds")
    with pytest.raises(RunIdError, match=refused):
        resolve_root_deadline(None, {ROOT_DEADLINE_VARIABLE: text})


def test_plain_digits_are_read_alike_from_the_flag_and_the_variable() -> None:
    """`1798761600000` means the same from either; a leading zero is still a number."""
    assert resolve_root_deadline(1798761600000, {}) == 1798761600000
    assert resolve_root_deadline(None, {ROOT_DEADLINE_VARIABLE: "01798761600000"}) == 1798761600000
    with pytest.raises(RunIdError, match="--root-deadline-unix-ms: '-1' is not Unix"):
        resolve_root_deadline(-1, {})


@pytest.mark.parametrize(("option", "text"), [("--older-than", " 7d"), ("--older-than", "7d\n")])
def test_a_duration_is_refused_with_space_around_it(
    tmp_path: Path, option: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A duration is as strict as a number: `7d`, not ` 7d`."""
    assert main(["prune", "--state-dir", str(tmp_path / "state"), f"{option}={text}"]) == 2
    assert f"argument {option}: {text!r} is not a duration" in capsys.readouterr().err
