"""Per-run resources in the state directory: the same bytes back, only to their own run."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from jigcmd.durable.runresources import (
    KINDS,
    ResourceKind,
    ResourceNotFound,
    RunResources,
    register_kind,
)


def test_a_kept_resource_reads_back_byte_for_byte_with_its_digest(tmp_path: Path) -> None:
    store = RunResources(tmp_path)
    data = "héllo\n".encode()
    ref = store.put("run-1", "mcp.a.1", "stdout", data)
    assert ref.uri == "jigcmd://run/run-1/mcp.a.1/stdout"
    assert ref.sha256 == "sha256:" + hashlib.sha256(data).hexdigest() and ref.size == len(data)
    assert store.read("run-1", ref.uri) == (data, KINDS["stdout"])
    files = [p for p in (tmp_path / "resources").rglob("*") if p.is_file()]
    assert [oct(p.stat().st_mode & 0o777) for p in files] == ["0o600"]


def test_names_with_slashes_are_quoted_and_still_resolve(tmp_path: Path) -> None:
    store = RunResources(tmp_path)
    ref = store.put("temporal:wf/1", "act/7", "junit", b"<testsuites/>")
    assert ref.uri == "jigcmd://run/temporal%3Awf%2F1/act%2F7/junit"
    assert store.read("temporal:wf/1", ref.uri)[0] == b"<testsuites/>"


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("jigcmd://run/run-2/mcp.a.1/stdout", "another run"),
        ("jigcmd://run/run-1/mcp.a.9/stdout", "kept no stdout"),
        ("jigcmd://run/run-1/mcp.a.1/passwd", "no resource named"),
        ("jigcmd://run/run-1/stdout", "expected jigcmd://run/"),
        ("jigcmd://run/run-1/%2E%2E/%2E%2E/stdout", "expected jigcmd://run/"),
        ("jigcmd://run/run-1/%2E%2E/stdout", "kept no stdout"),
        ("file:///etc/passwd", "not a jigcmd run resource"),
    ],
)
def test_anything_else_is_not_found_with_the_reason(tmp_path: Path, uri: str, why: str) -> None:
    store = RunResources(tmp_path)
    store.put("run-1", "mcp.a.1", "stdout", b"x")
    with pytest.raises(ResourceNotFound) as missing:
        store.read("run-1", uri)
    assert why in str(missing.value)


def test_only_the_newest_operations_of_a_run_are_kept(tmp_path: Path) -> None:
    store = RunResources(tmp_path, keep=3)
    refs = [store.put("run-1", f"op-{i}", "stdout", b"%d" % i) for i in range(5)]
    with pytest.raises(ResourceNotFound):
        store.read("run-1", refs[0].uri)
    assert store.read("run-1", refs[4].uri)[0] == b"4"


def test_operations_are_pruned_in_batches_never_below_the_newest_kept(tmp_path: Path) -> None:
    """Past keep + keep/8 operations the oldest go, down to `keep`; the newest always stay."""
    store = RunResources(tmp_path, keep=16)
    refs = []
    for i in range(40):
        refs.append(store.put("run-1", f"op-{i}", "stdout", b"%d" % i))
        # Ages one second apart: a file system's coarse clock must not tie them.
        os.utime(store._operation_path("run-1", f"op-{i}"), (1_000_000 + i, 1_000_000 + i))
        kept = [ref for ref in refs if _readable(store, ref.uri)]
        assert 16 <= len(kept) <= 18 or len(refs) < 16
        assert kept == refs[-len(kept) :]


def _readable(store: RunResources, uri: str) -> bool:
    try:
        store.read("run-1", uri)
    except ResourceNotFound:
        return False
    return True


def test_another_front_can_add_a_kind_of_resource(tmp_path: Path) -> None:
    register_kind(ResourceKind("jigcmd-test-kind", "application/json", "a test kind"))
    try:
        store = RunResources(tmp_path)
        ref = store.put("r", "o", "jigcmd-test-kind", b"{}")
        assert store.read("r", ref.uri)[1].mime_type == "application/json"
    finally:
        del KINDS["jigcmd-test-kind"]
    with pytest.raises(ValueError, match="one path segment"):
        register_kind(ResourceKind("a/b", "text/plain", "x"))


def test_a_put_that_leaves_pruning_to_its_caller_prunes_only_when_asked(tmp_path: Path) -> None:
    """`prune=False` keeps everything until `crowded` says so and `prune` removes the oldest."""
    store = RunResources(tmp_path, keep=8)
    refs = []
    for i in range(10):
        refs.append(store.put("run-1", f"op-{i}", "stdout", b"%d" % i, prune=False))
        os.utime(store._operation_path("run-1", f"op-{i}"), (1_000_000 + i, 1_000_000 + i))
    assert all(_readable(store, ref.uri) for ref in refs)
    assert store.crowded("run-1") and not store.crowded("run-2")
    store.prune("run-1")
    assert not store.crowded("run-1")
    assert [_readable(store, ref.uri) for ref in refs] == [False, False] + [True] * 8


def test_an_operations_resources_are_kept_in_one_file_and_read_back_each(
    tmp_path: Path,
) -> None:
    """`keep` writes one owner-only file for all of a call's resources; each reads back."""
    store = RunResources(tmp_path)
    parts = [
        ("stdout", b"out\n"),
        ("stderr", b""),
        ("junit", b"<testsuites/>"),
        ("attestation", b"{}"),
    ]
    refs = store.keep("run-1", "op-1", parts, prune=False)
    assert [ref.name for ref in refs] == ["stdout", "stderr", "junit", "attestation"]
    for ref, (name, data) in zip(refs, parts, strict=True):
        assert store.read("run-1", ref.uri) == (data, KINDS[name])
        assert ref.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
    entries = list((tmp_path / "resources").rglob("*"))
    files = [p for p in entries if p.is_file()]
    assert len(files) == 1 and len(entries) == 2  # the scope's directory and the one file
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"


