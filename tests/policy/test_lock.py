"""The admission lock and its drift checks (spec-notes §3 Decision)."""

from __future__ import annotations

import json

import msgspec
import pytest

from jigcmd.contract import CONTRACT_DIGEST
from jigcmd.policy.binding import Binding, parse_binding
from jigcmd.policy.lock import (
    LockedFile,
    LockError,
    RuntimeIdentity,
    build_lock,
    check_admission,
    check_policy,
    decode_lock,
    encode_lock,
    review_text,
)

SHA_A = "sha256:" + "a" * 64
SHA_B = "sha256:" + "b" * 64
RUNTIME = RuntimeIdentity(bun_version="1.4.2", bun_sha256=SHA_A)


def binding(commands: dict[str, object] | None = None, package: str = "pkg") -> Binding:
    """A Binding with a run and a test command unless told otherwise."""
    if commands is None:
        commands = {"cli": {"run": "src/cli.ts"}, "tests": {"test": ["test/a.test.ts"]}}
    return parse_binding({"package": package, "commands": commands})


def never_called() -> str:
    """A deferred hash that must not be computed."""
    raise AssertionError("the binary hash was computed although it was not needed")


def test_a_lock_round_trips_through_its_bytes() -> None:
    """decode_lock(encode_lock(lock)) is the same lock."""
    lock = build_lock(binding(), RUNTIME)
    assert decode_lock(encode_lock(lock)) == lock


def test_lock_bytes_are_sorted_indented_and_end_with_a_newline() -> None:
    """The lock file is stable: sorted keys, 2-space indent, one trailing newline."""
    data = encode_lock(build_lock(binding(), RUNTIME))
    expected = json.dumps(json.loads(data), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert data.decode() == expected


def test_the_lock_pins_policy_contract_and_runtime() -> None:
    """The lock records the policy digest, the canonical policy, the contract and the runtime."""
    lock = msgspec.json.decode(encode_lock(build_lock(binding(), RUNTIME)))
    assert lock["lockVersion"] == 1
    assert lock["bindingDigest"] == binding().digest()
    assert lock["policy"] == {
        "package": "pkg",
        "commands": {"cli": {"run": "src/cli.ts"}, "tests": {"test": ["test/a.test.ts"]}},
    }
    assert lock["contract"]["digest"] == CONTRACT_DIGEST
    assert lock["runtime"] == {"bunVersion": "1.4.2", "bunSha256": SHA_A}


def test_an_unchanged_setup_is_admitted() -> None:
    """Same Binding, same runtime: admitted."""
    lock = build_lock(binding(), RUNTIME)
    assert check_admission(binding(), lock, RUNTIME).admitted


def test_a_missing_lock_says_how_to_admit() -> None:
    """Without a lock the reason names the lock path and the command that admits."""
    admission = check_admission(
        binding(), None, RUNTIME, lock_path="/s/jigcmd.lock", binding_path="b.toml"
    )
    assert (admission.admitted, admission.drift) == (False, "no-lock")
    assert admission.reason == (
        "no lock at /s/jigcmd.lock: run `jigcmd lock --binding b.toml` to review and admit"
    )


@pytest.mark.parametrize(
    ("changed", "difference"),
    [
        (
            binding({"cli": {"run": "src/x.ts"}, "tests": {"test": ["test/a.test.ts"]}}),
            "command 'cli' differs",
        ),
        (binding({"cli": {"run": "src/cli.ts"}}), "command 'tests' removed"),
        (
            binding(
                {
                    "cli": {"run": "src/cli.ts"},
                    "tests": {"test": ["test/a.test.ts"]},
                    "more": {"run": "m.ts"},
                }
            ),
            "command 'more' added",
        ),
        (binding(package="other"), "package 'other' differs from admitted 'pkg'"),
    ],
)
def test_a_changed_binding_is_refused_naming_the_difference(
    changed: Binding, difference: str
) -> None:
    """Any policy change since admission is refused with what changed and how to re-admit."""
    lock = build_lock(binding(), RUNTIME)
    admission = check_admission(changed, lock, RUNTIME, binding_path="b.toml")
    assert (admission.admitted, admission.drift) == (False, "policy")
    assert admission.reason == (
        f"Binding changed since admission ({difference}); "
        "run `jigcmd lock --binding b.toml` to review and re-admit"
    )


def test_a_changed_binary_is_refused_with_both_identities() -> None:
    """Same Bun version with another binary hash is runtime drift, naming both hashes."""
    lock = build_lock(binding(), RUNTIME)
    admission = check_admission(binding(), lock, RuntimeIdentity("1.4.2", lambda: SHA_B))
    assert (admission.admitted, admission.drift) == (False, "runtime")
    assert f"(now 1.4.2 {SHA_B} vs admitted 1.4.2 {SHA_A})" in admission.reason


def test_a_changed_version_is_refused_without_hashing_the_binary() -> None:
    """A version mismatch is decisive, so the deferred hash is never computed."""
    lock = build_lock(binding(), RUNTIME)
    admission = check_admission(binding(), lock, RuntimeIdentity("1.5.0", never_called))
    assert admission.drift == "runtime"
    assert "Bun runtime differs from the admitted one (now 1.5.0" in admission.reason


def test_policy_drift_is_found_without_hashing_the_binary() -> None:
    """Policy is checked first; a policy change does not trigger hashing."""
    lock = build_lock(binding(), RUNTIME)
    admission = check_admission(binding(package="x"), lock, RuntimeIdentity("1.4.2", never_called))
    assert admission.drift == "policy"


def test_check_policy_alone_never_touches_the_runtime() -> None:
    """The server can check policy at start-up and defer the runtime check."""
    lock = build_lock(binding(), RUNTIME)
    assert check_policy(binding(), lock, lock_path="l", binding_path="b").admitted


def test_a_lock_for_another_contract_is_refused() -> None:
    """A lock admitted against another contract digest is contract drift."""
    lock = build_lock(binding(), RUNTIME)
    other = msgspec.structs.replace(
        lock, contract=msgspec.structs.replace(lock.contract, digest=SHA_B)
    )
    admission = check_admission(binding(), other, RUNTIME)
    assert admission.drift == "contract"


def lock_dict() -> dict[str, object]:
    """A valid lock as plain JSON data."""
    result = json.loads(encode_lock(build_lock(binding(), RUNTIME)))
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(lockVersion=2), "unsupported lockVersion 2"),
        (lambda d: d.pop("runtime"), "missing required field `runtime`"),
        (lambda d: d.update(extra=1), "unknown field `extra`"),
        (
            lambda d: d["runtime"].update(bunVersion=1),
            r"Expected `str`, got `int` - at `\$.runtime",
        ),
        (lambda d: d["policy"]["commands"]["cli"].update(run="../x.ts"), "matching regex"),
        (lambda d: d["policy"]["commands"]["cli"].pop("run"), "not a valid Binding.*has neither"),
        (lambda d: d.update(bindingDigest=SHA_B), "does not match the pinned policy"),
    ],
)
def test_bad_locks_are_refused_precisely(mutate: object, reason: str) -> None:
    """Wrong versions, shapes, invalid policies and altered digests are LockErrors."""
    data = lock_dict()
    assert callable(mutate)
    mutate(data)
    with pytest.raises(LockError, match=reason):
        decode_lock(json.dumps(data).encode())


