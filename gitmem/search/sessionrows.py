"""The index's session rows: each session file's metadata, and the filters that read it.

One row per session file (a session's main file and its archive part are two rows of the
same session id): path, blob, commit, dates, project, and tags, participants and links
each kept as one separated column, and what a listing shows (``SessionInfo``: the dates as
written, the turn count). Each link is also a row of the links table, indexed by its target.
:class:`SessionTable` writes them (the search index calls it with a session's documents) and
reads them, caching rows by key until the next write. It also answers ``list_session_infos``
and the dashboard's browsing (a page of sessions out of 10,000 without parsing a file; the
links between sessions) from the same rows.
"""

from __future__ import annotations

import functools
import json
import marshal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Any

from gitmem.format.bulk import collector_paused
from gitmem.format.paths import PART_MARK
from gitmem.models import Session, SessionInfo
from gitmem.search.indexfile import IndexFile

_SEP = "\x1f"


@dataclass(frozen=True)
class SessionRow:
    """A session's metadata as indexed."""

    skey: int
    session_id: str
    path: str
    commit: str | None
    created: float | None
    last_active: float | None
    project: str | None
    tags: tuple[str, ...]
    participants: tuple[str, ...]
    links: tuple[str, ...]
    extra: dict[str, str] = field(default_factory=dict)


def join_values(items: Iterable[str]) -> str:
    """Tags, participants or links as one column, each between separators (so that
    ``instr`` finds a whole value)."""
    return _SEP + _SEP.join(items) + _SEP


def split_values(value: str) -> tuple[str, ...]:
    return tuple(item for item in value.split(_SEP) if item)


def _labels(
    tags: Sequence[str], participants: Sequence[str], project: str | None
) -> tuple[list[str], list[object]]:
    """SQL conditions (and their arguments) for sessions with all these tags and
    participants (a participant's case does not matter) and this project."""
    where: list[str] = []
    args: list[object] = []
    for tag in tags:
        where.append("instr(tags, ?) > 0")
        args.append(_SEP + tag + _SEP)
    for name in participants:
        where.append("instr(lower(participants), ?) > 0")
        args.append((_SEP + name + _SEP).lower())
    if project is not None:
        where.append("project = ?")
        args.append(project)
    return where, args


@dataclass(frozen=True)
class SessionRowFilter:
    """Which session files under ``folder`` a listing takes (a huge session's part files
    are rows of it, not sessions): all these tags and participants (a participant's case
    does not matter), this project, last active within the bounds (POSIX seconds)."""

    folder: str
    tags: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()
    project: str | None = None
    active_since: float | None = None
    active_until: float | None = None

    @property
    def whole(self) -> bool:
        """No condition but the folder: every session."""
        return self == SessionRowFilter(self.folder)

    def where(self) -> tuple[str, list[object]]:
        """The WHERE clause and its arguments."""
        where, args = _labels(self.tags, self.participants, self.project)
        where.append("substr(path, 1, ?) = ?")
        args.extend((len(self.folder), self.folder))
        where.append("instr(path, ?) = 0")
        args.append(PART_MARK)
        if self.active_since is not None:
            where.append("last_active >= ?")
            args.append(self.active_since)
        if self.active_until is not None:
            where.append("last_active <= ?")
            args.append(self.active_until)
        return " WHERE " + " AND ".join(where), args


# most sessions share their participants and links: a listing splits each value once
@functools.lru_cache(maxsize=4096)
def _items(value: str) -> tuple[str, ...]:
    """``split_values`` of a column ``join_values`` wrote (no empty item), faster."""
    return tuple(value[1:-1].split(_SEP)) if len(value) > 2 else ()


def _info(r: Sequence[Any]) -> SessionInfo:
    """The listing of a row read with ``SessionTable._INFO_COLUMNS``."""
    return _infos([r[2:]])[0]


