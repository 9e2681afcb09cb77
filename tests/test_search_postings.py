"""Packed postings (gitmem/search/postings.py): encoding, append, delete, best-first order."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from gitmem.models import Interaction, Message, Session
from gitmem.search.index import SearchIndex
from gitmem.search.postings import (
    TAIL_MAX,
    PostingBlock,
    impact,
    pack,
    posting_key,
    split_key,
    unpack,
)

_T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _session(sid: str, turns: list[str]) -> Session:
    return Session(
        id=sid,
        created=_T0,
        last_active=_T0,
        interactions=[
            Interaction(
                id=f"{sid}-{n}", timestamp=_T0, messages=[Message(speaker="ann", content=text)]
            )
            for n, text in enumerate(turns)
        ],
    )


def _put(index: SearchIndex, sid: str, turns: list[str], *, bulk: bool = False) -> None:
    """Index one session: as a save's catch-up does, or (``bulk``) as a rebuild does."""
    with index.writing(bulk=bulk):
        if bulk:
            index.clear()
        index.put_session(_session(sid, turns), f"sessions/{sid}.md", "0" * 40)


def _places(index: SearchIndex, term: str, limit: int = 10_000) -> list[tuple[str, int]]:
    """(session id, position) of each posting of ``term``, in the order the index gives."""
    rows = index.postings(term, limit)
    sessions = index.sessions(r[3] for r in rows)
    return [(sessions[r[3]].session_id, r[4]) for r in rows]


def _blocks(index: SearchIndex, term: str) -> tuple[int, int]:
    """How many postings of ``term`` its main block and its tail hold (the stored rows)."""
    tid = index._db.execute("SELECT tid FROM terms WHERE term=?", (term,)).fetchone()[0]
    sizes = dict(
        index._db.execute(
            "SELECT id - ?, n FROM postings WHERE id IN (?, ?)", (2 * tid, 2 * tid, 2 * tid + 1)
        ).fetchall()
    )
    return sizes.get(0, 0), sizes.get(1, 0)


def test_keys_round_trip_through_a_blob_in_order() -> None:
    keys = sorted(
        (
            posting_key(imp, doc, tf)
            for imp, doc, tf in [(21_999, 4_000_000_000, 1), (0, 1, 65_535), (17, 2, 3), (17, 3, 3)]
        ),
        reverse=True,
    )
    data = pack(keys)
    assert len(data) == 8 * len(keys)
    assert list(unpack(data)) == keys
    assert [split_key(k) for k in keys] == [
        (21_999, 4_000_000_000, 1),
        (17, 3, 3),
        (17, 2, 3),
        (0, 1, 65_535),
    ]
    # a head cut mid-posting keeps whole postings only
    assert list(unpack(data[:13])) == keys[:1]


def test_a_main_block_keeps_ids_and_tfs_in_five_bytes_and_its_head_decodes() -> None:
    keys = [posting_key(9, doc, tf) for doc, tf in [(70_000, 3), (5, 1), (4, 200)]]
    n, data = PostingBlock.of_keys(keys).encode()
    assert (n, len(data)) == (3, 15)  # 4 bytes an id, 1 a tf
    whole = PostingBlock.decode(n, len(data), data[:12], data[12:])
    assert (list(whole.docs), list(whole.tfs)) == ([70_000, 5, 4], [3, 1, 200])
    head = PostingBlock.decode(n, len(data), data[:8], data[12:14])  # what a query reads first
    assert (list(head.docs), list(head.tfs)) == ([70_000, 5], [3, 1])
    n, data = PostingBlock.of_keys([posting_key(9, 1, 300)]).encode()
    assert len(data) == 6 and list(PostingBlock.decode(n, len(data), data[:4], data[4:]).tfs) == [
        300
    ]


def test_tail_postings_merge_into_a_block_at_their_impact() -> None:
    norms = [0.0, 1.0, 2.0, 0.5, 1.0, 3.0]  # by document id
    ranked = sorted(
        (
            posting_key(impact(tf, norms[doc]), doc, tf)
            for doc, tf in [(1, 1), (2, 1), (3, 2), (4, 5), (5, 1)]
        ),
        reverse=True,
    )
    main = PostingBlock.of_keys(ranked[::2])
    merged = main.merged(ranked[1::2], norms, 10)
    assert list(merged.docs) == [split_key(k)[1] for k in ranked]
    assert list(main.merged(ranked[1::2], norms, 2).docs) == [split_key(k)[1] for k in ranked[:2]]
    assert list(merged.without({3, 5}).docs) == [
        split_key(k)[1] for k in ranked if split_key(k)[1] not in (3, 5)
    ]


