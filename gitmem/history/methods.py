"""The time machine: history, diff, blame, rollback, revert and read-as-of for a store.

:class:`History` is ``MemoryManager``'s part for them; undo plans are worked out in
:mod:`gitmem.history.plan` and the read-only view of ``at()`` is :mod:`gitmem.history.asof`.
Nothing here rewrites history: rollback, revert and restore are new commits made through
the repository's transaction, each with ``Gitmem-Op`` and trailers naming what it undid.
Reverts work part by part (interactions by id, the summary, metadata keys; the curated
memory file fact by fact), so later turns and facts in the same file do not block them.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from gitmem.core import SessionStore
from gitmem.errors import (
    ConflictError,
    ParseError,
    RevisionNotFound,
    SessionNotFound,
    ValidationError,
)
from gitmem.format.facts import parse_facts
from gitmem.format.paths import (
    MEMORY_DIR,
    NAMESPACES_DIR,
    archive_dir,
    archive_path,
    encode_id,
    id_from_archive_path,
    id_from_part_path,
    id_from_path,
    is_facts_path,
    part_of,
    session_dir,
    session_path,
)
from gitmem.history.diff import by_session, changed_facts, diff_sessions, status_of, unified_diff
from gitmem.history.plan import UndoPlan, plan_undo
from gitmem.history.purge import PurgeReport, Purges, PurgeTarget
from gitmem.models import BlameEntry, Diff, Revision, Session, SessionDiff, UndoResult, as_when
from gitmem.sessionparts import joined
from gitmem.store.gitlog import LogEntry
from gitmem.store.transaction import Transaction
from gitmem.text import one_line

# commits an undo never takes back: the store's creation
_NEVER_UNDONE = frozenset({"init"})

# listed one by one in a trailer up to this many; the body always lists them all
_MAX_LISTED = 20


def _last(trailers: dict[str, list[str]], key: str) -> str | None:
    values = trailers.get(key)
    return values[-1] if values else None


# blame parses the versions ahead through one blob stream, each batch as long as the walk so
# far (a walk that stops early reads few versions it skips) and at most this many: every
# batch fits the store's parse cache
_PREFETCH_MAX = 128


def _added_turn(
    entry: LogEntry,
    session_id: str,
    before: Mapping[str, str | None],
    path: str,
    alias: Mapping[str, str],
) -> str | None:
    """The part key (``i:<id>``) of the turn ``entry`` added, when it is gitmem's save of
    that one turn to the session's existing file and changed nothing else of the session
    (no archive part); else None: the version before it has to be compared."""
    turn = _last(entry.trailers, "Gitmem-Interaction")
    if (
        turn is None
        or _last(entry.trailers, "Gitmem-Op") != "save"
        or entry.trailers.get("Gitmem-Session") != [session_id]
        or before.get(path) is None
        or any(alias.get(c.path, path) != path for c in entry.files)
    ):
        return None
    return f"i:{turn}"


class History:
    """History, diff, blame, rollback and revert of one store's sessions (see the module docs)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.purges = Purges(store)

    # --- reading history -----------------------------------------------------------------

    def resolve(self, rev: str | datetime) -> str:
        """The full commit id for a sha, short sha, ``HEAD~3``, branch, datetime or ISO date.

        A date means the last commit at or before it. Raises RevisionNotFound otherwise.
        """
        return self.store.repo.resolve(rev)

    def _revision(self, entry: LogEntry, changes: dict[str, list[str]] | None = None) -> Revision:
        # gitmem's own commits name their sessions in a trailer (see _trailers); for others
        # (a person's git commit) the files the commit changed say, when they are known
        named = _last(entry.trailers, "Gitmem-Session")
        if named:
            sessions = named.split(", ")
        else:
            sessions = self._sessions_of(change.path for change in entry.files)
        return Revision.model_construct(
            sha=entry.sha,
            time=entry.time,
            author=entry.author,
            email=entry.email,
            op=_last(entry.trailers, "Gitmem-Op"),
            sessions=sessions,
            agent=_last(entry.trailers, "Gitmem-Agent"),
            model=_last(entry.trailers, "Gitmem-Model"),
            subject=entry.subject,
            message=entry.message,
            trailers=entry.trailers,
            changes=changes or {},
        )

    def _both(self, session_id: str, archive: bool = False) -> list[str]:
        """A session's file (or archive part), as the one path history follows."""
        make = archive_path if archive else session_path
        return [make(session_id, self.store.namespace)]

    def _require_history(self, session_id: str, path: str, rev: str | None = None) -> None:
        if not self.store.repo.file_log(self._both(session_id), rev):
            raise SessionNotFound(
                f"no session {session_id!r} in {self.store.path}: it has no history ({path} was "
                "never committed); `gitmem list` shows the sessions there are"
            )

    def _scope(self) -> list[str] | None:
        """The folders the store's history is read in: a namespace's own (the default one's
        when the store has others), else None, every file."""
        namespace = self.store.namespace
        if namespace is not None:
            return [f"{NAMESPACES_DIR}/{encode_id(namespace)}"]
        if self.store.repo.folder_tree(NAMESPACES_DIR) is None:
            return None
        return [session_dir(None), archive_dir(None), MEMORY_DIR]

    def _in_scope(self, path: str) -> bool:
        """Whether ``path`` is in the folders of :meth:`_scope`."""
        scope = self._scope()
        return scope is None or any(path == p or path.startswith(p + "/") for p in scope)

    def _log(
        self,
        session_id: str | None,
        *,
        op: str | None,
        agent: str | None,
        model: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        limit: int | None = None,
        commit: str | None = None,
        files: bool = False,
        trailers: Mapping[str, str] | None = None,
    ) -> list[LogEntry]:
        if limit is not None and limit < 1:
            raise ValidationError(f"limit must be a positive number, not {limit}")
        rev = self.store.repo.resolve(commit) if commit is not None else None
        low, high = as_when(since, "since"), as_when(until, "until")
        wanted = {
            key: value
            for key, value in (("Gitmem-Op", op), ("Gitmem-Agent", agent), ("Gitmem-Model", model))
            if value
        } | dict(trailers or {})
        if session_id is None:
            return self.store.repo.log(
                self._scope(),
                rev=rev,
                since=low,
                until=high,
                limit=limit,
                trailers=wanted,
                files=files,
            )
        path = self.store.path_of(session_id)
        everything = self.store.repo.file_log(self._both(session_id), rev)
        if not everything:
            self._require_history(session_id, path, rev)
        entries = [
            e
            for e in everything
            if all(value in e.trailers.get(key, ()) for key, value in wanted.items())
            and (low is None or e.time >= low)
            and (high is None or e.time <= high)
        ]
        return entries if limit is None else entries[:limit]

    def history(
        self,
        session_id: str | None = None,
        *,
        op: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        changes: bool = False,
        commit: str | None = None,
        trailers: Mapping[str, str] | None = None,
    ) -> list[Revision]:
        """The commits that changed a session (or, without one, the whole store), newest first.

        Args:
            session_id: only commits that changed this session's file.
            op: only commits with this ``Gitmem-Op`` (save, summarize, revert...).
            agent: only commits with this ``Gitmem-Agent``.
            model: only commits with this ``Gitmem-Model``.
            since: only commits made at or after this time (datetime or ISO string).
            until: only commits made at or before this time.
            limit: at most this many (the newest).
            changes: also work out which interactions, summary and metadata each commit
                changed (``Revision.changes``); this parses every version, so it is slower.
            commit: start from this revision instead of HEAD.
            trailers: only commits with each of these trailer values ({"Gitmem-Via": "web"}).

        Raises:
            SessionNotFound: the session never existed.
        """
        entries = self._log(
            session_id,
            op=op,
            agent=agent,
            model=model,
            since=since,
            until=until,
            limit=limit,
            commit=commit,
            files=changes,
            trailers=trailers,
        )
        if not changes:
            return [self._revision(e) for e in entries]
        revisions: list[Revision] = []
        for entry in entries:
            labels: dict[str, list[str]] = {}
            moved = by_session(((c.path, c.old, c.new) for c in entry.files), self.store.namespace)
            for sid, (path, old, new) in moved.items():
                if session_id in (None, sid):
                    labels[sid] = self._session_diff(sid, path, old, new, False).labels()
            if session_id is None:  # the memory file's changes, keyed by its path
                found = changed_facts(
                    entry.files, self.store.namespace, self.store.repo.blob, False
                )
                labels.update((d.path, d.labels()) for d in found)
            revisions.append(self._revision(entry, labels))
        return revisions

    def _parsed(self, path: str, blob: str | None, problems: list[str], where: str) -> Session:
        assert blob is not None
        try:
            return self.store.parse_blob(path, blob)
        except ParseError as exc:
            problems.append(f"{where} version does not parse: {exc.diagnostics[0]}")
            raise

    def _session_diff(
        self,
        session_id: str,
        path: str,
        old: str | None,
        new: str | None,
        text: bool,
        parts: tuple[list[tuple[str, str]], list[tuple[str, str]]] = ([], []),
    ) -> SessionDiff:
        """The diff of a session's file from blob ``old`` to ``new``, its ``parts`` (path,
        blob) before and after read in front of it as the one session they make."""
        problems: list[str] = []
        try:
            before = self._parsed(path, old, problems, "old") if old else None
            after = self._parsed(path, new, problems, "new") if new else None
            if before is not None:
                before = joined(before, self._part_sessions(parts[0], problems, "old"))
            if after is not None:
                after = joined(after, self._part_sessions(parts[1], problems, "new"))
            result = diff_sessions(before, after, session_id, path)
        except ParseError:
            result = SessionDiff(session_id=session_id, path=path, status=status_of(old, new))
        update: dict[str, Any] = {"problems": problems}
        if text:
            olds, news = dict(parts[0]), dict(parts[1])
            changed = [p for p in sorted({*olds, *news}) if olds.get(p) != news.get(p)]
            texts = [
                unified_diff(self._text(olds.get(p)), self._text(news.get(p)), p) for p in changed
            ]
            texts.append(unified_diff(self._text(old), self._text(new), path))
            update["unified"] = "".join(texts)
        return result.model_copy(update=update)

    def _part_sessions(
        self, parts: list[tuple[str, str]], problems: list[str], where: str
    ) -> list[Session]:
        return [self._parsed(path, blob, problems, f"{where} {path}") for path, blob in parts]

    def _session_diff_at(
        self, session_id: str, a_sha: str | None, b_sha: str, text: bool
    ) -> SessionDiff | None:
        """How one session (its file and parts) differs between two commits, or None."""
        path = self.store.path_of(session_id)
        old = self.store.repo.entry(path, a_sha) if a_sha else None
        new = self.store.repo.entry(path, b_sha)
        parts = (
            self.store.parts.files(session_id, a_sha) if a_sha else [],
            self.store.parts.files(session_id, b_sha),
        )
        if old is None and new is None:
            self._require_history(session_id, path)
            return None
        if (old and old[1]) == (new and new[1]) and parts[0] == parts[1]:
            return None
        return self._session_diff(
            session_id, path, old[1] if old else None, new[1] if new else None, text, parts
        )

    def _text(self, blob: str | None) -> str | None:
        if blob is None:
            return None
        return self.store.repo.blob(blob).decode("utf-8", "replace")

    def diff(
        self,
        session_id: str | None = None,
        a: str | datetime | None = None,
        b: str | datetime | None = None,
        *,
        text: bool = True,
    ) -> Diff:
        """How a session (or, without one, every session) differs between revisions a and b.

        ``b`` defaults to HEAD and ``a`` to ``b``'s parent. Each changed session comes with
        a unified diff of its Markdown (``text=False`` skips it) and a structured diff:
        interactions added / removed / changed by id, metadata keys, the old and new summary;
        without a session, the memory file's facts added / removed / changed (``Diff.facts``).
        """
        b_sha = self.store.repo.resolve(b) if b is not None else self.store.repo.head()
        if b_sha is None:
            raise RevisionNotFound(f"{self.store.path}: the store has no commits yet")
        if a is not None:
            a_sha: str | None = self.store.repo.resolve(a)
        else:
            parents = self.store.repo.parents(b_sha)
            a_sha = parents[0] if parents else None
        sessions: list[SessionDiff] = []
        files: list[str] = []
        changed = self.store.repo.diff_tree(a_sha, b_sha) if session_id is None else []
        if session_id is not None:
            found = self._session_diff_at(session_id, a_sha, b_sha, text)
            sessions = [] if found is None else [found]
        else:
            files = [
                c.path for c in changed if self._owner(c.path) is None and self._in_scope(c.path)
            ]
            moved = by_session(((c.path, c.old, c.new) for c in changed), self.store.namespace)
            split = {self._owner(c.path) for c in changed if part_of(c.path, self.store.namespace)}
            sessions = [
                self._session_diff(sid, path, old, new, text)
                for sid, (path, old, new) in sorted(moved.items())
                if old != new and sid not in split
            ]
            sessions += [
                found
                for sid in sorted(s for s in split if s is not None)
                if (found := self._session_diff_at(sid, a_sha, b_sha, text)) is not None
            ]
            sessions.sort(key=lambda d: d.session_id)
        facts = changed_facts(changed, self.store.namespace, self.store.repo.blob, text)
        return Diff(a=a_sha, b=b_sha, sessions=sessions, files=files, facts=facts)

    def _parts(self, files: dict[str, str | None], path: str, strict: bool) -> dict[str, Any]:
        """Interactions (archive part first) and summary of one version of a session."""
        parts: dict[str, Any] = {}
        for name in sorted(files, key=lambda p: p == path):  # the session file last: it wins
            blob = files[name]
            if blob is None:
                continue
            try:
                version = self.store.parse_blob(name, blob)
            except ParseError:
                if strict and name == path:
                    raise
                continue
            parts.update((f"i:{i.id}", i) for i in version.interactions)
            if name == path:
                parts["summary"] = version.summary
        return parts

    def blame(self, session_id: str, *, commit: str | None = None) -> list[BlameEntry]:
        """For each interaction and the summary: the commit, time, agent and model that last
        changed it (archived turns first, then the parts' and the file's turns, the summary
        last).

        Walks the versions of the session (its archive part and parts) from the newest back
        (from the per-file history cache once housekeeping has built it), and stops as soon
        as every part is accounted for; a turn that a summary moved to the archive is
        followed there. A save's commit names the one turn it added, so only the versions
        before other commits (edits, summaries, batches, splits into parts, a person's
        commits) are parsed.
        """
        rev = self.store.repo.resolve(commit) if commit is not None else self.store.repo.head()
        path = self.store.path_of(session_id)
        part = self.store.path_of(session_id, archive=True)
        found = self.store.repo.entry(path, rev) if rev else None
        if found is None:
            self._require_history(session_id, path, rev)
            raise SessionNotFound(
                f"session {session_id!r} does not exist at {(rev or '')[:12]} (it was "
                f"deleted); `gitmem restore {shlex.quote(session_id)}` brings it back"
            )
        archived = self.store.repo.entry(part, rev)
        pieces = dict(self.store.parts.files(session_id, rev))  # a huge session's older turns
        state: dict[str, str | None] = {
            **pieces,
            part: archived[1] if archived else None,
            path: found[1],
        }
        wanted = self._parts(state, path, strict=True)
        if wanted.get("summary") is None:
            wanted.pop("summary", None)
        owner: dict[str, LogEntry] = {}
        alias = {
            **dict.fromkeys(self._both(session_id), path),
            **dict.fromkeys(self._both(session_id, archive=True), part),
            **{piece: piece for piece in pieces},
        }
        walk = self._versions(self.store.repo.file_log(list(alias), rev), alias, state)
        owner = self._owners(session_id, walk, wanted, path, alias)
        result: list[BlameEntry] = []
        for key in wanted:
            last = owner.get(key)
            if last is None:
                continue  # only possible for a history cut short by a shallow clone
            result.append(
                # from a commit already read: no field to check (nor a validator to build)
                BlameEntry.model_construct(
                    kind="summary" if key == "summary" else "interaction",
                    interaction_id=None if key == "summary" else key[2:],
                    sha=last.sha,
                    time=last.time,
                    author=last.author,
                    agent=_last(last.trailers, "Gitmem-Agent"),
                    model=_last(last.trailers, "Gitmem-Model"),
                    op=_last(last.trailers, "Gitmem-Op"),
                    subject=last.subject,
                )
            )
        return result

    def _owners(
        self,
        session_id: str,
        walk: list[tuple[LogEntry, dict[str, str | None]]],
        wanted: dict[str, Any],
        path: str,
        alias: Mapping[str, str],
    ) -> dict[str, LogEntry]:
        """The newest commit of ``walk`` (newest first) before which each part of
        ``wanted`` was not as it is: the versions before the commits that changed the
        session are parsed and compared, except before a save, whose trailers name the one
        turn it added (a save changes no other turn, nor the summary)."""
        added = [_added_turn(entry, session_id, older, path, alias) for entry, older in walk]
        owner: dict[str, LogEntry] = {}
        remaining = dict(wanted)
        fetched = 0
        for at, (entry, before_state) in enumerate(walk):
            if not remaining:
                break
            turn = added[at]
            if turn is not None:
                if remaining.pop(turn, None) is not None:
                    owner[turn] = entry
                continue
            if at >= fetched:  # the next versions to parse come through one blob stream
                fetched = at + min(max(16, at), _PREFETCH_MAX)
                ahead = zip(walk[at:fetched], added[at:fetched], strict=True)
                files = [(n, b) for (_e, old), t in ahead if t is None for n, b in old.items() if b]
                for _session in self.store.parsed_blobs(files):
                    pass
            before = self._parts(before_state, path, strict=False)
            for key, value in list(remaining.items()):
                older = before.get(key)
                if older is not value and older != value:  # a parsed turn is often shared
                    owner[key] = entry
                    del remaining[key]
        return owner

    @staticmethod
    def _versions(
        entries: Iterable[LogEntry], alias: Mapping[str, str], state: dict[str, str | None]
    ) -> list[tuple[LogEntry, dict[str, str | None]]]:
        """Each commit of a session's log, newest first, with the blob ids of its files
        (by the name ``alias`` gives) just before that commit."""
        out = []
        for entry in entries:
            before_entry: dict[str, str | None] = {}
            for c in entry.files:
                if c.path in alias and (c.old is not None or alias[c.path] not in before_entry):
                    before_entry[alias[c.path]] = c.old
            state = {**state, **before_entry}
            out.append((entry, state))
        return out

    # --- writing: every undo is a new commit ---------------------------------------------

    def _working_or_head(self, txn: Transaction, path: str) -> bytes | None:
        edited = txn.hand_edit(path)
        return edited if edited is not None else txn.read(path)

    def _write(
        self,
        txn: Transaction,
        changes: dict[str, bytes | None],
        subject: str,
        body: str,
        trailers: dict[str, str],
    ) -> str | None:
        for path in changes:
            if self._owner(path) is not None:
                self.store.adopt_hand_edit(txn, path)  # a person's edit is recorded, never lost
            elif is_facts_path(path):
                self._adopt_facts_edit(txn, path)
        # old content comes back: its secrets are redacted like new ones (or it is refused)
        changes, _ = self.store.guard.screen_files(txn, changes)
        for path, data in changes.items():
            if data is None:
                txn.delete(path)
            else:
                txn.write(path, data)
        return txn.commit(subject, body=body, trailers=trailers)

    def _adopt_facts_edit(self, txn: Transaction, path: str) -> None:
        """Commit a person's uncommitted edit of a memory file first (it must parse)."""
        edited = txn.hand_edit(path)
        if edited is not None and not self.store.in_batch():
            parse_facts(edited, path)  # a broken file is never written over
            txn.write(path, edited)
            txn.commit(
                f"Record hand edit of {path}",
                trailers={"Gitmem-Op": "edit"},
                identity=self.store.hand_identity(),
                body="A person edited it outside gitmem.",
            )

    def _blob_at(self, session_id: str, path: str, sha: str, hint: str) -> str:
        """The blob of the session's file at commit ``sha``, or SessionNotFound ending in
        ``hint`` (its ``{}`` filled with the quoted session id)."""
        found = self.store.repo.entry(path, sha)
        if found is None:
            self._require_history(session_id, path)
            raise SessionNotFound(
                f"session {session_id!r} did not exist at {sha[:12]}; "
                + hint.format(shlex.quote(session_id))
            )
        return found[1]

    def rollback(self, session_id: str, to: str | datetime) -> str | None:
        """Restore a session's file exactly as it was at revision ``to``, as a new commit.

        Like every write that brings old content back (restore, revert too), a secret in
        it is redacted as a save would; one that cannot be (in an id or a metadata key)
        raises ``SecretRefused`` and nothing is written.

        Returns the commit id, or None if the session already is in that state. Raises
        SessionNotFound if the session did not exist at ``to``.
        """
        self.store.no_batch("rollback")
        target = self.store.repo.resolve(to)
        path = self.store.path_of(session_id)
        found = self._blob_at(
            session_id,
            self.store.path_of(session_id),
            target,
            "pick a revision from `gitmem log {}`",
        )
        wanted: dict[str, bytes | None] = {path: self.store.repo.blob(found)}
        part = self.store.path_of(session_id, archive=True)
        archived = self.store.repo.entry(self.store.path_of(session_id, archive=True), target)
        if archived is not None or self.store.repo.entry(part) is not None:
            wanted[part] = None if archived is None else self.store.repo.blob(archived[1])
        wanted.update(self._parts_as_at(session_id, target))
        with self.store.repo.transaction() as txn:

            def write() -> str | None:
                if all(
                    txn.read(p) == data and txn.hand_edit(p) is None for p, data in wanted.items()
                ):
                    return None
                return self._write(
                    txn,
                    wanted,
                    f"Roll back {one_line(session_id, 40)} to {target[:12]}",
                    f"Restores {path} as it was at commit {target}.",
                    self.store.trailers("rollback", [session_id], rollback_to=target),
                )

            return txn.rebuilding(write)

    def restore_session(self, session_id: str, rev: str | datetime | None = None) -> str:
        """Bring back a deleted session from history as a new commit.

        Without ``rev`` the last version before it was deleted comes back. Raises
        ConflictError if the session exists, SessionNotFound if it never did.
        """
        self.store.no_batch("restore_session")
        path = self.store.path_of(session_id)
        if rev is not None:
            source = version = self.store.repo.resolve(rev)
            blob = self._blob_at(
                session_id,
                self.store.path_of(session_id),
                source,
                "`gitmem log {}` lists its versions",
            )
        else:
            both = self._both(session_id)
            last = self.store.repo.file_log(both)[:1]
            if not last:
                self._require_history(session_id, path)
                raise SessionNotFound(f"no session {session_id!r} in {self.store.path}")
            change = next((c for c in last[0].files if c.path in both), None)
            blob_or_none = change.new or change.old if change else None
            if blob_or_none is None:
                raise SessionNotFound(f"no earlier version of session {session_id!r} found")
            source, blob = last[0].sha, blob_or_none
            version = source
            if change is not None and change.new is None:  # the version before the delete
                version = (self.store.repo.parents(source) or [source])[0]
        parts = self._parts_as_at(session_id, version)
        with self.store.repo.transaction() as txn:

            def write() -> str | None:
                if txn.read(path) is not None or txn.hand_edit(path) is not None:
                    raise ConflictError(
                        f"session {session_id!r} exists in {self.store.path}; nothing was written. "
                        f"Use `gitmem rollback {shlex.quote(session_id)} --to REV` to go back "
                        "to an old version"
                    )
                return self._write(
                    txn,
                    {path: self.store.repo.blob(blob), **parts},
                    f"Restore session {one_line(session_id, 50)}",
                    f"Brings back {path} as it was at commit {source}.",
                    self.store.trailers("restore", [session_id], restored_from=source),
                )

            sha = txn.rebuilding(write)
        return sha or ""

    def _parts_as_at(self, session_id: str, commit: str) -> dict[str, bytes | None]:
        """The contents of a session's part files at ``commit``, and None for each part
        at HEAD that it did not have: what brings the parts back to that commit."""
        then = dict(self.store.parts.files(session_id, commit))
        wanted: dict[str, bytes | None] = dict.fromkeys(
            p for p, _b in self.store.parts.files(session_id)
        )
        wanted.update((p, self.store.repo.blob(b)) for p, b in then.items())
        return wanted

    def _plan(self, txn: Transaction, entries: Iterable[LogEntry]) -> UndoPlan:
        """Undo ``entries`` (newest first) on the current files, without writing anything."""
        return plan_undo(
            entries,
            current=lambda path: self._working_or_head(txn, path),
            blob=self.store.repo.blob,
            parse_blob=self.store.parse_blob,
            owner=self._owner,
            namespace=self.store.namespace,
        )

    def _entry(self, commit: str | datetime) -> LogEntry:
        sha = self.store.repo.resolve(commit)
        if not self.store.repo.is_ancestor(sha):
            raise RevisionNotFound(
                f"commit {sha[:12]} is not in the history of {self.store.path}'s branch; "
                "there is nothing of it to revert"
            )
        entries = self.store.repo.log(rev=sha, limit=1, files=True)
        if not entries or not entries[0].parents:
            raise ValidationError(f"{sha[:12]} is the store's first commit; it cannot be reverted")
        if not any(self._in_scope(c.path) for c in entries[0].files):
            raise RevisionNotFound(
                f"commit {sha[:12]} changed nothing in this namespace; there is nothing of it "
                "to revert here"
            )
        return entries[0]

    def revert(self, commit: str | datetime) -> str | None:
        """Undo exactly what ``commit`` changed, as a new commit.

        Works part by part: interactions by id, the summary and each metadata key go back to
        their values before ``commit`` unless a later commit changed them again, so turns
        saved after a bad summary are kept. Where nothing touched the file since, the result
        is the exact inverse of ``commit``. Returns None if it was undone already.

        Raises:
            ConflictError: a part ``commit`` changed was changed again later (names the
                session and the part); nothing is written.
            RevisionNotFound: ``commit`` is not in this store's history.
        """
        self.store.no_batch("revert")
        entry = self._entry(commit)
        with self.store.repo.transaction() as txn:

            def write() -> str | None:
                plan = self._plan(txn, [entry])  # on the files as they are now
                plan.raise_conflicts(f"revert {entry.sha[:12]}", self.store.path)
                changes = plan.changed()
                if not changes:
                    return None
                sessions = self._sessions_of(changes)
                body = f'This reverts commit {entry.sha}\n("{one_line(entry.subject, 200)}").'
                return self._write(
                    txn,
                    changes,
                    f'Revert "{one_line(entry.subject, 60)}"',
                    body,
                    self.store.trailers(
                        "revert", sessions, reverts=entry.sha, **plan.fact_trailer(changes)
                    ),
                )

            return txn.rebuilding(write)

    def revert_preview(self, commit: str | datetime) -> UndoResult:
        """What ``revert(commit)`` would change now (per session and fact; none if undone
        already), writing nothing. Raises as ``revert`` would: a conflict shows up front."""
        entry = self._entry(commit)
        with self.store.repo.transaction() as txn:  # read through it; it never commits
            plan = self._plan(txn, [entry])  # on the files as they are now
            plan.raise_conflicts(f"revert {entry.sha[:12]}", self.store.path)
            return UndoResult(
                dry_run=True,
                reverted=[self._revision(entry)],
                sessions=plan.diffs(self._owner),
                facts=plan.fact_diffs(),
            )

    def _owner(self, path: str) -> str | None:
        """The session a file belongs to: its own file, a part or its archive part."""
        namespace = self.store.namespace
        return (
            id_from_path(path, namespace)
            or id_from_part_path(path, namespace)
            or id_from_archive_path(path, namespace)
        )

    def _sessions_of(self, changes: Iterable[str]) -> list[str]:
        found = (self._owner(p) for p in changes)
        return list(dict.fromkeys(s for s in found if s is not None))

    def purge(
        self,
        *,
        text: str | None = None,
        pattern: str | None = None,
        session: str | None = None,
        turn: str | None = None,
        fact: str | None = None,
        secrets: bool = False,
        dry_run: bool = False,
    ) -> PurgeReport:
        """Remove content from every commit of every ref, for real (see
        :mod:`gitmem.history.purge`): ``text`` or ``pattern`` matches (and every secret the
        scan finds, with ``secrets``) become ``[purged]``; a ``session``'s files, a ``turn``
        (``SESSION#ID``) or a ``fact``'s line are removed. Exactly one target. With
        ``dry_run`` nothing changes and the report lists what would."""
        target = PurgeTarget(
            text=text, pattern=pattern, session=session, turn=turn, fact=fact, secrets=secrets
        )
        return self.purges.purge(target, dry_run=dry_run)

    def revert_where(
        self,
        *,
        agent: str | None = None,
        model: str | None = None,
        op: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        dry_run: bool = True,
    ) -> UndoResult:
        """Undo everything an agent or model did (in a time window) as one commit.

        By default this is a dry run: it lists the commits and the changes per session it
        would make, and writes nothing. With ``dry_run=False`` it writes one revert commit.
        Merge commits are left out. Raises ConflictError (writing nothing) when a later
        commit by someone else changed the same parts.
        """
        if not (agent or model or op):
            raise ValidationError("say whose changes to undo: give an agent, a model or an op")
        if not dry_run:
            self.store.no_batch("revert_where")
        entries = self._log(
            None, op=op, agent=agent, model=model, since=since, until=until, files=True
        )
        chosen = [
            e
            for e in entries
            if len(e.parents) == 1 and _last(e.trailers, "Gitmem-Op") not in _NEVER_UNDONE
        ]
        reverted = [self._revision(e) for e in chosen]
        if not chosen:
            return UndoResult(dry_run=dry_run)
        who = ", ".join(
            f"{k} {v}" for k, v in (("agent", agent), ("model", model), ("op", op)) if v
        )
        lines = [f"- {e.sha} {one_line(e.subject, 70)}" for e in chosen]
        extra: dict[str, str] = {}
        if len(chosen) <= _MAX_LISTED:
            extra["reverts"] = ", ".join(e.sha for e in chosen)
        else:
            extra["reverts_count"] = str(len(chosen))
        with self.store.repo.transaction() as txn:

            def write() -> UndoResult:
                plan = self._plan(txn, chosen)  # on the files as they are now
                plan.raise_conflicts(f"undo {len(chosen)} commits", self.store.path)
                result = UndoResult(
                    dry_run=dry_run,
                    reverted=reverted,
                    sessions=plan.diffs(self._owner),
                    facts=plan.fact_diffs(),
                )
                changes = plan.changed()
                if dry_run or not changes:
                    return result
                commit = self._write(
                    txn,
                    changes,
                    f"Undo {len(chosen)} commit(s) by {who}",
                    "This reverts, part by part:\n" + "\n".join(lines),
                    self.store.trailers(
                        "revert", self._sessions_of(changes), **extra, **plan.fact_trailer(changes)
                    ),
                )
                return result.model_copy(update={"commit": commit})

            return txn.rebuilding(write)
