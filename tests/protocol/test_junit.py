"""Bun's JUnit report read strictly into CTRF's names; Bun 1.4.2's reporter quirks each tested."""

from __future__ import annotations

import encodings.aliases

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jigcmd.protocol.junit import (
    EXPANSION_FACTOR,
    NAME_MAX,
    PATH_CUT,
    REPORT_MAX_BYTES,
    SUITE_DEPTH_MAX,
    UnreadableReport,
    parse_junit,
)

# Written by Bun 1.4.2 for nested describes (note `classname` innermost first and `file=`
# repeated on every nested suite).
NESTED = b"".join(
    [
        b'<?xml version="1.0" encoding="UTF-8"?>\n',
        b'<testsuites name="bun test" tests="3" failures="1" skipped="1" time="0.1">',
        b'<testsuite name="a.test.ts" file="a.test.ts" tests="3" failures="1" time="0.1">',
        b'<testsuite name="outer" file="a.test.ts" line="2" tests="2">',
        b'<testsuite name="inner" file="a.test.ts" line="3" tests="2">',
        b'<testcase name="adds" classname="inner &gt; outer" time="0.000014" '
        b'file="a.test.ts" line="4"/>',
        b'<testcase name="fails" classname="inner &gt; outer" time="0.0007" '
        b'file="a.test.ts" line="5">',
        b'<failure type="AssertionError" message="expect(received).toBe(expected)&#10;&#10;'
        b'Expected: 3">AssertionError: x&#10;      at a.test.ts:5:41&#10;      '
        b"at b (a.test.ts:9:1)&#10;</failure>",
        b"</testcase></testsuite></testsuite>",
        b'<testcase name="todo one" classname="" time="0" file="a.test.ts" line="10">'
        b'<skipped message="TODO"/></testcase>',
        b"</testsuite></testsuites>\n",
    ]
)


def test_the_describe_path_comes_from_the_nesting_outermost_first_not_classname() -> None:
    report = parse_junit(NESTED)
    adds, fails, todo = report.tests
    assert (adds.suite, adds.filePath, adds.line) == (["outer", "inner"], "a.test.ts", 4)
    assert fails.status == "failed" and fails.rawStatus == "fail"
    assert fails.message == "expect(received).toBe(expected)\n\nExpected: 3"
    assert fails.trace == "at a.test.ts:5:41\nat b (a.test.ts:9:1)"
    assert (todo.status, todo.rawStatus, todo.suite) == ("pending", "todo", None)
    assert report.summary.tests == 3
    assert (report.summary.passed, report.summary.failed, report.summary.pending) == (1, 1, 1)


def test_a_report_without_line_attributes_keeps_the_line_absent() -> None:
    """`--parallel` may drop `line=`: the line is left out, never invented."""
    report = parse_junit(NESTED.replace(b' line="4"', b""))
    assert report.tests[0].line is None
    assert report.tests[1].line == 5


def test_a_timed_out_test_is_failed_with_its_raw_status() -> None:
    report = parse_junit(
        b'<testsuites><testsuite name="c" file="c.ts"><testcase name="slow" time="0.1">'
        b'<failure type="TimeoutError" message="test timed out"/></testcase></testsuite>'
        b"</testsuites>"
    )
    (slow,) = report.tests
    assert (slow.status, slow.rawStatus, slow.message, slow.duration) == (
        "failed",
        "timeout",
        "test timed out",
        100,
    )


