"""Sharing memory through real remotes: git daemon and file://, sync, plain git pull, errors."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gitmem import AsyncMemoryManager, MemoryManager
from gitmem.errors import ConflictError, InvalidSessionId, RepositoryError
from gitmem.format import parse as markdown
from gitmem.models import Interaction, Message, Session, Summary
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2024, 4, 15, 15, 30, tzinfo=timezone(timedelta(hours=8)))
SHARED = ("plans", "books", "travel")


@pytest.fixture(autouse=True)
def this_gitmem(monkeypatch: pytest.MonkeyPatch) -> None:
    # git runs the merge driver and hooks as `python -m gitmem`: make that this checkout
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real `git daemon` on 127.0.0.1 serving the repositories under a folder."""
    base = tmp_path / "served"
    base.mkdir()
    port = _free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--export-all",
            "--enable=receive-pack",
            f"--base-path={base}",
            f"--port={port}",
            "--listen=127.0.0.1",
            "--reuseaddr",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.05)
        yield base, f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def bare(folder: Path, name: str = "memory.git") -> Path:
    path = folder / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    return path


@pytest.fixture(params=["git-daemon", "file"])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return (bare(tmp_path)).as_uri()
    base, url = request.getfixturevalue("daemon")
    bare(base)
    return f"{url}/memory.git"


def contents(mm: MemoryManager, sid: str) -> list[str]:
    found = mm.load_memory(sid)
    assert found is not None
    return [t.messages[0].content for t in found.interactions]


def assert_clean(store: Path) -> None:
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")
    for path in store.rglob("*.md"):
        text = path.read_text()
        assert "<<<<<<<" not in text and ">>>>>>>" not in text, path


def seeded_pair(url: str, tmp_path: Path) -> tuple[MemoryManager, MemoryManager]:
    """Two stores sharing one remote: the first creates it, the second clones it."""
    a = MemoryManager.clone(url, tmp_path / "a", agent="alice")
    for sid in SHARED:
        a.save_interaction(sid, f"{sid}: first question", "first answer", timestamp=T0)
    a.sync()
    b = MemoryManager.clone(url, tmp_path / "b", agent="bob")
    assert b.session_ids() == sorted(SHARED)
    return a, b


