"""The fan-out layout (sessions/<xx>/<id>.md), flat stores, and `gitmem migrate`: the move in
one commit, history across it, a migration killed half-way, and clones in two layouts."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryManager
from gitmem.cli import cli
from gitmem.errors import ConfigError, ConflictError, ValidationError
from gitmem.format.paths import (
    LAYOUT_FILE,
    archive_path,
    fanout_folder,
    id_from_archive_path,
    id_from_path,
    session_path,
)
from gitmem.summary.triggers import SummaryConfig
from gitmem.sync.hooks import is_memory_file, validate_memory_file
from tests.conftest import git
from tests.reliability.conftest import ROOT, fsck_problems

T0 = datetime(2024, 4, 15, 9, 0, tzinfo=timezone.utc)

FLAT_ATTRIBUTES = (
    b"sessions/*.md merge=gitmem text eol=lf\narchive/*.md merge=gitmem text "
    b"eol=lf\nnamespaces/**/*.md merge=gitmem text eol=lf\n"
)


def flat_store(path: Path, **options: object) -> MemoryManager:
    """A store as gitmem made them before fan-out: no .gitmem-layout, flat attributes."""
    mm = MemoryManager.init(path, **options)  # type: ignore[arg-type]
    with mm.repository.transaction() as txn:
        txn.delete(LAYOUT_FILE)
        txn.write(".gitattributes", FLAT_ATTRIBUTES)
        txn.commit("Store made by gitmem 0.1")
    return mm


def files(store: Path) -> list[str]:
    return sorted(git(store, "ls-files").split())


def save(mm: MemoryManager, sid: str, n: int) -> str:
    sha = mm.save_interaction(
        sid, f"{sid} question {n}", f"answer {n}", timestamp=T0 + timedelta(minutes=n)
    )
    assert sha
    return sha


# --- the mapping ------------------------------------------------------------------------


def test_paths_in_both_layouts_map_back_to_the_id() -> None:
    sid = "chat/2024 04"
    folder = fanout_folder(sid)
    assert len(folder) == 2 and int(folder, 16) >= 0
    assert session_path(sid, fanout=True) == f"sessions/{folder}/chat%2F2024%2004.md"
    for path in (
        session_path(sid),
        session_path(sid, fanout=True),
        session_path(sid, "team", fanout=True),
    ):
        assert id_from_path(path, "team" if "namespaces" in path else None) == sid
    assert id_from_archive_path(archive_path(sid, fanout=True)) == sid
    wrong = "00" if folder != "00" else "01"
    assert id_from_path(f"sessions/{wrong}/chat%2F2024%2004.md") is None
    assert id_from_path(f"sessions/{folder}/x/chat.md") is None
    # case twins share a folder, so the check that refuses them looks in one folder only
    assert fanout_folder("Chat") == fanout_folder("chat")


def test_two_sessions_in_one_folder_keep_their_own_files(store: Path) -> None:
    mm = MemoryManager.init(store)
    first = "s0"
    folder = fanout_folder(first)
    twin = next(f"s{n}" for n in itertools.count(1) if fanout_folder(f"s{n}") == folder)
    save(mm, first, 0)
    save(mm, twin, 1)
    save(mm, first, 2)
    assert files(store) == sorted(
        [
            ".gitattributes",
            LAYOUT_FILE,
            "README.md",
            f"sessions/{folder}/{first}.md",
            f"sessions/{folder}/{twin}.md",
        ]
    )
    one, two = mm.load_memory(first), mm.load_memory(twin)
    assert one is not None and len(one.interactions) == 2
    assert two is not None and len(two.interactions) == 1
    assert mm.session_ids() == sorted([first, twin])
    assert mm.check() == []


def test_a_new_store_fans_out_and_git_sees_the_merge_driver(store: Path) -> None:
    mm = MemoryManager.init(store)
    save(mm, "s1", 0)
    path = session_path("s1", fanout=True)
    assert (store / path).is_file()
    assert git(store, "status", "--porcelain") == ""
    assert git(store, "check-attr", "merge", "--", path).strip().endswith("merge: gitmem")
    assert is_memory_file(path) and is_memory_file(archive_path("s1", fanout=True))
    assert [h.op for h in mm.history("s1")] == ["save"]


def test_an_unknown_layout_is_an_error_naming_the_file(store: Path) -> None:
    mm = MemoryManager.init(store)
    with mm.repository.transaction() as txn:
        txn.write(LAYOUT_FILE, b"# comment\n\nsharded-by-month\n")
        txn.commit("From a newer gitmem")
    with pytest.raises(ConfigError, match=r"\.gitmem-layout:3: unknown store layout"):
        mm.load_memory("s1")


# --- flat stores and migrate --------------------------------------------------------------


def test_a_flat_store_keeps_working_without_migrate(store: Path) -> None:
    mm = flat_store(store)
    save(mm, "s1", 0)
    save(mm, "s1", 1)
    assert "sessions/s1.md" in files(store)
    assert mm.session_ids() == ["s1"]
    session = mm.load_memory("s1")
    assert session is not None and len(session.interactions) == 2
    assert len(mm.history("s1")) == 2
    assert mm.check() == []
    assert mm.search("question")[0].session_id == "s1"


def test_migrate_moves_everything_in_one_commit_and_history_follows(store: Path) -> None:
    mm = flat_store(store)
    mm.summary_config = SummaryConfig(archive="archive")
    before = [save(mm, "s1", n) for n in range(3)]
    s2_saved = save(mm, "s2", 0)
    mm.summarize("s1", count=2)  # moves two turns to archive/s1.md
    team = MemoryManager(store, namespace="team")
    save(team, "t1", 0)
    assert mm.search("s2")  # the index knows the flat paths
    old_files = files(store)
    assert {"sessions/s1.md", "archive/s1.md", "namespaces/team/sessions/t1.md"} <= set(old_files)

    planned = mm.migrate(dry_run=True)
    assert files(store) == old_files and planned.commit is None
    assert len(planned.moves) == 4

    done = mm.migrate()
    assert done.commit == mm.head()
    assert git(store, "rev-list", "--count", f"{before[-1]}..HEAD").strip() == "4"
    trailers = git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)")
    assert trailers.strip() == "migrate"
    assert files(store) == sorted(
        [
            ".gitattributes",
            LAYOUT_FILE,
            "README.md",
            archive_path("s1", fanout=True),
            session_path("s1", fanout=True),
            session_path("s2", fanout=True),
            session_path("t1", "team", fanout=True),
        ]
    )
    assert git(store, "status", "--porcelain") == ""
    assert mm.check() == [] and team.check() == []
    assert mm.migrate().nothing_to_do  # the second run has nothing to do

    # every reader and writer follows the files
    full = mm.load_memory("s1", include_archive=True)
    assert full is not None and len(full.interactions) == 3
    assert [h.op for h in mm.history("s1")] == ["migrate", "summarize", "save", "save", "save"]
    assert next(h.changes.get("s1") for h in mm.history("s1", changes=True)) == []
    old = mm.at(before[0]).load_memory("s1")
    assert old is not None and len(old.interactions) == 1
    assert {b.sha for b in mm.blame("s1")} <= set(before) | {mm.history("s1")[1].sha}
    assert len(mm.diff("s1", before[0]).sessions[0].labels()) >= 1
    assert [d.session_id for d in mm.diff(None, before[-1]).sessions] == ["s1", "s2"]
    hits = mm.search("s2 question")
    assert hits and hits[0].session_id == "s2"
    assert team.load_memory("t1") is not None and team.session_ids() == ["t1"]
    save(mm, "s1", 9)
    assert len(mm.history("s1")) == 6
    assert "sessions/s1.md" not in files(store)  # a save after the move goes to the new path
    # undoing a commit made before the move changes the file where it is now
    assert mm.revert(before[2])
    now = mm.load_memory("s1", include_archive=True)
    assert now is not None and len(now.interactions) == 3
    assert mm.rollback("s2", s2_saved) is None  # s2 is as it was: nothing to do
    assert mm.rollback("s1", before[0])
    assert files(store).count(session_path("s1", fanout=True)) == 1
    assert "sessions/s1.md" not in files(store) and git(store, "status", "--porcelain") == ""
    with pytest.raises(ValidationError, match="migrate"):
        mm.revert(done.commit)
    assert mm.revert_where(op="migrate").reverted == []
    # stock git follows the rename too
    log = git(store, "log", "--follow", "--format=%s", "--", session_path("s2", fanout=True))
    assert log.splitlines()[-1] == "Save turn in s2: s2 question 0"


def test_a_flat_file_in_a_fanned_out_store_is_one_session_until_migrate(store: Path) -> None:
    mm = MemoryManager.init(store)
    save(mm, "s1", 0)
    with mm.repository.transaction() as txn:  # e.g. brought in by a plain git merge
        txn.write(
            "sessions/stray.md",
            (store / session_path("s1", fanout=True)).read_bytes().replace(b"s1", b"stray"),
        )
        txn.commit("A flat file")
    assert mm.load_memory("stray") is not None
    save(mm, "stray", 1)
    assert "sessions/stray.md" in files(store)
    assert session_path("stray", fanout=True) not in files(store)
    problems = mm.check()
    assert [(p.path, "migrate" in p.problem) for p in problems] == [("sessions/stray.md", True)]
    moved = mm.migrate()
    assert moved.moves == [("sessions/stray.md", session_path("stray", fanout=True))]
    assert mm.check() == [] and len(mm.history("stray")) == 3


def test_a_file_in_the_wrong_folder_is_reported(store: Path) -> None:
    mm = MemoryManager.init(store)
    save(mm, "s1", 0)
    right = session_path("s1", fanout=True)
    wrong = "sessions/" + ("00" if fanout_folder("s1") != "00" else "01") + "/s1.md"
    (store / wrong).parent.mkdir(exist_ok=True)
    os.rename(store / right, store / wrong)
    assert [(p.path, p.problem) for p in mm.check()] == [(wrong, f"belongs in {right}")]
    data = (store / wrong).read_bytes()
    assert "belongs in" in str(validate_memory_file(data, wrong)[0])


def test_migrate_refuses_to_move_a_hand_edited_file(store: Path) -> None:
    mm = flat_store(store)
    save(mm, "s1", 0)
    with open(store / "sessions" / "s1.md", "a") as handle:
        handle.write("\n")
    with pytest.raises(ConflictError, match=r"uncommitted changes in sessions/s1\.md"):
        mm.migrate()
    assert "sessions/s1.md" in files(store) and LAYOUT_FILE not in files(store)


def test_migrate_from_the_command_line(store: Path) -> None:
    mm = flat_store(store)
    save(mm, "s1", 0)
    runner = CliRunner()
    dry = runner.invoke(cli, ["--repo", str(store), "migrate", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"sessions/s1.md -> {session_path('s1', fanout=True)}" in dry.output
    assert "would move 1 file(s)" in dry.output and LAYOUT_FILE not in files(store)
    done = runner.invoke(cli, ["--repo", str(store), "migrate"])
    assert "moved 1 file(s) in commit" in done.output
    again = runner.invoke(cli, ["--repo", str(store), "migrate"])
    assert "nothing to do" in again.output


# --- a migration killed half-way ------------------------------------------------------------

_KILLED = """
import sys
from gitmem import MemoryManager
from tests.reliability.workers import arm
mm = MemoryManager(sys.argv[1])
arm(sys.argv[2])
mm.migrate()
"""


@pytest.mark.parametrize(
    "kill_at",
    [
        "ObjectDatabase.flush:before:1",
        "ObjectDatabase.flush:after:1",
        "WriteLock.write_journal:after:1",
        "WorkTree.place:after:3",
        "Refs.append_reflogs:after:1",
        "IndexFile.write:before:1",
        "Refs.move:before:1",
        "Refs.move:after:1",
    ],
)
def test_a_migration_killed_half_way_leaves_one_layout(store: Path, kill_at: str) -> None:
    mm = flat_store(store)
    for n in range(6):
        save(mm, f"s{n}", n)
    mm.close()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(store), kill_at],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == -9, done.stderr  # it died at that step
    mm = MemoryManager(store)  # opening finishes or undoes the half-done commit
    tree = files(store)
    flat = [p for p in tree if p.count("/") == 1 and p.startswith("sessions/")]
    fanned = [p for p in tree if p.count("/") == 2]
    assert (flat, len(fanned)) in ((flat, 0), ([], 6))
    assert (LAYOUT_FILE in tree) == bool(fanned) and len(flat) + len(fanned) == 6
    assert git(store, "status", "--porcelain") == ""
    assert fsck_problems(store) == [] and mm.check() == []
    mm.migrate()
    assert len(mm.session_ids()) == 6 and len(mm.history("s3")) == 2


# --- two clones in different layouts --------------------------------------------------------


def test_clones_in_two_layouts_merge_or_say_what_to_do(tmp_path: Path) -> None:
    remote = tmp_path / "memory.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = flat_store(tmp_path / "a", agent="alice")
    save(a, "s1", 0)
    git(tmp_path / "a", "remote", "add", "origin", remote.as_uri())
    a.push()
    b = MemoryManager.clone(remote.as_uri(), tmp_path / "b", agent="bob")
    a.migrate()
    save(a, "s1", 1)
    a.push()
    save(b, "s1", 2)  # b is still flat
    save(b, "new", 3)
    with pytest.raises(ConflictError, match=r"run `gitmem migrate` here first"):
        b.pull()
    # plain git merges through rename detection: b's turn follows s1 to its new path
    git(tmp_path / "b", "pull", "--no-rebase", "--no-edit", "origin", "main")
    b = MemoryManager(tmp_path / "b", agent="bob")
    s1 = b.load_memory("s1")
    assert s1 is not None and len(s1.interactions) == 3
    assert b.load_memory("new") is not None  # still flat, read where it is
    assert [p.path for p in b.check()] == ["sessions/new.md"]
    b.migrate()
    assert b.check() == [] and git(tmp_path / "b", "status", "--porcelain") == ""
    assert len(b.history("s1")) == 5  # saves on both sides, the merge, and migrate
    # both migrated: gitmem's own sync merges them
    b.push()
    save(a, "s1", 4)
    a.pull()
    merged = a.load_memory("s1")
    assert merged is not None and len(merged.interactions) == 4
