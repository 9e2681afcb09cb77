"""The inverted index as packed blocks: each term's postings in one BLOB, best first.

A posting (a document holding a term) is one 64-bit integer, ``impact << 48 | doc << 16 |
tf``: sorting them in descending order puts the highest precomputed BM25 impact first (ties:
the higher document id first), so a query reads only the head of a common term's list. A
term's postings are two rows of the ``postings`` table (row id ``tid * 2 + part``): the main
block, written whole by a rebuild, and a small tail that incremental catch-ups append to,
folded into the main block once it passes :data:`TAIL_MAX` postings (a save then rewrites a
few small tails, not every long list it touches). Readers merge the tail into the head.

What every posting of a document would repeat (its length, session, position and kind) is
looked up in :class:`DocPlaces`, an in-memory copy of those columns of the ``docs`` table.
It stays valid because a document id is never reused within a file's *epoch*: ids come
from a counter kept in the meta table, and only a rebuild (``clear``) starts a new epoch.
This replaced one SQLite row of ~25 bytes per posting: 8 bytes per posting now, and a
rebuild inserts one row per term.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gitmem.errors import IndexCorrupted
from gitmem.search.sessionrows import SessionTable

MAIN, TAIL = 0, 1
# a tail longer than this is merged into the term's main block
TAIL_MAX = 256
_TF_MAX = 0xFFFF  # a tf that does not fit 16 bits is stored as this (no turn gets there)
_DOC_BITS = 0xFFFFFFFF


def posting_key(impact: int, doc: int, tf: int) -> int:
    """One posting as the integer blocks hold (impacts are below 22,000: see index.py)."""
    return impact << 48 | doc << 16 | min(tf, _TF_MAX)


def split_key(key: int) -> tuple[int, int, int]:
    """(impact, doc, tf) of a posting key."""
    return key >> 48, (key >> 16) & _DOC_BITS, key & 0xFFFF


def pack(keys: Iterable[int]) -> bytes:
    """Postings (already in block order) as a BLOB: 8 bytes each, little-endian."""
    block = array("Q", keys)
    if sys.byteorder == "big":
        block.byteswap()
    return block.tobytes()


def unpack(data: bytes | None) -> array[int]:
    """The postings of a BLOB :func:`pack` wrote (a cut-off head is cut to whole postings)."""
    block = array("Q")
    if data:
        block.frombytes(data[: len(data) - len(data) % 8])
        if sys.byteorder == "big":
            block.byteswap()
    return block


def merge(block: Iterable[int], new: Iterable[int]) -> array[int]:
    """A block with more postings added, best first."""
    return array("Q", sorted([*block, *new], reverse=True))


def remove(block: array[int], gone: set[int]) -> array[int]:
    """A block without these postings."""
    return array("Q", [key for key in block if key not in gone])


class DocPlaces:
    """Each document's length, session key, position and kind, by document id, in memory
    (documents never change: an edited one is deleted and added under a new id)."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.dl = array("i")
        self.skey = array("i")
        self.pos = array("i")
        self.kind = array("b")

    def add(self, rows: Iterable[Sequence[int]]) -> None:
        """Append rows (id, dl, skey, pos, kind) with ids at or above :meth:`size`."""
        dl, skey, pos, kind = self.dl, self.skey, self.pos, self.kind
        for doc, length, session, place, what in rows:
            gap = doc - len(dl)
            if gap > 0:  # ids of deleted documents: never looked up
                for column in (dl, skey, pos, kind):
                    column.extend([0] * gap)
            dl.append(length)
            skey.append(session)
            pos.append(place)
            kind.append(what)

    @property
    def size(self) -> int:
        return len(self.dl)


class PostingTable(SessionTable):
    """Reading and writing the packed postings of an index file (see the module docstring)."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        super().__init__(path)
        self._places = DocPlaces()

    # --- blocks -----------------------------------------------------------------------

    def _block(self, tid: int, part: int) -> array[int]:
        row = self._db.execute("SELECT data FROM postings WHERE id=?", (tid * 2 + part,))
        found = row.fetchone()
        return unpack(None if found is None else found[0])

    def _store(self, tid: int, part: int, block: array[int]) -> None:
        if block:
            self._db.execute("INSERT OR REPLACE INTO postings VALUES(?, ?)",
                             (tid * 2 + part, pack(block)))
        else:
            self._db.execute("DELETE FROM postings WHERE id=?", (tid * 2 + part,))

    def _add_postings(self, new: Mapping[int, Iterable[int]], *, fresh: bool = False) -> None:
        """Add postings by term id: to the tails, or (``fresh``: a rebuild into empty
        tables) straight into new main blocks, one row per term."""
        if fresh:
            self._db.executemany(
                "INSERT INTO postings VALUES(?, ?)",
                ((tid * 2, pack(sorted(keys, reverse=True))) for tid, keys in new.items()),
            )
            return
        for tid, keys in new.items():
            tail = merge(self._block(tid, TAIL), keys)
            if len(tail) > TAIL_MAX:
                self._store(tid, MAIN, merge(self._block(tid, MAIN), tail))
                tail = array("Q")
            self._store(tid, TAIL, tail)

    def _drop_postings(self, gone: Mapping[int, set[int]]) -> None:
        """Remove postings (by term id) from whichever block holds them."""
        for tid, keys in gone.items():
            for part in (TAIL, MAIN):
                block = self._block(tid, part)
                kept = remove(block, keys)
                if len(kept) != len(block):
                    self._store(tid, part, kept)

    # --- reading ----------------------------------------------------------------------

    def _refresh_places(self, upto: int) -> DocPlaces:
        """The document places, read again when a rebuild started a new epoch and
        extended when ``upto`` lies past what is loaded (documents added since)."""
        epoch = self.get_meta("doc_epoch")
        places = self._places
        if epoch != places.epoch:
            places = self._places = DocPlaces()
            places.epoch = epoch
        if upto >= places.size:
            places.add(self._db.execute(
                "SELECT id, dl, skey, pos, kind FROM docs WHERE id >= ? ORDER BY id",
                (places.size,),
            ))
            if upto >= places.size:
                raise IndexCorrupted(f"a posting names document {upto}, which the index lacks")
        return places

    def _forget_places(self) -> None:
        self._places = DocPlaces()

    def postings(self, term: str, limit: int) -> list[tuple[int, int, int, int, int, int]]:
        """Up to ``limit`` (doc id, tf, doc length, session key, position, kind) for
        ``term``, highest impact first."""
        with self._lock:
            row = self._db.execute("SELECT tid FROM terms WHERE term=?", (term,)).fetchone()
            if row is None:
                return []
            tid = int(row[0])
            head = self._db.execute(
                "SELECT substr(data, 1, ?) FROM postings WHERE id=?", (limit * 8, tid * 2)
            ).fetchone()
            keys = unpack(None if head is None else head[0])
            tail = self._block(tid, TAIL)
            if tail:
                keys = merge(keys, tail)[:limit]
            if not keys:
                return []
            docs = [(key >> 16) & _DOC_BITS for key in keys]
            places = self._refresh_places(max(docs))
            dl, skey, pos, kind = places.dl, places.skey, places.pos, places.kind
            return [
                (doc, key & 0xFFFF, dl[doc], skey[doc], pos[doc], kind[doc])
                for doc, key in zip(docs, keys, strict=True)
            ]
