"""A person's ``git commit -a`` lands inside a rollback, revert, restore, summary or sync.

Each of them reads the session at one commit and swaps the branch against it; when the
person's commit changed the same file meanwhile (``BranchMoved``), they must compute their
change again from the new tip, as a save does, instead of stopping with "try again". The
person's commit is made to land between the read and the swap with the technique of
``test_person_commits`` (a hand-edited counter in the session's metadata).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitmem.errors import BranchMoved, ConflictError
from gitmem.format.paths import session_path
from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.reliability.conftest import ROOT, fsck_problems
from tests.reliability.test_person_commits import (
    SESSION,
    WIDTH,
    _counter,
    _hand_edit,
    _person_commits_during_the_save,
)


@pytest.fixture
def mm(store: Path) -> MemoryManager:
    mm = MemoryManager.init(store, agent="bot")
    mm.save_interaction(
        SESSION, "start", "ok", interaction_id="s0", metadata={"hand-counter": "0" * WIDTH}
    )
    return mm


def _landed(mm: MemoryManager, store: Path, sha: str | None, outcome: list[str]) -> bytes:
    """Check the person's commit went in just before the operation's commit (the one at
    HEAD, with nothing left over) and return the session file at HEAD."""
    assert outcome == ["accepted"]
    assert sha is not None and sha == git(store, "rev-parse", "HEAD").strip()
    assert git(store, "log", "--first-parent", "--format=%s", "-2").splitlines()[1] == "hand 7"
    assert git(store, "status", "--porcelain") == ""
    assert fsck_problems(store) == []
    data = mm.repository.read(session_path(SESSION))
    assert data is not None
    return data


def _turns(mm: MemoryManager) -> list[str]:
    session = mm.load_memory(SESSION)
    assert session is not None
    return [t.id for t in session.interactions]


def test_rollback_is_made_again_on_top(store: Path, mm: MemoryManager) -> None:
    target = git(store, "rev-parse", "HEAD").strip()
    wanted = mm.repository.read(session_path(SESSION))
    mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
    outcome = _person_commits_during_the_save(mm, store, 7)
    sha = mm.rollback(SESSION, to=target)
    # a rollback puts the file back as it was, the person's counter too: on purpose
    assert _landed(mm, store, sha, outcome) == wanted
    assert _turns(mm) == ["s0"]


def test_revert_is_made_again_on_top(store: Path, mm: MemoryManager) -> None:
    bad = mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
    mm.save_interaction(SESSION, "q2", "a2", interaction_id="s2")
    outcome = _person_commits_during_the_save(mm, store, 7)
    sha = mm.revert(bad)
    assert _counter(_landed(mm, store, sha, outcome)) == 7  # the person's change stays
    assert _turns(mm) == ["s0", "s2"]


def test_undoing_an_agent_is_made_again_on_top(store: Path, mm: MemoryManager) -> None:
    other = MemoryManager(store, agent="rogue")
    other.save_interaction(SESSION, "q1", "bad advice", interaction_id="s1")
    other.close()
    outcome = _person_commits_during_the_save(mm, store, 7)
    result = mm.revert_where(agent="rogue", dry_run=False)
    assert _counter(_landed(mm, store, result.commit, outcome)) == 7
    assert _turns(mm) == ["s0"]


def test_summary_is_made_again_on_top(store: Path, mm: MemoryManager) -> None:
    mm.save_interaction(
        SESSION, "Which book on asyncio?", "Try 'Using Asyncio in Python'.", interaction_id="s1"
    )
    outcome = _person_commits_during_the_save(mm, store, 7)
    sha = mm.summarize(SESSION, offline=True)
    assert _counter(_landed(mm, store, sha, outcome)) == 7
    session = mm.load_memory(SESSION)
    assert session is not None and session.summary is not None
    assert set(session.summary.covers) == {"s0", "s1"}
    assert (
        git(store, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip()
        == "summarize"
    )


def test_restore_looks_again_and_finds_the_persons_file(store: Path, mm: MemoryManager) -> None:
    mm.delete_session(SESSION)
    head = git(store, "rev-parse", "HEAD").strip()
    repo = mm.repository
    real = repo.worktree.prepare

    def prepare(changes: dict[str, bytes | None]) -> object:
        # the person brings the session back by hand, with their own change
        if not done:
            git(store, "checkout", "HEAD~1", "--", session_path(SESSION))
            _hand_edit(store / session_path(SESSION), 7)
            done.append(git(store, "commit", "-qam", "hand 7"))
        return real(changes)

    done: list[str] = []
    repo.worktree.prepare = prepare  # type: ignore[method-assign]
    with pytest.raises(ConflictError) as caught:
        mm.restore_session(SESSION)
    # looked again from the person's commit: the session exists, nothing to restore
    assert not isinstance(caught.value, BranchMoved)
    assert "exists" in str(caught.value)
    assert git(store, "rev-parse", "HEAD~1").strip() == head
    assert _counter((store / session_path(SESSION)).read_bytes()) == 7
    assert git(store, "status", "--porcelain") == ""


def _diverged(
    store: Path, tmp_path: Path, mm: MemoryManager, monkeypatch: pytest.MonkeyPatch, *, ours: bool
) -> None:
    """A remote one turn ahead of ``mm``'s store (which is one turn ahead too if ``ours``)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the merge driver runs as python -m gitmem
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    mm.remote_add("origin", remote.as_uri())
    mm.push()
    theirs = MemoryManager.clone(remote.as_uri(), tmp_path / "theirs", agent="them")
    theirs.save_interaction(SESSION, "from them", "ok", interaction_id="t1")
    theirs.push()
    theirs.close()
    if ours:
        mm.save_interaction(SESSION, "from us", "ok", interaction_id="u1")


@pytest.mark.parametrize("ours", [True, False], ids=["merge", "fast-forward"])
def test_sync_merges_again_on_top(
    store: Path, tmp_path: Path, mm: MemoryManager, monkeypatch: pytest.MonkeyPatch, ours: bool
) -> None:
    _diverged(store, tmp_path, mm, monkeypatch, ours=ours)
    outcome = _person_commits_during_the_save(mm, store, 7)
    result = mm.sync()
    assert result.action == "merge"  # a fast-forward no more, once the person committed
    data = _landed(mm, store, result.after, outcome)
    assert _counter(data) == 7
    assert sorted(_turns(mm)) == sorted(["s0", "t1", *(["u1"] if ours else [])])
    assert git(store, "rev-parse", "origin/main").strip() == result.after  # pushed
