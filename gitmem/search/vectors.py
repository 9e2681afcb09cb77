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

import importlib.util
import math
import re
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gitmem.search.index import SearchIndex

# numpy is imported on first use (~0.1 s): an offline search or any other command never pays
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


def _numpy() -> Any:
    import numpy

    return numpy


# above this many numbers (e.g. 13,000 vectors of 384) the matrix-vector product is bound by
# memory bandwidth (~30 ms for 100,000 x 384 on a loaded machine): a first pass over one sign
# bit per number (Hamming distance around the mean vector, 1/32 of the bytes) picks
# OVERSAMPLE times the candidates asked for (at least MIN_SHORTLIST), scored exactly after
# (measured on 100,000 clustered vectors of 384: the shortlist of 3,000 keeps ~85% of the
# exact top 10 in ~7 ms, where the exact scan takes ~30 ms; RankConfig.dense_exact for exact)
EXACT_LIMIT = 4_000_000
OVERSAMPLE = 20
MIN_SHORTLIST = 3000

SLOW_NOTE = (
    "numpy is not installed: the dense scan runs in pure Python, slow on large "
    "stores (pip install numpy)"
)


def tag_of(key: str, dims: int) -> str:
    """What vectors of the model ``key`` with ``dims`` numbers are stored under."""
    return f"{key}/{dims}"


def pack(vector: Sequence[float]) -> bytes:
    """A vector as a float32 BLOB (little-endian, as every platform gitmem runs on)."""
    return array("f", vector).tobytes()


def missing(index: SearchIndex, tag: str, limit: int) -> list[tuple[int, int, str]]:
    """Up to ``limit`` documents without a ``tag`` vector: (doc id, hash, text), one per
    content hash, in document order."""
    out: dict[int, tuple[int, int, str]] = {}
    with index.file.lock:
        rows = index.file.db.execute(
            "SELECT d.id, d.hash, d.text FROM docs d LEFT JOIN vectors v"
            " ON v.hash = d.hash AND v.model = ? WHERE v.hash IS NULL ORDER BY d.id LIMIT ?",
            (tag, limit),
        )
        for doc_id, content, text in rows:
            out.setdefault(int(content), (int(doc_id), int(content), str(text)))
    return list(out.values())


def _packed_units(vectors: Sequence[Sequence[float]]) -> list[bytes]:
    if HAVE_NUMPY and vectors:
        np = _numpy()
        matrix = np.asarray(vectors, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return [row.tobytes() for row in (matrix / norms).astype("<f4")]
    return [pack(_unit(vector)) for vector in vectors]


def texts_of(index: SearchIndex, doc_ids: Sequence[int]) -> list[tuple[int, int, str]]:
    """(doc id, hash, text) of these documents (as :func:`missing`; gone ones left out)."""
    with index.file.lock:
        marks = ",".join("?" * len(doc_ids))
        return [
            (int(i), int(h), str(t))
            for i, h, t in index.file.db.execute(
                f"SELECT id, hash, text FROM docs WHERE id IN ({marks}) ORDER BY id", list(doc_ids)
            )
        ]


def store(index: SearchIndex, tag: str, rows: Sequence[tuple[int, Sequence[float]]]) -> None:
    """Keep these (content hash, vector) rows, normalised to length 1 (the scan reads them
    as they are), in one transaction; another model's vector of the same content goes."""
    if not rows:
        return
    blobs = _packed_units([vector for _, vector in rows])
    with index.file.lock:
        index.file.db.execute("BEGIN IMMEDIATE")
        try:
            index.file.db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES(?, ?, ?, ?)",
                [
                    (content, tag, len(vector), blob)
                    for (content, vector), blob in zip(rows, blobs, strict=True)
                ],
            )
            bump = int(index.get_meta("vectors_gen") or 0) + 1
            index.set_meta("vectors_gen", str(bump))
        except BaseException:
            index.file.db.execute("ROLLBACK")
            raise
        index.file.db.execute("COMMIT")


