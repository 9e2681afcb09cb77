"""The flat batch an import runs in: files go into the object database as they are written,
no session is kept, and the store it commits is the one a batch that keeps them commits."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gitmem.format.paths import session_path
from gitmem.format.render import render
from gitmem.importers import nanobot
from gitmem.importers.engine import ImportResult, run_import, time_zone
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Session
from tests.conftest import git
from tests.nanobot_env import copy_home, unpack

SECRET = "sk-proj-" + "Zq9xW8vU7tS6" * 4


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("nanobot-fixture"))


@pytest.fixture
def home(unpacked: Path, tmp_path: Path) -> Path:
    home = copy_home(unpacked, tmp_path / "nanobot-home")
    first = sorted((home / "sessions").glob("*/*.jsonl"))[0]
    with open(first, "a", encoding="utf-8") as handle:
        record = {"role": "user", "content": f"my key is {SECRET}", "timestamp": "2026-12-02"}
        handle.write(json.dumps(record) + "\n")
    return home


def _manager(path: Path) -> MemoryManager:
    mm = MemoryManager(path, init=True, agent="importer")
    mm._store.parts.turns_per_part = 2  # part files too
    return mm


def _left_temps(store: Path) -> list[Path]:
    return list((store / ".git" / "gitmem" / "tmp").glob("*"))


def test_a_flat_import_commits_the_tree_a_batch_keeping_its_sessions_commits(
    home: Path, tmp_path: Path
) -> None:
    flat, kept = tmp_path / "flat", tmp_path / "kept"
    flat_result = nanobot.import_nanobot(_manager(flat), home, tz="UTC")
    layout = nanobot.find_layout(home)
    sessions = nanobot.read_all(layout, tz=time_zone("UTC"))
    # no reread: the batch keeps its sessions to make its changes again if it has to
    kept_result = run_import(_manager(kept), sessions, source=layout.source, subject="Import")
    assert flat_result.added == kept_result.added and flat_result.added
    tree = git(flat, "rev-parse", "HEAD^{tree}")
    assert tree == git(kept, "rev-parse", "HEAD^{tree}")
    assert any(f.endswith("~0001.md") for f in git(flat, "ls-files").split())
    assert git(flat, "status", "--porcelain") == ""  # the working files are in place
    assert SECRET not in git(flat, "log", "-p") and "[REDACTED:openai-key]" in git(
        flat, "log", "-p"
    )
    assert _left_temps(flat) == []


def test_a_session_written_twice_in_a_flat_batch_is_read_back_from_its_first_write(
    store: Path,
) -> None:
    mm = MemoryManager(store, init=True, agent="tester")
    with mm.batch("Two turns", flat=True) as done:
        mm.save_interaction("s", "first question", "first answer")
        mm.save_interaction("s", "second question", "second answer")
        mm.save_interaction("t", "other question", "other answer")
    assert done.commit == git(store, "rev-parse", "HEAD").strip()
    session = mm.load_memory("s")
    assert session is not None
    assert [t.text.split("\n")[0] for t in session.interactions] == [
        "User: first question",
        "User: second question",
    ]
    assert git(store, "status", "--porcelain") == "" and _left_temps(store) == []


def test_a_flat_dry_run_writes_nothing_and_leaves_no_temp_file(home: Path, store: Path) -> None:
    mm = _manager(store)
    head = git(store, "rev-parse", "HEAD", check=False)
    result = nanobot.import_nanobot(mm, home, dry_run=True)
    assert result.added and result.commit is None
    assert git(store, "rev-parse", "HEAD", check=False) == head
    assert git(store, "status", "--porcelain") == "" and _left_temps(store) == []


def test_a_persons_commit_to_an_imported_file_during_the_import_is_kept_under_it(
    home: Path, store: Path, tmp_path: Path
) -> None:
    clean = nanobot.import_nanobot(_manager(tmp_path / "clean"), home, tz="UTC")
    mm = _manager(store)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    hand = Session(
        id="cli:direct",
        created=when,
        last_active=when,
        interactions=[
            Interaction(id="by-hand", timestamp=when, messages=[Message(speaker="me", content="x")])
        ],
    )
    path = session_path("cli:direct", None)
    calls: list[int] = []

    def progress(_result: ImportResult) -> None:
        calls.append(1)
        if len(calls) == 1:  # a person commits to a file this import writes
            (store / path).parent.mkdir(parents=True, exist_ok=True)
            (store / path).write_text(render(hand), encoding="utf-8")
            git(store, "add", path)
            git(store, "commit", "-q", "-m", "by hand")

    result = nanobot.import_nanobot(mm, home, tz="UTC", progress=progress)
    assert git(store, "log", "-1", "--format=%s", "HEAD~1").strip() == "by hand"
    assert result.commit == git(store, "rev-parse", "HEAD").strip()
    assert sorted(result.added) == sorted(clean.added)  # counted once, not once per try
    stored = mm.load_memory("cli:direct")
    assert stored is not None and stored.interactions[0].id == "by-hand"
    assert len(stored.interactions) == 1 + sum(s == "cli:direct" for s, _i in clean.added)
    assert git(store, "status", "--porcelain") == ""


def test_a_persons_commit_during_one_part_of_a_huge_import_redoes_that_part_only(
    home: Path, store: Path, tmp_path: Path
) -> None:
    clean = nanobot.import_nanobot(_manager(tmp_path / "clean"), home, tz="UTC", part_size=1)
    assert len(clean.commits) == 4  # one session a part
    mm = _manager(store)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    calls: list[str] = []

    def progress(result: ImportResult) -> None:
        calls.append(result.sessions[-1])
        if len(calls) == 2:  # during the second part, to the file it writes
            sid = result.sessions[-1]
            turn = Interaction(
                id="by-hand", timestamp=when, messages=[Message(speaker="me", content="x")]
            )
            hand = Session(id=sid, created=when, last_active=when, interactions=[turn])
            path = session_path(sid, None)
            (store / path).parent.mkdir(parents=True, exist_ok=True)
            (store / path).write_text(render(hand), encoding="utf-8")
            git(store, "add", path)
            git(store, "commit", "-q", "-m", "by hand")

    result = nanobot.import_nanobot(mm, home, tz="UTC", part_size=1, progress=progress)
    assert calls[1] == calls[2]  # the second part was merged again
    assert sorted(result.added) == sorted(clean.added)
    assert result.sessions == clean.sessions and len(result.commits) == 4
    subjects = git(store, "log", "--format=%s").splitlines()
    assert subjects[:5] == [
        f"Import nanobot memory from nanobot-home (part {n})" for n in (4, 3, 2)
    ] + ["by hand", "Import nanobot memory from nanobot-home (part 1)"]
    stored = mm.load_memory(calls[1])
    assert stored is not None and stored.interactions[0].id == "by-hand"
