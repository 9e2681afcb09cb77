"""The search index: derived, disposable state in SQLite under the git dir.

The Markdown files in git are the truth; this index only makes search fast. It holds one
document per interaction and per summary (text, analysed terms, session, speaker,
timestamp); who spoke each turn as a field of its own (a name finds that person's turns,
newest first: for queries that name someone and for the speaker filter); each session's
tags, project, participants, links (its metadata's and the ``[[id]]`` ones in its text)
and metadata; and an inverted index ``term id -> (document, tf)`` ordered by a
precomputed BM25 impact so that very common terms can be read partially, best documents
first (ids: :mod:`.vocab`; the packed blocks that hold it: :mod:`.postings`).

It records the commit it reflects; :mod:`gitmem.search.catchup` catches it up to HEAD. A
file that is missing, corrupted, of an older layout or written for another repository is
thrown away and rebuilt. The SQLite file itself (schema, connection, meta values, access
counts, which survive a rebuild) is :mod:`gitmem.search.indexfile`. :class:`SearchIndex`
holds four parts, each given the file: the :class:`~.indexfile.IndexFile` itself, the
:class:`~.vocab.Vocabulary`, the :class:`~.sessionrows.SessionTable` and the
:class:`~.postings.PostingTable`; it writes and reads the documents itself and calls the
parts for the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, partial
from pathlib import Path

from gitmem.errors import IndexCorrupted
from gitmem.models import Session
from gitmem.search.indexfile import (
    BULK_CACHE_KIB,
    CACHE_KIB,
    DOCS_SESSION_INDEX,
    IndexFile,
    discard,
)
from gitmem.search.postings import (
    IMPACT_B,
    IMPACT_K1,
    Posting,
    PostingTable,
    impact,
    posting_key,
)
from gitmem.search.sessionrows import SessionRow as SessionRow  # re-exported: rank.py
from gitmem.search.sessionrows import SessionTable
from gitmem.search.speakerrows import SpeakerTable
from gitmem.search.vocab import Vocabulary, pack_terms, unpack_terms
from gitmem.text import terms, wiki_links
from gitmem.text.events import EVENT_SPAN_DAYS, event_spans

# new postings by term id (keys: see postings.py)
NewPostings = defaultdict[int, "array[int]"]


def _new_postings() -> NewPostings:
    return defaultdict(partial(array, "Q"))


@dataclass
class _Bulk:
    """What a rebuild holds back: each term's postings, written as one block at the end
    (8 bytes a posting in memory: ~21 MB for 100,000 interactions)."""

    postings: NewPostings = field(default_factory=_new_postings)
    speakers: list[str] = field(default_factory=list)
    next_doc: int = 0  # the next document id (0: not known yet)
    counts: tuple[int, int] | None = None  # (documents, total length), written at a flush
    fresh: bool = False  # the tables were cleared in this transaction: nothing to replace
    written: bool = False  # blocks were written in this transaction: merge into them


KIND_INTERACTION = 0
KIND_SUMMARY = 1


@dataclass(frozen=True)
class Doc:
    """What a document is: an interaction or a session summary, at a position in its session."""

    kind: int  # KIND_INTERACTION or KIND_SUMMARY
    iid: str | None  # the interaction id (None for a summary)
    pos: int
    speaker: str
    ts: float
    text: str


@dataclass(frozen=True)
class DocInput(Doc):
    """One searchable unit handed to the index, with the text its terms are cut from and,
    for a turn, the time it was said in its own zone (relative dates such as "yesterday"
    in the text are seen from it; derived from text and timestamp, so the hash leaves it
    out). A session's first turn also carries the session's title (metadata ``title``, e.g.
    a ChatGPT conversation's), so a search for the title finds where the session starts."""

    body: str
    anchor: datetime | None = None
    title: str = ""

    @property
    def hash(self) -> int:
        data = f"{self.kind}|{self.iid}|{self.speaker}|{self.ts}|{self.text}"
        if self.title:  # a changed title indexes the turn again
            data += f"|{self.title}"
        digest = hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        return int.from_bytes(digest, "little", signed=True)  # a SQLite integer


@dataclass(frozen=True)
class DocRow(Doc):
    """One indexed document as the ranker sees it: where it is stored and its terms."""

    id: int
    skey: int
    packed: bytes = field(repr=False)  # its term ids (see vocab.py)
    dl: int
    vocab: Vocabulary = field(repr=False, compare=False)
    event_data: bytes | None = field(default=None, repr=False)  # see pack_events

    @cached_property
    def events(self) -> tuple[tuple[float, float], ...]:
        """The time spans the document talks about ("yesterday", "on 7 May"), as epoch
        seconds [start, end); most documents have none."""
        return unpack_events(self.event_data)

    @cached_property
    def terms(self) -> str:
        """The analysed terms, space-separated (decoded on first use: most rows never are)."""
        return self.vocab.term_text(self.packed)


def _stamp(value: datetime) -> float:
    return value.timestamp()


def pack_events(events: Sequence[tuple[float, float]]) -> bytes | None:
    """Event spans as a BLOB of doubles (None when there are none: most documents)."""
    return array("d", [t for span in events for t in span]).tobytes() if events else None


def unpack_events(data: bytes | None) -> tuple[tuple[float, float], ...]:
    if not data:
        return ()
    values = array("d")
    values.frombytes(data)
    return tuple(zip(values[::2], values[1::2], strict=True))


def session_documents(session: Session) -> list[DocInput]:
    """The documents of a session: its interactions in order, then its summary if any."""
    docs: list[DocInput] = []
    title = session.extra.get("title", "").strip()
    for pos, item in enumerate(session.interactions):
        speakers = list(dict.fromkeys(m.speaker for m in item.messages))
        body = "\n".join(m.content for m in item.messages)
        shown = title if pos == 0 else ""
        docs.append(
            DocInput(
                KIND_INTERACTION,
                item.id,
                pos,
                ", ".join(speakers),
                _stamp(item.timestamp),
                item.text,
                f"{shown}\n{body}" if shown else body,
                item.timestamp,
                shown,
            )
        )
    if session.summary is not None and session.summary.text.strip():
        docs.append(
            DocInput(
                KIND_SUMMARY,
                None,
                len(session.interactions),
                "",
                _stamp(session.summary.generated),
                session.summary.text,
                session.summary.text,
            )
        )
    return docs


class SearchIndex:
    """A SQLite search index (a file, or ``":memory:"`` for throw-away corpora).

    Thread-safe: one connection guarded by a lock, both held by :attr:`file` and shared
    with the other parts. Write methods must run inside :meth:`writing`, which makes them
    one SQLite transaction.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.file = IndexFile(path)
        self.vocab = Vocabulary(self.file)
        self.session_table = SessionTable(self.file)
        self.posting_table = PostingTable(self.file)
        self.speaker_table = SpeakerTable(self.file)
        self.path = self.file.path
        # the file's connection and lock, for the modules that run their own statements
        # on it (vectors.py) and for this class's
        self._db, self._lock = self.file.db, self.file.lock
        self._stats: tuple[int, float] | None = None
        self._span: tuple[float, float] | None = None
        self._bulk: _Bulk | None = None

    @property
    def generation(self) -> int:
        """Bumped by every committed write (caches compare it)."""
        return self.file.generation

    @contextlib.contextmanager
    def writing(self, *, bulk: bool = False) -> Iterator[None]:
        """Group writes into one transaction (rolled back if the block raises).

        ``bulk`` (a rebuild) collects postings and sorts them before writing, which is much
        faster than inserting each document's postings as they come, and builds the
        documents' session index once at the end. The whole rebuild is one transaction:
        a crash or error half-way leaves the index as it was before.
        """
        with self._lock:
            if bulk:
                self._db.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
            self._db.execute("BEGIN IMMEDIATE")
            self._bulk = _Bulk() if bulk else None
            try:
                self.vocab.load()  # with the write lock held: no one else adds terms now
                yield
                self._flush()
                self.file.count_write()
                if bulk:
                    self._db.execute(DOCS_SESSION_INDEX)
            except BaseException:
                self._bulk = None
                self._db.execute("ROLLBACK")
                self._stats = self._span = None
                self.vocab.forget()  # it may hold ids handed out in this transaction
                self.posting_table.forget_places()  # and documents never committed
                raise
            finally:
                if bulk:
                    self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            self._bulk = None
            self._db.execute("COMMIT")
            if bulk and self.path != ":memory:":
                # a rebuild leaves a WAL as large as the index: fold it back in now
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.file.generation += 1
            self._stats = self._span = None

    # --- the file ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the database connection."""
        self.file.close()

    def get_meta(self, key: str) -> str | None:
        """A value from the meta table (None when unset)."""
        return self.file.get_meta(key)

    def set_meta(self, key: str, value: str | None) -> None:
        """Set or (with None) remove a meta value."""
        self.file.set_meta(key, value)

    def touch(self, refs: Iterable[tuple[str, str]], when: float) -> None:
        """Count one access of each (session id, interaction id or "" for a summary)."""
        self.file.touch(refs, when)

    def access_counts(self, session_ids: Iterable[str]) -> dict[tuple[str, str], int]:
        """Access counts of the memories of these sessions (see IndexFile.access_counts)."""
        return self.file.access_counts(session_ids)

    def broken(self) -> dict[str, str]:
        """path -> blob id of committed session files that could not be read."""
        return self.file.broken()

    def mark_broken(self, path: str, blob: str | None, problem: str = "") -> None:
        """Remember (or with blob None, forget) a session file that could not be read."""
        self.file.mark_broken(path, blob, problem)

    # --- writing documents -----------------------------------------------------------

    def clear(self) -> None:
        """Drop every document and session (access counts and term ids are kept)."""
        self.file.clear()
        # document ids start again: places cached by any process are void
        epoch = int(self.get_meta("doc_epoch") or 0) + 1
        self.set_meta("doc_epoch", str(epoch))
        self.set_meta("next_doc", None)
        if self._bulk is not None:
            # nothing to find or replace until the end: the session index is built then
            self._db.execute("DROP INDEX IF EXISTS docs_session")
            self._bulk.fresh = True
            self._bulk.counts = (0, 0)
            self._bulk.next_doc = 1

    def put_session(
        self, session: Session, path: str, blob: str, commit: str | None = None
    ) -> None:
        """Index (or re-index) the session file at ``path`` (a session's main file or its
        archive part: both are rows of the same session id); unchanged interactions stay."""
        fresh = self._bulk is not None and self._bulk.fresh
        docs = session_documents(session)
        # the [[id]] links in this file's turns and summary, kept with its row so that the
        # link graph and link following never read the texts again
        written = dict.fromkeys(link for doc in docs for link in wiki_links(doc.text))
        skey = self.session_table.put(session, path, blob, commit, written, replace=not fresh)
        self._put_docs(skey, docs)

    def _put_docs(self, skey: int, docs: Sequence[DocInput]) -> None:
        # a document whose content and position are unchanged stays; anything else is
        # deleted and inserted again (positions live in the postings too)
        if self._bulk is not None and self._bulk.fresh:
            self._insert_docs(skey, docs)
            return
        old = {
            (int(h), int(pos)): int(doc_id)
            for doc_id, h, pos in self._db.execute(
                "SELECT id, hash, pos FROM docs WHERE skey=?", (skey,)
            )
        }
        fresh = [doc for doc in docs if old.pop((doc.hash, doc.pos), None) is None]
        # a document that only moved keeps its vector (they are stored by content)
        self._delete_docs(list(old.values()), keep={doc.hash for doc in fresh})
        self._insert_docs(skey, fresh)

    _impact = staticmethod(impact)

    def _write_postings(
        self, postings: NewPostings, speakers: list[str], *, fresh: bool = False
    ) -> None:
        bulk = self._bulk
        if bulk is not None:
            bulk.speakers.extend(speakers)  # the postings went straight into bulk.postings
            return
        self.posting_table.add(postings, fresh=fresh)
        self.speaker_table.count(speakers, 1)
        # a term's new postings are its new documents: one each
        self.vocab.change_df([(len(keys), tid) for tid, keys in postings.items()])

    def _flush(self) -> None:
        """Write what bulk mode holds back (its cached counts stay valid)."""
        bulk, self._bulk = self._bulk, None
        if bulk is None:
            return
        try:
            if bulk.postings:
                self._write_postings(
                    bulk.postings, bulk.speakers, fresh=bulk.fresh and not bulk.written
                )
                bulk.written = True
            if bulk.counts is not None:
                self.file.set_counts(*bulk.counts)
            if bulk.next_doc:
                self.set_meta("next_doc", str(bulk.next_doc))
        finally:
            bulk.postings, bulk.speakers = _new_postings(), []
            self._bulk = bulk

    def _doc_counts(self) -> tuple[int, int]:
        # (documents, total length): kept in memory during a rebuild, written at a flush
        if self._bulk is not None and self._bulk.counts is None:
            self._bulk.counts = self.file.counts()
        return self.file.counts() if self._bulk is None else self._bulk.counts or (0, 0)

    def _set_doc_counts(self, n_docs: int, total: int) -> None:
        if self._bulk is None:
            self.file.set_counts(n_docs, total)
        else:
            self._bulk.counts = (n_docs, total)

    def _next_doc_id(self, count: int) -> int:
        # ids are never reused within an epoch (see postings.py): a counter, not MAX(id)
        bulk = self._bulk
        if bulk is not None and bulk.next_doc:
            first = bulk.next_doc
        else:
            kept = self.get_meta("next_doc")
            first = (
                int(kept)
                if kept
                else int(
                    self._db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM docs").fetchone()[0]
                )
            )
        if bulk is not None:
            bulk.next_doc = first + count
        else:
            self.set_meta("next_doc", str(first + count))
        return first

    def _insert_docs(self, skey: int, docs: Sequence[DocInput]) -> None:
        if not docs:
            return
        n_docs, total = self._doc_counts()
        analysed = [terms(doc.body) for doc in docs]
        n_docs += len(docs)
        total += sum(len(t) for t in analysed)
        avgdl = (total / n_docs if n_docs else 0.0) or 1.0  # every doc may be stopwords only
        postings = self._bulk.postings if self._bulk is not None else _new_postings()
        rows = []
        events: list[tuple[int, float, float]] = []
        turns: list[tuple[int, str, float, int, int]] = []
        first = self._next_doc_id(len(docs))
        impact = self._impact
        for doc_id, doc, tids, words in zip(
            range(first, first + len(docs)),
            docs,
            self.vocab.ids(analysed),
            analysed,
            strict=True,
        ):
            dl = len(tids)
            # what a turn talks about: its dates, relative ones seen from when it was said
            spans = (
                ()
                if doc.anchor is None
                else tuple(
                    (a.timestamp(), b.timestamp())
                    for a, b in event_spans(doc.body, doc.anchor, words)
                )
            )
            norm = IMPACT_K1 * (1 - IMPACT_B + IMPACT_B * dl / avgdl)
            rows.append(
                (
                    doc_id,
                    skey,
                    doc.kind,
                    doc.iid,
                    doc.pos,
                    doc.speaker,
                    doc.ts,
                    doc.text,
                    pack_terms(tids),
                    dl,
                    norm,
                    doc.hash,
                    pack_events(spans),
                )
            )
            events.extend((doc_id, lo, hi) for lo, hi in spans)
            if doc.speaker:
                turns.append((doc_id, doc.speaker, doc.ts, skey, doc.pos))
            counts = Counter(tids)
            # most terms occur once in a turn: that key is computed once per document
            once = posting_key(impact(1, norm), doc_id, 1)
            if len(counts) == dl:  # every term once
                for tid in counts:
                    postings[tid].append(once)
                continue
            for tid, tf in counts.items():
                postings[tid].append(once if tf == 1 else posting_key(impact(tf, norm), doc_id, tf))
        self._db.executemany("INSERT INTO docs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        if events:
            self._db.executemany("INSERT OR IGNORE INTO events VALUES(?,?,?)", events)
        self.speaker_table.add_turns(turns)
        self._write_postings(postings, [d.speaker for d in docs])
        self._set_doc_counts(n_docs, total)

    def _delete_docs(self, doc_ids: Sequence[int], keep: set[int] | None = None) -> None:
        if not doc_ids:
            return
        if self._bulk is not None:
            self._flush()
        n_docs, total = self._doc_counts()
        gone: defaultdict[int, set[int]] = defaultdict(set)
        df: Counter[int] = Counter()
        speakers: list[str] = []
        turns: list[tuple[int, str, float]] = []
        hashes: set[int] = set()
        for at in range(0, len(doc_ids), 500):
            chunk = doc_ids[at : at + 500]
            marks = ",".join("?" * len(chunk))
            for doc_id, doc_terms, dl, speaker, ts, content in self._db.execute(
                f"SELECT id, terms, dl, speaker, ts, hash FROM docs WHERE id IN ({marks})", chunk
            ):
                speakers.append(speaker)
                turns.append((doc_id, speaker, ts))
                hashes.add(int(content))
                n_docs -= 1
                total -= dl
                for tid in set(unpack_terms(doc_terms)):
                    gone[tid].add(doc_id)
                    df[tid] += 1
            self._db.execute(f"DELETE FROM docs WHERE id IN ({marks})", chunk)
            self._db.execute(f"DELETE FROM events WHERE id IN ({marks})", chunk)
        self.speaker_table.drop_turns(turns)
        self.posting_table.drop(gone)
        self.vocab.change_df([(-count, tid) for tid, count in df.items()])
        self.speaker_table.count(speakers, -1)
        self._set_doc_counts(max(n_docs, 0), max(total, 0))
        self.file.drop_vectors(hashes - (keep or set()))

    def remove_path(self, path: str) -> None:
        """Remove the session file at ``path`` and its documents."""
        skey = self.session_table.key_of(path)
        if skey is None:
            return
        ids = [r[0] for r in self._db.execute("SELECT id FROM docs WHERE skey=?", (skey,))]
        self._delete_docs(ids)
        self.session_table.remove(skey)

    # --- reading: terms, postings, session rows (the parts answer) ----------------------

    def df(self, words: Iterable[str]) -> dict[str, int]:
        """Document frequency of each term (absent terms are left out)."""
        return self.vocab.df(words)

    def vocabulary(self) -> list[str]:
        """Every indexed term (cached until the next write)."""
        return self.vocab.words()

    def postings(self, term: str, limit: int) -> list[Posting]:
        """Up to ``limit`` (doc id, tf, doc length, session key, position, kind) for
        ``term``, highest impact first."""
        return self.posting_table.read(term, limit)

    def sessions(self, skeys: Iterable[int]) -> dict[int, SessionRow]:
        """Session rows by session key (cached until the next write)."""
        return self.session_table.sessions(skeys)

    def sessions_by_id(self, session_id: str) -> list[SessionRow]:
        """The rows of one session (its file, and its archive part if it has one)."""
        return self.session_table.sessions_by_id(session_id)

    def session_keys(
        self,
        *,
        session_ids: Sequence[str] = (),
        tags: Sequence[str] = (),
        project: str | None = None,
        participants: Sequence[str] = (),
        active_since: float | None = None,
        created_until: float | None = None,
    ) -> set[int]:
        """Keys of sessions matching every given condition (tags and participants: all)."""
        return self.session_table.session_keys(
            session_ids=session_ids,
            tags=tags,
            project=project,
            participants=participants,
            active_since=active_since,
            created_until=created_until,
        )

    def indexed_blobs(self) -> dict[str, tuple[str, str]]:
        """path -> (session id, blob id) of every indexed session."""
        return self.session_table.indexed_blobs()

    def turn_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """How many interactions each of these sessions holds."""
        return self.session_table.turn_counts(session_ids)

    def rows_in(self, folder: str, session_ids: Sequence[str]) -> dict[str, SessionRow]:
        """The rows of these sessions' main files under ``folder``."""
        return self.session_table.rows_in(folder, session_ids)

    def summary_texts(self, skeys: Sequence[int], chars: int) -> dict[int, str]:
        """The first ``chars`` characters of the summaries of these session rows."""
        return self.session_table.summary_texts(skeys, chars)

    def session_links(self, folder: str) -> list[tuple[str, tuple[str, ...]]]:
        """(session id, links) of every session file under ``folder`` that links out."""
        return self.session_table.session_links(folder)

    def present(self, session_ids: Sequence[str]) -> set[str]:
        """Which of these session ids the index holds."""
        return self.session_table.present(session_ids)

    def links_from(self, session_ids: Sequence[str]) -> dict[str, list[str]]:
        """The sessions each of these sessions links to."""
        return self.session_table.links_from(session_ids)

    def links_to(self, session_ids: Sequence[str]) -> dict[str, list[str]]:
        """The sessions that link to each of these sessions."""
        return self.session_table.links_to(session_ids)

    # --- reading documents -------------------------------------------------------------

    def stats(self) -> tuple[int, float]:
        """(number of documents, average document length in terms)."""
        with self._lock:
            if self._stats is None:
                n_docs, total = self.file.counts()
                self._stats = (n_docs, total / n_docs if n_docs else 0.0)
            return self._stats

    def time_span(self) -> tuple[float, float]:
        """The times of the first and the last interaction (cached until the next write;
        (inf, -inf) when there is none)."""
        with self._lock:
            if self._span is None:
                lo, hi = self._db.execute(
                    "SELECT MIN(ts), MAX(ts) FROM docs WHERE kind=0"
                ).fetchone()
                self._span = (math.inf, -math.inf) if lo is None else (float(lo), float(hi))
            return self._span

    def speakers(self) -> dict[str, int]:
        """Speaker name -> how many documents they speak in (cached until the next write)."""
        return self.speaker_table.counts()

    def spoken_turns(
        self,
        names: Sequence[str],
        limit: int,
        *,
        allowed: set[int] | None = None,
        lo: float = -math.inf,
        hi: float = math.inf,
    ) -> dict[int, tuple[int, int, int]]:
        """The newest turns (at most ``limit``) that one of these people (any case) spoke
        in, of the ``allowed`` sessions, said from ``lo`` to ``hi``: doc id -> (session
        key, position, kind), newest first."""
        found = self.speaker_table.turns(names, limit, allowed=allowed, lo=lo, hi=hi)
        return {doc_id: (skey, pos, KIND_INTERACTION) for doc_id, (skey, pos) in found.items()}

    def speaker_sessions(self, name: str) -> set[int]:
        """Keys of the sessions in which this person (any case) spoke a turn."""
        return self.speaker_table.sessions_of(name)

    def doc_speakers(self, doc_ids: Iterable[int]) -> dict[int, str]:
        """The speaker column (names joined by ", ") of each of these documents."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[int, str] = {}
        with self._lock:
            for at in range(0, len(ids), 500):
                chunk = ids[at : at + 500]
                marks = ",".join("?" * len(chunk))
                for doc_id, speaker in self._db.execute(
                    f"SELECT id, speaker FROM docs WHERE id IN ({marks})", chunk
                ):
                    out[int(doc_id)] = str(speaker)
        return out

    def neighbours(self, places: Iterable[tuple[int, int]]) -> dict[int, tuple[int, int, int]]:
        """Interaction documents at these (session key, position) places:
        doc id -> (session key, position, kind)."""
        wanted = set(places)
        skeys = list({skey for skey, _pos in wanted})
        positions = list({pos for _skey, pos in wanted})
        out: dict[int, tuple[int, int, int]] = {}
        if not wanted:
            return out
        with self._lock:
            for at in range(0, len(skeys), 400):
                chunk = skeys[at : at + 400]
                sql = (
                    f"SELECT id, skey, pos FROM docs WHERE skey IN ({','.join('?' * len(chunk))})"
                    f" AND pos IN ({','.join('?' * len(positions))}) AND kind=0"
                )
                for doc_id, skey, pos in self._db.execute(sql, [*chunk, *positions]):
                    if (skey, pos) in wanted:
                        out[int(doc_id)] = (int(skey), int(pos), KIND_INTERACTION)
        return out

    def _doc_rows(self, sql: str, args: Sequence[object]) -> list[DocRow]:
        return [
            DocRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], self.vocab, r[10])
            for r in self._db.execute(sql, args)
        ]

    # DocRow's order
    _DOC_COLUMNS = "kind, iid, pos, speaker, ts, text, id, skey, terms, dl, events"

    def event_docs(self, lo: float, hi: float, limit: int) -> dict[int, tuple[int, int, int]]:
        """Interactions one of whose event spans overlaps [lo, hi), narrowest spans first
        (at most ``limit``): doc id -> (session key, position, kind)."""
        # spans are at most EVENT_SPAN_DAYS long: the start bounds the index range read
        since = lo - EVENT_SPAN_DAYS * 86400.0
        out: dict[int, tuple[int, int, int]] = {}
        with self._lock:
            for doc_id, skey, pos, kind in self._db.execute(
                "SELECT d.id, d.skey, d.pos, d.kind FROM events e JOIN docs d ON d.id = e.id"
                " WHERE e.lo >= ? AND e.lo < ? AND e.hi > ? ORDER BY e.hi - e.lo, d.id LIMIT ?",
                (since, hi, lo, limit),
            ):
                out[int(doc_id)] = (int(skey), int(pos), int(kind))
        return out

    def docs(self, doc_ids: Iterable[int], *, text: bool = True) -> dict[int, DocRow]:
        """The documents with these ids (``text=False`` leaves their text empty)."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[int, DocRow] = {}
        columns = self._DOC_COLUMNS if text else self._DOC_COLUMNS.replace("text", "''")
        with self._lock:
            for at in range(0, len(ids), 500):
                chunk = ids[at : at + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._doc_rows(
                    f"SELECT {columns} FROM docs WHERE id IN ({marks})", chunk
                ):
                    out[row.id] = row
        return out

    def texts(self, doc_ids: Iterable[int]) -> dict[int, str]:
        """The text of each of these documents."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[int, str] = {}
        with self._lock:
            for at in range(0, len(ids), 500):
                chunk = ids[at : at + 500]
                marks = ",".join("?" * len(chunk))
                for doc_id, value in self._db.execute(
                    f"SELECT id, text FROM docs WHERE id IN ({marks})", chunk
                ):
                    out[int(doc_id)] = str(value)
        return out

    def session_docs(
        self, skeys: Iterable[int], *, kind: int | None = None, text: bool = True
    ) -> list[DocRow]:
        """Every document of these sessions, in session and position order
        (``text=False`` leaves their text empty)."""
        keys = list(dict.fromkeys(skeys))
        out: list[DocRow] = []
        columns = self._DOC_COLUMNS if text else self._DOC_COLUMNS.replace("text", "''")
        with self._lock:
            for at in range(0, len(keys), 500):
                chunk = keys[at : at + 500]
                marks = ",".join("?" * len(chunk))
                extra = "" if kind is None else f" AND kind={int(kind)}"
                out.extend(
                    self._doc_rows(
                        f"SELECT {columns} FROM docs WHERE skey IN ({marks}){extra}"
                        " ORDER BY skey, pos",
                        chunk,
                    )
                )
        return out

    def count_session_docs(self, skeys: Iterable[int]) -> int:
        """How many documents these sessions hold."""
        keys = list(dict.fromkeys(skeys))
        total = 0
        with self._lock:
            for at in range(0, len(keys), 500):
                chunk = keys[at : at + 500]
                marks = ",".join("?" * len(chunk))
                row = self._db.execute(
                    f"SELECT COUNT(*) FROM docs WHERE skey IN ({marks})", chunk
                ).fetchone()
                total += int(row[0])
        return total


def open_file(path: Path, owner: str) -> SearchIndex:
    """Open an index file made for ``owner`` (the git dir); a file that is unusable or was
    made for another repository is replaced by an empty one."""
    try:
        index = SearchIndex(path)  # reads the schema: a file that is not SQLite fails here
    except IndexCorrupted:
        discard(path)
        index = SearchIndex(path)
    recorded = index.get_meta("git_dir")
    if recorded is not None and recorded != owner:
        # copied from another store: its documents and access counts mean nothing here
        index.close()
        discard(path)
        index = SearchIndex(path)
    if recorded != owner:
        index.set_meta("git_dir", owner)
    return index
