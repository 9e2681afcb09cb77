"""``MemoryManager``: the one object callers use; every front end is a thin layer over it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from gitmem import markdown
from gitmem.errors import (
    BranchMoved,
    Diagnostic,
    ParseError,
    RepositoryError,
    SessionNotFound,
    ValidationError,
)
from gitmem.history import AsyncHistoryMixin, HistoryMixin
from gitmem.models import (
    Interaction,
    Language,
    Message,
    ModelValidationError,
    Session,
    as_aware,
    now,
)
from gitmem.paths import id_from_path, session_dir, session_path
from gitmem.plumbing import object_id
from gitmem.recall import AsyncRetrievalMixin, RetrievalMixin
from gitmem.repository import Housekeeping, Identity, Repository, Transaction
from gitmem.security import AsyncSecurityMixin, SecurityMixin
from gitmem.sharing import AsyncSharingMixin, SharingMixin
from gitmem.summarizing import SummaryMixin
from gitmem.transaction import MAX_REBUILDS

P = ParamSpec("P")
T = TypeVar("T")

_METADATA_FIELDS = ("project", "links")


def _validated(build: Callable[[], T], where: str) -> T:
    """Run a model constructor, turning pydantic's error into gitmem's, naming the field."""
    try:
        return build()
    except ModelValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ValidationError(f"{where}: {problems}") from None


def _short(text: str, limit: int = 48) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class _Batch:
    txn: Transaction
    message: str
    sessions: dict[str, Session] = field(default_factory=dict)
    touched: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    commit: str | None = None
    # every change made, to make again if the branch moves under the batch
    done: list[tuple[str, str, Callable[[Session | None], Session | None], str]] = field(
        default_factory=list)


@dataclass
class BatchResult:
    """What ``with mm.batch(...) as b`` gives: ``b.commit`` is set when the block ends."""

    commit: str | None = None


class MemoryManager(RetrievalMixin, SharingMixin, SummaryMixin, HistoryMixin, SecurityMixin):
    """Long-term conversation memory in a git repository of Markdown files.

    Args:
        path: the store's folder (a git repository with a working tree).
        init: create the store if it does not exist yet.
        agent: the name recorded as commit author and in ``Gitmem-Agent`` trailers.
        email: the author email (default ``<agent>@gitmem.local``).
        model: the LLM model name recorded in ``Gitmem-Model`` trailers, if any.
        language: labels for new session files, ``"en"`` or ``"zh"``.
        namespace: keep this manager's sessions apart from other namespaces.
        housekeeping: when to pack loose objects in the background.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        init: bool = False,
        agent: str = "gitmem",
        email: str | None = None,
        model: str | None = None,
        language: Language = "en",
        namespace: str | None = None,
        housekeeping: Housekeeping | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        self.agent = agent
        self.model = model
        self.language: Language = language
        self.namespace = namespace
        identity = Identity(agent, email or f"{agent.replace(' ', '-')}@gitmem.local")
        options: dict[str, Any] = {
            "identity": identity,
            "housekeeping": housekeeping,
            "lock_timeout": lock_timeout,
        }
        if init:
            self._repo = Repository.init(path, **options)
        else:
            self._repo = Repository(path, **options)
        self.path = self._repo.root
        self._wire_sharing()
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._local = threading.local()

    @classmethod
    def init(cls, path: str | os.PathLike[str], **kwargs: Any) -> MemoryManager:
        """Create a new store at ``path`` (or open it if it is one already)."""
        return cls(path, init=True, **kwargs)

    def close(self) -> None:
        """Finish background housekeeping and release git helper processes."""
        self._repo.close()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def repository(self) -> Repository:
        """The repository layer underneath (for front ends that need raw history)."""
        return self._repo

    # --- reading -------------------------------------------------------------------------

    def _path(self, session_id: str) -> str:
        return session_path(session_id, self.namespace)

    def _parse_blob(self, path: str, blob_id: str) -> Session:
        key = (path, blob_id)
        with self._cache_lock:
            cached = self._sessions.get(key)
            if cached is not None:
                self._sessions.move_to_end(key)
                return cached
        session = markdown.parse_bytes(self._repo.blob(blob_id), path)
        self._remember(path, blob_id, session)
        return session

    def _remember(self, path: str, blob_id: str, session: Session) -> None:
        with self._cache_lock:
            self._sessions[(path, blob_id)] = session
            while len(self._sessions) > 512:
                self._sessions.popitem(last=False)

    def head(self) -> str | None:
        """The commit the store's branch points at."""
        return self._repo.head()

    def load_memory(
        self, session_id: str, *, commit: str | None = None, include_archive: bool = False
    ) -> Session | None:
        """The session as committed at HEAD (or ``commit``), or None if there is none.

        ``include_archive`` puts back the turns that summaries moved to the archive part.
        Raises ParseError (with ``path:line`` diagnostics) if the committed file is broken.
        """
        path = self._path(session_id)
        found = self._repo.entry(path, commit)
        session = None if found is None else self._parse_blob(path, found[1])
        if include_archive and session is not None:
            session = self._with_archive(session, commit)
        return session

    def session_ids(self, *, commit: str | None = None) -> list[str]:
        """Every session id in the store (this namespace), sorted."""
        folder = session_dir(self.namespace)
        ids = [
            id_from_path(f"{folder}/{name}", self.namespace)
            for name in self._repo.list_dir(folder, commit)
        ]
        return sorted(i for i in ids if i is not None)

    def list_sessions(
        self,
        *,
        tags: Iterable[str] = (),
        participant: str | None = None,
        project: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        metadata: Mapping[str, str] | None = None,
        commit: str | None = None,
    ) -> list[Session]:
        """Sessions matching every filter given, most recently active first.

        ``tags`` must all be present; ``since``/``until`` bound the last-active time;
        ``metadata`` matches custom keys exactly. Files that do not parse are left out
        (``check()`` reports them).
        """
        wanted_tags = set(tags)
        low = as_aware(since) if since else None
        high = as_aware(until) if until else None
        found: list[Session] = []
        folder = session_dir(self.namespace)
        for name, blob_id in self._repo.list_dir(folder, commit).items():
            path = f"{folder}/{name}"
            if id_from_path(path, self.namespace) is None:
                continue
            try:
                session = self._parse_blob(path, blob_id)
            except ParseError:
                continue
            if wanted_tags and not wanted_tags <= set(session.tags):
                continue
            if participant and participant not in session.participants:
                continue
            if project and session.project != project:
                continue
            if low and session.last_active < low:
                continue
            if high and session.last_active > high:
                continue
            if metadata and any(session.extra.get(k) != v for k, v in metadata.items()):
                continue
            found.append(session)
        found.sort(key=lambda s: (s.last_active, s.id), reverse=True)
        return found

    def check(self, *, commit: str | None = None) -> list[Diagnostic]:
        """Validate every session file; returns all ``path:line`` problems (empty = clean).

        Checks the committed files and any uncommitted hand edits in the working tree.
        """
        problems: list[Diagnostic] = []
        folder = session_dir(self.namespace)
        names = set(self._repo.list_dir(folder, commit))
        work = self.path / folder
        if commit is None and work.is_dir():
            names |= {p.name for p in work.iterdir() if p.suffix == ".md"}
        for name in sorted(names):
            path = f"{folder}/{name}"
            if id_from_path(path, self.namespace) is None:
                problems.append(Diagnostic(path, 1, "file name is not an encoded session id"))
                continue
            try:
                data = self._repo.working_blob(path) if commit is None else None
            except RepositoryError as exc:  # e.g. a symlink: report it, read nothing through it
                problems.append(Diagnostic(path, 1, str(exc)))
                continue
            raw = data[0] if data is not None else self._repo.read(path, commit)
            if raw is None:
                continue
            try:
                session = markdown.parse_bytes(raw, path)
            except ParseError as exc:
                problems.extend(exc.diagnostics)
                continue
            expected = id_from_path(path, self.namespace)
            if session.id != expected:
                problems.append(
                    Diagnostic(
                        path,
                        1,
                        f"session id {session.id!r} does not match the file name "
                        f"(expected {expected!r})",
                    )
                )
        return problems

    # --- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self, message: str = "Batch of memory changes") -> Iterator[BatchResult]:
        """Group every write inside the block into one commit (e.g. an import).

        The write lock is held for the whole block; an exception drops all its changes.
        """
        if getattr(self._local, "batch", None) is not None:
            raise ValidationError("batches do not nest")
        result = BatchResult()
        with self._repo.transaction() as txn:
            current = _Batch(txn, message)
            self._local.batch = current
            try:
                yield result
            finally:
                self._local.batch = None
            with contextlib.ExitStack() as exclusive:
                for attempt in range(1, MAX_REBUILDS + 1):
                    trailers = self._trailers(
                        "batch" if len(set(current.ops)) != 1 else current.ops[0],
                        current.touched,
                    )
                    try:
                        result.commit = txn.commit(message, trailers=trailers)
                        break
                    except BranchMoved:
                        if attempt == MAX_REBUILDS:
                            raise
                        if attempt == 1:
                            exclusive.enter_context(self._repo.excluding_git())
                        self._replay(current)  # on top of the person's commit

    def _replay(self, batch: _Batch) -> None:
        """Make a batch's changes again from the branch's new tip."""
        done, batch.done = batch.done, []
        batch.sessions, batch.touched, batch.ops = {}, [], []
        batch.txn.restart()
        self._local.batch = batch  # hand edits go into the batch's commit, as the first time
        try:
            for session_id, path, change, op in done:
                self._apply(batch.txn, batch, session_id, path, change, op)
        finally:
            self._local.batch = None

    def _trailers(self, op: str, sessions: Sequence[str], **extra: str) -> dict[str, str]:
        trailers = {"Gitmem-Op": op}
        unique = list(dict.fromkeys(sessions))
        if len(unique) <= 20:
            for sid in unique:
                trailers.setdefault("Gitmem-Session", sid)
            if len(unique) > 1:
                trailers["Gitmem-Session"] = ", ".join(unique)
        else:
            trailers["Gitmem-Sessions"] = str(len(unique))
        trailers["Gitmem-Agent"] = self.agent
        if self.model:
            trailers["Gitmem-Model"] = self.model
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
    ) -> str | None:
        """Read-modify-write one session under the lock; one commit unless in a batch."""
        path = self._path(session_id)
        batch: _Batch | None = getattr(self._local, "batch", None)
        if batch is not None:
            self._apply(batch.txn, batch, session_id, path, change, op)
            return None
        with self._repo.transaction() as txn, contextlib.ExitStack() as exclusive:
            attempt = 1
            while True:
                try:
                    self._apply(txn, None, session_id, path, change, op)
                    all_trailers = self._trailers(op, [session_id])
                    all_trailers.update(trailers or {})
                    return txn.commit(subject, body=body, trailers=all_trailers)
                except BranchMoved:
                    # a person committed to this file meanwhile: redo the change on top
                    if attempt == MAX_REBUILDS:
                        raise
                    if attempt == 1:  # keep the person's git out until this one is done
                        exclusive.enter_context(self._repo.excluding_git())
                    attempt += 1
                    txn.restart()

    def _apply(
        self,
        txn: Transaction,
        batch: _Batch | None,
        session_id: str,
        path: str,
        change: Callable[[Session | None], Session | None],
        op: str,
    ) -> None:
        current = batch.sessions.get(path) if batch is not None else None
        if current is None:
            current = self._adopt_hand_edit(txn, path)
        if current is None:
            found = self._repo.entry(path, txn.head())
            current = self._parse_blob(path, found[1]) if found else None
        updated = self._guard(txn, current, change(current))  # sizes, secrets redacted
        if updated is None:
            txn.delete(path)
        else:
            if updated.id != session_id:
                raise ValidationError(f"session id {updated.id!r} != {session_id!r}")
            data = markdown.render(updated).encode("utf-8")
            txn.write(path, data)
            # the next save to this session starts from here without parsing the file again
            self._remember(path, object_id("blob", data), updated)
        if batch is not None:
            if updated is not None:
                batch.sessions[path] = updated
            batch.touched.append(session_id)
            batch.ops.append(op)
            batch.done.append((session_id, path, change, op))

    def _adopt_hand_edit(self, txn: Transaction, path: str) -> Session | None:
        """Commit an uncommitted hand edit of ``path`` first, so a save never overwrites it.

        A hand edit that does not parse raises ParseError and nothing is written.
        """
        edited = txn.hand_edit(path)
        if edited is None:
            return None
        session = markdown.parse_bytes(edited, path)
        session, edited = self._guard_hand_edit(txn, session, edited)
        if getattr(self._local, "batch", None) is None:
            txn.write(path, edited)
            txn.commit(
                f"Record hand edit of {path}",
                trailers={"Gitmem-Op": "edit", "Gitmem-Session": session.id},
                identity=self._hand_identity(),
                body="A person edited this file outside gitmem; recorded before the next save.",
            )
        return session

    def _hand_identity(self) -> Identity:
        name, email = self._repo.configured_identity()
        return Identity(name or "hand edit", email or "hand-edit@gitmem.local")

    def _new_session(self, session_id: str, when: datetime) -> Session:
        return _validated(
            lambda: Session(id=session_id, created=when, last_active=when, language=self.language),
            f"session {session_id!r}",
        )

    def save_messages(
        self,
        session_id: str,
        messages: Sequence[Message | Mapping[str, str]],
        timestamp: datetime | None = None,
        interaction_id: str | None = None,
        *,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Append one interaction with any speakers; returns the commit id.

        ``messages`` are ``Message`` objects or ``{"speaker"|"role": ..., "content": ...}``
        dicts. Importers pass their own ``interaction_id`` (it must be new in the session).
        Returns None inside a batch (the batch's commit is on the batch result).
        """
        when = as_aware(timestamp) if timestamp else now()
        parsed = [self._message(m, at) for at, m in enumerate(messages)]
        if not parsed:
            raise ValidationError(f"session {session_id!r}: an interaction needs a message")
        tag_list = list(dict.fromkeys(tags))
        # filled in once the id is known; the audit log reads which turn a commit added
        trailers: dict[str, str] = {}

        def change(current: Session | None) -> Session:
            session = current or self._new_session(session_id, when)
            taken = {i.id for i in session.interactions}
            iid = interaction_id or self._fresh_id(taken)
            trailers["Gitmem-Interaction"] = iid
            if iid in taken:
                raise ValidationError(
                    f"session {session_id!r} already has an interaction with id {iid!r}"
                )
            turn = _validated(
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
            return self._with_metadata(session, update, metadata)

        first = _short(self._safe_text(parsed[0].content))
        sha = self._modify(
            session_id,
            change,
            op="save",
            trailers=trailers,
            subject=f"Save turn in {_short(session_id, 40)}: {first}"
            if first
            else f"Save turn in {_short(session_id, 40)}",
        )
        if sha is not None:
            self._after_save(session_id)  # summary triggers; never raises
        return sha

    def save_interaction(
        self,
        session_id: str,
        user: str,
        assistant: str,
        timestamp: datetime | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        *,
        interaction_id: str | None = None,
    ) -> str | None:
        """Append a user/assistant exchange to a session as one commit; returns its id."""
        user_label, assistant_label = (
            ("用户", "助手") if self.language == "zh" else ("User", "Assistant")
        )
        return self.save_messages(
            session_id,
            [
                Message(speaker=user_label, content=user),
                Message(speaker=assistant_label, content=assistant),
            ],
            timestamp,
            interaction_id,
            tags=tags,
            metadata=metadata,
        )

    @staticmethod
    def _message(item: Message | Mapping[str, str], at: int) -> Message:
        if isinstance(item, Message):
            return item
        speaker = item.get("speaker") or item.get("role")
        if speaker in ("user", "assistant", "system"):
            speaker = speaker.capitalize()
        return _validated(
            lambda: Message(speaker=speaker or "", content=item.get("content", "")), f"message {at}"
        )

    @staticmethod
    def _fresh_id(taken: set[str]) -> str:
        while True:
            candidate = "i" + secrets.token_hex(4)
            if candidate not in taken:
                return candidate

    def _with_metadata(
        self, session: Session, update: dict[str, Any], metadata: Mapping[str, Any] | None
    ) -> Session:
        extra = dict(session.extra)
        for key, value in (metadata or {}).items():
            if key == "project":
                update["project"] = value
            elif key == "links":
                links = [value] if isinstance(value, str) else list(value)
                update["links"] = list(dict.fromkeys([*session.links, *links]))
            elif key == "tags":
                update["tags"] = list(dict.fromkeys([*update.get("tags", session.tags), *value]))
            elif value is None:
                extra.pop(key, None)
            else:
                extra[key] = str(value)
        update["extra"] = extra
        merged = {**session.model_dump(exclude={"interactions", "summary"}), **update}
        merged.setdefault("interactions", session.interactions)
        merged["summary"] = session.summary
        return _validated(lambda: Session(**merged), f"session {session.id!r} metadata")

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
            return self._with_metadata(current, {"tags": tags}, metadata)

        return self._modify(
            session_id,
            change,
            op="metadata",
            subject=f"Update metadata of {_short(session_id, 50)}",
        )

    def put_session(self, session: Session, *, op: str = "import", subject: str = "") -> str | None:
        """Write a whole session as given (importers, rollback); one commit unless batched."""
        return self._modify(
            session.id,
            lambda _current: session,
            op=op,
            subject=subject or f"Write session {_short(session.id, 50)}",
        )

    def delete_session(self, session_id: str) -> str:
        """Remove a session's file in a new commit; it stays recoverable from history."""

        def change(current: Session | None) -> None:
            if current is None:
                raise SessionNotFound(f"no session {session_id!r} in {self.path}")
            return None

        sha = self._modify(
            session_id, change, op="delete", subject=f"Delete session {_short(session_id, 50)}"
        )
        return sha or ""


class AsyncMemoryManager(
    AsyncRetrievalMixin, AsyncSharingMixin, AsyncHistoryMixin, AsyncSecurityMixin
):
    """``MemoryManager`` with coroutine methods; the work runs in a worker thread."""

    def __init__(self, path: str | os.PathLike[str], **kwargs: Any) -> None:
        self.sync = MemoryManager(path, **kwargs)

    @classmethod
    def init(cls, path: str | os.PathLike[str], **kwargs: Any) -> AsyncMemoryManager:
        return cls(path, init=True, **kwargs)

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def save_interaction(self, *args: Any, **kwargs: Any) -> str | None:
        return await self._run(self.sync.save_interaction, *args, **kwargs)

    async def save_messages(self, *args: Any, **kwargs: Any) -> str | None:
        return await self._run(self.sync.save_messages, *args, **kwargs)

    async def load_memory(self, *args: Any, **kwargs: Any) -> Session | None:
        return await self._run(self.sync.load_memory, *args, **kwargs)

    async def list_sessions(self, *args: Any, **kwargs: Any) -> list[Session]:
        return await self._run(self.sync.list_sessions, *args, **kwargs)

    async def update_metadata(self, *args: Any, **kwargs: Any) -> str | None:
        return await self._run(self.sync.update_metadata, *args, **kwargs)

    async def delete_session(self, *args: Any, **kwargs: Any) -> str:
        return await self._run(self.sync.delete_session, *args, **kwargs)

    async def check(self, *args: Any, **kwargs: Any) -> list[Diagnostic]:
        return await self._run(self.sync.check, *args, **kwargs)

    async def summarize(self, *args: Any, **kwargs: Any) -> str:
        return await self._run(self.sync.summarize, *args, **kwargs)

    async def maybe_summarize(self, *args: Any, **kwargs: Any) -> Any:
        return await self._run(self.sync.maybe_summarize, *args, **kwargs)

    async def summarize_idle(self, *args: Any, **kwargs: Any) -> list[Any]:
        return await self._run(self.sync.summarize_idle, *args, **kwargs)

    async def review_list(self) -> list[Any]:
        return await self._run(self.sync.review_list)

    async def review_show(self, session_id: str) -> Any:
        return await self._run(self.sync.review_show, session_id)

    async def review_accept(self, session_id: str) -> str:
        return await self._run(self.sync.review_accept, session_id)

    async def review_reject(self, session_id: str) -> str:
        return await self._run(self.sync.review_reject, session_id)

    async def close(self) -> None:
        await self._run(self.sync.close)


def default_store() -> Path:
    """Where the CLI looks when neither ``--repo`` nor ``GITMEM_REPO`` is given."""
    return Path(os.environ.get("GITMEM_REPO", ".")).expanduser()
