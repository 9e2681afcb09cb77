"""What the web dashboard's tests share: a small store with every kind of content, a
Starlette TestClient on it, and the CSRF token a page hands out."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from starlette.testclient import TestClient

from gitmem import MemoryManager
from gitmem.web import WebOptions, create_app

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HOSTILE = (
    '<script>document.title="pwned"</script> and <img src=x onerror="document.title='
    "'pwned'\"> and [click](javascript:alert(1))"
)


def web_store(path: Path) -> MemoryManager:
    """A store with three linked sessions, tags, a project, two speakers, a summary that a
    later turn follows, a remembered fact and a session holding hostile HTML."""
    mm = MemoryManager(path, init=True, agent="test-agent", model="test-model", via="web")
    at = START
    for i, (user, assistant) in enumerate(
        [
            ("Recommend some books on Python asyncio.", "Try 'Using Asyncio in Python'."),
            ("Who wrote Fluent Python?", "Luciano Ramalho, see [[travel-plans]]."),
            ("I prefer short books.", "Then start with the 160-page one."),
        ]
    ):
        mm.save_interaction(
            "python-books",
            user,
            assistant,
            at + timedelta(minutes=i),
            tags=["python", "books"],
            metadata={"project": "reading"},
        )
    mm.update_metadata("python-books", metadata={"links": ["travel-plans"]})
    mm.summarize("python-books", offline=True)
    mm.save_interaction(
        "python-books", "And one on typing?", "Try 'Robust Python'.", at + timedelta(minutes=9)
    )
    mm.save_interaction(
        "travel-plans",
        "Book a train to Kyoto on May 3.",
        "Noted: Kyoto, May 3, by train.",
        at + timedelta(days=1),
        tags=["travel"],
    )
    mm.save_interaction("hostile", HOSTILE, "I will not run that.", at + timedelta(days=2))
    mm.remember("Alice prefers short books", source="python-books#i3")
    return mm


def copy_of_web_store(path: Path, template: Path) -> MemoryManager:
    """The store of :func:`web_store` at ``path``: built once at ``template`` (the first time a
    test asks), then copied with plain file copies, several times cheaper than the commits
    web_store makes. The copy is a store of its own; its search index is rebuilt from git."""
    if not template.exists():
        building = template.with_name(template.name + ".building")
        shutil.rmtree(building, ignore_errors=True)  # left by a build that failed
        web_store(building).close()
        building.rename(template)  # only a whole store is ever copied
    shutil.copytree(template, path, symlinks=True)
    return MemoryManager(path, agent="test-agent", model="test-model", via="web")


def client(mm: MemoryManager, **options: object) -> TestClient:
    """A TestClient on the dashboard of ``mm`` (``options`` go to ``WebOptions``)."""
    return TestClient(create_app(mm, WebOptions(**options)))  # type: ignore[arg-type]


def csrf_of(page: str) -> str:
    """The CSRF token in a rendered page's forms."""
    found = re.search(r'name="csrf(?:-token)?" (?:value|content)="([^"]+)"', page)
    assert found, "the page has no CSRF field"
    return found.group(1)
