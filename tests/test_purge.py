"""``gitmem purge``: content removed from every object of the store, everything else kept.

Each purge is checked with the real git: ``cat-file --batch-all-objects`` (no object holds
the content), ``log --all -p``, ``fsck --strict`` and a clean ``status``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.format.paths import memory_path, session_path
from gitmem.history.purge import remove_turn
from tests.conftest import git

PASSPORT = "X-PASSPORT-7731"
TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def all_objects(store: Path) -> bytes:
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=store,
        capture_output=True,
        check=True,
    )
    return done.stdout


def assert_gone(store: Path, *texts: str) -> None:
    objects = all_objects(store)
    log = git(store, "log", "--all", "-p", "--format=%H%n%B")
    for text in texts:
        assert text.encode() not in objects
        assert text not in log
    assert git(store, "fsck", "--strict", "--no-dangling") == ""
    assert git(store, "status", "--porcelain") == ""
    assert git(store, "reflog", "--all") == ""


def tree_of(store: Path, rev: str = "HEAD") -> dict[str, str]:
    out = git(store, "ls-tree", "-r", rev)
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines()}


def refs(store: Path) -> str:
    return git(store, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.fixture
def filled(store: Path) -> tuple[MemoryManager, dict[str, str]]:
    """A store with the passport in a turn, a fact and a tag; other turns, a session and a fact
    that must stay byte for byte."""
    mm = MemoryManager.init(store)
    ids = {"init": git(store, "rev-parse", "HEAD").strip()}
    ids["before"] = mm.save_interaction("s1", "first, harmless", "fine")
    mm.save_interaction("s1", f"my passport is {PASSPORT}", "noted")
    mm.save_interaction("s1", "what is the weather", "sunny")
    turns = [t.id for t in mm.load_memory("s1").interactions]
    ids.update(keep_turn=turns[0], secret_turn=turns[1], later_turn=turns[2])
    mm.save_interaction("s2", "other session", "ok")
    ids["fact"] = mm.remember(f"User passport {PASSPORT}").id
    ids["other_fact"] = mm.remember("User likes tea").id
    git(store, "tag", "-a", "v1", "-m", f"tagged {PASSPORT}")
    git(store, "branch", "side")
    git(store, "update-ref", "refs/gitmem/review/facts", "HEAD~1")  # a review branch
    with (store / "notes.md").open("w") as notes:
        notes.write(f"stashed {PASSPORT}\n")
    git(store, "stash", "push", "-u", "-q")
    mm.search("passport")  # the search index holds it too
    return mm, ids


def test_purge_text_removes_it_from_every_object(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    mm, ids = filled
    before = tree_of(store)
    report = mm.purge(text=PASSPORT)
    assert_gone(store, PASSPORT)
    after = tree_of(store)
    s1, memory = session_path("s1"), memory_path()
    assert {p for p in before if before[p] != after[p]} == {s1, memory}
    assert (store / s1).read_text().count("[purged]") == 1
    assert "User likes tea" in (store / memory).read_text()
    # commits before the text was written keep their ids
    assert git(store, "rev-parse", "HEAD~6").strip() == ids["before"]
    assert ids["init"] in git(store, "rev-list", "HEAD")
    assert report.commits and all(c.commit != ids["before"] for c in report.commits)
    # the tag and the other branch were rewritten too
    assert git(store, "rev-parse", "side").strip() == git(store, "rev-parse", "HEAD~1").strip()
    assert "[purged]" in git(store, "cat-file", "tag", "v1")
    review = git(store, "rev-parse", "refs/gitmem/review/facts")
    assert review == git(store, "rev-parse", "HEAD~2")
    assert git(store, "stash", "list") == "" and report.refs["refs/stash"][1] == ""
    # the purge commit names the kind and a salted hash, never the text
    message = git(store, "log", "-1", "--format=%B")
    assert "Gitmem-Op: purge" in message and "Gitmem-Purge-Kind: text" in message
    assert PASSPORT not in message and report.salted_hash in message
    assert not list((store / ".git" / "gitmem").glob("index*.sqlite"))
    assert mm.search("passport")[0].snippet.count("[purged]") == 1
    # the store keeps working on the new history
    mm.save_interaction("s1", "after the purge", "ok")
    assert git(store, "status", "--porcelain") == ""


def test_purge_record_maps_old_commits_to_new(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    mm, _ids = filled
    report = mm.purge(pattern=r"X-PASSPORT-\d+")
    assert_gone(store, PASSPORT)
    files = git(store, "ls-tree", "--name-only", "refs/gitmem/purges").split()
    assert files == [f"{report.id}.json"]
    record = json.loads(git(store, "show", f"refs/gitmem/purges:{report.id}.json"))
    assert record["kind"] == "pattern" and record["salt"]
    assert record["map"] == {c.commit: c.new for c in report.commits}
    assert PASSPORT not in json.dumps(record)


def test_purge_session_removes_its_files(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    mm, _ids = filled
    before = tree_of(store)
    mm.purge(session="s1")
    assert_gone(store, "first, harmless", "what is the weather", f"my passport is {PASSPORT}")
    after = tree_of(store)
    assert session_path("s1") not in after
    assert {p: s for p, s in before.items() if p != session_path("s1")} == after
    assert mm.load_memory("s2").interactions[0].messages[0].content == "other session"


def test_purge_turn_keeps_the_rest_of_the_file(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    mm, ids = filled
    path = store / session_path("s1")
    text = path.read_bytes()
    mm.purge(turn=f"s1#{ids['secret_turn']}")
    assert_gone(store, f"my passport is {PASSPORT}", f"{{#{ids['secret_turn']}}}")
    assert path.read_bytes() == remove_turn(text, ids["secret_turn"])
    turns = [t.id for t in mm.load_memory("s1").interactions]
    assert turns == [ids["keep_turn"], ids["later_turn"]]
    assert f"passport {PASSPORT}" in (store / memory_path()).read_text()  # a fact is not a turn


def test_remove_turn_is_byte_exact() -> None:
    text = b"# S\n\n## Conversation\n\n### t {#a}\n> x\n\n### t {#b}\n> y\n\n### t {#c}\n> z\n"
    assert (
        remove_turn(text, "b") == b"# S\n\n## Conversation\n\n### t {#a}\n> x\n\n### t {#c}\n> z\n"
    )
    assert (
        remove_turn(text, "c") == b"# S\n\n## Conversation\n\n### t {#a}\n> x\n\n### t {#b}\n> y\n"
    )
    assert remove_turn(text, "nope") == text


def test_purge_fact_removes_its_line(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    mm, ids = filled
    memory = store / memory_path()
    lines = memory.read_text().splitlines(keepends=True)
    mm.purge(fact=ids["fact"])
    assert_gone(store, f"User passport {PASSPORT}")
    assert memory.read_text() == "".join(line for line in lines if ids["fact"] not in line)
    assert [f.id for f in mm.facts()] == [ids["other_fact"]]


def test_purge_secrets_removes_what_scan_finds(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s1", "hello", "hi")
    (store / "notes.md").write_text(f"deploy token {TOKEN}\n")
    git(store, "add", "notes.md")
    git(store, "commit", "-qm", "notes")
    mm.save_interaction("s1", "more", "ok")
    assert mm.scan_history()
    report = mm.purge(secrets=True)
    assert report.kind == "secrets"
    assert_gone(store, TOKEN)
    assert (store / "notes.md").read_text() == "deploy token [purged]\n"
    assert mm.scan_history() == []


def test_dry_run_changes_nothing(filled: tuple[MemoryManager, dict[str, str]], store: Path) -> None:
    mm, _ids = filled
    before_refs, before_objects = refs(store), all_objects(store)
    report = mm.purge(text=PASSPORT, dry_run=True)
    assert report.dry_run and report.commits
    assert refs(store) == before_refs and all_objects(store) == before_objects
    assert PASSPORT not in report.model_dump_json()


def test_cli_purge_asks_and_masks(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    runner = CliRunner()
    no = runner.invoke(cli, ["--repo", str(store), "purge", "--text", PASSPORT], input="n\n")
    assert no.exit_code == 1 and PASSPORT not in no.output
    assert PASSPORT.encode() in all_objects(store)
    dry = runner.invoke(cli, ["--repo", str(store), "purge", "--text", PASSPORT, "--dry-run"])
    assert dry.exit_code == 0 and "would change" in dry.output and PASSPORT not in dry.output
    done = runner.invoke(
        cli, ["--repo", str(store), "--json", "purge", "--text", PASSPORT, "--yes"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["kind"] == "text" and PASSPORT not in done.output
    assert_gone(store, PASSPORT)


def test_purge_needs_exactly_one_target(store: Path) -> None:
    mm = MemoryManager.init(store)
    result = CliRunner().invoke(cli, ["--repo", str(store), "purge", "--yes"])
    assert result.exit_code != 0 and "exactly one" in result.output + result.stderr
    with pytest.raises(Exception, match="SESSION#TURN"):
        mm.purge(turn="no-hash")


SAVER = """
import sys
from gitmem import MemoryManager
mm = MemoryManager(sys.argv[1])
for n in range(int(sys.argv[2])):
    mm.save_interaction("loop", f"turn {n}", "ok")
    print(n, flush=True)
