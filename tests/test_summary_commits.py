"""MemoryManager summaries end to end: commits and trailers, archive, loss guard, review
branches, triggers after saves, idle sessions and the CLI — on real repositories."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import cli
from gitmem.errors import (
    ConflictError,
    GitmemError,
    NothingToSummarize,
    SessionNotFound,
    SummaryHeldForReview,
    SummaryRefused,
    ValidationError,
)
from gitmem.llm.config import LLMConfig
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, StructuredSummary, Summary
from gitmem.summary.engines import ExtractiveSummarizer, LLMSummarizer, SummaryResult
from gitmem.summary.triggers import SummaryConfig, Triggers
from tests.conftest import git
from tests.fake_openai import FakeServer, closed_port, completion, llm_server, structured

__all__ = ["llm_server"]

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)

FACTS = [
    "Caroline adopted a dog named Rex in May 2023",
    "Caroline works as a counselor in Boston",
    "Her sister Amy lives in Denver",
    "Caroline plans a trip to Sweden in June",
]


def trailers(store: Path, rev: str = "HEAD") -> dict[str, str]:
    out = git(store, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    return dict(line.split(": ", 1) for line in out.splitlines() if line)


def changed_files(store: Path, rev: str = "HEAD") -> list[str]:
    return git(store, "show", "--name-only", "--format=", rev).split()


def fill(mm: MemoryManager, session: str, turns: Sequence[tuple[str, str]], start: int = 0) -> None:
    for n, (user, assistant) in enumerate(turns, start):
        mm.save_interaction(
            session,
            user,
            assistant,
            timestamp=T0 + timedelta(minutes=n),
            interaction_id=f"t{n:02d}",
        )


LISBON = [
    ("I moved to Lisbon in March 2023 for a job at Feedzai.", "Congratulations on the move!"),
    ("My daughter Ana starts school in September.", "That is exciting."),
    ("We found an apartment in Alfama with a view of the river.", "Alfama is lovely."),
    ("I still need to register Ana at the health centre.", "Bring her passport."),
]


class Fixed:
    """A summarizer answering with a fixed structured summary (a stand-in LLM)."""

    name = "fixed-model"

    def __init__(self, summary: str, facts: Sequence[str], tags: Sequence[str] = ()) -> None:
        self.content = StructuredSummary(summary=summary, key_facts=list(facts), tags=list(tags))
        self.calls = 0

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        self.calls += 1
        return SummaryResult(self.content, self.name, tuple(t.id for t in turns), "json_schema")


@pytest.fixture
def mm(store: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryManager:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    manager = MemoryManager.init(store, agent="tester")
    return manager


def test_offline_summary_is_its_own_commit(mm: MemoryManager, store: Path) -> None:
    fill(mm, "lisbon", LISBON)
    before = git(store, "rev-parse", "HEAD").strip()
    sha = mm.summarize("lisbon")
    assert sha == git(store, "rev-parse", "HEAD").strip()
    assert git(store, "rev-parse", f"{sha}^").strip() == before
    assert changed_files(store) == ["sessions/ab/lisbon.md"]
    found = trailers(store)
    assert found["Gitmem-Op"] == "summarize"
    assert found["Gitmem-Session"] == "lisbon"
    assert found["Gitmem-Model"] == "gitmem-extractive"
    assert found["Gitmem-Trigger"] == "manual"
    assert found["Gitmem-Covers"] == "4 interactions, t00..t03"
    assert "Gitmem-Fallback" not in found
    session = mm.load_memory("lisbon")
    assert session is not None and session.summary is not None
    assert session.summary.covers == ["t00", "t01", "t02", "t03"]
    assert "Lisbon in March 2023" in session.summary.text
    assert len(session.interactions) == 4
    assert "## Summary" in (store / "sessions" / "ab" / "lisbon.md").read_text()
    assert git(store, "status", "--porcelain") == ""
    assert "summarize" in git(store, "log", "--format=%(trailers:key=Gitmem-Op,valueonly)")
    git(store, "fsck", "--strict")


def test_second_summary_covers_only_new_turns(mm: MemoryManager, store: Path) -> None:
    fill(mm, "lisbon", LISBON[:2])
    mm.summarize("lisbon")
    with pytest.raises(NothingToSummarize, match="all 2 turns are covered"):
        mm.summarize("lisbon")
    fill(mm, "lisbon", LISBON[2:], start=2)
    mm.summarize("lisbon")
    assert trailers(store)["Gitmem-Covers"] == "t02, t03"
    session = mm.load_memory("lisbon")
    assert session is not None and session.summary is not None
    assert session.summary.covers == ["t00", "t01", "t02", "t03"]
    with pytest.raises(SessionNotFound):
        mm.summarize("nope")


def test_count_and_unknown_trigger(mm: MemoryManager, store: Path) -> None:
    fill(mm, "lisbon", LISBON)
    mm.summarize("lisbon", count=1)
    assert trailers(store)["Gitmem-Covers"] == "t00"
    with pytest.raises(ValidationError, match="unknown summary trigger"):
        mm.summarize("lisbon", trigger="whenever")


def test_llm_summary_over_http(mm: MemoryManager, store: Path, llm_server: FakeServer) -> None:
    llm_server.default = lambda request: completion(
        structured("User's needs:\n- Settle in Lisbon", FACTS[:2], ["Lisbon"], ["moving"]),
        model="m",
    )
    fill(mm, "lisbon", LISBON)
    config = LLMConfig(model="fake-llm", base_url=llm_server.base_url, max_retries=0)
    sha = mm.summarize("lisbon", summarizer=LLMSummarizer(config))
    assert trailers(store, sha)["Gitmem-Model"] == "fake-llm"
    session = mm.load_memory("lisbon")
    assert session is not None and session.summary is not None
    assert session.summary.model == "fake-llm"
    assert session.summary.text == "User's needs:\n- Settle in Lisbon"
    assert len(llm_server.requests) == 1


def test_server_down_falls_back_and_the_trailer_says_so(mm: MemoryManager, store: Path) -> None:
    fill(mm, "lisbon", LISBON)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    mm.summarizer = LLMSummarizer(LLMConfig(model="m", base_url=url, max_retries=0))
    outcome = mm.summarize_outcome("lisbon")
    assert outcome.commit is not None
    found = trailers(store, outcome.commit)
    assert found["Gitmem-Model"] == "gitmem-extractive"
    assert found["Gitmem-Fallback"].startswith("LLM m: cannot reach http://127.0.0.1:")
    assert "Fell back to the offline summarizer" in git(store, "log", "-1", "--format=%b")
    assert outcome.fallback is not None and outcome.fallback.startswith("LLM m: cannot reach")
    assert (outcome.status, outcome.model) == ("committed", "gitmem-extractive")


def test_archive_moves_summarized_turns(mm: MemoryManager, store: Path) -> None:
    mm.summary_config = SummaryConfig(archive="archive")
    fill(mm, "lisbon", LISBON[:3])
    mm.summarize("lisbon", count=2)
    assert sorted(changed_files(store)) == ["archive/ab/lisbon.md", "sessions/ab/lisbon.md"]
    assert trailers(store)["Gitmem-Archived"] == "2"
    main = mm.load_memory("lisbon")
    assert main is not None and [t.id for t in main.interactions] == ["t02"]
    full = mm.load_memory("lisbon", include_archive=True)
    assert full is not None and [t.id for t in full.interactions] == ["t00", "t01", "t02"]
    assert full.interactions[0].messages[0].content == LISBON[0][0]
    fill(mm, "lisbon", LISBON[3:], start=3)
    mm.summarize("lisbon")
    full = mm.load_memory("lisbon", include_archive=True)
    assert full is not None and [t.id for t in full.interactions] == ["t00", "t01", "t02", "t03"]
    assert mm.session_ids() == ["lisbon"]  # the archive part is not a session
    assert mm.check() == []
    assert git(store, "status", "--porcelain") == ""
    # an old revision still has every turn in the main file: nothing was ever deleted
    first = git(store, "rev-list", "--max-count=1", "HEAD~3").strip()
    old = mm.load_memory("lisbon", commit=first)
    assert old is not None and len(old.interactions) == 3


def test_archive_setting_from_git_config(mm: MemoryManager, store: Path) -> None:
    git(store, "config", "gitmem.summary.archive", "archive")
    git(store, "config", "gitmem.summary.everyTurns", "off")
    fresh = MemoryManager(store)
    assert fresh.summary_config.archive == "archive"
    assert fresh.summary_config.triggers.every_turns is None
    git(store, "config", "gitmem.summary.lossThreshold", "lots")
    with pytest.raises(ValidationError, match=r"gitmem.summary.lossThreshold = 'lots'"):
        _ = MemoryManager(store).summary_config


def _with_previous(mm: MemoryManager) -> None:
    fill(
        mm,
        "caro",
        [
            ("I adopted Rex in May 2023. I work as a counselor in Boston.", "Nice."),
            ("My sister Amy lives in Denver; I go to Sweden in June.", "Fun."),
        ],
    )
    mm.summarize("caro", summarizer=Fixed("- " + "\n- ".join(FACTS), FACTS))
    fill(mm, "caro", [("I started painting landscapes.", "Lovely.")], start=2)


def test_loss_guard_refuses(mm: MemoryManager, store: Path) -> None:
    _with_previous(mm)
    head = git(store, "rev-parse", "HEAD").strip()
    bad = Fixed("- Caroline paints landscapes", ["Caroline paints landscapes"])
    with pytest.raises(SummaryRefused) as caught:
        mm.summarize("caro", summarizer=bad)
    assert caught.value.report.share == 1.0
    assert "drops 4 of 4 facts" in str(caught.value)
    assert "Her sister Amy lives in Denver" in str(caught.value)
    assert git(store, "rev-parse", "HEAD").strip() == head  # nothing written
    assert git(store, "branch", "--list", "gitmem/*") == ""
    # a faithful summary passes
    good = Fixed("- " + "\n- ".join([*FACTS, "Caroline paints landscapes"]), [])
    mm.summarize("caro", summarizer=good)


def test_loss_guard_review_branch_accept(mm: MemoryManager, store: Path) -> None:
    mm.summary_config = SummaryConfig(on_loss="review")
    _with_previous(mm)
    head = git(store, "rev-parse", "HEAD").strip()
    bad = Fixed("- Caroline paints landscapes", ["Caroline paints landscapes"])
    with pytest.raises(SummaryHeldForReview) as caught:
        mm.summarize("caro", summarizer=bad)
    held = caught.value
    assert held.branch == "gitmem/review/caro"
    assert git(store, "rev-parse", "HEAD").strip() == head
    assert git(store, "rev-parse", "gitmem/review/caro").strip() == held.commit
    assert git(store, "rev-parse", "gitmem/review/caro^").strip() == head
    assert git(store, "status", "--porcelain") == ""
    [item] = mm.review_list()
    assert (item.session_id, item.commit) == ("caro", held.commit)
    shown = mm.review_show("caro")
    assert "drops 4 of 4 facts" in shown.message
    assert "+> - Caroline paints landscapes" in shown.diff
    assert "Gitmem-Review: pending" in shown.message
    # a turn saved while the review waits is kept when the summary is accepted
    fill(mm, "caro", [("Rex learned to fetch.", "Good dog.")], start=3)
    sha = mm.review_accept("caro")
    found = trailers(store, sha)
    assert found["Gitmem-Op"] == "summarize"
    assert found["Gitmem-Review"] == "accepted"
    assert found["Gitmem-Reviewed-Commit"] == held.commit
    assert found["Gitmem-Covers"] == "t02"
    session = mm.load_memory("caro")
    assert session is not None and session.summary is not None
    assert session.summary.text == "- Caroline paints landscapes"
    assert [t.id for t in session.interactions] == ["t00", "t01", "t02", "t03"]
    assert mm.review_list() == []
    assert git(store, "branch", "--list", "gitmem/*") == ""
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")


def test_review_reject_and_stale_accept(mm: MemoryManager, store: Path) -> None:
    mm.summary_config = SummaryConfig(on_loss="review")
    _with_previous(mm)
    bad = Fixed("- Caroline paints landscapes", ["Caroline paints landscapes"])
    with pytest.raises(SummaryHeldForReview) as caught:
        mm.summarize("caro", summarizer=bad)
    before = mm.load_memory("caro")
    assert mm.review_reject("caro") == caught.value.commit
    assert mm.load_memory("caro") == before
    with pytest.raises(GitmemError, match="no summary of session 'caro' is waiting"):
        mm.review_show("caro")
    # a held summary made stale by a newer summary cannot be accepted
    with pytest.raises(SummaryHeldForReview):
        mm.summarize("caro", summarizer=bad)
    mm.summarize("caro", summarizer=Fixed("- " + "\n- ".join(FACTS) + "\n- paints", []))
    with pytest.raises(ConflictError, match="changed while"):
        mm.review_accept("caro")


def test_review_branches_of_namespaces_and_odd_ids(store: Path) -> None:
    mm = MemoryManager.init(store, namespace="team a")
    mm.summary_config = SummaryConfig(on_loss="review")
    sid = "a..b/ç.lock"
    fill(mm, sid, [("Rex is my dog, adopted in May 2023 in Boston.", "ok")])
    mm.summarize(sid, summarizer=Fixed("- " + "\n- ".join(FACTS), FACTS))
    fill(mm, sid, [("more", "ok")], start=1)
    with pytest.raises(SummaryHeldForReview) as caught:
        mm.summarize(sid, summarizer=Fixed("- nothing", []))
    git(store, "check-ref-format", "refs/heads/" + caught.value.branch)
    assert [r.session_id for r in mm.review_list()] == [sid]
    assert MemoryManager(store).review_list() == []  # another namespace sees none
    mm.review_accept(sid)


def test_triggers_after_saves(mm: MemoryManager, store: Path) -> None:
    mm.summary_config = SummaryConfig(auto=True, triggers=Triggers(every_turns=3, topic_shift=None))
    fill(mm, "lisbon", LISBON[:2])
    assert trailers(store)["Gitmem-Op"] == "save"
    fill(mm, "lisbon", LISBON[2:3], start=2)
    found = trailers(store)
    assert (found["Gitmem-Op"], found["Gitmem-Trigger"]) == ("summarize", "turn-threshold")
    assert "3 turns since the last summary" in git(store, "log", "-1", "--format=%b")
    assert git(store, "log", "-2", "--format=%(trailers:key=Gitmem-Op,valueonly)").split() == [
        "summarize",
        "save",
    ]


def test_a_failing_summary_never_loses_the_save(
    mm: MemoryManager, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        name = "broken"

        def summarize(
            self, turns: Sequence[Interaction], *, previous: Summary | None = None
        ) -> SummaryResult:
            raise RuntimeError("model exploded")

    mm.summary_config = SummaryConfig(auto=True, triggers=Triggers(every_turns=1))
    mm.summarizer = Broken()
    sha = mm.save_interaction("s", "hello", "hi")
    assert sha == git(store, "rev-parse", "HEAD").strip()
    session = mm.load_memory("s")
    assert session is not None and len(session.interactions) == 1 and session.summary is None
    # the outcome of a summary a save triggered is logged: the save's caller gets its sha
    assert "summary of 's' (turn-threshold) not applied: RuntimeError: model exploded" in (
        caplog.text
    )


def test_topic_shift_summarizes_the_old_topic(mm: MemoryManager, store: Path) -> None:
    mm.summary_config = SummaryConfig(
        auto=True,
        triggers=Triggers(every_turns=None, topic_shift=0.05, shift_window=2, shift_history=3),
    )
    garden = [
        (
            f"How deep do tomato seedlings go in clay soil, try {n}?",
            "Plant tomato seedlings deep; clay soil needs compost.",
        )
        for n in range(3)
    ]
    taxes = [
        (
            "How do I file my income tax return as a freelancer?",
            "File the income tax return online before the deadline.",
        )
    ] * 2
    fill(mm, "mixed", [*garden, *taxes])
    found = trailers(store)
    assert found["Gitmem-Trigger"] == "topic-shift"
    assert found["Gitmem-Covers"] == "t00, t01, t02"


def test_summarize_idle(mm: MemoryManager, store: Path) -> None:
    fill(mm, "old", LISBON[:2])
    mm.save_interaction("recent", "hi", "hello", timestamp=T0 + timedelta(hours=5))
    outcomes = mm.summarize_idle("2h", now=T0 + timedelta(hours=5, minutes=30))
    assert [(o.session_id, o.status, o.trigger) for o in outcomes] == [("old", "committed", "idle")]
    assert trailers(store)["Gitmem-Trigger"] == "idle"
    again = mm.summarize_idle("2h", now=T0 + timedelta(hours=5, minutes=30))
    assert again == []  # nothing new to cover


def test_summary_conflicts_are_detected(mm: MemoryManager, store: Path) -> None:
    fill(mm, "lisbon", LISBON[:2])

    class Racing(ExtractiveSummarizer):
        def summarize(
            self, turns: Sequence[Interaction], *, previous: Summary | None = None
        ) -> SummaryResult:
            # another writer saves a turn and another summary lands meanwhile
            fill(mm, "lisbon", LISBON[2:3], start=2)
            mm.summarize("lisbon", offline=True)
            return super().summarize(turns, previous=previous)

    with pytest.raises(ConflictError, match="changed while"):
        mm.summarize("lisbon", summarizer=Racing())

    class Saving(ExtractiveSummarizer):
        def summarize(
            self, turns: Sequence[Interaction], *, previous: Summary | None = None
        ) -> SummaryResult:
            fill(mm, "lisbon", [("And a bike.", "ok")], start=4)  # saved during the LLM call
            return super().summarize(turns, previous=previous)

    fill(mm, "lisbon", LISBON[3:], start=3)
    mm.summarize("lisbon", summarizer=Saving())
    session = mm.load_memory("lisbon")
    assert session is not None and session.summary is not None
    assert [t.id for t in session.interactions] == ["t00", "t01", "t02", "t03", "t04"]
    assert "t03" in session.summary.covers and "t04" not in session.summary.covers


def test_summaries_refuse_to_run_inside_a_batch(mm: MemoryManager) -> None:
    fill(mm, "lisbon", LISBON[:1])
    with pytest.raises(ValidationError, match="inside a batch"), mm.batch("x"):
        mm.summarize("lisbon")


def test_hand_edit_is_recorded_before_the_summary(mm: MemoryManager, store: Path) -> None:
    fill(mm, "lisbon", LISBON[:2])
    path = store / "sessions" / "ab" / "lisbon.md"
    path.write_text(
        path.read_text()
        .replace("Alfama", "Alfama")
        .replace("Congratulations on the move!", "Congratulations!")
    )
    mm.summarize("lisbon")
    ops = git(store, "log", "-2", "--format=%(trailers:key=Gitmem-Op,valueonly)").split()
    assert ops == ["summarize", "edit"]
    session = mm.load_memory("lisbon")
    assert session is not None
    assert session.interactions[0].messages[1].content == "Congratulations!"


def test_auto_tagging(mm: MemoryManager, store: Path) -> None:
    mm.summary_config = SummaryConfig(auto_tag=True)
    fill(mm, "lisbon", LISBON[:2])
    mm.summarize("lisbon", summarizer=Fixed("- moved", ["moved"], tags=["moving", "lisbon"]))
    assert trailers(store)["Gitmem-Op"] == "metadata"
    session = mm.load_memory("lisbon")
    assert session is not None and session.tags == ["moving", "lisbon"]


# --- the command line ------------------------------------------------------------------------


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output if code == 0 else result.stderr


def test_cli_summarize_and_review(mm: MemoryManager, store: Path) -> None:
    repo = ("--repo", str(store))
    fill(mm, "lisbon", LISBON)
    sha = run(*repo, "summarize", "lisbon", "--offline").strip()
    assert sha == git(store, "rev-parse", "HEAD").strip()
    err = run(*repo, "summarize", "lisbon", code=1)
    assert "covered by its summary already" in err
    fill(mm, "lisbon", [("One more thing about Ana's school bus.", "Noted.")], start=4)
    data = json.loads(run(*repo, "--json", "summarize", "lisbon", "--offline"))
    assert data["status"] == "committed" and data["model"] == "gitmem-extractive"
    run(*repo, "summarize", code=2)
    run(*repo, "summarize", "lisbon", "--idle", "1h", code=2)
    run(*repo, "summarize", "--idle", "soon", code=2)
    err = run(*repo, "summarize", "lisbon", "--llm", code=2)
    assert "no LLM configured" in err
    assert run(*repo, "review", "list") == "no summaries waiting for review\n"
    # a held summary, through the CLI
    git(store, "config", "gitmem.summary.onLoss", "review")
    again = MemoryManager(store)
    _with_previous(again)
    with pytest.raises(SummaryHeldForReview):
        again.summarize("caro", summarizer=Fixed("- paints", ["paints"]))
    assert run(*repo, "review", "list").startswith("caro\tgitmem/review/caro\t")
    assert "drops 4 of 4 facts" in run(*repo, "review", "show", "caro")
    assert json.loads(run(*repo, "review", "show", "caro", "--json"))["session_id"] == "caro"
    accepted = run(*repo, "review", "accept", "caro").strip()
    assert accepted == git(store, "rev-parse", "HEAD").strip()
    assert "no summary of session 'caro'" in run(*repo, "review", "reject", "caro", code=1)


def test_cli_summarize_idle(mm: MemoryManager, store: Path) -> None:
    fill(mm, "old", LISBON[:2])
    out = run("--repo", str(store), "summarize", "--idle", "30m")
    assert out.startswith("old: committed ")
    assert run("--repo", str(store), "summarize", "--idle", "30m") == ("no session idle for 30m\n")


def test_key_facts_and_keywords_are_stored(
    mm: MemoryManager, store: Path, llm_server: FakeServer
) -> None:
    llm_server.default = lambda request: completion(
        structured(
            "- Moved to Lisbon",
            ["Moved to Lisbon in March 2023", "Daughter Ana"],
            ["Lisbon", "Ana"],
        )
    )
    fill(mm, "lisbon", LISBON[:2])
    config = LLMConfig(model="fake-llm", base_url=llm_server.base_url, max_retries=0)
    mm.summarize("lisbon", summarizer=LLMSummarizer(config))
    text = (store / "sessions" / "ab" / "lisbon.md").read_text()
    assert "**Key facts**:\n> Moved to Lisbon in March 2023\n> Daughter Ana\n" in text
    assert "**Keywords**:\n> Lisbon\n> Ana\n" in text
    session = MemoryManager(store).load_memory("lisbon")
    assert session is not None and session.summary is not None
    assert session.summary.facts == ["Moved to Lisbon in March 2023", "Daughter Ana"]
    assert session.summary.keywords == ["Lisbon", "Ana"]
    # the stored facts are what the next summary is held to, and they go into its prompt
    fill(mm, "lisbon", LISBON[2:], start=2)
    llm_server.default = lambda request: completion(structured("- Alfama flat", ["Flat"]))
    with pytest.raises(SummaryRefused) as caught:
        mm.summarize("lisbon", summarizer=LLMSummarizer(config))
    assert caught.value.report.dropped == ("Moved to Lisbon in March 2023", "Daughter Ana")
    assert caught.value.report.dropped_entities == ("Lisbon", "Ana")
    assert (
        "Key facts:\n- Moved to Lisbon in March 2023"
        in (llm_server.requests[-1]["messages"][-1]["content"])
    )
