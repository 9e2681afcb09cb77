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
import contextlib
import contextvars
import functools
import os
import types
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from gitmem.errors import Diagnostic, ValidationError
from gitmem.facts.proposal import FactsConfig
from gitmem.guard.secrets import SecretConfig
from gitmem.llm.embeddings import EmbedConfig
from gitmem.manager import MemoryManager, Settings
from gitmem.models import BatchResult, Language
from gitmem.search.rankconfig import RankConfig
from gitmem.search.tokens import TokenCounter
from gitmem.store.repository import Repository
from gitmem.summary.engines import Summarizer
from gitmem.summary.triggers import SummaryConfig

P = ParamSpec("P")
T = TypeVar("T")

# the batch running in this context: (the manager it belongs to, its one worker thread)
_BATCH: contextvars.ContextVar[tuple[MemoryManager, ThreadPoolExecutor] | None] = (
    contextvars.ContextVar("gitmem_async_batch", default=None)
)
# the agent this context writes as (``amm.acting_as``): (the manager, the agent name)
_ACTING: contextvars.ContextVar[tuple[MemoryManager, str] | None] = contextvars.ContextVar(
    "gitmem_async_acting", default=None
)


@contextlib.contextmanager
def _acting(manager: MemoryManager, agent: str) -> Iterator[None]:
    token = _ACTING.set((manager, agent))
    try:
        yield
    finally:
        _ACTING.reset(token)


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


