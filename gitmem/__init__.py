"""gitmem: long-term conversation memory for AI agents, kept as Markdown in a git repository."""

from gitmem.errors import (
    ConflictError,
    GitmemError,
    InvalidSessionId,
    LockTimeout,
    ParseError,
    ReadOnlyError,
    RepositoryError,
    RevisionNotFound,
    SessionNotFound,
    ValidationError,
)
from gitmem.manager import AsyncMemoryManager, MemoryManager
from gitmem.models import Hit, Interaction, Message, Revision, Session, Summary

__all__ = [
    "AsyncMemoryManager",
    "ConflictError",
    "GitmemError",
    "Hit",
    "Interaction",
    "InvalidSessionId",
    "LockTimeout",
    "MemoryManager",
    "Message",
    "ParseError",
    "ReadOnlyError",
    "RepositoryError",
    "Revision",
    "RevisionNotFound",
    "Session",
    "SessionNotFound",
    "Summary",
    "ValidationError",
]
__version__ = "0.1.0"
