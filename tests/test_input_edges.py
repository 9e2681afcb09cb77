"""Acceptance leftovers of issue 10: datetime parameters given strings, date options' errors
(exit code, masked values), agent names (length, bidi controls), the merge driver's secret
patterns."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import ValidationError
from tests.conftest import git


def test_datetime_parameters_take_iso_strings_and_refuse_other_types(store: Path) -> None:
    # a string gave AttributeError: 'str' object has no attribute 'utcoffset'
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first question", "answer", timestamp="2024-04-15T10:00:00")
    session = mm.load_memory("s")
    assert session is not None
    assert session.interactions[0].timestamp == datetime(2024, 4, 15, 10, tzinfo=UTC)
    assert [s.id for s in mm.list_sessions(since="2024-04-01")] == ["s"]
    assert mm.list_sessions(until="2024-04-01") == []
    assert mm.search("question", since="2024-04-01")
    assert len(mm.history(since="2024-04-01")) >= 1
    for call, name in [
        (lambda: mm.list_sessions(since="x"), "since"),
        (lambda: mm.list_sessions(until="x"), "until"),
        (lambda: mm.save_interaction("s", "q", "a", timestamp="x"), "timestamp"),
        (lambda: mm.history(since="x"), "since"),
        (lambda: mm.search("question", until="x"), "until"),
    ]:
        with pytest.raises(ValidationError, match=rf"^{name}: 'x' is not an ISO date"):
            call()
    with pytest.raises(ValidationError, match=r"^since: expected a datetime or an ISO date "
                                              r"string, not int"):
        mm.list_sessions(since=5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"^timestamp: .* not list"):
        mm.save_interaction("s", "q", "a", timestamp=[])  # type: ignore[arg-type]
    assert len(git(store, "log", "--format=%H").split()) == 2  # init + the one good save
