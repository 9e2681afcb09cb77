"""``MemoryManager``: the one object callers use; every front end is a thin layer over it."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from gitmem.errors import (
    Diagnostic,
    InvalidSessionId,
    ParseError,
    RepositoryError,
    SessionNotFound,
    ValidationError,
)
from gitmem.format import parse as markdown
from gitmem.format.paths import (
    archive_dir,
    fold_name,
    id_from_archive_path,
    id_from_path,
    portability_problem,
    session_dir,
    session_path,
)
from gitmem.guard.methods import SecurityMixin
from gitmem.guard.secrets import redact
from gitmem.history.methods import HistoryMixin
from gitmem.models import (
    Interaction,
    Language,
    Message,
    ModelValidationError,
    Session,
    as_when,
    describe_errors,
    now,
)
from gitmem.search.methods import RetrievalMixin
from gitmem.store.discover import open_repository
from gitmem.store.objects import MODE_TREE, object_id
from gitmem.store.repository import Housekeeping, Repository
from gitmem.store.transaction import Identity, Transaction
from gitmem.summary.methods import SummaryMixin
from gitmem.sync.methods import SharingMixin

P = ParamSpec("P")

T = TypeVar("T")

_METADATA_FIELDS = ("project", "links")


def _validated(build: Callable[[], T], where: str) -> T:
    """Run a model constructor, turning pydantic's error into gitmem's, naming the field."""
    try:
        return build()
    except ModelValidationError as exc:
        raise ValidationError(f"{where}: {describe_errors(exc)}") from None


# an author name is a label, not a place for text: git accepts any length, people's tools do not
AGENT_MAX = 200


def _format_free(text: str) -> str:
    """``text`` without format characters (Unicode Cf: bidi overrides such as U+202E, zero
    widths), which make an author line read differently from what git stores."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def agent_identity(agent: str, email: str | None = None) -> Identity:
    """The commit author for an agent name: ``name <email>`` is split into its parts, angle
    brackets, control and format characters (which would corrupt or disguise the author line)
    are dropped, and an empty name or one longer than ``AGENT_MAX`` is refused. An email with
    such characters is refused. The default email is ``<name-with-dashes>@gitmem.local``."""
    agent = str(agent)
    if len(agent) > AGENT_MAX:
        raise ValidationError(
            f"agent name is {len(agent)} characters long; give at most {AGENT_MAX}"
        )
    given = " ".join(agent.split())
    found = re.fullmatch(r"(.*?)\s*<([^<>]*)>", given)
    if found is not None:
        given, email = found.group(1), email or found.group(2).strip()
    name = " ".join(re.sub(r"[<>\x00-\x1f\x7f]", " ", _format_free(given)).split())
    if not name:
        raise ValidationError(f"agent name {agent!r} is empty; give a name like 'my-bot'")
    if email is not None and (
        not email or len(email) > AGENT_MAX or re.search(r"[<>\s\x00-\x1f\x7f]", email)
        or _format_free(email) != email
    ):
        shown = repr(email) if len(email) <= AGENT_MAX else f"of {len(email)} characters"
        raise ValidationError(f"agent email {shown} is not an address like bot@example.com")
    slug = re.sub(r"[^\w.+-]+", "-", name).strip("-.") or "agent"
    return Identity(name, email or f"{slug}@gitmem.local")


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
    created: dict[str, str] = field(default_factory=dict)  # folded file name -> path
    # every change made, to make again if the branch moves under the batch
    done: list[tuple[str, str, Callable[[Session | None], Session | None], str]] = field(
        default_factory=list)