def test_a_put_adds_a_resource_beside_those_the_operation_kept(tmp_path: Path) -> None:
    store = RunResources(tmp_path)
    kept = store.keep("run-1", "op-1", [("stdout", b"a"), ("stderr", b"b")])
    added = store.put("run-1", "op-1", "junit", b"<testsuites/>")
    assert [store.read("run-1", ref.uri)[0] for ref in (*kept, added)] == [
        b"a",
        b"b",
        b"<testsuites/>",
    ]


def _kept_before_2026_12_05(store: RunResources, operation: str, parts: dict[str, bytes]) -> Path:
    """An operation as an earlier jigcmd kept it: a directory with a file per resource."""
    directory = store._operation_path("run-1", operation)
    directory.mkdir(parents=True)
    for name, data in parts.items():
        (directory / name).write_bytes(data)
    return directory


def test_an_operation_kept_by_an_earlier_jigcmd_still_reads_and_is_pruned(
    tmp_path: Path,
) -> None:
    store = RunResources(tmp_path, keep=2)
    old = _kept_before_2026_12_05(store, "op-old", {"stdout": b"old out", "junit": b"<x/>"})
    os.utime(old, (1_000_000, 1_000_000))
    uri = "jigcmd://run/run-1/op-old/stdout"
    assert store.read("run-1", uri)[0] == b"old out"
    assert store.read("run-1", "jigcmd://run/run-1/op-old/junit")[0] == b"<x/>"
    with pytest.raises(ResourceNotFound, match="kept no stderr"):
        store.read("run-1", "jigcmd://run/run-1/op-old/stderr")
    for i in range(3):
        store.keep("run-1", f"op-{i}", [("stdout", b"%d" % i)])
    assert not old.exists()
    assert not _readable(store, uri)


def test_keeping_an_operation_again_replaces_its_earlier_directory(tmp_path: Path) -> None:
    store = RunResources(tmp_path)
    _kept_before_2026_12_05(store, "op-1", {"stdout": b"old"})
    (ref,) = store.keep("run-1", "op-1", [("stdout", b"new")])
    assert store.read("run-1", ref.uri)[0] == b"new"
    assert store._operation_path("run-1", "op-1").is_file()


def test_a_damaged_file_is_not_found_with_the_reason(tmp_path: Path) -> None:
    store = RunResources(tmp_path)
    (ref,) = store.keep("run-1", "op-1", [("stdout", b"0123456789")])
    path = store._operation_path("run-1", "op-1")
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ResourceNotFound, match="unreadable: it ends inside a resource"):
        store.read("run-1", ref.uri)
    path.write_bytes(b"not ours")
    with pytest.raises(ResourceNotFound, match="unreadable: it does not start as"):
        store.read("run-1", ref.uri)


def test_a_link_planted_as_a_kept_operation_is_not_read_through(tmp_path: Path) -> None:
    """What is served back is only a file jigcmd kept, never the file a link names."""
    store = RunResources(tmp_path)
    ref = store.put("run-1", "op-1", "stdout", b"kept")
    (kept,) = [p for p in (tmp_path / "resources").rglob("*") if p.is_file()]
    secret = tmp_path / "secret"
    secret.write_bytes(b"jigcmd-resources/1\n")  # a blob's magic: read as an empty one
    kept.unlink()
    kept.symlink_to(secret)
    with pytest.raises(OSError, match="symbolic links"):
        store.read("run-1", ref.uri)


def test_a_resource_kept_anew_is_written_through_the_held_directory(tmp_path: Path) -> None:
    """`resources/` swapped for a link after it was first used: the write stays in the
    directory checked then, and nothing lands where the link points."""
    store = RunResources(tmp_path)
    store.put("run-1", "op-1", "stdout", b"first")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "resources").rename(tmp_path / "resources.old")
    (tmp_path / "resources").symlink_to(elsewhere)
    store.put("run-1", "op-2", "stdout", b"second")
    assert list(elsewhere.iterdir()) == []