def test_the_counts_are_the_tests_listed_not_the_attributes_claimed() -> None:
    report = parse_junit(b'<testsuites tests="999" failures="0"><testsuite name="x"/></testsuites>')
    assert report.summary.tests == 0 and report.tests == []


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (
            b'<!DOCTYPE l [<!ENTITY a "aa"><!ENTITY b "&a;&a;">]><testsuites>&b;</testsuites>',
            "document type",
        ),
        (b'<!DOCTYPE t SYSTEM "file:///etc/passwd"><testsuites/>', "document type"),
        (
            b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY % p SYSTEM "http://127.0.0.1:1/x">%p;]><t/>',
            "document type",
        ),
        (b"<testsuites>&undeclared;</testsuites>", "not well-formed"),
        (b"not xml", "not well-formed"),
        (b"", "not well-formed"),
        (b"<html><body/></html>", "the root element is neither <testsuites> nor <testsuite>"),
        (b"<testsuites>" * 3, "not well-formed"),
        (b"\xff\xfe<\x00t\x00", "not well-formed"),
    ],
)
def test_anything_but_a_plain_junit_document_is_unreadable(data: bytes, why: str) -> None:
    with pytest.raises(UnreadableReport) as refused:
        parse_junit(data)
    assert why in str(refused.value)


def test_deep_nesting_within_the_bound_is_read_without_recursion() -> None:
    depth = REPORT_MAX_BYTES // 64
    data = (
        b"<testsuites>"
        + b'<testsuite name="s">' * depth
        + b"</testsuite>" * depth
        + b"</testsuites>"
    )
    assert parse_junit(data).tests == []


def test_one_long_describe_name_over_many_cases_expands_within_the_reports_bound() -> None:
    """The forged report: one 100 KiB describe name over 2,000 `<testcase/>`s (~0.2 GB copied)."""
    big = b"A" * (100 * 1024)
    data = (
        b'<testsuites><testsuite name="f" file="f"><testsuite name="'
        + big
        + b'">'
        + b'<testcase name="x"/>' * 2000
        + b"</testsuite></testsuite></testsuites>"
    )
    report = parse_junit(data)
    assert report.summary.tests == 2000
    inherited = sum(len(t.filePath or "") + sum(map(len, t.suite or [])) for t in report.tests)
    assert inherited <= (EXPANSION_FACTOR + 2) * len(data)
    first, last = report.tests[0], report.tests[-1]
    assert first.suite == ["A" * (NAME_MAX - 1) + "…"]
    assert last.suite == [PATH_CUT] and last.filePath == "f"


def test_every_name_is_cut_visibly_to_the_name_bound() -> None:
    long = b"n" * (NAME_MAX * 3)
    report = parse_junit(
        b'<testsuites><testsuite name="f" file="'
        + long
        + b'"><testcase name="'
        + long
        + b'"/></testsuite></testsuites>'
    )
    (test,) = report.tests
    assert test.name.endswith("…") and len(test.name) == NAME_MAX
    assert test.filePath is not None and len(test.filePath) == NAME_MAX


def test_describe_levels_past_the_depth_bound_are_counted_not_copied() -> None:
    depth = SUITE_DEPTH_MAX + 40
    data = (
        b'<testsuites><testsuite name="f" file="f">'
        + b'<testsuite name="s">' * depth
        + b'<testcase name="x"/>' * 3
        + b"</testsuite>" * depth
        + b'<testcase name="y"/></testsuite></testsuites>'
    )
    x, _, _, y = parse_junit(data).tests
    assert x.suite == ["s"] * SUITE_DEPTH_MAX + ["… 40 more levels"]
    assert y.suite is None


