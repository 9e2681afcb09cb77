"""``--watch``: an import kept in step with files that are still being written.

A real store and a real watch (in a thread, or the ``gitmem`` command in a subprocess) over a
temporary folder; the source is a tiny JSONL format read by an importer written here with the
shared engine, so the watch is tested apart from any one tool's format. Conditions are waited
for with a generous timeout; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gitmem import MemoryManager
from gitmem.importers.engine import (
    ImportFormatError,
    ImportResult,
    numbered_lines,
    run_import,
    stable_id,
)
from gitmem.importers.watch import snapshot, watch
from gitmem.models import Interaction, Message, Session
from tests.conftest import git
from tests.nanobot_env import copy_home, unpack

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 60.0  # generous: the machine is shared


def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def read_turns(folder: Path) -> Iterator[Session]:
    """The test format: ``*.jsonl`` files of ``{"session", "at", "user", "assistant"}``."""
    for path in sorted(folder.glob("*.jsonl")):
        with path.open("rb") as handle:
            for number, line in numbered_lines(str(path), handle):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ImportFormatError(f"{path}:{number}", f"not JSON ({exc.msg})") from None
                at = datetime.fromisoformat(row["at"])
                turn = Interaction(
                    id=stable_id("t", row["session"], row["at"], row["user"]),
                    timestamp=at,
                    messages=[
                        Message(speaker="user", content=row["user"]),
                        Message(speaker="assistant", content=row["assistant"]),
                    ],
                )
                yield Session(
                    id=row["session"],
                    created=at,
                    last_active=at,
                    participants=["user", "assistant"],
                    interactions=[turn],
                )


def import_folder(mm: MemoryManager, folder: Path) -> ImportResult:
    return run_import(mm, read_turns(folder), source="test", subject="Import test turns")


def line(n: int, session: str = "chat") -> str:
    return (
        json.dumps(
            {
                "session": session,
                "at": f"2026-01-0{1 + n % 9}T10:00:00+00:00",
                "user": f"question {n}",
                "assistant": f"answer {n}",
            }
        )
        + "\n"
    )


def commits(store: Path) -> list[str]:
    return git(store, "log", "--format=%s").splitlines()


class Watcher:
    """``watch`` over ``folder`` in a thread, recording what it reports."""

    def __init__(
        self,
        mm: MemoryManager,
        folder: Path,
        *,
        debounce: float = 0.05,
        run: Callable[[], ImportResult] | None = None,
        roots: Callable[[], Iterable[Path]] | None = None,
    ) -> None:
        self.results: list[ImportResult] = []
        self.errors: list[Exception] = []
        self.polls = 0
        self.stop = threading.Event()
        self.count: int | None = None
        self._roots = roots or (lambda: [folder])

        def counted_roots() -> Iterable[Path]:
            self.polls += 1
            return self._roots()

        def main() -> None:
            self.count = watch(
                counted_roots,
                run or (lambda: import_folder(mm, folder)),
                interval=0.02,
                debounce=debounce,
                stop=self.stop,
                on_result=self.results.append,
                on_error=self.errors.append,
            )

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def idle_polls(self, n: int = 10) -> None:
        """Wait until the watch has looked at the files ``n`` more times."""
        start = self.polls
        wait_for(lambda: self.polls >= start + n, f"{n} polls")

    def close(self) -> int:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the watch did not stop"
        assert self.count is not None
        return self.count


@pytest.fixture
def mm(store: Path) -> Iterator[MemoryManager]:
    manager = MemoryManager.init(store)
    yield manager
    manager.close()


def test_a_new_line_becomes_a_commit_and_idle_polls_make_none(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.jsonl").write_text(line(1) + line(2))
    w = Watcher(mm, source)
    wait_for(lambda: w.results, "the initial import")
    assert len(w.results[0].added) == 2 and w.results[0].commit
    before = commits(store)
    w.idle_polls()
    assert len(w.results) == 1 and commits(store) == before  # nothing changed: no import
    with (source / "a.jsonl").open("a") as handle:
        handle.write(line(3))
    wait_for(lambda: len(w.results) == 2, "the import of the new line")
    assert [turn for _, turn in w.results[1].added] == [
        stable_id("t", "chat", "2026-01-04T10:00:00+00:00", "question 3")
    ]
    assert len(commits(store)) == len(before) + 1
    session = mm.load_memory("chat")
    assert session is not None
    assert [t.messages[0].content for t in session.interactions] == [
        "question 1",
        "question 2",
        "question 3",
    ]
    # a file appearing in the folder is a change too
    (source / "b.jsonl").write_text(line(4, session="other"))
    wait_for(lambda: len(w.results) == 3, "the import of the new file")
    assert [s for s, _ in w.results[2].added] == ["other"] and w.results[2].commit
    assert w.close() == 3 and not w.errors
    assert git(store, "status", "--porcelain") == ""


def test_a_half_written_line_is_reported_and_picked_up_when_complete(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    path = source / "a.jsonl"
    path.write_text(line(1))
    w = Watcher(mm, source)
    wait_for(lambda: w.results, "the initial import")
    before = commits(store)
    full = line(2)
    with path.open("a") as handle:
        handle.write(full[:25])  # a writer stopped half-way through a line
    [error] = wait_for(lambda: w.errors, "the error for the half-written line")
    assert isinstance(error, ImportFormatError) and error.where == f"{path}:2"
    w.idle_polls()
    assert len(w.errors) == 1 and len(w.results) == 1  # not retried until the file changes
    assert commits(store) == before and git(store, "status", "--porcelain") == ""
    with path.open("a") as handle:
        handle.write(full[25:])
    wait_for(lambda: len(w.results) == 2, "the import once the line is complete")
    assert len(w.results[1].added) == 1 and w.results[1].commit
    assert len(commits(store)) == len(before) + 1
    w.close()
    assert git(store, "status", "--porcelain") == ""


def test_a_file_changing_at_every_poll_is_imported_once_it_settles(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    path = source / "a.jsonl"
    path.write_text(line(1))
    writes = [0]
    first_done = threading.Event()

    def roots() -> list[Path]:
        # a writer that appends between any two polls, 40 times, after the first import
        if first_done.is_set() and writes[0] < 40:
            writes[0] += 1
            with path.open("a") as handle:
                handle.write(line(100 + writes[0]))
        return [source]

    def run() -> ImportResult:
        result = import_folder(mm, source)
        first_done.set()
        return result

    w = Watcher(mm, source, debounce=1.0, run=run, roots=roots)
    wait_for(lambda: len(w.results) == 2, "the import after the writes settled")
    assert writes[0] == 40  # none was imported while the file kept changing
    assert len(w.results[1].added) == 40
    w.idle_polls()
    assert w.close() == 2


def test_stop_during_an_import_lets_it_commit(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.jsonl").write_text(line(1))
    inside, release = threading.Event(), threading.Event()

    def run() -> ImportResult:
        inside.set()
        assert release.wait(WAIT_S)
        return import_folder(mm, source)

    w = Watcher(mm, source, run=run)
    assert inside.wait(WAIT_S)
    w.stop.set()  # asked to stop while the import runs
    (source / "a.jsonl").write_text(line(1) + line(2))
    release.set()
    assert w.close() == 1  # the import finished, and no further one started
    [result] = w.results
    assert result.commit and git(store, "rev-parse", "HEAD").strip() == result.commit
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--no-progress")


def test_a_failing_roots_callable_keeps_the_last_answer(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.jsonl").write_text(line(1))
    calls = [0]

    def roots() -> list[Path]:
        calls[0] += 1
        if calls[0] > 2:  # e.g. the workspace is being moved: finding it fails
            raise OSError("the workspace is gone")
        return [source]

    w = Watcher(mm, source, roots=roots)
    wait_for(lambda: w.results, "the initial import")
    w.idle_polls()
    with (source / "a.jsonl").open("a") as handle:
        handle.write(line(2))
    wait_for(lambda: len(w.results) == 2, "the import of the new line")
    assert w.close() == 2 and not w.errors


def test_snapshot_skips_dot_entries_inside_a_root(tmp_path: Path) -> None:
    (tmp_path / "w" / ".git").mkdir(parents=True)
    (tmp_path / "w" / ".git" / "HEAD").write_text("x")
    (tmp_path / "w" / ".tmp-file").write_text("x")
    (tmp_path / "w" / "memory").mkdir()
    (tmp_path / "w" / "memory" / "MEMORY.md").write_text("x")
    found = snapshot([tmp_path / "w", tmp_path / "w" / ".git", tmp_path / "missing"])
    assert set(found) == {
        str(tmp_path / "w" / "memory" / "MEMORY.md"),
        str(tmp_path / "w" / ".git" / "HEAD"),
        str(tmp_path / "missing"),
    }
    assert found[str(tmp_path / "missing")] is None


def _main_thread_sigint_ok() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("the test runner replaced Python's SIGINT handler")


def test_ctrl_c_during_an_import_lets_it_commit(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    _main_thread_sigint_ok()
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.jsonl").write_text(line(1))

    def run() -> ImportResult:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the import is under way
        return import_folder(mm, source)

    results: list[ImportResult] = []
    assert watch(lambda: [source], run, interval=0.02, on_result=results.append) == 1
    [result] = results
    assert result.commit and git(store, "rev-parse", "HEAD").strip() == result.commit
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert git(store, "status", "--porcelain") == ""


def test_a_second_ctrl_c_abandons_the_import_and_writes_nothing(
    mm: MemoryManager, store: Path, tmp_path: Path
) -> None:
    _main_thread_sigint_ok()
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.jsonl").write_text(line(1) + line(2))
    before = commits(store)

    def interrupted() -> Iterator[Session]:
        for number, session in enumerate(read_turns(source)):
            if number == 1:  # between two sessions of one import: Ctrl-C twice
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
            yield session

    results: list[ImportResult] = []
    count = watch(
        lambda: [source],
        lambda: run_import(mm, interrupted(), source="test", subject="x"),
        interval=0.02,
        on_result=results.append,
    )
    assert count == 1 and results == []
    assert commits(store) == before and mm.load_memory("chat") is None
    assert git(store, "status", "--porcelain") == ""


# --- the gitmem command -----------------------------------------------------------------------


def _locomo(samples: int) -> list[dict[str, Any]]:
    data = []
    for n in range(samples):
        data.append(
            {
                "sample_id": f"conv-{n}",
                "qa": [],
                "conversation": {
                    "speaker_a": "Ana",
                    "speaker_b": "Ben",
                    "session_1_date_time": "1:15 pm on 3 May, 2023",
                    "session_1": [
                        {"speaker": "Ana", "dia_id": "D1:1", "text": f"Hello number {n}"},
                        {"speaker": "Ben", "dia_id": "D1:2", "text": "Hi Ana"},
                    ],
                },
            }
        )
    return data


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_cli_watch_imports_changes_and_stops_on_ctrl_c(
    store: Path, tmp_path: Path, json_out: bool
) -> None:
    MemoryManager.init(store).close()
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps(_locomo(1)))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    args = [
        sys.executable,
        "-m",
        "gitmem",
        *(["--json"] * json_out),
        "--repo",
        str(store),
        "import",
        "locomo",
        str(source),
        "--watch",
        "--interval",
        "0.1",
    ]
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(args, stdout=stdout, stderr=stderr, cwd=ROOT)
    try:
        wait_for(lambda: "Ctrl-C to stop" in err.read_text(), "the watching line")
        wait_for(lambda: len(commits(store)) == 2, "the first import's commit")
        # rewritten the way editors and nanobot write: a new file renamed over the old one
        (tmp_path / "new.json").write_text(json.dumps(_locomo(2)))
        os.replace(tmp_path / "new.json", source)
        wait_for(lambda: len(commits(store)) == 3, "the import of the change")
        wait_for(lambda: len(out.read_text().splitlines()) == 2, "the second report")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(WAIT_S) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = out.read_text().splitlines()
    if json_out:
        documents = [json.loads(text) for text in lines]
        assert [d["turns_added"] for d in documents] == [2, 2]
        assert documents[1]["sessions"] == ["conv-0-session_1", "conv-1-session_1"]
        assert documents[1]["commit"] == git(store, "rev-parse", "HEAD").strip()
    else:
        assert lines[0].startswith("imported 1 session(s), 2 new turn(s)")
        assert lines[1].startswith("imported 2 session(s), 2 new turn(s), 2 already stored")
    assert "stopped watching locomo after 2 import(s)" in err.read_text()
    assert "Traceback" not in err.read_text()
    assert git(store, "status", "--porcelain") == ""


def test_cli_watch_follows_a_nanobot_home(store: Path, tmp_path: Path) -> None:
    home = copy_home(unpack(tmp_path / "fixture"), tmp_path / "home")
    [session] = [
        p
        for p in (home / "sessions").glob("*/*.jsonl")
        if '"telegram:8812345"' in p.read_text().splitlines()[0]
    ]
    MemoryManager.init(store).close()
    err = tmp_path / "err.txt"
    args = [
        sys.executable,
        "-m",
        "gitmem",
        "--repo",
        str(store),
        "import",
        "nanobot",
        str(home),
        "--watch",
        "--interval",
        "0.1",
    ]
    with err.open("w") as stderr:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
    try:
        wait_for(lambda: len(commits(store)) == 2, "the first import's commit")
        with session.open("a") as handle:  # nanobot saves a new turn
            for role, text in (("user", "And my brother?"), ("assistant", "Rui, in Lisbon.")):
                handle.write(
                    json.dumps({"role": role, "content": text, "timestamp": "2026-05-02T10:00:00"})
                    + "\n"
                )
        wait_for(lambda: len(commits(store)) == 3, "the import of the new turn")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(WAIT_S) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    added = git(store, "show", "--format=", "--unified=0", "HEAD")
    assert "> And my brother?" in added and "> Rui, in Lisbon." in added
    assert "stopped watching nanobot after 2 import(s)" in err.read_text()
    assert git(store, "status", "--porcelain") == ""


def _watch_until_two_imports(
    store: Path, tmp_path: Path, command: list[str], change: Callable[[], None]
) -> str:
    """Run ``gitmem import ... --watch``, make ``change`` after its first import, wait for the
    second, stop it with Ctrl-C; the stderr text."""
    MemoryManager.init(store).close()
    err = tmp_path / "err.txt"
    args = [
        sys.executable,
        "-m",
        "gitmem",
        "--repo",
        str(store),
        "import",
        *command,
        "--watch",
        "--interval",
        "0.1",
    ]
    with err.open("w") as stderr:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
    try:
        wait_for(lambda: len(commits(store)) == 2, "the first import's commit")
        change()
        wait_for(lambda: len(commits(store)) == 3, "the import of the change")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(WAIT_S) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert git(store, "status", "--porcelain") == ""
    return err.read_text()


def test_cli_watch_follows_an_openclaw_workspace(store: Path, tmp_path: Path) -> None:
    home = tmp_path / "openclaw"
    shutil.copytree(ROOT / "tests" / "data" / "openclaw", home)
    memory = home / "workspace" / "MEMORY.md"

    def rewrite() -> None:  # the agent rewrites its curated memory
        memory.write_text(memory.read_text() + "\n- Prefers tea over coffee.\n")

    err = _watch_until_two_imports(store, tmp_path, ["openclaw", str(home / "workspace")], rewrite)
    assert "stopped watching openclaw after 2 import(s)" in err
    assert "Prefers tea over coffee" in git(store, "show", "--format=", "HEAD")


def test_cli_watch_follows_a_chat_file(store: Path, tmp_path: Path) -> None:
    source = tmp_path / "runs.jsonl"
    first = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    source.write_text(json.dumps({"id": "a", "messages": first}) + "\n")

    def append() -> None:
        with source.open("a") as handle:
            handle.write(json.dumps({"id": "b", "messages": first}) + "\n")

    err = _watch_until_two_imports(store, tmp_path, ["chat", str(source)], append)
    assert "stopped watching chat after 2 import(s)" in err
    assert MemoryManager(store).session_ids() == ["chat:a", "chat:b"]
