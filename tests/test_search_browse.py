"""``browse_sessions`` and ``link_graph``: pages of sessions and the links between them,
answered from the search index (the dashboard's sessions page stays fast on
10,000 sessions), agreeing with ``list_sessions`` and following every change to the store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitmem import AsyncMemoryManager, MemoryManager, SessionPage
from gitmem.errors import ValidationError
from gitmem.format.paths import archive_path, session_path
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


def _store(store: Path) -> MemoryManager:
    """Twelve sessions: tags a/b by turns, two projects, a third speaker in some."""
    mm = MemoryManager.init(store, agent="tester")
    for n in range(12):
        tags = ["a"] + (["b"] if n % 3 == 0 else [])
        project = "alpha" if n % 2 else "beta"
        at = START + timedelta(days=n)
        mm.save_interaction(
            f"s{n:02d}",
            f"question {n}",
            f"answer {n}",
            at,
            tags=tags,
            metadata={"project": project},
        )
        if n % 4 == 0:
            mm.save_messages(
                f"s{n:02d}", [{"speaker": "Carol", "content": "me too"}], at + timedelta(hours=1)
            )
    return mm


def _ids(page: SessionPage) -> list[str]:
    return [s.session_id for s in page.sessions]


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"tags": ["b"]},
        {"tags": ["a", "b"], "project": "beta"},
        {"participant": "Carol"},
        {"since": "2026-01-08", "until": "2026-01-12"},
        {"since": START + timedelta(days=10)},
    ],
)
def test_filters_and_order_agree_with_list_sessions(
    store: Path, filters: dict[str, object]
) -> None:
    mm = _store(store)
    page = mm.browse_sessions(**filters, limit=100)  # type: ignore[arg-type]
    expected = [s.id for s in mm.list_sessions(**filters)]  # type: ignore[arg-type]
    assert expected, "the filter must match something to prove anything"
    assert _ids(page) == expected
    assert page.total == len(expected)
    assert page.commit == mm.head()


def test_pages_cover_every_session_once_with_the_total(store: Path) -> None:
    mm = _store(store)
    seen: list[str] = []
    for offset in range(0, 12, 5):
        page = mm.browse_sessions(offset=offset, limit=5)
        assert page.total == 12 and page.offset == offset and page.limit == 5
        assert len(page.sessions) == min(5, 12 - offset)
        seen.extend(_ids(page))
    assert seen == [f"s{n:02d}" for n in range(11, -1, -1)]
    assert mm.browse_sessions(offset=40).sessions == []


def test_a_listing_has_the_metadata_turn_count_and_summary_preview(store: Path) -> None:
    mm = _store(store)
    mm.update_metadata("s00", metadata={"links": ["s01", "nowhere"]})
    mm.summarize("s00", offline=True)
    [row] = mm.browse_sessions(
        tags=["b"], project="beta", participant="carol", until="2026-01-05T23:00:00+00:00"
    ).sessions
    assert row.session_id == "s00"
    assert row.turns == 2  # the saved turn and Carol's
    assert row.tags == ["a", "b"] and row.project == "beta" and row.links == ["s01", "nowhere"]
    assert "Carol" in row.participants  # any case of the name finds it
    assert row.created == START
    assert row.last_active == START + timedelta(hours=1)
    assert row.summary and "question 0" in row.summary and "\n" not in row.summary
    assert mm.browse_sessions(project="beta", tags=["b"]).sessions[0].session_id == "s06"


def test_a_long_summary_is_shortened_to_a_preview(store: Path) -> None:
    mm = MemoryManager.init(store)
    words = " ".join(f"word{n}" for n in range(400))
    mm.save_interaction("long", words, "ok")
    mm.summarize("long", offline=True)
    [row] = mm.browse_sessions().sessions
    assert row.summary is not None and len(row.summary) <= 200 and row.summary.endswith("…")


def test_a_session_with_an_archive_part_is_listed_once_with_every_turn(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.summary_config = SummaryConfig(archive="archive")
    for n in range(4):
        mm.save_interaction("long", f"turn {n}", "ok", START + timedelta(minutes=n))
    mm.save_interaction("other", "hello", "hi", START)
    mm.summarize("long", count=3, offline=True)  # three turns move to archive/long.md
    assert git(store, "ls-files", "archive").strip() == archive_path("long")
    page = mm.browse_sessions()
    assert _ids(page) == ["long", "other"] and page.total == 2
    assert page.sessions[0].turns == 4
    full = mm.load_memory("long", include_archive=True)
    assert full is not None and len(full.interactions) == 4


def test_a_hand_commit_by_real_git_shows_up(store: Path) -> None:
    mm = _store(store)
    assert mm.browse_sessions().total == 12  # the index is built now
    text = (store / session_path("s03")).read_text()
    added = store / session_path("by-hand")
    added.parent.mkdir(parents=True, exist_ok=True)
    added.write_text(text.replace("s03", "by-hand").replace("2026-01-08", "2027-05-01"))
    git(store, "add", str(added))
    git(store, "rm", "-q", session_path("s05"))
    git(store, "commit", "-qm", "a person adds and removes a session")
    page = mm.browse_sessions(limit=3)
    assert page.total == 12
    assert page.sessions[0].session_id == "by-hand"
    assert page.sessions[0].last_active is not None
    assert page.sessions[0].last_active.year == 2027
    assert "s05" not in _ids(mm.browse_sessions(limit=50))
    assert page.commit == git(store, "rev-parse", "HEAD").strip()


def test_as_of_a_commit_lists_the_store_as_it_was(store: Path) -> None:
    mm = _store(store)
    old = mm.head()
    assert old is not None
    mm.save_interaction("s99", "later", "ok", START + timedelta(days=90), tags=["b"])
    mm.delete_session("s00")
    now = mm.browse_sessions(tags=["b"])
    then = mm.browse_sessions(tags=["b"], commit=old)
    assert _ids(now) == ["s99", "s09", "s06", "s03"]
    assert _ids(then) == ["s09", "s06", "s03", "s00"] and then.commit == old
    assert then.total == 4


def test_bad_arguments_name_what_is_wrong(store: Path) -> None:
    mm = _store(store)
    with pytest.raises(ValidationError, match="since"):
        mm.browse_sessions(since="last tuesday")
    with pytest.raises(ValidationError, match="until"):
        mm.browse_sessions(until="2026-13-45")
    with pytest.raises(ValidationError, match="offset"):
        mm.browse_sessions(offset=-1)
    with pytest.raises(ValidationError, match="limit"):
        mm.browse_sessions(limit=0)


def test_link_graph_has_metadata_and_wiki_links_and_the_missing_targets(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("a", "see [[b]] and [[ghost]]", "and [[a]] itself")
    mm.save_interaction("b", "plain", "text")
    mm.save_interaction("c", "nothing", "here")
    mm.update_metadata("c", metadata={"links": ["a"]})
    graph = mm.link_graph()
    assert graph.links == {"a": ["b", "ghost"], "c": ["a"]}
    assert graph.missing == ["ghost"]
    assert graph.commit == mm.head()
    old = mm.head()
    mm.save_interaction("b", "now [[c]]", "ok")
    assert mm.link_graph().links["b"] == ["c"]
    assert "b" not in mm.link_graph(commit=old).links


def test_the_async_twins_answer_the_same(store: Path) -> None:
    _store(store).close()

    async def go() -> tuple[SessionPage, int]:
        async with AsyncMemoryManager(store) as amm:
            page = await amm.browse_sessions(tags=["b"], limit=2)
            graph = await amm.link_graph()
            return page, len(graph.links)

    page, links = asyncio.run(go())
    assert _ids(page) == ["s09", "s06"] and page.total == 4 and links == 0