@dataclass
class _Folds:
    """Folded file names of one sessions folder at one commit, so that creating a session
    checks for a case/normalisation twin without listing the folder again."""

    folder: str
    head: str | None
    names: dict[str, set[str]]


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
        adopt: with ``init``, make an existing git repository that is not a store one on
            purpose (a commit adding the gitmem merge attributes); without it such a
            repository is refused (:class:`~gitmem.errors.NotAStore`), as is any
            repository that is not a store when opened without ``init``.
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
        adopt: bool = False,
    ) -> None:
        identity = agent_identity(agent, email)
        self.agent = identity.name
        self.model = model
        self.language: Language = language
        self.namespace = namespace
        if init:  # the first commit is written before the store's settings can be read
            identity = Identity(redact(identity.name, label=True)[0],
                                redact(identity.email, label=True)[0])
        options: dict[str, Any] = {
            "identity": identity,
            "housekeeping": housekeeping,
            "lock_timeout": lock_timeout,
        }
        self._repo = open_repository(path, init=init, adopt_it=adopt, **options)
        self.path = self._repo.root
        self._repo.commit_guard = self._guard_commit  # secrets in messages and authors
        self._wire_sharing()
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._local = threading.local()
        self._folds: _Folds | None = None

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
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        metadata: Mapping[str, str] | None = None,
        commit: str | None = None,
    ) -> list[Session]:
        """Sessions matching every filter given, most recently active first.

        ``tags`` must all be present; ``since``/``until`` bound the last-active time (a
        ``datetime``, naive means UTC, or an ISO date string; anything else: ValidationError);
        ``metadata`` matches custom keys exactly. Files that do not parse are left out
        (``check()`` reports them).
        """
        wanted_tags = set(tags)
        low, high = as_when(since, "since"), as_when(until, "until")
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
        """Validate every session file and archive part; returns all ``path:line`` problems
        (empty = clean). Checks the committed files and any uncommitted hand edits.
        """
        problems: list[Diagnostic] = []
        paths: dict[str, str | None] = {}  # path: the session id its name encodes
        # the archive parts too: load_memory(include_archive=True) reads them
        for folder, id_of in ((session_dir(self.namespace), id_from_path),
                              (archive_dir(self.namespace), id_from_archive_path)):
            names = set(self._repo.list_dir(folder, commit))
            if commit is None and (self.path / folder).is_dir():
                names |= {p.name for p in (self.path / folder).iterdir() if p.suffix == ".md"}
            paths |= {f"{folder}/{n}": id_of(f"{folder}/{n}", self.namespace) for n in names}
        for path, expected in sorted(paths.items()):
            if expected is None:
                problems.append(Diagnostic(path, 1, "file name is not an encoded session id"))
                continue
            try:
                data = self._repo.working_blob(path) if commit is None else None
            except RepositoryError as exc:  # e.g. a symlink: report it, read nothing through it
                problems.append(Diagnostic(path, 1, str(exc)))
                continue
            except ParseError as exc:  # a folder or FIFO under a session's name
                problems.extend(exc.diagnostics)
                continue
            raw = data[0] if data is not None else self._repo.read(path, commit)
            if raw is None:
                continue
            try:
                session = markdown.parse_bytes(raw, path)
            except ParseError as exc:
                problems.extend(exc.diagnostics)
                continue
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

            def commit() -> None:
                op = "batch" if len(set(current.ops)) != 1 else current.ops[0]
                base, names = txn.head(), self._pending_names(txn)
                result.commit = txn.commit(message, trailers=self._trailers(op, current.touched))
                self._advance_folds(base, result.commit, names)

            # a person's commit to the same files: the changes are made again on top of it
            txn.rebuilding(commit, again=lambda: self._replay(current))

    def _replay(self, batch: _Batch) -> None:
        """Make a batch's changes again from the branch's new tip (the transaction has
        restarted there)."""
        done, batch.done = batch.done, []
        batch.sessions, batch.touched, batch.ops = {}, [], []
        batch.created = {}
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
        with self._repo.transaction() as txn:

            def write() -> str | None:
                self._apply(txn, None, session_id, path, change, op)
                all_trailers = self._trailers(op, [session_id])
                all_trailers.update(trailers or {})
                base, names = txn.head(), self._pending_names(txn)
                sha = txn.commit(subject, body=body, trailers=all_trailers)
                self._advance_folds(base, sha, names)
                return sha

            # a person committed to this file meanwhile: the change is made again on top
            return txn.rebuilding(write)

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
        if current is None and updated is not None:
            self._check_new_name(txn, batch, session_id, path)
        if updated is None:
            txn.delete(path)
        elif updated is not current:  # the change kept the session as it is: write nothing
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

    def _check_new_name(
        self, txn: Transaction, batch: _Batch | None, session_id: str, path: str
    ) -> None:
        """Refuse a new session whose file would break a clone on macOS or Windows: a
        device name, or a twin (up to case or Unicode normalisation) of an existing file."""
        problem = portability_problem(session_id)
        if problem is not None:
            raise InvalidSessionId(problem)
        folder, name = path.rsplit("/", 1)
        key = fold_name(name)
        twins = self._twins(folder, txn.head(), key)
        if batch is not None and key in batch.created:
            twins.add(batch.created[key].rsplit("/", 1)[1])
        twins.discard(name)
        if twins:
            other = id_from_path(f"{folder}/{min(twins)}", self.namespace) or min(twins)
            raise InvalidSessionId(
                f"session id {session_id!r} differs from the existing session {other!r} only "
                "in letter case or Unicode normalisation; on macOS and Windows both would be "
                "one file, so pick another id"
            )
        if batch is not None:
            batch.created[key] = path

    def _twins(self, folder: str, head: str | None, key: str) -> set[str]:
        # built once, then moved forward by the names added or removed since (set operations
        # on the two folder trees' names, no Python loop over the folder)
        with self._cache_lock:
            folds = self._folds
            if folds is None or folds.folder != folder or head is None:
                names: dict[str, set[str]] = {}
                for raw in self._folder_entries(folder, head):
                    name = raw.decode("utf-8", "surrogateescape")
                    names.setdefault(fold_name(name), set()).add(name)
                folds = self._folds = _Folds(folder, head, names)
            elif folds.head != head:
                old = self._folder_entries(folder, folds.head).keys()
                new = self._folder_entries(folder, head).keys()
                for raw in old - new:
                    name = raw.decode("utf-8", "surrogateescape")
                    folds.names.get(fold_name(name), set()).discard(name)
                for raw in new - old:
                    name = raw.decode("utf-8", "surrogateescape")
                    folds.names.setdefault(fold_name(name), set()).add(name)
                folds.head = head
            return set(folds.names.get(key, ()))

    def _pending_names(self, txn: Transaction) -> dict[str, bool]:
        """File name -> written (False: deleted) of the folded folder's pending changes."""
        folds = self._folds
        if folds is None:
            return {}
        prefix = folds.folder + "/"
        return {
            path[len(prefix) :]: data is not None
            for path, data in txn.pending.items()
            if path.startswith(prefix) and "/" not in path[len(prefix) :]
        }

    def _advance_folds(self, base: str | None, commit: str | None, names: dict[str, bool]
                       ) -> None:
        # our own commit straight on top of the folded head: apply its names, read nothing
        with self._cache_lock:
            folds = self._folds
            if commit is None or folds is None or folds.head is None or folds.head != base:
                return
            if self._repo.parents(commit) != [base]:
                return  # the branch moved meanwhile; the next check diffs the trees
            for name, written in names.items():
                bucket = folds.names.setdefault(fold_name(name), set())
                if written:
                    bucket.add(name)
                else:
                    bucket.discard(name)
            folds.head = commit

    def _folder_entries(self, folder: str, commit: str | None) -> dict[bytes, tuple[bytes, bytes]]:
        if commit is None:
            return {}
        tree = self._repo.tree(self._repo.commit_tree(commit))
        for part in folder.split("/"):
            found = tree.entries.get(part.encode())
            if found is None or found[0] != MODE_TREE:
                return {}
            tree = self._repo.tree(found[1].hex())
        return tree.entries

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
        parsed = [self._message(m, at) for at, m in enumerate(messages)]
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
            iid = self._fresh_id(taken) if interaction_id is None else interaction_id
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
        self.summary_config  # noqa: B018  a bad gitmem.summary.* setting stops the save here
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

    @staticmethod
    def _message(item: Message | Mapping[str, str], at: int) -> Message:
        if isinstance(item, Message):
            return item
        if not isinstance(item, Mapping):
            raise ValidationError(f"message {at}: expected a Message or a mapping with speaker "
                                  f"and content, got {type(item).__name__}")
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


def default_store() -> Path:
    """Where the CLI looks when neither ``--repo`` nor ``GITMEM_REPO`` is given."""
    return Path(os.environ.get("GITMEM_REPO", ".")).expanduser()
