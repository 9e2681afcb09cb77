"""gitmem: long-term conversation memory for AI agents, kept as Markdown in a git repository."""

from typing import TYPE_CHECKING, Any

from gitmem.errors import (
    ConflictError,
    FactNotFound,
    GitmemError,
    InvalidSessionId,
    LockTimeout,
    ParseError,
    ReadOnlyError,
    RepositoryError,
    RevisionNotFound,
    SecretRefused,
    SessionNotFound,
    ValidationError,
)
from gitmem.version import __version__

if TYPE_CHECKING:
    from gitmem.aio import AsyncMemoryManager
    from gitmem.format.facts import Fact, FactSource
    from gitmem.manager import MemoryManager
    from gitmem.models import Hit, Interaction, Message, Revision, Session, SessionInfo, Summary
    from gitmem.search.browse import LinkGraph, SessionListing, SessionPage

__all__ = [
    "AsyncMemoryManager",
    "ConflictError",
    "Fact",
    "FactNotFound",
    "FactSource",
    "GitmemError",
    "Hit",
    "Interaction",
    "InvalidSessionId",
    "LinkGraph",
    "LockTimeout",
    "MemoryManager",
    "Message",
    "ParseError",
    "ReadOnlyError",
    "RepositoryError",
    "Revision",
    "RevisionNotFound",
    "SecretRefused",
    "Session",
    "SessionInfo",
    "SessionListing",
    "SessionNotFound",
    "SessionPage",
    "Summary",
    "ValidationError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # the manager (and GitPython) and the models (pydantic) load on first use: git runs
    # `python -m gitmem merge-file` once per merged file and an agent's hook runs the CLI
    # after every turn, and neither path needs them all
    if name in ("Hit", "Interaction", "Message", "Revision", "Session", "SessionInfo", "Summary"):
        from gitmem import models

        return getattr(models, name)
    if name == "MemoryManager":
        from gitmem.manager import MemoryManager

        return MemoryManager
    if name in ("Fact", "FactSource"):
        from gitmem.format import facts

        return getattr(facts, name)
    if name in ("LinkGraph", "SessionListing", "SessionPage"):
        from gitmem.search import browse

        return getattr(browse, name)
    if name == "AsyncMemoryManager":
        from gitmem.aio import AsyncMemoryManager

        return AsyncMemoryManager
    raise AttributeError(f"module 'gitmem' has no attribute {name!r}")
