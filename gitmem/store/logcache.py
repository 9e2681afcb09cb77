"""Which commits changed each file: a derived index under ``.git/gitmem/history/``.

``git log -- path`` has to diff the ``sessions/`` tree of every commit its Bloom filter cannot
rule out; with 10,000 sessions in one folder and 1,000 saves of one session among 10,000
commits that costs a few hundred milliseconds. This cache records, once, every commit on the
branch with the files it changed (diff against the first parent) and its message, sorted into
256 bucket files by path. Each read first adds the commits made since the one the cache
reflects; if that commit is no longer an ancestor of HEAD (a person rewrote history) the cache
is rebuilt. It is never the source of truth: deleting the folder is always safe.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from gitmem.store.gitlog import FORMAT, FileChange, LogEntry, parse_log

_VERSION = "1"


class _Git(Protocol):
    def head(self) -> str | None: ...

    def is_ancestor(self, commit: str, of: str | None = None) -> bool: ...

    def run_git(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, bytes]: ...


def _bucket(path: str) -> str:
    return hashlib.sha1(path.encode("utf-8", "surrogateescape")).hexdigest()[:2]


class LogCache:
    """Per-file commit lists for the branch HEAD is on, refreshed on every read."""

    def __init__(self, repo: _Git, folder: Path) -> None:
        self._repo = repo
        self._folder = folder

    @contextlib.contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        self._folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _state(self) -> tuple[str, int] | None:
        try:
            version, head, count = (self._folder / "HEAD").read_text().split()
        except (FileNotFoundError, ValueError):
            return None
        return (head, int(count)) if version == _VERSION else None

    def ready(self) -> bool:
        """True once the cache has been built (it is then kept up to date on every read)."""
        return self._state() is not None

    def refresh(self) -> str | None:
        """Bring the cache up to HEAD; returns the commit it now reflects."""
        head = self._repo.head()
        if head is None:
            return None
        state = self._state()
        if state is not None and state[0] == head:
            return head
        with self._locked(fcntl.LOCK_EX):
            state = self._state()
            if state is not None and state[0] == head:
                return head
            if state is not None and self._repo.is_ancestor(state[0], head):
                span, count = [f"^{state[0]}", head], state[1]
            else:
                for item in self._folder.glob("*.jsonl"):
                    item.unlink()
                span, count = [head], 0
            _, out = self._repo.run_git(
                "log",
                "--reverse",
                "-z",
                "--raw",
                "--no-abbrev",
                "--no-renames",
                "--diff-merges=first-parent",
                f"--format={FORMAT}",
                "--end-of-options",
                *span,
            )
            buckets: dict[str, list[str]] = {}
            for entry in parse_log(out):
                count += 1
                for change in entry.files:
                    record = {
                        "f": change.path,
                        "i": count,
                        "c": entry.sha,
                        "p": entry.parents,
                        "a": entry.author,
                        "e": entry.email,
                        "t": entry.time.isoformat(),
                        "m": entry.message,
                        "r": entry.trailers,
                        "o": change.old,
                        "n": change.new,
                    }
                    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
                    buckets.setdefault(_bucket(change.path), []).append(line)
            for name, lines in buckets.items():
                with open(self._folder / f"{name}.jsonl", "a", encoding="utf-8") as handle:
                    handle.write("\n".join(lines) + "\n")
            tmp = self._folder / f"HEAD.{os.getpid()}.tmp"
            tmp.write_text(f"{_VERSION} {head} {count}\n")
            os.replace(tmp, self._folder / "HEAD")
        return head

    def _records(self, path: str) -> list[dict[str, Any]]:
        key = '"f":' + json.dumps(path, ensure_ascii=False) + ","
        try:
            with self._locked(fcntl.LOCK_SH):
                text = (self._folder / f"{_bucket(path)}.jsonl").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        # the path's lines decoded in one call: a call per line costs more than the decoding
        lines = [line for line in text.splitlines() if line.startswith(key, 1)]
        records: list[dict[str, Any]] = json.loads("[" + ",".join(lines) + "]")
        # a refresh cut short may have written a record twice
        return list({record["i"]: record for record in records}.values())

    def entries(self, paths: Sequence[str]) -> list[LogEntry]:
        """Commits on the branch that changed any of ``paths``, newest first; each entry's
        ``files`` holds the changes to those paths only."""
        self.refresh()
        by_commit: dict[int, list[dict[str, Any]]] = {}
        for path in dict.fromkeys(paths):
            for record in self._records(path):
                by_commit.setdefault(record["i"], []).append(record)
        result: list[LogEntry] = []
        for index in sorted(by_commit, reverse=True):
            records = by_commit[index]
            first = records[0]
            result.append(
                LogEntry(
                    sha=first["c"],
                    parents=tuple(first["p"]),
                    author=first["a"],
                    email=first["e"],
                    time=datetime.fromisoformat(first["t"]),
                    message=first["m"],
                    trailers=first["r"],
                    files=tuple(FileChange(r["f"], r["o"], r["n"]) for r in records),
                )
            )
        return result

    def clear(self) -> None:
        """Forget everything (the next read rebuilds it)."""
        with self._locked(fcntl.LOCK_EX):
            for item in self._folder.glob("*.jsonl"):
                item.unlink()
            with contextlib.suppress(FileNotFoundError):
                (self._folder / "HEAD").unlink()
