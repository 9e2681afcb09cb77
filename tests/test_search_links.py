"""Wiki links: ``[[session-id]]`` in a message or a summary is a link
like the ``Links`` metadata line; the index keeps them (the link graph reads no text);
``include_links`` follows links both ways; ``--meta links=[[x]]`` is accepted.

Real stores on disk, the real CLI through click's runner, the index's real SQLite file.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ValidationError
from gitmem.mcp import tools
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.search.catchup import index_path
from gitmem.text import link_targets, wiki_links
from tests.web_helpers import web_store

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _session(
    sid: str, turns: list[str], *, summary: str | None = None, links: list[str] | None = None
) -> Session:
    return Session(
        id=sid,
        created=T0,
        last_active=T0,
        participants=["User"],
        links=links or [],
        interactions=[
            Interaction(
                id=f"t{n}",
                timestamp=T0 + timedelta(minutes=n),
                messages=[Message(speaker="User", content=text)],
            )
            for n, text in enumerate(turns)
        ],
        summary=Summary(text=summary, generated=T0) if summary else None,
    )


def _run(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--repo", str(store), *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


# --- one rule for a link in text ----------------------------------------------------------


def test_the_rule_skips_code_and_normalises_metadata_values() -> None:
    text = (
        "see [[a]] and [[ b ]], not `[[code]]` nor ``[[x]] `y` ``\n"
        "```\n[[fenced]]\n```\n~~~python\n[[tilde]]\n~~~\nthen [[a]] again, [[c]] [[ ]]"
    )
    assert wiki_links(text) == ["a", "b", "c"]
    assert wiki_links("an open fence\n```\n[[inside]]") == []
    assert link_targets("[[a]], [[b]]") == link_targets("a, b") == ["a", "b"]
    assert link_targets(["[[x]]", "y", "x"]) == ["x", "y"]
    assert link_targets("[[a]][[b]]") == ["a]][[b"]  # left for the model to refuse


# --- the graph ----------------------------------------------------------------------------


def test_a_link_in_a_message_or_a_summary_is_in_the_graph(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.put_session(_session("a", ["see [[b]] about it"]))
    mm.put_session(_session("b", ["plain"], summary="Follows up [[c]]."))
    mm.put_session(_session("c", ["code: `[[a]]` and\n```\n[[b]]\n```"]))
    mm.put_session(_session("d", ["nothing"], links=["a"]))
    graph = mm.link_graph()
    assert graph.links == {"a": ["b"], "b": ["c"], "d": ["a"]}
    assert graph.missing == []


def test_the_graph_comes_from_the_index_column_not_the_texts(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("a", "see [[b]] and [[ghost]]", "ok")
    mm.save_interaction("b", "back to [[a]]", "ok")
    before = mm.link_graph()
    assert before.links == {"a": ["b", "ghost"], "b": ["a"]}
    db = sqlite3.connect(index_path(mm.repository))
    column = dict(db.execute("SELECT session_id, text_links FROM sessions").fetchall())
    assert {sid: [v for v in value.split("\x1f") if v] for sid, value in column.items()} == {
        "a": ["b", "ghost"],
        "b": ["a"],
    }
    # with every text gone from the index, the graph is the same: it reads none
    db.execute("UPDATE docs SET text = ''")
    db.commit()
    db.close()
    mm.close_index()
    assert mm.link_graph() == before


def _graph_from_files(mm: MemoryManager) -> dict[str, list[str]]:
    """The links as the old scan found them: metadata, and [[id]] in every turn (the
    archive's too) and summary, read from the files."""
    old_rule = re.compile(r"\[\[([^\[\]\n]{1,240})\]\]")
    edges: dict[str, set[str]] = {}
    for sid in [s.id for s in mm.list_sessions()]:
        session = mm.load_memory(sid, include_archive=True)
        assert session is not None
        texts = [m.content for i in session.interactions for m in i.messages]
        texts += [session.summary.text] if session.summary else []
        found = set(session.links) | {t.strip() for x in texts for t in old_rule.findall(x)}
        if found - {sid, ""}:
            edges[sid] = found - {sid, ""}
    return {sid: sorted(targets) for sid, targets in sorted(edges.items())}


def test_the_web_store_gives_the_same_graph_as_before(tmp_path: Path) -> None:
    mm = web_store(tmp_path / "memory")
    mm.save_interaction("notes", "see [[python-books]] and [[nowhere]]", "ok")
    graph = mm.link_graph()
    assert graph.links == _graph_from_files(mm)
    assert graph.links["python-books"] == ["travel-plans"] and graph.missing == ["nowhere"]


# --- following links ----------------------------------------------------------------------


def _linked_store(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store)
    mm.put_session(_session("main", ["the storage layer plan, see [[design]]"], links=["ghost"]))
    mm.put_session(
        _session("design", ["we talked a lot"], summary="SQLite holds the derived index.")
    )
    mm.put_session(
        _session("notes", ["lunch was good", "the storage layer is slow", "more on [[main]] later"])
    )
    mm.put_session(_session("cooking", ["pasta tonight, unlike [[main]]"]))
    return mm


def test_include_links_follows_links_out_and_in(store: Path) -> None:
    mm = _linked_store(store)
    hits = mm.search("storage layer", include_links=True, session="main", explain=True)
    assert [(h.session_id, h.kind) for h in hits] == [
        ("main", "interaction"),
        ("design", "summary"),
        ("notes", "interaction"),
    ]
    ranked, out, back = hits
    assert "link" not in ranked.components
    # out: main's text links to design, which has a summary
    assert out.components["link_out"] == 1.0 and "link_in" not in out.components
    assert out.snippet == "SQLite holds the derived index."
    # in: notes links to main and has no summary: its best turn for the query comes
    assert back.components["link_in"] == 1.0 and back.interaction_id == "t1"
    assert back.score < ranked.score
    one = mm.search("storage layer", k=1, include_links=True, session="main", explain=True)
    assert [h.session_id for h in one] == ["main", "design"]
    assert one.explanation is not None
    assert [e["pulled"] for e in one.explanation["links"]] == [
        "no such session",
        "summary",
        "over the limit",
        "over the limit",
    ]
    assert hits.explanation is not None
    assert hits.explanation["links"] == [
        {"from": "main", "to": "ghost", "direction": "out", "pulled": "no such session"},
        {"from": "main", "to": "design", "direction": "out", "pulled": "summary"},
        {"from": "notes", "to": "main", "direction": "in", "pulled": "turn"},
        {"from": "cooking", "to": "main", "direction": "in", "pulled": "nothing matched"},
    ]


def test_a_link_in_a_summary_is_followed(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.put_session(_session("main", ["the storage layer"], summary="Continues [[design]]."))
    mm.put_session(_session("design", ["storage layer choices", "other words"]))
    hits = mm.search("storage layer", include_links=True, session="main")
    linked = [h for h in hits if "link" in h.components]
    assert [(h.session_id, h.interaction_id) for h in linked] == [("design", "t0")]
    assert linked[0].components["link_out"] == 1.0


def test_linked_hits_never_repeat_a_hit(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.put_session(_session("x", ["garden roses, see [[y]]"]))
    mm.put_session(_session("y", ["garden roses again, back to [[x]]"]))
    hits = mm.search("garden roses", include_links=True, explain=True)
    assert sorted(h.session_id for h in hits) == ["x", "y"]
    assert hits.explanation is not None
    pulled = {(e["from"], e["to"]): e["pulled"] for e in hits.explanation["links"]}
    assert pulled == {("x", "y"): "already a hit", ("y", "x"): "already a hit"}


def test_cli_search_and_context_show_the_links(store: Path) -> None:
    _linked_store(store).close()
    out = _run(store, "search", "storage layer", "--session", "main", "--links", "--explain")
    assert "design · summary · 2026-03-01 · linked from a hit" in out
    assert "notes · t1 · 2026-03-01 · User · links to a hit" in out
    assert "  in  notes -> main: turn" in out and "  out main -> design: summary" in out
    context = _run(store, "context", "main", "storage layer", "--links", "--explain")
    assert "design#summary" in context and "SQLite holds the derived index." in context
    assert "notes#t1" in context


def test_retrieve_context_and_mcp_search_follow_links(store: Path) -> None:
    mm = _linked_store(store)
    plain = mm.retrieve_context("cooking", "storage layer")
    linked = mm.retrieve_context("cooking", "storage layer", include_links=True, explain=True)
    assert "SQLite holds the derived index." not in str(plain)
    assert "SQLite holds the derived index." in str(linked)
    assert linked.explanation is not None and linked.explanation["links"]
    answer = tools.search(mm, "storage layer", 10, None, None, None, ["main"], None, None, True)
    rows = answer.data["hits"]
    assert [(r["session"], r["link"]) for r in rows] == [
        ("main", None),
        ("design", "out"),
        ("notes", "in"),
    ]
    assert "(link in)" in answer.text


# --- links in metadata --------------------------------------------------------------------


def test_meta_links_in_the_wiki_form_are_stored_as_ids(store: Path) -> None:
    _run(store, "init")
    _run(store, "save", "s1", "--user", "hi", "--assistant", "yo", "--meta", "links=[[x]]")
    _run(store, "save", "s1", "--user", "hi", "--assistant", "yo", "--meta", "links=[[a]], [[b]]")
    _run(store, "save", "s1", "--user", "hi", "--assistant", "yo", "--meta", "links=c, x")
    mm = MemoryManager(store)
    mm.save_interaction("s2", "hi", "yo", metadata={"links": ["[[s1]]", "d"]})
    session = mm.load_memory("s1")
    assert session is not None and session.links == ["x", "a", "b", "c"]
    assert "- **Links**: [[x]], [[a]], [[b]], [[c]]\n" in _run(store, "show", "s1", "--raw")
    assert mm.link_graph().links == {"s1": ["a", "b", "c", "x"], "s2": ["d", "s1"]}


def test_invalid_links_are_refused_naming_the_field_and_value(store: Path) -> None:
    _run(store, "init")
    out = _run(
        store,
        "save",
        "s1",
        "--user",
        "hi",
        "--assistant",
        "yo",
        "--meta",
        "links=[[a]][[b]]",
        code=1,
    )
    assert "links" in out and "'a]][[b' is not a session id: write x or [[x]]" in out
    mm = MemoryManager(store)
    with pytest.raises(ValidationError, match=r"links.*'\[\[half' is not a session id"):
        mm.save_interaction("s1", "hi", "yo", metadata={"links": "[[half"})
    assert mm.load_memory("s1") is None  # nothing was written
