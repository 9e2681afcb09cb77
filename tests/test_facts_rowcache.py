"""A large memory file's cut lines are kept on disk by its blob id: a new process builds the
facts from them, and anything else (another blob, a hand edit, a damaged or forged cache
file) is read from git."""

from __future__ import annotations

import hashlib
import marshal
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.facts.rowcache import FactRowsCache
from gitmem.format.facts import Fact, MemoryFile, parse_facts
from tests.conftest import git

COUNT = 1500  # over 100 kB of lines


def _big(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store, agent="tester")
    facts = [
        Fact(
            id=f"f{n:07x}",
            text=f"Fact number {n} says something long enough to fill a line of the file.",
            section=f"Topic {n % 7}",
            by="tester",
        )
        for n in range(COUNT)
    ]

    def change(memory: MemoryFile) -> MemoryFile:
        return memory.with_facts([*memory.facts, *facts])

    mm.change_facts(change, op="remember", subject="Many facts")
    return mm


def _rows_files(store: Path) -> list[Path]:
    return sorted((store / ".git" / "gitmem" / "facts-rows").glob("*.rows"))


def _committed(store: Path) -> MemoryFile:
    return parse_facts(git(store, "cat-file", "blob", "HEAD:memory/MEMORY.md").encode())


def _no_blob_reads(mm: MemoryManager, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(blob_id: str) -> bytes:
        raise AssertionError(f"read blob {blob_id} from git")

    monkeypatch.setattr(mm._facts.store.repo, "blob", refuse)


def test_a_new_process_builds_the_facts_from_the_kept_lines(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _big(store)
    first = MemoryManager(store)
    assert len(first.facts()) == COUNT  # read from git, its lines kept
    assert len(_rows_files(store)) == 1
    again = MemoryManager(store)
    _no_blob_reads(again, monkeypatch)
    assert again.memory_file() == first.memory_file() == _committed(store)
    assert [f.model_fields_set for f in again.facts()] == [
        f.model_fields_set for f in first.facts()
    ]


def test_a_hand_edit_is_read_from_git_not_from_the_kept_lines(store: Path) -> None:
    _big(store)
    assert len(MemoryManager(store).facts()) == COUNT  # lines of this version kept
    path = store / "memory" / "MEMORY.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Fact number 7 says", "Fact seven, edited by hand, says"))
    mm = MemoryManager(store)
    mm.remember("One more.")  # records the hand edit first
    fresh = MemoryManager(store)
    assert fresh.fact("f0000007").text.startswith("Fact seven, edited by hand")
    assert fresh.memory_file() == _committed(store)
    assert len(fresh.facts()) == COUNT + 1


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty", "forged"])
def test_a_damaged_cache_file_is_ignored_and_written_again(store: Path, damage: str) -> None:
    _big(store)
    expected = MemoryManager(store).memory_file()
    (cached,) = _rows_files(store)
    data = cached.read_bytes()
    if damage == "flip":
        at = len(data) - 100
        data = data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1 :]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = b"not a cache file at all\n" * 10
    elif damage == "empty":
        data = b""
    else:  # the right header and checksum over rows of another shape
        head = data[: data.index(b"\n", len(b"gitmem-fact-rows 1\n")) + 1]
        body = marshal.dumps([("Topic 0", [("text", "f1")]), ("Topic 1", [None])])
        data = head + hashlib.sha1(body).digest() + body
    cached.write_bytes(data)
    fresh = MemoryManager(store)
    assert fresh.memory_file() == expected
    assert cached.read_bytes() != data  # written again from the blob


def test_the_cache_answers_only_for_its_own_blob(tmp_path: Path) -> None:
    cache = FactRowsCache(tmp_path / "rows")
    rows = [("Notes", [("a", "f1", "by t")])]
    cache.save("memory/MEMORY.md", "a" * 40, rows)
    assert cache.load("memory/MEMORY.md", "a" * 40) == rows
    assert cache.load("memory/MEMORY.md", "b" * 40) is None
    assert cache.load("ns/other/memory/MEMORY.md", "a" * 40) is None


def test_reading_an_older_version_keeps_the_lines_of_the_tip(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = _big(store)
    old = mm.head()
    mm.remember("A fact the older version does not have.")
    assert len(MemoryManager(store).facts()) == COUNT + 1  # the tip's lines kept
    (cached,) = _rows_files(store)
    kept = cached.read_bytes()
    reader = MemoryManager(store)
    assert len(reader.fact_blame()) == COUNT + 1  # reads the tip, then the older versions
    assert len(reader.facts(commit=old)) == COUNT
    assert cached.read_bytes() == kept
    fresh = MemoryManager(store)
    _no_blob_reads(fresh, monkeypatch)
    assert len(fresh.facts()) == COUNT + 1
