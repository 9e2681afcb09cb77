"""MemoryManager end to end on real repositories."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gitmem import AsyncMemoryManager, MemoryManager
from gitmem.errors import (
    InvalidSessionId,
    ParseError,
    RepositoryError,
    SessionNotFound,
    ValidationError,
)
from gitmem.models import Message
from tests.conftest import git

T0 = datetime(2024, 4, 15, 15, 30, 22, tzinfo=timezone(timedelta(hours=8)))


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager.init(store, agent="tester", model="test-model")


def test_save_interaction_is_one_commit_with_trailers(mm: MemoryManager, store: Path) -> None:
    sha = mm.save_interaction(
        "s1", "Recommend asyncio books", "Try Fluent Python", timestamp=T0, tags=["python"]
    )
    assert sha == git(store, "rev-parse", "HEAD").strip()
    assert git(store, "rev-list", "--count", "HEAD").strip() == "2"
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: save" in trailers
    assert "Gitmem-Session: s1" in trailers
    assert "Gitmem-Agent: tester" in trailers
    assert "Gitmem-Model: test-model" in trailers
    assert git(store, "log", "-1", "--format=%an").strip() == "tester"
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")
    session = mm.load_memory("s1")
    assert session is not None
    assert session.tags == ["python"]
    assert session.participants == ["User", "Assistant"]
    assert [m.content for m in session.interactions[0].messages] == [
        "Recommend asyncio books",
        "Try Fluent Python",
    ]
    assert session.interactions[0].timestamp == T0
    text = (store / "sessions" / "64" / "s1.md").read_text()
    assert text.startswith("# Session: s1\n")
    assert "> Recommend asyncio books" in text


def test_turns_append_in_order_and_last_active_moves(mm: MemoryManager) -> None:
    for n in range(3):
        mm.save_interaction("s", f"q{n}", f"a{n}", timestamp=T0 + timedelta(minutes=n))
    session = mm.load_memory("s")
    assert session is not None
    assert [i.messages[0].content for i in session.interactions] == ["q0", "q1", "q2"]
    assert session.created == T0
    assert session.last_active == T0 + timedelta(minutes=2)
    assert len({i.id for i in session.interactions}) == 3


def test_any_speakers_and_own_ids(mm: MemoryManager) -> None:
    mm.save_messages(
        "conv",
        [
            Message(speaker="Caroline", content="I went to a support group."),
            {"speaker": "Melanie", "content": "That's great!"},
        ],
        timestamp=T0,
        interaction_id="D1:3",
    )
    session = mm.load_memory("conv")
    assert session is not None and session.interactions[0].id == "D1:3"
    assert session.participants == ["Caroline", "Melanie"]
    with pytest.raises(ValidationError, match="D1:3"):
        mm.save_messages(
            "conv", [Message(speaker="Caroline", content="again")], interaction_id="D1:3"
        )


def test_content_that_looks_like_structure_stays_content(mm: MemoryManager) -> None:
    tricky = "### 2024-01-01T00:00:00\n**User**:\n## Summary\n> quoted\n```\nunclosed\n\ttab  \r\n"
    mm.save_interaction("s", tricky, "", timestamp=T0)
    session = mm.load_memory("s")
    assert session is not None
    assert session.interactions[0].messages[0].content == tricky
    assert session.interactions[0].messages[1].content == ""


def test_unchanged_save_makes_no_commit(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "q", "a", timestamp=T0, interaction_id="i1")
    head = mm.head()
    assert mm.update_metadata("s", add_tags=[]) is None
    assert mm.head() == head


def test_metadata_and_tags(mm: MemoryManager) -> None:
    mm.save_interaction(
        "s",
        "q",
        "a",
        timestamp=T0,
        tags=["a", "b"],
        metadata={"project": "gitmem", "links": ["other"], "mood": "ok"},
    )
    mm.update_metadata("s", add_tags=["c"], remove_tags=["a"], metadata={"mood": None})
    session = mm.load_memory("s")
    assert session is not None
    assert session.tags == ["b", "c"]
    assert session.project == "gitmem"
    assert session.links == ["other"]
    assert "mood" not in session.extra
    with pytest.raises(SessionNotFound):
        mm.update_metadata("missing", add_tags=["x"])


def test_list_sessions_filters(mm: MemoryManager) -> None:
    mm.save_interaction("old", "q", "a", timestamp=T0, tags=["python"])
    mm.save_interaction("new", "q", "a", timestamp=T0 + timedelta(days=3), tags=["books"])
    mm.save_messages("chat", [Message(speaker="Caroline", content="hi")], timestamp=T0)
    assert [s.id for s in mm.list_sessions()] == ["new", "old", "chat"]
    assert [s.id for s in mm.list_sessions(tags=["python"])] == ["old"]
    assert [s.id for s in mm.list_sessions(participant="Caroline")] == ["chat"]
    assert [s.id for s in mm.list_sessions(since=T0 + timedelta(days=1))] == ["new"]
    assert [s.id for s in mm.list_sessions(until=T0)] == ["old", "chat"]
    assert mm.list_sessions(tags=["nope"]) == []


def test_delete_is_a_commit_and_recoverable(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "q", "a", timestamp=T0)
    before = mm.head()
    mm.delete_session("s")
    assert mm.load_memory("s") is None
    assert mm.load_memory("s", commit=before) is not None
    assert "Gitmem-Op: delete" in git(store, "log", "-1", "--format=%(trailers)")
    with pytest.raises(SessionNotFound):
        mm.delete_session("s")


def test_batch_is_one_commit(mm: MemoryManager, store: Path) -> None:
    with mm.batch("Import 20 sessions") as result:
        for n in range(20):
            mm.save_interaction(f"s{n}", "q", "a", timestamp=T0)
        mm.save_interaction("s0", "q2", "a2", timestamp=T0)
    assert result.commit == git(store, "rev-parse", "HEAD").strip()
    assert git(store, "rev-list", "--count", "HEAD").strip() == "2"
    assert len(mm.session_ids()) == 20
    s0 = mm.load_memory("s0")
    assert s0 is not None and len(s0.interactions) == 2
    assert git(store, "status", "--porcelain") == ""


def test_failed_batch_writes_nothing(mm: MemoryManager, store: Path) -> None:
    head = mm.head()
    with pytest.raises(RuntimeError), mm.batch("doomed"):
        mm.save_interaction("s", "q", "a")
        raise RuntimeError("boom")
    assert mm.head() == head
    assert not (store / "sessions" / "a0" / "s.md").exists()


def test_hostile_session_ids_are_refused(mm: MemoryManager, store: Path) -> None:
    for bad in ["", "../x", "/etc/passwd", " lead"]:
        if bad in ("../x", "/etc/passwd"):
            mm.save_interaction(bad, "q", "a")  # allowed, but encoded inside sessions/
            continue
        with pytest.raises((InvalidSessionId, ValidationError)):
            mm.save_interaction(bad, "q", "a")
    names = sorted(p.name for p in (store / "sessions").glob("*/*"))
    assert names == ["%2E.%2Fx.md", "%2Fetc%2Fpasswd.md"]
    assert mm.load_memory("../x") is not None
    assert sorted(mm.session_ids()) == ["../x", "/etc/passwd"]


def test_bad_input_is_refused_with_a_clear_error(mm: MemoryManager) -> None:
    with pytest.raises(ValidationError, match="speaker"):
        mm.save_messages("s", [{"speaker": "**x**", "content": "hi"}])
    with pytest.raises(ValidationError, match="needs a message"):
        mm.save_messages("s", [])
    with pytest.raises(ValidationError, match="interaction id"):
        mm.save_messages("s", [{"speaker": "a", "content": "b"}], interaction_id="bad id!")
    assert mm.session_ids() == []


def test_hand_edit_is_committed_before_the_next_save(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "The capital is Lyon", "Noted", timestamp=T0)
    path = store / "sessions" / "a0" / "s.md"
    path.write_text(path.read_text().replace("Lyon", "Paris"))
    mm.save_interaction("s", "q2", "a2", timestamp=T0 + timedelta(minutes=1))
    log = git(store, "log", "--format=%s|%an|%(trailers:key=Gitmem-Op,valueonly)", "-2")
    lines = [line for line in log.splitlines() if line]
    assert lines[0].endswith("save")
    assert lines[1].startswith("Record hand edit of sessions/a0/s.md|Test Person|edit")
    session = mm.load_memory("s")
    assert session is not None
    assert session.interactions[0].messages[0].content == "The capital is Paris"
    assert git(store, "status", "--porcelain") == ""


def test_broken_hand_edit_is_never_overwritten(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "q", "a", timestamp=T0)
    path = store / "sessions" / "a0" / "s.md"
    broken = path.read_text().replace("### ", "### not-a-date ", 1)
    path.write_text(broken)
    head = mm.head()
    with pytest.raises(ParseError) as caught:
        mm.save_interaction("s", "q2", "a2")
    assert any(d.path == "sessions/a0/s.md" and d.line > 1 for d in caught.value.diagnostics)
    assert path.read_text() == broken
    assert mm.head() == head
    problems = mm.check()
    assert problems and problems[0].path == "sessions/a0/s.md"


def test_committed_broken_file_blocks_saves_to_it_only(mm: MemoryManager, store: Path) -> None:
    mm.save_interaction("s", "q", "a", timestamp=T0)
    mm.save_interaction("ok", "q", "a", timestamp=T0)
    path = store / "sessions" / "a0" / "s.md"
    path.write_text("# Not a session\n")
    git(store, "commit", "-qam", "Break it by hand")
    with pytest.raises(ParseError):
        mm.load_memory("s")
    with pytest.raises(ParseError):
        mm.save_interaction("s", "q2", "a2")
    assert git(store, "show", "HEAD:sessions/a0/s.md") == "# Not a session\n"
    assert mm.save_interaction("ok", "q2", "a2")
    assert [s.id for s in mm.list_sessions()] == ["ok"]


def test_cache_follows_head_moved_by_another_process(store: Path) -> None:
    first = MemoryManager.init(store)
    second = MemoryManager(store)
    first.save_interaction("s", "q1", "a1", timestamp=T0)
    assert second.load_memory("s") is not None
    first.save_interaction("s", "q2", "a2", timestamp=T0)
    session = second.load_memory("s")
    assert session is not None and len(session.interactions) == 2


def test_zh_labels(store: Path) -> None:
    mm = MemoryManager.init(store, language="zh")
    mm.save_interaction("会话", "你好", "您好", timestamp=T0)
    text = (store / "sessions" / "83" / "会话.md").read_text()
    assert text.startswith("# 会话: 会话\n")
    assert "**用户**:" in text and "**助手**:" in text
    session = mm.load_memory("会话")
    assert session is not None and session.language == "zh"


def test_opening_a_missing_store_says_how_to_create_one(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="gitmem init"):
        MemoryManager(tmp_path / "nope")


def _writer(store: str, worker: int, count: int) -> None:
    mm = MemoryManager(store, agent=f"w{worker}")
    for n in range(count):
        mm.save_interaction("shared", f"w{worker} q{n}", "a")
        mm.save_interaction(f"own-{worker}", f"q{n}", "a")
    mm.close()


def test_concurrent_writers_lose_no_save(store: Path) -> None:
    MemoryManager.init(store).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(store), w, 8)) for w in range(3)]
    threads = [threading.Thread(target=_writer, args=(str(store), 10 + w, 8)) for w in range(2)]
    for item in [*procs, *threads]:
        item.start()
    for item in [*procs, *threads]:
        item.join()
    mm = MemoryManager(store)
    shared = mm.load_memory("shared")
    assert shared is not None
    got = sorted(i.messages[0].content for i in shared.interactions)
    assert got == sorted(f"w{w} q{n}" for w in [0, 1, 2, 10, 11] for n in range(8))
    assert git(store, "rev-list", "--count", "HEAD").strip() == str(1 + 5 * 16)
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")


def test_async_manager(store: Path) -> None:
    async def scenario() -> int:
        amm = AsyncMemoryManager.init(store)
        await asyncio.gather(*(amm.save_interaction("s", f"q{n}", "a") for n in range(5)))
        session = await amm.load_memory("s")
        await amm.close()
        return len(session.interactions) if session else 0

    assert asyncio.run(scenario()) == 5


def test_check_reports_a_symlinked_session_file(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    mm.save_interaction("ok", "q", "a", timestamp=T0)
    outside = tmp_path / "outside.md"
    outside.write_text("# Session: x\n")
    (store / "sessions" / "4f").mkdir()
    (store / "sessions" / "4f" / "link.md").symlink_to(outside)
    problems = mm.check()
    assert [(p.path, p.line) for p in problems] == [("sessions/4f/link.md", 1)]
    assert "symlink" in problems[0].problem


def test_acting_as_names_each_threads_commits_and_nothing_else(
    mm: MemoryManager, store: Path
) -> None:
    mm.via = "mcp"
    barrier = threading.Barrier(3)

    def write(agent: str) -> None:
        barrier.wait()
        for n in range(5):
            with mm.acting_as(agent):
                mm.save_interaction(f"s-{agent}", f"from {agent} {n}", "ok")

    threads = [threading.Thread(target=write, args=(a,)) for a in ("alice-bot", "bob-bot")]
    for thread in threads:
        thread.start()
    barrier.wait()
    mm.save_interaction("s-owner", "from the owner", "ok")  # outside acting_as, meanwhile
    for thread in threads:
        thread.join()
    log = git(
        store,
        "log",
        "--format=%an|%(trailers:key=Gitmem-Agent,valueonly,separator=)|"
        "%(trailers:key=Gitmem-Session,valueonly,separator=)|"
        "%(trailers:key=Gitmem-Via,valueonly,separator=)",
        "-n",
        "11",
    )
    rows = [line.split("|") for line in log.splitlines()]
    assert len(rows) == 11
    for author, agent, session, via in rows:
        expected = session.removeprefix("s-") if session != "s-owner" else "tester"
        assert (author, agent, via) == (expected, expected, "mcp")
    with pytest.raises(ValidationError, match="agent name"):
        mm.acting_as("")
    assert mm.agent == "tester" and mm.repository.identity.name == "tester"
