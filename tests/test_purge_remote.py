"""A purge reaches the remote and every clone: ``push`` with a lease and the record of
purges, ``sync`` applying a purge made elsewhere to a clone's own unpushed commits, and a
stale clone that can never bring the content back. Real ``git``, a bare remote on disk and
a ``git daemon`` on 127.0.0.1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.errors import ConflictError
from gitmem.format.paths import session_path
from gitmem.store.purgelog import known_records, learn_rule
from tests.conftest import git
from tests.test_sync_remotes import bare, daemon  # noqa: F401 (the fixture is used by name)

PASSPORT = "X-PASSPORT-7731"


@pytest.fixture(params=["git-daemon", "file"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """The remote's URL and its bare repository on disk."""
    if request.param == "file":
        path = bare(tmp_path)
        return path.as_uri(), path
    base, url = request.getfixturevalue("daemon")
    return f"{url}/memory.git", bare(base)


def reachable_objects(repo: Path) -> bytes:
    """The content of every object the repository's refs reach."""
    listed = git(repo, "rev-list", "--objects", "--all")
    shas = "".join(line.split()[0] + "\n" for line in listed.splitlines())
    done = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=repo, input=shas.encode(), capture_output=True
    )
    return done.stdout


def all_objects(repo: Path) -> bytes:
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True
    )
    return done.stdout


def assert_store_free_of(store: Path, text: str) -> None:
    assert text.encode() not in all_objects(store)
    assert text not in git(store, "log", "--all", "-p")
    git(store, "fsck", "--strict")
    assert git(store, "status", "--porcelain") == ""


def turns(mm: MemoryManager, sid: str) -> list[str]:
    found = mm.load_memory(sid)
    assert found is not None
    return [t.messages[0].content for t in found.interactions]


def test_a_purge_reaches_the_remote_and_every_clone(
    remote: tuple[str, Path], tmp_path: Path
) -> None:
    url, served = remote
    a = MemoryManager.clone(url, tmp_path / "a", agent="alice")
    a.save_interaction("s1", "first, harmless", "fine")
    a.save_interaction("s1", f"my passport is {PASSPORT}", "noted")
    a.save_interaction("s2", "another session", "ok")
    a.sync()
    b = MemoryManager.clone(url, tmp_path / "b", agent="bob")
    stale = MemoryManager.clone(url, tmp_path / "stale", agent="carol")
    # b works on, unpushed: a turn in the purged session, one repeating the text, a new session
    b.save_interaction("s1", "b's own question", "b's own answer")
    b.save_interaction("s3", f"b saw {PASSPORT} again", "hm")
    b.save_interaction("s4", "b's new session", "kept")
    b_before = {sid: turns(b, sid) for sid in ("s1", "s2", "s3", "s4")}

    report = a.purge(text=PASSPORT)
    assert a.push() is True
    # the remote holds the new history and the record; no reachable object holds the text
    assert (
        git(served, "rev-parse", "main").strip() == git(tmp_path / "a", "rev-parse", "HEAD").strip()
    )
    assert report.id in git(served, "ls-tree", "--name-only", "refs/gitmem/purges")
    assert PASSPORT.encode() not in reachable_objects(served)
    assert_store_free_of(tmp_path / "a", PASSPORT)

    # a clone with unpushed work: rebuilt on the new history, its own changes kept, pushed
    result = b.sync()
    assert result.purges == [report.id] and result.pushed
    assert_store_free_of(tmp_path / "b", PASSPORT)
    expected = {
        "s1": ["first, harmless", "my passport is [purged]", "b's own question"],
        "s2": b_before["s2"],
        "s3": ["b saw [purged] again"],
        "s4": b_before["s4"],
    }
    assert {sid: turns(b, sid) for sid in expected} == expected
    # the commits the purge rewrote have the same ids in both clones
    for old, new in ((c.commit, c.new) for c in report.commits):
        assert git(tmp_path / "b", "cat-file", "-t", new).strip() == "commit"
        assert git(tmp_path / "b", "cat-file", "-e", old, check=False) == ""
    assert PASSPORT.encode() not in reachable_objects(served)

    # a stale clone (made before the purge, never synced): its push is refused, not forced
    with pytest.raises(ConflictError, match="sync"):
        stale.push()
    assert PASSPORT.encode() not in reachable_objects(served)
    stale.sync()
    assert_store_free_of(tmp_path / "stale", PASSPORT)
    assert {sid: turns(stale, sid) for sid in expected} == expected

    # a plain git push of the old history is refused by the remote (not a fast-forward)
    a.sync()
    assert {sid: turns(a, sid) for sid in expected} == expected
    assert git(served, "fsck", "--strict", "--no-dangling") == ""


