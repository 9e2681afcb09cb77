"""The exception hierarchy: every error gitmem raises derives from :class:`GitmemError`.

Messages say what went wrong, where (file:line, session id, commit) and what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class GitmemError(Exception):
    """Base class of every error gitmem raises on purpose."""


@dataclass(frozen=True)
class Diagnostic:
    """One located problem found while reading a memory file."""

    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


class ParseError(GitmemError):
    """A memory file does not parse cleanly; ``diagnostics`` lists every ``path:line: problem``."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        lines = "\n".join(str(d) for d in self.diagnostics)
        super().__init__(f"cannot parse memory file:\n{lines}")


class InvalidSessionId(GitmemError):
    """A session id is empty, too long, or would escape the ``sessions/`` folder."""


class ValidationError(GitmemError):
    """A value handed to gitmem breaks the model's rules (which field, which value)."""


class SecretRefused(ValidationError):
    """A secret in a value that names something (a session or interaction id, a metadata
    key): redacting it would change the name, so nothing is written."""


class SessionNotFound(GitmemError):
    """No session with that id exists (at that revision)."""


class RepositoryError(GitmemError):
    """The store is missing, not a git repository, or git refused an operation."""


class RevisionNotFound(RepositoryError):
    """A revision (sha, ``HEAD~3``, branch, date) names no commit of this store's history."""


class LockTimeout(RepositoryError):
    """Another writer held the store's lock for too long."""


class FactNotFound(GitmemError, KeyError):
    """No fact with that id is in the memory file (at that revision)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConflictError(GitmemError):
    """A change cannot be applied without overwriting something else (e.g. a hand edit)."""


class ReadOnlyError(GitmemError):
    """A write was attempted through a read-only view (such as ``mm.at(...)``)."""


class ConfigError(ValidationError):
    """A setting (``git config gitmem.*`` or a ``GITMEM_*`` variable) has a value gitmem
    cannot use; the message names the key, the value and the accepted values."""


class NotAStore(RepositoryError):
    """The folder is a git repository, but not a gitmem store (a code repository, or a
    clone whose checked-out branch has no commits): gitmem refuses to commit into it."""


class RemoteBusy(ConflictError):
    """A push found the remote's branch locked by another push in progress (nothing was
    lost; trying again later works)."""


class BranchMoved(ConflictError):
    """A person's git command committed to the same files while a change was being made
    from an older commit; nothing was written. ``tip`` is the new commit: compute the
    change again from it (``MemoryManager`` does so by itself)."""

    def __init__(self, message: str, *, base: str | None, tip: str, paths: list[str]) -> None:
        super().__init__(message)
        self.base = base
        self.tip = tip
        self.paths = paths


class SummaryLossError(GitmemError):
    """A new summary drops too many facts of the previous one and was not applied."""

    def __init__(self, message: str, session_id: str, report: Any) -> None:
        # report: a gitmem.summary.loss.LossReport (errors sit below every feature package)
        super().__init__(message)
        self.session_id = session_id
        self.report = report


class SummaryRefused(SummaryLossError):
    """The loss guard refused the summary (``on_loss="refuse"``); nothing was written."""


class SummaryHeldForReview(SummaryLossError):
    """The summary went to a review branch (``on_loss="review"``) instead of the session."""

    def __init__(
        self, message: str, session_id: str, report: Any, *, commit: str, branch: str
    ) -> None:
        super().__init__(message, session_id, report)
        self.commit = commit
        self.branch = branch


class NothingToSummarize(GitmemError):
    """Every turn of the session is already covered by its summary."""


class IndexCorrupted(GitmemError):
    """The index file is damaged or of another layout; it is rebuilt and the work retried."""


class IndexUnavailable(GitmemError):
    """The index file cannot be opened or written (locked, read-only, disk full)."""


class EscapeError(ValueError):
    def __init__(self, problem: str, row: int) -> None:
        super().__init__(problem)
        self.row = row  # 0-based line within the text


class NotRegularFile(OSError):
    """A working path is a folder, FIFO, socket or device: gitmem never reads one."""


class UnsupportedIndex(Exception):
    """The index uses a feature (version 4, split or sparse index) this writer does not."""
