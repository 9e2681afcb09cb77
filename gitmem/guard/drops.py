"""Saved turns a commit made outside gitmem removed: an editor holding an old copy of a
session file writes it back over the turns an agent saved meanwhile, and git takes it.

The pre-commit hook refuses such a commit unless told (``GITMEM_ALLOW_DROP=1``) and
``gitmem check`` reports the ones that reached history. Removing a whole session file
(``git rm``) is an explicit act and is not counted; a turn moved to another memory file in
the same commit is not lost either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gitmem.errors import Diagnostic, ParseError
from gitmem.format.parse import parse_bytes
from gitmem.format.paths import SUFFIX, is_fanout_path

if TYPE_CHECKING:
    from gitmem.store.repository import Repository

ALLOW_ENV = "GITMEM_ALLOW_DROP"

# a commit that says its drop is meant; gitmem's own commits carry Gitmem-Op
ALLOW_TRAILER = "Gitmem-Allow-Drop"

# how many commits back `gitmem check` looks for turns a person's commit dropped
CHECK_DEPTH = 200


def is_memory_file(path: str) -> bool:
    """Whether ``path`` is a session file or a session's archive part (the paths
    ``.gitattributes`` gives ``merge=gitmem``)."""
    if not path.endswith(SUFFIX):
        return False
    if path.startswith(("sessions/", "archive/")):
        return path.count("/") == 1 or (path.count("/") == 2 and is_fanout_path(path))
    return path.startswith("namespaces/")


def _turn_ids(data: bytes, path: str) -> list[str] | None:
    try:
        return [turn.id for turn in parse_bytes(data, path).interactions]
    except ParseError:
        return None  # reported as a parse problem, not as drops


def dropped_turns(changes: Mapping[str, tuple[bytes | None, bytes | None]]) -> dict[str, list[str]]:
    """Per path, the turn ids of the old content missing from the new one, for the
    memory files ``changes`` (path -> (old, new); None: absent) modifies."""
    after: dict[str, list[str]] = {}
    before: dict[str, list[str]] = {}
    for path, (old, new) in changes.items():
        if not is_memory_file(path):
            continue
        new_ids = _turn_ids(new, path) if new is not None else None
        if new_ids is not None:
            after[path] = new_ids
        if old is not None and new is not None and new_ids is not None:
            old_ids = _turn_ids(old, path)
            if old_ids:
                before[path] = old_ids
    kept = {i for ids in after.values() for i in ids}
    found = {}
    for path, ids in sorted(before.items()):
        missing = [i for i in ids if i not in kept]
        if missing:
            found[path] = missing
    return found


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:10])
    return shown + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def staged_drops(changes: Mapping[str, tuple[bytes | None, bytes | None]]) -> list[Diagnostic]:
    """The pre-commit hook's refusals for turns the staged files drop."""
    return [
        Diagnostic(
            path,
            1,
            f"this commit removes {len(ids)} saved turn(s) that HEAD has: "
            f"{_names(ids)} (an editor writing back an old copy?); reload the file, or "
            f"commit with {ALLOW_ENV}=1 if you mean to drop them",
        )
        for path, ids in dropped_turns(changes).items()
    ]


def history_drops(repo: Repository, rev: str | None = None) -> list[Diagnostic]:
    """Turns dropped by commits made outside gitmem (no ``Gitmem-Op`` trailer, and no
    ``Gitmem-Allow-Drop``) among the last :data:`CHECK_DEPTH` commits up to ``rev``."""
    found: list[Diagnostic] = []
    for entry in repo.log(rev=rev, limit=CHECK_DEPTH, files=True):
        if len(entry.parents) != 1 or "Gitmem-Op" in entry.trailers:
            continue
        if ALLOW_TRAILER in entry.trailers:
            continue
        changes = {c.path: (c.old, c.new) for c in entry.files if is_memory_file(c.path)}
        if not any(old and new for old, new in changes.values()):
            continue
        contents = {
            p: (repo.blob(old) if old else None, repo.blob(new) if new else None)
            for p, (old, new) in changes.items()
        }
        for path, ids in dropped_turns(contents).items():
            found.append(
                Diagnostic(
                    path,
                    1,
                    f"commit {entry.sha[:12]} ({entry.subject!r}, by {entry.author}) "
                    f"dropped {len(ids)} saved turn(s) without gitmem's trailers: {_names(ids)}; "
                    f"they are still in {entry.parents[0][:12]}",
                )
            )
    return found
