"""sync under contention: jittered backoff between rounds, a bounded total wait, and a
message that says what happened (a remote ref locked by another push is not "commits you
lack"). The remote is a real bare repository whose pre-receive hook holds its branch lock
the way a concurrent push does."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import ConflictError, RemoteBusy
from gitmem.sync import methods as sharing
from tests.conftest import git

HOOK = """#!/bin/sh
# the first {busy} pushes find refs/heads/main locked, as while another push is running
n=$(cat pushes 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > pushes
if [ "$n" -le {busy} ]; then : > refs/heads/main.lock; else rm -f refs/heads/main.lock; fi
"""


# another writer's push lands while ours is in flight: the branch moves under our push
MOVER = """#!/bin/sh
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
tree=$(git rev-parse 'main^{tree}')
new=$(git commit-tree -p main -m 'another writer' "$tree")
git update-ref refs/heads/main "$new"
"""


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(sharing, "_sleep", waited.append)
    return waited


def _store_with_busy_remote(tmp_path: Path, busy: int) -> MemoryManager:
    return _store_with_remote_hook(tmp_path, HOOK.format(busy=busy))


def _store_with_remote_hook(tmp_path: Path, pre_receive: str) -> MemoryManager:
    """A store pushed once to a bare remote whose pre-receive hook is then ``pre_receive``,
    with one more turn saved to sync."""
    bare = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "hello", "hi")
    mm.remote_add("origin", bare.as_uri())
    mm.push()
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(pre_receive)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    mm.save_interaction("s", "second", "turn")
    return mm


def test_sync_waits_and_retries_while_the_remote_ref_is_locked(
    tmp_path: Path, pauses: list[float]
) -> None:
    mm = _store_with_busy_remote(tmp_path, busy=3)
    result = mm.sync()
    assert result.pushed and result.attempts == 4
    assert len(pauses) == 3
    # exponential with jitter: each pause within ±50 % of 0.1 s, 0.2 s, 0.4 s
    for n, pause in enumerate(pauses):
        assert 0.05 * 2**n <= pause <= 0.15 * 2**n
    remote = tmp_path / "memory.git"
    assert git(remote, "rev-parse", "main") == git(mm.path, "rev-parse", "HEAD")


def test_a_remote_locked_throughout_is_reported_as_locked(
    tmp_path: Path, pauses: list[float]
) -> None:
    mm = _store_with_busy_remote(tmp_path, busy=100)
    head = mm.head()
    with pytest.raises(RemoteBusy) as caught:
        mm.sync(attempts=4)
    message = str(caught.value)
    assert "gave up after 4 rounds" in message and "locked by another push" in message
    assert "commits this store does not have" not in message
    assert len(pauses) == 3 and mm.head() == head


def test_the_total_wait_is_bounded(tmp_path: Path, pauses: list[float]) -> None:
    mm = _store_with_busy_remote(tmp_path, busy=100)
    with pytest.raises(RemoteBusy, match="gave up after"):
        mm.sync(attempts=50, max_wait=1.0)
    assert sum(pauses) <= 1.0
    assert all(pause <= 2.0 for pause in pauses)


def test_new_remote_commits_each_round_are_reported_as_such(
    tmp_path: Path, pauses: list[float]
) -> None:
    mm = _store_with_remote_hook(tmp_path, MOVER)
    with pytest.raises(ConflictError) as caught:
        mm.sync(attempts=3)
    assert not isinstance(caught.value, RemoteBusy)
    message = str(caught.value)
    assert "gave up after 3 rounds" in message and "pushed new commits" in message
    assert len(pauses) == 2


def test_the_hints_name_a_remote_other_than_origin(tmp_path: Path, pauses: list[float]) -> None:
    bare = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    mm = MemoryManager.init(tmp_path / "a")
    mm.save_interaction("s", "hello", "hi")
    mm.remote_add("backup", bare.as_uri())
    mm.push("backup")
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(MOVER)
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    mm.save_interaction("s", "second", "turn")
    with pytest.raises(ConflictError) as caught:
        mm.push("backup")
    assert "Run `gitmem sync backup`" in str(caught.value)  # plain `gitmem sync` syncs origin
    with pytest.raises(ConflictError) as caught:
        mm.sync("backup", attempts=2)
    assert "run `gitmem sync backup` again" in str(caught.value)
