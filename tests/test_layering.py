"""The import rules of docs/architecture.md, read from the source (ast), not from a drawing."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "jigcmd"

# The pure core: protocol, policy and JSON decisions, the vocabulary they share. None of it
# touches the operating system, a thread, an event loop or the journal.
PURE = ("jigcmd.protocol", "jigcmd.policy", "jigcmd.jsonio")
PURE_MODULES = (
    "jigcmd.evidence",
    "jigcmd.plan",
    "jigcmd.contract",
    # The statements of runs and their envelopes: values in, bytes out.
    "jigcmd.attest.statement",
    "jigcmd.attest.dsse",
    "jigcmd.attest.testreport",
    # Edwards25519 arithmetic: 32 bytes in, whether the key is of small order out.
    "jigcmd.attest.edwards",
)
IMPURE_IMPORTS = ("os", "anyio", "asyncio", "socket", "subprocess", "threading", "sqlite3")
# Each untyped library behind its one adapter.
ADAPTERS = {"pyroute2": "jigcmd.envelope.netns", "cgroupspy": "jigcmd.envelope.cgroups.v1"}
# The envelope's one door to durable state; process identities are a value it may carry.
JOURNAL_DOOR = "jigcmd.envelope.ledger"
# The signing library behind the key module: the rest of jigcmd signs and verifies through it.
CRYPTO_DOOR = "jigcmd.attest.keys"
JOURNAL_VALUES = ("jigcmd.journal.identity",)


def _name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, except what sits under `if TYPE_CHECKING:` (never imported at run time)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _under_type_checking(child):
            yield from (n for orelse in child.orelse for n in [orelse, *_nodes(orelse)])
            continue
        yield child
        yield from _nodes(child)


def imports(module: str) -> set[str]:
    """The modules `module` imports at run time, at its top or inside a function."""
    path = MODULES[module]
    found: set[str] = set()
    for node in _nodes(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # `from package import module` names the module itself.
            named = {f"{source}.{alias.name}" for alias in node.names}
            found |= (named & MODULES.keys()) or {source}
    return found


def _pure(module: str) -> bool:
    return (
        module in PURE_MODULES or module.startswith(tuple(f"{p}." for p in PURE)) or module in PURE
    )


@pytest.mark.parametrize("module", [m for m in MODULES if _pure(m)])
def test_the_pure_core_touches_no_operating_system_loop_or_journal(module: str) -> None:
    """protocol/, policy/, jsonio/, evidence, plan and contract import nothing with effects."""
    impure = {name for name in imports(module) if name.split(".")[0] in IMPURE_IMPORTS}
    journal = {name for name in imports(module) if name.startswith("jigcmd.journal")}
    assert impure | journal == set(), module


@pytest.mark.parametrize(("library", "adapter"), ADAPTERS.items())
def test_each_untyped_library_is_imported_by_its_adapter_alone(library: str, adapter: str) -> None:
    """pyroute2 only in envelope/netns.py, cgroupspy only in envelope/cgroups/v1.py."""
    users = {m for m in MODULES if any(n.split(".")[0] == library for n in imports(m))}
    assert users == {adapter}


def test_cryptography_is_imported_by_the_key_module_alone() -> None:
    """Signing and verifying go through attest/keys.py; nothing else holds key material."""
    users = {m for m in MODULES if any(n.split(".")[0] == "cryptography" for n in imports(m))}
    assert users == {CRYPTO_DOOR}


def test_the_envelope_reaches_the_journal_through_its_one_door() -> None:
    """Outside envelope/ledger.py no envelope module imports the journal (identities aside)."""
    reaching = {
        (module, name)
        for module in MODULES
        if module.startswith("jigcmd.envelope") and module != JOURNAL_DOOR
        for name in imports(module)
        if name.startswith("jigcmd.journal") and name not in JOURNAL_VALUES
    }
    assert reaching == set()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, edges_of_root in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(edges_of_root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_import_graph_has_no_cycle() -> None:
    """No two modules of jigcmd import each other, directly or round about (lazy imports too)."""
    graph = {m: {n for n in imports(m) if n in MODULES and n != m} for m in MODULES}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """A three-module loop and a self-contained tail: the loop is reported, the tail not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
