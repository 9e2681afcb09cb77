"""Blame skips parsing the version before each of gitmem's saves (its trailers name the
one turn it added) and reads the other versions through one blob stream: the answer is
the one of parsing and comparing every version, on histories of every kind of change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import gitmem.core
from gitmem import MemoryManager
from gitmem.format.paths import session_path
from gitmem.models import Session
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git
from tests.reference_blame import blame_every_version

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


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
def test_blame_equals_parsingblame_every_version(store: Path, cache: bool) -> None:
    mm = _varied(store)
    if cache:
        mm.repository.pack()  # blame reads the per-file history cache
    for sid in ("s0", "s1", "s2"):
        mm._store._sessions.clear()
        assert mm.blame(sid) == blame_every_version(mm, sid), sid
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
    assert blamed == blame_every_version(mm, "long")
