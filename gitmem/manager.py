"""``MemoryManager``: the one object callers use; every front end is a thin layer over it.

It only composes: each feature's methods class (``<feature>/methods.py``) inherits
:class:`~gitmem.core.SessionCore`, which holds the state and the save path. Facts are two
layers: ``ConsolidationMethods`` (``facts/consolidation.py``) builds on ``FactMethods``.
"""

from __future__ import annotations

from gitmem.facts.consolidation import ConsolidationMethods
from gitmem.history.methods import HistoryMethods
from gitmem.search.methods import SearchMethods
from gitmem.summary.methods import SummaryMethods
from gitmem.sync.methods import SyncMethods


class MemoryManager(
    HistoryMethods, SearchMethods, SummaryMethods, SyncMethods, ConsolidationMethods
):
    """Long-term conversation memory in a git repository of Markdown files.

    ``MemoryManager(path, init=..., agent=..., ...)`` opens a store; the constructor's
    arguments are documented on :meth:`SessionCore.__init__ <gitmem.core.SessionCore.__init__>`,
    which ``help(MemoryManager)`` shows too.
    """
