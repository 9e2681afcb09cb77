"""Keeping the search index in step with the store: catch-up, rebuild, recovery.

The index (:mod:`gitmem.search.index`) records the commit it reflects. :func:`catch_up` brings it to
HEAD by diffing that commit with HEAD, so saves by other processes, ``git pull`` and hand
commits are all picked up, and only the files that changed are parsed again.
:class:`StoreIndex` wraps this for the manager: every use catches up first, and an index
file found corrupted is thrown away and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TypeVar

from gitmem.errors import IndexUnavailable, RepositoryError
from gitmem.format.parse import parse_lenient
from gitmem.format.paths import (
    archive_dir,
    encode_id,
    id_from_archive_path,
    id_from_part_path,
    id_from_path,
    session_dir,
)
from gitmem.models import Result, Session
from gitmem.search.index import SearchIndex, open_file
from gitmem.search.indexfile import DATABASE_ERRORS, damaged, discard, unavailable
from gitmem.store.layout import session_files
from gitmem.store.repository import Repository
from gitmem.store.worktree import read_regular

ProgressCallback = Callable[[int, int], None]


class SyncReport(Result):
    """What one catch-up did (``reindex`` returns it); :func:`catch_up` counts into it once per
    changed file, never per turn."""

    commit: str | None
    rebuilt: bool = False
    indexed: int = 0
    removed: int = 0
    unreadable: list[str] = []  # noqa: RUF012 (pydantic copies it for each report)


def index_path(repository: Repository, namespace: str | None = None) -> Path:
    """Where a store's index lives: under the git dir, so it is never tracked."""
    name = "index.sqlite" if namespace is None else f"index-{encode_id(namespace)}.sqlite"
    return repository.state_dir / name


T = TypeVar("T")


class StoreIndex:
    """The index of one store and namespace, kept in step with the store's HEAD.

    Every use goes through :meth:`run`, which catches up first and, if the file turns out
    to be corrupted at any point, throws it away, rebuilds it and runs the work again.
    Views of past commits get a throw-away in-memory index (the last two are kept).
    """

    def __init__(self, repository: Repository, namespace: str | None = None) -> None:
        self.repository = repository
        self.namespace = namespace
        self._lock = threading.RLock()
        self._index: SearchIndex | None = None
        self._past: dict[str, SearchIndex] = {}
        # why the last run answered from an in-memory index, if it did
        self.fallback: str | None = None

    def _current(
        self, full: bool = False, progress: ProgressCallback | None = None
    ) -> tuple[SearchIndex, SyncReport]:
        """The index of HEAD, opened on first use and caught up, and what catching up did."""
        if self._index is None:
            path = index_path(self.repository, self.namespace)
            self._index = open_file(path, str(self.repository.git_dir))
        report = catch_up(
            self._index, self.repository, self.namespace, full=full, progress=progress
        )
        return self._index, report

    def _reset(self) -> None:
        if self._index is not None:
            with contextlib.suppress(*DATABASE_ERRORS):
                self._index.close()
        self._index = None
        discard(index_path(self.repository, self.namespace))

    def _retrying(self, step: Callable[[], T]) -> T:
        """``step()``; if the index file turns out to be damaged, throw it away and run
        ``step`` once more (on a fresh file). Called under the lock."""
        path = index_path(self.repository, self.namespace)
        for attempt in (1, 2):
            try:
                return step()
            except DATABASE_ERRORS as exc:
                if attempt == 2 or not damaged(exc):
                    raise unavailable(exc, path) from exc
                self._reset()
        raise AssertionError("unreachable")

    def run(self, work: Callable[[SearchIndex], T], *, commit: str | None = None) -> T:
        """Call ``work`` with an up-to-date index (of HEAD, or of ``commit``).

        When the index file cannot be used (a read-only store, a full disk), ``work`` gets
        an index of HEAD built in memory from the files instead, and :attr:`fallback`
        says so: the index is derived, so an agent's retrieval never fails for it."""
        with self._lock:
            head = self.repository.head()
            if commit is not None and commit != head:
                return work(self._at(commit))
            try:
                result = self._retrying(lambda: work(self._current()[0]))
            except IndexUnavailable as exc:
                if head is None:
                    raise
                self.fallback = (
                    f"{exc}; answered from the files instead (slower until the "
                    "index can be written)"
                )
                return work(self._at(head))
            self.fallback = None
            return result

    def catch_up(
        self, *, full: bool = False, progress: ProgressCallback | None = None
    ) -> SyncReport:
        """Bring the index up to HEAD now (``full``: rebuild it from scratch) and say what
        that did; a corrupted file is replaced."""
        with self._lock:
            return self._retrying(lambda: self._current(full, progress)[1])

    def reindex(self, progress: ProgressCallback | None = None) -> SyncReport:
        """Rebuild the index from HEAD (a corrupted file is replaced)."""
        return self.catch_up(full=True, progress=progress)

    def _at(self, commit: str) -> SearchIndex:
        found = self._past.get(commit)
        if found is None:
            found = SearchIndex(":memory:")
            catch_up(found, self.repository, self.namespace, commit=commit)
            self._past[commit] = found
            while len(self._past) > 2:
                self._past.pop(next(iter(self._past))).close()
        return found

    def close(self) -> None:
        """Close every open index."""
        with self._lock:
            for index in [self._index, *self._past.values()]:
                if index is not None:
                    with contextlib.suppress(*DATABASE_ERRORS):
                        index.close()
            self._index = None
            self._past.clear()