def test_a_clone_pushing_first_gets_its_commits_rebuilt_by_the_purger(
    tmp_path: Path,
) -> None:
    """The remote took a clone's commits on the old history before the purge was pushed:
    the purging store's sync rebuilds them (the text taken out of them too) and replaces
    the remote's branch with a lease."""
    served = bare(tmp_path)
    url = served.as_uri()
    a = MemoryManager.clone(url, tmp_path / "a", agent="alice")
    a.save_interaction("s1", f"my passport is {PASSPORT}", "noted")
    a.sync()
    b = MemoryManager.clone(url, tmp_path / "b", agent="bob")
    b.save_interaction("s1", f"again {PASSPORT}", "sure")
    b.save_interaction("s2", "b only", "ok")
    b.sync()

    a.purge(text=PASSPORT)
    with pytest.raises(ConflictError, match="sync"):
        a.push()  # the remote moved: never forced
    result = a.sync()
    assert result.pushed
    assert_store_free_of(tmp_path / "a", PASSPORT)
    assert PASSPORT.encode() not in reachable_objects(served)
    assert turns(a, "s1") == ["my passport is [purged]", "again [purged]"]
    assert turns(a, "s2") == ["b only"]
    b.sync()
    assert_store_free_of(tmp_path / "b", PASSPORT)
    assert turns(b, "s1") == turns(a, "s1") and turns(b, "s2") == ["b only"]


def test_a_session_purge_keeps_a_clones_new_turns_of_it(tmp_path: Path) -> None:
    served = bare(tmp_path)
    url = served.as_uri()
    a = MemoryManager.clone(url, tmp_path / "a")
    a.save_interaction("gone", "private one", "private answer")
    a.save_interaction("stay", "public", "ok")
    a.sync()
    b = MemoryManager.clone(url, tmp_path / "b")
    b.save_interaction("stay", "b adds", "fine")
    a.purge(session="gone")
    a.push()
    b.sync()
    assert_store_free_of(tmp_path / "b", "private one")
    assert not (tmp_path / "b" / session_path("gone")).exists()
    assert turns(b, "stay") == ["public", "b adds"]


def purged_behind_a_stale_clone(
    tmp_path: Path, own_session: str, *, hooks: bool
) -> tuple[Path, Path, MemoryManager]:
    """A remote whose passport was purged and pushed, and a clone made before the purge
    with a turn of its own in ``own_session``: (remote, clone's folder, clone)."""
    served = bare(tmp_path)
    url = served.as_uri()
    a = MemoryManager.clone(url, tmp_path / "a")
    a.save_interaction("s1", f"my passport is {PASSPORT}", "noted")
    a.sync()
    stale_path = tmp_path / "stale"
    stale = MemoryManager.clone(url, stale_path)
    if hooks:
        stale.install_hooks()
    stale.save_interaction(own_session, "the stale clone's own", "ok")
    a.purge(text=PASSPORT)
    a.push()
    return served, stale_path, stale