def prune(index: SearchIndex) -> int:
    """Drop the vectors no document has any more (left by a rebuild); how many went."""
    with index.file.lock:
        cursor = index.file.db.execute(
            "DELETE FROM vectors WHERE hash NOT IN (SELECT hash FROM docs)"
        )
        return max(cursor.rowcount, 0)


@dataclass
class Matrix:
    """The stored vectors of one model, normalised, with where each document sits."""

    tag: str
    ids: Any  # numpy int64 array, or a list without numpy
    skeys: Any
    ts: Any
    data: Any  # numpy float32 (rows x dims), or a list of arrays
    pending: int  # documents without a vector
    fast: bool = True
    bits: Any = None  # numpy uint64 (words x rows): the sign bits of the first pass
    mean: Any = None  # the mean vector the bits are taken around
    ones: Any = None  # the square root of each row's number of set bits
    groups: Any = None  # numpy int8: 1 for a text in a CJK script, else 0 (when centred)
    centre: Centre | None = None
    dmu: Any = None  # (rows, 2): each row's dot with the two script means
    cnorm: Any = None  # each row's length minus its script's mean

    def __len__(self) -> int:
        return len(self.ids)


# a script's own mean is taken away once it has this many vectors (else the mean of all)
MIN_GROUP = 8
# texts holding a CJK character (kana, CJK ideographs, hangul): SQLite's GLOB compares code
# points; without centring the column is a constant and no text is read
CJK_GLOB = "d.text GLOB '*[\u3040-\u9fff\uac00-\ud7af]*'"


# the characters of CJK_GLOB, for a text in hand (a regex: searched in C, not per character)
_CJK = re.compile("[\u3040-\u9fff\uac00-\ud7af]")


def script_of(text: str) -> int:
    """1 when ``text`` holds a CJK character, else 0 (the groups of :class:`Centre`)."""
    return int(_CJK.search(text) is not None)


@dataclass
class Centre:
    """Cosines of vectors taken relative to their script's mean vector. A multilingual model
    (e5) puts every text of one language near the others, whatever it says: a Chinese
    question is closer to any Chinese turn than to the English turn that answers it. Taking
    away each script's mean vector (the query's too) removes that offset."""

    means: Any  # (2, dims): the mean vector of each script

    @classmethod
    def of(cls, matrix: Matrix) -> Centre:
        np = _numpy()
        whole = matrix.data.mean(axis=0) if len(matrix) else np.zeros(matrix.data.shape[1])
        means = []
        for group in (0, 1):
            rows = matrix.data[matrix.groups == group]
            means.append(rows.mean(axis=0) if len(rows) >= MIN_GROUP else whole)
        return cls(np.asarray(means, dtype=np.float32))

    def attach(self, matrix: Matrix) -> None:
        """Keep in ``matrix`` what its centred cosines need: each row's dot with both
        means and the length of the row minus its script's mean."""
        np = _numpy()
        matrix.centre = self
        rows = matrix.data
        self_mean = self.means[matrix.groups.astype(np.int64)]
        matrix.dmu = rows @ self.means.T
        matrix.cnorm = np.maximum(np.linalg.norm(rows - self_mean, axis=1), 1e-6)

    def cosines(self, matrix: Matrix, rows: Any, q: Any, dots: Any, group: int) -> Any:
        """Centred cosines of ``rows`` of ``matrix`` (raw dots ``dots``) with query ``q``."""
        np = _numpy()
        mine = self.means[group]
        qc_norm = max(float(np.linalg.norm(q - mine)), 1e-6)
        g = matrix.groups[rows].astype(np.int64)
        q_mu = self.means @ q
        mu_mu = self.means @ mine
        centred = dots - q_mu[g] - matrix.dmu[rows, group] + mu_mu[g]
        return centred / (qc_norm * matrix.cnorm[rows])


def _unit(values: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in values)) or 1.0
    return [x / norm for x in values]