def _infos(rows: Iterable[Sequence[Any]]) -> list[SessionInfo]:
    """The listings of rows that start with ``_LISTING_COLUMNS``; the row is trusted (the
    index wrote it), so each is made as a plain tuple, without a call per row."""
    parse, new, loads = datetime.fromisoformat, tuple.__new__, json.loads
    return [
        new(
            SessionInfo,
            (
                r[0],
                parse(r[1]),
                parse(r[2]),
                _items(r[3]),
                _items(r[4]),
                r[5],
                _items(r[6]),
                {} if r[7] == "{}" else loads(r[7]),
                r[8],
                r[9],
                "zh" if r[10] == "zh" else "en",
            ),
        )
        for r in rows
    ]


_LISTING = "listing:"  # the name a kept listing of a folder is kept under


def _listing_stamp(file: IndexFile) -> str:
    """What a kept listing must match: the index's count of writes, and the commit and
    document epoch it reflects (what a gitmem that does not count writes changes), the
    listing's columns and the Python that wrote it (marshal's format may change)."""
    meta = [file.get_meta(key) for key in ("writes", "commit", "doc_epoch")]
    return f"{meta}/{sys.version_info[0]}.{sys.version_info[1]}/{_LISTING_COLUMNS}"


_LISTING_COLUMNS = (
    "session_id, created_at, active_at, participants, tags, project, links, extra, turns,"
    " summary_text, language"
)


