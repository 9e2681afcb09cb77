"""Namespaces through the CLI: Alice and Bob share one store, each in a namespace, and
neither's search, context, facts or list shows the other's (checked with the real git)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from tests.conftest import git

ALICE = "My Postgres database runs on port 5432 with two replicas"
BOB = "Bob's Postgres database crashed after the upgrade"
ALICE_FACT = "Alice keeps her Postgres backups in Frankfurt"
BOB_FACT = "Bob's Postgres runs on port 5433"


def run(store: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(cli, ["--repo", str(store), *args], env=env)
    assert result.exit_code == code, (result.output, result.stderr)
    return result.output if code == 0 else result.stderr + result.output


@pytest.fixture
def shared(store: Path) -> Path:
    """One store: Alice's session and fact in namespace alice, Bob's in bob, one more
    session in the default namespace; written through the CLI."""
    run(store, "init")
    run(store, "--namespace", "alice", "save", "support-alice", "--user", ALICE)
    run(store, "--namespace", "alice", "facts", "add", ALICE_FACT)
    run(store, "save", "support-bob", "--user", BOB, env={"GITMEM_NAMESPACE": "bob"})
    run(store, "facts", "add", BOB_FACT, env={"GITMEM_NAMESPACE": "bob"})
    run(store, "save", "lobby", "--user", "Postgres questions go to the support channel")
    return store


def test_writes_land_in_the_namespace_folders(shared: Path) -> None:
    files = git(shared, "ls-files").split()
    assert any(f.startswith("namespaces/alice/sessions/") for f in files)
    assert "namespaces/alice/memory/MEMORY.md" in files
    assert any(f.startswith("namespaces/bob/sessions/") for f in files)
    assert "namespaces/bob/memory/MEMORY.md" in files
    assert "memory/MEMORY.md" not in files  # neither fact went to the default file
    assert MemoryManager(shared, namespace="bob").session_ids() == ["support-bob"]


@pytest.mark.parametrize("how", ["option", "env"])
def test_alice_never_sees_bob(shared: Path, how: str) -> None:
    def alice(*args: str, code: int = 0) -> str:
        if how == "option":
            return run(shared, "--namespace", "alice", *args, code=code)
        return run(shared, *args, code=code, env={"GITMEM_NAMESPACE": "alice"})

    for kind in ("session", "fact", "any"):
        found = alice("search", "Postgres database port", "--kind", kind)
        assert "Bob" not in found and "support-bob" not in found and "lobby" not in found
    hits = json.loads(alice("search", "Postgres", "--kind", "any", "--json"))["hits"]
    assert {h["session_id"] for h in hits if h["kind"] != "fact"} == {"support-alice"}
    assert [h["snippet"] for h in hits if h["kind"] == "fact"] == [ALICE_FACT]
    context = alice("context", "support-alice", "Postgres port backups", "--json")
    assert ALICE_FACT in context and "Bob" not in context and "5433" not in context
    facts = alice("facts", "list")
    assert ALICE_FACT in facts and BOB_FACT not in facts
    listed = json.loads(alice("list", "--json"))
    assert [r["id"] for r in listed] == ["support-alice"]
    assert BOB not in alice("show", "support-bob", code=1)


def test_the_default_namespace_sees_neither(shared: Path) -> None:
    found = run(shared, "search", "Postgres", "--kind", "any")
    assert "lobby" in found and "Bob" not in found and "Alice" not in found
    facts = run(shared, "facts", "list")
    assert ALICE_FACT not in facts and BOB_FACT not in facts


def test_namespaces_lists_counts(shared: Path) -> None:
    rows = json.loads(run(shared, "namespaces", "--json"))
    assert rows == [
        {"namespace": None, "sessions": 1, "turns": 1, "facts": 0},
        {"namespace": "alice", "sessions": 1, "turns": 1, "facts": 1},
        {"namespace": "bob", "sessions": 1, "turns": 1, "facts": 1},
    ]
    text = run(shared, "namespaces")
    assert "alice\t1 sessions\t1 turns\t1 facts" in text


def test_all_namespaces_reads_across_them_for_an_operator(shared: Path) -> None:
    rows = json.loads(run(shared, "list", "--all-namespaces", "--json"))
    assert {(r["namespace"], r["id"]) for r in rows} == {
        (None, "lobby"),
        ("alice", "support-alice"),
        ("bob", "support-bob"),
    }
    hits = json.loads(run(shared, "search", "Postgres", "--all-namespaces", "--json"))["hits"]
    assert {(h["namespace"], h["session_id"]) for h in hits} == {
        (None, "lobby"),
        ("alice", "support-alice"),
        ("bob", "support-bob"),
    }
    assert "[bob]" in run(shared, "search", "Postgres", "--all-namespaces")
    # an operator's flag: not inside one namespace, and no write command takes it
    refused = run(shared, "--namespace", "alice", "list", "--all-namespaces", code=2)
    assert "drop --namespace" in refused
    run(shared, "save", "x", "--user", "hi", "--all-namespaces", code=2)
    run(shared, "facts", "add", "a fact", "--all-namespaces", code=2)


def test_import_lands_in_the_namespace(shared: Path, tmp_path: Path) -> None:
    source = tmp_path / "talk.json"
    source.write_text(
        json.dumps([{"role": "user", "content": "Alice imported her Postgres notes"}]),
        encoding="utf-8",
    )
    run(shared, "--namespace", "alice", "--json", "import", "chat", str(source))
    assert MemoryManager(shared, namespace="alice").session_ids() == [
        "chat:talk-62952c22",
        "support-alice",
    ]
    assert "chat:talk-62952c22" not in MemoryManager(shared).session_ids()
    assert "chat:talk-62952c22" not in MemoryManager(shared, namespace="bob").session_ids()


def test_check_reports_files_outside_every_namespace(shared: Path) -> None:
    assert "parse cleanly" in run(shared, "check")
    stray = shared / "namespaces" / "alice" / "notes.md"
    stray.write_text("# notes\n", encoding="utf-8")
    bad = shared / "namespaces" / "bob" / "sessions" / "stray.md"
    bad.write_text("# nothing\n", encoding="utf-8")
    found = json.loads(run(shared, "check", "--json", code=1))
    paths = {p["path"] for p in found}
    assert {"namespaces/alice/notes.md", "namespaces/bob/sessions/stray.md"} <= paths
    git(shared, "add", "-A")
    git(shared, "commit", "-q", "--no-verify", "-m", "hand edit")
    stray.unlink()
    bad.unlink()  # deleted in the tree but still committed: still reported
    assert {p["path"] for p in json.loads(run(shared, "check", "--json", code=1))} >= paths


def test_links_and_consolidation_stay_in_the_namespace(shared: Path) -> None:
    alice = ("--namespace", "alice")
    run(
        shared,
        *alice,
        "save",
        "support-alice",
        "--user",
        "Same as [[support-bob]]: I live in Berlin.",
    )
    run(shared, "--namespace", "bob", "save", "support-bob", "--user", "I live in Oslo.")
    linked = json.loads(run(shared, *alice, "search", "Berlin", "--links", "--json"))["hits"]
    assert {h["session_id"] for h in linked} == {"support-alice"}
    graph = MemoryManager(shared, namespace="alice").link_graph()
    assert "support-bob" in graph.missing  # a name in Alice's turn, no session of hers
    bob_before = git(shared, "show", "HEAD:namespaces/bob/memory/MEMORY.md")
    done = json.loads(run(shared, *alice, "facts", "consolidate", "--json"))
    assert done["changes"] and "Oslo" not in json.dumps(done)
    assert all(s.startswith("support-alice#") for c in done["changes"] for s in c["sources"])
    assert git(shared, "show", "HEAD:namespaces/bob/memory/MEMORY.md") == bob_before
    assert "Oslo" not in run(shared, *alice, "facts", "list")


def test_the_store_log_shows_the_namespace_own_commits(shared: Path) -> None:
    alice = run(shared, "--namespace", "alice", "log")
    assert "support-alice" in alice and "support-bob" not in alice and "lobby" not in alice
    lobby = run(shared, "log")
    assert "lobby" in lobby and "support-alice" not in lobby and "support-bob" not in lobby


def test_a_namespace_cannot_revert_or_read_another_namespace_commit(shared: Path) -> None:
    bob_commit = git(shared, "log", "-1", "--format=%H", "--", "namespaces/bob/sessions").strip()
    alice = ("--namespace", "alice")
    refused = run(shared, *alice, "revert", bob_commit, code=1)
    assert "nothing in this namespace" in refused
    assert (
        BOB
        in MemoryManager(shared, namespace="bob")
        .load_memory("support-bob")
        .interactions[0]
        .messages[0]
        .content
    )
    shown = run(shared, *alice, "diff", "--all", "--json", bob_commit + "~1", bob_commit)
    assert "bob" not in shown and BOB not in shown