def load(
    index: SearchIndex, tag: str, dims: int, *, fast: bool | None = None, centred: bool = False
) -> Matrix:
    """Every document's ``tag`` vector (rows of another size are skipped); ``centred``:
    with each text's script and cosines taken around the scripts' means (:class:`Centre`)."""
    fast = HAVE_NUMPY if fast is None else fast
    ids: list[int] = []
    skeys: list[int] = []
    stamps: list[float] = []
    blobs: list[bytes] = []
    groups: list[int] = []
    size = dims * 4
    with index.file.lock:
        n_docs = index.stats()[0]
        for doc_id, skey, ts, data, group in index.file.db.execute(
            f"SELECT d.id, d.skey, d.ts, v.data, {CJK_GLOB if centred else 0} FROM docs d"
            " JOIN vectors v ON v.hash = d.hash WHERE v.model = ?",
            (tag,),
        ):
            if len(data) != size:
                continue
            ids.append(doc_id)
            skeys.append(skey)
            stamps.append(ts)
            blobs.append(data)
            groups.append(group)
    found = _matrix(tag, dims, ids, skeys, stamps, blobs, max(n_docs - len(ids), 0), fast, groups)
    if centred and found.fast:
        Centre.of(found).attach(found)
    return found


def _matrix(
    tag: str,
    dims: int,
    ids: list[int],
    skeys: list[int],
    stamps: list[float],
    blobs: list[bytes],
    pending: int,
    fast: bool,
    groups: list[int] | None = None,
) -> Matrix:
    if not fast:
        rows = [list(array("f", blob)) for blob in blobs]  # stored normalised
        return Matrix(tag, ids, skeys, stamps, rows, pending, fast=False)
    np = _numpy()
    unit = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dims)
    found = Matrix(
        tag,
        np.asarray(ids, dtype=np.int64),
        np.asarray(skeys, dtype=np.int64),
        np.asarray(stamps, dtype=np.float64),
        unit,
        pending,
        groups=np.asarray(groups or [0] * len(ids), dtype=np.int8),
    )
    if unit.size > EXACT_LIMIT and hasattr(np, "bitwise_count"):  # numpy 2
        found.mean = unit.mean(axis=0)
        found.bits = np.ascontiguousarray(_signs(unit, found.mean).T)
        found.ones = np.sqrt(
            np.maximum(sum(np.bitwise_count(word) for word in found.bits), 1)
        ).astype(np.float32)
    return found


def _signs(rows: Any, mean: Any) -> Any:
    """One bit per number (above the mean or not), packed into uint64 words per row."""
    np = _numpy()
    packed = np.packbits(rows > mean, axis=-1)
    pad = (-packed.shape[-1]) % 8
    if pad:
        packed = np.concatenate(
            [packed, np.zeros((*packed.shape[:-1], pad), dtype=np.uint8)], axis=-1
        )
    return np.ascontiguousarray(packed).view(np.uint64)


def _dot(rows: Any, q: Any) -> Any:
    np = _numpy()
    # einsum, not BLAS: OpenBLAS hands a matrix-vector product to its threads, which on a
    # busy machine wait for a core (measured: p50 0.5 ms, p95 25 ms for 10,000 x 384)
    return np.einsum("ij,j->i", rows, q)


def _shortlist(matrix: Matrix, q: Any, size: int, mask: Any) -> Any:
    """The rows nearest ``q`` by the cosine of the sign bits (set bits in common over the
    root of the row's set bits: for sparse vectors too, unlike the Hamming distance)."""
    np = _numpy()
    signs = _signs(q, matrix.mean)
    common = np.bitwise_count(matrix.bits[0] & signs[0]).astype(np.uint16)
    for word in range(1, len(signs)):
        common += np.bitwise_count(matrix.bits[word] & signs[word])
    score = common / matrix.ones
    if mask is not None:
        score[~mask] = -1.0
    return np.argpartition(-score, size - 1)[:size]


