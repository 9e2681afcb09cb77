"""The time machine through the library, on real stores, confirmed with the real git."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gitmem import AsyncMemoryManager, MemoryManager
from gitmem.errors import (
    ConflictError,
    ParseError,
    ReadOnlyError,
    RevisionNotFound,
    SessionNotFound,
    ValidationError,
)
from gitmem.format import parse as markdown
from gitmem.format.paths import session_path
from gitmem.models import Summary
from tests.conftest import git

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=timezone.utc)


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    return MemoryManager.init(store, agent="bot", model="good-model")


def turns(mm: MemoryManager, session_id: str, first: int, count: int) -> list[str]:
    return [
        mm.save_interaction(
            session_id,
            f"question {n}",
            f"answer {n}",
            timestamp=T0 + timedelta(minutes=n),
            interaction_id=f"t{n}",
        )
        or ""
        for n in range(first, first + count)
    ]


def summarize(mm: MemoryManager, session_id: str, text: str) -> str:
    session = mm.load_memory(session_id)
    assert session is not None
    summary = Summary(text=text, generated=T0 + timedelta(hours=1), model=mm.model)
    sha = mm.put_session(
        session.model_copy(update={"summary": summary}),
        op="summarize",
        subject=f"Summarize {session_id}",
    )
    assert sha
    return sha


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def clean(store: Path) -> None:
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")


# --- the motivating case -----------------------------------------------------------------


def test_revert_a_bad_summary_keeps_the_five_later_turns(mm: MemoryManager, store: Path) -> None:
    turns(mm, "s", 0, 3)
    summarize(mm, "s", "The user asked three questions about topics 0 to 2.")
    llm = MemoryManager(store, agent="summarizer", model="bad-llm")
    bad = summarize(llm, "s", "The user hates Python and wants to delete everything.")
    later = turns(mm, "s", 3, 5)
    assert len(set(later)) == 5

    sha = mm.revert(bad)
    assert sha and sha == head(store)
    session = mm.load_memory("s")
    assert session is not None
    assert session.summary is not None
    assert session.summary.text == "The user asked three questions about topics 0 to 2."
    assert [i.id for i in session.interactions] == [f"t{n}" for n in range(8)]
    # a new commit on top: history is not rewritten
    assert git(store, "rev-list", "--count", "HEAD").strip() == "12"
    assert bad in git(store, "rev-list", "HEAD")
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: revert" in trailers
    assert f"Gitmem-Reverts: {bad}" in trailers
    assert "Gitmem-Session: s" in trailers
    shown = git(store, "show", "--format=", sha)
    assert "-> The user hates Python" in shown
    assert "+> The user asked three questions" in shown
    assert "question 7" not in shown  # the later turns are not touched
    # blame names the revert for the summary and the savers for the turns
    blame = {b.interaction_id or "summary": b for b in mm.blame("s")}
    assert blame["summary"].sha == sha and blame["summary"].op == "revert"
    assert blame["t7"].sha == later[-1]
    clean(store)


def test_revert_with_no_later_change_is_the_exact_inverse(mm: MemoryManager, store: Path) -> None:
    turns(mm, "s", 0, 2)
    mm.update_metadata("s", add_tags=["x"], metadata={"mood": "calm"})
    target = turns(mm, "s", 2, 1)[0]
    turns(mm, "other", 10, 2)  # later commits elsewhere do not matter
    sha = mm.revert(target)
    assert sha
    forward = git(store, "diff", f"{target}^", target)
    backward = git(store, "diff", sha, f"{sha}^")
    assert forward == backward
    assert git(store, "diff", f"{target}^", "HEAD", "--", "sessions/a0/s.md") == ""
    clean(store)


def test_revert_conflict_names_session_and_part_and_writes_nothing(
    mm: MemoryManager, store: Path
) -> None:
    turns(mm, "s", 0, 2)
    bad = summarize(mm, "s", "first summary")
    summarize(mm, "s", "second summary")
    before = head(store)
    with pytest.raises(ConflictError) as caught:
        mm.revert(bad)
    message = str(caught.value)
    assert "session 's'" in message and "summary" in message and bad[:12] in message
    assert head(store) == before
    clean(store)


def test_revert_one_turn_among_later_turns_and_a_deletion(mm: MemoryManager, store: Path) -> None:
    shas = turns(mm, "s", 0, 4)
    mm.revert(shas[1])
    session = mm.load_memory("s")
    assert session is not None
    assert [i.id for i in session.interactions] == ["t0", "t2", "t3"]
    deleted = mm.delete_session("s")
    mm.revert(deleted)
    session = mm.load_memory("s")
    assert session is not None and [i.id for i in session.interactions] == ["t0", "t2", "t3"]
    # reverting the revert brings t1 back where it was
    revert_of_t1 = mm.history("s", op="revert")[-1].sha
    mm.revert(revert_of_t1)
    session = mm.load_memory("s")
    assert session is not None
    assert [i.id for i in session.interactions] == ["t0", "t1", "t2", "t3"]
    # undoing what is already undone writes nothing
    assert mm.revert(deleted) is None
    clean(store)


def test_revert_of_a_session_creation_keeps_later_turns(mm: MemoryManager, store: Path) -> None:
    created = turns(mm, "s", 0, 1)[0]
    mm.save_messages(
        "s", [{"speaker": "Caroline", "content": "hi"}], timestamp=T0, interaction_id="c1"
    )
    mm.revert(created)
    session = mm.load_memory("s")
    assert session is not None
    assert [i.id for i in session.interactions] == ["c1"]
    assert session.participants == ["Caroline"]
    only = turns(mm, "lonely", 0, 1)[0]
    mm.revert(only)
    assert mm.load_memory("lonely") is None
    clean(store)


def test_revert_refuses_foreign_first_and_batched(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    turns(mm, "s", 0, 1)
    other = MemoryManager.init(tmp_path / "other")
    other.save_interaction("s", "q", "a")
    before = head(store)
    with pytest.raises(RevisionNotFound, match="unknown revision"):
        mm.revert(other.head() or "")
    first = git(store, "rev-list", "--max-parents=0", "HEAD").strip()
    with pytest.raises(ValidationError, match="first commit"):
        mm.revert(first)
    with pytest.raises(ValidationError, match="batch"), mm.batch():
        mm.revert("HEAD")
    assert head(store) == before
    clean(store)


def test_revert_records_an_uncommitted_hand_edit_first(mm: MemoryManager, store: Path) -> None:
    shas = turns(mm, "s", 0, 2)
    path = store / "sessions" / "a0" / "s.md"
    path.write_text(path.read_text().replace("answer 0", "answer zero"))
    mm.revert(shas[1])
    log = mm.history("s", limit=2)
    assert [r.op for r in log] == ["revert", "edit"]
    session = mm.load_memory("s")
    assert session is not None
    assert [i.id for i in session.interactions] == ["t0"]
    assert session.interactions[0].messages[1].content == "answer zero"
    clean(store)


# --- history ----------------------------------------------------------------------------


def test_history_of_a_session_with_filters_and_changes(mm: MemoryManager, store: Path) -> None:
    saves = turns(mm, "s", 0, 3)
    turns(mm, "other", 0, 1)
    llm = MemoryManager(store, agent="summarizer", model="llm-1")
    summary_sha = summarize(llm, "s", "a summary")
    log = mm.history("s")
    assert [r.sha for r in log] == [summary_sha, *reversed(saves)]
    top = log[0]
    assert (top.op, top.agent, top.model, top.author) == (
        "summarize",
        "summarizer",
        "llm-1",
        "summarizer",
    )
    assert top.sessions == ["s"] and top.subject == "Summarize s"
    assert top.trailers["Gitmem-Op"] == ["summarize"]
    assert top.changes == {}
    assert [r.sha for r in mm.history("s", op="save")] == list(reversed(saves))
    assert [r.sha for r in mm.history(agent="summarizer")] == [summary_sha]
    assert [r.sha for r in mm.history(model="llm-1")] == [summary_sha]
    assert mm.history(agent="nobody") == []
    assert len(mm.history(limit=2)) == 2
    store_wide = mm.history()
    assert store_wide[-1].op == "init" and len(store_wide) == 6
    detailed = mm.history("s", changes=True)
    assert detailed[0].changes == {"s": ["added summary"]}
    assert "added interaction t2" in detailed[1].changes["s"]
    assert detailed[-1].changes["s"][:2] == ["added session", "added interaction t0"]
    # git itself shows the same trailers
    assert "Gitmem-Agent: summarizer" in git(store, "log", "-1", "--format=%(trailers)")
    with pytest.raises(SessionNotFound, match="never"):
        mm.history("never-existed")
    with pytest.raises(ValidationError):
        mm.history("s", since="last tuesday")


def test_history_by_time_uses_commit_times(mm: MemoryManager, store: Path) -> None:
    when = [T0 + timedelta(days=d) for d in range(3)]
    shas = [commit_at(mm, "s", n, moment) for n, moment in enumerate(when)]
    assert [r.sha for r in mm.history("s", since=when[1])] == [shas[2], shas[1]]
    assert [r.sha for r in mm.history("s", until=when[1])] == [shas[1], shas[0]]
    assert [r.sha for r in mm.history("s", since="2024-04-16", until="2024-04-16T23:00")] == [
        shas[1]
    ]
    assert mm.history("s")[0].time == when[2]


def commit_at(mm: MemoryManager, session_id: str, n: int, when: datetime) -> str:
    """A save with a chosen commit time (through the repository's own transaction)."""
    path = session_path(session_id)
    current = mm.load_memory(session_id)
    with mm.repository.transaction() as txn:
        session = current or markdown.parse(
            f"# Session: {session_id}\n\n## Metadata\n- **Session ID**: {session_id}\n"
            f"- **Created**: {when.isoformat()}\n- **Last active**: {when.isoformat()}\n",
            path,
        )
        session = session.model_copy(update={"tags": [*session.tags, f"tag{n}"]})
        txn.write(path, markdown.render(session).encode())
        sha = txn.commit(
            f"Tag {n}", when=when, trailers={"Gitmem-Op": "metadata", "Gitmem-Session": session_id}
        )
    assert sha
    return sha


def test_history_survives_deletion_and_restore(mm: MemoryManager, store: Path) -> None:
    turns(mm, "s", 0, 2)
    deleted = mm.delete_session("s")
    assert mm.history("s")[0].sha == deleted
    with pytest.raises(SessionNotFound, match="restore"):
        mm.blame("s")
    sha = mm.restore_session("s")
    assert "Gitmem-Op: restore" in git(store, "log", "-1", "--format=%(trailers)")
    session = mm.load_memory("s")
    assert session is not None and [i.id for i in session.interactions] == ["t0", "t1"]
    assert git(store, "show", f"{sha}:sessions/a0/s.md") == git(
        store, "show", f"{deleted}^:sessions/a0/s.md"
    )
    before = head(store)
    with pytest.raises(ConflictError, match="exists"):
        mm.restore_session("s")
    with pytest.raises(SessionNotFound):
        mm.restore_session("never-existed")
    assert head(store) == before
    # an older version on request
    mm.delete_session("s")
    mm.restore_session("s", rev=mm.history("s", op="save")[-1].sha)
    session = mm.load_memory("s")
    assert session is not None and [i.id for i in session.interactions] == ["t0"]
    clean(store)


# --- resolving revisions ---------------------------------------------------------------------


def test_revisions_accept_shas_relative_names_branches_and_dates(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    when = [T0 + timedelta(days=d) for d in range(3)]
    shas = [commit_at(mm, "s", n, moment) for n, moment in enumerate(when)]
    assert mm.resolve(shas[1]) == shas[1]
    assert mm.resolve(shas[1][:8]) == shas[1]
    assert mm.resolve("HEAD~1") == shas[1]
    assert mm.resolve("main") == shas[2]
    assert mm.resolve(when[1]) == shas[1]
    assert mm.resolve(when[1] + timedelta(hours=5)) == shas[1]
    assert mm.resolve("2024-04-16T15:30:00+00:00") == shas[1]
    assert mm.resolve("2024-04-16T17:30:00+02:00") == shas[1]
    assert mm.resolve("2024-04-17") == shas[1]  # midnight UTC, before the third commit
    first = git(store, "rev-list", "--max-parents=0", "HEAD").strip()
    with pytest.raises(RevisionNotFound, match="before"):
        mm.resolve("1999-01-01")
    assert first  # the store's creation commit is now; dates before it fail
    for bad in ("nonsense", "HEAD~99", "", "--all"):
        with pytest.raises(RevisionNotFound):
            mm.resolve(bad)
    other = MemoryManager.init(tmp_path / "other")
    with pytest.raises(RevisionNotFound, match="another repository"):
        mm.resolve(other.head() or "")
    blob = git(store, "rev-parse", f"HEAD:{session_path('s')}").strip()
    with pytest.raises(RevisionNotFound):
        mm.resolve(blob)


# --- diff --------------------------------------------------------------------------------


def test_session_diff_text_and_structure(mm: MemoryManager, store: Path) -> None:
    turns(mm, "s", 0, 2)
    start = head(store)
    session = mm.load_memory("s")
    assert session is not None
    edited = session.interactions[0].model_copy(
        update={
            "messages": [
                session.interactions[0].messages[0],
                session.interactions[0]
                .messages[1]
                .model_copy(update={"content": "a better answer"}),
            ]
        }
    )
    changed = session.model_copy(
        update={
            "interactions": [edited, *session.interactions[2:]],
            "extra": {"mood": "happy"},
            "summary": Summary(text="new summary", generated=T0),
        }
    )
    mm.put_session(changed, op="edit")
    turns(mm, "s", 5, 1)
    result = mm.diff("s", start, "HEAD")
    assert result.a == start and result.b == head(store)
    [d] = result.sessions
    assert d.status == "modified"
    assert d.interactions_added == ["t5"]
    assert d.interactions_removed == ["t1"]
    assert d.interactions_changed == ["t0"]
    assert d.metadata["extra:mood"].model_dump() == {"old": None, "new": "happy"}
    assert "last_active" in d.metadata
    assert d.summary is not None and (d.summary.old, d.summary.new) == (None, "new summary")
    # the unified text is a real patch: git applies it in reverse on the new version
    patch = store.parent / "s.patch"
    patch.write_text(result.unified)
    git(store, "apply", "--check", "--reverse", str(patch))
    assert "+> a better answer" in result.unified
    # default a is b's parent; nothing changed means no session entry
    assert mm.diff("s").sessions[0].interactions_added == ["t5"]
    assert mm.diff("s", "HEAD", "HEAD").sessions == []
    assert mm.diff("s", start, "HEAD", text=False).sessions[0].unified == ""
    with pytest.raises(SessionNotFound):
        mm.diff("never-existed", start, "HEAD")


def test_store_wide_diff_covers_every_session(mm: MemoryManager, store: Path) -> None:
    start = head(store)
    turns(mm, "a", 0, 1)
    turns(mm, "b", 0, 1)
    mm.delete_session("a")
    result = mm.diff(a=start)
    assert [(d.session_id, d.status) for d in result.sessions] == [("b", "added")]
    result = mm.diff(a=start, b="HEAD~1")
    assert {d.session_id: d.status for d in result.sessions} == {"a": "added", "b": "added"}
    root = mm.diff(b=git(store, "rev-list", "--max-parents=0", "HEAD").strip())
    assert root.a is None
    assert sorted(root.files) == [".gitattributes", ".gitmem-layout", "README.md"]


def test_diff_reports_a_broken_version_instead_of_failing(mm: MemoryManager, store: Path) -> None:
    turns(mm, "s", 0, 1)
    (store / "sessions" / "a0" / "s.md").write_text("# Session: s\n\nnot a session file\n")
    git(store, "commit", "-qam", "hand edit")
    [d] = mm.diff("s").sessions
    assert d.problems and "does not parse" in d.problems[0]
    assert "+not a session file" in d.unified
    with pytest.raises(ParseError):
        mm.blame("s")


# --- blame, rollback -----------------------------------------------------------------------


def test_blame_names_commit_agent_and_model_per_part(mm: MemoryManager, store: Path) -> None:
    first = turns(mm, "s", 0, 2)
    llm = MemoryManager(store, agent="summarizer", model="llm-1")
    summary_sha = summarize(llm, "s", "summary")
    other = MemoryManager(store, agent="editor")
    session = other.load_memory("s")
    assert session is not None
    edited = session.interactions[0].model_copy(
        update={
            "messages": [
                session.interactions[0]
                .messages[0]
                .model_copy(update={"content": "edited question"})
            ]
        }
    )
    edit = other.put_session(
        session.model_copy(update={"interactions": [edited, session.interactions[1]]}), op="edit"
    )
    later = turns(mm, "s", 2, 1)[0]
    blame = mm.blame("s")
    assert [(b.kind, b.interaction_id) for b in blame] == [
        ("interaction", "t0"),
        ("interaction", "t1"),
        ("interaction", "t2"),
        ("summary", None),
    ]
    by_part = {b.interaction_id or "summary": b for b in blame}
    assert (by_part["t0"].sha, by_part["t0"].agent, by_part["t0"].op) == (edit, "editor", "edit")
    assert (by_part["t1"].sha, by_part["t1"].model) == (first[1], "good-model")
    assert by_part["t2"].sha == later
    assert (by_part["summary"].sha, by_part["summary"].agent, by_part["summary"].model) == (
        summary_sha,
        "summarizer",
        "llm-1",
    )
    # as of an earlier commit
    assert {b.interaction_id for b in mm.blame("s", commit=first[1])} == {"t0", "t1"}
    with pytest.raises(SessionNotFound):
        mm.blame("never-existed")


def test_rollback_is_a_new_commit_restoring_the_file(mm: MemoryManager, store: Path) -> None:
    shas = turns(mm, "s", 0, 3)
    summarize(mm, "s", "summary")
    sha = mm.rollback("s", to=shas[0])
    assert sha == head(store)
    assert git(store, "show", "HEAD:sessions/a0/s.md") == git(
        store, "show", f"{shas[0]}:sessions/a0/s.md"
    )
    trailers = git(store, "log", "-1", "--format=%(trailers)")
    assert "Gitmem-Op: rollback" in trailers and f"Gitmem-Rollback-To: {shas[0]}" in trailers
    assert git(store, "rev-list", "--count", "HEAD").strip() == "6"
    assert mm.rollback("s", to=shas[0]) is None  # already there
    # forward again, by date-free relative name
    mm.rollback("s", to="HEAD~1")
    session = mm.load_memory("s")
    assert session is not None and session.summary is not None
    before = head(store)
    with pytest.raises(SessionNotFound, match="did not exist"):
        mm.rollback("s", to=git(store, "rev-list", "--max-parents=0", "HEAD").strip())
    with pytest.raises(SessionNotFound):
        mm.rollback("never-existed", to="HEAD")
    with pytest.raises(RevisionNotFound):
        mm.rollback("s", to="no-such-rev")
    assert head(store) == before
    clean(store)


# --- undoing an agent's work -------------------------------------------------------------------


def test_revert_where_dry_run_then_one_commit(mm: MemoryManager, store: Path) -> None:
    turns(mm, "s", 0, 2)
    rogue = MemoryManager(store, agent="rogue", model="bad-llm")
    summarize(rogue, "s", "nonsense")
    rogue.update_metadata("s", add_tags=["spam"])
    rogue.save_interaction("new", "made up", "made up")
    turns(mm, "s", 2, 2)
    before = head(store)
    plan = mm.revert_where(agent="rogue", since=T0)
    assert plan.dry_run and plan.commit is None
    assert len(plan.reverted) == 3 and {r.agent for r in plan.reverted} == {"rogue"}
    by_session = {d.session_id: d for d in plan.sessions}
    assert by_session["new"].status == "removed"
    assert by_session["s"].summary is not None and by_session["s"].summary.old == "nonsense"
    assert by_session["s"].metadata["tags"].new == []
    assert head(store) == before  # a dry run writes nothing

    done = mm.revert_where(agent="rogue", since=T0, dry_run=False)
    assert done.commit == head(store)
    assert git(store, "rev-list", "--count", f"{before}..HEAD").strip() == "1"
    session = mm.load_memory("s")
    assert session is not None
    assert session.summary is None and session.tags == []
    assert [i.id for i in session.interactions] == ["t0", "t1", "t2", "t3"]
    assert mm.load_memory("new") is None
    assert "Gitmem-Op: revert" in git(store, "log", "-1", "--format=%(trailers)")
    # nothing left to undo
    assert mm.revert_where(agent="rogue", dry_run=False).commit is None
    assert mm.revert_where(agent="nobody").reverted == []
    with pytest.raises(ValidationError):
        mm.revert_where(since=T0)
    clean(store)


# --- reading as of a past moment ----------------------------------------------------------------


def test_at_reads_the_past_and_refuses_writes(mm: MemoryManager, store: Path) -> None:
    when = [T0 + timedelta(days=d) for d in range(3)]
    commit_at(mm, "s", 0, when[0])
    commit_at(mm, "s", 1, when[1])
    mm.save_interaction("t", "q", "a")
    mm.delete_session("s")
    past = mm.at("2024-04-16T16:00:00+00:00")
    session = past.load_memory("s")
    assert session is not None and session.tags == ["tag0", "tag1"]
    assert past.session_ids() == ["s"]
    assert [s.id for s in past.list_sessions()] == ["s"]
    assert past.load_memory("t") is None
    assert sorted(s.id for s in mm.at("HEAD~1").list_sessions()) == ["s", "t"]
    assert len(past.history("s")) == 2  # history as of then
    before = head(store)
    with pytest.raises(ReadOnlyError, match="read-only"):
        past.save_interaction("s", "q", "a")
    with pytest.raises(ReadOnlyError):
        past.delete_session("s")
    with pytest.raises(AttributeError):
        past.no_such_method()  # type: ignore[attr-defined]
    with pytest.raises(RevisionNotFound, match="before"):
        mm.at(datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert head(store) == before
    clean(store)


def test_async_wrappers(store: Path) -> None:
    async def scenario() -> tuple[int, int, str | None]:
        amm = AsyncMemoryManager.init(store, agent="bot")
        await amm.save_interaction("s", "q", "a", interaction_id="t0")
        second = await amm.save_interaction("s", "q2", "a2", interaction_id="t1")
        log = await amm.history("s")
        diff = await amm.diff("s")
        reverted = await amm.revert(second)
        view = await amm.at("HEAD~1")
        seen = view.load_memory("s")
        await amm.close()
        assert diff.sessions[0].interactions_added == ["t1"]
        return len(log), len(seen.interactions) if seen else 0, reverted

    count, seen, reverted = asyncio.run(scenario())
    assert (count, seen) == (2, 2) and reverted


def test_long_history_is_read_with_git_log_pathspec(store: Path) -> None:
    mm = MemoryManager.init(store)
    for n in range(30):
        with mm.batch(f"batch {n}"):
            mm.save_interaction(f"s{n}", "q", "a")
            mm.save_interaction("busy", f"q{n}", "a")
    mm.repository.pack()  # what housekeeping runs: commit-graph with changed-path filters
    graph = subprocess.run(["git", "commit-graph", "verify"], cwd=store, capture_output=True)
    assert graph.returncode == 0
    assert len(mm.history("busy")) == 30
    assert len(mm.history("s7")) == 1
    assert sorted(mm.history("s7")[0].sessions) == ["busy", "s7"]
    assert sorted(mm.history("s7", changes=True)[0].changes) == ["s7"]


def test_revert_a_summary_that_archived_turns(mm: MemoryManager, store: Path) -> None:
    from gitmem.summary.triggers import SummaryConfig

    mm.summary_config = SummaryConfig(archive="archive", offline=True)
    turns(mm, "s", 0, 4)
    summary_sha = mm.summarize("s", offline=True)
    assert (store / "archive" / "a0" / "s.md").exists()
    moved = mm.load_memory("s")
    assert moved is not None and len(moved.interactions) < 4
    later = turns(mm, "s", 4, 2)
    # blame follows the archived turns to the saves that wrote them
    blame = {b.interaction_id or "summary": b for b in mm.blame("s")}
    saves = {r.sha for r in mm.history("s", op="save")}
    assert set(blame) == {*(f"t{n}" for n in range(6)), "summary"}
    assert all(blame[f"t{n}"].sha in saves for n in range(6))
    assert blame["t5"].sha == later[1] and blame["summary"].sha == summary_sha
    sha = mm.revert(summary_sha)
    assert sha
    session = mm.load_memory("s")
    assert session is not None and session.summary is None
    assert [i.id for i in session.interactions] == [f"t{n}" for n in range(6)]
    assert not (store / "archive" / "a0" / "s.md").exists()
    assert "Gitmem-Session: s" in git(store, "log", "-1", "--format=%(trailers)")
    # rolling back to the summary brings the archive part back with it
    mm.rollback("s", to=summary_sha)
    assert git(store, "show", "HEAD:archive/a0/s.md") == git(
        store, "show", f"{summary_sha}:archive/a0/s.md"
    )
    clean(store)


def test_history_cache_follows_rewritten_history_and_plain_git_commits(
    mm: MemoryManager, store: Path
) -> None:
    shas = turns(mm, "s", 0, 2)
    assert [r.sha for r in mm.history("s")] == list(reversed(shas))  # git log, no cache yet
    cache = mm.repository.state_dir / "history"
    assert not (cache / "HEAD").exists()
    mm.repository.pack()  # housekeeping builds it; reads keep it up to date
    shas += turns(mm, "s", 2, 1)
    assert [r.sha for r in mm.history("s")] == list(reversed(shas))
    assert (cache / "HEAD").read_text().split()[1] == shas[-1]
    # a person rewinds the branch: the cache notices and rebuilds
    git(store, "reset", "-q", "--hard", shas[0])
    assert [r.sha for r in mm.history("s")] == [shas[0]]
    # a person's own commit, without trailers, still shows up with its session
    path = store / "sessions" / "a0" / "s.md"
    path.write_text(path.read_text().replace("answer 0", "answer 0, edited"))
    git(store, "commit", "-qam", "fix a typo")
    top = mm.history("s")[0]
    assert (top.subject, top.op, top.sessions) == ("fix a typo", None, ["s"])
    assert mm.blame("s")[0].subject == "fix a typo"
    # the cache is derived: deleting it changes nothing
    shutil.rmtree(cache)
    assert mm.history("s")[0].subject == "fix a typo"
    assert len(mm.history("s")) == 2
    assert mm.repository.index_history() == head(store)
    assert len(mm.history("s")) == 2


def test_a_trailer_quoted_in_many_bodies_does_not_hide_the_real_one(store: Path) -> None:
    """history(agent=..., limit=1) asks git for a few commits only; commits that merely quote
    the trailer in their body must not crowd out the one that carries it."""
    mm = MemoryManager(store, init=True, agent="bob")
    mm.save_interaction("s", "hello", "hi")
    for n in range(40):
        git(
            store,
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            f"note {n}",
            "-m",
            "Gitmem-Agent: bob",
            "-m",
            "quoted above, not a trailer",
        )
    found = mm.history(agent="bob", limit=1)
    assert [r.op for r in found] == ["save"]
    assert len(mm.history(agent="bob")) == 1
