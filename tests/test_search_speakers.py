"""Speaker-aware search: a query naming someone who spoke finds their turns, and the
``speaker`` filter (Python, CLI, MCP) keeps only the turns a person spoke in."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.mcp import tools
from gitmem.models import Interaction, Message, Session
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Ranker

DAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

# (session, day, speaker, text): a support team; Alice asks, Bob and Carol answer
TURNS = [
    ("support-1", 0, "Alice", "The nightly export to the warehouse failed again"),
    ("support-1", 0, "Bob", "I restarted the export job and it finished"),
    ("support-1", 0, "Carol", "The search index was rebuilt after the disk filled up"),
    ("support-2", 1, "Alice", "Can someone check why the dashboard is slow? Dave asked"),
    ("support-2", 1, "Bob", "The orders table had no index on its date column, I added it"),
    ("support-2", 1, "Alice", "Thanks, that was quick"),
    ("support-3", 2, "Alice", "The dashboard works, thanks"),
    ("support-3", 2, "Carol", "I will look at the dashboard queries tomorrow"),
    ("support-3", 2, "Bob", "Happy to help, the cache is warm now"),
]


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store, agent="tester")
    for at, (sid, day, speaker, text) in enumerate(TURNS):
        mm.save_messages(
            sid,
            [{"speaker": speaker, "content": text}],
            DAY + timedelta(days=day, minutes=at),
            interaction_id=f"t{at}",
        )
    return mm


def _said(speaker: str) -> list[str]:
    """The interaction ids of a person's turns, newest first."""
    return [f"t{at}" for at, turn in reversed(list(enumerate(TURNS))) if turn[2] == speaker]


def test_a_speakers_name_alone_finds_their_turns_newest_first(mm: MemoryManager) -> None:
    hits = mm.search("Bob")
    assert [h.interaction_id for h in hits] == _said("Bob")
    assert {h.speaker for h in hits} == {"Bob"}
    assert all(h.components["speaker"] > 0 for h in hits)


def test_what_a_named_person_said_about_a_topic_comes_first(mm: MemoryManager) -> None:
    hits = mm.search("what did Carol say about the index", explain=True)
    ids = [h.interaction_id for h in hits]
    # Carol's turn about the index, then what else she said, then Bob's about an index
    assert ids[:3] == ["t2", "t7", "t4"]
    assert hits.explanation is not None and "carol" in hits.explanation["terms"]


def test_the_speaker_filter_keeps_only_that_persons_turns(mm: MemoryManager) -> None:
    hits = mm.search("index dashboard", speaker="carol")
    assert sorted(h.interaction_id for h in hits) == ["t2", "t7"]
    assert {h.speaker for h in hits} == {"Carol"}
    assert mm.search("export", speaker="BOB")[0].interaction_id == "t1"
    assert [h.interaction_id for h in mm.search("", speaker="Bob", k=2)] == _said("Bob")[:2]
    explained = mm.search("dashboard", speaker="Carol", explain=True).explanation
    assert explained is not None and explained["filters"]["speakers"] == ["Carol"]
    with pytest.raises(ValidationError, match="speaker"):
        mm.search("  ")


def test_the_cli_filters_by_speaker_and_lists_without_a_query(
    mm: MemoryManager, store: Path
) -> None:
    runner = CliRunner()
    out = runner.invoke(
        cli, ["--repo", str(store), "--json", "search", "dashboard", "--speaker", "alice"]
    )
    assert out.exit_code == 0, out.output
    hits = json.loads(out.output)["hits"]
    assert [h["interaction_id"] for h in hits] and {h["speaker"] for h in hits} == {"Alice"}
    out = runner.invoke(cli, ["--repo", str(store), "--json", "search", "--speaker", "Bob"])
    assert out.exit_code == 0, out.output
    assert [h["interaction_id"] for h in json.loads(out.output)["hits"]] == _said("Bob")
    out = runner.invoke(cli, ["--repo", str(store), "search", "--speaker", "Zoe"])
    assert out.exit_code == 0, out.output
    assert "no turn spoken by Zoe" in out.output
    out = runner.invoke(cli, ["--repo", str(store), "search"])
    assert out.exit_code != 0 and "empty" in out.output


