"""``MemoryManager``: the one object callers use; every front end is a thin layer over it.

It is the composition root: it opens one :class:`~gitmem.core.SessionStore` (the state and
the save path) and builds the feature objects over it, each given what it depends on:

    summaries                     (summary/methods.py)
    facts          <- store       (facts/methods.py)
    consolidation  <- facts, summaries   (facts/consolidation.py)
    search         <- summaries, facts   (search/methods.py)
    history, sync  <- store       (history/methods.py, sync/methods.py)

What a save runs after committing is the store's ``after_save`` list, in this order:
summaries first, so that a summary written by a save reaches consolidation in the same save.
Every public name is one line below saying which feature answers it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from gitmem.core import SessionStore
from gitmem.facts.consolidation import Consolidator
from gitmem.facts.methods import Facts
from gitmem.facts.proposal import FactsConfig
from gitmem.guard.methods import Guard
from gitmem.guard.names import agent_identity
from gitmem.guard.secrets import SecretConfig, redact
from gitmem.history.asof import StoreView
from gitmem.history.methods import History
from gitmem.llm.config import LLMConfig
from gitmem.llm.embeddings import EmbedConfig
from gitmem.models import Language
from gitmem.search.methods import Search
from gitmem.search.rankconfig import RankConfig
from gitmem.search.tokens import TokenCounter
from gitmem.store.discover import open_repository
from gitmem.store.repository import Housekeeping, Repository
from gitmem.store.transaction import Identity
from gitmem.summary.engines import Summarizer
from gitmem.summary.methods import Summaries
from gitmem.summary.triggers import SummaryConfig
from gitmem.sync.methods import Sync, clone_store

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound="MemoryManager")


class _Call(Generic[P, T]):
    """A public method of ``MemoryManager`` answered by one of its parts.

    The parameters, result type and docstring are the part's method's own, so mypy checks
    every call and ``help()`` shows the real documentation.
    """

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], T]) -> None:
        self.part = part
        self.method = method
        self.name = method.__name__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[Concatenate[Any, P], T]: ...

    @overload
    def __get__(self, obj: MemoryManager, owner: type | None = None) -> Callable[P, T]: ...

    def __get__(self, obj: MemoryManager | None, owner: type | None = None) -> Callable[..., T]:
        if obj is None:
            return self.method
        bound: Callable[P, T] = getattr(getattr(obj, self.part), self.name)
        return bound


class _Setting(Generic[T]):
    """A setting of one part, read and set on ``MemoryManager`` (``mm.summary_config = ...``)
    or ``Settings``; ``name`` is the part's attribute when it differs."""

    def __init__(self, part: str, name: str = "", *, writable: bool = True) -> None:
        self.part = part
        self.writable = writable
        self.name = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def __get__(self, obj: object | None, owner: type | None = None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]  # the descriptor, for introspection
        value: T = getattr(getattr(obj, self.part), self.name)
        return value

    def __set__(self, obj: object, value: T) -> None:
        if not self.writable:
            raise AttributeError(f"{self.name} cannot be set")
        setattr(getattr(obj, self.part), self.name, value)


class Settings:
    """Every setting of a store in one object (``mm.settings``): each is read from the
    store's git config (``gitmem.*``, one read for all) the first time it is needed, and
    assigning one overrides it for this manager.

    ``secrets`` (``gitmem.secrets.*``), ``summary`` (``gitmem.summary.*``, ``gitmem.llm.*``),
    ``embed`` (None: ``gitmem.embed.*`` and ``GITMEM_EMBED_*``), ``facts``
    (``gitmem.facts.*``), ``rank`` (the search weights), ``summarizer`` and ``token_counter``
    (None: the built-in ones); ``llm`` and ``embedding`` are what the store resolved.
    """

    secrets: _Setting[SecretConfig] = _Setting("_guard", "secret_config")
    summary: _Setting[SummaryConfig] = _Setting("_summaries", "summary_config")
    embed: _Setting[EmbedConfig | None] = _Setting("_summaries", "embed_settings")
    facts: _Setting[FactsConfig] = _Setting("_consolidation", "facts_config")
    rank: _Setting[RankConfig] = _Setting("_search", "rank_config")
    summarizer: _Setting[Summarizer | None] = _Setting("_summaries")
    token_counter: _Setting[TokenCounter | None] = _Setting("_search")

    def __init__(self, manager: MemoryManager) -> None:
        self._guard = manager._guard
        self._summaries = manager._summaries
        self._consolidation = manager._consolidation
        self._search = manager._search

    @property
    def llm(self) -> LLMConfig | None:
        """The LLM the store summarizes and consolidates with (None: offline)."""
        return self._summaries.llm_config()

    @property
    def embedding(self) -> EmbedConfig | None:
        """The embedding model search uses (None: lexical search only)."""
        return self._summaries.embedding_config()


