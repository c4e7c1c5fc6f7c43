"""Which packages a candidate's sources import by name, and which markup is JSX. Pure."""

from __future__ import annotations

import pytest

from jigcmd.policy.imports import package_imports, package_name
from jigcmd.policy.sourcetext import blank, has_jsx


@pytest.mark.parametrize(
    ("specifier", "package"),
    [
        ("zod", "zod"),
        ("zod/v4", "zod"),
        ("@scope/pkg", "@scope/pkg"),
        ("@scope/pkg/sub/deep", "@scope/pkg"),
        ("./rel", None),
        ("../up", None),
        ("/abs", None),
        ("#internal", None),
        ("bun:test", None),
        ("node:fs", None),
    ],
)
def test_a_bare_specifier_maps_to_its_package(specifier: str, package: str | None) -> None:
    """`pkg/sub` and `@scope/pkg/sub` are their package; paths and schemes are none."""
    assert package_name(specifier) == package


def test_every_import_form_counts_but_types_and_comments() -> None:
    """Static, re-export, side-effect, dynamic and require; `import type` and comments not."""
    source = (
        'import a, { b } from "one/sub"\nexport * from "@s/two"\nimport "three";\n'
        "const c = await import('four'); const d = require(\"five\");\n"
        'import type { T } from "types-only"\n/* import x from "commented" */\n'
        '// require("also-commented")\nconst s = "import x from \'in-a-string\'";\n'
    )
    found = package_imports({"src/a.ts": source, "README.md": 'import x from "not-code"'})
    assert list(found.importers) == ["@s/two", "five", "four", "one", "three"]
    assert found.computed == ()


def test_markup_imports_the_jsx_runtime_that_tsconfig_names() -> None:
    """Bun's automatic runtime: `react` unless tsconfig.json or a pragma names another."""
    files = {"a.tsx": "export const A = () => <b>x</b>;", "tsconfig.json": ""}
    assert list(package_imports(files).importers) == ["react"]
    files["tsconfig.json"] = '{"compilerOptions": {"jsxImportSource": "preact"}}'
    assert list(package_imports(files).importers) == ["preact"]


@pytest.mark.parametrize(
    ("source", "jsx"),
    [
        ("render(<Teaser>Test Content</Teaser>)", True),
        ("render(<Timer initialSeconds={60} />)", True),
        ("const f = () => <>x</>;", True),
        ("const m = new Map<string, Array<number>>(); const x = <T>y;", False),
        ('const html = "<b>x</b>"; // <br/>', False),
        ("if (a < b && c > d) {}", False),
    ],
)
def test_jsx_is_markup_outside_strings_and_comments(source: str, jsx: bool) -> None:
    """A closing or self-closing tag; a generic, an assertion or a string is none."""
    assert has_jsx(source) is jsx


@pytest.mark.parametrize(
    ("source", "blanked"),
    [
        ('/* a "b" */ "c" // \'d\'', '            "_"       '),
        ('x = "a \\" // b\ny = "c"', 'x = "a \\"     \ny = "_"'),
        ("`a\\`b", "`a\\`b"),
        ("`a\nb`", "`_\n_`"),
    ],
)
def test_a_literal_left_open_is_code_after_its_quote(source: str, blanked: str) -> None:
    """A string ends on its line, a template literal may not; one left open blanks nothing,
    its escaped quotes open nothing, and a comment after it is still one."""
    assert blank(source) == blanked


@pytest.mark.parametrize("end", ["\n", "\r", "\u2028", "\u2029"])
def test_a_line_comment_ends_at_each_of_javascripts_line_terminators(end: str) -> None:
    """CR, U+2028 and U+2029 end `//` as LF does (ECMAScript, Bun): the import after it is one."""
    source = f'// c{end}import pad from "tiny-pad";\n'
    assert blank(source) == f'    {end}import pad from "________";\n'
    assert package_imports({"a.ts": source}).importers == {"tiny-pad": ("a.ts",)}
    assert package_imports({"a.ts": '// c\u0085import "tiny-pad";'}).importers == {}


@pytest.mark.parametrize("end", ["\r\n", "\n", "\r", "\u2028", "\u2029"])
def test_a_line_continuation_in_a_string_is_one_line_terminator(end: str) -> None:
    """`\\` then CRLF continues the string as one terminator (Bun runs both imports after it)."""
    source = f'const s = "a\\{end}"; import "./dep.js"; import "hiddenpkg";\r\nconsole.log(s);\r\n'
    assert package_imports({"main.js": source}).importers == {"hiddenpkg": ("main.js",)}
