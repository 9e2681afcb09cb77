"""Reading git's history output: ``git log`` records, trailers, raw tree diffs and dates."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from gitmem.errors import RepositoryError, RevisionNotFound
from gitmem.models import as_aware

if TYPE_CHECKING:
    from collections.abc import Sequence


_MARK = "\x1eGITMEM-LOG\x1f"

# sha, parents, author name, author email, committer date, trailers, raw message
FORMAT = _MARK + "%H%x00%P%x00%an%x00%ae%x00%cI%x00%(trailers:only,unfold)%x00%B"

_FIELDS = 7

_HEX40 = re.compile(r"[0-9a-f]{40}")

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

_ERE_SPECIAL = set(".[]()*+?{}|^$\\")


@dataclass(frozen=True)
class FileChange:
    """One path a commit changed: blob ids before and after (None: absent)."""

    path: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class LogEntry:
    """One commit as ``git log`` reports it."""

    sha: str
    parents: tuple[str, ...]
    author: str
    email: str
    time: datetime
    message: str
    trailers: dict[str, list[str]] = field(default_factory=dict)
    files: tuple[FileChange, ...] = ()

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def body(self) -> str:
        """The message without subject and trailer block."""
        rest = self.message.partition("\n")[2].strip("\n")
        if self.trailers:
            paragraphs = rest.split("\n\n")
            rest = "\n\n".join(paragraphs[:-1])
        return rest.strip("\n")


def ere_escape(text: str) -> str:
    """``text`` as a literal inside a POSIX extended regular expression."""
    return "".join("\\" + ch if ch in _ERE_SPECIAL else ch for ch in text)


def parse_trailers(text: str) -> dict[str, list[str]]:
    """``Key: value`` lines (as ``%(trailers:only,unfold)`` prints them) -> key -> values."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _zero(sha: str) -> str | None:
    return None if not sha.strip("0") else sha


def parse_raw(tokens: Sequence[str]) -> tuple[FileChange, ...]:
    """``--raw -z --no-renames`` entries: a ``:mode mode old new status`` token, then a path."""
    changes: list[FileChange] = []
    at = 0
    while at + 1 < len(tokens):
        head = tokens[at].lstrip("\n")
        if not head.startswith(":"):
            at += 1
            continue
        parts = head[1:].split()
        if len(parts) >= 4:
            changes.append(FileChange(tokens[at + 1], _zero(parts[2]), _zero(parts[3])))
        at += 2
    return tuple(changes)


def parse_log(output: bytes) -> list[LogEntry]:
    """Parse ``git log -z --raw --format=<FORMAT>`` output."""
    text = "\0" + output.decode("utf-8", "replace")
    entries: list[LogEntry] = []
    for record in text.split("\0" + _MARK)[1:]:
        tokens = record.split("\0")
        if len(tokens) < _FIELDS:
            raise RepositoryError(f"unexpected git log output: {record[:200]!r}")
        sha, parents, author, email, when, trailers, message = tokens[:_FIELDS]
        entries.append(
            LogEntry(
                sha=sha,
                parents=tuple(parents.split()),
                author=author,
                email=email,
                time=datetime.fromisoformat(when),
                message=message.rstrip("\n"),
                trailers=parse_trailers(trailers),
                files=parse_raw(tokens[_FIELDS:]),
            )
        )
    return entries


def parse_diff_tree(output: bytes) -> list[FileChange]:
    """Parse ``git diff-tree -r -z --no-renames`` output."""
    return list(parse_raw(output.decode("utf-8", "surrogateescape").split("\0")))


def looks_like_date(text: str) -> bool:
    """True for ``2024-04-15`` and ISO date-times (not a sha, a branch or ``HEAD~3``)."""
    return bool(_ISO_DATE.match(text))


def parse_date(text: str) -> datetime:
    """An ISO date or date-time; naive values are UTC (like every gitmem timestamp)."""
    try:
        return as_aware(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise RevisionNotFound(
            f"{text!r} is not a date: use an ISO date or time such as 2024-04-15 or "
            "2024-04-15T15:30:00+02:00"
        ) from None


def git_epoch(when: datetime, *, round_up: bool = False) -> str | None:
    """``when`` as a date git's ``--before``/``--since`` take at any year (``@<epoch> +0000``:
    git's own date parser gives up on years from 2100 on); None before 1970, which git
    cannot express (the caller filters in Python instead)."""
    stamp = as_aware(when).timestamp()
    seconds = math.ceil(stamp) if round_up else math.floor(stamp)
    return None if seconds < 0 else f"@{seconds} +0000"
