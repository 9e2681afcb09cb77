"""The dashboard's Search, History and Commit pages, through Starlette's TestClient on a
real store (and the real ``git`` to check what the pages list)."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode

import pytest

from gitmem import MemoryManager
from gitmem.web import WebOptions, create_app
from gitmem.web.search import highlight, whole_words
from tests.conftest import git
from tests.web_helpers import START, client, copy_of_web_store


@pytest.fixture
def mm(store: Path, web_template: Path) -> MemoryManager:
    return copy_of_web_store(store, web_template)


def _all(page: str, test: str) -> list[str]:
    """The opening tags (and what follows up to the next tag's end) of every element with
    ``data-test=test``: enough to read an href or count rows."""
    return re.findall(rf'<[^>]*data-test="{test}"[^>]*>', page)


def _section(page: str, test: str) -> list[str]:
    """The text of each ``<article|section|tr|details|p|li data-test=test>`` element."""
    pattern = rf'<(article|section|tr|details|p|li)\b[^>]*data-test="{test}"[^>]*>(.*?)</\1>'
    found = re.findall(pattern, page, re.S)
    return [body for _, body in found]


def _turn_id(mm: MemoryManager, session_id: str, text: str) -> str:
    session = mm.load_memory(session_id)
    assert session is not None
    return next(i.id for i in session.interactions if text in i.messages[0].content)


def _sha(mm: MemoryManager, op: str, session: str | None = None) -> str:
    return mm.history(session, op=op, limit=1)[0].sha


# --- search ----------------------------------------------------------------------------


def test_facts_are_their_own_kind_of_hit_beside_the_sessions(mm: MemoryManager) -> None:
    [fact] = mm.facts()
    page = client(mm).get("/search", params={"q": "short books"}).text
    [facts] = _section(page, "fact-hits")
    assert f'href="/facts/{fact.id}"' in facts and "prefers" in facts
    assert 'data-test="fact-card"' in facts
    # the session hits stay hits of sessions; the facts are apart, not among them
    assert all('data-kind="fact"' not in tag for tag in _all(page, "hit"))
    assert "kind=fact" in facts  # every matching fact, one click away
    narrowed = client(mm).get("/search", params={"q": "short books", "session": "python-books"})
    assert 'data-test="fact-hits"' not in narrowed.text  # facts are no session's
    facts_only = client(mm).get("/search", params={"q": "short books", "kind": "fact"}).text
    assert 'data-test="fact-hits"' not in facts_only and 'data-kind="fact"' in facts_only


def test_the_turns_around_a_hit_on_demand(mm: MemoryManager) -> None:
    web = client(mm)
    page = web.get("/search", params={"q": "Who wrote Fluent Python"}).text
    assert 'data-test="around"' not in page  # not read until asked for
    links = [
        unquote(h).replace("&amp;", "&")
        for h in re.findall(r'href="([^"]*)" data-test="around-link"', page)
    ]
    assert links and links[0].endswith("&around=1#hit-1"), links
    shown = web.get(links[0].split("#")[0]).text
    [around] = _section(shown, "around")
    before = around[
        around.index('data-test="around-before"') : around.index('data-test="around-after"')
    ]
    after = around[around.index('data-test="around-after"') :]
    assert "Recommend some books on Python asyncio." in before
    assert "I prefer short books." in after
    assert 'id="hit-1"' in shown and shown.count('data-test="around-link"') == len(links) - 1
    assert web.get("/search", params={"q": "Fluent", "around": "x"}).status_code == 400


def test_search_finds_the_right_session_and_links_to_the_turn(mm: MemoryManager) -> None:
    page = client(mm).get("/search", params={"q": "train to Kyoto"})
    assert page.status_code == 200
    hits = _section(page.text, "hit")
    assert hits, page.text
    turn = _turn_id(mm, "travel-plans", "Kyoto")
    first = re.search(r'href="([^"]+)"', hits[0])
    assert first and first.group(1) == f"/sessions/travel-plans#turn-{turn}"
    assert "<mark>Kyoto</mark>" in hits[0] and "<mark>train</mark>" in hits[0]


def test_each_hit_shows_its_score_components_as_meters_when_explained(
    mm: MemoryManager,
) -> None:
    hits = mm.search("asyncio books")
    plain = client(mm).get("/search", params={"q": "asyncio books"}).text
    assert len(_section(plain, "hit")) == len(hits)
    assert 'data-test="explain"' not in plain and "<meter" not in plain  # only with Explain
    page = client(mm).get("/search", params={"q": "asyncio books", "explain": "1"}).text
    shown = _section(page, "hit")
    assert len(shown) == len(hits)
    for hit, html in zip(hits, shown, strict=True):
        table = re.search(
            r'<table class="components" data-test="explain">(.*?)</table>', html, re.S
        )
        assert table, html
        rows = re.findall(
            r'<th scope="row">(\w+)</th>.*?<meter min="0" max="([\d.]+)" '
            r'value="([\d.]+)"',
            table.group(1),
            re.S,
        )
        assert {name for name, _, _ in rows} == set(hit.components)
        for name, top, value in rows:
            assert float(value) == pytest.approx(hit.components[name])
            assert float(top) >= float(value)


def test_the_explain_data_lists_terms_and_every_candidate_with_its_status(
    mm: MemoryManager,
) -> None:
    explained = mm.search("asyncio books", explain=True).explanation
    assert explained is not None
    page = client(mm).get("/search", params={"q": "asyncio books", "explain": "1"}).text
    details = re.search(
        r'<details class="explain" data-test="explain-details" open>(.*?)'
        r"</details>",
        page,
        re.S,
    )
    assert details, "the explain part is not open"
    terms = re.search(r'data-test="explain-terms">(.*?)</table>', details.group(1), re.S)
    assert terms and all(f">{t}<" in terms.group(1) for t in explained["terms"])
    table = re.search(r'data-test="explain-candidates">(.*?)</table>\s*</details>', page, re.S)
    assert table
    statuses = re.findall(r"<td>(hit|beyond k|below min_score)</td>", table.group(1))
    assert statuses == [row["status"] for row in explained["candidates"]]


def test_a_hostile_snippet_is_escaped_and_only_marked(mm: MemoryManager) -> None:
    page = client(mm).get("/search", params={"q": "pwned script onerror"}).text
    hostile = [h for h in _section(page, "hit") if "/sessions/hostile" in h]
    assert hostile, page
    snippet = re.search(r'<div class="snippet" data-test="snippet">(.*?)</div>', hostile[0], re.S)
    assert snippet
    tags = set(re.findall(r"</?([a-zA-Z]+)", snippet.group(1)))
    assert tags <= {"mark", "p", "a", "br"}, snippet.group(1)  # the renderer's, and marks
    assert 'href="#harmful-link"' in snippet.group(1)  # the javascript: link is dropped
    assert "&lt;<mark>script</mark>&gt;" in snippet.group(1)
    assert "<script" not in page and "<img" not in page


def test_snippets_are_rendered_markdown_cut_at_whole_words(tmp_path: Path) -> None:
    mm = MemoryManager(tmp_path / "m", init=True, agent="a", via="web")
    filler = " ".join(f"filler{i}" for i in range(40))
    mm.save_interaction(
        "md",
        f"{filler} the **bold lighthouse** keeper, see [[other-session]] {filler}",
        "ok",
        START,
    )
    page = client(mm).get("/search", params={"q": "lighthouse"}).text
    [hit] = _section(page, "hit")
    snippet = re.search(r'data-test="snippet">(.*?)</div>', hit, re.S)
    assert snippet, hit
    text = snippet.group(1)
    assert "<strong>bold <mark>lighthouse</mark></strong>" in text
    assert 'href="/sessions/other-session">other-session</a>' in text
    assert "**" not in text and "[[" not in text and "]]" not in text
    shown = re.sub(r"<[^>]+>", "", text).strip()
    # the cut ends are whole words: "filler12", never "ler12"
    first, last = shown.lstrip("…").split()[0], shown.rstrip("…").split()[-1]
    assert re.fullmatch(r"filler\d+", first) and re.fullmatch(r"filler\d+|keeper,?", last)


def test_whole_words_drops_the_pieces_a_cut_left() -> None:
    assert whole_words("…ncio in Python is fun and…") == "…in Python is fun…"
    assert whole_words("Short and whole") == "Short and whole"
    assert whole_words("…记忆里的东西") == "…记忆里的东西"  # no spaces: nothing to cut at


def test_highlight_escapes_everything_it_does_not_mark() -> None:
    shown = highlight('<b onclick="x">Books</b> & 记忆', {"book", "记忆"})
    assert str(shown) == (
        "&lt;b onclick=&#34;x&#34;&gt;<mark>Books</mark>&lt;/b&gt; &amp; <mark>记忆</mark>"
    )


def test_an_empty_query_shows_the_form_only(mm: MemoryManager) -> None:
    for params in ({}, {"q": ""}, {"q": "   "}):
        page = client(mm).get("/search", params=params)
        assert page.status_code == 200
        assert 'data-test="search-form"' in page.text
        assert not _all(page.text, "hit") and not _all(page.text, "error")


def _asgi_get(mm: MemoryManager, path: str, query: str) -> tuple[int, str]:
    """GET through the ASGI app itself: the HTTP client refuses a 100 KB address, but a
    browser sends one (and the page must not break on it)."""
    app = create_app(mm, WebOptions())
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"x")],
        "client": ("127.0.0.1", 1),
        "server": ("x", 80),
    }
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()


def test_a_huge_query_is_cut_by_the_library_and_the_page_says_so(mm: MemoryManager) -> None:
    query = "asyncio books " * 8000  # 112,000 characters
    status, page = _asgi_get(mm, "/search", urlencode({"q": query, "context": "python-books"}))
    assert status == 200
    notes = re.findall(r'data-test="search-note">([^<]*)<', page)
    assert any("only the first 4000 were used" in n for n in notes), notes
    assert _all(page, "hit") and _all(page, "context-message")


def test_an_unknown_kind_is_a_400_page_naming_it(mm: MemoryManager) -> None:
    page = client(mm).get("/search", params={"q": "books", "kind": "everything"})
    assert page.status_code == 400
    assert "kind" in page.text and "everything" in page.text
    assert _all(page.text, "error")


def test_filters_narrow_the_search(mm: MemoryManager) -> None:
    web = client(mm)
    wide = web.get("/search", params={"q": "books train"}).text
    narrow = web.get("/search", params={"q": "books train", "tag": "travel"}).text
    assert "/sessions/python-books" in wide
    hrefs = [re.search(r'href="([^"#]+)', h) for h in _section(narrow, "hit")]
    assert hrefs and {h.group(1) for h in hrefs if h} == {"/sessions/travel-plans"}
    fact = web.get("/search", params={"q": "short books", "kind": "fact"}).text
    fact_id = mm.facts()[0].id
    assert f'href="/facts/{fact_id}"' in fact and 'data-test="fact-hit"' in fact


def test_the_context_lists_its_messages_and_nothing_cut_with_room(mm: MemoryManager) -> None:
    page = (
        client(mm)
        .get("/search", params={"q": "train", "context": "python-books", "max_tokens": "4000"})
        .text
    )
    messages = _section(page, "context-message")
    assert any("Robust Python" in m for m in messages)  # the newest turn
    assert any("Kyoto" in m for m in messages)  # a memory from another session
    assert not _all(page, "context-cut") and _all(page, "context-nothing-cut")


def test_each_part_of_the_context_links_to_who_wrote_it(mm: MemoryManager) -> None:
    web = client(mm)
    page = web.get(
        "/search", params={"q": "train", "context": "python-books", "max_tokens": "4000"}
    ).text
    links = [
        unquote(h)
        for row in _section(page, "context-included")
        for h in re.findall(r'href="([^"]+)" data-test="why-link"', row)
    ]
    own = [h for h in links if h.startswith("/sessions/python-books?blame=1#turn-")]
    other = [h for h in links if h.startswith("/sessions/") and "python-books" not in h]
    assert own and other, links
    target = web.get(other[0].split("#")[0].replace("&amp;", "&"))
    assert target.status_code == 200 and 'data-test="blame"' in target.text


def test_a_small_budget_cuts_and_the_page_says_what_and_why(mm: MemoryManager) -> None:
    page = (
        client(mm)
        .get("/search", params={"q": "train", "context": "python-books", "max_tokens": "60"})
        .text
    )
    cut = _section(page, "context-cut")
    reasons = [re.findall(r"<td>([^<]*)</td>", row)[-1] for row in cut]
    assert "over budget" in reasons and all(reasons), cut
    meter = re.search(r'<meter min="0" max="(\d+)" value="(\d+)" data-test="context-budget"', page)
    assert meter and int(meter.group(1)) == 60 and 0 < int(meter.group(2)) <= 60


# --- history ---------------------------------------------------------------------------


def _rows(page: str) -> list[str]:
    return [m for m in re.findall(r'href="/commits/([0-9a-f]{40})" data-test="commit-link"', page)]


def test_history_lists_the_store_newest_first_like_git(mm: MemoryManager, store: Path) -> None:
    page = client(mm).get("/history")
    assert page.status_code == 200
    assert _rows(page.text) == git(store, "rev-list", "HEAD").split()


def test_history_filters_by_op_agent_session_and_trailer(mm: MemoryManager) -> None:
    with mm.acting_as("other-agent"):
        mm.save_interaction("travel-plans", "And a hotel?", "Booked.", START + timedelta(days=3))
    web = client(mm)
    summarize = _rows(web.get("/history", params={"op": "summarize"}).text)
    assert summarize == [_sha(mm, "summarize")]
    other = _rows(web.get("/history", params={"agent": "other-agent"}).text)
    assert other == [mm.head()]
    travel = _rows(web.get("/history", params={"session": "travel-plans"}).text)
    assert travel == [r.sha for r in mm.history("travel-plans")] and len(travel) == 2
    by_trailer = _rows(web.get("/history", params={"trailer": "Gitmem-Trigger: manual"}).text)
    assert by_trailer == summarize
    bad = web.get("/history", params={"trailer": "no colon here"})
    assert bad.status_code == 400 and "trailer" in bad.text


def test_history_of_an_unknown_session_is_404(mm: MemoryManager) -> None:
    page = client(mm).get("/history", params={"session": "never-was"})
    assert page.status_code == 404 and "never-was" in page.text


def test_history_pages_back_with_before(store: Path) -> None:
    mm = MemoryManager(store, init=True, agent="pager")
    for n in range(60):
        mm.save_interaction(
            f"s{n % 3}", f"question {n}", f"answer {n}", START + timedelta(minutes=n)
        )
    web = client(mm)
    first = web.get("/history").text
    shown = _rows(first)
    assert len(shown) == 50
    older = re.search(r'<a href="([^"]+)" rel="next" data-test="older"[^>]*>', first)
    assert older and f"before={shown[-1]}" in unquote(older.group(1).replace("&amp;", "&"))
    second = web.get(older.group(1).replace("&amp;", "&")).text
    rest = _rows(second)
    assert shown + rest == git(store, "rev-list", "HEAD").split()
    assert not _all(second, "older")
    saves = web.get("/history", params={"op": "save", "session": "s1"}).text
    assert len(_rows(saves)) == 20 and not _all(saves, "older")


def test_history_trailers_filter_in_the_library(mm: MemoryManager) -> None:
    found = mm.history(trailers={"Gitmem-Trigger": "manual"})
    assert [r.op for r in found] == ["summarize"]
    assert mm.history("python-books", trailers={"Gitmem-Via": "web"}, op="metadata")[0].op == (
        "metadata"
    )


# --- one commit ------------------------------------------------------------------------


def test_the_summarize_commit_shows_the_summary_change(mm: MemoryManager) -> None:
    sha = _sha(mm, "summarize")
    page = client(mm).get(f"/commits/{sha}")
    assert page.status_code == 200
    change = _section(page.text, "summary-change")
    assert len(change) == 1
    before, after = change[0].split('<div class="diff-add">')
    assert "(none)" in before and "The user prefers short books" in after
    assert not _all(page.text, "turn-added")
    assert f'href="/undo/revert/{sha}" data-test="revert-link"' in page.text
    for name in ("Gitmem-Op", "Gitmem-Trigger", "Gitmem-Covers"):
        assert f"<th>{name}</th>" in page.text


def test_the_commit_page_opens_with_one_line_then_the_diff_then_the_trailers(
    mm: MemoryManager,
) -> None:
    saved = _sha(mm, "save", "python-books")
    reverted = mm.revert(saved)
    page = client(mm).get(f"/commits/{reverted}").text
    line = _section(page, "commit-line")
    assert len(line) == 1
    assert "test-agent" in line[0] and "test-model" in line[0] and ">revert</a>" in line[0]
    assert re.search(r">\d+ \w+ ago</time>|>just now</time>", line[0])
    parent = mm.history(commit=reverted, limit=2)[1].sha
    assert f'href="/commits/{parent}" data-test="parent-link"' in line[0]
    # the diff comes first; the raw trailers are folded below it
    assert page.index('data-test="diff"') < page.index('data-test="trailers"')
    assert "<th>Gitmem-Agent</th>" not in page[: page.index('data-test="trailers"')]
    folded = page[page.index('<details class="commit-details"') :]
    assert f'<a class="mono" href="/commits/{saved}" data-test="sha-link">' in folded
    assert "<th>Gitmem-Reverts</th>" in folded


def test_a_save_commit_shows_the_added_turn_and_links_to_undo_it(mm: MemoryManager) -> None:
    sha = _sha(mm, "save", "python-books")
    page = client(mm).get(f"/commits/{sha}").text
    added = _section(page, "turn-added")
    assert len(added) == 1 and "And one on typing?" in added[0] and "Robust Python" in added[0]
    assert any("last_active" in row for row in _section(page, "meta-change"))
    rollback = re.search(
        r'href="/undo/rollback/python-books\?to=([^"]+)" '
        r'data-test="rollback-link"',
        page,
    )
    assert (
        rollback
        and mm.resolve(unquote(rollback.group(1))) == mm.history(commit=sha, limit=2)[1].sha
    )  # sha^ is the parent
    assert not _all(page, "notice") and 'data-test="unified"' not in page


def test_a_changed_turn_shows_old_and_new(mm: MemoryManager) -> None:
    session = mm.load_memory("travel-plans")
    assert session is not None
    turn = session.interactions[0]
    edited = turn.model_copy(
        update={
            "messages": [
                turn.messages[0].model_copy(update={"content": "Book a train to Osaka on May 4."}),
                *turn.messages[1:],
            ]
        }
    )
    mm.put_session(session.model_copy(update={"interactions": [edited]}), op="edit")
    page = client(mm).get(f"/commits/{mm.head()}").text
    changed = _section(page, "turn-changed")
    assert len(changed) == 1
    old, new = changed[0].split('<div class="diff-add">')
    assert "Kyoto on May 3" in old and "Osaka on May 4" in new


def test_the_fact_commit_and_the_unified_toggle(mm: MemoryManager) -> None:
    sha = _sha(mm, "remember")
    web = client(mm)
    page = web.get(f"/commits/{sha}").text
    facts = _section(page, "fact-change")
    assert len(facts) == 1 and "Alice prefers short books" in facts[0]
    text = web.get(f"/commits/{sha}", params={"unified": "1"}).text
    unified = re.search(r'<pre class="unified" data-test="unified">(.*?)</pre>', text, re.S)
    assert unified and "+- Alice prefers short books" in unified.group(1)


def test_session_narrows_the_diff_and_done_shows_a_notice(mm: MemoryManager) -> None:
    sha = _sha(mm, "save", "python-books")
    web = client(mm)
    own = web.get(f"/commits/{sha}", params={"session": "python-books", "done": "revert"})
    assert len(_all(own.text, "session-diff")) == 1
    notice = _section(own.text, "notice")
    assert notice and "Reverted: this is the new commit" in notice[0]
    other = web.get(f"/commits/{sha}", params={"session": "travel-plans", "done": "bogus"})
    assert other.status_code == 200
    assert not _all(other.text, "session-diff") and not _all(other.text, "notice")


def test_the_hostile_save_renders_as_text(mm: MemoryManager) -> None:
    page = client(mm).get(f"/commits/{_sha(mm, 'save', 'hostile')}").text
    assert _section(page, "turn-added") and "&lt;script&gt;" in page
    assert "<script" not in page and "<img" not in page and 'href="javascript' not in page


def test_an_unknown_sha_is_404_naming_it_and_the_root_commit_works(
    mm: MemoryManager, store: Path
) -> None:
    web = client(mm)
    missing = web.get("/commits/0123456789abcdef")
    assert missing.status_code == 404 and "0123456789abcdef" in missing.text
    root = git(store, "rev-list", "--max-parents=0", "HEAD").strip()
    page = web.get(f"/commits/{root}")
    assert page.status_code == 200 and "the store's first commit" in page.text
    assert not _all(page.text, "revert-link")


def test_a_commit_of_many_sessions_details_the_first_and_lists_the_rest(store: Path) -> None:
    mm = MemoryManager(store, init=True, agent="importer")
    with mm.batch("Import 25 sessions"):
        for n in range(25):
            mm.save_interaction(
                f"imported-{n:02d}", f"question {n}", f"answer {n}", START + timedelta(minutes=n)
            )
    page = client(mm).get(f"/commits/{mm.head()}").text
    detailed = re.findall(r'<section class="session-diff" data-test="session-diff">', page)
    assert len(detailed) == 20 and len(_section(page, "turn-added")) == 20
    brief = re.findall(r'<tr data-test="session-diff"><td><a href="([^"]+)">', page)
    assert [unquote(h.replace("&amp;", "&")).rsplit("=", 1)[1] for h in brief] == [
        f"imported-{n:02d}" for n in range(20, 25)
    ]


def test_a_bad_date_filter_is_a_400_page_naming_the_field(mm: MemoryManager) -> None:
    web = client(mm)
    for url in ("/history", "/search"):
        page = web.get(url, params={"q": "books", "since": "last tuesday"})
        assert page.status_code == 400, url
        assert "since" in page.text and "last tuesday" in page.text