class MemoryManager:
    """Long-term conversation memory in a git repository of Markdown files."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        init: bool = False,
        agent: str = "gitmem",
        email: str | None = None,
        model: str | None = None,
        via: str | None = None,
        language: Language = "en",
        namespace: str | None = None,
        housekeeping: Housekeeping | None = None,
        lock_timeout: float = 30.0,
        adopt: bool = False,
    ) -> None:
        """Open the store at ``path`` (with ``init``, create it first).

        Args:
            path: the store's folder (a git repository with a working tree).
            init: create the store if it does not exist yet.
            agent: the name recorded as commit author and in ``Gitmem-Agent`` trailers.
            email: the author email (default ``<agent>@gitmem.local``).
            model: the LLM model name recorded in ``Gitmem-Model`` trailers, if any.
            via: the front end the writes come through (``Gitmem-Via`` trailer, e.g. ``mcp``).
            language: labels for new session files, ``"en"`` or ``"zh"``.
            namespace: keep this manager's sessions apart from other namespaces.
            housekeeping: when to pack loose objects in the background.
            lock_timeout: seconds to wait for the store's write lock before giving up.
            adopt: with ``init``, make an existing git repository that is not a store one (a
                commit adding the merge attributes); else such a repository is refused
                (:class:`~gitmem.errors.NotAStore`), as without ``init``.
        """
        identity = agent_identity(agent, email)
        opening = identity
        if init:  # the first commit is written before the store's settings can be read
            opening = Identity(
                redact(identity.name, label=True)[0], redact(identity.email, label=True)[0]
            )
        repo = open_repository(
            path,
            init=init,
            adopt_it=adopt,
            identity=opening,
            housekeeping=housekeeping,
            lock_timeout=lock_timeout,
        )
        store = SessionStore(
            repo,
            agent=identity.name,
            model=model,
            via=via,
            language=language,
            namespace=namespace,
        )
        self._store = store
        self._guard: Guard = store.guard
        self._summaries = Summaries(store)
        self._facts = Facts(store)
        self._consolidation = Consolidator(store, self._facts, self._summaries)
        self._search = Search(store, self._summaries, self._facts)
        self._history = History(store)
        self._sync = Sync(store)  # checks the namespace and sets up the merge driver
        store.listing = self._search.listed_sessions  # the index's rows, not every file
        store.info_listing = self._search.listed_session_infos
        store.before_save[:] = [self._summaries.before_save]
        # summaries first: consolidation then sees the summary the same save wrote
        store.after_save[:] = [self._summaries.after_save, self._consolidation.after_save]
        self.settings = Settings(self)

    @classmethod
    def init(cls: type[M], path: str | os.PathLike[str], **kwargs: Any) -> M:
        """Create a new store at ``path`` (or open it if it is one already)."""
        return cls(path, init=True, **kwargs)

    @classmethod
    def clone(cls: type[M], url: str, path: str | os.PathLike[str], **kwargs: Any) -> M:
        """Clone the memory store at ``url`` into ``path`` and open it.

        Cloning an empty repository creates a fresh store there (pushed by the first
        ``sync``). Extra keyword arguments go to the manager (``agent=``, ``namespace=``...).

        Raises:
            RepositoryError: the remote cannot be reached or is not a gitmem store (the
                half-made clone is removed again).
        """
        return clone_store(url, path, lambda target, init: cls(target, init=init, **kwargs))

    def __enter__(self: M) -> M:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def repository(self) -> Repository:
        """The repository layer underneath (for front ends that need raw history)."""
        return self._store.repo

    def at(self, rev: str | datetime) -> StoreView:
        """A read-only view of the store as it was at ``rev`` (a sha, ``HEAD~3``, a branch, a
        datetime or an ISO date: the last commit at or before it).

        The view has ``load_memory``, ``session_ids``, ``list_sessions`` and every other
        manager method that can read a past commit (``search``, ``retrieve_context`` when
        they take ``commit=``); anything that would write raises ReadOnlyError.
        """
        return StoreView(self, self._store.repo.resolve(rev), str(rev))

    # --- the store: state, reading, the save path -------------------------------------------
    path: _Setting[Path] = _Setting("_store", writable=False)
    agent: _Setting[str] = _Setting("_store")
    model: _Setting[str | None] = _Setting("_store")
    via: _Setting[str | None] = _Setting("_store")
    language: _Setting[Language] = _Setting("_store")
    namespace: _Setting[str | None] = _Setting("_store", writable=False)
    close = _Call("_store", SessionStore.close)
    acting_as = _Call("_store", SessionStore.acting_as)
    head = _Call("_store", SessionStore.head)
    load_memory = _Call("_store", SessionStore.load_memory)
    load_archive = _Call("_store", SessionStore.load_archive)
    session_ids = _Call("_store", SessionStore.session_ids)
    list_sessions = _Call("_store", SessionStore.list_sessions)
    list_session_infos = _Call("_store", SessionStore.list_session_infos)
    batch = _Call("_store", SessionStore.batch)
    in_batch = _Call("_store", SessionStore.in_batch)
    change_session = _Call("_store", SessionStore.change_session)
    save_messages = _Call("_store", SessionStore.save_messages)
    save_interaction = _Call("_store", SessionStore.save_interaction)
    update_metadata = _Call("_store", SessionStore.update_metadata)
    put_session = _Call("_store", SessionStore.put_session)
    delete_session = _Call("_store", SessionStore.delete_session)

    # --- the guard: secrets and sizes --------------------------------------------------------
    secret_config: _Setting[SecretConfig] = _Setting("_guard")
    max_message_bytes: _Setting[int] = _Setting("_guard")
    check = _Call("_guard", Guard.check)
    scan_history = _Call("_guard", Guard.scan_history)

    # --- history ------------------------------------------------------------------------
    resolve = _Call("_history", History.resolve)
    history = _Call("_history", History.history)
    diff = _Call("_history", History.diff)
    blame = _Call("_history", History.blame)
    rollback = _Call("_history", History.rollback)
    restore_session = _Call("_history", History.restore_session)
    revert = _Call("_history", History.revert)
    revert_preview = _Call("_history", History.revert_preview)
    revert_where = _Call("_history", History.revert_where)
    purge = _Call("_history", History.purge)

    # --- search and context --------------------------------------------------------------
    rank_config: _Setting[RankConfig] = _Setting("_search")
    token_counter: _Setting[TokenCounter | None] = _Setting("_search")
    search = _Call("_search", Search.search)
    retrieve_context = _Call("_search", Search.retrieve_context)
    browse_sessions = _Call("_search", Search.browse_sessions)
    session_listings = _Call("_search", Search.session_listings)
    link_graph = _Call("_search", Search.link_graph)
    reindex = _Call("_search", Search.reindex)
    embed_pending = _Call("_search", Search.embed_pending)
    close_index = _Call("_search", Search.close_index)

    # --- summaries and their review branches ----------------------------------------------
    summary_config: _Setting[SummaryConfig] = _Setting("_summaries")
    summarizer: _Setting[Summarizer | None] = _Setting("_summaries")
    embed_settings: _Setting[EmbedConfig | None] = _Setting("_summaries")
    llm_config = _Call("_summaries", Summaries.llm_config)
    embedding_config = _Call("_summaries", Summaries.embedding_config)
    summarize = _Call("_summaries", Summaries.summarize)
    summarize_outcome = _Call("_summaries", Summaries.summarize_outcome)
    maybe_summarize = _Call("_summaries", Summaries.maybe_summarize)
    summarize_idle = _Call("_summaries", Summaries.summarize_idle)
    review_branch = _Call("_summaries", Summaries.review_branch)
    review_list = _Call("_summaries", Summaries.review_list)
    review_show = _Call("_summaries", Summaries.review_show)
    review_accept = _Call("_summaries", Summaries.review_accept)
    review_reject = _Call("_summaries", Summaries.review_reject)

    # --- curated facts ----------------------------------------------------------------------
    facts_path: _Setting[str] = _Setting("_facts", writable=False)
    max_fact_bytes: _Setting[int] = _Setting("_facts")
    memory_file = _Call("_facts", Facts.memory_file)
    facts = _Call("_facts", Facts.facts)
    fact = _Call("_facts", Facts.fact)
    change_facts = _Call("_facts", Facts.change_facts)
    remember = _Call("_facts", Facts.remember)
    update_fact = _Call("_facts", Facts.update_fact)
    forget = _Call("_facts", Facts.forget)
    supersede = _Call("_facts", Facts.supersede)
    pin_fact = _Call("_facts", Facts.pin_fact)
    fact_history = _Call("_facts", Facts.fact_history)
    fact_blame = _Call("_facts", Facts.fact_blame)

    # --- consolidation ----------------------------------------------------------------------
    facts_config: _Setting[FactsConfig] = _Setting("_consolidation")
    consolidate = _Call("_consolidation", Consolidator.consolidate)
    maybe_consolidate = _Call("_consolidation", Consolidator.maybe_consolidate)
    review_facts_branch = _Call("_consolidation", Consolidator.review_facts_branch)
    review_facts_show = _Call("_consolidation", Consolidator.review_facts_show)
    review_facts_accept = _Call("_consolidation", Consolidator.review_facts_accept)
    review_facts_reject = _Call("_consolidation", Consolidator.review_facts_reject)

    # --- sharing, hooks and namespaces --------------------------------------------------------
    remote_add = _Call("_sync", Sync.remote_add)
    remotes = _Call("_sync", Sync.remotes)
    fetch = _Call("_sync", Sync.fetch)
    push = _Call("_sync", Sync.push)
    pull = _Call("_sync", Sync.pull)
    sync = _Call("_sync", Sync.sync)
    install_hooks = _Call("_sync", Sync.install_hooks)
    run_hook = _Call("_sync", Sync.run_hook)
    namespaces = _Call("_sync", Sync.namespaces)
    merge_file = staticmethod(Sync.merge_file)
    validate_files = staticmethod(Sync.validate_files)
