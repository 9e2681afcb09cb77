"""Live capture (``gitmem.importers.live``): each saved turn imported as it is announced.

Runs without nanobot installed: the announcements are made by calling ``Capture.persisted``
as nanobot's bus would, on a copy of the shared fixture nanobot's own code wrote. The real
plugin inside nanobot's agent loop is tested in tests/test_nanobot_live.py (slow).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from gitmem.importers import nanobot
from gitmem.importers.engine import ImportResult
from gitmem.importers.live import Capture, nanobot_importer
from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.nanobot_env import copy_home, unpack

TELEGRAM = "telegram:8812345"
WAIT_S = 60.0


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("nanobot-fixture"))


@pytest.fixture
def home(unpacked: Path, tmp_path: Path) -> Path:
    return copy_home(unpacked, tmp_path / "nanobot-home")


def session_file(home: Path, key: str) -> Path:
    [found] = [
        p
        for p in (home / "sessions").glob("*/*.jsonl")
        if json.loads(p.read_text().splitlines()[0]).get("key") == key
    ]
    return found


@pytest.fixture
def capture(home: Path, store: Path) -> Iterator[Capture]:
    sessions = session_file(home, TELEGRAM).parent
    made = Capture(
        store, nanobot_importer(home / "workspace", sessions), agent="nanobot", via="nanobot-plugin"
    )
    yield made
    made.close()


def subjects(store: Path) -> list[str]:
    return git(store, "log", "--format=%s").splitlines()


def append(path: Path, *records: dict[str, object]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


TURN = (
    {"role": "user", "content": "And my brother?", "timestamp": "2026-05-02T10:00:00"},
    {
        "role": "assistant",
        "content": "Your brother Rui lives in Lisbon.",
        "timestamp": "2026-05-02T10:00:04",
    },
)


def test_each_announced_turn_is_one_commit_with_the_batch_importers_ids(
    capture: Capture, home: Path, store: Path
) -> None:
    assert not store.exists()
    capture.persisted(TELEGRAM)
    capture.flush(WAIT_S)
    # the store was made on first use; the first capture also takes the memory files
    assert subjects(store) == [
        "Capture nanobot session telegram:8812345",
        "Create gitmem memory store",
    ]
    assert capture.last is not None
    assert sorted(capture.last.sessions) == sorted([TELEGRAM, "nanobot:memory", "nanobot:history"])
    trailers = git(store, "log", "-1", "--format=%an|%(trailers:only,unfold,separator=;)")
    assert trailers.startswith("nanobot|") and "Gitmem-Op: import" in trailers
    assert "Gitmem-Via: nanobot-plugin" in trailers
    # announced again with nothing new: no commit
    capture.persisted(TELEGRAM)
    capture.flush(WAIT_S)
    assert len(subjects(store)) == 2 and capture.imports == 2
    # nanobot saves a new turn: exactly that turn, in one commit (memory unchanged, not read)
    append(session_file(home, TELEGRAM), *TURN)
    capture.persisted(TELEGRAM)
    capture.flush(WAIT_S)
    assert len(subjects(store)) == 3
    assert capture.last is not None and capture.last.sessions == [TELEGRAM]
    [(session_id, turn_id)] = capture.last.added
    assert session_id == TELEGRAM
    mm = MemoryManager(store)
    try:
        stored = mm.load_memory(TELEGRAM)
        assert stored is not None
        assert [m.content for m in stored.interactions[-1].messages] == [
            "And my brother?",
            "Your brother Rui lives in Lisbon.",
        ]
        assert stored.interactions[-1].id == turn_id
        # a later batch import finds every captured turn already stored: same ids
        batch = nanobot.import_nanobot(mm, home)
    finally:
        mm.close()
    assert {s for s, _ in batch.added} == {"cli:direct"}
    assert git(store, "status", "--porcelain") == ""


def test_a_failed_import_is_logged_not_raised_and_the_next_turn_brings_it(
    capture: Capture, home: Path, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    capture.persisted(TELEGRAM)
    capture.flush(WAIT_S)
    path = session_file(home, TELEGRAM)
    good = path.read_text()
    path.write_text(good + '{"role": "user", "content": "half')  # a broken file
    with caplog.at_level(logging.ERROR, logger="gitmem.importers.live"):
        capture.persisted(TELEGRAM)  # does not raise
        capture.flush(WAIT_S)
    assert capture.failures == 1
    [record] = [r for r in caplog.records if r.name == "gitmem.importers.live"]
    message = record.getMessage()
    broken = len(good.splitlines()) + 1
    assert TELEGRAM in message and "next saved turn" in message and f"{path}:{broken}:" in message
    assert len(subjects(store)) == 2 and git(store, "status", "--porcelain") == ""
    path.write_text(good)
    append(path, *TURN)
    capture.persisted(TELEGRAM)
    capture.flush(WAIT_S)
    assert capture.last is not None and len(capture.last.added) == 1
    assert len(subjects(store)) == 3


def test_imports_run_on_the_worker_and_waiting_announcements_merge(store: Path) -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[tuple[str, list[str]]] = []

    def importer(mm: MemoryManager, keys: Sequence[str]) -> ImportResult:
        calls.append((threading.current_thread().name, list(keys)))
        started.set()
        assert release.wait(WAIT_S)
        return ImportResult(source="test")

    capture = Capture(store, importer)
    try:
        capture.persisted("a")
        assert started.wait(WAIT_S)  # the first import runs and holds the worker
        for key in ("a", "b", "a", "a", "b"):
            capture.persisted(key)  # returns at once although the worker is busy
        release.set()
        capture.flush(WAIT_S)
    finally:
        capture.close()
    assert [keys for _, keys in calls] == [["a"], ["a"], ["b"]]
    assert all(name.startswith("gitmem-capture") for name, _ in calls)
    assert threading.current_thread().name not in {name for name, _ in calls}


def test_a_capture_with_a_namespace_writes_only_there(home: Path, store: Path) -> None:
    sessions = session_file(home, TELEGRAM).parent
    capture = Capture(
        store, nanobot_importer(home / "workspace", sessions), agent="nanobot", namespace="alice"
    )
    try:
        capture.persisted(TELEGRAM)
        capture.flush(WAIT_S)
    finally:
        capture.close()
    assert capture.failures == 0
    alice = MemoryManager(store, namespace="alice")
    default = MemoryManager(store)
    assert TELEGRAM in alice.session_ids()
    assert default.session_ids() == []
    assert default.namespaces() == ["alice"]
