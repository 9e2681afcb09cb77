"""Stored embedding vectors and the brute-force nearest-neighbour scan over them.

Vectors live in the index file's ``vectors`` table (see :mod:`.indexfile`), one float32
BLOB per document *content* (the document hash), tagged with the model that made it
(``model[@dimensions]/<size>``): a rebuild of the index keeps them, a document that only
moved keeps its vector, a changed or deleted one loses it, and another model's or size's
vectors are ignored (and recomputed). The scan is exact cosine similarity over a matrix
cached in memory until the index changes. No vector extension: none installs from the
package index on every platform, and a matrix-vector product over 100,000 rows is a few
milliseconds with numpy. numpy is optional (the ``embeddings`` extra; this module is its
only importer); without it the scan runs in pure Python, correct but slow on large stores.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gitmem.search.index import Index

try:
    import numpy as np

    HAVE_NUMPY = True
except ImportError:  # pragma: no cover - the test and dev extras install numpy
    HAVE_NUMPY = False

# above this many numbers (e.g. 13,000 vectors of 384) the matrix-vector product is bound by
# memory bandwidth (~30 ms for 100,000 x 384 on a loaded machine): a first pass over one sign
# bit per number (Hamming distance around the mean vector, 1/32 of the bytes) picks
# OVERSAMPLE times the candidates asked for (at least MIN_SHORTLIST), scored exactly after
EXACT_LIMIT = 4_000_000
OVERSAMPLE = 20
MIN_SHORTLIST = 1000

SLOW_NOTE = ("numpy is not installed: the dense scan runs in pure Python, slow on large "
             "stores (pip install 'gitmem-store[embeddings]')")


def tag_of(key: str, dims: int) -> str:
    """What vectors of the model ``key`` with ``dims`` numbers are stored under."""
    return f"{key}/{dims}"


def pack(vector: Sequence[float]) -> bytes:
    """A vector as a float32 BLOB (little-endian, as every platform gitmem runs on)."""
    return array("f", vector).tobytes()


def missing(index: Index, tag: str, limit: int) -> list[tuple[int, int, str]]:
    """Up to ``limit`` documents without a ``tag`` vector: (doc id, hash, text), one per
    content hash, in document order."""
    out: dict[int, tuple[int, int, str]] = {}
    with index._lock:
        rows = index._db.execute(
            "SELECT d.id, d.hash, d.text FROM docs d LEFT JOIN vectors v"
            " ON v.hash = d.hash AND v.model = ? WHERE v.hash IS NULL ORDER BY d.id LIMIT ?",
            (tag, limit))
        for doc_id, content, text in rows:
            out.setdefault(int(content), (int(doc_id), int(content), str(text)))
    return list(out.values())


def store(index: Index, tag: str, rows: Sequence[tuple[int, Sequence[float]]]) -> None:
    """Keep these (content hash, vector) rows, one transaction (other models' go)."""
    if not rows:
        return
    with index._lock:
        index._db.execute("BEGIN IMMEDIATE")
        try:
            index._db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES(?, ?, ?, ?)",
                [(content, tag, len(vector), pack(vector)) for content, vector in rows])
            bump = int(index.get_meta("vectors_gen") or 0) + 1
            index.set_meta("vectors_gen", str(bump))
        except BaseException:
            index._db.execute("ROLLBACK")
            raise
        index._db.execute("COMMIT")


def prune(index: Index) -> int:
    """Drop the vectors no document has any more (left by a rebuild); how many went."""
    with index._lock:
        cursor = index._db.execute(
            "DELETE FROM vectors WHERE hash NOT IN (SELECT hash FROM docs)")
        return max(cursor.rowcount, 0)


@dataclass
class Matrix:
    """The stored vectors of one model, normalised, with where each document sits."""

    tag: str
    stamp: tuple[object, ...]
    ids: Any  # numpy int64 array, or a list without numpy
    skeys: Any
    ts: Any
    data: Any  # numpy float32 (rows x dims), or a list of arrays
    pending: int  # documents without a vector
    fast: bool = True
    bits: Any = None  # numpy uint64 (words x rows): the sign bits of the first pass
    mean: Any = None  # the mean vector the bits are taken around

    def __len__(self) -> int:
        return len(self.ids)


def _stamp(index: Index, tag: str) -> tuple[object, ...]:
    return (id(index), index.generation, index.get_meta("doc_epoch"),
            index.get_meta("vectors_gen"), tag)


def _unit(values: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in values)) or 1.0
    return [x / norm for x in values]


