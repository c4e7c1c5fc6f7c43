"""The rule file: broken files are refused precisely; evaluation is first match, default deny."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import pytest

from jigcmd.jarvis.hostview import OsHostView
from jigcmd.jarvis.policy import CEILING_MS, Decision, PolicyError, Request, evaluate, parse_policy


class FakeHost:
    """A host with a few files, directories and symlinks, resolved like the kernel would."""

    def __init__(self) -> None:
        self.executables = {"/usr/bin/echo", "/usr/bin/dash", "/usr/bin/git", "/usr/bin/rm"}
        self.dirs = {"/usr", "/usr/bin", "/srv", "/srv/project", "/srv/other", "/etc"}
        self.links = {"/bin": "/usr/bin", "/usr/bin/sh": "/usr/bin/dash", "/srv/escape": "/etc"}

    def realpath(self, path: str) -> str | None:
        parts = posixpath.normpath(path).split("/")[1:]
        current = "/"
        for part in parts:
            current = posixpath.join(current, part)
            while current in self.links:
                current = self.links[current]
        if current in self.executables or current in self.dirs or current == "/":
            return current
        return None

    def is_dir(self, path: str) -> bool:
        return path in self.dirs

    def is_executable(self, path: str) -> bool:
        return path in self.executables


BASE = 'search_path = ["/usr/bin"]\n'


def decide(
    policy: str, argv: list[str], cwd: str | None = None, timeout_ms: int | None = None
) -> Decision:
    return evaluate(
        parse_policy(BASE + policy),
        Request(argv=tuple(argv), cwd=cwd, timeout_ms=timeout_ms),
        FakeHost(),
    )


def rule(name: str, decision: str = "allow", argv0: str = '["echo"]', extra: str = "") -> str:
    return f'[[rule]]\nname = "{name}"\ndecision = "{decision}"\nargv0 = {argv0}\n{extra}\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("this is = = not toml", "not valid TOML"),
        ('shell = "bash"', "unknown top-level key 'shell'"),
        ("version = 2", "version must be 1"),
        ('search_path = ["bin"]', "must be an absolute, normalised path"),
        ('host_dirs = ["/"]', "host_dirs: '/' is the whole host"),
        ('search_path = ["/"]', "search_path: '/' is the whole host"),
        ('host_dirs = ["/usr/"]', "must be an absolute, normalised path"),
        ('host_dirs = ["/tmp/x/w"]', "'/tmp/x/w' lies in /tmp, which the envelope makes anew"),
        ('host_dirs = ["/tmp"]', "outside /proc, /dev, /sys and /tmp (e.g. under /opt or /srv)"),
        ('host_dirs = ["/dev/shm"]', "its own /proc, /dev and /sys, and an empty scratch /tmp"),
        ("timeout_ms_ceiling = 0", "timeout_ms_ceiling must be a positive integer"),
        ('[[rule]]\nname = "x"\ndecision = "allow"\nargv0 = ["echo"]\nshell = 1', "unknown key"),
        ('[[rule]]\nname = "x"\ndecision = "maybe"\nargv0 = ["echo"]', "decision must be"),
        ('[[rule]]\nname = "x"\ndecision = "allow"\nargv0 = []', "at least one program"),
        ('[[rule]]\nname = "x"\ndecision = "allow"\nargv0 = ["./echo"]', "neither a name"),
        ('[[rule]]\nname = "x"\ndecision = "allow"\nargv0 = ["/usr/../bin/echo"]', "normalised"),
        (rule("x", extra='cwd = ["relative"]'), "absolute, normalised"),
        (rule("x", extra='cwd = ["/proc"]'), "may not be a working directory root"),
        (rule("x", extra='args_match = ["("]'), "args_match pattern '('"),
        (rule("x", extra="writable_cwd = true"), "writable_cwd needs a cwd list"),
        (rule("x", extra='env = ["JARVIS_BEARER_TOKEN"]'), "env may not pass"),
        (rule("x", extra="timeout_ms_max = -1"), "timeout_ms_max must be a positive integer"),
        (rule("x", "deny", extra="timeout_ms_max = 5"), "a deny rule takes no"),
        (rule("x") + rule("x"), "duplicate rule name 'x'"),
    ],
)
def test_a_broken_policy_is_refused_with_a_precise_error(text: str, message: str) -> None:
    """Every way a rule file can be wrong is refused, naming the file, rule and key."""
    with pytest.raises(PolicyError, match=None) as caught:
        parse_policy(text if "search_path" in text else BASE + text, "policy.toml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("policy.toml: ")


def test_a_bare_name_without_a_search_path_is_refused() -> None:
    """A rule naming `echo` in a policy without search_path cannot resolve anything: refused."""
    with pytest.raises(PolicyError, match="no search_path"):
        parse_policy(rule("x"))


def test_the_example_policy_parses() -> None:
    """The shipped example policy is valid."""
    example = Path(__file__).parents[2] / "jigcmd" / "jarvis" / "example-policy.toml"
    assert len(parse_policy(example.read_text()).rules) >= 3


@pytest.mark.parametrize(
    "args",
    [["-r", "x"], ["-fR", "x"], ["--recursive", "x"], ["--recur", "x"], ["--r", "x"], ["-vrf"]],
)
def test_the_example_no_recursive_rm_denies_what_rm_reads_as_recursive(args: list[str]) -> None:
    """Clusters holding r or R, and every abbreviation of --recursive (GNU getopt_long)."""
    example = Path(__file__).parents[2] / "jigcmd" / "jarvis" / "example-policy.toml"
    decision = evaluate(parse_policy(example.read_text()), Request(("rm", *args)), FakeHost())
    assert (decision.decision, decision.matched_rule) == ("deny", "no-recursive-rm")


def test_nothing_matches_by_default() -> None:
    """With no rules every request is denied with no matched rule."""
    decision = decide("", ["echo", "hi"])
    assert (decision.decision, decision.matched_rule) == ("deny", None)


def test_the_first_matching_rule_wins() -> None:
    """A deny rule before an allow rule for the same program decides."""
    policy = rule("no", "deny") + rule("yes")
    assert decide(policy, ["echo"]).matched_rule == "no"
    assert decide(rule("yes") + rule("no", "deny"), ["echo"]).matched_rule == "yes"


@pytest.mark.parametrize("argv0", ["echo", "/usr/bin/echo", "/bin/echo", "/usr/bin/../bin/echo"])
def test_a_program_matches_by_its_resolved_path(argv0: str) -> None:
    """A bare name, its absolute path and a symlinked path all match the same rule."""
    decision = decide(rule("echo"), [argv0, "hi"])
    assert decision.decision == "allow"


def test_an_allow_names_the_program_as_called_and_the_resolved_file_it_runs() -> None:
    """`sh` (a link to dash) runs /usr/bin/dash, the file the rule matched, named /usr/bin/sh."""
    decision = decide(rule("sh", argv0='["sh"]'), ["sh"])
    assert (decision.program, decision.executable) == ("/usr/bin/sh", "/usr/bin/dash")


def test_a_multi_call_binary_does_not_match_under_another_name() -> None:
    """`sh` (a link to dash) does not match a rule for `dash`: the name selects behaviour."""
    assert decide(rule("dash", argv0='["dash"]'), ["sh"]).decision == "deny"
    assert decide(rule("sh", argv0='["sh"]'), ["sh"]).decision == "allow"


@pytest.mark.parametrize("argv0", ["./echo", "bin/echo", "nothere", "/srv/project"])
def test_an_unresolvable_program_is_denied_with_the_reason(argv0: str) -> None:
    """Relative paths, unknown names and non-executables never match; the reason says why."""
    decision = decide(rule("echo"), [argv0])
    assert decision.decision == "deny"
    assert "is not an executable file" in decision.reason


def test_the_callers_path_is_never_used() -> None:
    """Only the policy's search_path resolves names: `git` is in /usr/bin but not searched."""
    policy = parse_policy('search_path = ["/srv"]\n' + rule("git", argv0='["/usr/bin/git"]'))
    decision = evaluate(policy, Request(argv=("git",)), FakeHost())
    assert decision.decision == "deny"


