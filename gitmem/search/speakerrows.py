"""The index's speaker rows: who spoke each turn, as a field of its own.

Two tables of the index file: ``speakers`` (each name as written -> how many documents that
person speaks in; the ranker weighs a name by it) and ``turn_speakers`` (each name,
casefolded -> the turns it spoke in, newest first, with their session and position).
:class:`SpeakerTable` writes both (the search index calls it with each document it adds
or drops) and answers "Bob's newest turns" and "the sessions Bob spoke in" for queries that
name someone and for the speaker filter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from gitmem.search.indexfile import IndexFile


def speaker_names(joined: str) -> list[str]:
    """The speakers of a document as stored (its ``speaker`` column: names joined by ", ")."""
    return [name for name in joined.split(", ") if name]


def spoke(speakers: str, names: Iterable[str]) -> bool:
    """Whether each of these people (any case) is among a document's ``speakers``."""
    present = {name.casefold() for name in speaker_names(speakers)}
    return all(name.casefold() in present for name in names)


class SpeakerTable:
    """Writing and reading the speaker rows of an index file."""

    def __init__(self, file: IndexFile) -> None:
        self._file = file
        self._db, self._lock = file.db, file.lock
        self._counts: tuple[int, dict[str, int]] | None = None

    # --- writing (inside the search index's write transaction) -------------------------

    def count(self, speakers: Iterable[str], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) one document for each name in these speaker
        columns."""
        counts = Counter(name for joined in speakers for name in speaker_names(joined))
        self._db.executemany(
            "INSERT INTO speakers VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET n = n + excluded.n",
            [(name, sign * n) for name, n in counts.items()],
        )
        if sign < 0:
            self._db.execute("DELETE FROM speakers WHERE n <= 0")

    def add_turns(self, turns: Iterable[tuple[int, str, float, int, int]]) -> None:
        """Record who spoke each of these turns: (doc id, speaker column, time, session
        key, position)."""
        self._db.executemany(
            "INSERT OR IGNORE INTO turn_speakers VALUES(?,?,?,?,?)",
            [
                (name.casefold(), ts, doc_id, skey, pos)
                for doc_id, speakers, ts, skey, pos in turns
                for name in speaker_names(speakers)
            ],
        )

    def drop_turns(self, turns: Iterable[tuple[int, str, float]]) -> None:
        """Forget who spoke these turns: (doc id, speaker column, time)."""
        self._db.executemany(
            "DELETE FROM turn_speakers WHERE name=? AND ts=? AND id=?",
            [
                (name.casefold(), ts, doc_id)
                for doc_id, speakers, ts in turns
                for name in speaker_names(speakers)
            ],
        )

    # --- reading -----------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Speaker name -> how many documents they speak in (cached until the next write)."""
        with self._lock:
            if self._counts is None or self._counts[0] != self._file.generation:
                rows = self._db.execute("SELECT name, n FROM speakers")
                self._counts = (self._file.generation, {str(a): int(n) for a, n in rows})
            return self._counts[1]

    def turns(
        self,
        names: Sequence[str],
        limit: int,
        *,
        allowed: set[int] | None = None,
        lo: float = -math.inf,
        hi: float = math.inf,
    ) -> dict[int, tuple[int, int]]:
        """The newest turns (at most ``limit``) that one of these people spoke in (a name's
        case does not matter), of the ``allowed`` sessions, said from ``lo`` to ``hi``:
        doc id -> (session key, position), newest first."""
        wanted = sorted({name.casefold() for name in names})
        out: dict[int, tuple[int, int]] = {}
        if not wanted or limit <= 0:
            return out
        marks = ",".join("?" * len(wanted))
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, skey, pos FROM turn_speakers WHERE name IN ({marks})"
                " AND ts >= ? AND ts <= ? ORDER BY ts DESC, id DESC",
                [*wanted, lo, hi],
            )
            for doc_id, skey, pos in rows:
                if allowed is None or skey in allowed:
                    out[int(doc_id)] = (int(skey), int(pos))
                    if len(out) >= limit:
                        break
        return out

    def sessions_of(self, name: str) -> set[int]:
        """Keys of the sessions in which this person (any case) spoke a turn."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT skey FROM turn_speakers WHERE name=?", (name.casefold(),)
            )
            return {int(skey) for (skey,) in rows}
