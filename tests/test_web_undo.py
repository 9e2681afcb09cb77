"""The dashboard's Undo and Reviews pages through Starlette's TestClient on real stores:
dry-run previews, confirm forms (CSRF), the commits they make (checked with the real git),
conflicts, review branches of summaries and facts, and read-only servers."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gitmem import MemoryManager
from gitmem.errors import ConflictError, SummaryHeldForReview
from gitmem.models import Interaction, StructuredSummary, Summary
from gitmem.summary.engines import SummaryResult
from gitmem.summary.triggers import SummaryConfig
from gitmem.web import reviews
from tests.conftest import git
from tests.fake_openai import FakeServer, completion, llm_server
from tests.web_helpers import client, copy_of_web_store, csrf_of

__all__ = ["llm_server"]


@pytest.fixture
def mm(store: Path, web_template: Path) -> MemoryManager:
    return copy_of_web_store(store, web_template)


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def trailers(store: Path, rev: str = "HEAD") -> dict[str, str]:
    out = git(store, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    return dict(line.split(": ", 1) for line in out.splitlines() if line)


def hooks(page: str, name: str) -> int:
    return len(re.findall(f'data-test="{name}"', page))


def error_of(page: str) -> str:
    found = re.search(r'data-test="error"[^>]*>([^<]*)<', page)
    assert found, "the page shows no error"
    return found.group(1).replace("&#39;", "'").replace("&#34;", '"')


def summary_commit(mm: MemoryManager) -> str:
    [found] = mm.history("python-books", op="summarize")
    return found.sha


def confirm(web: TestClient, url: str) -> tuple[str, Any]:
    """GET the preview at ``url``, POST its confirm form as a browser would."""
    page = web.get(url)
    assert page.status_code == 200 and hooks(page.text, "confirm-form") == 1, page.text
    form = re.search(
        r'<form method="post" action="([^"]+)"[^>]*data-test="confirm-form">'
        r"(.*?)</form>",
        page.text,
        re.S,
    )
    assert form
    fields = dict(
        re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.group(2))
    )
    return page.text, web.post(form.group(1), data=fields, follow_redirects=False)


def new_commit(store: Path, answer: Any, done: str) -> str:
    assert answer.status_code == 303, answer.text
    location = answer.headers["location"]
    found = re.fullmatch(rf"/commits/([0-9a-f]{{40}})\?done={done}", location)
    assert found, location
    assert found.group(1) == head(store)  # the real git sees the new commit
    return found.group(1)


def assert_written_by_web(store: Path, op: str) -> dict[str, str]:
    found = trailers(store)
    assert found["Gitmem-Op"] == op
    assert found["Gitmem-Via"] == "web"
    assert found["Gitmem-Agent"] == "test-agent"
    return found


# --- revert -----------------------------------------------------------------------------------


def test_revert_a_summary_keeps_the_later_turn(mm: MemoryManager, store: Path) -> None:
    sha = summary_commit(mm)
    before = head(store)
    page, answer = confirm(client(mm), f"/undo/revert/{sha}")
    assert hooks(page, "preview") == 1 and hooks(page, "summary-change") == 1
    assert "later changes are kept" in page
    new = new_commit(store, answer, "revert")
    assert git(store, "rev-parse", f"{new}^").strip() == before
    assert trailers(store)["Gitmem-Reverts"] == sha
    assert_written_by_web(store, "revert")
    [path] = [p for p in git(store, "ls-files").split() if p.endswith("/python-books.md")]
    text = git(store, "show", f"HEAD:{path}")
    assert "And one on typing?" in text and "## Summary" not in text
    session = mm.load_memory("python-books")
    assert session is not None and session.summary is None
    assert "And one on typing?" in session.interactions[-1].messages[0].content


def test_the_preview_writes_nothing(mm: MemoryManager, store: Path) -> None:
    before = head(store)
    page = client(mm).get(f"/undo/revert/{summary_commit(mm)}")
    assert page.status_code == 200 and hooks(page.text, "confirm") == 1
    assert head(store) == before and git(store, "status", "--porcelain") == ""


@pytest.mark.parametrize("token", [None, "wrong"])
def test_post_without_a_valid_csrf_is_refused(
    mm: MemoryManager, store: Path, token: str | None
) -> None:
    web = client(mm)
    sha = summary_commit(mm)
    preview = web.get(f"/undo/revert/{sha}")  # the browser has its CSRF cookie
    assert hooks(preview.text, "confirm-form") == 1
    before = head(store)
    answer = web.post(
        f"/undo/revert/{sha}", data={} if token is None else {"csrf": token}, follow_redirects=False
    )
    assert answer.status_code == 403 and "CSRF" in answer.text
    assert head(store) == before


def test_a_conflicting_revert_shows_gitmems_message(mm: MemoryManager, store: Path) -> None:
    web = client(mm)
    sha = summary_commit(mm)
    page = web.get(f"/undo/revert/{sha}").text  # previewed before the conflict existed
    mm.summarize("python-books", offline=True)  # the summary changes again later
    with pytest.raises(ConflictError) as caught:
        mm.revert_preview(sha)
    before = head(store)
    answer = web.post(f"/undo/revert/{sha}", data={"csrf": csrf_of(page)}, follow_redirects=False)
    assert answer.status_code == 409
    assert error_of(answer.text) == str(caught.value)
    assert hooks(answer.text, "confirm-form") == 0
    assert head(store) == before
    # a fresh preview shows the conflict before anyone confirms
    again = web.get(f"/undo/revert/{sha}")
    assert again.status_code == 409 and error_of(again.text) == str(caught.value)
    assert hooks(again.text, "confirm-form") == 0 and hooks(again.text, "session-diff") == 1


def test_revert_twice_and_unknown_commits(mm: MemoryManager, store: Path) -> None:
    web = client(mm)
    sha = summary_commit(mm)
    page = web.get(f"/undo/revert/{sha}").text
    web.post(f"/undo/revert/{sha}", data={"csrf": csrf_of(page)})
    before = head(store)
    again = web.post(f"/undo/revert/{sha}", data={"csrf": csrf_of(page)}, follow_redirects=False)
    assert again.status_code == 200 and "undone already" in again.text
    assert hooks(again.text, "notice") == 1 and head(store) == before
    missing = web.get("/undo/revert/0123456789abcdef")
    assert missing.status_code == 404 and "0123456789abcdef" in error_of(missing.text)


def test_the_landing_page_lists_commits_and_forms_lead_to_previews(mm: MemoryManager) -> None:
    web = client(mm)
    page = web.get("/undo").text
    assert hooks(page, "revert-link") == 9  # every commit but the store's creation
    assert f'href="/undo/revert/{summary_commit(mm)}"' in page
    by_sha = web.get(
        "/undo/revert", params={"sha": summary_commit(mm)[:10]}, follow_redirects=False
    )
    assert by_sha.headers["location"] == f"/undo/revert/{summary_commit(mm)[:10]}"
    by_session = web.get(
        "/undo/rollback", params={"session": "a b", "to": "HEAD~1"}, follow_redirects=False
    )
    assert by_session.headers["location"] == "/undo/rollback/a%20b?to=HEAD~1"


# --- rollback and an agent's window ---------------------------------------------------------


def test_rollback_a_session(mm: MemoryManager, store: Path) -> None:
    first = mm.history("python-books")[-1].sha  # its first save
    web = client(mm)
    picker = web.get("/undo/rollback/python-books")
    assert picker.status_code == 200 and first in picker.text
    assert hooks(picker.text, "confirm-form") == 0
    page, answer = confirm(web, f"/undo/rollback/python-books?to={first}")
    assert hooks(page, "turn-removed") == 3
    new_commit(store, answer, "rollback")
    init = mm.history()[-1].sha  # before the session existed: refused before confirming
    before = mm.load_memory("python-books", commit=init)
    too_early = web.get(f"/undo/rollback/python-books?to={init}")
    assert before is None and too_early.status_code == 404
    assert "did not exist at" in error_of(too_early.text)
    assert hooks(too_early.text, "confirm-form") == 0
    assert assert_written_by_web(store, "rollback")["Gitmem-Rollback-To"] == first
    session = mm.load_memory("python-books")
    assert session is not None and len(session.interactions) == 1


def test_undo_an_agents_window(mm: MemoryManager, store: Path) -> None:
    bot = MemoryManager(store, agent="bad-bot", model="m2")
    bot.save_interaction("travel-plans", "Cancel everything!", "Cancelled.")
    bad = head(store)
    web = client(mm)
    page, answer = confirm(web, "/undo/agent?agent=bad-bot")
    assert hooks(page, "commit-row") == 1 and bad[:8] in page
    assert hooks(page, "turn-removed") == 1
    new_commit(store, answer, "undo")
    assert assert_written_by_web(store, "revert")["Gitmem-Reverts"] == bad
    session = mm.load_memory("travel-plans")
    assert session is not None and len(session.interactions) == 1


def test_undo_without_a_filter_is_a_400(mm: MemoryManager, store: Path) -> None:
    web = client(mm)
    page = web.get("/undo/agent")
    assert page.status_code == 400 and "give an agent, a model or an op" in error_of(page.text)
    before = head(store)
    answer = web.post("/undo/agent", data={"csrf": csrf_of(_any_form(web, mm))})
    assert answer.status_code == 400 and head(store) == before


def _any_form(web: TestClient, mm: MemoryManager) -> str:
    """A page with a CSRF field (a revert preview)."""
    return web.get(f"/undo/revert/{summary_commit(mm)}").text


# --- reviews ----------------------------------------------------------------------------------

FACTS = [
    "Caroline adopted a dog named Rex in May 2023",
    "Caroline works as a counselor",
    "Her sister Amy lives in Denver",
]


class Fixed:
    """A summarizer answering with a fixed structured summary (a stand-in LLM)."""

    name = "fixed-model"

    def __init__(self, facts: Sequence[str]) -> None:
        self.content = StructuredSummary(summary="- " + "\n- ".join(facts), key_facts=list(facts))

    def summarize(
        self, turns: Sequence[Interaction], *, previous: Summary | None = None
    ) -> SummaryResult:
        return SummaryResult(self.content, self.name, tuple(t.id for t in turns), "json_schema")


def held_summary(mm: MemoryManager) -> str:
    """A summary of 'caro' that the loss guard holds on a review branch; its commit."""
    mm.summary_config = SummaryConfig(on_loss="review")
    mm.save_interaction("caro", "I adopted Rex. I am a counselor. Amy lives in Denver.", "Ok.")
    mm.summarize("caro", summarizer=Fixed(FACTS))
    mm.save_interaction("caro", "I started painting.", "Lovely.")
    with pytest.raises(SummaryHeldForReview) as caught:
        mm.summarize("caro", summarizer=Fixed(["Caroline paints landscapes"]))
    assert caught.value.commit is not None
    return caught.value.commit


def post_button(web: TestClient, url: str, button: str) -> Any:
    page = web.get(url)
    assert page.status_code == 200 and hooks(page.text, button) == 1, page.text
    action = re.search(
        rf'<form method="post" action="([^"]+)" data-test="{button}-form">', page.text
    )
    assert action
    return web.post(action.group(1), data={"csrf": csrf_of(page.text)}, follow_redirects=False)


def test_accept_a_held_summary(mm: MemoryManager, store: Path) -> None:
    held = held_summary(mm)
    web = client(mm)
    listed = web.get("/reviews").text
    assert hooks(listed, "review") == 1 and 'href="/reviews/session/caro"' in listed
    page = web.get("/reviews/session/caro").text
    assert "drops 3 of 3 facts" in page and hooks(page, "review-diff") == 1
    assert "Caroline paints landscapes" in page and FACTS[0] in page  # held beside current
    answer = post_button(web, "/reviews/session/caro", "accept")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/reviews?done=accept&commit=")
    found = assert_written_by_web(store, "summarize")
    assert found["Gitmem-Reviewed-Commit"] == held
    assert git(store, "branch", "--list", "gitmem/*") == ""
    after = web.get(answer.headers["location"]).text
    assert hooks(after, "notice") == 1 and hooks(after, "review") == 0
    session = mm.load_memory("caro")
    assert session is not None and session.summary is not None
    assert session.summary.text == "- Caroline paints landscapes"


def test_reject_a_held_summary(mm: MemoryManager, store: Path) -> None:
    held = held_summary(mm)
    before = head(store)
    answer = post_button(client(mm), "/reviews/session/caro", "reject")
    assert answer.status_code == 303 and f"commit={held}" in answer.headers["location"]
    assert head(store) == before and git(store, "branch", "--list", "gitmem/*") == ""
    missing = client(mm).get("/reviews/session/caro")
    assert missing.status_code == 404 and "no summary of session 'caro'" in error_of(missing.text)


def test_a_held_summary_is_shown_beside_the_current_one(mm: MemoryManager) -> None:
    held_summary(mm)
    page = client(mm).get("/reviews/session/caro").text
    table = page[page.index('data-test="side-by-side"') : page.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    # the dropped key facts stand left, the held one right, on the same rows
    paired = [r for r in rows if 'data-test="side-del"' in r and 'data-test="side-add"' in r]
    assert paired, table
    assert any("Caroline paints landscapes" in r for r in paired)
    assert any(FACTS[0] in r for r in rows if 'data-test="side-del"' in r)
    assert 'class="heading"' in table  # the file and its hunks head their rows


def test_side_by_side_pairs_removed_with_added_lines() -> None:
    diff = "\n".join(
        [
            "diff --git a/x.md b/x.md",
            "--- a/x.md",
            "+++ b/x.md",
            "@@ -3,4 +3,3 @@",
            " same",
            "-old one",
            "-old two",
            "+new one",
            " tail",
        ]
    )
    rows = reviews.side_by_side(diff)
    assert [r.heading for r in rows[:2]] == ["x.md", "@@ -3,4 +3,3 @@"]
    body = [(r.left.number, r.left.text, r.right.number, r.right.text) for r in rows[2:]]
    assert body == [
        (3, "same", 3, "same"),
        (4, "old one", 4, "new one"),
        (5, "old two", None, ""),
        (6, "tail", 5, "tail"),
    ]


def test_accept_and_reject_from_the_queue(mm: MemoryManager, store: Path) -> None:
    held_summary(mm)
    web = client(mm)
    listed = web.get("/reviews").text
    assert hooks(listed, "queue-accept") == 1 and hooks(listed, "queue-reject") == 1
    read_only = client(mm, read_only=True).get("/reviews").text
    assert hooks(read_only, "review") == 1 and hooks(read_only, "queue-accept") == 0
    before = int(git(store, "rev-list", "--count", "HEAD").strip())
    forged = web.post("/reviews/session/caro/accept", data={}, follow_redirects=False)
    assert forged.status_code == 403  # no CSRF token: refused, nothing written
    answer = post_button(web, "/reviews", "queue-accept")
    assert answer.status_code == 303 and "done=accept" in answer.headers["location"]
    assert int(git(store, "rev-list", "--count", "HEAD").strip()) == before + 1  # one commit
    assert hooks(web.get("/reviews").text, "queue-accept") == 0


def held_facts(mm: MemoryManager, monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> str:
    """A consolidation that forgets the store's one fact: held on gitmem/review-facts."""
    monkeypatch.setenv("GITMEM_LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("GITMEM_LLM_MODEL", "fake-curator")
    monkeypatch.setenv("GITMEM_LLM_RETRIES", "0")
    [fact] = mm.facts()
    server.default = lambda request: completion(
        json.dumps({"changes": [{"op": "forget", "id": fact.id, "reason": "stale"}]})
    )
    mm.save_interaction("travel-plans", "Forget what you know about me.", "OK.")
    result = mm.consolidate()
    assert result.status == "review" and result.commit is not None
    return fact.id


@pytest.mark.parametrize("button", ["accept", "reject"])
def test_a_held_facts_consolidation(
    mm: MemoryManager,
    store: Path,
    button: str,
    monkeypatch: pytest.MonkeyPatch,
    llm_server: FakeServer,
) -> None:
    fact = held_facts(mm, monkeypatch, llm_server)
    web = client(mm)
    assert 'href="/reviews/facts"' in web.get("/reviews").text
    page = web.get("/reviews/facts").text
    assert hooks(page, "review-diff") == 1 and fact in page
    beside = page[page.index('data-test="side-by-side"') : page.index("</table>")]
    assert fact in beside and 'data-test="side-del"' in beside  # the forgotten fact, left
    before = head(store)
    answer = post_button(web, "/reviews/facts", button)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith(f"/reviews?done={button}&commit=")
    assert git(store, "branch", "--list", "gitmem/*") == ""
    if button == "accept":
        assert assert_written_by_web(store, "consolidate")["Gitmem-Review"] == "accepted"
        assert mm.facts() == []
    else:
        assert head(store) == before and [f.id for f in mm.facts()] == [fact]
    assert "No consolidation" in web.get("/reviews/facts").text


# --- read-only --------------------------------------------------------------------------------


def test_read_only_shows_previews_and_refuses_every_post(mm: MemoryManager, store: Path) -> None:
    held_summary(mm)
    web = client(mm, read_only=True)
    sha = summary_commit(mm)
    preview = web.get(f"/undo/revert/{sha}").text
    assert hooks(preview, "preview") == 1 and hooks(preview, "confirm-form") == 0
    review = web.get("/reviews/session/caro").text
    assert hooks(review, "review-diff") == 1 and hooks(review, "accept") == 0
    # no page here has a form: sign the browser's cookie as a form would carry it
    token = web.app.state.security.csrf_for(web.cookies["gitmem_csrf"])  # type: ignore[attr-defined]
    before = head(store)
    for url, data in [
        (f"/undo/revert/{sha}", {}),
        ("/undo/rollback/python-books", {"to": "HEAD~3"}),
        ("/undo/agent", {"agent": "test-agent"}),
        ("/reviews/session/caro/accept", {}),
        ("/reviews/session/caro/reject", {}),
        ("/reviews/facts/accept", {}),
        ("/reviews/facts/reject", {}),
    ]:
        answer = web.post(url, data={"csrf": token, **data}, follow_redirects=False)
        assert answer.status_code == 403, url
        assert "read-only" in error_of(answer.text), url
    assert head(store) == before
    assert git(store, "branch", "--list", "gitmem/*").strip() == "gitmem/review/caro"