def test_non_json_locks_are_refused() -> None:
    """Garbage is a LockError naming the source."""
    with pytest.raises(LockError, match=r"^my\.lock: not valid JSON"):
        decode_lock(b"{", source="my.lock")


def test_a_lock_with_a_duplicate_key_is_refused() -> None:
    """A repeated key would let two readers see two different locks: refused, naming the key."""
    text = json.dumps(lock_dict())
    twice = '{"lockVersion": 0, ' + text[1:]
    with pytest.raises(LockError, match=r"^my\.lock: duplicate key 'lockVersion'$"):
        decode_lock(twice.encode(), source="my.lock")


def test_review_shows_the_exact_argv_posture_and_limits() -> None:
    """The review lists each command's executed argv, the Bun flags and the limits."""
    text = review_text(binding(), RUNTIME, slots=("project",))
    assert "bun --no-env-file --no-install --config=/dev/null ./src/cli.ts <args…>" in text
    assert (
        "bun test --no-env-file --no-install --config=/dev/null --reporter=junit "
        "--reporter-outfile=/tmp/jigcmd-junit.xml ./test/a.test.ts   (no arguments accepted)"
    ) in text
    assert "each run exactly as:" in text
    assert "256 MiB memory (no swap), 64 tasks, half a CPU, 10 s" in text
    assert SHA_A in text
    assert binding().digest() in text
    assert "capability slot: project" in text


def test_review_names_the_whole_environment_bun_test_included() -> None:
    """The environment line names jigcmd's variables and the NODE_ENV that bun test adds."""
    text = review_text(binding(), RUNTIME, slots=("project",))
    assert (
        "environment only BUN_RUNTIME_TRANSPILER_CACHE_PATH=0 (bun test also CI=true, and Bun "
        "adds NODE_ENV=test;\n    no PATH, HOME or credentials)"
    ) in text


def test_review_labels_its_identities_plainly_in_one_column() -> None:
    """Binding, Package, Runtime, Policy: plain words, their values in one column."""
    file = LockedFile(path="binding.toml", sha256=SHA_B)
    lines = review_text(binding(), RUNTIME, file=file).splitlines()
    assert f"Binding:   binding.toml {SHA_B}" in lines
    assert "Package:   pkg" in lines
    assert f"Runtime:   Bun 1.4.2 {SHA_A}" in lines
    assert f"Policy:    {binding().digest()}" in lines


def test_review_of_an_empty_binding_says_it_grants_nothing() -> None:
    """A Binding without commands is reviewed as granting nothing."""
    assert "grants nothing" in review_text(binding({}), RUNTIME)