class _Coroutine(Generic[P, T]):
    """A ``MemoryManager`` method as a coroutine of ``AsyncMemoryManager``.

    The parameters and the result type come from the method itself (``ParamSpec``), so mypy
    checks every call, ``inspect.signature`` shows the method's own parameters, and a new
    parameter on the manager needs no edit here.
    """

    def __init__(self, method: Callable[Concatenate[MemoryManager, P], T]) -> None:
        name = method.__name__

        @functools.wraps(method)
        async def call(amm: AsyncMemoryManager, /, *args: P.args, **kwargs: P.kwargs) -> T:
            result: T = await amm._run(getattr(amm.manager, name), *args, **kwargs)
            return result

        call.__doc__ = f"``MemoryManager.{name}`` in a worker thread."
        self.call = call

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[..., Awaitable[T]]: ...

    @overload
    def __get__(
        self, obj: AsyncMemoryManager, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(
        self, obj: AsyncMemoryManager | None, owner: type | None = None
    ) -> Callable[..., Any]:
        return self.call if obj is None else types.MethodType(self.call, obj)


def _opened_as(
    opens: Callable[P, MemoryManager],
) -> Callable[
    [Callable[[AsyncMemoryManager, MemoryManager], None]],
    Callable[Concatenate[AsyncMemoryManager, P], None],
]:
    """Give ``AsyncMemoryManager.__init__`` the parameters of ``MemoryManager``'s own.

    The decorated body receives the manager ``opens`` made from them, so a new constructor
    parameter on the manager needs no edit here (as with :class:`_Coroutine`).
    """

    def decorate(
        body: Callable[[AsyncMemoryManager, MemoryManager], None],
    ) -> Callable[Concatenate[AsyncMemoryManager, P], None]:
        @functools.wraps(MemoryManager.__init__)
        def __init__(amm: AsyncMemoryManager, /, *args: P.args, **kwargs: P.kwargs) -> None:
            body(amm, opens(*args, **kwargs))

        return __init__

    return decorate


class AsyncBatch:
    """What ``amm.batch(...)`` returns: ``async with`` it to group writes into one commit."""

    def __init__(
        self,
        amm: AsyncMemoryManager,
        message: str,
        trailers: Mapping[str, str] | None = None,
        flat: bool = False,
    ) -> None:
        self._amm = amm
        self._message = message
        self._trailers = trailers
        self._flat = flat
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
        cm = self._amm.manager.batch(self._message, trailers=self._trailers, flat=self._flat)
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
        tb: types.TracebackType | None,
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
    summarizer = _Setting[Summarizer | None]()
    token_counter = _Setting[TokenCounter | None]()
    max_message_bytes = _Setting[int]()
    max_fact_bytes = _Setting[int]()
    facts_config = _Setting[FactsConfig]()
    facts_path = _Setting[str](writable=False)
    embed_settings = _Setting[EmbedConfig | None]()
    via = _Setting[str | None]()
    agent = _Setting[str]()
    model = _Setting[str | None]()
    language = _Setting[Language]()
    namespace = _Setting[str | None](writable=False)
    path = _Setting[Path](writable=False)
    repository = _Setting[Repository](writable=False)
    settings = _Setting[Settings](writable=False)

    manager: MemoryManager

    @_opened_as(MemoryManager)
    def __init__(self, manager: MemoryManager) -> None:
        object.__setattr__(self, "manager", manager)

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
    def over(cls, manager: MemoryManager) -> AsyncMemoryManager:
        """An async manager over ``manager``, already open (e.g. the one a server holds)."""
        amm = cls.__new__(cls)
        object.__setattr__(amm, "manager", manager)
        return amm

    @classmethod
    async def clone(
        cls, url: str, path: str | os.PathLike[str], **kwargs: Any
    ) -> AsyncMemoryManager:
        """``MemoryManager.clone`` in a worker thread; returns an ``AsyncMemoryManager``."""
        manager = await asyncio.to_thread(MemoryManager.clone, url, path, **kwargs)
        return cls.over(manager)

    async def __aenter__(self) -> AsyncMemoryManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def batch(
        self,
        message: str = "Batch of memory changes",
        *,
        trailers: Mapping[str, str] | None = None,
        flat: bool = False,
    ) -> AsyncBatch:
        """Group every write made inside ``async with amm.batch(...) as b`` into one commit
        (with ``trailers`` added to gitmem's own; ``flat`` as for ``MemoryManager.batch``).

        ``b.commit`` is set when the block ends; an exception drops all its changes.
        """
        return AsyncBatch(self, message, trailers, flat)

    def acting_as(self, agent: str) -> AbstractContextManager[None]:
        """Within the ``with`` block (and the tasks it starts), every call writes as ``agent``:
        the call enters ``MemoryManager.acting_as`` in its worker thread. A name no commit can
        carry raises ValidationError here."""
        self.manager.acting_as(agent)  # checks the name now, as the manager does
        return _acting(self.manager, agent)

    async def run(
        self, work: Callable[Concatenate[MemoryManager, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``work(manager, *args, **kwargs)`` in a worker thread, as every coroutine here runs
        (in this context's batch thread, as the agent of ``acting_as``): for work that makes
        several manager calls at once, e.g. an MCP tool."""
        return await self._run(functools.partial(work, self.manager), *args, **kwargs)

    async def _run(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        fn = call
        acting = _ACTING.get()
        if acting is not None and acting[0] is self.manager:
            manager, agent = acting

            def as_agent(*args: P.args, **kwargs: P.kwargs) -> T:
                with manager.acting_as(agent):
                    return call(*args, **kwargs)

            fn = as_agent
        bound = _BATCH.get()
        if bound is not None and bound[0] is self.manager:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(bound[1], functools.partial(fn, *args, **kwargs))
        self._refuse_loop_batch()
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _refuse_loop_batch(self) -> None:
        if self.manager.in_batch():
            # the sync batch holds the write lock in this (the event loop's) thread: a worker
            # thread would wait for it forever while the loop waits for the worker
            raise ValidationError(
                "a synchronous batch is open in the event loop's thread; "
                "use `async with amm.batch(...)` in async code"
            )

    # every other public method, as a coroutine with the manager's own typed parameters
    at = _Coroutine(MemoryManager.at)
    blame = _Coroutine(MemoryManager.blame)
    browse_sessions = _Coroutine(MemoryManager.browse_sessions)
    change_facts = _Coroutine(MemoryManager.change_facts)
    change_session = _Coroutine(MemoryManager.change_session)
    check = _Coroutine(MemoryManager.check)
    close = _Coroutine(MemoryManager.close)
    close_index = _Coroutine(MemoryManager.close_index)
    consolidate = _Coroutine(MemoryManager.consolidate)
    delete_session = _Coroutine(MemoryManager.delete_session)
    diff = _Coroutine(MemoryManager.diff)
    fact = _Coroutine(MemoryManager.fact)
    fact_blame = _Coroutine(MemoryManager.fact_blame)
    fact_history = _Coroutine(MemoryManager.fact_history)
    facts = _Coroutine(MemoryManager.facts)
    fetch = _Coroutine(MemoryManager.fetch)
    forget = _Coroutine(MemoryManager.forget)
    head = _Coroutine(MemoryManager.head)
    in_batch = _Coroutine(MemoryManager.in_batch)
    history = _Coroutine(MemoryManager.history)
    install_hooks = _Coroutine(MemoryManager.install_hooks)
    embed_pending = _Coroutine(MemoryManager.embed_pending)
    embedding_config = _Coroutine(MemoryManager.embedding_config)
    link_graph = _Coroutine(MemoryManager.link_graph)
    list_sessions = _Coroutine(MemoryManager.list_sessions)
    list_session_infos = _Coroutine(MemoryManager.list_session_infos)
    llm_config = _Coroutine(MemoryManager.llm_config)
    load_archive = _Coroutine(MemoryManager.load_archive)
    load_memory = _Coroutine(MemoryManager.load_memory)
    maybe_consolidate = _Coroutine(MemoryManager.maybe_consolidate)
    maybe_summarize = _Coroutine(MemoryManager.maybe_summarize)
    memory_file = _Coroutine(MemoryManager.memory_file)
    namespaces = _Coroutine(MemoryManager.namespaces)
    pin_fact = _Coroutine(MemoryManager.pin_fact)
    pull = _Coroutine(MemoryManager.pull)
    push = _Coroutine(MemoryManager.push)
    put_session = _Coroutine(MemoryManager.put_session)
    reindex = _Coroutine(MemoryManager.reindex)
    remember = _Coroutine(MemoryManager.remember)
    remote_add = _Coroutine(MemoryManager.remote_add)
    remotes = _Coroutine(MemoryManager.remotes)
    resolve = _Coroutine(MemoryManager.resolve)
    restore_session = _Coroutine(MemoryManager.restore_session)
    retrieve_context = _Coroutine(MemoryManager.retrieve_context)
    revert = _Coroutine(MemoryManager.revert)
    revert_where = _Coroutine(MemoryManager.revert_where)
    purge = _Coroutine(MemoryManager.purge)
    revert_preview = _Coroutine(MemoryManager.revert_preview)
    review_accept = _Coroutine(MemoryManager.review_accept)
    review_branch = _Coroutine(MemoryManager.review_branch)
    review_facts_accept = _Coroutine(MemoryManager.review_facts_accept)
    review_facts_branch = _Coroutine(MemoryManager.review_facts_branch)
    review_facts_reject = _Coroutine(MemoryManager.review_facts_reject)
    review_facts_show = _Coroutine(MemoryManager.review_facts_show)
    review_list = _Coroutine(MemoryManager.review_list)
    review_reject = _Coroutine(MemoryManager.review_reject)
    review_show = _Coroutine(MemoryManager.review_show)
    rollback = _Coroutine(MemoryManager.rollback)
    run_hook = _Coroutine(MemoryManager.run_hook)
    save_interaction = _Coroutine(MemoryManager.save_interaction)
    save_messages = _Coroutine(MemoryManager.save_messages)
    scan_history = _Coroutine(MemoryManager.scan_history)
    search = _Coroutine(MemoryManager.search)
    session_ids = _Coroutine(MemoryManager.session_ids)
    session_listings = _Coroutine(MemoryManager.session_listings)
    summarize = _Coroutine(MemoryManager.summarize)
    summarize_idle = _Coroutine(MemoryManager.summarize_idle)
    summarize_outcome = _Coroutine(MemoryManager.summarize_outcome)
    supersede = _Coroutine(MemoryManager.supersede)
    sync = _Coroutine(MemoryManager.sync)
    update_fact = _Coroutine(MemoryManager.update_fact)
    update_metadata = _Coroutine(MemoryManager.update_metadata)

    @staticmethod
    async def merge_file(base: Path, ours: Path, theirs: Path, path: str) -> tuple[int, list[str]]:
        """``MemoryManager.merge_file`` in a worker thread."""
        return await asyncio.to_thread(MemoryManager.merge_file, base, ours, theirs, path)

    @staticmethod
    async def validate_files(paths: Sequence[str]) -> list[Diagnostic]:
        """``MemoryManager.validate_files`` in a worker thread."""
        return await asyncio.to_thread(MemoryManager.validate_files, paths)
