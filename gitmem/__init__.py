"""gitmem: long-term conversation memory for AI agents, kept as Markdown in a git repository."""

from gitmem.errors import (
    ConflictError,
    GitmemError,
    InvalidSessionId,
    LockTimeout,
    ParseError,
    ReadOnlyError,
    RepositoryError,
    SessionNotFound,
    ValidationError,
)
from gitmem.models import Hit, Interaction, Message, Revision, Session, Summary

__all__ = [
    "ConflictError",
    "GitmemError",
    "Hit",
    "Interaction",
    "InvalidSessionId",
    "LockTimeout",
    "Message",
    "ParseError",
    "ReadOnlyError",
    "RepositoryError",
    "Revision",
    "Session",
    "SessionNotFound",
    "Summary",
    "ValidationError",
]
__version__ = "0.1.0"
