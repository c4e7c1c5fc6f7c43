"""Credentials and fingerprints, host-profile plans, and the UTCP manual's shape."""

from __future__ import annotations

import hashlib
import json

import pytest
from utcp.data.utcp_manual import UtcpManualSerializer  # type: ignore[import-untyped]

from jigcmd.jarvis.auth import (
    CAPABILITIES,
    AuthError,
    ConfigError,
    Credentials,
    fingerprint,
    load_credentials,
    parse_capabilities,
)
from jigcmd.jarvis.manual import build_manual
from jigcmd.jarvis.planner import SCRATCH_CWD, host_plan, system_binds
from jigcmd.jarvis.policy import Decision, parse_policy
from jigcmd.plan import Bind

TOKEN = "jv_0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    "token",
    [
        TOKEN,
        "s3cr3tvalue-with-no-tag",
        # secrets.token_urlsafe(32) with a letter-led run before an `_`: all of it secret.
        "Qm7xKp2_GFHXY6ScycPCvnMTHgrr9tNpU8JlI8d8uEGS9WLyV9E",
        "abcdefgh_ijklmnopqrstuvwxyz",
    ],
)
def test_the_fingerprint_is_four_hex_of_the_sha256_and_nothing_of_the_token(token: str) -> None:
    """`tok_jarvis_<sha256[:4]>` for every token: no character of it reaches the actor name."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert fingerprint(token) == f"tok_jarvis_{digest[:4]}"


def test_an_unset_capability_list_is_the_full_owner_grant() -> None:
    """Unset JARVIS_UTCP_CAPABILITIES, and only unset, grants every tool."""
    assert parse_capabilities(None) == frozenset(CAPABILITIES)


@pytest.mark.parametrize("value", ["", " ", ",", " , ", ",,"])
def test_a_capability_list_that_names_nothing_refuses_to_start(value: str) -> None:
    """Set but naming no capability (a template whose variable was empty) grants nothing."""
    with pytest.raises(ConfigError, match="which names no capability"):
        parse_capabilities(value)


@pytest.mark.parametrize(("value", "entry"), [("run:read,", 2), (",policy:check", 1)])
def test_an_empty_entry_in_a_capability_list_refuses_to_start(value: str, entry: int) -> None:
    """An empty entry among names is refused too, naming which one."""
    with pytest.raises(ConfigError, match=f"whose entry {entry} is empty"):
        parse_capabilities(value)


def test_a_capability_list_grants_exactly_its_entries() -> None:
    """A comma list (spaces allowed) grants those and nothing else."""
    assert parse_capabilities("policy:check, run:read") == {"policy:check", "run:read"}


def test_an_unknown_capability_refuses_to_start() -> None:
    """A typo in the grant list is a configuration error, not a silent empty grant."""
    with pytest.raises(ConfigError, match="unknown capability 'run:delete'"):
        parse_capabilities("run:delete")


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({}, "is not set"),
        ({"JARVIS_BEARER_TOKEN": ""}, "is empty"),
        ({"JARVIS_BEARER_TOKEN": "  "}, "is empty"),
    ],
)
def test_the_server_refuses_to_start_without_a_token(env: dict[str, str], said: str) -> None:
    """No token, or an empty one, is a configuration error that says which."""
    with pytest.raises(ConfigError, match=f"^JARVIS_BEARER_TOKEN {said}; jarvis refuses to start"):
        load_credentials(env)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        pytest.param("Q", "is too short: jarvis needs a token of at least 16 bytes", id="short"),
        pytest.param("jv_0123456789ab", "is too short", id="fifteen"),
        pytest.param("jv_0123456789abcdéf", "not printable ASCII", id="non-ascii"),
        pytest.param("jv_0123456789\x7fabcdef", "not printable ASCII", id="control"),
        pytest.param("jv_0123 456789abcdef", "without whitespace", id="space"),
    ],
)
def test_a_token_no_client_could_send_or_anyone_could_guess_refuses_to_start(
    token: str, message: str
) -> None:
    """Refused at start, saying why, without showing any of it."""
    with pytest.raises(ConfigError, match=message) as refused:
        load_credentials({"JARVIS_BEARER_TOKEN": token})
    assert token not in str(refused.value)


def test_a_token_of_sixteen_printable_ascii_bytes_is_accepted() -> None:
    """The least length, any printable ASCII."""
    assert load_credentials({"JARVIS_BEARER_TOKEN": "jv_!#$%&()*+,-./"}).grants


def test_credentials_hide_the_token() -> None:
    """Neither repr nor str of the credentials contains the token."""
    credentials = Credentials(TOKEN, frozenset(CAPABILITIES))
    assert TOKEN not in repr(credentials)
    assert TOKEN not in str(credentials)


def test_only_the_exact_token_passes() -> None:
    """The right token yields the actor; a near miss raises."""
    credentials = Credentials(TOKEN, frozenset(CAPABILITIES))
    assert credentials.check(f"Bearer {TOKEN}") == fingerprint(TOKEN)
    with pytest.raises(AuthError, match="wrong"):
        credentials.check(f"Bearer {TOKEN[:-1]}")


POLICY = parse_policy(
    'search_path = ["/usr/bin", "/bin"]\n'
    'host_dirs = ["/usr", "/bin"]\n'
    '[[rule]]\nname = "x"\ndecision = "allow"\nargv0 = ["echo"]\ncwd = ["/srv"]\n'
    'env = ["TZ", "MISSING"]\n'
)


class LinkedHost:
    """/bin is a symlink to /usr/bin."""

    def realpath(self, path: str) -> str | None:
        return {"/usr": "/usr", "/bin": "/usr/bin"}.get(path)

    def is_dir(self, path: str) -> bool:
        return True

    def is_executable(self, path: str) -> bool:
        return False


def test_symlinked_host_dirs_are_bound_from_their_real_directory() -> None:
    """`/bin → usr/bin` becomes a read-only bind of /usr/bin at /bin."""
    assert system_binds(POLICY, LinkedHost()) == (
        Bind("/usr", "/usr"),
        Bind("/usr/bin", "/bin"),
    )


@pytest.mark.parametrize("writable", [False, True])
def test_a_host_plan_binds_cwd_at_its_path_with_the_rules_access(writable: bool) -> None:
    """cwd is bound at its own path, writable only when the rule says so; env is fixed."""
    decision = Decision(
        "allow",
        "ok",
        "x",
        program="/usr/bin/echo",
        executable="/usr/bin/echo",
        cwd="/srv/p",
        timeout_ms=1500,
        writable_cwd=writable,
        env=("TZ", "MISSING"),
    )
    plan = host_plan(
        decision,
        policy=POLICY,
        argv=("echo", "hi"),
        binds=(Bind("/usr", "/usr"),),
        host_env={"TZ": "UTC", "JARVIS_BEARER_TOKEN": TOKEN, "HOME": "/root"},
        now_monotonic=100.0,
    )
    assert plan.profile == "host"
    assert plan.argv == ("/usr/bin/echo", "hi")
    assert plan.cwd == "/srv/p"
    assert plan.binds[-1] == Bind("/srv/p", "/srv/p", writable=writable)
    assert dict(plan.env) == {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TZ": "UTC"}
    assert plan.deadline == pytest.approx(101.5)
    assert plan.files == ()


def test_a_run_without_cwd_starts_in_the_envelope_scratch() -> None:
    """No cwd: no host directory is bound for it and the run starts in scratch /tmp."""
    decision = Decision(
        "allow", "ok", "x", program="/usr/bin/echo", executable="/usr/bin/echo", timeout_ms=10
    )
    plan = host_plan(
        decision, policy=POLICY, argv=("echo",), binds=(), host_env={}, now_monotonic=0.0
    )
    assert (plan.cwd, plan.binds) == (SCRATCH_CWD, ())


def test_a_host_plan_executes_the_resolved_program_under_the_name_it_was_called_by() -> None:
    """`sh → busybox`: busybox runs (what the rules matched), told it is /usr/bin/sh."""
    decision = Decision(
        "allow",
        "ok",
        "x",
        program="/usr/bin/sh",
        executable="/usr/bin/busybox",
        timeout_ms=10,
    )
    plan = host_plan(
        decision, policy=POLICY, argv=("sh", "-c", ":"), binds=(), host_env={}, now_monotonic=0.0
    )
    assert (plan.program, plan.argv) == ("/usr/bin/busybox", ("/usr/bin/sh", "-c", ":"))


def test_a_deny_decision_cannot_be_planned() -> None:
    """The planner refuses anything but an allow decision."""
    with pytest.raises(ValueError, match="only an allow decision"):
        host_plan(
            Decision("deny", "no", None),
            policy=POLICY,
            argv=("echo",),
            binds=(),
            host_env={},
            now_monotonic=0.0,
        )


@pytest.mark.parametrize(
    ("grants", "tools"),
    [
        (("policy:check",), ["jarvis.policy.check"]),
        (("run:create", "run:read"), ["jarvis.run.create", "jarvis.run.get"]),
        ((), []),
    ],
)
def test_the_manual_lists_only_the_tools_the_grants_allow(
    grants: tuple[str, ...], tools: list[str]
) -> None:
    """A client discovers no tool it would be refused with `capability denied`."""
    manual = build_manual("http://127.0.0.1:7777", grants)
    assert [tool["name"] for tool in manual["tools"]] == tools
    UtcpManualSerializer().validate_dict(manual)


def test_the_manual_is_a_valid_utcp_manual_without_a_literal_token() -> None:
    """utcp's own serializer accepts the manual; auth is a `${JARVIS_BEARER_TOKEN}` variable."""
    manual = build_manual("http://127.0.0.1:7777", CAPABILITIES)
    parsed = UtcpManualSerializer().validate_dict(manual)
    assert {t.name for t in parsed.tools} == {
        "jarvis.policy.check",
        "jarvis.run.create",
        "jarvis.run.get",
    }
    for tool in manual["tools"]:
        assert set(tool) >= {"name", "description", "inputs", "outputs", "tags"}
        template = tool["tool_call_template"]
        assert template["call_template_type"] == "http"
        assert template["body_field"] == "body"
        assert template["auth"]["api_key"] == "Bearer ${JARVIS_BEARER_TOKEN}"
    assert manual["utcp_version"].startswith("1.")
    assert "Bearer jv_" not in json.dumps(manual)
