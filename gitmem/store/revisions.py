"""Refs and revisions: reading, compare-and-swapping and logging refs (:class:`Refs`), and
resolving revisions and reading a file's history through git (:class:`Revisions`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.errors import ConflictError, RepositoryError, RevisionNotFound, ValidationError
from gitmem.models import as_aware
from gitmem.store.git import GitCommands, run_git
from gitmem.store.gitlog import (
    _HEX40,
    FORMAT,
    FileChange,
    LogEntry,
    ere_escape,
    git_epoch,
    looks_like_date,
    parse_date,
    parse_diff_tree,
    parse_log,
)
from gitmem.store.locks import overwrite
from gitmem.store.logcache import LogCache
from gitmem.store.objects import Identity, ObjectDatabase, signature
from gitmem.store.scratch import TempFiles

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class Refs:
    """The store's refs: HEAD and the branch, side refs, their reflogs.

    Calling it lists the refs under a prefix: ``refs("refs/heads/x/")``.
    """

    def __init__(self, root: Path, git_dir: Path, temps: TempFiles) -> None:
        self.root = root
        self.git_dir = git_dir
        self.temps = temps

    def branch_ref(self) -> str:
        """The ref HEAD points at (``refs/heads/main``); detached HEAD cannot be written to."""
        head = (self.git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            raise RepositoryError(
                f"{self.root}: HEAD is detached at {head[:12]}; check out a branch before saving"
            )
        return head[5:]

    def read(self, ref: str) -> str | None:
        """The commit id ``ref`` points at, or None."""
        try:
            value = (self.git_dir / ref).read_text().strip()
            if value:
                return value
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            return None
        packed = self.git_dir / "packed-refs"
        with contextlib.suppress(FileNotFoundError):
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref) and not line.startswith(("#", "^")):
                    return line.split(" ", 1)[0]
        return None

    def head(self) -> str | None:
        """The commit id the current branch points at, or None in an empty repository."""
        head = (self.git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        return self.read(head[5:])

    def __call__(self, prefix: str) -> dict[str, str]:
        """Ref name -> commit id of every ref under ``prefix`` (e.g. ``refs/heads/x/``)."""
        out = run_git(self.root, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
        pairs = (line.partition(" ") for line in out.stdout.splitlines())
        return {name: sha for name, _, sha in pairs if sha}

    def cas(self, ref: str, new: str | None, old: str | None) -> None:
        """Point ``ref`` at ``new`` (None deletes it) if it still points at ``old`` (None:
        must not exist), through git (which takes the ref's lock); raises ConflictError if
        it moved."""
        expected = old or "0" * 40
        args = ["-d", ref, expected] if new is None else [ref, new, expected]
        done = run_git(self.root, "update-ref", "-m", "gitmem", *args, ok=None)
        if done.returncode != 0:
            raise ConflictError(f"{ref} moved meanwhile ({done.tail()}); try again")

    def move(self, ref: str, new: str) -> None:
        """Point ``ref`` at ``new``; the caller holds its git lock and checked the old value."""
        overwrite(self.git_dir / ref, (new + "\n").encode(), self.temps)

    @staticmethod
    def reflog_line(old: str | None, new: str, subject: str, identity: Identity) -> bytes:
        who = signature(identity).encode().decode()
        return f"{old or '0' * 40} {new} {who}\tcommit: {subject}\n".encode()

    def append_reflogs(self, ref: str, line: bytes) -> list[tuple[Path, int]]:
        """Append ``line`` to the reflogs of ``ref`` and HEAD; returns (file, size before)
        for :meth:`unlog`."""
        written: list[tuple[Path, int]] = []
        try:
            for reflog in (self.git_dir / "logs" / ref, self.git_dir / "logs" / "HEAD"):
                reflog.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(reflog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    written.append((reflog, os.fstat(fd).st_size))
                    if os.write(fd, line) != len(line):
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(reflog))
                finally:
                    os.close(fd)
        except OSError:
            self.unlog(written)  # no half line is left behind
            raise
        return written

    @staticmethod
    def unlog(written: list[tuple[Path, int]]) -> None:
        for reflog, size in written:
            with contextlib.suppress(OSError):
                os.truncate(reflog, size)


class Revisions:
    """History reading: revisions resolved, commits logged, a file's history (cached)."""

    def __init__(
        self, runner: GitCommands, refs: Refs, objects: ObjectDatabase, state_dir: Path
    ) -> None:
        self.root = runner.root
        self.runner = runner
        self.refs = refs
        self.objects = objects
        self.state_dir = state_dir
        self._history_cache: LogCache | None = None  # made on first use

    def head(self) -> str | None:
        return self.refs.head()

    def run_git(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        return self.runner.run_git(*args, ok=ok)

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
        if _HEX40.fullmatch(text) and self.objects.has_object(text, "commit"):
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

    def log(  # noqa: C901
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
        tail = ["--end-of-options", start, "--", *(f":(literal){p}" for p in paths or ())]
        # git's --grep also matches a trailer line quoted in a message body, which the exact
        # check below drops: ask for some more than the limit, and for all only if too few
        # exact matches were among a full batch
        cap = (
            None
            if limit is None
            else max(0, limit) * (2 if trailers else 1) + (16 if trailers else 0)
        )
        _, out = self.run_git(*args, *([f"--max-count={cap}"] if cap is not None else []), *tail)
        entries = parse_log(out)
        if trailers:
            wanted = trailers

            def exact(found: list[LogEntry]) -> list[LogEntry]:
                return [
                    e for e in found if all(v in e.trailers.get(k, ()) for k, v in wanted.items())
                ]

            matched = exact(entries)
            if cap is not None and len(entries) >= cap and len(matched) < max(0, limit or 0):
                _, out = self.run_git(*args, *tail)
                matched = exact(parse_log(out))
            entries = matched
        if since is not None:
            entries = [e for e in entries if e.time >= as_aware(since)]
        if until is not None:
            entries = [e for e in entries if e.time <= as_aware(until)]
        return entries if limit is None else entries[: max(0, limit)]

    def _cache(self) -> LogCache:
        if self._history_cache is None:
            self._history_cache = LogCache(self, self.state_dir / "history")
        return self._history_cache

    def forget_caches(self) -> None:
        """Drop the per-file commit cache held in memory (after history was rewritten)."""
        self._history_cache = None

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
