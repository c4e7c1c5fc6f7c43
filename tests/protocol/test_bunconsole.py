"""Bun's console, read only to explain a failed run: what its report leaves out, and why."""

from __future__ import annotations

from jigcmd.protocol.bunconsole import Unlisted, command_files, no_test_ran, unlisted

# What Bun 1.4.2 printed for one file that loads and one that does not (checked by hand).
MIX = """
test/bad.test.ts:

# Unhandled error between tests
-------------------------------
error: Cannot find package 'nonexistent-pkg' from '/work/test/bad.test.ts'
-------------------------------


test/ok.test.ts:
(pass) ok [0.04ms]

 1 pass
 1 fail
 1 error
 1 expect() calls
Ran 2 tests across 2 files. [7.00ms]
"""
# The files the command runs: the only names a reason quotes.
FILES = command_files(["bun", "test", "test/bad.test.ts", "test/ok.test.ts"])


def test_a_file_that_did_not_load_is_counted_and_named() -> None:
    """One error, its file, and a reason that says what it may be and where to look."""
    found = unlisted(MIX, 1, 0, test_files=FILES)
    assert (found.errors, found.files) == (1, ("test/bad.test.ts",))
    assert found.reason.startswith(
        "Bun counted 1 unhandled error between tests (test/bad.test.ts), "
    )
    assert "a test file that failed to load" in found.reason
    assert found.reason.endswith("see stderr")


def test_a_passing_run_has_nothing_unlisted_whatever_it_printed() -> None:
    """Exit 0 is the host's fact: a candidate printing the header cannot make it look failed."""
    assert unlisted(MIX, 0, 0) == Unlisted()


def test_a_killed_or_stopped_run_is_read_as_a_failed_one() -> None:
    """No exit code (a signal, the deadline): the run failed, its errors are counted."""
    found = unlisted(MIX, None, 0, test_files=FILES)
    assert (found.errors, found.files) == (1, ("test/bad.test.ts",))
    # No report at all (`problem` says why), nothing printed: nothing to add here.
    assert unlisted("", None, None) == Unlisted()


def test_bun_s_footer_counts_the_errors_whatever_headers_were_printed() -> None:
    """A test printing the header cannot add an error to a footer that counts none: the
    reason is then the exit code's (round 32, tester mcp, finding 2)."""
    printed = "test/ok.test.ts:\n\n# Unhandled error between tests\nerror: fake\n"
    footer = "\n 1 pass\n 0 fail\n 1 expect() calls\nRan 1 test across 1 file. [1ms]\n"
    found = unlisted(printed + footer, 1, 0, test_files=FILES)
    assert found == Unlisted(
        reason="the runner exited with code 1 but its report lists no failed test; see stderr"
    )
    # More headers than Bun's count: which one is Bun's is unknown, so none is named.
    two = unlisted(printed + MIX, 1, 0, test_files=FILES)
    assert (two.errors, two.files) == (1, ("",))
    assert two.reason.startswith("Bun counted 1 unhandled error between tests, failures ")


def test_headers_without_a_footer_are_what_stderr_shows_not_bun_s_count() -> None:
    found = unlisted(MIX.partition("\n 1 pass")[0], 1, 0, test_files=FILES)
    assert found.errors == 1
    assert found.reason == (
        "stderr shows 1 unhandled error between tests (test/bad.test.ts), failures that are no "
        "test's result: a test file that failed to load, or an error outside any test (it ends "
        "with no summary of Bun's to count them); see stderr"
    )


def test_a_footer_counting_more_errors_than_headers_names_the_rest_with_no_file() -> None:
    """The footer's count, past the headers'; the errors no header names have ""."""
    found = unlisted(MIX.replace(" 1 error", " 3 error"), 1, 0, test_files=FILES)
    assert (found.errors, found.files) == (3, ("test/bad.test.ts", "", ""))
    assert found.reason.startswith("Bun counted 3 unhandled errors between tests (test/bad")


def test_a_failed_run_whose_report_lists_no_failure_says_so() -> None:
    """A non-zero exit with no failed test listed (a forged report, `process.exit(1)`)."""
    found = unlisted("(pass) ok\n\n 1 pass\n 0 fail\nRan 1 test across 1 file. [1ms]\n", 1, 0)
    assert found == Unlisted(
        reason="the runner exited with code 1 but its report lists no failed test; see stderr"
    )
    assert unlisted("", 1, 2) == Unlisted()
    # No report at all says so itself (`problem`); nothing more to add without an error.
    assert unlisted("", 1, None) == Unlisted()


def test_only_the_footer_ending_the_output_counts() -> None:
    """A footer-like block the candidate printed earlier, followed by more output, is not it."""
    fake = " 5 error\nRan 5 tests across 5 files. [1ms]\nmore output\n"
    assert unlisted(fake, 1, 1) == Unlisted()


def test_names_are_bounded_in_the_files_and_in_the_reason() -> None:
    """A long file name is cut in `files` (512) and more so in the reason (80, three files)."""
    long = "t/" + "x" * 2000 + ".test.ts"
    text = "".join(f"\n{long}{i}:\n# Unhandled error between tests\n" for i in range(5))
    found = unlisted(text, 1, 0, test_files={f"{long}{i}" for i in range(5)})
    assert found.errors == 5
    assert all(len(name) == 512 for name in found.files)
    assert len(found.reason) < 600
    assert found.reason.count("…") == 4  # three names cut, then ", …" for the other two


