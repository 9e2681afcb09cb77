"""The store every feature builds on: SessionStore alone, the parts, and outcomes that are returned
(never left on a shared attribute)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from gitmem.core import SessionStore
from gitmem.errors import ReadOnlyError
from gitmem.facts.consolidation import Consolidator
from gitmem.facts.methods import Facts
from gitmem.guard.methods import Guard
from gitmem.history.methods import History
from gitmem.manager import MemoryManager
from gitmem.models import BatchResult, Session, SummaryOutcome
from gitmem.search.methods import Search
from gitmem.store.discover import open_repository
from gitmem.summary.methods import Summaries
from gitmem.summary.triggers import SummaryConfig
from gitmem.sync.merge import MergeNote
from gitmem.sync.methods import Sync, SyncResult
from tests.conftest import git

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"


def test_the_store_alone_saves_and_reads(store: Path) -> None:
    core = SessionStore(open_repository(store, init=True), agent="bot")
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


def test_the_manager_is_one_class_over_parts(store: Path) -> None:
    assert MemoryManager.__mro__ == (MemoryManager, object)
    for part in (SessionStore, Guard, History, Search, Summaries, Sync, Facts, Consolidator):
        assert part.__mro__ == (part, object), part
    mm = MemoryManager.init(store)
    parts = {type(value) for value in vars(mm).values()}
    assert {SessionStore, Guard, History, Search, Summaries, Sync, Facts, Consolidator} <= parts
    mm.close()
    stubbed = []
    for path in [PACKAGE / "core.py", *PACKAGE.glob("*/methods.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                stubbed.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not stubbed, f"TYPE_CHECKING blocks left: {stubbed}"


def test_what_runs_after_a_save_is_a_list_in_order(store: Path) -> None:
    seen: list[str] = []
    core = SessionStore(open_repository(store, init=True))
    core.after_save.append(seen.append)
    core.save_interaction("a", "one", "two")
    with core.batch("two at once"):
        core.save_interaction("b", "three", "four")  # in a batch: the batch commits, no hook
    assert seen == ["a"]
    core.close()


def test_a_summary_written_by_a_save_reaches_consolidation_in_that_save(store: Path) -> None:
    mm = MemoryManager.init(store)
    git(store, "config", "gitmem.summary.auto", "true")
    git(store, "config", "gitmem.summary.everyTurns", "1")
    git(store, "config", "gitmem.summary.offline", "true")
    git(store, "config", "gitmem.facts.every", "1")
    git(store, "config", "gitmem.facts.offline", "true")
    mm.close()
    mm = MemoryManager(store)
    mm.save_interaction("trip", "I moved to Lisbon in May.", "Noted: you live in Lisbon now.")
    ops = git(store, "log", "--format=%(trailers:key=Gitmem-Op,valueonly)").split()
    # newest first: the save, its summary, then the consolidation that read the summary
    assert ops[:3] == ["consolidate", "summarize", "save"], ops
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
        "purges": [],
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
        "purges",
    ]


def test_settings_are_one_object_read_from_git_config_once(store: Path) -> None:
    MemoryManager.init(store).close()
    git(store, "config", "gitmem.summary.auto", "true")
    git(store, "config", "gitmem.facts.every", "3")
    git(store, "config", "gitmem.secrets.redact", "false")
    mm = MemoryManager(store)
    reads: list[str] = []
    config_section = mm.repository.config_section

    def counted(section: str) -> list[tuple[str, str]]:
        reads.append(section)
        return config_section(section)

    mm.repository.config_section = counted  # type: ignore[method-assign]
    assert mm.settings.summary.auto is True
    assert mm.settings.facts.every == 3
    assert mm.settings.secrets.redact is False
    assert mm.settings.embed is None and mm.settings.llm is None
    assert reads == ["gitmem"]
    # one object, the same values as the manager's own names
    mm.settings.summary = SummaryConfig(auto=False)
    assert mm.summary_config.auto is False
    assert mm.settings.rank is mm.rank_config
    mm.close()
