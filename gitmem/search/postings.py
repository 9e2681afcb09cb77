"""The inverted index as packed blocks: each term's postings in BLOBs, best first.

A posting (a document holding a term) sorts by its *key*, ``impact << 48 | doc << 16 | tf``:
in descending order the highest precomputed BM25 impact comes first (ties: the higher
document id), so a query reads only the head of a common term's list. A term's postings are
two rows of the ``postings`` table (row id ``tid * 2 + part``):

- the main block (:class:`PostingBlock`), written whole by a rebuild: the document ids (4 bytes
  each) then the tfs (1 byte each, 2 if one does not fit), 5 bytes a posting; the impact is
  left out because it follows from the tf and the document's ``norm`` (stored with the
  document), and is recomputed only where a merge needs it;
- the tail: at most :data:`TAIL_MAX` full 8-byte keys that incremental catch-ups append to,
  folded into the main block when it overflows (a save rewrites a few small tails, not every
  long list it touches). A reader places the tail's postings in the head by binary search.

What every posting of a document would repeat (its length, session, position and kind) is
looked up in :class:`DocPlaces`, an in-memory copy of those columns of the ``docs`` table.
It stays valid because a document id is never reused within a file's *epoch*: ids come
from a counter kept in the meta table, and only a rebuild (``clear``) starts a new epoch.
This replaced one SQLite row of ~25 bytes per posting, and a rebuild inserts one row per
term instead of one per posting.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence

from gitmem.errors import IndexCorrupted
from gitmem.search.indexfile import IndexFile

# a posting as the ranker reads it: (doc id, tf, doc length, session key, position, kind)
Posting = tuple[int, int, int, int, int, int]

MAIN, TAIL = 0, 1
# a tail longer than this is merged into the term's main block (a reader places each tail
# posting in the head by binary search: a short tail keeps that cheap)
TAIL_MAX = 64
_TF_MAX = 0xFFFF  # a tf that does not fit 16 bits is stored as this (no turn gets there)
_DOC_BITS = 0xFFFFFFFF

# Precomputed impacts use these BM25 constants; the ranker recomputes exact scores from tf
# and document length, so they only decide which postings of a common term are read first.
IMPACT_K1 = 1.2
IMPACT_B = 0.75


def impact(tf: int, norm: float) -> int:
    """A posting's precomputed impact (below 22,000: fits 16 bits); ``norm`` is the
    document's length normalisation when it was indexed (kept in ``docs.norm``)."""
    return round(10_000 * tf * (IMPACT_K1 + 1) / (tf + norm))


def posting_key(impact: int, doc: int, tf: int) -> int:
    """One posting as one integer; larger keys come first in a block."""
    return impact << 48 | doc << 16 | min(tf, _TF_MAX)


def split_key(key: int) -> tuple[int, int, int]:
    """(impact, doc, tf) of a posting key."""
    return key >> 48, (key >> 16) & _DOC_BITS, key & 0xFFFF


def _little(block: array[int]) -> array[int]:
    if sys.byteorder == "big":
        block.byteswap()
    return block


def pack(keys: Iterable[int]) -> bytes:
    """Tail postings (keys, already in block order) as a BLOB: 8 bytes each."""
    return _little(array("Q", keys)).tobytes()


def unpack(data: bytes | None) -> array[int]:
    """The keys of a BLOB :func:`pack` wrote."""
    block = array("Q")
    if data:
        block.frombytes(data[: len(data) - len(data) % 8])
    return _little(block)