def _belongs(repository: Repository, commit: str | None) -> bool:
    if commit is None:
        return True
    try:
        repository.commit_tree(commit)
    except RepositoryError:
        return False
    return True


def catch_up(  # noqa: C901
    index: SearchIndex,
    repository: Repository,
    namespace: str | None = None,
    *,
    full: bool = False,
    progress: ProgressCallback | None = None,
    commit: str | None = None,
) -> SyncReport:
    """Bring the index up to the store's HEAD.

    The session files that differ between the commit the index reflects and HEAD come
    from ``git diff --raw`` (one git call, whatever the number of commits in between);
    only those are parsed again. When that commit is gone (history rewritten) every
    file's blob id is compared with the blob the index read it from instead. ``full``
    drops everything and reads every file. A recorded commit that this repository does
    not have means the index was made for another repository: it is rebuilt.
    ``commit`` indexes that commit instead of HEAD (for views of the past).
    """
    head = commit or repository.head()
    recorded = index.get_meta("commit")
    if head == recorded and not full:
        return SyncReport(commit=head)
    rebuild = full or recorded is None or not _belongs(repository, recorded)
    folders = (session_dir(namespace), archive_dir(namespace))
    changes = None if rebuild or recorded is None else _diff(repository, recorded, head, folders)
    with index.writing(bulk=rebuild):
        if index.get_meta("commit") == head and not full:
            return SyncReport(commit=head)  # another process caught up while we waited
        if index.get_meta("commit") != recorded:
            changes = None  # another process moved it meanwhile: compare everything
        report = SyncReport(commit=head, rebuilt=rebuild)
        if rebuild:
            index.clear()
        if changes is None:
            changes = _compare(repository, index, head, folders, fresh=rebuild)
        wanted: list[tuple[str, str, str]] = []
        for path, blob in changes:
            session_id = (
                id_from_path(path, namespace)
                or id_from_part_path(path, namespace)
                or id_from_archive_path(path, namespace)
            )
            if session_id is None:
                continue
            if blob is None:
                index.remove_path(path)
                index.mark_broken(path, None)
                report.removed += 1
            else:
                wanted.append((path, session_id, blob))
        with contextlib.closing(_contents(repository, wanted)) as contents:
            for done, (path, session_id, blob) in enumerate(wanted, 1):
                session = _read(path, next(contents))
                if isinstance(session, str):
                    index.remove_path(path)
                    index.mark_broken(path, blob, session)
                    report.unreadable.append(path)
                else:
                    if session.id != session_id:
                        session = session.model_copy(update={"id": session_id})
                    index.put_session(session, path, blob, head)
                    if not rebuild:  # a rebuild starts with no file marked broken
                        index.mark_broken(path, None)
                    report.indexed += 1
                if progress is not None:
                    progress(done, len(wanted))
        index.set_meta("commit", head)
    return report


