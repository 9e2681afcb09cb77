"""``SessionStore``: the store's state and the one save path the features share.

The store owns the state (repository, namespace, agent, the parsed session cache), reading
sessions at a commit, the one save path (``_modify`` -> ``_apply``: hand-edit adoption, the
guard, portable names, render, one commit with trailers) and batches. The feature objects
(history, search, summaries, facts, sync) are given the store by ``gitmem.manager``, which
also fills the store's ``before_save`` and ``after_save`` lists in the order they run. The part
files a huge session continues in are the store's own part, ``parts``
(:class:`~gitmem.sessionparts.SessionParts`).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gitmem.errors import ParseError, SessionNotFound, ValidationError
from gitmem.format.parse import parse_bytes
from gitmem.format.paths import (
    PART_MARK,
    archive_path,
    id_from_path,
    part_of,
    session_dir,
    session_path,
)
from gitmem.format.render import render
from gitmem.guard.inputs import as_message, fresh_interaction_id, validated, with_metadata
from gitmem.guard.methods import Guard
from gitmem.guard.names import NewNames, agent_identity
from gitmem.models import (
    BatchResult,
    Interaction,
    Language,
    Message,
    Session,
    SessionInfo,
    as_when,
    now,
)
from gitmem.sessionparts import SessionParts, joined
from gitmem.store.layout import session_files
from gitmem.store.objects import object_id
from gitmem.store.repository import Repository
from gitmem.store.transaction import Identity, Transaction
from gitmem.text import one_line


@dataclass
class _Batch:
    txn: Transaction
    message: str
    # flat: files go into the object database as they are written and no session is kept
    # (see SessionStore.batch)
    flat: bool = False
    sessions: dict[str, Session] = field(default_factory=dict)
    touched: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    commit: str | None = None
    created: dict[str, str] = field(default_factory=dict)  # folded file name -> path
    # every change made, to make again if the branch moves under the batch
    done: list[tuple[str, str, Callable[[Session | None], Session | None], str]] = field(
        default_factory=list
    )


# from this many files not cached on, a listing streams their blobs
_STREAM_FROM = 64


@dataclass(frozen=True)
class SessionFilter:
    """The filters of ``list_sessions``: a session is listed when it passes all of them."""

    tags: frozenset[str] = frozenset()
    participant: str | None = None
    project: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    metadata: Mapping[str, str] | None = None

    def passes(self, session: Session | SessionInfo) -> bool:
        if self.tags and not self.tags <= set(session.tags):
            return False
        if self.participant and self.participant not in session.participants:
            return False
        if self.project and session.project != self.project:
            return False
        if self.since and session.last_active < self.since:
            return False
        if self.until and session.last_active > self.until:
            return False
        extra = session.extra
        return not self.metadata or all(extra.get(k) == v for k, v in self.metadata.items())


def _filter(
    tags: Iterable[str],
    participant: str | None,
    project: str | None,
    since: datetime | str | None,
    until: datetime | str | None,
    metadata: Mapping[str, str] | None,
) -> SessionFilter:
    return SessionFilter(
        frozenset(tags),
        participant,
        project,
        as_when(since, "since"),
        as_when(until, "until"),
        metadata,
    )


class SessionStore:
    """The sessions of one store (and namespace): reading them at a commit and saving.

    Callers use :class:`~gitmem.manager.MemoryManager`, which builds one store and the
    feature objects over it.
    """

    def __init__(
        self,
        repo: Repository,
        *,
        agent: str = "gitmem",
        model: str | None = None,
        via: str | None = None,
        language: Language = "en",
        namespace: str | None = None,
    ) -> None:
        """The sessions of the open ``repo``; the arguments are those of
        :class:`~gitmem.manager.MemoryManager`, which opens the repository."""
        self.agent = agent
        self.model = model
        self.via = via
        self.language: Language = language
        self.repo = repo
        self.namespace = namespace
        self._git_config: list[tuple[str, str]] | None = None
        self._config_lock = threading.Lock()
        self.guard = Guard(repo, namespace, self.git_config)  # secrets in messages, sizes
        self.path = repo.root
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.local = threading.local()
        self._names = NewNames(repo, namespace)
        # what a save runs before committing (raise to stop it) and after (never raises),
        # in order: the composition root fills them
        self.before_save: list[Callable[[], None]] = []
        self.after_save: list[Callable[[str], None]] = []
        # path -> (blob id, listing) of HEAD's session files that may pass a listing's
        # filter (a few more is fine, one fewer is not), and of every part file of a huge
        # session, from something faster than reading every file: the composition root
        # gives the search index's session rows; None reads the tree
        self.listing: Callable[[SessionFilter], dict[str, tuple[str, SessionInfo]]] | None = None
        # the listings (most recently active first) of HEAD's sessions that may pass a
        # filter, and path -> turns of every part file, from the same rows; None: from
        # ``listing``
        self.info_listing: (
            Callable[[SessionFilter], tuple[list[SessionInfo], dict[str, int]]] | None
        ) = None
        # a huge session's part files: found, their turn ids kept, new ones rolled over
        self.parts = SessionParts(
            repo, namespace, parse_blob=self.parse_blob, cached=self.cached_session
        )

    def close(self) -> None:
        """Finish background housekeeping and release git helper processes."""
        self.repo.close()

    def git_config(self, section: str) -> list[tuple[str, str]]:
        """The store's ``<section>.*`` git settings (``section`` under ``gitmem``), from one
        read of every ``gitmem.*`` key, made the first time any feature asks."""
        with self._config_lock:
            if self._git_config is None:
                self._git_config = self.repo.config_section("gitmem")
            found = self._git_config
        prefix = section.lower() + "."
        return [(key, value) for key, value in found if key.lower().startswith(prefix)]

    def acting_as(self, agent: str) -> contextlib.AbstractContextManager[None]:
        """Within the block, this thread's commits name ``agent`` (author, ``Gitmem-Agent``),
        e.g. for the MCP server's clients; a name no commit can carry raises ValidationError."""
        return self._acting(agent_identity(agent))

    @contextlib.contextmanager
    def _acting(self, identity: Identity) -> Iterator[None]:
        before = getattr(self.local, "agent", None)
        self.local.agent = identity.name
        try:
            with self.repo.acting_as(identity):
                yield
        finally:
            self.local.agent = before

    def in_batch(self) -> bool:
        """Whether this thread is inside ``batch()`` (its writes wait for the batch's commit)."""
        return getattr(self.local, "batch", None) is not None

    def no_batch(self, what: str) -> None:
        if self.in_batch():
            raise ValidationError(f"{what} makes its own commit; call it outside mm.batch()")

    # --- reading -------------------------------------------------------------------------

    def path_of(self, session_id: str, *, archive: bool = False) -> str:
        make = archive_path if archive else session_path
        return make(session_id, self.namespace)

    def parse_blob(self, path: str, blob_id: str) -> Session:
        key = (path, blob_id)
        with self._cache_lock:
            cached = self._sessions.get(key)
            if cached is not None:
                self._sessions.move_to_end(key)
                return cached
        session = parse_bytes(self.repo.blob(blob_id), path)
        self.cache_session(path, blob_id, session)
        return session

    def parsed_blobs(self, files: Sequence[tuple[str, str]]) -> Iterator[Session]:
        """The session of each (path, blob id) that parses, cached as ``parse_blob`` caches:
        the blobs not cached come through one stream when there are many (no request and
        answer per file)."""
        with self._cache_lock:
            missing = [f for f in dict.fromkeys(files) if f not in self._sessions]
        if len(missing) < _STREAM_FROM:
            for path, blob_id in files:
                with contextlib.suppress(ParseError):
                    yield self.parse_blob(path, blob_id)
            return
        absent = set(missing)
        for path, blob_id in files:
            if (path, blob_id) not in absent:
                with contextlib.suppress(ParseError):
                    yield self.parse_blob(path, blob_id)
        stream = self.repo.stream_blobs(blob for _path, blob in missing)
        for (path, blob_id), (_blob, data) in zip(missing, stream, strict=True):
            try:
                if data is None:
                    session = self.parse_blob(path, blob_id)
                else:
                    session = parse_bytes(data, path)
                    self.cache_session(path, blob_id, session)
            except ParseError:
                continue
            yield session

    def cached_session(self, path: str, blob_id: str) -> Session | None:
        """The session of (path, blob id) if it is parsed already, else None (no parse)."""
        with self._cache_lock:
            return self._sessions.get((path, blob_id))

    def cache_session(self, path: str, blob_id: str, session: Session) -> None:
        with self._cache_lock:
            self._sessions[(path, blob_id)] = session
            while len(self._sessions) > 512:
                self._sessions.popitem(last=False)

    def head(self) -> str | None:
        """The commit the store's branch points at."""
        return self.repo.head()

    def load_memory(
        self, session_id: str, *, commit: str | None = None, include_archive: bool = False
    ) -> Session | None:
        """The session as committed at HEAD (or ``commit``), or None if there is none.

        ``include_archive`` puts back the turns summaries moved to the archive part; raises
        ParseError (``path:line``) if the committed file is broken.
        """
        path = self.path_of(session_id)
        found = self.repo.entry(path, commit)
        session = None if found is None else self.parse_blob(path, found[1])
        if session is not None:
            parts = [self.parse_blob(p, b) for p, b in self.parts.files(session_id, commit)]
            session = joined(session, parts)
        if include_archive and session is not None:
            session = self._with_archive(session, commit)
        return session

    def load_archive(self, session_id: str, *, commit: str | None = None) -> Session | None:
        """The archive part of a session at HEAD (or ``commit``), or None if it has none."""
        path = self.path_of(session_id, archive=True)
        found = self.repo.entry(path, commit)
        return None if found is None else self.parse_blob(path, found[1])

    def _with_archive(self, session: Session, commit: str | None) -> Session:
        """``session`` with its archived turns put back in front (for ``load_memory``)."""
        archived = self.load_archive(session.id, commit=commit)
        if archived is None or not archived.interactions:
            return session
        ids = {t.id for t in session.interactions}
        older = [t for t in archived.interactions if t.id not in ids]
        return session.model_copy(update={"interactions": [*older, *session.interactions]})

    def session_ids(self, *, commit: str | None = None) -> list[str]:
        """Every session id in the store (this namespace), sorted."""
        files = session_files(self.repo, session_dir(self.namespace), commit)
        ids = [id_from_path(path, self.namespace) for path in files]
        return sorted(i for i in ids if i is not None)

    def list_sessions(
        self,
        *,
        tags: Iterable[str] = (),
        participant: str | None = None,
        project: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        metadata: Mapping[str, str] | None = None,
        commit: str | None = None,
    ) -> list[Session]:
        """Sessions matching every filter given, most recently active first.

        ``tags`` must all be present; ``since``/``until`` (datetime, naive = UTC, or ISO date)
        bound the last-active time; ``metadata`` matches custom keys exactly. Files that do
        not parse are left out (``check()`` reports them). Every session returned is parsed:
        ``list_session_infos`` lists the same sessions without their turns, much faster.
        """
        wanted = _filter(tags, participant, project, since, until, metadata)
        if commit is None and self.listing is not None:
            rows = self.listing(wanted)
            # a part's head does not say the session's labels: parts are kept, then joined
            files = {
                p: blob for p, (blob, info) in rows.items() if PART_MARK in p or wanted.passes(info)
            }
        else:
            files = session_files(self.repo, session_dir(self.namespace), commit)
        parts: dict[str, list[tuple[int, str, str]]] = {}  # a huge session's part files
        for path, blob in files.items():
            part = part_of(path, self.namespace) if PART_MARK in path else None
            if part is not None:
                parts.setdefault(part[0], []).append((part[1], path, blob))
        files = {p: b for p, b in files.items() if id_from_path(p, self.namespace) is not None}
        found = [
            joined(session, [self.parse_blob(p, b) for _n, p, b in sorted(parts[session.id])])
            if session.id in parts
            else session
            for session in self.parsed_blobs(list(files.items()))
            if wanted.passes(session)
        ]
        found.sort(key=lambda s: (s.last_active, s.id), reverse=True)
        return found

    def list_session_infos(
        self,
        *,
        tags: Iterable[str] = (),
        participant: str | None = None,
        project: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        metadata: Mapping[str, str] | None = None,
        commit: str | None = None,
    ) -> list[SessionInfo]:
        """What ``list_sessions`` lists, each session without its turns (their count, its
        metadata and summary text): at HEAD read from the search index's session rows
        (caught up with the store first), no file parsed. The filters and the order are
        ``list_sessions``'; ``commit`` reads that commit's files instead.
        """
        if commit is not None or self.listing is None or self.info_listing is None:
            return [
                SessionInfo.of(s)
                for s in self.list_sessions(
                    tags=tags,
                    participant=participant,
                    project=project,
                    since=since,
                    until=until,
                    metadata=metadata,
                    commit=commit,
                )
            ]
        wanted = _filter(tags, participant, project, since, until, metadata)
        infos, parts = self.info_listing(wanted)
        if wanted != SessionFilter():
            infos = [info for info in infos if wanted.passes(info)]
        part_turns: dict[str, int] = {}  # session id -> the turns its part files hold
        for path, turns in parts.items():
            if (part := part_of(path, self.namespace)) is not None:
                part_turns[part[0]] = part_turns.get(part[0], 0) + turns
        if not part_turns:
            return infos  # in the listing's order already
        return [
            info._replace(interactions=info.interactions + part_turns[info.id])
            if info.id in part_turns
            else info
            for info in infos
        ]

    # --- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(
        self,
        message: str = "Batch of memory changes",
        *,
        trailers: Mapping[str, str] | None = None,
        flat: bool = False,
    ) -> Iterator[BatchResult]:
        """Group every write inside the block into one commit (e.g. an import), with
        ``trailers`` added to gitmem's own (e.g. ``Gitmem-Source``).

        The write lock is held for the whole block; an exception drops all its changes.
        ``flat``: each file written goes into the object database at once and the batch
        keeps only its name, so memory stays flat however much it writes (an import); a
        person's commit to the same files meanwhile then raises BranchMoved when the block
        ends (nothing written) for the caller to run it again, where a batch that keeps its
        changes makes them again on top of that commit.
        """
        if self.in_batch():
            raise ValidationError("batches do not nest")
        result = BatchResult()
        with self.repo.transaction(f"the batch {message!r}") as txn:
            current = _Batch(txn, message, flat)
            self.local.batch = current
            try:
                yield result
            finally:
                self.local.batch = None

            def commit() -> None:
                op = "batch" if len(set(current.ops)) != 1 else current.ops[0]
                base, names = txn.head(), self._names.pending(txn)
                all_trailers = {**self.trailers(op, current.touched), **(trailers or {})}
                result.commit = txn.commit(message, trailers=all_trailers)
                self._names.advance(base, result.commit, names)

            if flat:
                commit()
            else:
                # a person's commit to the same files: the changes are made again on top of it
                txn.rebuilding(commit, again=lambda: self._replay(current))

    def _replay(self, batch: _Batch) -> None:
        """Make a batch's changes again from the branch's new tip (the transaction has
        restarted there)."""
        done, batch.done = batch.done, []
        batch.sessions, batch.touched, batch.ops = {}, [], []
        batch.created = {}
        self.local.batch = batch  # hand edits go into the batch's commit, as the first time
        try:
            for session_id, path, change, op in done:
                self._apply(batch.txn, batch, session_id, path, change, op)
        finally:
            self.local.batch = None

    def trailers(self, op: str, sessions: Sequence[str], **extra: str) -> dict[str, str]:
        trailers = {"Gitmem-Op": op}
        unique = list(dict.fromkeys(sessions))
        if len(unique) <= 20:
            for sid in unique:
                trailers.setdefault("Gitmem-Session", sid)
            if len(unique) > 1:
                trailers["Gitmem-Session"] = ", ".join(unique)
        else:
            trailers["Gitmem-Sessions"] = str(len(unique))
        trailers["Gitmem-Agent"] = getattr(self.local, "agent", None) or self.agent
        if self.model:
            trailers["Gitmem-Model"] = self.model
        if self.via:
            trailers["Gitmem-Via"] = self.via
        for key, value in extra.items():
            trailers["Gitmem-" + key.replace("_", "-").title()] = value
        return trailers

    def _modify(
        self,
        session_id: str,
        change: Callable[[Session | None], Session | None],
        *,
        op: str,
        subject: str,
        trailers: Mapping[str, str] | None = None,
        body: str = "",
        hot: bool = False,
    ) -> str | None:
        """Read-modify-write one session under the lock; one commit unless in a batch
        (``hot``: see :meth:`_apply`)."""
        batch: _Batch | None = getattr(self.local, "batch", None)
        path = self.path_of(session_id)
        if batch is not None:
            self._apply(batch.txn, batch, session_id, path, change, op, hot=hot)
            return None
        with self.repo.transaction() as txn:

            def write() -> str | None:
                self._apply(txn, None, session_id, path, change, op, hot=hot)
                all_trailers = self.trailers(op, [session_id])
                all_trailers.update(trailers or {})
                base, names = txn.head(), self._names.pending(txn)
                sha = txn.commit(subject, body=body, trailers=all_trailers)
                self._names.advance(base, sha, names)
                return sha

            # a person committed to this file meanwhile: the change is made again on top
            return txn.rebuilding(write)

    def change_session(
        self,
        session_id: str,
        change: Callable[[Session | None], Session | None],
        *,
        op: str,
        subject: str,
    ) -> str | None:
        """Read-modify-write one session as one commit (or into the open batch), for
        importers that merge what they bring with what is stored.

        ``change`` gets the session as committed now (None if there is none; a hand edit is
        recorded first) and returns the new session, the same object to write nothing, or
        None to delete it. What it returns is guarded like a save (sizes, secrets). ``op``
        goes into the ``Gitmem-Op`` trailer. Returns the commit id (None in a batch, or
        when nothing changed).
        """
        return self._modify(session_id, change, op=op, subject=subject)

    def _apply(
        self,
        txn: Transaction,
        batch: _Batch | None,
        session_id: str,
        path: str,
        change: Callable[[Session | None], Session | None],
        op: str,
        *,
        hot: bool = False,
    ) -> None:
        """Make one change. ``hot``: ``change`` only appends turns, so it is given the
        session's file without its parts (a save then costs the same at any size)."""
        current = self._current(txn, batch, path)
        flat = batch is not None and batch.flat
        write = txn.write_now if flat else txn.write  # flat: into the object database now
        parts, frozen = self._parts_for(txn, session_id, current, hot)
        before = current
        if parts and current is not None:
            before = joined(current, [part for _p, part in parts])
        updated = self.guard.screen_session(txn, before, change(before))  # sizes, secrets
        if before is None and updated is not None:
            self._names.check(txn, batch.created if batch else None, session_id, path)
        if updated is None:
            txn.delete(path)
            for part in frozen[0]:
                txn.delete(part)
        elif updated is not before:  # the change kept the session as it is: write nothing
            if updated.id != session_id:
                raise ValidationError(f"session id {updated.id!r} != {session_id!r}")
            if hot and current is not None:
                self.parts.check_new_ids(current, updated, frozen[1])
                kept = frozen[0]
            else:
                updated, kept = self.parts.unfrozen(txn, parts, updated)
            updated = self.parts.roll_over(txn, session_id, kept, updated, flat)
            data = render(updated, remember=not flat).encode("utf-8")
            write(path, data)
            if not flat:
                # the next save to this session starts from here without parsing it again
                self.cache_session(path, object_id("blob", data), updated)
        if batch is not None:
            batch.touched.append(session_id)
            batch.ops.append(op)
            if not flat:  # a flat batch keeps no session: it reads its files again
                if updated is not None:
                    batch.sessions[path] = updated
                batch.done.append((session_id, path, change, op))

    def _current(self, txn: Transaction, batch: _Batch | None, path: str) -> Session | None:
        """The session's file as the change starts from: the batch's, a hand edit, HEAD's."""
        current = batch.sessions.get(path) if batch is not None else None
        if current is None and batch is not None and batch.flat and path in txn.pending:
            data = txn.read(path)
            return None if data is None else parse_bytes(data, path)
        if current is None:
            current = self.adopt_hand_edit(txn, path)
        if current is None:
            found = self.repo.entry(path, txn.head())
            current = self.parse_blob(path, found[1]) if found else None
        return current

    def _parts_for(
        self, txn: Transaction, session_id: str, current: Session | None, hot: bool
    ) -> tuple[list[tuple[str, Session]], tuple[list[str], frozenset[str]]]:
        """The parts a change starts from, parsed (none for a save: it only appends), and
        their paths with, for a save, the ids of their turns."""
        if current is None:
            return [], ([], frozenset())
        if hot:  # only the parts' turn ids: no part is parsed
            return [], self.parts.frozen_ids(txn, session_id)
        self._adopt_part_edits(txn, session_id)  # this change may rewrite any part
        parts = self.parts.in_transaction(txn, session_id)
        return parts, ([path for path, _s in parts], frozenset())

    def _adopt_part_edits(self, txn: Transaction, session_id: str) -> None:
        """Record uncommitted hand edits of a session's parts first (a save that only
        appends never writes an existing part, so it leaves them for a later change)."""
        for part, _blob in self.parts.files(session_id, txn.head()):
            if part in txn.pending:
                continue
            edited = self.adopt_hand_edit(txn, part)
            if edited is not None and self.in_batch():
                txn.write(part, render(edited).encode("utf-8"))

    def adopt_hand_edit(self, txn: Transaction, path: str) -> Session | None:
        """Commit an uncommitted hand edit of ``path`` first, so a save never overwrites it.

        A hand edit that does not parse raises ParseError and nothing is written.
        """
        edited = txn.hand_edit(path)
        if edited is None:
            return None
        session = parse_bytes(edited, path)
        session, edited = self.guard.screen_hand_edit(txn, session, edited)
        if not self.in_batch():
            txn.write(path, edited)
            txn.commit(
                f"Record hand edit of {path}",
                trailers={"Gitmem-Op": "edit", "Gitmem-Session": session.id},
                identity=self.hand_identity(),
                body="A person edited this file outside gitmem; recorded before the next save.",
            )
        return session

    def hand_identity(self) -> Identity:
        name, email = self.repo.configured_identity()
        return Identity(name or "hand edit", email or "hand-edit@gitmem.local")

    def _new_session(self, session_id: str, when: datetime) -> Session:
        return validated(
            lambda: Session(id=session_id, created=when, last_active=when, language=self.language),
            f"session {session_id!r}",
        )

    def save_messages(
        self,
        session_id: str,
        messages: Sequence[Message | Mapping[str, str]],
        timestamp: datetime | str | None = None,
        interaction_id: str | None = None,
        *,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Append one interaction with any speakers; returns the commit id.

        ``messages`` are ``Message`` objects or ``{"speaker"|"role": ..., "content": ...}``
        dicts. Importers pass their own ``interaction_id`` (it must be new in the session).
        ``timestamp`` is a ``datetime`` (naive means UTC) or an ISO date-time string; default now.
        Returns None inside a batch (the batch's commit is on the batch result).
        """
        when = as_when(timestamp, "timestamp") or now()
        parsed = [as_message(m, at) for at, m in enumerate(messages)]
        if not parsed:
            raise ValidationError(f"session {session_id!r}: an interaction needs a message")
        if not any(m.content.strip() for m in parsed):
            raise ValidationError(
                f"session {session_id!r}: every message of this turn is empty; nothing saved"
            )
        tag_list = list(dict.fromkeys(tags))
        # filled in once the id is known; the audit log reads which turn a commit added
        trailers: dict[str, str] = {}

        def change(current: Session | None) -> Session:
            session = current or self._new_session(session_id, when)
            taken = {i.id for i in session.interactions}
            iid = fresh_interaction_id(taken) if interaction_id is None else interaction_id
            trailers["Gitmem-Interaction"] = iid
            if iid in taken:
                raise ValidationError(
                    f"session {session_id!r} already has an interaction with id {iid!r}"
                )
            turn = validated(
                lambda: Interaction(id=iid, timestamp=when, messages=parsed),
                f"session {session_id!r} interaction {iid!r}",
            )
            speakers = [m.speaker for m in parsed]
            update: dict[str, Any] = {
                "interactions": [*session.interactions, turn],
                "last_active": max(session.last_active, turn.timestamp),
                "participants": list(dict.fromkeys([*session.participants, *speakers])),
                "tags": list(dict.fromkeys([*session.tags, *tag_list])),
            }
            return with_metadata(session, update, metadata)

        first = one_line(self.guard.safe_text(parsed[0].content), 48)
        for check in self.before_save:  # e.g. a bad gitmem.summary.* setting stops the save
            check()
        sha = self._modify(
            session_id,
            change,
            op="save",
            trailers=trailers,
            hot=True,
            subject=f"Save turn in {one_line(session_id, 40)}: {first}"
            if first
            else f"Save turn in {one_line(session_id, 40)}",
        )
        if sha is not None:
            for follow_up in self.after_save:  # e.g. summary triggers; never raise
                follow_up(session_id)
        return sha

    def save_interaction(
        self,
        session_id: str,
        user: str,
        assistant: str,
        timestamp: datetime | str | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        *,
        interaction_id: str | None = None,
    ) -> str | None:
        """Append a user/assistant exchange to a session as one commit; returns its id.

        ``timestamp``: a ``datetime`` (naive means UTC) or an ISO date-time string; default now.
        """
        user_label, assistant_label = (
            ("用户", "助手") if self.language == "zh" else ("User", "Assistant")
        )
        return self.save_messages(
            session_id,
            [
                {"speaker": user_label, "content": user},
                {"speaker": assistant_label, "content": assistant},
            ],
            timestamp,
            interaction_id,
            tags=tags,
            metadata=metadata,
        )

    def update_metadata(
        self,
        session_id: str,
        *,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Change tags or metadata keys (``None`` removes a key) as one commit."""
        removed = set(remove_tags)
        added = list(add_tags)

        def change(current: Session | None) -> Session:
            if current is None:
                raise SessionNotFound(f"no session {session_id!r} in {self.path}")
            tags = [t for t in dict.fromkeys([*current.tags, *added]) if t not in removed]
            return with_metadata(current, {"tags": tags}, metadata)

        return self._modify(
            session_id,
            change,
            op="metadata",
            subject=f"Update metadata of {one_line(session_id, 50)}",
        )

    def put_session(self, session: Session, *, op: str = "import", subject: str = "") -> str | None:
        """Write a whole session as given (importers, rollback); one commit unless batched."""
        return self._modify(
            session.id,
            lambda _current: session,
            op=op,
            subject=subject or f"Write session {one_line(session.id, 50)}",
        )

    def delete_session(self, session_id: str) -> str:
        """Remove a session's file in a new commit; it stays recoverable from history."""

        def change(current: Session | None) -> None:
            if current is None:
                raise SessionNotFound(f"no session {session_id!r} in {self.path}")
            return None

        sha = self._modify(
            session_id, change, op="delete", subject=f"Delete session {one_line(session_id, 50)}"
        )
        return sha or ""
