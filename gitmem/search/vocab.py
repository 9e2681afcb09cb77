"""The search index's vocabulary: term ids, and documents' terms packed as ids.

Each analysed term gets an integer id the first time it is indexed. Postings are keyed by
it and documents keep their terms as a packed array of ids (two bytes each while the
vocabulary is under 65,536 terms), which makes the index less than half the size it was
with the term text repeated in every posting and document. An id names the same term for
the whole life of a file (a rebuild keeps the ids; a term in no document stays with
``df`` 0), so every process keeps the id -> term map in memory and only ever reads the
terms added since it last looked. :class:`gitmem.search.index.SearchIndex` holds one.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence

from gitmem.errors import IndexCorrupted
from gitmem.search.indexfile import IndexFile


def pack_terms(tids: Sequence[int]) -> bytes:
    """A document's term ids, little-endian, 2 bytes each while the vocabulary is small."""
    code = "H" if not tids or max(tids) < 65536 else "I"
    packed = array(code, tids)
    if sys.byteorder == "big":
        packed.byteswap()
    return code.encode() + packed.tobytes()


def unpack_terms(data: bytes) -> array[int]:
    """The term ids :func:`pack_terms` packed."""
    if not data:
        return array("I")
    packed = array(chr(data[0]))
    packed.frombytes(data[1:])
    if sys.byteorder == "big":
        packed.byteswap()
    return packed


class Vocabulary:
    """An index file's terms: ids, document frequencies, and the in-memory id map."""

    def __init__(self, file: IndexFile) -> None:
        self._file = file
        self._db, self._lock = file.db, file.lock
        self._vocab: tuple[int, list[str]] | None = None
        # term id -> term (None: a gap) and back, of committed terms and of this
        # transaction's; ids are never reused within a file (see IndexFile.clear)
        self._names: list[str | None] = [None]
        self._tids: dict[str, int] = {}

    def forget(self) -> None:
        """Drop the id map (a rolled-back transaction may have added ids to it)."""
        self._names, self._tids = [None], {}

    def load(self) -> None:
        """Read the terms added since this object last looked (by any process)."""
        for tid, term in self._db.execute(
            "SELECT tid, term FROM terms WHERE tid >= ? ORDER BY tid", (len(self._names),)
        ):
            self._names.extend([None] * (tid - len(self._names)))
            self._names.append(term)
            self._tids[term] = tid

    def ids(self, analysed: Sequence[list[str]]) -> list[list[int]]:
        """The ids of these documents' terms, adding the new terms (write transaction)."""
        tids = self._tids
        try:
            return [[tids[t] for t in ts] for ts in analysed]
        except KeyError:  # new terms (rare once a store has some history): add them
            new = [t for ts in analysed for t in ts if t not in tids]
        if new:
            new = list(dict.fromkeys(new))
            first = len(self._names)
            self._db.executemany(
                "INSERT INTO terms VALUES(?, ?, 0)",
                [(first + at, term) for at, term in enumerate(new)],
            )
            self._names.extend(new)
            self._tids.update((term, first + at) for at, term in enumerate(new))
        return [[tids[t] for t in ts] for ts in analysed]

    def change_df(self, changes: Iterable[tuple[int, int]]) -> None:
        """Add (change, term id) to the terms' document frequencies (write transaction); a
        term left in no document keeps its row (and id) with df 0."""
        self._db.executemany("UPDATE terms SET df = df + ? WHERE tid=?", changes)

    def term_text(self, data: bytes) -> str:
        """A document's packed term ids as space-separated terms."""
        tids = unpack_terms(data)
        with self._lock:
            for attempt in (1, 2):
                try:
                    return " ".join([self._names[t] for t in tids])  # type: ignore[misc]
                except (IndexError, TypeError):
                    if attempt == 2:
                        break
                self.load()  # terms another process added since we last looked
        raise IndexCorrupted("a document names a term id the index does not have")

    def df(self, words: Iterable[str]) -> dict[str, int]:
        """Document frequency of each term (absent terms are left out)."""
        wanted = list(dict.fromkeys(words))
        if not wanted:
            return {}
        with self._lock:
            marks = ",".join("?" * len(wanted))
            return {
                term: int(count)
                for term, count in self._db.execute(
                    f"SELECT term, df FROM terms WHERE term IN ({marks}) AND df > 0", wanted
                )
            }

    def words(self) -> list[str]:
        """Every indexed term (cached until the next write)."""
        with self._lock:
            generation = self._file.generation
            if self._vocab is None or self._vocab[0] != generation:
                words = [r[0] for r in self._db.execute("SELECT term FROM terms WHERE df > 0")]
                self._vocab = (generation, words)
            return self._vocab[1]
