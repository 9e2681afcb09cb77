"""``MemoryManager``: the one object callers use; every front end is a thin layer over it.

It only composes: each feature's methods class (``<feature>/methods.py``) inherits
:class:`~gitmem.core.SessionCore`, which holds the state and the save path.
"""

from __future__ import annotations

from gitmem.history.methods import HistoryMethods
from gitmem.search.methods import SearchMethods
from gitmem.summary.methods import SummaryMethods
from gitmem.sync.methods import SyncMethods


class MemoryManager(HistoryMethods, SearchMethods, SummaryMethods, SyncMethods):
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


def __getattr__(name: str) -> object:
    # gitmem 0.1 kept BatchResult, agent_identity and the mixins' names here; one more release
    from gitmem.oldpaths import old_attribute

    return old_attribute("manager", name)
