"""Correcting the memory from the Facts pages, through Starlette's TestClient on a real
store: add, edit, supersede and forget a fact (one commit each, by the dashboard's
person, checked with the real ``git``), the CSRF and read-only refusals, and a fact's
own page (the turns it came from, the commit and model that wrote it, its history)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from starlette.testclient import TestClient

from gitmem import MemoryManager
from tests.conftest import git
from tests.web_helpers import client, copy_of_web_store, csrf_of


@pytest.fixture
def mm(tmp_path: Path, web_template: Path) -> MemoryManager:
    return copy_of_web_store(tmp_path / "memory", web_template)


def _post(web: TestClient, page: str, action: str, **fields: str) -> tuple[str, str]:
    """POST ``fields`` to ``action`` with the page's CSRF token and namespace; the new
    commit's sha and where the answer redirected."""
    data = {"csrf": csrf_of(page), "namespace": "", **fields}
    answer = web.post(action, data=data, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    location = answer.headers["location"]
    found = re.search(r"commit=([0-9a-f]{40})", location)
    assert found, location
    return found.group(1), location


def _commit(store: Path, sha: str) -> tuple[str, str]:
    """The author and the Gitmem-Op trailer of ``sha``, read with the real git."""
    author = git(store, "log", "-1", "--format=%an", sha).strip()
    op = git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)", sha).strip()
    return author, op


def test_add_edit_supersede_and_forget_a_fact_one_commit_each(mm: MemoryManager) -> None:
    web = client(mm)
    page = web.get("/facts").text
    assert 'data-test="add-form"' in page
    head = mm.head()
    sha, location = _post(web, page, "/facts/add", text="Bob likes tea", section="People")
    assert git(mm.path, "rev-parse", f"{sha}^").strip() == head  # one commit
    assert _commit(mm.path, sha) == ("test-agent", "remember")
    [added] = [f for f in mm.facts() if f.text == "Bob likes tea"]
    assert added.section == "People" and not added.sources and added.by is None  # a person
    assert unquote(location).startswith(f"/facts/{added.id}?")
    shown = web.get(location).text
    assert "Added (commit" in shown and 'data-test="edit-form"' in shown

    sha, _ = _post(web, shown, f"/facts/{added.id}/edit", text="Bob likes green tea", tags="tea")
    assert git(mm.path, "rev-parse", f"{sha}^").strip() != sha
    assert _commit(mm.path, sha) == ("test-agent", "update-fact")
    assert mm.fact(added.id).text == "Bob likes green tea" and mm.fact(added.id).tags == ("tea",)

    sha, location = _post(web, shown, f"/facts/{added.id}/supersede", text="Bob drinks coffee")
    assert _commit(mm.path, sha) == ("test-agent", "supersede")
    assert mm.fact(added.id).replaced_by is not None
    new_id = mm.fact(added.id).replaced_by
    assert unquote(location).startswith(f"/facts/{new_id}?")

    before = mm.head()
    sha, location = _post(web, shown, f"/facts/{new_id}/forget", reason="wrong person")
    assert git(mm.path, "rev-parse", f"{sha}^").strip() == before
    assert _commit(mm.path, sha) == ("test-agent", "forget")
    assert new_id not in {f.id for f in mm.facts(include_past=True)}
    assert "Forgotten (commit" in web.get(location).text


def test_a_fact_post_without_csrf_or_on_a_read_only_server_is_refused(
    mm: MemoryManager,
) -> None:
    web = client(mm)
    head = mm.head()
    fact = mm.facts()[0]
    for action, fields in [
        ("/facts/add", {"text": "sneaky"}),
        (f"/facts/{fact.id}/forget", {}),
        (f"/facts/{fact.id}/edit", {"text": "sneaky"}),
    ]:
        answer = web.post(action, data=fields, follow_redirects=False)
        assert answer.status_code == 403, answer.text
    read_only = client(mm, read_only=True)
    page = read_only.get(f"/facts/{fact.id}").text
    assert 'data-test="forget-form"' not in page
    assert 'data-test="add-form"' not in read_only.get("/facts").text
    answer = read_only.post(
        f"/facts/{fact.id}/forget", data={"csrf": csrf_of(page)}, follow_redirects=False
    )
    assert answer.status_code == 403
    assert mm.head() == head


def test_a_fact_page_says_why_the_agent_believes_it(mm: MemoryManager) -> None:
    session = mm.load_memory("python-books")
    assert session is not None
    [turn_id] = [i.id for i in session.interactions if "short" in i.messages[0].content]
    fact = mm.remember("Alice reads short books", source=f"python-books#{turn_id}")
    page = client(mm).get(f"/facts/{fact.id}")
    assert page.status_code == 200
    text = page.text
    # the turn it was learned from, with its text
    turn = re.search(r'data-test="source-turn">(.*?)</article>', text, re.S)
    assert turn and "I prefer short books." in turn.group(1)
    assert f'href="/sessions/python-books#turn-{turn_id}"' in turn.group(1)
    # who wrote it, with which model, in which commit, and how to revert it
    writer = re.search(r'data-test="fact-writer">(.*?)</p>', text, re.S)
    sha = mm.history(op="remember", limit=1)[0].sha
    assert writer and "test-agent" in writer.group(1) and "test-model" in writer.group(1)
    assert f'href="/commits/{sha}" data-test="fact-commit"' in writer.group(1)
    assert f'href="/undo/revert/{sha}" data-test="fact-revert"' in writer.group(1)
    history = re.search(r'data-test="fact-history">(.*?)</table>', text, re.S)
    assert history and f'href="/commits/{sha}"' in history.group(1)
    # the list links each fact to its page
    assert f'href="/facts/{fact.id}" data-test="fact-link"' in client(mm).get("/facts").text


def test_an_unknown_fact_is_404_and_an_empty_fact_is_400(mm: MemoryManager) -> None:
    web = client(mm)
    assert web.get("/facts/nope").status_code == 404
    page = web.get("/facts").text
    answer = web.post("/facts/add", data={"csrf": csrf_of(page), "text": "  "})
    assert answer.status_code == 400 and "needs text" in answer.text