def test_an_allow_rule_without_cwd_matches_only_requests_without_cwd() -> None:
    """Omitting cwd in an allow rule does not grant every directory."""
    assert decide(rule("echo"), ["echo"]).decision == "allow"
    assert decide(rule("echo"), ["echo"], cwd="/srv/project").decision == "deny"


def test_a_deny_rule_without_cwd_matches_every_cwd() -> None:
    """Omitting cwd in a deny rule denies everywhere, before a later allow rule can match."""
    policy = rule("no", "deny") + rule("yes", extra='cwd = ["/srv/project"]')
    decision = decide(policy, ["echo"], cwd="/srv/project")
    assert (decision.decision, decision.matched_rule) == ("deny", "no")


@pytest.mark.parametrize(
    ("cwd", "allowed"),
    [
        ("/srv/project", True),
        ("/srv/project/../project", True),
        ("/srv/project/../other", False),
        ("/srv/escape", False),
        ("/srv/projectx", False),
        ("/srv/missing", False),
    ],
)
def test_cwd_prefixes_apply_to_the_resolved_directory(cwd: str, allowed: bool) -> None:
    """`..` and symlinks are resolved first; a sibling with the same prefix string is outside."""
    decision = decide(rule("echo", extra='cwd = ["/srv/project"]'), ["echo"], cwd=cwd)
    assert (decision.decision == "allow") is allowed, decision.reason


