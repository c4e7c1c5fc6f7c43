"""Every module under jigcmd/ says what it exports (`__all__`), and every name it lists exists."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "jigcmd"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _declared(path: Path) -> list[str] | None:
    """The names a module's top-level `__all__` assignment lists, or None without one."""
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            names = ast.literal_eval(value)
            assert isinstance(names, list | tuple), f"{path}: __all__ is not a list"
            return [str(name) for name in names]
    return None


def _where(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


@pytest.mark.parametrize("path", MODULES, ids=_where)
def test_every_module_declares_its_public_names(path: Path) -> None:
    """A top-level `__all__` of string literals, each listed once."""
    names = _declared(path)
    assert names is not None, f"{_where(path)} has no __all__"
    assert len(set(names)) == len(names), f"{_where(path)} lists a name twice: {names}"


@pytest.mark.parametrize("path", [m for m in MODULES if m.name != "__main__.py"], ids=_where)
def test_every_name_a_module_exports_exists(path: Path) -> None:
    """Imported, the module has every attribute its `__all__` lists."""
    module = importlib.import_module(_name(path))
    missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
    assert missing == [], f"{_where(path)} exports names it does not define: {missing}"


def test_the_entry_point_exports_nothing_but_runs_the_cli() -> None:
    """`python -m jigcmd` is not imported (it would run); its `__all__` is statically empty."""
    assert _declared(PACKAGE / "__main__.py") == []
