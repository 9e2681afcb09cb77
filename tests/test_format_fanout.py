"""The fan-out layout (sessions/<xx>/<id>.md): ids map to paths and back, twins share a
folder, and a file in the wrong folder is reported."""

from __future__ import annotations

import itertools
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gitmem import MemoryManager
from gitmem.format.paths import (
    LAYOUT_FILE,
    archive_path,
    fanout_folder,
    id_from_archive_path,
    id_from_path,
    session_path,
)
from gitmem.sync.hooks import is_memory_file, validate_memory_file
from tests.conftest import git

T0 = datetime(2024, 4, 15, 9, 0, tzinfo=timezone.utc)


def files(store: Path) -> list[str]:
    return sorted(git(store, "ls-files").split())


def save(mm: MemoryManager, sid: str, n: int) -> str:
    sha = mm.save_interaction(
        sid, f"{sid} question {n}", f"answer {n}", timestamp=T0 + timedelta(minutes=n)
    )
    assert sha
    return sha


def test_paths_map_back_to_the_id() -> None:
    sid = "chat/2024 04"
    folder = fanout_folder(sid)
    assert len(folder) == 2 and int(folder, 16) >= 0
    assert session_path(sid) == f"sessions/{folder}/chat%2F2024%2004.md"
    for path in (
        session_path(sid),
        session_path(sid),
        session_path(sid, "team"),
    ):
        assert id_from_path(path, "team" if "namespaces" in path else None) == sid
    assert id_from_archive_path(archive_path(sid)) == sid
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
    path = session_path("s1")
    assert (store / path).is_file()
    assert git(store, "status", "--porcelain") == ""
    assert git(store, "check-attr", "merge", "--", path).strip().endswith("merge: gitmem")
    assert is_memory_file(path) and is_memory_file(archive_path("s1"))
    assert [h.op for h in mm.history("s1")] == ["save"]


def test_a_file_in_the_wrong_folder_is_reported(store: Path) -> None:
    mm = MemoryManager.init(store)
    save(mm, "s1", 0)
    right = session_path("s1")
    wrong = "sessions/" + ("00" if fanout_folder("s1") != "00" else "01") + "/s1.md"
    (store / wrong).parent.mkdir(exist_ok=True)
    os.rename(store / right, store / wrong)
    assert [(p.path, p.problem) for p in mm.check()] == [(wrong, f"belongs in {right}")]
    data = (store / wrong).read_bytes()
    assert "belongs in" in str(validate_memory_file(data, wrong)[0])