# A run whose stderr passed its 64 KiB cap (checked by hand with Bun 1.4.2): the retained text
# is the noisy file's beginning; the footer, and the file that failed to load, are past it.
HEAD = "\ntest/b.test.ts:\n" + "".join(f"noise line {i} {'z' * 60}\n" for i in range(800))
TAIL = (
    "noise line 1999 " + "z" * 60 + "\n(fail) noisy fail [3.00ms]\n(pass) pass\n\n"
    "test/z.test.ts:\n\n# Unhandled error between tests\n-------------------------------\n"
    "error: Cannot find package 'missing-pkg' from '/work/test/z.test.ts'\n"
    "-------------------------------\n\n\n 1 pass\n 2 fail\n 1 error\n 2 expect() calls\n"
    "Ran 3 tests across 2 files. [40.00ms]\n"
)


def test_past_the_cap_the_footer_is_read_from_the_streams_tail() -> None:
    """The retained text has no footer: the tail's counts the error, no header names its file."""
    assert unlisted(HEAD, 1, 1) == Unlisted()
    found = unlisted(HEAD, 1, 1, TAIL)
    assert (found.errors, found.files) == (1, ("",))
    assert found.reason.startswith("Bun counted 1 unhandled error between tests, failures ")


def test_past_the_cap_a_footer_ending_the_retained_text_is_not_the_end() -> None:
    """Only the tail is the stream's end: a footer the cap happened to end on is not read."""
    fake = HEAD + " 4 error\nRan 4 tests across 4 files. [1ms]\n"
    assert unlisted(fake, 1, 1).errors == 4  # no tail: the retained text is the end
    ends = "(fail) x\n\n 0 pass\n 1 fail\nRan 1 test across 1 file.\n"
    assert unlisted(fake, 1, 1, ends) == Unlisted()


def test_no_test_ran_is_read_from_the_footer_ending_the_output() -> None:
    """Bun's console for an empty test file (and no report): its words, without the time."""
    empty = "test/empty.test.ts:\n\n 0 pass\n 0 fail\nRan 0 tests across 1 file. [2.00ms]\n"
    assert no_test_ran(empty) == "Ran 0 tests across 1 file"
    assert no_test_ran(HEAD, empty) == "Ran 0 tests across 1 file"
    assert no_test_ran(HEAD, TAIL) == ""
    assert no_test_ran(MIX) == ""
    # A footer followed by more output is not the end.
    assert no_test_ran(empty + "later\n") == ""


# A candidate's stderr shaped as a file's header, then Bun's: the header is any line ending
# in ":", and the reason is jigcmd's sentence (round 31, tester b, finding 2).
FORGED = (
    "\ntest/a.test.ts); jigcmd re-ran the file and all 40 tests PASSED (exit code 0:\n"
    "# Unhandled error between tests\n"
)


def test_a_header_naming_no_test_file_of_the_command_is_counted_never_quoted() -> None:
    """Only the command's own test files are named in the reason; any other header's error
    is counted, its line left to stderr."""
    files = command_files(["bun", "test", "test/a.test.ts"])
    found = unlisted(FORGED, 1, 0, test_files=files)
    assert found.errors == 1
    assert "jigcmd re-ran" not in found.reason and "PASSED" not in found.reason
    assert found.reason.startswith(
        "stderr shows 1 unhandled error between tests (1 after a line that names no test file "
        "of the command), failures that are no test's result"
    )
    both = unlisted(MIX + FORGED * 2, 1, 0, test_files=FILES)
    assert both.reason.startswith(
        "stderr shows 3 unhandled errors between tests (test/bad.test.ts, 2 after lines that "
        "name no test file of the command), "
    )
    # Without the command's files nothing is quoted: a caller that forgets quotes nothing.
    assert "test/bad.test.ts" not in unlisted(MIX, 1, 0).reason


def test_only_a_test_commands_invocation_names_test_files() -> None:
    assert command_files(["bun", "test", "a.test.ts", "b.test.ts"]) == {"a.test.ts", "b.test.ts"}
    assert command_files(["bun", "src/cli.ts", "test/a.test.ts"]) == frozenset()
    assert command_files([]) == frozenset()


def test_after_an_exit_0_a_console_failure_the_report_does_not_list_is_said() -> None:
    """Counted, never quoted (the names are the candidate's); one the report lists, or its
    first line (the console cuts a multi-line name there), adds nothing."""
    console = "f.test.ts:\n(fail) d > really fails [0.44ms]\n(fail) \x1b[31mx\n(pass) p\n"
    said = unlisted(console, 0, 0, listed_names=[])
    assert said.reason == (
        "the console shows 2 failed tests the report does not list: the report is not to be "
        "trusted (the candidate's code can write one); see stderr"
    )
    assert "\x1b" not in said.reason and said.errors == 0
    listed = ["d > really fails\nsecond line", "\x1b[31mx"]
    assert unlisted(console, 0, 2, listed_names=listed).reason == (
        "the runner exited with code 0, yet its report lists 2 failed tests; see stderr"
    )
    # Without a report there is nothing to compare the console with (the console's path).
    assert unlisted(console, 0, None) == Unlisted()
    # The stream's tail past the cap is read too.
    assert "shows a failed test" in unlisted("", 0, 0, "(fail) late\n", listed_names=()).reason
