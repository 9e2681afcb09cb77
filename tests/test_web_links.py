"""The links graph as a picture worth reading: node size by turns, colour by tag or
project with a legend, facts hung beside the sessions they came from, a focus with two
hops, and pan/zoom by plain links. Through Starlette's TestClient on real stores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gitmem import MemoryManager
from tests.web_helpers import client, copy_of_web_store


@pytest.fixture
def mm(tmp_path: Path, web_template: Path) -> MemoryManager:
    return copy_of_web_store(tmp_path / "memory", web_template)


def _svg(page: str) -> str:
    """The graph's SVG (the legend's swatches are little SVGs too)."""
    start = page.rindex("<svg", 0, page.index('data-test="links-graph"'))
    return page[start : page.index("</svg>", start)]


def _session_nodes(svg: str) -> dict[str, tuple[float, str]]:
    """id -> (radius, fill) of each session node."""
    found = re.findall(
        r'<a href="/sessions/[^"]*" class="node[^"]*" data-id="([^"]*)".*?'
        r'<circle [^>]*r="(\d+)" fill="([^"]*)"',
        svg,
    )
    return {sid: (float(r), fill) for sid, r, fill in found}


def test_the_session_listings_give_turns_and_tags(mm: MemoryManager) -> None:
    found = mm.session_listings(["python-books", "travel-plans", "nothing-here"])
    assert sorted(found) == ["python-books", "travel-plans"]
    assert found["python-books"].turns == 4 and sorted(found["python-books"].tags) == [
        "books",
        "python",
    ]
    assert found["travel-plans"].turns == 1 and found["travel-plans"].project is None


def test_nodes_grow_with_turns_and_take_their_tags_colour(mm: MemoryManager) -> None:
    page = client(mm).get("/links").text
    nodes = _session_nodes(_svg(page))
    assert set(nodes) == {"python-books", "travel-plans"}
    assert nodes["python-books"][0] > nodes["travel-plans"][0]  # 4 turns against 1
    assert nodes["python-books"][1] != nodes["travel-plans"][1]  # books/python vs travel
    legend = page[page.index('data-test="legend"') :]
    legend = legend[: legend.index("</ul>")]
    assert "books" in legend and "travel" in legend
    assert nodes["python-books"][1] in legend and nodes["travel-plans"][1] in legend
    # by project: one has "reading", the other none
    by_project = client(mm).get("/links?by=project").text
    assert "reading" in by_project[by_project.index('data-test="legend"') :]
    assert "no project" in by_project
    assert client(mm).get("/links?by=colour").status_code == 400


def test_facts_are_linked_to_the_sessions_they_came_from(mm: MemoryManager) -> None:
    [fact] = mm.facts()
    svg = _svg(client(mm).get("/links").text)
    assert f'<a href="/facts/{fact.id}" class="fact"' in svg
    assert f'data-fact="{fact.id}" data-session="python-books"' in svg
    assert "Alice prefers short books" in svg  # its text, on hover
    hidden = _svg(client(mm).get("/links?facts=0").text)
    assert 'class="fact"' not in hidden and "data-fact=" not in hidden


def test_a_focus_shows_two_hops_and_facts_one_hop_away(mm: MemoryManager) -> None:
    mm.save_interaction("a", "see [[b]]", "ok")
    mm.save_interaction("b", "see [[travel-plans]]", "ok")
    mm.remember("Fact of b", source="b")
    mm.remember("Fact of a", source="a")
    web = client(mm)
    svg = _svg(web.get("/links?focus=travel-plans").text)
    # travel-plans <- python-books, travel-plans <- b <- a: all within two hops
    assert set(_session_nodes(svg)) == {"travel-plans", "python-books", "b", "a"}
    facts = re.findall(r'data-fact="[^"]*" data-session="([^"]*)"', svg)
    # facts of the focus's neighbours (a fact is a hop); a's fact would be three away
    assert sorted(facts) == ["b", "python-books"]
    svg = _svg(web.get("/links?focus=a").text)
    assert set(_session_nodes(svg)) == {"a", "b", "travel-plans"}
    assert 'class="node focus" data-id="a"' in svg


def test_zoom_and_pan_by_links(mm: MemoryManager) -> None:
    web = client(mm)
    page = web.get("/links").text
    whole = re.search(r'viewBox="([^"]*)"', page)
    assert whole is not None
    width, height = (float(v) for v in whole.group(1).split()[2:])
    views = dict(re.findall(r'<a href="([^"]*)"[^>]*data-test="view-link">([^<]*)<', page))
    zoom_in = next(url for url, label in views.items() if label == "Zoom in")
    assert zoom_in == "/links?zoom=2"
    zoomed = web.get(zoom_in.replace("&amp;", "&")).text
    box = [float(v) for v in re.findall(r'viewBox="([^"]*)"', zoomed)[0].split()]
    want = [width / 4, height / 4, width / 2, height / 2]  # the middle, twice as close
    assert box == pytest.approx(want, abs=0.1)
    links = {
        label: url.replace("&amp;", "&")
        for url, label in re.findall(
            r'<a href="([^"]*)"[^>]*data-test="view-link">([^<]*)<', zoomed
        )
    }
    assert set(links) >= {"Zoom in", "Zoom out", "← Left", "→ Right", "↑ Up", "↓ Down"}
    left = web.get(links["← Left"]).text
    moved = [float(v) for v in re.findall(r'viewBox="([^"]*)"', left)[0].split()]
    assert moved[0] == 0.0 and moved[1] == pytest.approx(height / 4, abs=0.1)  # to the left edge
    # the focus and the colouring are kept across a view change
    kept = web.get("/links?focus=python-books&by=project").text
    assert "/links?focus=python-books&amp;by=project&amp;zoom=2" in kept
    assert web.get("/links?zoom=3").status_code == 400
    assert web.get("/links?zoom=2&x=900").status_code == 400


def test_a_drawing_is_kept_until_head_moves(mm: MemoryManager) -> None:
    web = client(mm)
    first = web.get("/links").text
    again = web.get("/links").text
    assert _svg(first) == _svg(again)
    mm.save_interaction("later", "see [[travel-plans]]", "ok")  # a commit: HEAD moves
    after = _svg(web.get("/links").text)
    assert "later" in _session_nodes(after)
    zoomed = web.get("/links?zoom=2").text  # the kept drawing, another view of it
    assert "later" in _session_nodes(_svg(zoomed)) and 'data-zoom="2"' in zoomed
    assert 'data-zoom="1"' in web.get("/links").text  # the view is never kept
