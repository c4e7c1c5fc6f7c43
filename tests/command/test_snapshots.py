"""Bun's snapshot files and tests in a project are named, with why they cannot pass here."""

from __future__ import annotations

from jigcmd.command.snapshots import snapshot_note

_TEST = 'test("s", () => { expect(fmt(1)).toMatchSnapshot(); });'


def test_a_sent_snapshot_file_and_the_test_calling_the_matcher_are_named() -> None:
    """Both kinds, each with what it is, then the limit and what to use instead."""
    note = snapshot_note(
        {"test/a.test.ts": _TEST, "test/__snapshots__/a.test.ts.snap": "exports[`s 1`] = `1`;"}
    )
    assert note is not None
    assert note.startswith(
        "snapshot tests cannot pass in the envelope: test/__snapshots__/a.test.ts.snap "
        "(snapshot files); test/a.test.ts (call toMatchSnapshot). "
    )
    assert "read-only" in note and "toEqual" in note and "toMatchInlineSnapshot" in note


def test_a_left_out_snapshot_is_named_too_since_leaving_it_out_does_not_help() -> None:
    """An `--exclude '*.snap'` or a left-out `__snapshots__/` still names the files."""
    note = snapshot_note({"src/a.ts": ""}, ["test/__snapshots__/", "b.test.ts.snap", "dist/"])
    assert note is not None
    assert ": b.test.ts.snap, test/__snapshots__/ (snapshot files). " in note
    assert "dist/" not in note


def test_a_test_without_its_snapshot_is_named_by_the_matcher_it_calls() -> None:
    """The first run would write the snapshot; here it cannot make the directory."""
    thrown = "expect(() => f()).toThrowErrorMatchingSnapshot();"
    note = snapshot_note({"a.test.ts": _TEST, "b.test.ts": thrown, "c.test.ts": "x"})
    assert note is not None
    assert ": a.test.ts, b.test.ts (call toMatchSnapshot). " in note


def test_no_snapshot_and_inline_snapshots_only_mean_no_note() -> None:
    """`toMatchInlineSnapshot` keeps its value in the test: it can pass, nothing is said."""
    assert snapshot_note({"a.test.ts": "expect(4).toMatchInlineSnapshot(`4`);"}) is None
    assert snapshot_note({}) is None


def test_many_are_counted_past_four() -> None:
    """Four names, then "and N more", like the left-out note."""
    files = {f"t/__snapshots__/{n}.snap": "" for n in "abcdef"}
    note = snapshot_note(files)
    assert note is not None
    assert "t/__snapshots__/d.snap and 2 more (snapshot files)" in note


def test_an_inline_snapshot_without_its_value_is_named_since_ci_mode_fails_it() -> None:
    """`bun test` runs in CI mode: an empty inline matcher fails instead of writing."""
    empty = 'test("i", () => { expect(1).toMatchInlineSnapshot(); });'
    thrown = "expect(() => f()).toThrowErrorMatchingInlineSnapshot();"
    note = snapshot_note({"a.test.ts": empty, "b.test.ts": thrown})
    assert note is not None
    assert note.startswith(
        "snapshot tests cannot pass in the envelope: a.test.ts, b.test.ts (call "
        "toMatchInlineSnapshot() without its value). "
    )
    assert "CI mode" in note


def test_one_commands_tests_name_only_their_own_snapshots_and_what_they_import() -> None:
    """A command's note names its tests' `.snap` files and matchers (a helper they import
    included), never another command's; a command running none of them gets no note."""
    files = {
        "test/a.test.ts": 'import { check } from "./helper.ts";\ntest("a", check);',
        "test/helper.ts": "export const check = () => expect(1).toMatchSnapshot();",
        "test/__snapshots__/a.test.ts.snap": "",
        "test/b.test.ts": _TEST,
        "test/__snapshots__/b.test.ts.snap": "",
        "test/c.test.ts": 'test("c", () => expect(1).toBe(1));',
    }
    note = snapshot_note(files, ["other/__snapshots__/"], tests=["test/a.test.ts"])
    assert note is not None
    assert note.startswith(
        "snapshot tests cannot pass in the envelope: test/__snapshots__/a.test.ts.snap "
        "(snapshot files); test/helper.ts (call toMatchSnapshot). "
    )
    assert snapshot_note(files, tests=["test/c.test.ts"]) is None
    left_out = snapshot_note({"test/c.test.ts": ""}, ["test/__snapshots__/"], ["test/c.test.ts"])
    assert left_out is not None and ": test/__snapshots__/ (snapshot files). " in left_out
