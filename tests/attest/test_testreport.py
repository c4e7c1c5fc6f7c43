"""The runner's test names: from Bun's JUnit report when it wrote one, else its console lines."""

from __future__ import annotations

import hashlib

from jigcmd.attest.testnames import CONSOLE_NAMES, JUNIT_NAMES
from jigcmd.attest.testreport import read_console_report, read_junit_report
from jigcmd.protocol.commands import TestResults as Results
from jigcmd.protocol.junit import parse_junit

JUNIT = b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="bun test" tests="3" failures="1" skipped="1">
  <testsuite name="test/a.test.ts" file="test/a.test.ts" tests="3" failures="1" skipped="1">
    <testsuite name="math" file="test/a.test.ts" line="2">
      <testcase name="adds" classname="math" time="0.001" file="test/a.test.ts" line="3"/>
      <testcase name="fails" classname="math" time="0.002" file="test/a.test.ts" line="4">
        <failure type="AssertionError" message="expected 2"/>
      </testcase>
      <testcase name="later" classname="math" time="0" file="test/a.test.ts" line="5">
        <skipped/>
      </testcase>
    </testsuite>
  </testsuite>
</testsuites>
"""


def test_names_come_from_the_junit_report_with_its_digest() -> None:
    """Passed and failed tests as file > describe > name; skipped ones are neither."""
    report = read_junit_report(Results(report=parse_junit(JUNIT), raw=JUNIT))
    assert report is not None
    assert report.passed == ("test/a.test.ts > math > adds",)
    assert report.failed == ("test/a.test.ts > math > fails",)
    assert report.source == "bun test JUnit report"
    assert report.source_sha256 == hashlib.sha256(JUNIT).hexdigest()


def test_no_parsed_report_means_no_junit_names() -> None:
    """A missing or unreadable report gives None: the console lines are read instead."""
    assert read_junit_report(Results(report=None, problem="missing")) is None


def test_console_lines_name_the_file_and_ignore_everything_else() -> None:
    """(pass)/(fail) lines under a file header; other output, even look-alikes mid-line, not."""
    stderr = (
        "\ntest/a.test.ts:\n(pass) math > adds [0.02ms]\nerror: boom\n"
        "(fail) math > fails [9.58ms]\n  (pass) indented is not a result\n(skip) later\n"
    )
    report = read_console_report(stderr, 1)
    assert report.passed == ("test/a.test.ts > math > adds",)
    assert report.failed == ("test/a.test.ts > math > fails",)
    assert report.source_sha256 == hashlib.sha256(stderr.encode()).hexdigest()
    # Not exact, and the statement says so: the console joins a describe path as it prints.
    assert report.names == CONSOLE_NAMES


FOOTER = "\n 1 pass\n 0 fail\nRan 1 test across 1 file. [9.00ms]\n"


def test_an_exit_0_whose_console_ends_with_bun_s_footer_is_whole() -> None:
    """A passing run's console, footer last: nothing incomplete, so the result can pass."""
    report = read_console_report("\ntest/a.test.ts:\n(pass) adds [0.02ms]\n" + FOOTER, 0)
    assert (report.passed, report.failed, report.incomplete) == (("test/a.test.ts > adds",), (), "")


def test_an_exit_0_without_the_footer_or_with_a_failure_is_incomplete() -> None:
    """Bun ended before its summary, or a failed test listed after an exit 0: both are said."""
    stderr = "\ntest/a.test.ts:\n(fail) really fails [1.00ms]\n(pass) approved [0.01ms]\n"
    report = read_console_report(stderr, 0)
    assert report.failed == ("test/a.test.ts > really fails",)
    assert report.incomplete.startswith("the runner's console does not end with its `Ran N")
    assert report.incomplete.endswith(
        "; the runner exited with code 0, yet its report lists 1 failed test; see stderr"
    )
    missing = read_console_report(stderr, 0, missing="missing: why")
    assert missing.incomplete.startswith("the runner's JUnit report is missing: why; ")


NESTED = b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="bun test" tests="3" failures="1">
  <testsuite name="test/n.test.ts" file="test/n.test.ts" tests="3" failures="1">
    <testcase name="multi&#10;line" classname="" file="test/n.test.ts" line="2"/>
    <testsuite name="a &gt; b" file="test/n.test.ts" line="3">
      <testcase name="c" classname="a &gt; b" file="test/n.test.ts" line="3">
        <failure type="AssertionError" message="expected 2"/>
      </testcase>
    </testsuite>
    <testsuite name="a" file="test/n.test.ts" line="4">
      <testsuite name="b" file="test/n.test.ts" line="4">
        <testcase name="c" classname="b &gt; a" file="test/n.test.ts" line="4"/>
      </testsuite>
    </testsuite>
  </testsuite>
</testsuites>
"""


def test_junit_names_keep_line_breaks_and_tell_a_describe_named_a_gt_b_apart() -> None:
    """A multi-line name whole; `describe("a > b")` escaped, `a` > `b` plain; the report says
    how its names read."""
    report = read_junit_report(Results(report=parse_junit(NESTED), raw=NESTED))
    assert report is not None
    assert report.passed == ("test/n.test.ts > multi\nline", "test/n.test.ts > a > b > c")
    assert report.failed == ("test/n.test.ts > a \\> b > c",)
    assert report.names == JUNIT_NAMES


def test_a_name_past_the_bound_is_cut_and_says_so() -> None:
    """512 characters at most, the last one "…", so a cut name never reads as whole."""
    long = b"x" * 500
    data = NESTED.replace(b'name="c" classname="b', b'name="' + long + b'" classname="b')
    report = read_junit_report(Results(report=parse_junit(data), raw=data))
    assert report is not None
    cut = report.passed[1]
    assert len(cut) == 512 and cut.endswith("x…")