def test_concurrent_writers_on_two_stores_sync_without_loss(
    remote_url: str, tmp_path: Path
) -> None:
    a, b = seeded_pair(remote_url, tmp_path)
    rounds = 8

    errors: list[BaseException] = []

    def write(mm: MemoryManager, who: str, offset: int) -> None:
        try:
            for n in range(rounds):
                for sid in SHARED:
                    mm.save_interaction(
                        sid,
                        f"{who} {n}",
                        f"reply to {who} {n}",
                        timestamp=T0 + timedelta(seconds=1 + 2 * n + offset),
                    )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def keep_syncing(mm: MemoryManager) -> None:
        try:
            for _ in range(3):  # syncs while both stores keep writing
                mm.sync(attempts=10)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(a, "alice", 0)),
        threading.Thread(target=write, args=(b, "bob", 1)),
        threading.Thread(target=keep_syncing, args=(a,)),
        threading.Thread(target=keep_syncing, args=(b,)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    a.sync()
    b.sync()
    a.sync()
    assert a.head() == b.head()
    for sid in SHARED:
        seen = contents(a, sid)
        assert seen == contents(b, sid)
        expected = [f"{sid}: first question"]
        for n in range(rounds):
            expected += [f"alice {n}", f"bob {n}"]
        assert seen == expected  # every turn of both sides, in time order, once
    for store in (a.path, b.path):
        assert_clean(store)
    log = git(a.path, "log", "--merges", "--format=%(trailers:key=Gitmem-Op,valueonly)")
    assert "merge" in log.split()


def test_plain_git_pull_runs_the_merge_driver(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()
    a = MemoryManager.clone(url, tmp_path / "a", agent="alice")
    a.save_interaction("plans", "q0", "a0", timestamp=T0)
    a.push()
    wired, plain = tmp_path / "wired", tmp_path / "plain"
    for folder in (wired, plain):
        git(tmp_path, "clone", "-q", url, folder.name)
    MemoryManager(wired).close()  # opening once wires the driver into the clone's config
    assert "-m gitmem.sync.driver %O %A %B %P" in git(wired, "config", "merge.gitmem.driver")
    for folder in (wired, plain):
        # an appended turn, written and committed by a person with plain git
        path = folder / "sessions" / "3a" / "plans.md"
        session = markdown.parse(path.read_text())
        turn = Interaction(
            id="person1",
            timestamp=T0 + timedelta(minutes=2),
            messages=[Message(speaker="User", content=f"q from {folder.name}")],
        )
        path.write_text(
            markdown.render(
                session.model_copy(update={"interactions": [*session.interactions, turn]})
            )
        )
        git(folder, "commit", "-qam", "add a turn by hand")
    assert git(plain, "config", "--get", "merge.gitmem.driver", check=False) == ""
    a.save_interaction("plans", "q from alice", "a", timestamp=T0 + timedelta(minutes=1))
    a.push()
    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=wired,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode == 0, pulled.stderr
    with MemoryManager(wired) as mm:
        assert contents(mm, "plans") == ["q0", "q from alice", "q from wired"]
    assert_clean(wired)
    # without the driver, git's line merge conflicts on the very same histories
    failed = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=plain,
        capture_output=True,
        text=True,
    )
    assert failed.returncode != 0
    assert "<<<<<<<" in (plain / "sessions" / "3a" / "plans.md").read_text()


def test_git_pull_of_an_unparseable_file_falls_back_to_a_normal_conflict(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()
    a = MemoryManager.clone(url, tmp_path / "a")
    a.save_interaction("plans", "q0", "a0", timestamp=T0)
    a.push()
    git(tmp_path, "clone", "-q", url, "c")
    c = tmp_path / "c"
    MemoryManager(c).close()
    path = c / "sessions" / "3a" / "plans.md"
    path.write_text(path.read_text().replace("### 2024-04-15T15:30:00+08:00", "### someday"))
    git(c, "commit", "-qam", "hand edit")
    a.save_interaction("plans", "q1", "a1", timestamp=T0 + timedelta(minutes=1))
    a.push()
    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=c,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode != 0
    assert "cannot merge sessions/3a/plans.md by meaning" in pulled.stderr
    assert "sessions/3a/plans.md (ours):" in pulled.stderr  # names the broken line
    assert "UU sessions/3a/plans.md" in git(c, "status", "--porcelain")


def test_sync_records_a_dropped_summary_in_the_merge_commit(tmp_path: Path) -> None:
    a, b = seeded_pair(bare(tmp_path).as_uri(), tmp_path)
    for mm, text, hours in ((a, "alice's summary", 1), (b, "bob's newer summary", 2)):
        current = mm.load_memory("plans")
        assert current is not None
        summary = Summary(text=text, generated=T0 + timedelta(hours=hours))
        mm.put_session(current.model_copy(update={"summary": summary}), op="summarize")
    a.sync()
    result = b.sync()
    assert result.action == "merge"
    assert [n.kind for n in result.notes] == ["summary"]
    merged = b.load_memory("plans")
    assert merged is not None and merged.summary is not None
    assert merged.summary.text == "bob's newer summary"
    message = git(b.path, "log", "-1", "--format=%B")
    assert "alice's summary" in message  # recorded in full, restorable
    assert "Gitmem-Op: merge" in message and "Gitmem-Conflicts: 1" in message
    assert len(git(b.path, "log", "-1", "--format=%P").split()) == 2
    assert_clean(b.path)


# --- bad input: clear errors, local memory untouched ---------------------------------------


def snapshot(store: Path) -> tuple[str, str]:
    files = "".join(p.read_text() for p in sorted(store.rglob("*.md")) if ".git" not in p.parts)
    return git(store, "rev-parse", "HEAD"), files


def test_unreachable_remote(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "q", "a")
    mm.remote_add("origin", f"git://127.0.0.1:{_free_port()}/memory.git")
    mm.remote_add("gone", (tmp_path / "nowhere.git").as_uri())
    before = snapshot(mm.path)
    for name in ("origin", "gone"):
        with pytest.raises(RepositoryError, match=f"cannot fetch from remote '{name}'"):
            mm.sync(name)
        with pytest.raises(RepositoryError, match=f"cannot push to remote '{name}'"):
            mm.push(name)
    with pytest.raises(RepositoryError, match="no remote named 'elsewhere'"):
        mm.pull("elsewhere")
    with pytest.raises(RepositoryError, match="cannot clone"):
        MemoryManager.clone((tmp_path / "nowhere.git").as_uri(), tmp_path / "c")
    assert not (tmp_path / "c").exists()
    assert snapshot(mm.path) == before
    assert_clean(mm.path)


def test_non_fast_forward_push_is_refused(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()
    a, b = seeded_pair(url, tmp_path)
    a.save_interaction("plans", "alice", "x", timestamp=T0 + timedelta(minutes=1))
    a.push()
    b.save_interaction("plans", "bob", "y", timestamp=T0 + timedelta(minutes=2))
    before = snapshot(b.path)
    remote_head = git(tmp_path, "ls-remote", url, "refs/heads/main")
    with pytest.raises(ConflictError, match="gitmem sync"):
        b.push()
    assert snapshot(b.path) == before
    assert git(tmp_path, "ls-remote", url, "refs/heads/main") == remote_head
    assert b.sync().pushed  # and sync resolves it
    assert contents(b, "plans")[-2:] == ["alice", "bob"]


def test_diverged_histories_with_an_unparseable_file(tmp_path: Path) -> None:
    a, b = seeded_pair(bare(tmp_path).as_uri(), tmp_path)
    path = b.path / "sessions" / "3a" / "plans.md"
    lines = path.read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("### "))
    lines[at] = "### not a time"
    path.write_text("\n".join(lines) + "\n")
    git(b.path, "commit", "-qam", "a broken hand edit")
    a.save_interaction("plans", "alice", "x", timestamp=T0 + timedelta(minutes=1))
    a.sync()
    before = snapshot(b.path)
    with pytest.raises(ConflictError) as caught:
        b.sync()
    assert f"sessions/3a/plans.md (ours):{at + 1}:" in str(caught.value)
    assert "Nothing was changed" in str(caught.value)
    assert snapshot(b.path) == before
    assert git(b.path, "status", "--porcelain") == ""


def test_uncommitted_hand_edit_in_the_way_stops_the_merge(tmp_path: Path) -> None:
    a, b = seeded_pair(bare(tmp_path).as_uri(), tmp_path)
    a.save_interaction("plans", "alice", "x", timestamp=T0 + timedelta(minutes=1))
    a.sync()
    path = b.path / "sessions" / "3a" / "plans.md"
    path.write_text(path.read_text() + "\nnot committed\n")
    head = b.head()
    with pytest.raises(ConflictError, match=r"uncommitted changes in sessions/3a/plans\.md"):
        b.pull()
    assert b.head() == head
    assert path.read_text().endswith("not committed\n")


def test_a_remote_that_is_not_a_gitmem_store(tmp_path: Path) -> None:
    other = tmp_path / "project"
    git(tmp_path, "init", "-q", "-b", "main", "project")
    (other / "main.py").write_text("print('hi')\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "code")
    mm = MemoryManager.init(tmp_path / "a")
    mm.remote_add("origin", other.as_uri())
    before = snapshot(mm.path)
    with pytest.raises(RepositoryError, match="is not a gitmem store"):
        mm.sync()
    with pytest.raises(RepositoryError, match="is not a gitmem store"):
        mm.pull()
    assert snapshot(mm.path) == before
    assert not (mm.path / "main.py").exists()
    with pytest.raises(RepositoryError, match="is not a gitmem store"):
        MemoryManager.clone(other.as_uri(), tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_cloned_stores_never_run_hooks_that_came_with_them(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()
    a = MemoryManager.clone(url, tmp_path / "a")
    a.save_interaction("s", "q", "a", timestamp=T0)
    marker = tmp_path / "hook-ran"
    for folder in ("hooks", ".githooks", ".git-hooks"):
        for name in ("pre-commit", "post-merge", "post-checkout", "pre-push"):
            script = a.path / folder / name
            script.parent.mkdir(exist_ok=True)
            script.write_text(f"#!/bin/sh\ntouch {marker}\n")
            script.chmod(0o755)
    git(a.path, "add", ".")
    git(a.path, "commit", "-qm", "ship some hooks")
    a.push()
    b = MemoryManager.clone(url, tmp_path / "b")
    b.save_interaction("s", "q2", "a2", timestamp=T0 + timedelta(minutes=1))
    a.save_interaction("s", "q3", "a3", timestamp=T0 + timedelta(minutes=2))
    a.sync()
    b.sync()
    b.pull()
    assert not marker.exists()
    assert git(b.path, "config", "--get", "core.hooksPath", check=False) == ""


def test_namespaces_keep_memories_apart_and_sync(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()
    alice = MemoryManager.clone(url, tmp_path / "a", namespace="alice")
    alice.save_interaction("private", "alice's secret", "ok", timestamp=T0)
    alice.sync()
    bob = MemoryManager.clone(url, tmp_path / "b", namespace="bob")
    assert bob.session_ids() == [] and bob.load_memory("private") is None
    assert bob.list_sessions() == [] and bob.check() == []
    bob.save_interaction("private", "bob's own", "ok", timestamp=T0)
    assert bob.namespaces() == ["alice", "bob"]
    bob_side_alice = MemoryManager(bob.path, namespace="alice")
    alice.save_interaction("private", "alice again", "ok", timestamp=T0 + timedelta(minutes=1))
    bob_side_alice.save_interaction(
        "private", "alice on b", "ok", timestamp=T0 + timedelta(minutes=2)
    )
    alice.sync()
    bob.sync()
    alice.sync()
    assert contents(alice, "private") == ["alice's secret", "alice again", "alice on b"]
    assert contents(bob, "private") == ["bob's own"]
    assert MemoryManager(alice.path).session_ids() == []  # the default namespace is empty
    assert (alice.path / "namespaces" / "bob" / "sessions" / "e8" / "private.md").exists()
    assert_clean(alice.path)


def test_sync_of_an_unborn_store_and_a_second_remote(tmp_path: Path) -> None:
    first = bare(tmp_path, "first.git").as_uri()
    second = bare(tmp_path, "second.git").as_uri()
    a = MemoryManager.clone(first, tmp_path / "a")
    a.save_interaction("s", "q", "a", timestamp=T0)
    assert a.sync().pushed
    a.remote_add("backup", second)
    assert [r.name for r in a.remotes()] == ["backup", "origin"]
    assert a.sync("backup").action == "empty-remote"
    assert a.push("backup") is False
    assert a.sync().action == "up-to-date"
    with pytest.raises(RepositoryError, match="exists already"):
        a.remote_add("backup", second)
    with pytest.raises(RepositoryError, match="invalid remote name"):
        a.remote_add("-x", second)


def test_store_made_by_plain_git_clone_of_a_gitmem_store_gets_the_driver(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()
    MemoryManager.clone(url, tmp_path / "a").sync()
    git(tmp_path, "clone", "-q", url, "c")
    assert git(tmp_path / "c", "config", "--get", "merge.gitmem.driver", check=False) == ""
    with MemoryManager(tmp_path / "c"):
        pass
    driver = git(tmp_path / "c", "config", "--get", "merge.gitmem.driver").strip()
    assert driver.endswith("-P -m gitmem.sync.driver %O %A %B %P")
    assert os.path.basename(driver.split()[0].strip("'")).startswith("python")


def test_session_created_on_both_sides_is_merged_without_a_base(tmp_path: Path) -> None:
    a, b = seeded_pair(bare(tmp_path).as_uri(), tmp_path)
    a.save_interaction("new", "from alice", "x", timestamp=T0 + timedelta(minutes=1))
    b.save_interaction("new", "from bob", "y", timestamp=T0 + timedelta(minutes=2))
    a.sync()
    b.sync()
    assert contents(b, "new") == ["from alice", "from bob"]
    merged = b.load_memory("new")
    assert isinstance(merged, Session) and merged.created == T0 + timedelta(minutes=1)
    assert_clean(b.path)


def test_async_manager_shares_too(tmp_path: Path) -> None:
    url = bare(tmp_path).as_uri()

    async def scenario() -> None:
        first = await AsyncMemoryManager.clone(url, tmp_path / "a", agent="alice")
        await first.save_interaction("s", "q", "a", timestamp=T0)
        result = await first.sync()
        assert result.pushed and [r.name for r in await first.remotes()] == ["origin"]
        second = await AsyncMemoryManager.clone(url, tmp_path / "b")
        assert await second.fetch() == result.after
        await first.close()
        await second.close()

    asyncio.run(scenario())
    assert git(tmp_path / "b", "status", "--porcelain") == ""


def test_a_namespace_that_cannot_be_a_folder_is_refused(store: Path) -> None:
    MemoryManager.init(store).close()
    with pytest.raises(InvalidSessionId, match="namespace ''"):
        MemoryManager(store, namespace="")
    with pytest.raises(InvalidSessionId, match="namespace ' x'"):
        MemoryManager(store, namespace=" x")
    odd = MemoryManager(store, namespace="team/alice")  # encoded, never a nested folder
    odd.save_interaction("s", "q", "a")
    assert (store / "namespaces" / "team%2Falice" / "sessions" / "a0" / "s.md").exists()
    assert odd.namespaces() == ["team/alice"]


def test_urls_with_a_password_are_refused(tmp_path: Path) -> None:
    mm = MemoryManager.init(tmp_path / "a")
    secret = "https://me:s3cret@example.invalid/memory.git"
    with pytest.raises(RepositoryError, match="never stores secrets") as caught:
        mm.remote_add("origin", secret)
    assert "s3cret" not in str(caught.value)
    with pytest.raises(RepositoryError, match="never stores secrets"):
        MemoryManager.clone(secret, tmp_path / "c")
    assert mm.remotes() == [] and "s3cret" not in (mm.path / ".git" / "config").read_text()


def test_archive_parts_merge_by_meaning_too(tmp_path: Path) -> None:
    a, b = seeded_pair(bare(tmp_path).as_uri(), tmp_path)
    for n in (1, 2):
        a.save_interaction("plans", f"alice {n}", "ok", timestamp=T0 + timedelta(minutes=n))
    a.sync()
    b.sync()
    for mm, count in ((a, 2), (b, 3)):  # both summarize, moving old turns to archive/plans.md
        mm.summary_config = SummaryConfig(archive="archive")
        mm.summarize("plans", count=count)
    b.save_interaction("plans", "bob 3", "ok", timestamp=T0 + timedelta(minutes=3))
    a.sync()
    result = b.sync()
    a.sync()
    assert "archive/3a/plans.md" in result.files and result.action == "merge"
    for mm in (a, b):
        full = mm.load_memory("plans", include_archive=True)
        assert full is not None
        assert [t.messages[0].content for t in full.interactions] == [
            "plans: first question",
            "alice 1",
            "alice 2",
            "bob 3",
        ]
        assert_clean(mm.path)
    assert "merge" in git(b.path, "check-attr", "merge", "archive/3a/plans.md")