class PostingBlock:
    """A main block: document ids and term frequencies, best first (the impacts are left
    out, 5 bytes a posting: they follow from tf and the document's ``norm``)."""

    __slots__ = ("docs", "tfs")

    def __init__(self, docs: array[int], tfs: array[int]) -> None:
        self.docs, self.tfs = docs, tfs

    @classmethod
    def of_keys(cls, keys: Sequence[int]) -> PostingBlock:
        """A block of posting keys sorted best first."""
        return cls(
            array("I", [(k >> 16) & _DOC_BITS for k in keys]),
            array("H", [k & 0xFFFF for k in keys]),
        )

    def encode(self) -> tuple[int, bytes]:
        """(count, BLOB): the ids as 4 bytes each, then the tfs as 1 byte each (2 when one
        of them does not fit a byte)."""
        tfs = array("B" if not self.tfs or max(self.tfs) < 256 else "H", self.tfs)
        return len(self.docs), _little(array("I", self.docs)).tobytes() + _little(tfs).tobytes()

    @classmethod
    def decode(cls, n: int, size: int, docs: bytes, tfs: bytes) -> PostingBlock:
        """A block (or its head) of ``n`` postings in a BLOB of ``size`` bytes, from the
        start of its id part and of its tf part (either may be cut short)."""
        ids = array("I")
        ids.frombytes(docs[: len(docs) - len(docs) % 4])
        width = (size - 4 * n) // n if n else 1
        counts = array("B" if width == 1 else "H")
        counts.frombytes(tfs[: min(len(ids), len(tfs) // width) * width])
        del ids[len(counts) :]
        # blocks hold tfs as "H" in memory (merges mix the two widths)
        return cls(_little(ids), array("H", counts) if width == 1 else _little(counts))

    def __len__(self) -> int:
        return len(self.docs)

    def key(self, at: int, norms: Sequence[float]) -> int:
        """The posting key at a place (its impact recomputed from the document's norm)."""
        doc, tf = self.docs[at], self.tfs[at]
        return posting_key(impact(tf, norms[doc]), doc, tf)

    def merged(self, tail: Sequence[int], norms: Sequence[float], limit: int) -> PostingBlock:
        """This block with tail postings (keys, best first) put in their places, cut to
        ``limit``; only O(len(tail) * log(len(self))) impacts are recomputed."""
        docs, tfs = array("I"), array("H")
        done = 0
        for key in tail:
            lo, hi = done, len(self.docs)
            while lo < hi:  # the first place whose key is smaller than this one
                mid = (lo + hi) // 2
                if self.key(mid, norms) > key:
                    lo = mid + 1
                else:
                    hi = mid
            docs.extend(self.docs[done:lo])
            tfs.extend(self.tfs[done:lo])
            done = lo
            docs.append((key >> 16) & _DOC_BITS)
            tfs.append(key & 0xFFFF)
            if len(docs) >= limit:
                break
        docs.extend(self.docs[done : done + max(limit - len(docs), 0)])
        tfs.extend(self.tfs[done : done + max(limit - len(tfs), 0)])
        return PostingBlock(docs[:limit], tfs[:limit])

    def without(self, gone: set[int]) -> PostingBlock:
        """This block without the postings of these documents."""
        keep = [at for at, doc in enumerate(self.docs) if doc not in gone]
        return PostingBlock(
            array("I", [self.docs[at] for at in keep]), array("H", [self.tfs[at] for at in keep])
        )


class DocPlaces:
    """Each document's length, session key, position and kind, by document id, in memory
    (documents never change: an edited one is deleted and added under a new id)."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.dl = array("i")
        self.skey = array("i")
        self.pos = array("i")
        self.kind = array("b")
        self.norm = array("d")

    def add(self, rows: Iterable[Sequence[int]]) -> None:
        """Append rows (id, dl, skey, pos, kind, norm) with ids at or above :meth:`size`."""
        dl, skey, pos, kind, norm = self.dl, self.skey, self.pos, self.kind, self.norm
        for doc, length, session, place, what, scale in rows:
            gap = doc - len(dl)
            if gap > 0:  # ids of deleted documents: never looked up
                for column in (dl, skey, pos, kind, norm):
                    column.extend([0] * gap)
            dl.append(length)
            skey.append(session)
            pos.append(place)
            kind.append(what)
            norm.append(scale)

    @property
    def size(self) -> int:
        return len(self.dl)


class PostingTable:
    """Reading and writing the packed postings of an index file (see the module docstring)."""

    def __init__(self, file: IndexFile) -> None:
        self._file = file
        self._db, self._lock = file.db, file.lock
        self._places = DocPlaces()

    # --- blocks -----------------------------------------------------------------------

    def _main(self, tid: int) -> PostingBlock:
        found = self._db.execute("SELECT n, data FROM postings WHERE id=?", (tid * 2,)).fetchone()
        if found is None:
            return PostingBlock(array("I"), array("H"))
        n, data = int(found[0]), bytes(found[1])
        return PostingBlock.decode(n, len(data), data[: 4 * n], data[4 * n :])

    def _tail(self, tid: int) -> array[int]:
        found = self._db.execute("SELECT data FROM postings WHERE id=?", (tid * 2 + 1,))
        row = found.fetchone()
        return unpack(None if row is None else row[0])

    def _store_main(self, tid: int, block: PostingBlock) -> None:
        if block:
            self._db.execute(
                "INSERT OR REPLACE INTO postings VALUES(?, ?, ?)", (tid * 2, *block.encode())
            )
        else:
            self._db.execute("DELETE FROM postings WHERE id=?", (tid * 2,))

    def _store_tail(self, tid: int, tail: Sequence[int]) -> None:
        if tail:
            self._db.execute(
                "INSERT OR REPLACE INTO postings VALUES(?, ?, ?)",
                (tid * 2 + 1, len(tail), pack(tail)),
            )
        else:
            self._db.execute("DELETE FROM postings WHERE id=?", (tid * 2 + 1,))

    def add(self, new: Mapping[int, Iterable[int]], *, fresh: bool = False) -> None:
        """Add postings (keys) by term id: to the tails, or (``fresh``: a rebuild into
        empty tables) straight into new main blocks, one row per term."""
        if fresh:
            self._db.executemany(
                "INSERT INTO postings VALUES(?, ?, ?)",
                (
                    (tid * 2, *PostingBlock.of_keys(sorted(keys, reverse=True)).encode())
                    for tid, keys in new.items()
                ),
            )
            return
        for tid, keys in new.items():
            tail = sorted([*self._tail(tid), *keys], reverse=True)
            if len(tail) > TAIL_MAX:
                main = self._main(tid)
                norms = self._refresh_places().norm
                self._store_main(tid, main.merged(tail, norms, len(main) + len(tail)))
                tail = []
            self._store_tail(tid, tail)

    def drop(self, gone: Mapping[int, set[int]]) -> None:
        """Remove the postings of these documents (by term id) from the blocks."""
        for tid, docs in gone.items():
            tail = self._tail(tid)
            kept = [key for key in tail if (key >> 16) & _DOC_BITS not in docs]
            if len(kept) != len(tail):
                self._store_tail(tid, kept)
            if len(tail) - len(kept) < len(docs):  # not all of them were in the tail
                main = self._main(tid)
                rest = main.without(docs)
                if len(rest) != len(main):
                    self._store_main(tid, rest)

    # --- reading ----------------------------------------------------------------------

    def _refresh_places(self) -> DocPlaces:
        """The document places, read again when a rebuild started a new epoch, and
        extended by the documents added since they were last read."""
        epoch = self._file.get_meta("doc_epoch")
        places = self._places
        if epoch != places.epoch:
            places = self._places = DocPlaces()
            places.epoch = epoch
        places.add(
            self._db.execute(
                "SELECT id, dl, skey, pos, kind, norm FROM docs WHERE id >= ? ORDER BY id",
                (places.size,),
            )
        )
        return places

    def forget_places(self) -> None:
        """Drop the places read so far (a rolled-back transaction may have added some)."""
        self._places = DocPlaces()

    def read(self, term: str, limit: int) -> list[Posting]:
        """Up to ``limit`` (doc id, tf, doc length, session key, position, kind) for
        ``term``, highest impact first."""
        with self._lock:
            row = self._db.execute("SELECT tid FROM terms WHERE term=?", (term,)).fetchone()
            if row is None or limit <= 0:
                return []
            tid = int(row[0])
            # one statement, so one snapshot of both rows even while another process folds
            # the tail into the main block; of the main block only the head is read
            block, tail = PostingBlock(array("I"), array("H")), array("Q")
            for part, n, size, docs, tfs, data in self._db.execute(
                "SELECT id % 2, n, length(data), substr(data, 1, ?1 * 4),"
                " substr(data, n * 4 + 1, ?1 * 2), CASE WHEN id % 2 = 1 THEN data END"
                " FROM postings WHERE id IN (?2, ?2 + 1)",
                (limit, tid * 2),
            ):
                if part == MAIN:
                    block = PostingBlock.decode(int(n), int(size), docs, tfs)
                else:
                    tail = unpack(data)
            places = self._refresh_places()
            try:
                if tail:
                    block = block.merged(tail, places.norm, limit)
                dl, skey, pos, kind = places.dl, places.skey, places.pos, places.kind
                return [
                    (doc, tf, dl[doc], skey[doc], pos[doc], kind[doc])
                    for doc, tf in zip(block.docs, block.tfs, strict=True)
                ]
            except IndexError:
                raise IndexCorrupted(
                    f"a posting of {term!r} names a document the index does not have"
                ) from None
