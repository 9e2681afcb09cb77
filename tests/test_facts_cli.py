"""``gitmem facts`` end to end through the real CLI, and the facts API's bad-input edges,
checked with the real git binary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import FactNotFound, ParseError, ValidationError
from tests.conftest import git

KEY = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7"


def run(store: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--repo", str(store), *args], catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output if code == 0 else result.stderr + result.output


def trailer(store: Path, key: str, rev: str = "HEAD") -> str:
    return git(store, "log", "-1", f"--format=%(trailers:key={key},valueonly)", rev).strip()


@pytest.fixture
def made(store: Path) -> tuple[Path, str]:
    """A store with one session turn (its id returned) to cite as a source."""
    with MemoryManager(store, init=True) as mm:
        mm.save_interaction("chat-1", "I live in Berlin now", "Noted.")
        session = mm.load_memory("chat-1")
        assert session is not None
        return store, session.interactions[0].id


def test_add_list_show_edit_forget(made: tuple[Path, str]) -> None:
    store, turn = made
    fid = run(
        store,
        "--agent",
        "bot",
        "--model",
        "gpt-x",
        "facts",
        "add",
        "Lives in Berlin.",
        "--section",
        "User",
        "--source",
        f"chat-1#{turn}",
        "--tag",
        "home",
    ).strip()
    hand = run(store, "facts", "add", "Likes green tea", "--confidence", "0.8").strip()
    text = (store / "memory" / "MEMORY.md").read_text()
    assert f"- Lives in Berlin. {{#{fid} ← chat-1#{turn} · #home}}" in text
    assert f"- Likes green tea {{#{hand} ← by hand · confidence 0.8}}" in text
    assert trailer(store, "Gitmem-Op") == "remember"
    assert trailer(store, "Gitmem-Fact") == hand

    listed = run(store, "facts", "list")
    assert listed == (
        f"## User\n- Lives in Berlin.  [{fid} ← chat-1#{turn} · #home]\n\n"
        f"## Notes\n- Likes green tea  [{hand} ← by hand]\n"
    )
    data = json.loads(run(store, "facts", "list", "--json"))
    assert [d["id"] for d in data] == [fid, hand]
    assert data[0]["sources"] == [f"chat-1#{turn}"] and data[0]["tags"] == ["home"]
    assert data[1]["by_hand"] is True and data[1]["confidence"] == 0.8
    assert set(data[0]) >= {
        "id",
        "text",
        "section",
        "sources",
        "by",
        "valid_from",
        "valid_until",
        "confidence",
        "tags",
        "replaced_by",
        "by_hand",
    }
    assert json.loads(run(store, "--json", "facts", "list", "--section", "Notes"))[0]["id"] == hand
    assert [d["id"] for d in json.loads(run(store, "facts", "list", "-q", "berlin", "--json"))] == [
        fid
    ]
    assert json.loads(run(store, "facts", "list", "--tag", "home", "--json"))[0]["id"] == fid
    assert len(json.loads(run(store, "facts", "list", "--limit", "1", "--json"))) == 1
    assert run(store, "facts", "list", "--tag", "nothing") == "no facts match\n"

    assert (
        run(
            store,
            "facts",
            "edit",
            fid,
            "--text",
            "Lives in Berlin, Kreuzberg.",
            "--until",
            "2030-01-01",
        ).strip()
        == fid
    )
    assert trailer(store, "Gitmem-Op") == "update-fact"
    shown = run(store, "facts", "show", fid)
    assert shown.startswith(
        f"{fid}  Lives in Berlin, Kreuzberg.\n  section:     User\n"
        f"  source:      chat-1#{turn}\n  valid:       from - until 2030-01-01"
    )
    assert "update-fact" in shown and "bot (gpt-x)  remember" in shown
    doc = json.loads(run(store, "facts", "show", fid, "--json"))
    assert doc["fact"]["text"] == "Lives in Berlin, Kreuzberg."
    assert [h["op"] for h in doc["history"]] == ["update-fact", "remember"]
    assert doc["history"][1]["agent"] == "bot" and doc["history"][1]["model"] == "gpt-x"
    # the other fact's commit did not touch this one
    assert all(h["commit"] != git(store, "rev-parse", "HEAD~1").strip() for h in doc["history"])

    sha = run(store, "facts", "forget", hand, "--reason", "was a joke").strip()
    assert sha == git(store, "rev-parse", "HEAD").strip()
    assert trailer(store, "Gitmem-Reason") == "was a joke"
    assert hand not in (store / "memory" / "MEMORY.md").read_text()
    err = run(store, "facts", "show", hand, code=1)
    assert f"no fact {hand!r}" in err and f"forgotten in commit {sha[:12]}" in err
    # ... and its history still has it
    assert "Likes green tea" in run(store, "facts", "show", hand, "--at", f"{sha[:12]}~1")
    git(store, "fsck", "--strict")
    assert git(store, "status", "--porcelain") == ""


def test_supersede_list_all_and_time_travel(made: tuple[Path, str]) -> None:
    store, _ = made
    old = run(store, "facts", "add", "Lives in Berlin.", "--section", "User").strip()
    before = git(store, "rev-parse", "HEAD").strip()
    new = run(
        store,
        "facts",
        "supersede",
        old,
        "Moved to Lisbon.",
        "--reason",
        "moved",
        "--when",
        "2026-03-01",
        "--source",
        "chat-2",
    ).strip()
    assert trailer(store, "Gitmem-Op") == "supersede"
    assert [d["id"] for d in json.loads(run(store, "facts", "list", "--json"))] == [new]
    every = json.loads(run(store, "facts", "list", "--all", "--json"))
    assert [(d["id"], d["replaced_by"], d["valid_until"]) for d in every] == [
        (old, new, "2026-03-01"),
        (new, None, None),
    ]
    assert f"until 2026-03-01 · replaced by {new}]" in run(store, "facts", "list", "--all")
    doc = json.loads(run(store, "facts", "supersede", new, "Moved to Porto.", "--json"))
    assert doc["replaced"] == new and doc["fact"]["text"] == "Moved to Porto."
    # --at a revision: the file as it was then
    assert [d["id"] for d in json.loads(run(store, "facts", "list", "--at", before, "--json"))] == [
        old
    ]
    assert [
        d["id"] for d in json.loads(run(store, "facts", "list", "--at", "HEAD~1", "--json"))
    ] == [new]
    # --at a date: the last commit before it (none before the store existed)
    assert "no commit at or before" in run(store, "facts", "list", "--at", "2000-01-01", code=1)
    assert {
        d["id"]
        for d in json.loads(run(store, "facts", "list", "--at", "2999-01-01", "--json", "--all"))
    } == {old, new, doc["fact"]["id"]}
    assert (
        json.loads(run(store, "facts", "show", old, "--at", before, "--json"))["fact"][
            "replaced_by"
        ]
        is None
    )
    run(store, "facts", "list", "--at", "2024-99-01", code=2)  # a date that is none: usage


def test_blame_names_commit_agent_and_model(made: tuple[Path, str]) -> None:
    store, _ = made
    a = run(
        store, "--agent", "alice", "--model", "m-1", "facts", "add", "A", "--source", "chat-1"
    ).strip()
    first = git(store, "rev-parse", "HEAD").strip()
    b = run(store, "--agent", "bob", "facts", "add", "B").strip()
    run(store, "--agent", "carol", "--model", "m-2", "facts", "edit", b, "--tag", "x")
    last = git(store, "rev-parse", "HEAD").strip()
    rows = json.loads(run(store, "facts", "blame", "--json"))
    assert [(r["id"], r["commit"], r["agent"], r["model"], r["op"]) for r in rows] == [
        (a, first, "alice", "m-1", "remember"),
        (b, last, "carol", "m-2", "update-fact"),
    ]
    assert all(r["text"] and r["when"] for r in rows)
    lines = run(store, "facts", "blame").splitlines()
    assert lines[0].startswith(f"{a}  {first[:12]}  ") and "alice (m-1)  remember  A" in lines[0]
    assert "carol (m-2)  update-fact  B" in lines[1]
    old = json.loads(run(store, "facts", "blame", "--at", first, "--json"))
    assert [r["id"] for r in old] == [a]


def test_errors_exit_1_with_the_message(made: tuple[Path, str]) -> None:
    store, _ = made
    head = git(store, "rev-parse", "HEAD").strip()
    for args in (
        ("show", "nope"),
        ("forget", "nope"),
        ("edit", "nope", "--text", "x"),
        ("supersede", "nope", "new"),
    ):
        err = run(store, "facts", *args, code=1)
        assert "no fact 'nope' in memory/MEMORY.md" in err, err
    doc = json.loads(run(store, "--json", "facts", "show", "nope", code=1))
    assert doc["kind"] == "FactNotFound"
    assert "over the 8,192-byte limit" in run(store, "facts", "add", "x" * 9000, code=1)
    run(store, "facts", "edit", "anything", code=2)  # nothing to change: usage
    run(store, "facts", "add", "x", "--confidence", "2", code=2)
    run(store, "facts", "add", "x", "--until", "someday", code=2)
    assert git(store, "rev-parse", "HEAD").strip() == head  # nothing was written


def test_a_broken_file_is_never_written_over(made: tuple[Path, str]) -> None:
    store, _ = made
    fid = run(store, "facts", "add", "Likes tea").strip()
    path = store / "memory" / "MEMORY.md"
    broken = path.read_text().replace(f"{{#{fid} ← by hand}}", f"{{#{fid} · colour blue}}")
    path.write_text(broken)
    head = git(store, "rev-parse", "HEAD").strip()
    for args in (
        ("add", "Likes coffee"),
        ("forget", fid),
        ("edit", fid, "--text", "x"),
        ("supersede", fid, "y"),
    ):
        err = run(store, "facts", *args, code=1)
        assert "memory/MEMORY.md:5: unknown fact attribute 'colour blue'" in err, err
    assert path.read_text() == broken
    assert git(store, "rev-parse", "HEAD").strip() == head
    assert git(store, "status", "--porcelain") == " M memory/MEMORY.md\n"


# --- the API's bad input -------------------------------------------------------------------


def test_a_megabyte_fact_is_refused_and_nothing_committed(store: Path) -> None:
    with MemoryManager(store, init=True) as mm:
        head = mm.head()
        with pytest.raises(ValidationError, match=r"1,048,576 bytes, over the 8,192-byte limit"):
            mm.remember("x" * 2**20)
        assert mm.head() == head
        fid = mm.remember("short").id
        with pytest.raises(ValidationError, match="over the"):
            mm.update_fact(fid, "y" * 2**20)
        assert mm.fact(fid).text == "short"
    assert git(store, "status", "--porcelain") == ""


def test_a_secret_in_a_fact_is_redacted(store: Path) -> None:
    with MemoryManager(store, init=True) as mm:
        fact = mm.remember(f"The deploy key is {KEY}", tags=[KEY])
        assert KEY not in fact.text and "[REDACTED:openai-key]" in fact.text
        assert KEY not in "".join(fact.tags)
    assert KEY not in (store / "memory" / "MEMORY.md").read_text()
    assert trailer(store, "Gitmem-Redacted") == "openai-key=2"
    assert KEY not in git(store, "log", "-p", "--all")


def test_a_secret_pasted_by_hand_is_redacted_when_recorded(store: Path) -> None:
    with MemoryManager(store, init=True) as mm:
        mm.remember("Likes tea")
        path = store / "memory" / "MEMORY.md"
        path.write_text(path.read_text() + f"- Token {KEY}\n")
        mm.remember("Likes coffee")
        assert "Record hand edit" in git(store, "log", "-1", "--format=%s", "HEAD~1")
        assert trailer(store, "Gitmem-Redacted", "HEAD~1") == "openai-key=1"
        assert [f.text for f in mm.facts()] == [
            "Likes tea",
            "Token [REDACTED:openai-key]",
            "Likes coffee",
        ]
    assert KEY not in git(store, "log", "-p", "--all")


def test_unknown_ids(store: Path) -> None:
    with MemoryManager(store, init=True) as mm:
        fid = mm.remember("Likes tea").id
        head = mm.head()
        for call in (
            lambda: mm.fact("nope"),
            lambda: mm.forget("nope"),
            lambda: mm.update_fact("nope", "x"),
            lambda: mm.supersede("nope", "x"),
            lambda: mm.at(head).fact("nope"),
        ):
            with pytest.raises(FactNotFound, match="no fact 'nope'"):
                call()
        with pytest.raises(ValidationError, match="cannot supersede itself"):
            mm.supersede(fid, fid)
        with pytest.raises(ValidationError, match="is taken"):
            mm.remember("Other", fact_id=fid)
        with pytest.raises(ValidationError, match="not an ISO date"):
            mm.remember("Other", valid_until="someday")
        with pytest.raises(ValidationError, match="not an ISO date"):
            mm.update_fact(fid, valid_from="soon")
        assert mm.head() == head


def test_a_hand_added_bullet_is_committed_before_the_next_remember(store: Path) -> None:
    with MemoryManager(store, init=True, agent="bot") as mm:
        mm.remember("Likes tea", section="User", source="chat-1")
        path = store / "memory" / "MEMORY.md"
        path.write_text(path.read_text() + "- Has a cat\n  called Miso.\n")
        mm.remember("Likes coffee", section="User", source="chat-2")
        log = git(store, "log", "-3", "--format=%s|%an|%(trailers:key=Gitmem-Op,valueonly)")
        rows = [line for line in log.splitlines() if line.strip()]
        assert rows[0] == "Remember: Likes coffee|bot|remember"
        assert rows[1].startswith("Record hand edit of memory/MEMORY.md|Test Person|edit")
        cat = next(f for f in mm.facts() if f.text == "Has a cat called Miso.")
        assert cat.by_hand and cat.section == "User"
        blamed = {b.fact.id: b for b in mm.fact_blame()}
        assert blamed[cat.id].op == "edit" and blamed[cat.id].author == "Test Person"
    assert git(store, "status", "--porcelain") == ""


def test_a_hand_broken_file_is_never_overwritten(store: Path) -> None:
    with MemoryManager(store, init=True) as mm:
        fid = mm.remember("Likes tea").id
        path = store / "memory" / "MEMORY.md"
        broken = path.read_text() + f"- Likes coffee {{#{fid}}}\n"
        path.write_text(broken)
        head = mm.head()
        for call in (
            lambda: mm.remember("x"),
            lambda: mm.forget(fid),
            lambda: mm.update_fact(fid, "y"),
            lambda: mm.supersede(fid, "z"),
        ):
            with pytest.raises(ParseError) as caught:
                call()
            assert "memory/MEMORY.md:6: fact id" in str(caught.value)
            assert "used twice (first at line 5)" in str(caught.value)
        assert mm.head() == head
    assert path.read_text() == broken
    assert git(store, "status", "--porcelain") == " M memory/MEMORY.md\n"
