"""The search index's SQLite file: its schema, the connection, meta values, and the tables
that git cannot rebuild (access counts: how often a memory went into an agent's context,
kept across rebuilds) or that record files which did not parse.

:class:`gitmem.search.index.SearchIndex` holds one :class:`IndexFile` and hands it to its
other parts; this module knows nothing of sessions or terms. Also here: which errors mean
the file itself is damaged (rebuilding helps) and which mean it is only unusable now
(locked, read-only, full).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from gitmem.errors import IndexCorrupted, IndexUnavailable

SCHEMA_VERSION = "11"

# SQLite's page cache (KiB); a rebuild, one transaction, gets more: pages that do not fit
# would be spilled to the WAL and written again
CACHE_KIB = 32 * 1024
BULK_CACHE_KIB = 256 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    skey INTEGER PRIMARY KEY, session_id TEXT NOT NULL, path TEXT NOT NULL UNIQUE,
    blob TEXT NOT NULL, commit_sha TEXT, created REAL, last_active REAL, project TEXT,
    tags TEXT NOT NULL, participants TEXT NOT NULL, links TEXT NOT NULL, extra TEXT NOT NULL,
    summary_text TEXT, text_links TEXT NOT NULL DEFAULT '',
    -- what a listing shows and the columns above do not hold exactly: the dates as written
    -- (their offset), the turns in the file, the language
    created_at TEXT NOT NULL DEFAULT '', active_at TEXT NOT NULL DEFAULT '',
    turns INTEGER NOT NULL DEFAULT 0, language TEXT NOT NULL DEFAULT 'en');
CREATE INDEX IF NOT EXISTS sessions_id ON sessions(session_id);
-- each link of a session file, in its order (metadata links, then the text's [[id]]s), so
-- that the sessions linking to one are an index lookup, not a scan of every row
CREATE TABLE IF NOT EXISTS links(
    skey INTEGER NOT NULL, pos INTEGER NOT NULL, target TEXT NOT NULL,
    PRIMARY KEY(skey, pos)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_target ON links(target, skey);
CREATE TABLE IF NOT EXISTS docs(
    id INTEGER PRIMARY KEY, skey INTEGER NOT NULL, kind INTEGER NOT NULL, iid TEXT,
    pos INTEGER NOT NULL, speaker TEXT NOT NULL, ts REAL NOT NULL, text TEXT NOT NULL,
    terms BLOB NOT NULL, dl INTEGER NOT NULL, norm REAL NOT NULL, hash INTEGER NOT NULL,
    events BLOB);
CREATE INDEX IF NOT EXISTS docs_session ON docs(skey, pos, kind);
-- the time spans a document talks about ("yesterday", "on 7 May"; also in docs.events),
-- epoch seconds [lo, hi), to find the documents about a date a query names
CREATE TABLE IF NOT EXISTS events(
    id INTEGER NOT NULL, lo REAL NOT NULL, hi REAL NOT NULL, PRIMARY KEY(id, lo, hi)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_lo ON events(lo);
-- a term's packed postings: id = term id * 2 + part (0 main block, 1 tail; see postings.py)
CREATE TABLE IF NOT EXISTS postings(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS terms(tid INTEGER PRIMARY KEY, term TEXT NOT NULL, df INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS terms_term ON terms(term);
CREATE TABLE IF NOT EXISTS speakers(name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
-- who spoke each turn, as a field of its own: name (casefolded) -> the turns, newest first
CREATE TABLE IF NOT EXISTS turn_speakers(
    name TEXT NOT NULL, ts REAL NOT NULL, id INTEGER NOT NULL, skey INTEGER NOT NULL,
    pos INTEGER NOT NULL, PRIMARY KEY(name, ts, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS broken(path TEXT PRIMARY KEY, blob TEXT NOT NULL, problem TEXT);
-- optional embeddings (vectors.py), by document content hash: a rebuild keeps them
CREATE TABLE IF NOT EXISTS vectors(
    hash INTEGER PRIMARY KEY, model TEXT NOT NULL, dims INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS access(
    session_id TEXT NOT NULL, iid TEXT NOT NULL, count INTEGER NOT NULL, last REAL NOT NULL,
    PRIMARY KEY(session_id, iid)) WITHOUT ROWID;
"""