class SessionTable:
    """Writing and reading the session rows of an index file."""

    def __init__(self, file: IndexFile) -> None:
        self._file = file
        self._db, self._lock = file.db, file.lock
        # rows by key, valid for one (generation, document epoch): keys restart in a rebuild
        self._session_cache: tuple[tuple[int, str | None], dict[int, SessionRow]] = ((-1, None), {})
        self._infos: dict[str, SessionInfo] = {}  # blob id -> listing
        self._last_listed: tuple[object, dict[str, tuple[str, SessionInfo]]] = (None, {})
        self._last_infos: tuple[object, list[SessionInfo], dict[str, int]] = (None, [], {})

    # --- writing (inside the search index's write transaction) -------------------------

    def key_of(self, path: str) -> int | None:
        """The key of the row of the session file at ``path`` (None: not indexed)."""
        row = self._db.execute("SELECT skey FROM sessions WHERE path=?", (path,)).fetchone()
        return None if row is None else int(row[0])

    def put(
        self,
        session: Session,
        path: str,
        blob: str,
        commit: str | None,
        text_links: Iterable[str],
        *,
        replace: bool = True,
    ) -> int:
        """Write the row of the session file at ``path`` (replacing its row unless
        ``replace`` is off: a rebuild into empty tables) and return its key."""
        skey = self.key_of(path) if replace else None
        text_links = list(text_links)
        values = (
            path,
            blob,
            commit,
            session.created.timestamp(),
            session.last_active.timestamp(),
            session.project,
            join_values(session.tags),
            join_values(session.participants),
            join_values(session.links),
            json.dumps(session.extra, ensure_ascii=False),
            session.summary.text if session.summary else None,
            join_values(text_links),
            session.created.isoformat(),
            session.last_active.isoformat(),
            len(session.interactions),
            session.language,
        )
        if skey is not None:
            self._db.execute("DELETE FROM links WHERE skey=?", (skey,))
        else:
            cursor = self._db.execute(
                "INSERT INTO sessions(session_id, path, blob, commit_sha, created, last_active,"
                " project, tags, participants, links, extra, summary_text, text_links,"
                " created_at, active_at, turns, language)"
                " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (session.id, *values),
            )
            skey = int(cursor.lastrowid or 0)
            self._put_links(skey, [*session.links, *text_links])
            return skey
        self._put_links(skey, [*session.links, *text_links])
        self._db.execute(
            "UPDATE sessions SET path=?, blob=?, commit_sha=?, created=?, last_active=?,"
            " project=?, tags=?, participants=?, links=?, extra=?, summary_text=?,"
            " text_links=?, created_at=?, active_at=?, turns=?, language=? WHERE skey=?",
            (*values, skey),
        )
        return skey

    def _put_links(self, skey: int, targets: Sequence[str]) -> None:
        self._db.executemany(
            "INSERT INTO links(skey, pos, target) VALUES(?,?,?)",
            [(skey, pos, target) for pos, target in enumerate(targets) if target],
        )

    def remove(self, skey: int) -> None:
        """Delete a session file's row (its documents are the caller's)."""
        self._db.execute("DELETE FROM sessions WHERE skey=?", (skey,))
        self._db.execute("DELETE FROM links WHERE skey=?", (skey,))

    # --- reading ----------------------------------------------------------------------

    def _session_row(self, r: Sequence[Any]) -> SessionRow:
        return SessionRow(
            int(r[0]),
            str(r[1]),
            str(r[2]),
            r[3] if r[3] is None else str(r[3]),
            r[4] if r[4] is None else float(r[4]),
            r[5] if r[5] is None else float(r[5]),
            r[6] if r[6] is None else str(r[6]),
            split_values(str(r[7])),
            split_values(str(r[8])),
            split_values(str(r[9])),
            json.loads(str(r[10])),
        )

    _SESSION_COLUMNS = (
        "skey, session_id, path, commit_sha, created, last_active, project, tags,"
        " participants, links, extra"
    )

    def sessions(self, skeys: Iterable[int]) -> dict[int, SessionRow]:
        """Session rows by session key (cached until the next write)."""
        out: dict[int, SessionRow] = {}
        with self._lock:
            stamp = (self._file.generation, self._file.get_meta("doc_epoch"))
            if self._session_cache[0] != stamp:
                self._session_cache = (stamp, {})
            cache = self._session_cache[1]
            keys = []
            for skey in dict.fromkeys(skeys):
                found = cache.get(skey)
                if found is None:
                    keys.append(skey)
                else:
                    out[skey] = found
            if len(cache) > 50_000:
                cache.clear()
            for at in range(0, len(keys), 500):
                chunk = keys[at : at + 500]
                marks = ",".join("?" * len(chunk))
                for r in self._db.execute(
                    f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE skey IN ({marks})", chunk
                ):
                    row = self._session_row(r)
                    out[row.skey] = cache[row.skey] = row
        return out

    def sessions_by_id(self, session_id: str) -> list[SessionRow]:
        """The rows of one session (its file, and its archive part if it has one)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE session_id=? ORDER BY skey",
                (session_id,),
            ).fetchall()
        return [self._session_row(r) for r in rows]

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
        where, args = _labels(tags, participants, project)
        if session_ids:
            where.append(f"session_id IN ({','.join('?' * len(session_ids))})")
            args.extend(session_ids)
        if active_since is not None:
            where.append("last_active >= ?")
            args.append(active_since)
        if created_until is not None:
            where.append("created <= ?")
            args.append(created_until)
        sql = "SELECT skey FROM sessions" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock:
            return {int(r[0]) for r in self._db.execute(sql, args)}

    def indexed_blobs(self) -> dict[str, tuple[str, str]]:
        """path -> (session id, blob id) of every indexed session."""
        with self._lock:
            return {
                str(p): (str(s), str(b))
                for s, p, b in self._db.execute("SELECT session_id, path, blob FROM sessions")
            }

    # --- browsing: pages of sessions, and the links between them -----------------------

    def browse(
        self, wanted: SessionRowFilter, *, offset: int = 0, limit: int = 50
    ) -> tuple[int, list[SessionRow]]:
        """How many session files match ``wanted`` (the main files: an archive part is a
        second row of its session), and the rows of one page of them, most recently active
        first (then by id, descending)."""
        condition, args = wanted.where()
        with self._lock:
            total = int(
                self._db.execute("SELECT COUNT(*) FROM sessions" + condition, args).fetchone()[0]
            )
            rows = self._db.execute(
                f"SELECT {self._SESSION_COLUMNS} FROM sessions{condition}"
                " ORDER BY last_active DESC, session_id DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
        return total, [self._session_row(r) for r in rows]

    def _rows_stamp(self, wanted: SessionRowFilter) -> tuple[object, ...]:
        """What a listing's answer stays the same for: the same question of the same rows
        (another process's catch-up moves the commit)."""
        meta = (self._file.get_meta("doc_epoch"), self._file.get_meta("commit"))
        return (self._file.generation, meta, wanted)

    def _part_rows(self, columns: str, folder: str) -> list[Any]:
        """These columns of the rows of every part file of a huge session under ``folder``."""
        return self._db.execute(
            f"SELECT {columns} FROM sessions WHERE substr(path, 1, ?) = ? AND instr(path, ?) > 0",
            (len(folder), folder, PART_MARK),
        ).fetchall()

    def listed(self, wanted: SessionRowFilter) -> dict[str, tuple[str, SessionInfo]]:
        """Path -> (blob id, listing) of the session files that match ``wanted``, and of
        every part file of a huge session
        there (a part's head does not say the session's labels)."""
        condition, args = wanted.where()
        out: dict[str, tuple[str, SessionInfo]] = {}
        known = self._infos  # a listing is fixed by the file's content: kept by blob
        with self._lock:
            stamp = self._rows_stamp(wanted)
            if self._last_listed[0] == stamp:
                return dict(self._last_listed[1])

            def select(columns: str) -> list[Any]:
                # in the listing's order: sorting it again costs one pass
                return self._db.execute(
                    f"SELECT {columns} FROM sessions{condition}"
                    " ORDER BY last_active DESC, session_id DESC",
                    args,
                ).fetchall() + self._part_rows(columns, wanted.folder)

            if not known:  # nothing known yet (a new process): every listing in one read
                with collector_paused():
                    rows = select(self._INFO_COLUMNS)
                    for r, listing in zip(rows, _infos(r[2:] for r in rows), strict=True):
                        known[r[1]] = listing
                        out[r[0]] = (r[1], listing)
                self._last_listed = (stamp, out)
                return dict(out)
            missing = []
            for path, blob in select("path, blob"):
                info = known.get(blob)
                if info is None:
                    missing.append(path)
                else:
                    out[path] = (blob, info)
            if len(known) + len(missing) > 200_000:
                known.clear()
            for at in range(0, len(missing), 500):
                chunk = missing[at : at + 500]
                marks = ",".join("?" * len(chunk))
                for r in self._db.execute(
                    f"SELECT {self._INFO_COLUMNS} FROM sessions WHERE path IN ({marks})", chunk
                ):
                    out[str(r[0])] = (str(r[1]), _info(r))
                    known[str(r[1])] = out[str(r[0])][1]
            self._last_listed = (stamp, out)
        return dict(out)

    _INFO_COLUMNS = "path, blob, " + _LISTING_COLUMNS

    def infos(self, wanted: SessionRowFilter) -> tuple[list[SessionInfo], dict[str, int]]:
        """The listings of the session files that match ``wanted``, most recently active
        first (then by id, descending), and path -> turns of every part file of a huge
        session there."""
        condition, args = wanted.where()
        known = self._infos
        with self._lock:
            stamp = self._rows_stamp(wanted)
            if self._last_infos[0] == stamp:
                return list(self._last_infos[1]), dict(self._last_infos[2])
            # sorted here: a sort in SQL copies every column of every row once more
            order = itemgetter(1, 2)
            missing: list[str] = []
            if known:
                rows = self._db.execute(
                    f"SELECT blob, ifnull(last_active, 0), session_id FROM sessions{condition}",
                    args,
                ).fetchall()
                missing = [blob for blob, _a, _s in rows if blob not in known]
                if len(known) + len(missing) > 200_000:
                    known.clear()
            whole = wanted.whole
            if not known and whole and (kept := self._kept_listing(wanted.folder)) is not None:
                found, parts = kept  # a new process, and the rows as the last one read them
                self._last_infos = (stamp, found, parts)
                return list(found), dict(parts)
            made = _listing_stamp(self._file)  # read first: the rows are as new, or newer
            read_all = not known
            if read_all:  # a new process: every listing in one read of the rows
                with collector_paused():
                    rows = self._db.execute(
                        f"SELECT blob, ifnull(last_active, 0), {_LISTING_COLUMNS}"
                        f" FROM sessions{condition}",
                        args,
                    ).fetchall()
                    rows.sort(key=order, reverse=True)
                    found = _infos(r[2:] for r in rows)
                    known.update(zip([r[0] for r in rows], found, strict=True))
            else:
                self._learn(missing)
                rows.sort(key=order, reverse=True)
                found = [known[r[0]] for r in rows]
            parts = {str(path): int(n) for path, n in self._part_rows("path, turns", wanted.folder)}
            if whole and read_all:
                self._keep_listing(wanted.folder, made, rows, parts)
            self._last_infos = (stamp, found, parts)
        return list(found), dict(parts)

    # the listing of every session a new process reads whole: kept as one value, it loads
    # in a third of the time of reading the rows again
    def _kept_listing(self, folder: str) -> tuple[list[SessionInfo], dict[str, int]] | None:
        """The kept listing of every session under ``folder`` (with the part files' turns)
        if no write came after it, also learning its listings by blob; None otherwise."""
        kept = self._file.kept(_LISTING + folder)
        if kept is None or kept[0] != _listing_stamp(self._file):
            return None
        try:
            with collector_paused():
                rows, parts = marshal.loads(kept[1])
                if not isinstance(parts, dict):
                    return None
                found = _infos(r[2:] for r in rows)
                self._infos.update(zip([r[0] for r in rows], found, strict=True))
        except (ValueError, TypeError, EOFError, IndexError):  # damaged: read the rows
            return None
        return found, parts

    def _keep_listing(
        self,
        folder: str,
        stamp: str,
        rows: list[tuple[Any, ...]],
        parts: dict[str, int],
    ) -> None:
        """Keep the listing just read (rows of blob, last active and the listing's
        columns, in the listing's order) for the next process."""
        with collector_paused():
            data = marshal.dumps((rows, parts))
        self._file.keep(_LISTING + folder, stamp, data)

    def _learn(self, blobs: Sequence[str]) -> None:
        """Read the listings of these blobs into the cache of listings by blob."""
        known = self._infos
        for at in range(0, len(blobs), 500):
            chunk = list(blobs[at : at + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT {_LISTING_COLUMNS}, blob FROM sessions WHERE blob IN ({marks})", chunk
            ).fetchall()
            known.update(zip([r[11] for r in rows], _infos(rows), strict=True))

    def turn_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """How many interactions each of these sessions holds (its file and its archive
        part together; a turn in both counts once)."""
        out: dict[str, int] = {}
        with self._lock:
            for at in range(0, len(session_ids), 500):
                chunk = list(session_ids[at : at + 500])
                marks = ",".join("?" * len(chunk))
                for sid, count in self._db.execute(
                    "SELECT s.session_id, COUNT(DISTINCT d.iid) FROM sessions s"
                    " JOIN docs d ON d.skey = s.skey AND d.kind = 0"
                    f" WHERE s.session_id IN ({marks}) GROUP BY s.session_id",
                    chunk,
                ):
                    out[str(sid)] = int(count)
        return out

    def rows_in(self, folder: str, session_ids: Sequence[str]) -> dict[str, SessionRow]:
        """The rows of these sessions' files under ``folder`` (their main files)."""
        out: dict[str, SessionRow] = {}
        with self._lock:
            for at in range(0, len(session_ids), 500):
                chunk = list(session_ids[at : at + 500])
                marks = ",".join("?" * len(chunk))
                for r in self._db.execute(
                    f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE session_id IN"
                    f" ({marks}) AND substr(path, 1, ?) = ?",
                    [*chunk, len(folder), folder],
                ):
                    row = self._session_row(r)
                    out[row.session_id] = row
        return out

    def summary_texts(self, skeys: Sequence[int], chars: int) -> dict[int, str]:
        """The first ``chars`` characters of the summary of each of these session rows
        that has one."""
        out: dict[int, str] = {}
        with self._lock:
            for at in range(0, len(skeys), 500):
                chunk = list(skeys[at : at + 500])
                marks = ",".join("?" * len(chunk))
                for skey, text in self._db.execute(
                    f"SELECT skey, substr(summary_text, 1, ?) FROM sessions WHERE skey IN"
                    f" ({marks}) AND summary_text IS NOT NULL",
                    [chars, *chunk],
                ):
                    out[int(skey)] = str(text)
        return out

    def session_links(self, folder: str) -> list[tuple[str, tuple[str, ...]]]:
        """(session id, links) of every session file under ``folder`` that links to
        another session: its metadata ``links``, then the ``[[id]]`` links of its text
        (a session's archive part is a second row of that session)."""
        out: dict[int, tuple[str, list[str]]] = {}
        with self._lock:
            rows = self._db.execute(
                "SELECT l.skey, s.session_id, l.target FROM links l JOIN sessions s"
                " ON s.skey = l.skey WHERE substr(s.path, 1, ?) = ? ORDER BY l.skey, l.pos",
                (len(folder), folder),
            ).fetchall()
        for skey, sid, target in rows:
            out.setdefault(int(skey), (str(sid), []))[1].append(str(target))
        return [(sid, tuple(targets)) for sid, targets in out.values()]

    def present(self, session_ids: Sequence[str]) -> set[str]:
        """Which of these session ids the index holds."""
        out: set[str] = set()
        with self._lock:
            for at in range(0, len(session_ids), 500):
                chunk = list(session_ids[at : at + 500])
                marks = ",".join("?" * len(chunk))
                out.update(
                    str(r[0])
                    for r in self._db.execute(
                        f"SELECT DISTINCT session_id FROM sessions WHERE session_id IN ({marks})",
                        chunk,
                    )
                )
        return out

    def links_from(self, session_ids: Sequence[str]) -> dict[str, list[str]]:
        """The sessions each of these sessions links to (metadata, then text; each once)."""
        out: dict[str, dict[str, None]] = {}
        with self._lock:
            for at in range(0, len(session_ids), 500):
                chunk = list(session_ids[at : at + 500])
                marks = ",".join("?" * len(chunk))
                for sid, meta, text in self._db.execute(
                    f"SELECT session_id, links, text_links FROM sessions WHERE session_id IN"
                    f" ({marks}) ORDER BY skey",
                    chunk,
                ):
                    found = out.setdefault(str(sid), {})
                    found.update(dict.fromkeys(split_values(str(meta))))
                    found.update(dict.fromkeys(split_values(str(text))))
        return {sid: list(targets) for sid, targets in out.items()}

    def links_to(self, session_ids: Sequence[str]) -> dict[str, list[str]]:
        """The sessions that link to each of these sessions (their metadata or their text),
        by session id, from the links table's index on the target."""
        wanted = list(dict.fromkeys(session_ids))
        out: dict[str, dict[str, None]] = {}
        for at in range(0, len(wanted), 500):
            chunk = wanted[at : at + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._db.execute(
                    "SELECT l.target, s.session_id FROM links l JOIN sessions s"
                    f" ON s.skey = l.skey WHERE l.target IN ({marks}) ORDER BY l.skey",
                    chunk,
                ).fetchall()
            for target, source in rows:
                out.setdefault(str(target), {})[str(source)] = None
        return {sid: list(sources) for sid, sources in out.items()}