def load(index: Index, tag: str, dims: int, *, fast: bool | None = None) -> Matrix:
    """Every document's ``tag`` vector (rows of another size are skipped)."""
    fast = HAVE_NUMPY if fast is None else fast
    ids: list[int] = []
    skeys: list[int] = []
    stamps: list[float] = []
    blobs: list[bytes] = []
    size = dims * 4
    with index._lock:
        stamp = _stamp(index, tag)
        n_docs = index.stats()[0]
        for doc_id, skey, ts, data in index._db.execute(
            "SELECT d.id, d.skey, d.ts, v.data FROM docs d JOIN vectors v ON v.hash = d.hash"
            " WHERE v.model = ?", (tag,)):
            if len(data) != size:
                continue
            ids.append(doc_id)
            skeys.append(skey)
            stamps.append(ts)
            blobs.append(data)
    pending = max(n_docs - len(ids), 0)
    if fast:
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit = (matrix / norms).astype(np.float32)
        found = Matrix(tag, stamp, np.asarray(ids, dtype=np.int64),
                       np.asarray(skeys, dtype=np.int64), np.asarray(stamps, dtype=np.float64),
                       unit, pending)
        if unit.size > EXACT_LIMIT and hasattr(np, "bitwise_count"):  # numpy 2
            found.mean = unit.mean(axis=0)
            found.bits = np.ascontiguousarray(_signs(unit, found.mean).T)
        return found
    rows = [_unit(array("f", blob)) for blob in blobs]
    return Matrix(tag, stamp, ids, skeys, stamps, rows, pending, fast=False)


def _signs(rows: Any, mean: Any) -> Any:
    """One bit per number (above the mean or not), packed into uint64 words per row."""
    packed = np.packbits(rows > mean, axis=-1)
    pad = (-packed.shape[-1]) % 8
    if pad:
        packed = np.concatenate(
            [packed, np.zeros((*packed.shape[:-1], pad), dtype=np.uint8)], axis=-1)
    return np.ascontiguousarray(packed).view(np.uint64)


def _dot(rows: Any, q: Any) -> Any:
    # einsum, not BLAS: OpenBLAS hands a matrix-vector product to its threads, which on a
    # busy machine wait for a core (measured: p50 0.5 ms, p95 25 ms for 10,000 x 384)
    return np.einsum("ij,j->i", rows, q)


def _shortlist(matrix: Matrix, q: Any, size: int, mask: Any) -> Any:
    """The rows nearest ``q`` by Hamming distance of the sign bits (masked rows last)."""
    signs = _signs(q, matrix.mean)
    distance = np.bitwise_count(matrix.bits[0] ^ signs[0]).astype(np.uint16)
    for word in range(1, len(signs)):
        distance += np.bitwise_count(matrix.bits[word] ^ signs[word])
    if mask is not None:
        distance[~mask] = np.iinfo(np.uint16).max
    return np.argpartition(distance, size - 1)[:size]


def nearest(matrix: Matrix, query: Sequence[float], n: int, *, allowed: set[int] | None = None,
            lo: float = -math.inf, hi: float = math.inf, floor: float = -1.0,
            exact: bool = False) -> list[tuple[int, float]]:
    """The ``n`` documents most similar to ``query`` (cosine, at least ``floor``), best
    first, among those of the ``allowed`` sessions timed from ``lo`` to ``hi``. A large
    matrix is first narrowed by sign bits (see ``EXACT_LIMIT``) unless ``exact``."""
    if not len(matrix) or n < 1:
        return []
    if not matrix.fast:
        unit = _unit(query)
        found = []
        for doc_id, skey, ts, row in zip(matrix.ids, matrix.skeys, matrix.ts, matrix.data,
                                         strict=True):
            if (allowed is not None and skey not in allowed) or not lo <= ts <= hi:
                continue
            sim = sum(a * b for a, b in zip(row, unit, strict=True))
            if sim >= floor:
                found.append((int(doc_id), sim))
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found[:n]
    q = np.asarray(query, dtype=np.float32)
    q /= float(np.linalg.norm(q)) or 1.0
    mask = None
    if allowed is not None or lo > -math.inf or hi < math.inf:
        mask = (matrix.ts >= lo) & (matrix.ts <= hi)
        if allowed is not None:
            mask &= np.isin(matrix.skeys, np.fromiter(allowed, dtype=np.int64))
    size = max(n * OVERSAMPLE, MIN_SHORTLIST)
    if matrix.bits is not None and not exact and size < len(matrix):
        rows = _shortlist(matrix, q, size, mask)
        sims = _dot(matrix.data[rows], q)
        if mask is not None:
            sims = np.where(mask[rows], sims, -np.inf)
    else:
        rows = np.arange(len(matrix))
        sims = _dot(matrix.data, q)
        if mask is not None:
            sims = np.where(mask, sims, -np.inf)
    top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
    ids = matrix.ids[rows[top]]
    order = np.lexsort((ids, -sims[top]))
    return [(int(ids[i]), float(sims[top][i])) for i in order if sims[top][i] >= floor]


@dataclass
class VectorCache:
    """The last loaded matrix, valid until the index or its vectors change."""

    matrix: Matrix | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, index: Index, tag: str, dims: int) -> Matrix:
        """The matrix of ``tag`` for ``index`` as it is now (loaded again when stale)."""
        with self.lock:
            found = self.matrix
            if found is None or found.stamp != _stamp(index, tag):
                found = self.matrix = load(index, tag, dims)
            return found

    def forget(self) -> None:
        with self.lock:
            self.matrix = None
