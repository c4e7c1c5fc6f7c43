"""Policies jarvis refuses at start, and `jigcmd doctor --jarvis-policy` fails, saying why.

A rule's `timeout_ms_max` above the policy's ceiling could never take effect (every run is
cut to the ceiling first); a rule's `env` may not pass the variables jarvis sets itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jarvis.doctorline import jarvis_policy_check

_TOKEN_ENV = {"JARVIS_BEARER_TOKEN": "jv_test-token-0123456789abcdef"}
_RULE = (
    'search_path = ["/usr/bin", "/bin"]\n'
    'host_dirs = ["/usr", "/bin", "/sbin", "/lib", "/lib64"]\n'
    '[[rule]]\nname = "sleeper"\ndecision = "allow"\nargv0 = ["sleep"]\n'
)


def _start(policy: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy),
            "--port", "0", "--state-dir", str(tmp_path / "state"),
        ],
        env={**os.environ, **_TOKEN_ENV},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ceiling", "said"),
    [
        ("", "timeout_ms_ceiling = 10000 (the default; the policy sets none)"),
        ("timeout_ms_ceiling = 30000\n", "timeout_ms_ceiling = 30000:"),
    ],
)
def test_a_rule_cap_above_the_ceiling_stops_jarvis_naming_the_rule_its_cap_and_the_ceiling(
    tmp_path: Path, ceiling: str, said: str
) -> None:
    """Exit 2 and one line naming the rule, its timeout_ms_max, the ceiling and the fix."""
    policy = tmp_path / "policy.toml"
    policy.write_text(ceiling + _RULE + "timeout_ms_max = 60000\n")
    done = _start(policy, tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "rule[0] ('sleeper'): timeout_ms_max = 60000 is above the policy's" in line, line
    assert said in line, line
    assert "raise the ceiling explicitly with top-level timeout_ms_ceiling = 60000" in line
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("var", "why"),
    [
        ("PATH", "every run's PATH is the policy's search_path"),
        ("LANG", "jarvis sets every run's LANG to C.UTF-8 itself"),
        ("jarvis_bearer_token", "JARVIS_* variables hold the server's own settings"),
    ],
)
def test_a_rule_passing_a_variable_jarvis_owns_stops_jarvis_saying_why(
    tmp_path: Path, var: str, why: str
) -> None:
    """`env = ["PATH"]` (LANG, JARVIS_*): exit 2, the line says why the rule may not."""
    policy = tmp_path / "policy.toml"
    policy.write_text(_RULE + f'env = ["TZ", "{var}"]\n')
    done = _start(policy, tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert f"rule[0] ('sleeper'): env may not pass {var!r}: {why}" in line, line


@pytest.mark.envelope
def test_the_doctor_fails_a_rule_cap_above_the_ceiling_in_jarviss_words(tmp_path: Path) -> None:
    """`doctor --jarvis-policy`: a failed `jarvis policy` line naming the rule and ceiling."""
    policy = tmp_path / "policy.toml"
    policy.write_text(_RULE + "timeout_ms_max = 60000\n")
    check = jarvis_policy_check(tmp_path, policy)
    assert check["status"] == "FAIL", check
    assert "timeout_ms_max = 60000 is above the policy's timeout_ms_ceiling" in check["detail"]