def test_postings_come_best_first_and_a_head_is_the_best(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "i.sqlite")
    # the same word once in turns of growing length: the shorter turn has the higher impact
    turns = ["kiwi " + " ".join(f"pad{n}x{m}" for m in range(n)) for n in range(40)]
    _put(index, "s", turns, bulk=True)
    full = _places(index, "kiwi")
    assert full == [("s", n) for n in range(40)]
    assert _places(index, "kiwi", 5) == full[:5]
    assert _blocks(index, "kiwi") == (40, 0)  # a rebuild writes one block per term
    index.close()


def test_appended_postings_equal_a_rebuild_past_the_tail_limit(tmp_path: Path) -> None:
    grown = SearchIndex(tmp_path / "grown.sqlite")
    names = [f"s{n:03d}" for n in range(TAIL_MAX // 2 + 40)]
    for sid in names:  # two postings per save: the tail folds into the main block
        _put(grown, sid, ["mango and more words", "mango " * 3])
    rebuilt = SearchIndex(tmp_path / "rebuilt.sqlite")
    with rebuilt.writing(bulk=True):
        rebuilt.clear()
        for sid in names:
            rebuilt.put_session(
                _session(sid, ["mango and more words", "mango " * 3]),
                f"sessions/{sid}.md",
                "0" * 40,
            )
    # same order, same tf and lengths (document ids differ between the two files)
    assert _places(grown, "mango") == _places(rebuilt, "mango")
    assert [r[1:3] for r in grown.postings("mango", 10_000)] == [
        r[1:3] for r in rebuilt.postings("mango", 10_000)
    ]
    assert len(_places(grown, "mango")) == 2 * len(names)
    main, tail = _blocks(grown, "mango")
    assert main > TAIL_MAX and tail <= TAIL_MAX and main + tail == 2 * len(names)
    assert _blocks(rebuilt, "mango") == (2 * len(names), 0)
    assert _places(grown, "mango", 7) == _places(rebuilt, "mango", 7)
    assert grown.df(["mango"]) == {"mango": 2 * len(names)}
    grown.close()
    rebuilt.close()


def test_deleting_a_document_removes_its_postings_from_main_and_tail(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path / "i.sqlite")
    _put(index, "a", ["papaya salad", "papaya juice"], bulk=True)  # main block
    _put(index, "b", ["papaya tree"])  # tail
    assert sorted(_places(index, "papaya")) == [("a", 0), ("a", 1), ("b", 0)]
    assert _blocks(index, "papaya") == (2, 1)
    _put(index, "a", ["papaya salad", "guava juice"])  # turn 1 changed: deleted, added
    assert sorted(_places(index, "papaya")) == [("a", 0), ("b", 0)]
    assert _blocks(index, "papaya") == (1, 1)
    assert _places(index, "guava") == [("a", 1)]
    with index.writing():
        index.remove_path("sessions/b.md")
    assert _places(index, "papaya") == [("a", 0)]
    assert _blocks(index, "papaya") == (1, 0)
    assert index.df(["papaya", "guava", "salad"]) == {"papaya": 1, "guava": 1, "salad": 1}
    index.close()


def test_document_ids_are_not_reused_so_a_reader_never_sees_a_stale_place(
    tmp_path: Path,
) -> None:
    writer = SearchIndex(tmp_path / "i.sqlite")
    reader = SearchIndex(tmp_path / "i.sqlite")
    _put(writer, "a", ["lime one", "lime two"])
    assert _places(reader, "lime") != []  # the reader caches the documents' places now
    _put(writer, "a", ["lime one"])  # the last document (highest id) is deleted
    _put(writer, "z", ["other", "more", "lime three"])  # new documents get new ids
    assert sorted(_places(reader, "lime")) == [("a", 0), ("z", 2)]
    with writer.writing(bulk=True):  # a rebuild starts ids again: readers reload
        writer.clear()
        writer.put_session(_session("q", ["lime again", "x"]), "sessions/q.md", "0" * 40)
    assert _places(reader, "lime") == [("q", 0)]
    writer.close()
    reader.close()
