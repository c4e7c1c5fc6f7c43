"""The envelope registry's files: one whole entry per envelope, never a directory re-made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from jigcmd.journal.identity import ProcessIdentity, current


def _entry(name: str) -> EnvelopeEntry:
    return EnvelopeEntry(name=name, supervisor=current(), owner=current())


def test_an_entry_is_written_whole_and_read_back(tmp_path: Path) -> None:
    """What register wrote is what recovery reads; the file holds nothing else."""
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    registry.register(_entry("jigcmd-aaaa"))
    assert registry.entries() == [_entry("jigcmd-aaaa")]
    assert sorted(os.listdir(tmp_path / "envelopes")) == ["jigcmd-aaaa.envelope"]


def test_a_second_entry_of_the_same_name_is_refused_and_the_first_kept(tmp_path: Path) -> None:
    """O_EXCL: an envelope's entry is never overwritten by another's."""
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    registry.register(_entry("jigcmd-bbbb"))
    with pytest.raises(FileExistsError):
        registry.register(_entry("jigcmd-bbbb"))
    assert registry.entries() == [_entry("jigcmd-bbbb")]


def test_a_registry_whose_directory_is_gone_refuses_and_makes_nothing(tmp_path: Path) -> None:
    """A state directory removed under a live server is not half made again."""
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    (tmp_path / "envelopes").rmdir()
    with pytest.raises(FileNotFoundError):
        registry.register(_entry("jigcmd-cccc"))
    assert os.listdir(tmp_path) == []


def test_an_empty_entry_left_by_a_death_between_open_and_write_is_skipped(
    tmp_path: Path,
) -> None:
    """Readers skip what is not a whole entry; the others are still read."""
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    (tmp_path / "envelopes" / "jigcmd-dead.envelope").write_bytes(b"")
    registry.register(_entry("jigcmd-dddd"))
    assert registry.entries() == [_entry("jigcmd-dddd")]


def test_dropping_an_entry_removes_its_file_and_a_missing_one_is_fine(tmp_path: Path) -> None:
    """The release drops the entry once; a second drop finds nothing and says nothing."""
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    registry.register(_entry("jigcmd-eeee"))
    registry.drop("jigcmd-eeee")
    registry.drop("jigcmd-eeee")
    assert registry.entries() == []


def test_entries_of_other_identities_and_any_name_read_back_as_written(tmp_path: Path) -> None:
    """The identities encoded once are encoded again when they change; a name is quoted."""
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    other = ProcessIdentity(pid=1, start=2, boot_id='b"\\\u00e9')
    entries = [
        _entry("jigcmd-cccc"),
        EnvelopeEntry(name='jigcmd-"q"\\', supervisor=other, owner=current()),
        _entry("jigcmd-dddd"),
    ]
    for entry in entries:
        registry.register(entry)
    assert sorted(registry.entries()) == sorted(entries)
