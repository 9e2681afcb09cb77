"""Reading history through the git binary: resolving revisions, ``git log``, tree diffs.

``Repository`` inherits :class:`RevisionsMixin`. Saves never spawn git, but history is
read-only and git's own walkers (pathspec-limited ``git log`` using the commit-graph and its
changed-path Bloom filters, ``diff-tree``) are much faster than walking trees in Python.
Output is requested NUL-separated so that any message or path parses unambiguously.
"""

from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.errors import RepositoryError, RevisionNotFound, ValidationError
from gitmem.models import as_aware

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gitmem.logcache import LogCache

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


class RevisionsMixin:
    """History reading for ``Repository`` (which provides ``root`` and ``head()``)."""

    root: Path
    state_dir: Path
    _history_cache: LogCache | None = None

    if TYPE_CHECKING:

        def head(self) -> str | None: ...

        def has_object(self, hexsha: str, kind: str) -> bool: ...

        def _read_object(self, hexsha: str, kind: str) -> bytes: ...

    def parents(self, commit: str) -> list[str]:
        """The parent commit ids of ``commit`` (empty for a root commit)."""
        body = self._read_object(commit, "commit")
        header = body.split(b"\n\n", 1)[0]
        return [line[7:47].decode() for line in header.split(b"\n") if line.startswith(b"parent ")]

    def run_git(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        """Run a read-only git command in the store; (exit code, stdout)."""
        done = subprocess.run(
            ["git", "-c", "core.quotepath=false", *args],
            cwd=self.root,
            capture_output=True,
            check=False,
        )
        if done.returncode not in ok:
            message = done.stderr.decode("utf-8", "replace").strip()
            raise RepositoryError(f"{self.root}: git {' '.join(args)} failed: {message}")
        return done.returncode, done.stdout

    def resolve(self, rev: str | datetime) -> str:
        """The full commit id of a revision of this store.

        Accepts full or short shas, ``HEAD~3``, branch and tag names, ``datetime`` objects
        and ISO dates/times (the last commit on the branch at or before that moment).

        Raises:
            RevisionNotFound: the revision names no commit of this store, or the date is
                before the first commit.
            ValidationError: ``rev`` is neither a string nor a datetime.
        """
        if isinstance(rev, datetime):
            return self._commit_at(as_aware(rev), rev.isoformat())
        if not isinstance(rev, str):
            raise ValidationError(
                f"revision: expected a commit id, an ISO date string or a datetime, "
                f"not {type(rev).__name__}"
            )
        text = rev.strip()
        if not text:
            raise RevisionNotFound(f"{self.root}: empty revision; give a commit sha or a date")
        if looks_like_date(text):
            return self._commit_at(parse_date(text), text)
        if _HEX40.fullmatch(text) and self.has_object(text, "commit"):
            return text
        code, out = self.run_git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", text + "^{commit}", ok=(0, 1)
        )
        if code != 0:
            raise RevisionNotFound(
                f"unknown revision {text!r}: no such commit in the store at {self.root} "
                "(a sha from another repository?); use a sha from `gitmem log`, HEAD~N, "
                "a branch name or an ISO date"
            )
        return out.decode().strip()

    def _commit_at(self, when: datetime, asked: str) -> str:
        if self.head() is None:
            raise RevisionNotFound(f"{self.root}: the store has no commits yet")
        before = git_epoch(when)
        sha = ""
        if before is not None:
            _, out = self.run_git("rev-list", "-1", "--first-parent", f"--before={before}", "HEAD")
            sha = out.decode().strip()
        if sha:
            return sha
        _, first = self.run_git("log", "--first-parent", "--reverse", "--format=%h %cI", "HEAD")
        oldest = first.decode().split("\n", 1)[0]
        raise RevisionNotFound(
            f"no commit at or before {asked!r} ({when.isoformat()}) in {self.root}: the "
            f"store's first commit is {oldest or '?'}; give a later date"
        )

    def is_ancestor(self, commit: str, of: str | None = None) -> bool:
        """True if ``commit`` is ``of`` (default HEAD) or one of its ancestors."""
        target = of or self.head()
        if target is None:
            return False
        code, _ = self.run_git("merge-base", "--is-ancestor", commit, target, ok=(0, 1))
        return code == 0

    def log(
        self,
        paths: Sequence[str] | None = None,
        *,
        rev: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        trailers: Mapping[str, str] | None = None,
        files: bool = False,
        full_diff: bool = True,
    ) -> list[LogEntry]:
        """Commits reachable from ``rev`` (default HEAD), newest first, as :class:`LogEntry`.

        Args:
            paths: only commits that changed one of these files (``git log -- path``: uses
                the commit-graph's Bloom filters when housekeeping has written them).
            since: only commits made at or after this time.
            until: only commits made at or before this time.
            limit: at most this many commits.
            trailers: only commits with every one of these exact trailer values
                (``{"Gitmem-Agent": "bot"}``).
            files: fill ``LogEntry.files`` with the blob ids each commit changed (a diff per
                commit: slower).
            full_diff: with ``files``, list every file each commit changed, not only ``paths``.
        """
        start = rev or self.head()
        if start is None:
            return []
        args = ["log", "-z", f"--format={FORMAT}"]
        if files:
            args += ["--raw", "--no-abbrev", "--no-renames", "--diff-merges=first-parent"]
            if full_diff and paths:
                args.append("--full-diff")
        # as epochs: git's parser rejects years from 2100 on (then it would list nothing)
        after = None if since is None else git_epoch(since, round_up=True)
        before = None if until is None else git_epoch(until)
        if until is not None and before is None:
            return []  # before 1970: no commit can be that old
        if after is not None:
            args.append(f"--since={after}")
        if before is not None:
            args.append(f"--until={before}")
        for key, value in (trailers or {}).items():
            args.append(f"--grep=^{ere_escape(key)}: {ere_escape(value)}$")
        if trailers:
            args += ["--extended-regexp", "--all-match"]
        if limit is not None and not trailers:
            args.append(f"--max-count={max(0, limit)}")
        args += ["--end-of-options", start, "--"]
        if paths:
            args += [f":(literal){p}" for p in paths]
        _, out = self.run_git(*args)
        entries = parse_log(out)
        if trailers:
            entries = [
                e for e in entries if all(v in e.trailers.get(k, ()) for k, v in trailers.items())
            ]
        if since is not None:
            entries = [e for e in entries if e.time >= as_aware(since)]
        if until is not None:
            entries = [e for e in entries if e.time <= as_aware(until)]
        return entries if limit is None else entries[: max(0, limit)]

    def _cache(self) -> LogCache:
        if self._history_cache is None:
            from gitmem.logcache import LogCache

            self._history_cache = LogCache(self, self.state_dir / "history")
        return self._history_cache

    def index_history(self) -> str | None:
        """Build or bring up to date the per-file commit cache (housekeeping runs this).

        The first build diffs every commit once (seconds on a 10,000-commit store); after
        that each refresh reads only the commits made since.
        """
        return self._cache().refresh()

    def file_log(self, paths: Sequence[str], rev: str | None = None) -> list[LogEntry]:
        """Commits that changed any of ``paths``, newest first, each with those files' blob
        ids before and after. Up to HEAD this reads the per-file cache under
        ``.git/gitmem/history`` once housekeeping has built it (see ``logcache``); otherwise
        ``git log -- paths``.
        """
        cache = self._cache()
        if (rev is None or rev == self.head()) and cache.ready():
            return cache.entries(paths)
        return self.log(paths, rev=rev, files=True, full_diff=False)

    def diff_tree(self, old: str | None, new: str) -> list[FileChange]:
        """Files that differ between commits ``old`` (None: the empty tree) and ``new``."""
        if old is None:
            args = ["diff-tree", "-r", "-z", "--no-renames", "--root", "--end-of-options", new]
        else:
            args = ["diff-tree", "-r", "-z", "--no-renames", "--end-of-options", old, new]
        _, out = self.run_git(*args)
        return parse_diff_tree(out)
