"""The split index (``core.splitIndex``): gitmem's writes read by the real git, and git's read
by gitmem, with EWAH bitmaps checked byte for byte."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.store import ewah, indexfile, splitindex
from gitmem.store.gitindex import GitIndex, parse_entries
from gitmem.store.repository import Repository
from tests.conftest import git


def _ours(store: Path) -> list[tuple[str, ...]]:
    """Every entry of the index as gitmem reads it: mode, id, stage, path and stat fields."""
    index = splitindex.read_index((store / ".git" / "index").read_bytes(), store / ".git")
    rows = []
    for key, chunk in zip(index.keys, index.chunks, strict=True):
        fields = struct.unpack_from(">10I20sH", chunk)
        path, stage = key[:-2].decode(), key[-1]
        rows.append(
            (
                f"{fields[6]:o}",
                fields[10].hex(),
                str(stage),
                path,
                f"{fields[0]}:{fields[1]}",
                f"{fields[2]}:{fields[3]}",
                str(fields[4]),
                str(fields[5]),
                str(fields[7]),
                str(fields[8]),
                str(fields[9]),
            )
        )
    return rows


def _gits(store: Path) -> list[tuple[str, ...]]:
    """The same, as ``git ls-files --stage --debug`` prints it."""
    rows: list[tuple[str, ...]] = []
    lines = git(store, "ls-files", "--stage", "--debug").splitlines()
    for at in range(0, len(lines), 6):
        head, path = lines[at].split("\t")
        mode, sha, stage = head.split()
        ctime = lines[at + 1].split()[1]
        mtime = lines[at + 2].split()[1]
        dev, ino = lines[at + 3].split()[1], lines[at + 3].split()[3]
        uid, gid = lines[at + 4].split()[1], lines[at + 4].split()[3]
        size = lines[at + 5].split()[1]
        rows.append((mode, sha, stage, path, ctime, mtime, dev, ino, uid, gid, size))
    return rows


def _link(store: Path) -> bytes | None:
    return parse_entries((store / ".git" / "index").read_bytes())[3]


def _shared(store: Path) -> set[str]:
    return {p.name for p in (store / ".git").glob("sharedindex.*")}


def _clean(store: Path) -> None:
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--no-progress")
    assert _ours(store) == _gits(store)


@pytest.mark.parametrize(
    "bits",
    [
        [],
        [0],
        [63],
        [64],
        [0, 63, 64, 127, 128],
        list(range(200)),  # > 64 bits, full words
        [3, 100_000, 100_001, 5_000_000],  # long runs of zero words between literals
    ],
)
def test_ewah_round_trip(bits: list[int]) -> None:
    data = ewah.encode(bits)
    assert ewah.decode(data + b"tail") == (bits, len(data))


def test_ewah_empty_matches_git_and_runs_of_ones_decode() -> None:
    assert ewah.encode([]) == struct.pack(">IIQI", 0, 1, 0, 0)  # git's ewah_new()
    # a marker for 2 words of ones, 1 literal word; then 1 zero word and a literal
    words = [(2 << 1) | 1 | (1 << 33), 0b101, (1 << 1) | (1 << 33), 1 << 63]
    data = struct.pack(">II4QI", 300, 4, *words, 2)
    assert ewah.decode(data)[0] == [*range(128), 128, 130, 192 + 64 + 63]


@pytest.mark.parametrize(
    "data",
    [
        b"\0\0\0\1",  # no word count
        struct.pack(">II", 64, 3) + b"\0" * 8,  # fewer words than announced
        struct.pack(">IIQI", 64, 1, 5 << 33, 0),  # more literal words than present
        struct.pack(">IIQI", 64, 1, 0, 7),  # marker position past the words
    ],
)
def test_ewah_cut_short_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(UnsupportedIndex, match="EWAH"):
        ewah.decode(data)


def test_new_store_saves_write_a_small_split_index_git_reads(store: Path) -> None:
    mm = MemoryManager.init(store, agent="t")
    for n in range(30):
        mm.save_interaction(f"s{n % 12}", f"question {n}", f"answer {n}")
    mm.close()
    assert git(store, "config", "core.splitIndex").strip() == "true"
    link = _link(store)
    assert link is not None and link[:20].hex() in {n.split(".")[1] for n in _shared(store)}
    _clean(store)
    assert len(git(store, "ls-files").split()) == 15  # README, attributes, layout, 12 files


def test_git_split_index_with_every_kind_of_change_is_read_and_edited(store: Path) -> None:
    mm = MemoryManager.init(store, agent="t")
    for n in range(8):
        mm.save_interaction(f"s{n}", "q", "a")
    # a person's git: a fresh shared index, then replaced, deleted and added entries kept
    # in the delta (maxPercentChange=100: git never writes a new shared index)
    git(store, "config", "splitIndex.maxPercentChange", "100")
    git(store, "update-index", "--split-index")
    (store / "notes.txt").write_text("mine\n")
    (store / "sessions" / "64" / "s1.md").write_text("edited by a person\n")
    git(store, "add", "notes.txt", "sessions/64/s1.md")
    git(store, "rm", "-q", "--cached", "sessions/42/s2.md")
    link = _link(store)
    assert link is not None and len(link) > 20
    deleted, end = ewah.decode(link, 20)
    replaced, _end = ewah.decode(link, end)
    assert deleted and replaced  # the bitmaps git wrote, decoded
    assert _ours(store) == _gits(store)
    mm.save_interaction("s3", "q2", "a2")  # gitmem edits git's split index
    mm.save_interaction("new", "q", "a")
    assert _ours(store) == _gits(store)
    status = git(store, "status", "--porcelain").splitlines()
    assert sorted(status) == sorted(
        ["A  notes.txt", "D  sessions/42/s2.md", "M  sessions/64/s1.md", "?? sessions/42/"]
    )
    git(store, "commit", "-qm", "person")  # the person's commit keeps gitmem's saves
    assert "q2" in git(store, "show", "HEAD:sessions/dd/s3.md")
    assert git(store, "show", "HEAD:notes.txt") == "mine\n"
    mm.save_interaction("s4", "q3", "a3")
    git(store, "add", "sessions/42/s2.md")
    git(store, "commit", "-qm", "back")
    _clean(store)
    mm.close()


def test_unsplit_by_git_then_split_again_by_gitmem(store: Path) -> None:
    mm = MemoryManager.init(store, agent="t")
    mm.save_interaction("a", "q", "a")
    git(store, "update-index", "--no-split-index")
    assert _link(store) is None
    mm.save_interaction("a", "q2", "a2")
    assert _link(store) is not None  # core.splitIndex=true: split again
    _clean(store)
    git(store, "config", "core.splitIndex", "false")
    mm.save_interaction("b", "q", "a")
    assert _link(store) is None  # the person switched it off: a plain index
    _clean(store)
    mm.close()


def test_rotation_writes_a_new_shared_index_and_expires_old_ones(store: Path) -> None:
    mm = MemoryManager.init(store, agent="t")
    git(store, "config", "splitIndex.maxPercentChange", "0")  # a new shared index each write
    git(store, "config", "splitIndex.sharedIndexExpire", "never")
    for n in range(3):
        mm.save_interaction(f"s{n}", "q", "a")
    kept = _shared(store)
    assert len(kept) >= 4
    git(store, "config", "splitIndex.sharedIndexExpire", "now")
    mm.save_interaction("s9", "q", "a")
    link = _link(store)
    assert link is not None and _shared(store) == {f"sharedindex.{link[:20].hex()}"}
    _clean(store)
    mm.close()


def test_delta_past_the_byte_cap_rotates(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(splitindex, "MAX_DELTA_BYTES", 300)
    mm = MemoryManager.init(store, agent="t")
    git(store, "config", "splitIndex.maxPercentChange", "100")  # only the cap rotates
    sizes = []
    for n in range(12):
        mm.save_interaction(f"s{n}", "q", "a")
        sizes.append((store / ".git" / "index").stat().st_size)
    assert max(sizes) < 300 + 200  # never more than the cap and one entry's growth
    assert len(_shared(store)) > 2
    _clean(store)
    mm.close()


def test_existing_store_switches_to_split_past_the_threshold(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = MemoryManager.init(store, agent="t")
    git(store, "config", "--unset", "core.splitIndex")
    git(store, "config", "--unset", "splitIndex.sharedIndexExpire")
    git(store, "update-index", "--no-split-index")
    monkeypatch.setattr(indexfile, "SPLIT_FROM_ENTRIES", 6)
    mm.save_interaction("a", "q", "a")
    assert _link(store) is None  # 3 entries: stays plain
    for n in range(4):
        mm.save_interaction(f"s{n}", "q", "a")
    assert _link(store) is not None
    assert git(store, "config", "core.splitIndex").strip() == "true"
    assert git(store, "config", "splitIndex.sharedIndexExpire").strip() == "30.seconds.ago"
    _clean(store)
    mm.close()


def test_missing_shared_index_is_a_clear_error_then_rebuilt(store: Path) -> None:
    Repository.init(store).close()
    mm = MemoryManager(store, agent="t")
    mm.save_interaction("a", "q", "a")
    for shared in (store / ".git").glob("sharedindex.*"):
        shared.unlink()
    mm.save_interaction("a", "q1", "a1")  # a writer holding the index writes a new one
    _clean(store)
    mm.close()
    for shared in (store / ".git").glob("sharedindex.*"):
        shared.unlink()
    mm = MemoryManager(store, agent="t")  # another process: only the files to go by
    with pytest.raises(RepositoryError, match=r"sharedindex\.[0-9a-f]{40} is missing"):
        mm.save_interaction("a", "q2", "a2")
    assert "q2" not in (store / "sessions" / "86" / "a.md").read_text()  # nothing half-written
    mm.save_interaction("a", "q3", "a3")  # the next call rebuilds the index from HEAD
    assert "q3" in git(store, "show", "HEAD:sessions/86/a.md")
    _clean(store)
    mm.close()


def test_delta_follows_random_edits_and_drops_reverted_ones(tmp_path: Path) -> None:
    def stat(n: int) -> tuple[int, ...]:
        return (n, 0, n, 0, 1, n, 0o100644, 0, 0, n)

    index = GitIndex.empty()
    for n in range(40):
        index.set(f"f{n:02d}".encode(), stat(n), bytes([n]) * 20)
    splitindex.rotate(index, tmp_path, tmp_path / "tmp", lambda: 0.0)
    original = (list(index.keys), list(index.chunks))
    rng = random.Random(12)
    for step in range(300):
        path = f"f{rng.randrange(50):02d}".encode()
        kind = rng.randrange(3)
        if kind == 0:
            index.set(path, stat(step), bytes([step % 251]) * 20)
        elif kind == 1:
            index.remove(path)
        else:
            at = original[0].index(path + b"\0\0") if path + b"\0\0" in original[0] else -1
            index.restore(path, [original[1][at]] if at >= 0 else [])
        data, _entries = splitindex.encode_delta(index)
        back = splitindex.read_index(data, tmp_path)
        assert (back.keys, back.chunks) == (index.keys, index.chunks), step
    for n in range(50):  # every path back as in the shared index: an empty delta
        path = f"f{n:02d}".encode()
        index.restore(path, [original[1][n]] if n < 40 else [])
    assert splitindex.encode_delta(index)[1] == 0


def test_conflict_stages_in_a_split_index_survive_a_save(store: Path) -> None:
    mm = MemoryManager.init(store, agent="t")
    mm.save_interaction("a", "q", "a")
    (store / "notes.txt").write_text("base\n")
    git(store, "add", "notes.txt")
    git(store, "commit", "-qm", "base")
    git(store, "checkout", "-qb", "side")
    (store / "notes.txt").write_text("side\n")
    git(store, "commit", "-qam", "side")
    git(store, "checkout", "-q", "main")
    (store / "notes.txt").write_text("main\n")
    git(store, "commit", "-qam", "main")
    git(store, "merge", "-q", "side", check=False)  # a conflict: stages 1, 2 and 3
    assert [row[2] for row in _gits(store) if row[3] == "notes.txt"] == ["1", "2", "3"]
    assert _ours(store) == _gits(store)
    mm.save_interaction("b", "q", "a")  # gitmem writes around the conflict
    assert _ours(store) == _gits(store)
    assert [row[2] for row in _gits(store) if row[3] == "notes.txt"] == ["1", "2", "3"]
    assert git(store, "status", "--porcelain") == "UU notes.txt\n"
    mm.close()