def _cosines(matrix: Matrix, rows: Any, q: Any, group: int | None) -> Any:
    every = len(rows) == len(matrix)
    sims = _dot(matrix.data if every else matrix.data[rows], q)
    if group is not None and matrix.centre is not None:
        sims = matrix.centre.cosines(matrix, rows, q, sims, group)
    return sims


def nearest(
    matrix: Matrix,
    query: Sequence[float],
    n: int,
    *,
    allowed: set[int] | None = None,
    lo: float = -math.inf,
    hi: float = math.inf,
    floor: float = -1.0,
    exact: bool = False,
    group: int | None = None,
) -> list[tuple[int, float]]:
    """The ``n`` documents most similar to ``query`` (cosine, at least ``floor``), best
    first, among those of the ``allowed`` sessions timed from ``lo`` to ``hi``. A large
    matrix is first narrowed by sign bits (see ``EXACT_LIMIT``) unless ``exact``. With a
    query script ``group`` and a centred matrix the cosines are centred (:class:`Centre`)."""
    if not len(matrix) or n < 1:
        return []
    if not matrix.fast:
        unit = _unit(query)
        found = []
        for doc_id, skey, ts, row in zip(
            matrix.ids, matrix.skeys, matrix.ts, matrix.data, strict=True
        ):
            if (allowed is not None and skey not in allowed) or not lo <= ts <= hi:
                continue
            sim = sum(a * b for a, b in zip(row, unit, strict=True))
            if sim >= floor:
                found.append((int(doc_id), sim))
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found[:n]
    np = _numpy()
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
        sims = _cosines(matrix, rows, q, group)
        if mask is not None:
            sims = np.where(mask[rows], sims, -np.inf)
    else:
        rows = np.arange(len(matrix))
        sims = _cosines(matrix, rows, q, group)
        if mask is not None:
            sims = np.where(mask, sims, -np.inf)
    top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
    ids = matrix.ids[rows[top]]
    order = np.lexsort((ids, -sims[top]))
    return [(int(ids[i]), float(sims[top][i])) for i in order if sims[top][i] >= floor]


# documents added since the last full load are scanned beside it until there are this many
# (or a twentieth of the loaded rows): a save then costs one small read, not a reload
DELTA_ROWS = 2000


@dataclass
class View:
    """What a scan reads: the loaded matrix and the rows added since, and how many
    documents have no vector."""

    parts: list[Matrix]
    pending: int
    fast: bool
    waiting: list[int] | None = None  # ids of documents known to have no vector


def scan(view: View, query: Sequence[float], n: int, **where: Any) -> list[tuple[int, float]]:
    """:func:`nearest` over every part of ``view``, merged, best first."""
    found = [pair for part in view.parts for pair in nearest(part, query, n, **where)]
    found.sort(key=lambda pair: (-pair[1], pair[0]))
    return found[:n]


