"""The dashboard and namespaces: ``gitmem web --namespace`` shows that namespace only, and
a store with several gets a switcher (a plain GET form, no script) that keeps the page."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from gitmem import MemoryManager
from tests.web_helpers import client

ALICE_FACT = "Alice keeps her Postgres backups in Frankfurt"
BOB_FACT = "Bob's Postgres runs on port 5433"
_BANNER = re.compile(r"at http://127\.0\.0\.1:(\d+)/")


@pytest.fixture
def shared(store: Path) -> Path:
    with MemoryManager(store, init=True, namespace="alice") as alice:
        alice.save_interaction("support-alice", "My Postgres database is on port 5432", "Noted")
        alice.remember(ALICE_FACT)
    with MemoryManager(store, namespace="bob") as bob:
        bob.save_interaction("support-bob", "Bob's Postgres database crashed", "Sorry")
        bob.remember(BOB_FACT)
    with MemoryManager(store) as lobby:
        lobby.save_interaction("lobby", "Postgres questions go to the support channel", "ok")
    return store


def _pages(web: object) -> str:
    get = web.get  # type: ignore[attr-defined]
    return "\n".join(
        get(path, params=params).text
        for path, params in (
            ("/sessions", {}),
            ("/search", {"q": "Postgres database port"}),
            ("/facts", {}),
            ("/links", {}),
            ("/history", {}),
        )
    )


def test_a_fixed_namespace_shows_nothing_else(shared: Path) -> None:
    web = client(MemoryManager(shared, namespace="alice"), fixed_namespace=True)
    seen = _pages(web)
    assert "support-alice" in seen and ALICE_FACT in seen
    assert "support-bob" not in seen and "5433" not in seen and "lobby" not in seen
    assert 'action="/namespace"' not in seen  # no switcher
    # the switch route does nothing for a fixed dashboard
    web.get("/namespace", params={"to": "bob", "back": "/facts"})
    assert BOB_FACT not in web.get("/facts").text
    assert web.get("/sessions/support-bob").status_code == 404


def test_the_switcher_changes_namespace_and_keeps_the_page(shared: Path) -> None:
    web = client(MemoryManager(shared))
    first = web.get("/facts").text
    assert 'action="/namespace"' in first and "<script" not in first
    switcher = first.split('action="/namespace"', 1)[1].split("</form>", 1)[0]
    assert re.findall(r'<option value="([^"]*)"', switcher) == ["", "alice", "bob"]
    assert "lobby" in web.get("/sessions").text
    moved = web.get(
        "/namespace", params={"to": "bob", "back": "/search?q=Postgres"}, follow_redirects=False
    )
    assert moved.status_code == 303 and moved.headers["location"] == "/search?q=Postgres"
    assert "samesite=strict" in moved.headers["set-cookie"].lower()
    seen = _pages(web)
    assert "support-bob" in seen and BOB_FACT in seen
    assert "support-alice" not in seen and ALICE_FACT not in seen and "lobby" not in seen
    assert '<option value="bob" selected>' in seen
    # an unknown namespace or a foreign page changes nothing and goes nowhere else
    away = web.get(
        "/namespace", params={"to": "mallory", "back": "//evil.example/"}, follow_redirects=False
    )
    assert away.headers["location"] == "/sessions" and "set-cookie" not in away.headers
    assert BOB_FACT in web.get("/facts").text
    web.get("/namespace", params={"to": "", "back": "/facts"})
    assert BOB_FACT not in web.get("/facts").text and "lobby" in web.get("/sessions").text


def test_a_store_with_one_namespace_has_no_switcher(store: Path) -> None:
    mm = MemoryManager(store, init=True)
    mm.save_interaction("only", "hello", "hi")
    assert 'action="/namespace"' not in client(mm).get("/sessions").text


def test_gitmem_web_namespace(shared: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gitmem",
            "--repo",
            str(shared),
            "--namespace",
            "bob",
            "web",
            "--port",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        found = _BANNER.search(banner)
        assert found, f"gitmem web did not start: {banner}"
        seen = []
        for target in ("/sessions", "/facts", "/search?q=Postgres"):
            conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=30)
            conn.request("GET", target)
            seen.append(conn.getresponse().read().decode())
            conn.close()
    finally:
        proc.terminate()
        proc.wait(30)
    page = "\n".join(seen)
    assert "support-bob" in page and "runs on port 5433" in page
    assert "support-alice" not in page and "Frankfurt" not in page and "lobby" not in page
    assert 'action="/namespace"' not in page


def test_another_namespace_commit_is_not_shown_or_reverted(shared: Path) -> None:
    bob = MemoryManager(shared, namespace="bob")
    sha = bob.save_interaction("support-bob", "Bob's second question", "ok")
    assert sha is not None
    web = client(MemoryManager(shared, namespace="alice"), fixed_namespace=True)
    for path in (f"/commits/{sha}", f"/undo/revert/{sha}"):
        page = web.get(path)
        assert page.status_code == 404 and "second question" not in page.text
    assert client(bob, fixed_namespace=True).get(f"/commits/{sha}").status_code == 200


def test_a_form_acts_in_the_namespace_it_was_shown_in(shared: Path) -> None:
    """A revert confirmed on Bob's page stays Bob's although another tab switched to Alice
    meanwhile (the cookie is shared)."""
    bob = MemoryManager(shared, namespace="bob")
    sha = bob.save_interaction("support-bob", "Bob's second question", "ok")
    assert sha is not None
    web = client(MemoryManager(shared))
    web.get("/namespace", params={"to": "bob", "back": "/facts"})
    page = web.get(f"/undo/revert/{sha}").text
    assert 'name="namespace" value="bob"' in page
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    web.get("/namespace", params={"to": "alice", "back": "/facts"})  # the other tab
    done = web.post(
        f"/undo/revert/{sha}",
        data={"csrf": token.group(1), "namespace": "bob"},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text
    turns = MemoryManager(shared, namespace="bob").load_memory("support-bob")
    assert turns is not None
    assert [t.messages[0].content for t in turns.interactions] == [
        "Bob's Postgres database crashed"
    ]
    # a form for a namespace the dashboard does not serve changes nothing
    fixed = client(MemoryManager(shared, namespace="alice"), fixed_namespace=True)
    page = fixed.get("/undo").text
    token = re.search(r'name="csrf(?:-token)?" (?:value|content)="([^"]+)"', page)
    assert token is not None
    refused = fixed.post(
        "/undo/agent", data={"csrf": token.group(1), "namespace": "bob", "agent": "gitmem"}
    )
    assert refused.status_code == 400 and "does not serve" in refused.text
