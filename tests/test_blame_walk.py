"""Blame skips parsing the version before each of gitmem's saves (its trailers name the
one turn it added) and reads the other versions through one blob stream: the answer is
the one of parsing and comparing every version, on histories of every kind of change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import gitmem.core
from gitmem import MemoryManager
from gitmem.format.paths import session_path
from gitmem.models import BlameEntry, Session
from gitmem.store.gitlog import LogEntry
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


def _every_version(mm: MemoryManager, session_id: str) -> list[BlameEntry]:
    """Blame as it was computed before: every version before each commit parsed and
    compared with the one blamed, newest first, until each part has its commit."""
    history, store = mm._history, mm._store
    rev = store.repo.head()
    path, part = store.path_of(session_id), store.path_of(session_id, archive=True)
    found, archived = store.repo.entry(path, rev), store.repo.entry(part, rev)
    assert found is not None
    state: dict[str, str | None] = {path: found[1], part: archived[1] if archived else None}
    wanted: dict[str, Any] = history._parts(state, path, strict=True)
    if wanted.get("summary") is None:
        wanted.pop("summary", None)
    alias = {
        **dict.fromkeys(history._both(session_id), path),
        **dict.fromkeys(history._both(session_id, archive=True), part),
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


def _varied(store: Path) -> MemoryManager:
    """Sessions changed by saves, a batch, a summary that archives turns, a hand edit
    recorded by the next save, a person's commit, a rollback and a revert."""
    mm = MemoryManager.init(store, agent="tester")
    mm.summary_config = SummaryConfig(archive="archive")
    for n in range(30):
        mm.save_interaction(f"s{n % 3}", f"question {n}", f"answer {n}", T0 + timedelta(hours=n))
    with mm.batch("two at once"):
        mm.save_interaction("s0", "in a batch", "yes", T0 + timedelta(days=2))
        mm.save_interaction("s1", "in a batch too", "yes", T0 + timedelta(days=2))
    mm.summarize("s0", count=4, offline=True)
    file = store / session_path("s1")
    file.write_text(file.read_text().replace("answer 4", "answer four"))  # a hand edit
    mm.save_interaction("s1", "after the edit", "ok", T0 + timedelta(days=3))
    file = store / session_path("s2")
    file.write_text(file.read_text().replace("question 5", "question five"))
    git(store, "commit", "-qam", "a person fixes a question")
    middle = mm.head()
    mm.save_interaction("s2", "later", "ok", T0 + timedelta(days=4))
    mm.save_interaction("s2", "later still", "ok", T0 + timedelta(days=5))
    assert middle is not None
    mm.rollback("s2", middle)
    mm.save_interaction("s2", "after the rollback", "ok", T0 + timedelta(days=6))
    last = mm.save_interaction("s1", "to be reverted", "ok", T0 + timedelta(days=7))
    mm.save_interaction("s1", "kept", "ok", T0 + timedelta(days=8))
    assert last is not None
    mm.revert(last)
    return mm


@pytest.mark.parametrize("cache", [False, True])
def test_blame_equals_parsing_every_version(store: Path, cache: bool) -> None:
    mm = _varied(store)
    if cache:
        mm.repository.pack()  # blame reads the per-file history cache
    for sid in ("s0", "s1", "s2"):
        mm._store._sessions.clear()
        assert mm.blame(sid) == _every_version(mm, sid), sid
    ops = {e.op for sid in ("s0", "s1", "s2") for e in mm.blame(sid)}
    assert {"save", "edit", "summarize", None} <= ops  # None: the person's commit


def test_blame_parses_no_version_before_a_save(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm = MemoryManager.init(store, agent="tester")
    for n in range(40):
        mm.save_interaction("long", f"question {n}", f"answer {n}", T0 + timedelta(minutes=n))
    mm._store._sessions.clear()
    parsed: list[str] = []
    parse = gitmem.core.parse_bytes

    def counting(data: bytes, path: str) -> Session:
        parsed.append(path)
        return parse(data, path)

    monkeypatch.setattr(gitmem.core, "parse_bytes", counting)
    blamed = mm.blame("long")
    assert len(blamed) == 40 and len(parsed) == 1  # the version blamed, only
    assert blamed == _every_version(mm, "long")
