"""The dashboard's sessions list, session, links and facts pages, through
Starlette's TestClient on real stores: status codes, filters, paging, escaping of hostile
content, blame, reading as of a revision, the link graph and facts with provenance."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.format.paths import memory_path
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.search.browse import LinkGraph
from gitmem.summary.triggers import SummaryConfig
from gitmem.web import links
from gitmem.web.pages import ago
from tests.conftest import git
from tests.web_helpers import START, client, copy_of_web_store


@pytest.fixture
def mm(tmp_path: Path, web_template: Path) -> MemoryManager:
    return copy_of_web_store(tmp_path / "memory", web_template)


def _rows(page: str) -> list[str]:
    """The session ids of a sessions list, in order."""
    return re.findall(r'data-test="session-title" href="/sessions/([^"]*)"', page)


def _body(page: str) -> str:
    return page[page.index("<body>") :]


# --- the sessions list ----------------------------------------------------------------


def test_the_list_shows_every_session_with_its_columns(mm: MemoryManager) -> None:
    response = client(mm).get("/sessions")
    assert response.status_code == 200
    page = response.text
    assert _rows(page) == ["hostile", "travel-plans", "python-books"]
    assert '<span data-test="total">3</span>' in page
    row = page[page.index('href="/sessions/python-books">') :]
    row = row[: row.index("</tr>")]
    # the title is the first user line; the times are relative, the exact ones on hover
    assert ">Recommend some books on Python asyncio.</a>" in row
    assert 'title="2026-03-02 09:09 UTC · created 2026-03-02 09:00 UTC"' in row
    assert re.search(r">\d+ (?:year|month|week|day)s? ago</time>", row)
    assert "Last active (UTC)" in page
    assert '<td class="num">4</td>' in row  # turns
    assert '<a class="tag" href="/sessions?tag=python">python</a>' in row
    assert ">reading</a>" in row and "User, Assistant" in row
    summary = re.search(r'data-test="session-summary">([^<]*)<', row)
    assert summary is not None and summary.group(1).startswith("The user asked about Fluent")
    assert "- User:" not in summary.group(1) and "\n" not in summary.group(1)


def test_titles_people_and_the_summary_line(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "m")
    long = "Could you please help me plan a **very** long walking holiday through the Alps"

    def put(session_id: str, text: str, people: list[str], extra: dict[str, str]) -> None:
        turn = Interaction(
            id="i1", timestamp=START, messages=[Message(speaker="Ann", content=text)]
        )
        mm.put_session(
            Session(
                id=session_id,
                created=START,
                last_active=START,
                participants=people,
                extra=extra,
                interactions=[turn],
            )
        )

    put("uuid-1", long, ["Ann", "Bot"], {})
    put("uuid-2", "hello", ["Ann"], {"title": "Trip to Kyoto"})
    put("memory-md", "x", ["MEMORY.md"], {})
    page = client(mm).get("/sessions").text
    titles = dict(re.findall(r'data-test="session-title" href="/sessions/([^"]*)">([^<]*)<', page))
    assert titles["uuid-2"] == "Trip to Kyoto"  # the imported title
    # the first user line, its Markdown marks dropped, cut at a whole word
    assert titles["uuid-1"] == "Could you please help me plan a very long walking holiday through…"
    people = dict(
        re.findall(r'href="/sessions/([^"]*)">.*?data-test="people">([^<]*)<', page, re.S)
    )
    assert people["uuid-1"].strip() == "Ann, Bot"
    assert people["memory-md"].strip() == ""  # a file is not a person
    assert "from MEMORY.md" in page


def test_relative_times() -> None:
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert ago(now - timedelta(hours=3), now) == "3 hours ago"
    assert ago(now - timedelta(seconds=20), now) == "just now"
    assert ago(now - timedelta(days=1, hours=2), now) == "1 day ago"
    assert ago(now - timedelta(days=800), now) == "2 years ago"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("tag=python", ["python-books"]),
        ("tag=books,+python", ["python-books"]),
        ("tag=nothing", []),
        ("project=reading", ["python-books"]),
        ("participant=assistant", ["hostile", "travel-plans", "python-books"]),
        ("since=2026-03-03", ["hostile", "travel-plans"]),
        ("until=2026-03-03", ["travel-plans", "python-books"]),  # a date: to the end of the day
        ("since=2026-03-03&until=2026-03-03", ["travel-plans"]),
    ],
)
def test_filters(mm: MemoryManager, query: str, expected: list[str]) -> None:
    response = client(mm).get(f"/sessions?{query}")
    assert response.status_code == 200
    assert _rows(response.text) == expected
    assert f'<span data-test="total">{len(expected)}</span>' in response.text


def test_paging_keeps_the_filters_and_counts_the_whole_list(mm: MemoryManager) -> None:
    web = client(mm)
    first = web.get("/sessions?size=2&participant=user").text
    assert _rows(first) == ["hostile", "travel-plans"]
    assert "page 1 of 2" in first and '<span data-test="total">3</span>' in first
    older = re.search(r'<a href="([^"]+)" rel="next"[^>]*>', first)
    assert older is not None
    link = older.group(1).replace("&amp;", "&")
    assert "participant=user" in link and "page=2" in link
    second = web.get(link).text
    assert _rows(second) == ["python-books"] and 'rel="next"' not in second
    assert 'rel="prev"' in second


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("since=yesterday", "since"),
        ("until=2026-02-30", "until"),
        ("page=two", "page"),
        ("size=0", "size"),
    ],
)
def test_a_bad_filter_is_a_400_naming_the_field(mm: MemoryManager, query: str, named: str) -> None:
    response = client(mm).get(f"/sessions?{query}")
    assert response.status_code == 400
    error = re.search(r'data-test="error"[^>]*>([^<]*)<', response.text)
    assert error is not None and named in error.group(1)


# --- one session ----------------------------------------------------------------------


def test_a_session_shows_metadata_summary_and_every_turn(mm: MemoryManager) -> None:
    response = client(mm).get("/sessions/python-books")
    assert response.status_code == 200
    page = response.text
    session = mm.load_memory("python-books")
    assert session is not None and session.summary is not None
    turns = re.findall(r'<article class="turn[^"]*" id="turn-([^"]+)" data-test="turn">', page)
    assert turns == [t.id for t in session.interactions]
    assert page.count('<div class="speaker">User</div>') == 4
    meta = page[page.index('data-test="session-meta"') : page.index("</dl>")]
    assert 'href="/sessions/travel-plans"' in meta and ">reading</a>" in meta
    assert ">python</a>" in meta and ">books</a>" in meta
    assert 'data-test="summary"' in page and "gitmem-extractive" in page
    # the summary's Markdown is rendered, its wiki link goes to the session
    assert '<a class="wikilink" href="/sessions/travel-plans">[[travel-plans]]</a>' in page
    assert 'href="/history?session=python-books"' in page
    assert 'href="/search?session=python-books"' in page
    assert 'href="/undo/rollback/python-books"' in page
    assert 'data-test="blame"' not in page  # who wrote it: only when asked


def test_key_facts_keywords_and_extra_metadata_are_shown(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "memory")
    at = START
    mm.put_session(
        Session(
            id="facts",
            created=at,
            last_active=at,
            participants=["Ann"],
            extra={"mood": "calm"},
            interactions=[
                Interaction(
                    id="t1",
                    timestamp=at,
                    messages=[Message(speaker="Ann", content="I live in *Oslo*")],
                )
            ],
            summary=Summary(
                text="Ann lives in Oslo.",
                generated=at,
                model="m1",
                covers=["t1"],
                facts=["Ann lives in Oslo"],
                keywords=["Oslo"],
            ),
        )
    )
    page = client(mm).get("/sessions/facts").text
    facts = page[page.index('data-test="key-facts"') :]
    assert "<li>Ann lives in Oslo</li>" in facts[: facts.index("</ul>")]
    assert '<span class="tag">Oslo</span>' in page and "covers t1" in page
    assert "<dt>mood</dt><dd>calm</dd>" in page
    assert "<em>Oslo</em>" in page  # Markdown content is rendered


def test_hostile_content_renders_as_text(mm: MemoryManager) -> None:
    mm.save_interaction(
        "hostile",
        'Plain [click](javascript:alert(1)) and [[x" onload="y]]',
        "<svg onload=alert(1)>",
        START + timedelta(days=2, minutes=1),
    )
    response = client(mm).get("/sessions/hostile")
    assert response.status_code == 200
    body = _body(response.text)
    assert "&lt;script&gt;" in body and "&lt;img" in body and "&lt;svg onload" in body
    for element in ("<script", "<img", "<svg", "<iframe"):
        assert element not in body.lower()
    assert 'href="javascript' not in body.lower() and 'onload="' not in body
    assert '<a rel="nofollow noopener noreferrer" href="#harmful-link">click</a>' in body
    assert "script-src 'none'" in response.headers["content-security-policy"]


def test_an_unknown_session_or_revision_is_a_404(mm: MemoryManager) -> None:
    web = client(mm)
    missing = web.get("/sessions/no-such-session")
    assert missing.status_code == 404 and "no-such-session" in missing.text
    assert web.get("/sessions/python-books?at=" + "0" * 40).status_code == 404
    # the session did not exist yet at its store's first commit
    first = git(mm.path, "rev-list", "--max-parents=0", "HEAD").strip()
    assert web.get(f"/sessions/travel-plans?at={first}").status_code == 404


def test_blame_shows_who_wrote_each_turn_and_the_summary(mm: MemoryManager) -> None:
    page = client(mm).get("/sessions/python-books?blame=1").text
    blamed = mm.blame("python-books")
    assert len(blamed) == 5  # four turns and the summary
    shown = re.findall(r'data-test="blame">by ([^<]*) in <a href="/commits/([0-9a-f]{40})">', page)
    summary = next(b for b in blamed if b.kind == "summary")
    turns = [b for b in blamed if b.kind == "interaction"]
    assert [sha for _, sha in shown] == [summary.sha, *(b.sha for b in turns)]
    assert all(who.startswith("test-agent") for who, _ in shown)
    assert "(test-model)" in shown[1][0]
    assert 'href="?">Hide who wrote it' in page
    assert 'data-test="blame-toggle"' in client(mm).get("/sessions/python-books").text


def test_as_of_a_revision_shows_the_older_turns_and_offers_a_rollback(mm: MemoryManager) -> None:
    revisions = mm.history("python-books")
    oldest = revisions[-1].sha
    web = client(mm)
    now = web.get("/sessions/python-books").text
    for revision in revisions:  # the picker offers every revision of the session
        assert f'<option value="{revision.sha}"' in now
    page = web.get(f"/sessions/python-books?at={oldest}").text
    assert page.count('data-test="turn"') == 1
    assert "Recommend some books" in page and "Robust Python" not in page
    assert 'data-test="summary"' not in page
    assert f'<option value="{oldest}" selected>' in page
    assert f'href="/undo/rollback/python-books?to={oldest}"' in page
    assert f'href="/commits/{oldest}"' in page
    # an ISO date picks the last commit at or before it: now, every turn
    later = web.get("/sessions/python-books?at=2100-01-01").text
    assert later.count('data-test="turn"') == 4


def test_archived_turns_are_shown(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "memory")
    mm.summary_config = SummaryConfig(archive="archive")
    for n in range(3):
        mm.save_interaction("long", f"turn number {n}", "ok", START + timedelta(minutes=n))
    mm.summarize("long", count=2, offline=True)
    session = mm.load_memory("long")
    assert session is not None and len(session.interactions) == 1
    page = client(mm).get("/sessions/long").text
    assert page.count('data-test="turn"') == 3 and page.count('class="turn archived"') == 2
    assert "turn number 0" in page


def test_a_session_id_that_needs_quoting(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "memory")
    mm.save_interaction("a b/c?d#e", "hello", "hi", START)
    web = client(mm)
    listed = web.get("/sessions").text
    assert 'href="/sessions/a%20b/c%3Fd%23e"' in listed
    assert web.get("/sessions/a%20b/c%3Fd%23e").status_code == 200


# --- links ------------------------------------------------------------------------------


def _nodes(svg: str) -> list[str]:
    return re.findall(r'<a href="(/sessions/[^"]*)" class="node', svg)


def test_the_links_graph_has_a_node_per_linked_session(mm: MemoryManager) -> None:
    mm.save_interaction(
        "notes",
        "see [[python-books]] and [[<img src=x onerror=alert(1)>]]",
        "ok",
        START + timedelta(days=3),
    )
    response = client(mm).get("/links")
    assert response.status_code == 200
    page = response.text
    start = page.rindex("<svg", 0, page.index('data-test="links-graph"'))
    svg = page[start : page.index("</svg>", start)]
    assert 'data-test="links-graph"' in svg
    assert _nodes(svg) == ["/sessions/notes", "/sessions/python-books", "/sessions/travel-plans"]
    assert svg.count("data-from=") == 3
    # arrows point the way a link goes; a pair linking each other gets one at each end
    assert 'data-from="notes" data-to="python-books"' in svg
    assert 'data-from="python-books" data-to="travel-plans"' in svg
    assert svg.count('marker-end="url(#arrow)"') == 3 and "marker-start" not in svg
    mm.save_interaction("travel-plans", "back to [[python-books]]", "ok", START + timedelta(days=4))
    both = client(mm).get("/links.svg").text
    assert both.count('marker-start="url(#arrow)"') == 1
    # a target that is no session: drawn dashed, not linked, its label escaped
    assert svg.count('data-test="missing-node"') == 1 and "stroke-dasharray" in svg
    assert "&lt;img src=x onerror=alert(1)&gt;" in svg and "<img" not in _body(page)
    assert "hostile" not in svg  # no links in or out


def test_the_raw_svg_and_a_neighbourhood(mm: MemoryManager) -> None:
    mm.save_interaction("far", "see [[near]]", "ok")
    mm.save_interaction("near", "see [[travel-plans]]", "ok")
    web = client(mm)
    raw = web.get("/links.svg?focus=python-books")
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("image/svg+xml")
    assert raw.text.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    # two hops from python-books: travel-plans, then near; far is three away
    assert _nodes(raw.text) == [
        "/sessions/near",
        "/sessions/python-books",
        "/sessions/travel-plans",
    ]
    assert web.get("/links?focus=far").text.count("<title>") == 4  # the page's own title too
    assert web.get("/links?focus=nothing-here").status_code == 404


def test_the_graph_is_capped_with_a_note(
    mm: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm.save_interaction("hub", "[[a1]] [[a2]] [[a3]] [[python-books]]", "ok")
    monkeypatch.setattr(links, "MAX_NODES", 3)
    page = client(mm).get("/links").text
    assert len(re.findall(r'class="node[ "]', page)) == 3 and 'data-test="links-capped"' in page
    assert "hub" in page  # the most linked stay


def test_the_layout_is_deterministic_and_inside_the_picture() -> None:
    graph = LinkGraph(links={f"s{n}": [f"s{n + 1}", "hub"] for n in range(30)}, missing=[])
    first = links.drawing(graph)
    links.layout.cache_clear()
    again = links.drawing(graph)
    assert [(n.id, n.x, n.y) for n in first.nodes] == [(n.id, n.x, n.y) for n in again.nodes]
    low, high = links.MARGIN - 1e-6, first.size - links.MARGIN + 1e-6
    assert all(low <= n.x <= high and low <= n.y <= high for n in first.nodes)
    assert first.width > first.size  # room for the labels right of the nodes
    spots = {(round(n.x), round(n.y)) for n in first.nodes}
    assert len(spots) == len(first.nodes)  # no two nodes on one spot


# --- facts ------------------------------------------------------------------------------


def test_facts_show_their_provenance(mm: MemoryManager) -> None:
    mm.remember(
        "Trains to Kyoto leave at nine",
        source="travel-plans",
        section="Travel",
        tags=["trip"],
        valid_from="2026-05-01",
        confidence=0.75,
    )
    response = client(mm).get("/facts")
    assert response.status_code == 200
    page = response.text
    assert page.count('data-test="fact"') == 2
    assert '<a class="source" href="/sessions/python-books#turn-i3">python-books#i3</a>' in page
    assert '<a class="source" href="/sessions/travel-plans">travel-plans</a>' in page
    assert "<h2>Notes</h2>" in page and "<h2>Travel</h2>" in page
    assert '<span class="tag">trip</span>' in page and "2026-05-01 – …" in page
    assert '<meter min="0" max="1" value="0.75">' in page
    for blame in mm.fact_blame():
        assert f'<a href="/commits/{blame.commit}">' in page
    assert page.count('data-test="fact-blame"><a href="/commits/') == 2


def test_facts_search_section_past_and_as_of(mm: MemoryManager) -> None:
    before = mm.head()
    old = mm.facts()[0]
    mm.supersede(old.id, "Alice prefers long books now", source="python-books")
    web = client(mm)
    assert "Alice prefers long books" in web.get("/facts?q=long").text
    current = web.get("/facts").text
    assert current.count('data-test="fact"') == 1 and "short books" not in current
    past = web.get("/facts?past=1").text
    assert past.count('data-test="fact"') == 2 and 'replaced by <a href="#fact-' in past
    then = web.get(f"/facts?at={before}").text
    assert "short books" in then and "long books" not in then
    assert web.get("/facts?section=Nowhere").text.count('data-test="fact"') == 0
    dated = web.get(f"/facts?at={datetime.now(UTC).date() + timedelta(days=1)}").text
    assert "long books" in dated


def test_a_broken_memory_file_names_path_and_line(mm: MemoryManager) -> None:
    path = mm.path / memory_path()
    path.write_text(path.read_text() + "- again {#f2697465}\n")
    git(mm.path, "commit", "-qam", "a slip by hand")
    response = client(mm).get("/facts")
    assert response.status_code == 500
    assert "memory/MEMORY.md:6" in response.text and "used twice" in response.text


# --- access keys ------------------------------------------------------------------------


def test_access_keys_reach_every_page_and_never_clash(mm: MemoryManager) -> None:
    web = client(mm)
    for path in ("/sessions?size=1", "/search?q=books", "/history?limit=1", "/links", "/facts"):
        page = web.get(path).text
        keys = re.findall(r'accesskey="([^"]*)"', page)
        assert len(keys) == len(set(keys)), (path, keys)  # one element per key
        assert {"l", "s", "h", "u", "r", "g", "f"} <= set(keys), (path, keys)
        assert 'data-test="access-keys"' in page  # named in the footer
    search = web.get("/search").text
    assert re.search(r'<input type="search" name="q"[^>]*accesskey="s"', search)
    listed = web.get("/sessions?size=1").text
    assert re.search(r'rel="next" accesskey="n"', listed)
    assert 'accesskey="+"' in web.get("/links").text  # zoom in