@dataclass
class VectorCache:
    """The vectors of one model in memory: loaded in full once, then kept up to date with
    the documents added (a small second matrix) until the index's vectors change under it
    (another process, a rebuild: loaded again). A deleted document's row stays until then,
    and the caller skips ids that no longer exist."""

    main: Matrix | None = None
    base: tuple[object, ...] = ()
    generation: int = -1
    vectors_gen: str | None = None
    max_id: int = 0
    pending: int = 0
    added: list[tuple[int, int, float, bytes, int]] = field(default_factory=list)
    centred: bool = False
    waiting: list[int] | None = None  # None: not known which (only how many)
    delta: Matrix | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)

    def get(self, index: SearchIndex, tag: str, dims: int, *, centred: bool = False) -> View:
        """The vectors of ``tag`` for ``index`` as it is now (``centred``: see :func:`load`)."""
        with self.lock, index.file.lock:
            base = (id(index), index.get_meta("doc_epoch"), tag, dims, HAVE_NUMPY, centred)
            stored = index.get_meta("vectors_gen")
            if self.main is None or self.base != base or stored != self.vectors_gen:
                self._reload(index, tag, dims, base, stored)
            elif index.generation != self.generation:
                self._extend(index, tag, dims)
                if len(self.added) > max(DELTA_ROWS, len(self.main or ()) // 20):
                    self._reload(index, tag, dims, base, stored)
            if self.centred and len(self.added) > len(self.main or ()):
                # the means came from fewer rows than were added since (vectors a search
                # just made): centred on them, every cosine would be off
                self._reload(index, tag, dims, base, self.vectors_gen)
            main = self.main
            assert main is not None
            if self.added and self.delta is None:
                ids, skeys, stamps, blobs, groups = (
                    list(column) for column in zip(*self.added, strict=True)
                )
                self.delta = _matrix(tag, dims, ids, skeys, stamps, blobs, 0, main.fast, groups)
                if main.centre is not None:
                    main.centre.attach(self.delta)
            parts = [main] if self.delta is None else [main, self.delta]
            waiting = None if self.waiting is None else list(self.waiting)
            return View(parts, self.pending, main.fast, waiting)

    def _reload(
        self, index: SearchIndex, tag: str, dims: int, base: tuple[object, ...], stored: str | None
    ) -> None:
        self.centred = bool(base[-1])
        self.main = load(index, tag, dims, centred=self.centred)
        self.base, self.vectors_gen, self.generation = base, stored, index.generation
        row = index.file.db.execute("SELECT COALESCE(MAX(id), 0) FROM docs").fetchone()
        self.max_id, self.pending = int(row[0]), self.main.pending
        self.added, self.delta = [], None
        self.waiting = [] if not self.pending else None

    def _extend(self, index: SearchIndex, tag: str, dims: int) -> None:
        rows = index.file.db.execute(
            f"SELECT d.id, d.skey, d.ts, v.data, {CJK_GLOB if self.centred else 0} FROM docs d"
            " LEFT JOIN vectors v ON v.hash = d.hash AND v.model = ? WHERE d.id > ?",
            (tag, self.max_id),
        )
        for doc_id, skey, ts, data, group in rows:
            self.max_id = max(self.max_id, int(doc_id))
            if data is None or len(data) != dims * 4:
                self.pending += 1
                if self.waiting is not None:
                    self.waiting.append(int(doc_id))
            else:
                self.added.append((int(doc_id), int(skey), float(ts), bytes(data), int(group)))
                self.delta = None
        self.generation = index.generation

    def add(
        self,
        index: SearchIndex,
        tag: str,
        dims: int,
        doc_ids: Sequence[int],
        rest: int | None = None,
    ) -> None:
        """This process just stored the vectors of ``doc_ids``: scan them too (without a
        reload); ``rest``, when known, is how many documents still have none."""
        with self.lock, index.file.lock:
            if self.main is None or self.base[2:4] != (tag, dims):
                return
            places = index.docs(doc_ids, text=False)
            marks = ",".join("?" * len(places))
            blobs = (
                {
                    doc_id: (data, group)
                    for doc_id, data, group in index.file.db.execute(
                        f"SELECT d.id, v.data, {CJK_GLOB if self.centred else 0} FROM docs d"
                        f" JOIN vectors v ON v.hash = d.hash WHERE v.model = ? AND d.id"
                        f" IN ({marks})",
                        (tag, *places),
                    )
                }
                if places
                else {}
            )
            for doc_id, row in places.items():
                if doc_id in blobs:
                    data, group = blobs[doc_id]
                    self.added.append((doc_id, row.skey, row.ts, bytes(data), int(group)))
            self.delta = None
            self.pending = max(self.pending - len(blobs), 0) if rest is None else rest
            if self.waiting is not None:
                self.waiting = [i for i in self.waiting if i not in blobs]
            if not self.pending:
                self.waiting = []
            self.vectors_gen = index.get_meta("vectors_gen")

    def forget(self) -> None:
        with self.lock:
            self.main = None