_BUSY_MS = 30_000  # how long a writer waits for another to finish

# what a reader keeps for the next process (a listing of every session): made lazily, so an
# index file from before it opens read-only as it did
_KEPT = "CREATE TABLE IF NOT EXISTS kept(name TEXT PRIMARY KEY, stamp TEXT NOT NULL, data BLOB)"


class IndexFile:
    """One SQLite connection to an index file (or ``":memory:"``), guarded by a lock.

    The search index's other parts share it: they run their statements on :attr:`db`
    while holding :attr:`lock`, and key their caches on :attr:`generation`.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self.lock = threading.RLock()
        self.db = self._connect()
        self.generation = 0  # bumped by every committed write (caches compare it)

    # --- connection -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=_BUSY_MS / 1000
        )
        try:
            # 16 KiB pages: less slack around the documents and the long postings BLOBs
            # (only a new, empty file takes it; the layout version makes old files new)
            db.execute("PRAGMA page_size=16384")
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # keep the hot part of the postings in memory between queries
            db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            db.execute("PRAGMA mmap_size=268435456")
            db.execute("PRAGMA journal_size_limit=16777216")
            db.execute("PRAGMA temp_store=MEMORY")
            db.executescript(_SCHEMA)
            version = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if version is None:
                db.execute("INSERT INTO meta VALUES('schema', ?)", (SCHEMA_VERSION,))
            elif version[0] != SCHEMA_VERSION:
                raise IndexCorrupted(f"index layout {version[0]}, expected {SCHEMA_VERSION}")
        except sqlite3.OperationalError as exc:  # locked, read-only, out of space: not broken
            db.close()
            raise IndexUnavailable(f"search index {self.path} cannot be used: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            db.close()
            raise IndexCorrupted(f"search index {self.path} is damaged: {exc}") from exc
        except IndexCorrupted:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Close the database connection."""
        with self.lock:
            self.db.close()

    def check(self) -> None:
        """Raise IndexCorrupted unless SQLite's quick check passes."""
        with self.lock:
            try:
                row = self.db.execute("PRAGMA quick_check").fetchone()
            except sqlite3.DatabaseError as exc:
                raise IndexCorrupted(str(exc)) from exc
            if row is None or row[0] != "ok":
                raise IndexCorrupted(str(row))

    # --- meta -------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A value from the meta table (None when unset)."""
        with self.lock:
            row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str | None) -> None:
        """Set or (with None) remove a meta value."""
        with self.lock:
            if value is None:
                self.db.execute("DELETE FROM meta WHERE key=?", (key,))
            else:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (key, value))

    def count_write(self) -> None:
        """Count a committed write in the file itself (inside the writer's transaction):
        what a reader keeps names the count it was made at, so the next write voids it,
        whichever process makes it."""
        self.db.execute(
            "INSERT INTO meta VALUES('writes', '1')"
            " ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    # --- what readers keep --------------------------------------------------------------

    def kept(self, name: str) -> tuple[str, bytes] | None:
        """The stamp and data kept under ``name`` (None: nothing kept)."""
        with self.lock:
            try:
                row = self.db.execute(
                    "SELECT stamp, data FROM kept WHERE name=?", (name,)
                ).fetchone()
            except sqlite3.OperationalError:  # no such table: nothing was ever kept
                return None
        return None if row is None else (str(row[0]), bytes(row[1]))

    def keep(self, name: str, stamp: str, data: bytes) -> bool:
        """Keep ``data`` under ``name`` for the next reader, unless another process is
        writing the file now or it cannot be written (read-only, full): a reader does not
        wait, nor fail, to save work for the next one."""
        with self.lock:
            if self.db.in_transaction:
                return False
            self.db.execute("PRAGMA busy_timeout=0")
            try:
                self.db.execute("BEGIN IMMEDIATE")
                try:
                    self.db.execute(_KEPT)
                    self.db.execute(
                        "INSERT OR REPLACE INTO kept VALUES(?, ?, ?)", (name, stamp, data)
                    )
                except BaseException:
                    self.db.execute("ROLLBACK")
                    raise
                self.db.execute("COMMIT")
            except sqlite3.Error:
                return False
            finally:
                self.db.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
        return True

    def clear(self) -> None:
        """Drop every document and session (access counts are kept). Terms keep their ids
        (with no documents): a term id means the same term for the file's whole life, so
        readers may keep them in memory."""
        for table in (
            "sessions",
            "links",
            "docs",
            "postings",
            "broken",
            "speakers",
            "turn_speakers",
            "events",
        ):
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("UPDATE terms SET df = 0")
        self.db.execute("DELETE FROM meta WHERE key IN ('n_docs', 'total_dl')")

    def counts(self) -> tuple[int, int]:
        """(documents, their total length in terms) as last written."""
        n = self.db.execute("SELECT value FROM meta WHERE key='n_docs'").fetchone()
        total = self.db.execute("SELECT value FROM meta WHERE key='total_dl'").fetchone()
        return (int(n[0]) if n else 0, int(total[0]) if total else 0)

    def set_counts(self, n_docs: int, total_dl: int) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO meta VALUES(?, ?)",
            [("n_docs", str(n_docs)), ("total_dl", str(total_dl))],
        )

    def drop_vectors(self, hashes: Iterable[int]) -> None:
        """Forget the stored vectors of documents that are gone (by content hash)."""
        gone = list(set(hashes))
        for at in range(0, len(gone), 500):
            chunk = gone[at : at + 500]
            self.db.execute(
                f"DELETE FROM vectors WHERE hash IN ({','.join('?' * len(chunk))})", chunk
            )

    # --- access counts ----------------------------------------------------------------

    def touch(self, refs: Iterable[tuple[str, str]], when: float) -> None:
        """Count one access of each (session id, interaction id or "" for a summary)."""
        rows = [(sid, iid, when) for sid, iid in dict.fromkeys(refs)]
        if not rows:
            return
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(
                    "INSERT INTO access VALUES(?, ?, 1, ?) ON CONFLICT(session_id, iid)"
                    " DO UPDATE SET count = count + 1, last = excluded.last",
                    rows,
                )
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def access_counts(self, session_ids: Iterable[str]) -> dict[tuple[str, str], int]:
        """Access counts of the memories of these sessions: (session id, interaction id or
        "" for a summary) -> count (memories never used are left out)."""
        wanted = list(dict.fromkeys(session_ids))
        out: dict[tuple[str, str], int] = {}
        with self.lock:
            for at in range(0, len(wanted), 500):
                chunk = wanted[at : at + 500]
                marks = ",".join("?" * len(chunk))
                for sid, iid, count in self.db.execute(
                    f"SELECT session_id, iid, count FROM access WHERE session_id IN ({marks})",
                    chunk,
                ):
                    out[(str(sid), str(iid))] = int(count)
        return out

    # --- files that did not parse -----------------------------------------------------

    def broken(self) -> dict[str, str]:
        """path -> blob id of committed session files that could not be read."""
        with self.lock:
            return {str(p): str(b) for p, b in self.db.execute("SELECT path, blob FROM broken")}

    def mark_broken(self, path: str, blob: str | None, problem: str = "") -> None:
        """Remember (or with blob None, forget) a session file that could not be read."""
        if blob is None:
            self.db.execute("DELETE FROM broken WHERE path=?", (path,))
        else:
            self.db.execute("INSERT OR REPLACE INTO broken VALUES(?, ?, ?)", (path, blob, problem))


# made after a rebuild's bulk load (much faster than keeping it up to date row by row)
DOCS_SESSION_INDEX = "CREATE INDEX IF NOT EXISTS docs_session ON docs(skey, pos, kind)"

# everything that using an index file can raise
DATABASE_ERRORS: tuple[type[Exception], ...] = (IndexCorrupted, IndexUnavailable, sqlite3.Error)


def damaged(exc: BaseException) -> bool:
    """Whether an error means the index file itself is broken (so rebuilding helps),
    rather than locked, read-only or on a full disk (where deleting it would not)."""
    if isinstance(exc, IndexCorrupted):
        return True
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


def unavailable(exc: BaseException, path: Path) -> IndexUnavailable:
    """A gitmem error for an index problem that a rebuild does not fix."""
    if isinstance(exc, IndexUnavailable):
        return exc
    return IndexUnavailable(
        f"search index {path} cannot be used ({exc}); check the permissions and free space"
        " of the .git/gitmem folder, or run `gitmem reindex`"
    )


def discard(path: Path) -> None:
    """Delete an index file and its SQLite side files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()