def _diff(
    repository: Repository, old: str, new: str | None, folders: tuple[str, ...]
) -> list[tuple[str, str | None]] | None:
    """(path, new blob id or None when deleted) of the files in ``folders`` that differ
    between two commits, from ``git diff --raw``; None if git cannot tell."""
    if new is None:
        return None
    try:
        out = repository.git(
            "diff",
            "--raw",
            "-z",
            "--no-renames",
            "--no-abbrev",
            old,
            new,
            "--",
            *(folder + "/" for folder in folders),
        )
    except RepositoryError:
        return None
    fields = out.split("\0")
    changes: list[tuple[str, str | None]] = []
    for at in range(0, len(fields) - 1, 2):
        meta, path = fields[at], fields[at + 1]
        parts = meta.split()
        if len(parts) >= 5:
            changes.append((path, None if parts[4].startswith("D") else parts[3]))
    return changes


def _compare(
    repository: Repository,
    index: SearchIndex,
    head: str | None,
    folders: tuple[str, ...],
    *,
    fresh: bool,
) -> list[tuple[str, str | None]]:
    """The same list as :func:`_diff`, by comparing every file's blob id at ``head`` with
    the blob the index read it from (for rebuilds, or when the old commit is gone)."""
    files = {
        path: blob
        for folder in folders
        for path, blob in (session_files(repository, folder, head) if head else {}).items()
    }
    known = {} if fresh else {path: blob for path, (_sid, blob) in index.indexed_blobs().items()}
    broken = {} if fresh else index.broken()
    changes: list[tuple[str, str | None]] = []
    for path, blob in sorted(files.items()):
        if known.pop(path, None) == blob or broken.pop(path, None) == blob:
            continue
        changes.append((path, blob))
    changes.extend((path, None) for path in sorted(set(known) | set(broken)))
    return changes


# from this many changed files on, blobs come through one ``git cat-file --batch`` stream
STREAM_FROM = 64


def _contents(
    repository: Repository, wanted: list[tuple[str, str, str]]
) -> Generator[bytes | str, None, None]:
    """The content of each wanted (path, session id, blob) in order, or the problem as text.

    A rebuild or a large catch-up streams every blob through one git process (no file to
    open, no object id to check); a few files are read from the working tree when it holds
    exactly that blob, which is quicker than starting git.
    """
    if len(wanted) >= STREAM_FROM:
        for blob, data in repository.stream_blobs(blob for _path, _sid, blob in wanted):
            yield f"object {blob} is missing from {repository.root}" if data is None else data
        return
    for path, _session_id, blob in wanted:
        try:
            yield _blob_bytes(repository, path, blob)
        except RepositoryError as exc:
            yield str(exc)


def _read(path: str, content: bytes | str) -> Session | str:
    """The session in a blob's content (lenient: a hand-edit slip elsewhere does not hide
    the rest), or the problem as text."""
    if isinstance(content, str):
        return content
    text = content.decode("utf-8", "replace")
    session, diagnostics = parse_lenient(text, path, remember=False)  # read once: not cached
    if session is None:
        return "; ".join(str(d) for d in diagnostics) or "unreadable"
    return session


def _blob_bytes(repository: Repository, path: str, blob: str) -> bytes:
    """The content of ``blob``, read from the working tree file when it holds exactly that
    blob (checked by its git object id), which is much faster than the object store."""
    try:
        data = read_regular(repository.root / path)  # never opens a FIFO
    except OSError:
        return repository.blob(blob)
    if data is None:
        return repository.blob(blob)
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return data if digest.hexdigest() == blob else repository.blob(blob)