def test_the_mcp_search_tool_takes_a_speaker(mm: MemoryManager) -> None:
    answer = tools.search(
        mm, "dashboard", 10, None, None, None, None, None, None, False, speaker="Carol"
    )
    assert [h["interaction_id"] for h in answer.data["hits"]] == ["t7"]


def test_a_name_that_is_not_a_participant_behaves_as_before(mm: MemoryManager) -> None:
    # Dave is only mentioned: his name is a word like any other, and no one's turns
    hits = mm.search("Dave")
    assert hits[0].interaction_id == "t3"
    assert not any("speaker" in h.components for h in hits)
    hits = mm.search("Dave", speaker="Dave")
    assert not hits and hits.notes


def _chat(n: int) -> Session:
    """Two people who take turns: each speaks in half of the conversation."""
    texts = {10: "We finally got the adoption papers signed", 25: "How is the adoption going?"}
    turns = [
        Interaction(
            id=f"t{i}",
            timestamp=DAY + timedelta(minutes=i),
            messages=[
                Message(
                    speaker="Caroline" if i % 2 == 0 else "Melanie",
                    content=texts.get(i, f"Chatting about the weather, day {i}"),
                )
            ],
        )
        for i in range(n)
    ]
    return Session(id="chat", created=DAY, last_active=DAY, interactions=turns)


def test_a_name_that_speaks_in_half_the_turns_does_not_flood_the_topic() -> None:
    index = SearchIndex(":memory:")
    with index.writing():
        index.put_session(_chat(40), path="chat", blob="b")
    hits = Ranker(index).rank("What did Caroline say about the adoption?", k=10).hits
    by_id = {h.interaction_id: h for h in hits}
    assert hits[0].interaction_id == "t10" and "t25" in by_id
    # her turns that only the name finds come well below the other one's about the adoption
    only_named = [
        h
        for h in hits
        if not any(h.components.get(part) for part in ("keyword", "context", "answer"))
    ]
    assert only_named and all(h.score < by_id["t25"].score / 2 for h in only_named)
    # named alone, the same person's turns are all there is to find
    alone = Ranker(index).rank("Caroline", k=5).hits
    assert [h.interaction_id for h in alone] == ["t38", "t36", "t34", "t32", "t30"]


def test_the_speaker_field_follows_changes_to_a_session() -> None:
    index = SearchIndex(":memory:")
    first = _chat(4)
    with index.writing():
        index.put_session(first, path="chat", blob="b1")
    assert set(index.spoken_turns(["melanie"], 10)) == set(index.spoken_turns(["MELANIE"], 10))
    assert len(index.spoken_turns(["Melanie"], 10)) == 2
    renamed = first.model_copy(
        update={
            "interactions": [
                *first.interactions[:3],
                Interaction(
                    id="t3",
                    timestamp=first.interactions[3].timestamp,
                    messages=[Message(speaker="Mel", content="Chatting about the weather")],
                ),
            ]
        }
    )
    with index.writing():
        index.put_session(renamed, path="chat", blob="b2")
    assert len(index.spoken_turns(["Melanie"], 10)) == 1
    assert len(index.spoken_turns(["Mel"], 10)) == 1
    with index.writing():
        index.remove_path("chat")
    assert not index.spoken_turns(["Caroline", "Mel"], 10)


def test_an_index_of_the_layout_before_speaker_rows_is_rebuilt(
    mm: MemoryManager, store: Path
) -> None:
    assert mm.search("export")
    mm.close_index()
    (path,) = (store / ".git").rglob("index.sqlite")
    db = sqlite3.connect(path)
    with db:  # as an index written before who spoke each turn was a field
        db.execute("UPDATE meta SET value='9' WHERE key='schema'")
        db.execute("DELETE FROM turn_speakers")
    db.close()
    reopened = MemoryManager(store)
    assert [h.interaction_id for h in reopened.search("Bob")] == _said("Bob")
