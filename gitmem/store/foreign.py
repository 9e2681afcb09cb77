"""Reading another tool's git repository (read-only): the versions of a few files.

nanobot commits its memory files (``memory/MEMORY.md``, ``USER.md``, ``SOUL.md``) to a git
repository in its workspace; an importer keeps each version. This module is here because
the store package is the only one that runs git; it never writes to that repository, and
runs no hook of it (``run_git`` is safe by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gitmem.store.git import run_git

# one record per commit: fields split by \x1f, records by \x1e (no commit text holds them)
_FORMAT = "%x1e%H%x1f%an%x1f%ae%x1f%aI%x1f%s"


@dataclass(frozen=True)
class FileVersion:
    """One commit's version of one file: who wrote it, when, why, and its text (None when
    that commit deleted it)."""

    commit: str
    author: str
    email: str
    when: datetime
    subject: str
    path: str
    text: str | None


def is_repository(folder: Path) -> bool:
    """True when ``folder`` is the top of a git work tree (not merely inside one)."""
    if not (folder / ".git").exists():
        return False
    done = run_git(folder, "rev-parse", "--show-toplevel", ok=None)
    if done.returncode != 0:
        return False
    return Path(done.out.decode("utf-8", "replace").strip()).resolve() == folder.resolve()


def file_versions(folder: Path, paths: Sequence[str]) -> list[FileVersion]:
    """Every version of ``paths`` on the checked-out branch of the repository at
    ``folder``, oldest first (one entry per commit and file it changed)."""
    done = run_git(
        folder,
        "-c",
        "core.quotepath=false",
        "log",
        "--reverse",
        f"--format={_FORMAT}",
        "--name-only",
        "--no-renames",
        "HEAD",
        "--",
        *paths,
        ok=None,
    )
    if done.returncode != 0:
        return []  # an empty repository (no HEAD yet) has no versions
    found: list[tuple[str, str, str, str, str, str]] = []
    for record in done.out.decode("utf-8", "replace").split("\x1e")[1:]:
        head, _, names = record.partition("\n")
        sha, author, email, when, subject = head.split("\x1f", 4)
        for name in names.split("\n"):
            if name.strip() and name in paths:
                found.append((sha, author, email, when, subject, name))
    blobs = _blobs(folder, [f"{sha}:{name}" for sha, *_rest, name in found])
    return [
        FileVersion(sha, author, email, datetime.fromisoformat(when), subject, name, blobs[at])
        for at, (sha, author, email, when, subject, name) in enumerate(found)
    ]


def _blobs(folder: Path, specs: list[str]) -> list[str | None]:
    """The text of each ``rev:path`` (None where the path does not exist at that rev), in
    one ``git cat-file --batch`` run."""
    if not specs:
        return []
    done = run_git(folder, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in specs).encode())
    out, at = done.out, 0
    texts: list[str | None] = []
    for _spec in specs:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] == b"missing":
            texts.append(None)
            continue
        size = int(header[2])
        texts.append(out[at : at + size].decode("utf-8", "replace"))
        at += size + 1
    return texts
