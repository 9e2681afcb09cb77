"""``AsyncMemoryManager``: every public ``MemoryManager`` method as a typed coroutine.

The work runs in worker threads so the event loop never waits on git or the disk. A batch
(``async with amm.batch(...)``) is bound to one thread, as the synchronous batch is (its
transaction sits in a ``threading.local``): while the block runs, every call made from it
(and from tasks it starts) goes to that batch's own single worker thread, found through a
context variable. Calls from elsewhere wait for the write lock in their own worker thread.
Settings assigned here (``amm.secret_config = ...``) are set on the wrapped manager.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar

from gitmem.errors import Diagnostic, ValidationError
from gitmem.guard.scan import SecretFinding
from gitmem.guard.secrets import SecretConfig
from gitmem.history.asof import StoreView
from gitmem.manager import MemoryManager
from gitmem.models import (
    BatchResult,
    BlameEntry,
    Diff,
    Language,
    Message,
    Review,
    Revision,
    Session,
    SummaryOutcome,
    UndoResult,
)
from gitmem.search.catchup import ProgressCallback, SyncReport
from gitmem.search.methods import ContextMessages, Hits
from gitmem.search.rank import RankConfig
from gitmem.search.tokens import TokenCounter
from gitmem.store.repository import Housekeeping, Repository
from gitmem.summary.engines import LLMConfig, Summarizer
from gitmem.summary.triggers import SummaryConfig
from gitmem.sync.methods import SyncResult
from gitmem.sync.remotes import Remote

P = ParamSpec("P")

T = TypeVar("T")


# the batch running in this context: (the manager it belongs to, its one worker thread)
_BATCH: contextvars.ContextVar[tuple[MemoryManager, ThreadPoolExecutor] | None] = (
    contextvars.ContextVar("gitmem_async_batch", default=None)
)


class _Setting(Generic[T]):
    """An attribute of the wrapped manager, read and set through the async wrapper."""

    def __init__(self, *, writable: bool = True) -> None:
        self.writable = writable
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: AsyncMemoryManager | None, owner: type | None = None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]  # the descriptor, for introspection
        value: T = getattr(obj.manager, self.name)
        return value

    def __set__(self, obj: AsyncMemoryManager, value: T) -> None:
        if not self.writable:
            raise AttributeError(f"{self.name} cannot be set")
        setattr(obj.manager, self.name, value)


class AsyncBatch:
    """What ``amm.batch(...)`` returns: ``async with`` it to group writes into one commit."""

    def __init__(self, amm: AsyncMemoryManager, message: str) -> None:
        self._amm = amm
        self._message = message
        self._pool: ThreadPoolExecutor | None = None
        self._cm: AbstractContextManager[BatchResult] | None = None
        self._token: contextvars.Token[tuple[MemoryManager, ThreadPoolExecutor] | None] | None
        self._token = None

    async def __aenter__(self) -> BatchResult:
        if _BATCH.get() is not None:
            raise ValidationError("batches do not nest")
        self._amm._refuse_loop_batch()
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(1, thread_name_prefix="gitmem-batch")
        cm = self._amm.manager.batch(self._message)
        try:
            result = await loop.run_in_executor(pool, cm.__enter__)
        except BaseException:
            pool.shutdown(wait=False)
            raise
        self._pool, self._cm = pool, cm
        self._token = _BATCH.set((self._amm.manager, pool))
        return result

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._pool is not None and self._cm is not None and self._token is not None
        _BATCH.reset(self._token)
        loop = asyncio.get_running_loop()
        try:
            # the commit (or the rollback) runs on the thread that holds the transaction
            return bool(await loop.run_in_executor(self._pool, self._cm.__exit__, kind, exc, tb))
        finally:
            self._pool.shutdown(wait=False)


class AsyncMemoryManager:
    """``MemoryManager`` with coroutine methods; the work runs in worker threads.

    ``manager`` is the wrapped synchronous ``MemoryManager``. ``init`` and the constructor
    open the store synchronously, as ``MemoryManager`` does.
    """

    secret_config = _Setting[SecretConfig]()
    summary_config = _Setting[SummaryConfig]()
    rank_config = _Setting[RankConfig]()
    summarizer = _Setting["Summarizer | None"]()
    token_counter = _Setting["TokenCounter | None"]()
    max_message_bytes = _Setting[int]()
    agent = _Setting[str]()
    model = _Setting["str | None"]()
    language = _Setting[Language]()
    namespace = _Setting["str | None"](writable=False)
    path = _Setting[Path](writable=False)
    repository = _Setting[Repository](writable=False)

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
        manager = MemoryManager(
            path, init=init, agent=agent, email=email, model=model, language=language,
            namespace=namespace, housekeeping=housekeeping, lock_timeout=lock_timeout,
            adopt=adopt,
        )  # fmt: skip
        object.__setattr__(self, "manager", manager)

    manager: MemoryManager

    def __setattr__(self, name: str, value: object) -> None:
        # a setting goes to the wrapped manager; a misspelt one fails instead of being lost
        if isinstance(getattr(type(self), name, None), _Setting):
            object.__setattr__(self, name, value)  # the descriptor forwards it
        elif not name.startswith("_") and hasattr(self.manager, name):
            if callable(getattr(self.manager, name)):
                raise AttributeError(f"{name} is a method of the manager, not a setting")
            setattr(self.manager, name, value)
        else:
            raise AttributeError(f"AsyncMemoryManager has no setting {name!r}")

    @classmethod
    def init(cls, path: str | os.PathLike[str], **kwargs: Any) -> AsyncMemoryManager:
        """Create a new store at ``path`` (or open it if it is one already)."""
        return cls(path, init=True, **kwargs)

    @classmethod
    async def clone(
        cls, url: str, path: str | os.PathLike[str], **kwargs: Any
    ) -> AsyncMemoryManager:
        """``MemoryManager.clone`` in a worker thread; returns an ``AsyncMemoryManager``."""
        manager = await asyncio.to_thread(MemoryManager.clone, url, path, **kwargs)
        amm = cls.__new__(cls)
        object.__setattr__(amm, "manager", manager)
        return amm

    async def __aenter__(self) -> AsyncMemoryManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def batch(self, message: str = "Batch of memory changes") -> AsyncBatch:
        """Group every write made inside ``async with amm.batch(...) as b`` into one commit.

        ``b.commit`` is set when the block ends; an exception drops all its changes.
        """
        return AsyncBatch(self, message)

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        bound = _BATCH.get()
        if bound is not None and bound[0] is self.manager:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(bound[1], functools.partial(fn, *args, **kwargs))
        self._refuse_loop_batch()
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _refuse_loop_batch(self) -> None:
        if getattr(self.manager._local, "batch", None) is not None:
            # the sync batch holds the write lock in this (the event loop's) thread: a worker
            # thread would wait for it forever while the loop waits for the worker
            raise ValidationError(
                "a synchronous batch is open in the event loop's thread; "
                "use `async with amm.batch(...)` in async code"
            )

    async def at(self, rev: str | datetime) -> StoreView:
        """``MemoryManager.at`` in a worker thread."""
        return await self._run(self.manager.at, rev)

    async def blame(self, session_id: str, *, commit: str | None = None) -> list[BlameEntry]:
        """``MemoryManager.blame`` in a worker thread."""
        return await self._run(self.manager.blame, session_id, commit=commit)

    async def check(self, *, commit: str | None = None) -> list[Diagnostic]:
        """``MemoryManager.check`` in a worker thread."""
        return await self._run(self.manager.check, commit=commit)

    async def close(self) -> None:
        """``MemoryManager.close`` in a worker thread."""
        return await self._run(self.manager.close)

    async def close_index(self) -> None:
        """``MemoryManager.close_index`` in a worker thread."""
        return await self._run(self.manager.close_index)

    async def delete_session(self, session_id: str) -> str:
        """``MemoryManager.delete_session`` in a worker thread."""
        return await self._run(self.manager.delete_session, session_id)

    async def diff(
        self,
        session_id: str | None = None,
        a: str | datetime | None = None,
        b: str | datetime | None = None,
        *,
        text: bool = True,
    ) -> Diff:
        """``MemoryManager.diff`` in a worker thread."""
        return await self._run(self.manager.diff, session_id, a, b, text=text)

    async def fetch(self, remote: str = "origin", branch: str | None = None) -> str | None:
        """``MemoryManager.fetch`` in a worker thread."""
        return await self._run(self.manager.fetch, remote, branch)

    async def head(self) -> str | None:
        """``MemoryManager.head`` in a worker thread."""
        return await self._run(self.manager.head)

    async def history(
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
    ) -> list[Revision]:
        """``MemoryManager.history`` in a worker thread."""
        return await self._run(
            self.manager.history,
            session_id,
            op=op,
            agent=agent,
            model=model,
            since=since,
            until=until,
            limit=limit,
            changes=changes,
            commit=commit,
        )

    async def install_hooks(self) -> list[Path]:
        """``MemoryManager.install_hooks`` in a worker thread."""
        return await self._run(self.manager.install_hooks)

    async def llm_config(self) -> LLMConfig | None:
        """``MemoryManager.llm_config`` in a worker thread (it reads git settings)."""
        return await self._run(self.manager.llm_config)

    async def list_sessions(
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
        """``MemoryManager.list_sessions`` in a worker thread."""
        return await self._run(
            self.manager.list_sessions,
            tags=tags,
            participant=participant,
            project=project,
            since=since,
            until=until,
            metadata=metadata,
            commit=commit,
        )

    async def load_memory(
        self, session_id: str, *, commit: str | None = None, include_archive: bool = False
    ) -> Session | None:
        """``MemoryManager.load_memory`` in a worker thread."""
        return await self._run(
            self.manager.load_memory, session_id, commit=commit, include_archive=include_archive
        )

    async def maybe_summarize(
        self, session_id: str, *, now: datetime | str | None = None
    ) -> SummaryOutcome | None:
        """``MemoryManager.maybe_summarize`` in a worker thread."""
        return await self._run(self.manager.maybe_summarize, session_id, now=now)

    @staticmethod
    async def merge_file(base: Path, ours: Path, theirs: Path, path: str) -> tuple[int, list[str]]:
        """``MemoryManager.merge_file`` in a worker thread."""
        return await asyncio.to_thread(MemoryManager.merge_file, base, ours, theirs, path)

    async def namespaces(self) -> list[str]:
        """``MemoryManager.namespaces`` in a worker thread."""
        return await self._run(self.manager.namespaces)

    async def pull(self, remote: str = "origin", branch: str | None = None) -> SyncResult:
        """``MemoryManager.pull`` in a worker thread."""
        return await self._run(self.manager.pull, remote, branch)

    async def push(self, remote: str = "origin", branch: str | None = None) -> bool:
        """``MemoryManager.push`` in a worker thread."""
        return await self._run(self.manager.push, remote, branch)

    async def put_session(
        self, session: Session, *, op: str = "import", subject: str = ""
    ) -> str | None:
        """``MemoryManager.put_session`` in a worker thread."""
        return await self._run(self.manager.put_session, session, op=op, subject=subject)

    async def reindex(self, progress: ProgressCallback | None = None) -> SyncReport:
        """``MemoryManager.reindex`` in a worker thread."""
        return await self._run(self.manager.reindex, progress)

    async def remote_add(self, name: str, url: str) -> Remote:
        """``MemoryManager.remote_add`` in a worker thread."""
        return await self._run(self.manager.remote_add, name, url)

    async def remotes(self) -> list[Remote]:
        """``MemoryManager.remotes`` in a worker thread."""
        return await self._run(self.manager.remotes)

    async def resolve(self, rev: str | datetime) -> str:
        """``MemoryManager.resolve`` in a worker thread."""
        return await self._run(self.manager.resolve, rev)

    async def restore_session(self, session_id: str, rev: str | datetime | None = None) -> str:
        """``MemoryManager.restore_session`` in a worker thread."""
        return await self._run(self.manager.restore_session, session_id, rev)

    async def retrieve_context(
        self,
        session_id: str,
        query: str,
        max_tokens: int = 2000,
        *,
        k: int = 8,
        recent_turns: int = 8,
        tags: Iterable[str] = (),
        project: str | None = None,
        participant: str | Iterable[str] | None = None,
        token_counter: TokenCounter | None = None,
        explain: bool = False,
        commit: str | None = None,
    ) -> ContextMessages:
        """``MemoryManager.retrieve_context`` in a worker thread."""
        return await self._run(
            self.manager.retrieve_context,
            session_id,
            query,
            max_tokens,
            k=k,
            recent_turns=recent_turns,
            tags=tags,
            project=project,
            participant=participant,
            token_counter=token_counter,
            explain=explain,
            commit=commit,
        )

    async def revert(self, commit: str | datetime) -> str | None:
        """``MemoryManager.revert`` in a worker thread."""
        return await self._run(self.manager.revert, commit)

    async def revert_where(
        self,
        *,
        agent: str | None = None,
        model: str | None = None,
        op: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        dry_run: bool = True,
    ) -> UndoResult:
        """``MemoryManager.revert_where`` in a worker thread."""
        return await self._run(
            self.manager.revert_where,
            agent=agent,
            model=model,
            op=op,
            since=since,
            until=until,
            dry_run=dry_run,
        )

    async def review_accept(self, session_id: str) -> str:
        """``MemoryManager.review_accept`` in a worker thread."""
        return await self._run(self.manager.review_accept, session_id)

    async def review_branch(self, session_id: str) -> str:
        """``MemoryManager.review_branch`` in a worker thread."""
        return await self._run(self.manager.review_branch, session_id)

    async def review_list(self) -> list[Review]:
        """``MemoryManager.review_list`` in a worker thread."""
        return await self._run(self.manager.review_list)

    async def review_reject(self, session_id: str) -> str:
        """``MemoryManager.review_reject`` in a worker thread."""
        return await self._run(self.manager.review_reject, session_id)

    async def review_show(self, session_id: str) -> Review:
        """``MemoryManager.review_show`` in a worker thread."""
        return await self._run(self.manager.review_show, session_id)

    async def rollback(self, session_id: str, to: str | datetime) -> str | None:
        """``MemoryManager.rollback`` in a worker thread."""
        return await self._run(self.manager.rollback, session_id, to)

    async def run_hook(self, name: str, args: Sequence[str] = ()) -> list[Diagnostic]:
        """``MemoryManager.run_hook`` in a worker thread."""
        return await self._run(self.manager.run_hook, name, args)

    async def save_interaction(
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
        """``MemoryManager.save_interaction`` in a worker thread."""
        return await self._run(
            self.manager.save_interaction,
            session_id,
            user,
            assistant,
            timestamp,
            tags,
            metadata,
            interaction_id=interaction_id,
        )

    async def save_messages(
        self,
        session_id: str,
        messages: Sequence[Message | Mapping[str, str]],
        timestamp: datetime | str | None = None,
        interaction_id: str | None = None,
        *,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str | None:
        """``MemoryManager.save_messages`` in a worker thread."""
        return await self._run(
            self.manager.save_messages,
            session_id,
            messages,
            timestamp,
            interaction_id,
            tags=tags,
            metadata=metadata,
        )

    async def scan_history(self, *, config: SecretConfig | None = None) -> list[SecretFinding]:
        """``MemoryManager.scan_history`` in a worker thread."""
        return await self._run(self.manager.scan_history, config=config)

    async def search(
        self,
        query: str,
        k: int = 10,
        *,
        tags: Iterable[str] = (),
        project: str | None = None,
        participant: str | Iterable[str] | None = None,
        session: str | Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        include_links: bool = False,
        explain: bool = False,
        commit: str | None = None,
    ) -> Hits:
        """``MemoryManager.search`` in a worker thread."""
        return await self._run(
            self.manager.search,
            query,
            k,
            tags=tags,
            project=project,
            participant=participant,
            session=session,
            since=since,
            until=until,
            include_links=include_links,
            explain=explain,
            commit=commit,
        )

    async def session_ids(self, *, commit: str | None = None) -> list[str]:
        """``MemoryManager.session_ids`` in a worker thread."""
        return await self._run(self.manager.session_ids, commit=commit)

    async def summarize(
        self,
        session_id: str,
        *,
        trigger: str = "manual",
        summarizer: Summarizer | None = None,
        offline: bool = False,
        count: int | None = None,
        reason: str = "",
    ) -> str:
        """``MemoryManager.summarize`` in a worker thread."""
        return await self._run(
            self.manager.summarize,
            session_id,
            trigger=trigger,
            summarizer=summarizer,
            offline=offline,
            count=count,
            reason=reason,
        )

    async def summarize_outcome(
        self,
        session_id: str,
        *,
        trigger: str = "manual",
        summarizer: Summarizer | None = None,
        offline: bool = False,
        count: int | None = None,
        reason: str = "",
    ) -> SummaryOutcome:
        """``MemoryManager.summarize_outcome`` in a worker thread."""
        return await self._run(
            self.manager.summarize_outcome,
            session_id,
            trigger=trigger,
            summarizer=summarizer,
            offline=offline,
            count=count,
            reason=reason,
        )

    async def change_session(
        self,
        session_id: str,
        change: Callable[[Session | None], Session | None],
        *,
        op: str,
        subject: str,
    ) -> str | None:
        """``MemoryManager.change_session`` in a worker thread (``change`` runs there)."""
        return await self._run(self.manager.change_session, session_id, change, op=op,
                               subject=subject)

    async def load_archive(self, session_id: str, *, commit: str | None = None
                           ) -> Session | None:
        """``MemoryManager.load_archive`` in a worker thread."""
        return await self._run(self.manager.load_archive, session_id, commit=commit)

    async def summarize_idle(
        self,
        older_than: str | timedelta,
        *,
        now: datetime | str | None = None,
        summarizer: Summarizer | None = None,
        offline: bool = False,
    ) -> list[SummaryOutcome]:
        """``MemoryManager.summarize_idle`` in a worker thread."""
        return await self._run(
            self.manager.summarize_idle, older_than, now=now, summarizer=summarizer, offline=offline
        )

    async def sync(
        self, remote: str = "origin", branch: str | None = None, *, attempts: int = 8,
        max_wait: float = 15.0,
    ) -> SyncResult:
        """``MemoryManager.sync`` in a worker thread."""
        return await self._run(self.manager.sync, remote, branch, attempts=attempts,
                               max_wait=max_wait)

    async def update_metadata(
        self,
        session_id: str,
        *,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> str | None:
        """``MemoryManager.update_metadata`` in a worker thread."""
        return await self._run(
            self.manager.update_metadata,
            session_id,
            add_tags=add_tags,
            remove_tags=remove_tags,
            metadata=metadata,
        )

    @staticmethod
    async def validate_files(paths: Sequence[str]) -> list[Diagnostic]:
        """``MemoryManager.validate_files`` in a worker thread."""
        return await asyncio.to_thread(MemoryManager.validate_files, paths)