def test_a_failure_text_of_many_character_references_is_read_in_linear_time() -> None:
    """Expat calls the text handler once per `&#10;`: the kept text is counted as it grows."""
    refs = b"&#10;" * (REPORT_MAX_BYTES // 8)
    report = parse_junit(
        b'<testsuites><testsuite name="f"><testcase name="x"><failure message="m">'
        + refs
        + b"</failure></testcase></testsuite></testsuites>"
    )
    assert report.tests[0].status == "failed"


@pytest.mark.parametrize("line", ["\u00b2", "\u2460", "\u0663", "1\u00b2", "\uff11"])
def test_a_line_of_digits_that_are_not_ascii_is_left_absent(line: str) -> None:
    """`str.isdigit` is true of "²", "①" and other scripts' digits, which `int` refuses."""
    data = f'<testsuites><testsuite name="f"><testcase name="a" line="{line}"/></testsuite>'
    (test,) = parse_junit((data + "</testsuites>").encode()).tests
    assert (test.name, test.line) == ("a", None)


_NO_CODEC = "its XML declaration names no text encoding Python has"
_NO_MAP = "its XML declaration names an encoding expat cannot read, or a value does not convert"


@pytest.mark.parametrize(
    ("encoding", "words"),
    [("x-nope", _NO_CODEC), ("rot13", _NO_CODEC), ("utf-7", _NO_MAP), ("idna", _NO_MAP)],
)
def test_an_encoding_python_cannot_read_xml_in_is_an_unreadable_report(
    encoding: str, words: str
) -> None:
    """The declaration is the candidate's to write: expat asks Python for the codec."""
    data = f'<?xml version="1.0" encoding="{encoding}"?><testsuites/>'.encode()
    with pytest.raises(UnreadableReport) as refused:
        parse_junit(data)
    assert str(refused.value) == f"not readable XML ({words})"


@pytest.mark.parametrize(
    "data",
    [
        f'<?xml version="1.0" encoding="{"A" * 100_000}"?><t/>',
        '<?xml version="1.0" encoding="ALL-50-TESTS-PASSED.jigcmd-verified"?><testsuites/>',
        f"<ALL-50-TESTS-PASSED{'A' * 100_000}/>",
    ],
    ids=["long-encoding", "worded-encoding", "long-root"],
)
def test_the_reason_a_report_is_unreadable_never_quotes_it(data: str) -> None:
    """The reason becomes a sentence of jigcmd's (`tests.problem`, the signed annotation):
    an encoding or element name the candidate wrote is not in it, whatever its length."""
    with pytest.raises(UnreadableReport) as refused:
        parse_junit(data.encode())
    said = str(refused.value)
    assert "AAAA" not in said and "PASSED" not in said and len(said) < 120, said


_ENCODINGS = sorted({*encodings.aliases.aliases, *encodings.aliases.aliases.values(), "x-nope"})
_VALUES = st.text(max_size=12) | st.sampled_from(["1", "\u00b2", "1e308", "nan", "-1", "TODO"])
_ATTRIBUTES = st.lists(
    st.tuples(st.sampled_from(["name", "file", "line", "time", "type", "message"]), _VALUES),
    max_size=4,
)
_ELEMENTS = st.sampled_from(
    ["testsuites", "testsuite", "testcase", "failure", "error", "skipped", "x"]
)


@st.composite
def _xmlish(draw: st.DrawFn) -> bytes:
    """XML-like text: a declaration perhaps naming any codec, elements, attributes, text."""
    parts: list[str] = []
    if draw(st.booleans()):
        parts.append(f'<?xml version="1.0" encoding="{draw(st.sampled_from(_ENCODINGS))}"?>')
    for _ in range(draw(st.integers(0, 8))):
        element = draw(_ELEMENTS)
        attrs = "".join(
            f' {key}="{value.replace("&", "&amp;").replace(chr(34), "&quot;")}"'
            for key, value in draw(_ATTRIBUTES)
        )
        close = draw(st.sampled_from(["/>", ">", f"></{element}>"]))
        parts.append(f"<{element}{attrs}{close}{draw(st.text(max_size=6))}")
    parts.extend(draw(st.lists(st.sampled_from(["</testcase>", "</testsuite>", "&#10;"]))))
    data = "".join(parts).encode("utf-8", errors="surrogatepass")
    return data + draw(st.binary(max_size=4))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300) | _xmlish())
def test_any_bytes_are_a_report_or_an_unreadable_one_never_another_exception(
    data: bytes,
) -> None:
    """The candidate writes the report: whatever it holds, reading it raises nothing else,
    and the reason it is unreadable is one of jigcmd's few short sentences."""
    said = ""
    try:
        parse_junit(data)
    except UnreadableReport as refused:
        said = str(refused)
    assert len(said) < 120, said
