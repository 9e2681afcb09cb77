"""The core every feature builds on: SessionCore alone, its hooks, and outcomes that are returned
(never left on a shared attribute)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from gitmem.core import SessionCore
from gitmem.errors import ReadOnlyError
from gitmem.facts.consolidation import ConsolidationMethods
from gitmem.facts.methods import FactMethods
from gitmem.history.methods import HistoryMethods
from gitmem.manager import MemoryManager
from gitmem.models import BatchResult, Session, SummaryOutcome
from gitmem.search.methods import SearchMethods
from gitmem.summary.methods import SummaryMethods
from gitmem.sync.merge import MergeNote
from gitmem.sync.methods import SyncMethods, SyncResult
from tests.conftest import git

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"


def test_the_core_alone_saves_and_reads(store: Path) -> None:
    core = SessionCore.init(store, agent="bot")
    sha = core.save_interaction("s", "hello", "hi")
    assert sha == git(store, "rev-parse", "HEAD").strip()
    session = core.load_memory("s")
    assert session is not None and [m.content for m in session.interactions[0].messages] == [
        "hello",
        "hi",
    ]
    assert not hasattr(core, "search") and not hasattr(core, "summarize")
    assert git(store, "status", "--porcelain") == ""
    core.close()


def test_every_feature_class_builds_on_the_core_without_stubs() -> None:
    for feature in (HistoryMethods, SearchMethods, SummaryMethods, SyncMethods, FactMethods):
        assert issubclass(feature, SessionCore)
    assert issubclass(ConsolidationMethods, FactMethods)
    assert MemoryManager.__bases__ == (
        HistoryMethods,
        SearchMethods,
        SummaryMethods,
        SyncMethods,
        ConsolidationMethods,
    )
    stubbed = []
    for path in [PACKAGE / "core.py", *PACKAGE.glob("*/methods.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                stubbed.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not stubbed, f"TYPE_CHECKING blocks left: {stubbed}"


def test_a_hook_runs_after_each_save_through_super(store: Path) -> None:
    seen: list[str] = []

    class Audited(MemoryManager):
        def _after_save(self, session_id: str) -> None:
            super()._after_save(session_id)
            seen.append(session_id)

    mm = Audited.init(store)
    mm.save_interaction("a", "one", "two")
    with mm.batch("two at once"):
        mm.save_interaction("b", "three", "four")  # in a batch: the batch commits, no hook
    assert seen == ["a"]
    mm.close()


def test_two_threads_summarizing_get_their_own_outcome(store: Path) -> None:
    mm = MemoryManager.init(store)
    sessions = ["garden", "travel"]
    texts = {
        "garden": ("How deep do tomato seedlings go?", "Plant them deep in compost."),
        "travel": ("Which train goes to Porto?", "The Alfa Pendular from Lisbon."),
    }
    for sid in sessions:
        mm.save_interaction(sid, *texts[sid])
    outcomes: dict[str, SummaryOutcome] = {}
    start = threading.Barrier(len(sessions))

    def work(sid: str) -> None:
        start.wait()
        outcomes[sid] = mm.summarize_outcome(sid, offline=True)

    threads = [threading.Thread(target=work, args=(sid,)) for sid in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for sid in sessions:
        outcome = outcomes[sid]
        assert (outcome.session_id, outcome.status) == (sid, "committed")
        assert outcome.commit is not None
        subject = git(store, "log", "-1", "--format=%s", outcome.commit)
        assert subject.startswith(f"Summarize {sid}:")
    assert outcomes["garden"].commit != outcomes["travel"].commit
    assert not hasattr(mm, "last_summary")
    mm.close()


def test_change_session_merges_with_what_is_stored(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "kept", "as is")

    def tag(current: Session | None) -> Session | None:
        assert current is not None
        return current.model_copy(update={"tags": ["imported"]})

    sha = mm.change_session("s", tag, op="import", subject="Tag s")
    assert (
        git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)", str(sha)).strip()
        == "import"
    )
    session = mm.load_memory("s")
    assert session is not None and session.tags == ["imported"]
    assert len(session.interactions) == 1
    assert mm.load_archive("s") is None
    with pytest.raises(ReadOnlyError):
        mm.at("HEAD").change_session("s", tag, op="import", subject="again")
    mm.close()


def test_result_json_forms() -> None:
    assert BatchResult().to_dict() == {"commit": None}
    note = MergeNote(
        session_id="s", kind="kept", key="sessions/s.md", kept="sessions/s.md", dropped=""
    )
    result = SyncResult(remote="origin", branch="main", before=None)
    result.notes += [note]
    result.files.append("sessions/s.md")
    assert SyncResult(remote="o", branch="b", before=None).files == []  # not shared
    assert result.as_dict() == {
        "remote": "origin",
        "branch": "main",
        "before": None,
        "after": None,
        "action": "up-to-date",
        "files": ["sessions/s.md"],
        "notes": [
            {
                "session_id": "s",
                "kind": "kept",
                "key": "sessions/s.md",
                "kept": "sessions/s.md",
                "dropped": "",
                "dropped_side": "",
                "detail": "",
            }
        ],
        "secrets": [],
        "pushed": False,
        "attempts": 0,
    }
    assert list(result.as_dict()) == [
        "remote",
        "branch",
        "before",
        "after",
        "action",
        "files",
        "notes",
        "secrets",
        "pushed",
        "attempts",
    ]