def test_a_cwd_inside_host_dirs_is_denied() -> None:
    """A working directory the envelope shows anyway (under host_dirs) is refused."""
    decision = decide(rule("echo", extra='cwd = ["/etc"]'), ["echo"], cwd="/etc")
    assert decision.decision == "deny"
    assert "envelope provides itself" in decision.reason


@pytest.mark.parametrize(
    ("extra", "args", "allowed"),
    [
        ('args_prefix = ["status"]', ["status", "-s"], True),
        ('args_prefix = ["status"]', ["push"], False),
        ('args_prefix = ["status"]\nargs_match = []', ["status"], True),
        ('args_prefix = ["status"]\nargs_match = []', ["status", "-s"], False),
        ('args_match = ["-[sb]+"]', ["-sb", "-s"], True),
        ('args_match = ["-[sb]+"]', ["-sb", "--exec=x"], False),
        ("args_max = 1", ["a"], True),
        ("args_max = 1", ["a", "b"], False),
        ('args_any = ["-r.*"]', ["x", "-rf"], True),
        ('args_any = ["-r.*"]', ["x", "-f"], False),
    ],
)
def test_argument_conditions_narrow_a_rule(extra: str, args: list[str], allowed: bool) -> None:
    """args_prefix, args_match, args_max and args_any each decide whether a rule matches."""
    decision = decide(rule("git", argv0='["git"]', extra=extra), ["git", *args])
    assert (decision.decision == "allow") is allowed


@pytest.mark.parametrize(
    ("extra", "requested", "expected"),
    [
        ("", None, CEILING_MS),
        ("", 50_000, CEILING_MS),
        ("", 200, 200),
        ("timeout_ms_max = 500", None, 500),
        ("timeout_ms_max = 500", 900, 500),
    ],
)
def test_timeouts_are_capped_by_the_rule_and_the_ceiling(
    extra: str, requested: int | None, expected: int
) -> None:
    """timeout_ms is min(request, rule cap, 10 s ceiling)."""
    decision = decide(rule("echo", extra=extra), ["echo"], timeout_ms=requested)
    assert decision.timeout_ms == expected


def test_the_ceiling_is_raised_only_explicitly() -> None:
    """`timeout_ms_ceiling` lets a rule's cap go above 10 s."""
    policy = parse_policy(
        "timeout_ms_ceiling = 60000\n" + BASE + rule("echo", extra="timeout_ms_max = 40000")
    )
    decision = evaluate(policy, Request(argv=("echo",), timeout_ms=45_000), FakeHost())
    assert decision.timeout_ms == 40_000


def test_a_program_the_envelope_cannot_show_is_denied() -> None:
    """An allowed program outside host_dirs and cwd would not exist inside: denied, with why."""
    policy = 'host_dirs = ["/etc"]\n' + BASE + rule("echo")
    decision = evaluate(parse_policy(policy), Request(argv=("echo",)), FakeHost())
    assert decision.decision == "deny"
    assert decision.matched_rule == "echo"
    assert "outside host_dirs" in decision.reason


def test_the_denial_names_the_program_path_the_envelope_cannot_show() -> None:
    """`/proc/self/root/usr/bin/echo` is named outside host_dirs; it resolves to one inside."""
    host = FakeHost()
    host.links["/proc/self/root"] = "/"
    request = Request(argv=("/proc/self/root/usr/bin/echo",))
    decision = evaluate(parse_policy(BASE + rule("echo")), request, host)
    assert (decision.decision, decision.matched_rule) == ("deny", "echo")
    assert decision.reason == (
        "rule 'echo' matched, but program '/proc/self/root/usr/bin/echo' is named by a path "
        "outside host_dirs and cwd (it resolves to '/usr/bin/echo', which the envelope shows): "
        "call it by that path"
    )


def test_a_real_symlink_cannot_carry_cwd_out_of_its_prefix(tmp_path: Path) -> None:
    """On the real filesystem a symlink inside an allowed prefix pointing outside is denied."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    os.symlink(outside, allowed / "link")
    policy = parse_policy(BASE + rule("echo", extra=f'cwd = ["{allowed}"]'))
    host = OsHostView()
    inside = evaluate(policy, Request(argv=("echo",), cwd=str(allowed)), host)
    escaped = evaluate(policy, Request(argv=("echo",), cwd=str(allowed / "link")), host)
    assert (inside.decision, escaped.decision) == ("allow", "deny")