"""


def test_saves_during_a_purge_land_after_it(
    filled: tuple[MemoryManager, dict[str, str]], store: Path
) -> None:
    mm, _ids = filled
    saver = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(store), "30"], stdout=subprocess.PIPE, text=True
    )
    assert saver.stdout is not None
    saver.stdout.readline()  # the saver is running
    mm.purge(text=PASSPORT)
    saver.communicate(timeout=120)
    assert saver.returncode == 0
    turns = mm.load_memory("loop").interactions
    assert [t.messages[0].content for t in turns] == [f"turn {n}" for n in range(30)]
    assert PASSPORT.encode() not in git(store, "log", "--all", "-p").encode()
    assert git(store, "fsck", "--strict", "--no-dangling") == ""
    assert git(store, "status", "--porcelain") == ""


PURGER = """
import sys
from gitmem import MemoryManager
from tests.reliability.workers import arm
mm = MemoryManager(sys.argv[1])
arm(sys.argv[3])
mm.purge(text=sys.argv[2])
"""

# where a purge dies: before its new objects are written, between the rewritten history
# and its record, with the journal written but no ref moved; then with the refs moved but
# the working files not yet brought along
KILLED_BEFORE = (
    "ObjectDatabase.flush:before:1",
    "ObjectDatabase.flush:after:1",
    "ObjectDatabase.flush:after:2",
    "WriteLock.write_journal:after:1",
)
KILLED_AFTER = ("WorkTree.write:before:1", "WorkTree.write:after:1")


@pytest.mark.parametrize("kill_at", KILLED_BEFORE + KILLED_AFTER)
def test_a_killed_purge_leaves_the_store_before_or_after_it(tmp_path: Path, kill_at: str) -> None:
    store = tmp_path / "store"
    mm = MemoryManager.init(store)
    mm.save_interaction("s0", f"my passport is {PASSPORT}", "ok")
    for n in range(12):
        mm.save_interaction(f"s{n % 3}", f"turn {n}", "ok")
    git(store, "branch", "side")
    mm.close()
    before = refs(store)
    root = Path(__file__).resolve().parent.parent
    purger = subprocess.run(
        [sys.executable, "-c", PURGER, str(store), PASSPORT, kill_at],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
    )
    assert purger.returncode == -9, purger.stderr  # it died where it was told to
    survivor = MemoryManager(store)  # opening recovers what the purger left
    survivor.save_interaction("after", "a save after the kill", "ok")
    now = refs(store).replace(git(store, "rev-parse", "refs/heads/main").strip(), "")
    main_log = git(store, "log", "--format=%B", "main")
    if kill_at in KILLED_AFTER:
        assert "Gitmem-Op: purge" in main_log
        assert "refs/gitmem/purges" in now
        assert git(store, "rev-parse", "side").strip() not in before
        assert PASSPORT not in (store / session_path("s0")).read_text()
        git(store, "reflog", "expire", "--expire=now", "--all")
        git(store, "gc", "--prune=now", "--quiet")  # the clean-up the purge did not reach
        assert PASSPORT not in git(store, "log", "-p", "--all")
    else:
        assert "Gitmem-Op: purge" not in main_log
        assert PASSPORT in git(store, "log", "-p", "--all")
        assert refs(store).count("\n") == before.count("\n")
        assert git(store, "rev-parse", "side").strip() in before
    assert git(store, "fsck", "--strict", "--no-dangling") == ""
    assert git(store, "status", "--porcelain") == ""
    assert len(survivor.load_memory("s0").interactions) == 5
    survivor.close()


@pytest.mark.parametrize("target", ["turn", "session"])
def test_purge_takes_the_summaries_and_facts_that_retell_it(store: Path, target: str) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s1", "I live in Paris", "nice")
    mm.save_interaction("s1", "My cat is named Tomasz", "cute")
    mm.save_interaction("s2", "I drink green tea", "ok")
    mm.summarize("s1")
    mm.consolidate()
    memory = (store / memory_path()).read_text()
    assert "Tomasz" in memory and "green tea" in memory
    assert "Tomasz" in (store / session_path("s1")).read_text().split("## Summary")[1]
    cat_turn = [t.id for t in mm.load_memory("s1").interactions][1]
    if target == "turn":
        mm.purge(turn=f"s1#{cat_turn}")
        assert [t.messages[0].content for t in mm.load_memory("s1").interactions] == [
            "I live in Paris"
        ]
        assert "## Summary" not in (store / session_path("s1")).read_text()
    else:
        mm.purge(session="s1")
        assert "Paris" not in (store / memory_path()).read_text()
    assert_gone(store, "Tomasz")
    assert "green tea" in (store / memory_path()).read_text()
