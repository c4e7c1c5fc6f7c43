"""Walking a decoded value in document order, its JSON pointer built only when asked."""

from __future__ import annotations

from jigcmd.jsonio.pointer import pointer, walk


def test_the_walk_visits_every_value_in_document_order_with_its_path() -> None:
    """Root first, members in order, each container before what it holds."""
    value = {"a": [1, {"b/c": 2}], "~": 3}
    seen = [(pointer(path), item) for path, item in walk(value)]
    assert [where for where, _ in seen] == ["", "/a", "/a/0", "/a/1", "/a/1/b~1c", "/~0"]
    assert seen[-1][1] == 3


def test_the_walk_leaves_out_the_value_at_skip_and_all_it_holds() -> None:
    """Only that path: a sibling with the same key elsewhere is still visited."""
    value = {"p": {"in": [1, 2], "ok": 1}, "in": 0}
    seen = [pointer(path) for path, _ in walk(value, ["p", "in"])]
    assert seen == ["", "/p", "/p/ok", "/in"]


def test_a_pointer_shows_a_lone_surrogate_key_as_an_escape() -> None:
    """So the pointer encodes as UTF-8 in an answer."""
    assert pointer(["\ud800", 0]) == "/\\ud800/0"
    pointer(["\ud800"]).encode()
