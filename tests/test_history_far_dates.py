"""Dates git's own parser rejects (years from 2100 on, before 1970) still select commits."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import RevisionNotFound


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    manager = MemoryManager.init(store)
    manager.save_interaction("s", "hello there", "hi", timestamp=datetime(2024, 4, 15, tzinfo=UTC))
    return manager


def test_show_at_a_date_from_2100_on_is_the_latest_commit(mm: MemoryManager) -> None:
    head = mm.repository.head()
    assert mm.repository.resolve("2100-01-01") == head
    assert mm.repository.resolve("9999-12-31T23:59:59+00:00") == head
    session = mm.at("2100-01-01").load_memory("s")
    assert session is not None and len(session.interactions) == 1


def test_log_until_2100_lists_every_commit(mm: MemoryManager) -> None:
    everything = [r.sha for r in mm.history("s")]
    assert everything
    assert [r.sha for r in mm.history("s", until="2100-01-01")] == everything
    assert mm.history("s", since="2100-01-01") == []
    all_commits = [e.sha for e in mm.repository.log()]
    assert [e.sha for e in mm.repository.log(until=datetime(2100, 1, 1, tzinfo=UTC))] == all_commits


def test_a_date_before_1970_is_before_the_first_commit(mm: MemoryManager) -> None:
    with pytest.raises(RevisionNotFound, match="first commit"):
        mm.repository.resolve("1960-01-01")
    assert mm.history("s", until="1960-01-01") == []
    assert len(mm.history("s", since="1960-01-01")) == len(mm.history("s"))
