"""Blame as gitmem computed it before it skipped the versions before saves: every version
before each commit parsed and compared with the one blamed, newest first. The reference
that ``tests/test_blame_walk.py`` and ``benchmarks/bench_history.py`` compare blame with."""

from __future__ import annotations

from typing import Any

from gitmem import MemoryManager
from gitmem.models import BlameEntry
from gitmem.store.gitlog import LogEntry


def blame_every_version(mm: MemoryManager, session_id: str) -> list[BlameEntry]:
    """Blame as it was computed before: every version before each commit parsed and
    compared with the one blamed, newest first, until each part has its commit."""
    history, store = mm._history, mm._store
    rev = store.repo.head()
    path, part = store.path_of(session_id), store.path_of(session_id, archive=True)
    found, archived = store.repo.entry(path, rev), store.repo.entry(part, rev)
    assert found is not None
    pieces = dict(store.parts.files(session_id, rev))  # a huge session's older turns
    state: dict[str, str | None] = {
        **pieces,
        part: archived[1] if archived else None,
        path: found[1],
    }
    wanted: dict[str, Any] = history._parts(state, path, strict=True)
    if wanted.get("summary") is None:
        wanted.pop("summary", None)
    alias = {
        **dict.fromkeys(history._both(session_id), path),
        **dict.fromkeys(history._both(session_id, archive=True), part),
        **{piece: piece for piece in pieces},
    }
    owner: dict[str, LogEntry] = {}
    for entry in store.repo.file_log(list(alias), rev):
        if len(owner) == len(wanted):
            break
        before_entry: dict[str, str | None] = {}
        for c in entry.files:
            if c.path in alias and (c.old is not None or alias[c.path] not in before_entry):
                before_entry[alias[c.path]] = c.old
        state = {**state, **before_entry}
        before = history._parts(state, path, strict=False)
        for key, value in wanted.items():
            if key not in owner and before.get(key) != value:
                owner[key] = entry
    return [
        BlameEntry(
            kind="summary" if key == "summary" else "interaction",
            interaction_id=None if key == "summary" else key[2:],
            sha=owner[key].sha,
            time=owner[key].time,
            author=owner[key].author,
            agent=(owner[key].trailers.get("Gitmem-Agent") or [None])[-1],
            model=(owner[key].trailers.get("Gitmem-Model") or [None])[-1],
            op=(owner[key].trailers.get("Gitmem-Op") or [None])[-1],
            subject=owner[key].subject,
        )
        for key in wanted
        if key in owner
    ]