def test_plain_git_cannot_bring_purged_commits_back(tmp_path: Path) -> None:
    """A stale clone with gitmem's hooks: ``git push --force``, ``git pull`` and ``git pull
    --rebase`` are refused; ``gitmem sync`` applies the purge and keeps its own turn."""
    served, stale_path, stale = purged_behind_a_stale_clone(tmp_path, "s2", hooks=True)

    forced = subprocess.run(
        ["git", "push", "--force", "origin", "main"], cwd=stale_path, capture_output=True, text=True
    )
    assert forced.returncode != 0 and "gitmem sync" in forced.stderr, forced.stderr
    assert PASSPORT.encode() not in reachable_objects(served)
    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=stale_path,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode != 0 and "would bring back commits that purge" in pulled.stderr
    git(stale_path, "merge", "--abort")
    rebased = subprocess.run(
        ["git", "pull", "--rebase", "origin", "main"],
        cwd=stale_path,
        capture_output=True,
        text=True,
    )
    assert rebased.returncode != 0 and "this rebase would bring back" in rebased.stderr
    assert not (stale_path / ".git" / "rebase-merge").exists()

    stale.sync()
    assert_store_free_of(stale_path, PASSPORT)
    assert turns(stale, "s2") == ["the stale clone's own"]
    assert PASSPORT.encode() not in reachable_objects(served)


def test_the_merge_driver_refuses_to_join_purged_history(tmp_path: Path) -> None:
    """No hooks installed: a plain ``git pull`` of a stale clone that changed the purged
    session stops in the merge driver, with the advice, and nothing comes back."""
    served, stale_path, stale = purged_behind_a_stale_clone(tmp_path, "s1", hooks=False)
    git(stale_path, "fetch", "-q", "origin")  # the record comes with a plain fetch
    assert git(stale_path, "for-each-ref", "refs/gitmem/from/origin/")
    pulled = subprocess.run(
        ["git", "pull", "--no-rebase", "--no-edit", "origin", "main"],
        cwd=stale_path,
        capture_output=True,
        text=True,
    )
    assert pulled.returncode != 0
    assert "would bring back commits that purge" in pulled.stdout + pulled.stderr
    git(stale_path, "merge", "--abort")
    stale.sync()
    assert_store_free_of(stale_path, PASSPORT)
    assert turns(stale, "s1") == ["my passport is [purged]", "the stale clone's own"]
    assert PASSPORT.encode() not in reachable_objects(served)


def test_a_purge_in_a_clone_moves_its_remote_head_with_the_branch(tmp_path: Path) -> None:
    served = bare(tmp_path)
    first = MemoryManager.clone(served.as_uri(), tmp_path / "first")
    first.save_interaction("s1", f"my passport is {PASSPORT}", "noted")
    first.sync()
    clone = MemoryManager.clone(served.as_uri(), tmp_path / "clone")
    assert git(tmp_path / "clone", "symbolic-ref", "refs/remotes/origin/HEAD").strip()
    clone.purge(text=PASSPORT)
    assert_store_free_of(tmp_path / "clone", PASSPORT)
    assert git(tmp_path / "clone", "symbolic-ref", "refs/remotes/origin/HEAD").strip()
    assert clone.push() is True
    assert PASSPORT.encode() not in reachable_objects(served)


def test_a_clone_learns_exactly_what_a_purge_removed(tmp_path: Path) -> None:
    served = bare(tmp_path)
    a = MemoryManager.clone(served.as_uri(), tmp_path / "a")
    a.save_interaction("s1", f"my passport is {PASSPORT}", "noted")
    a.save_interaction("s1", "a later turn", "ok")
    a.sync()
    b = MemoryManager.clone(served.as_uri(), tmp_path / "b")
    report = a.purge(text=PASSPORT)
    a.push()
    b.fetch()
    repo = b._store.repo
    rule = learn_rule(repo, known_records(repo))
    assert rule.substitutions[PASSPORT.encode()] == b"[purged]"
    assert not any(b"[purged]" in gone for gone in rule.substitutions)  # never the other way
    assert rule.verified == {report.id}  # the salted hash confirms the text
    assert rule.blob("x.md", b"a line about " + PASSPORT.encode()) == b"a line about [purged]"
