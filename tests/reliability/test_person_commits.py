"""A person commits hand edits with the real ``git`` while gitmem saves to the same session.

Invariant: every change in a commit that git accepted stays in HEAD unless a later commit
changed it on purpose. The saver (a separate process) appends turns; the person bumps a
counter in the session's metadata in place (same length, so their editor never rewrites
the file from a stale copy) and runs ``git commit -a`` in a loop. Both sides' accepted
changes must be in HEAD at the end, and the working tree clean.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gitmem.format.paths import session_path
from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.reliability.conftest import SIZES, fsck_problems, worker

SECONDS = {"ci": 4.0, "full": 30.0}
SESSION = "hand"
MARK = b"- **hand-counter**: "
WIDTH = 6


def _counter(data: bytes) -> int:
    at = data.index(MARK) + len(MARK)
    return int(data[at : at + WIDTH])


def _hand_edit(file: Path, value: int) -> None:
    """Set the counter in place: one pwrite into the file as it is now."""
    fd = os.open(file, os.O_RDWR)
    try:
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        at = data.index(MARK) + len(MARK)
        os.pwrite(fd, f"{value:0{WIDTH}d}".encode(), at)
    finally:
        os.close(fd)


def _commit(store: Path, value: int) -> str:
    """``git commit -a`` as a person types it; what git made of it."""
    done = subprocess.run(
        ["git", "commit", "-a", "-q", "-m", f"hand {value}"], cwd=store, capture_output=True
    )
    text = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode == 0:
        return "accepted"
    if "nothing to commit" in text or "no changes added" in text:
        return "nothing"  # the edit was taken in by a save, or replaced before git saw it
    if "index.lock" in text:
        return "index-locked"
    if "cannot lock ref" in text:
        return "ref-moved"
    if "index file corrupt" in text:
        return "index-read-mid-write"  # gitmem rewrites the index in place
    if "Changes to be committed" in text:
        return "status-raced"  # HEAD moved while git compared it with the index
    return "other: " + " ".join(text.split())[:200]


@pytest.mark.parametrize("size", SIZES)
def test_a_persons_commits_and_the_saves_both_stay(
    store: Path, size: str, figures: dict[str, Any]
) -> None:
    seconds = SECONDS[size]
    path = session_path(SESSION)
    mm = MemoryManager.init(store)
    mm.save_interaction(
        SESSION, "start", "ok", interaction_id="s0", metadata={"hand-counter": "0" * WIDTH}
    )
    mm.close()
    saver = worker("saver", str(store), SESSION, str(seconds), stdin=True)
    assert saver.stdin is not None and saver.stdout is not None
    assert saver.stdout.readline().strip() == "ready"
    saver.stdin.write("go\n")
    saver.stdin.flush()
    outcomes: Counter[str] = Counter()
    accepted: list[int] = []
    others: list[str] = []
    value = 0
    began = time.monotonic()
    while saver.poll() is None:
        value += 1
        _hand_edit(store / path, value)
        outcome = _commit(store, value)
        outcomes[outcome.split(":")[0]] += 1
        if outcome.startswith("other"):
            others.append(outcome)
        if outcome == "accepted":
            accepted.append(value)
    out, err = saver.communicate(timeout=60)
    elapsed = time.monotonic() - began
    assert saver.returncode == 0, err
    # the person's last edit goes in once the saver has stopped
    value += 1
    _hand_edit(store / path, value)
    assert _commit(store, value) == "accepted"
    accepted.append(value)

    lines = out.splitlines()
    acked = {ln.split()[1] for ln in lines if ln.startswith("ok ")} | {"s0"}
    failed = [ln for ln in lines if ln.startswith("fail ")]
    reader = MemoryManager(store)
    repo = reader.repository
    # the counter at every commit of the branch, oldest first
    chain = git(store, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    subjects = dict(
        line.split(" ", 1)
        for line in git(store, "log", "--first-parent", "--format=%H %s").splitlines()
    )
    values: list[int] = []
    for sha in chain:
        data = repo.read(path, sha)
        values.append(_counter(data) if data is not None and MARK in data else 0)
    lowest_after = values[:]
    for at in range(len(values) - 2, -1, -1):
        lowest_after[at] = min(values[at], lowest_after[at + 1])
    position = {subjects[sha]: at for at, sha in enumerate(chain)}
    lost_commits = []
    for n in accepted:
        at = position.get(f"hand {n}")
        assert at is not None, f"the person's commit 'hand {n}' is not on the branch"
        assert values[at] == n
        if lowest_after[at] < n:  # a later commit put an older counter back
            lost_commits.append(n)
    session = reader.load_memory(SESSION, include_archive=True)
    assert session is not None
    present = {turn.id for turn in session.interactions}
    lost_saves = sorted(acked - present)
    adopted = sum(1 for sha in chain if "Record hand edit" in subjects[sha])
    reader.close()
    figures.update(
        seconds=round(elapsed, 1),
        persons_commits_accepted=len(accepted),
        persons_commits_kept=len(accepted) - len(lost_commits),
        person_attempts=value,
        person_outcomes=dict(outcomes),
        person_other_outcomes=others[:3],
        saves_acknowledged=len(acked),
        saves_kept=len(acked) - len(lost_saves),
        saves_failed=len(failed),
        save_failures=failed[:3],
        hand_edits_adopted_by_saves=adopted,
        commits=len(chain),
    )
    assert not lost_commits, (
        f"{len(lost_commits)} of {len(accepted)} accepted person's "
        f"commits were overwritten, e.g. hand {lost_commits[:5]}"
    )
    assert not lost_saves, f"acknowledged saves missing at HEAD: {lost_saves[:5]}"
    assert len(accepted) > 1 and len(acked) > 1  # both sides got work done
    assert git(store, "status", "--porcelain") == ""
    assert values[-1] == value
    assert fsck_problems(store) == []


def _person_commits_during_the_save(mm: MemoryManager, store: Path, value: int) -> list[str]:
    """Make a person's ``git commit -a`` land after the next save has read the session and
    before it moves the branch (while it prepares its working file); returns its outcome."""
    repo = mm.repository
    real = repo.worktree.prepare
    done: list[str] = []

    def prepare(changes: dict[str, bytes | None]) -> Any:
        if not done:
            _hand_edit(store / session_path(SESSION), value)
            done.append(_commit(store, value))
        return real(changes)

    repo.worktree.prepare = prepare  # type: ignore[method-assign]
    return done


@pytest.mark.parametrize("batched", [False, True], ids=["save", "batch"])
def test_a_commit_landing_inside_a_save_is_kept(store: Path, batched: bool) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction(
        SESSION, "start", "ok", interaction_id="s0", metadata={"hand-counter": "0" * WIDTH}
    )
    outcome = _person_commits_during_the_save(mm, store, 7)
    if batched:
        with mm.batch("Two turns") as result:
            mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
            mm.save_interaction("other", "q2", "a2", interaction_id="s2")
        sha = result.commit
    else:
        sha = mm.save_interaction(SESSION, "q1", "a1", interaction_id="s1")
    assert outcome == ["accepted"]
    assert sha == git(store, "rev-parse", "HEAD").strip()
    assert git(store, "log", "--format=%s", "-2").splitlines()[1] == "hand 7"
    data = mm.repository.read(session_path(SESSION))
    assert data is not None and _counter(data) == 7  # the person's change
    session = mm.load_memory(SESSION)
    assert session is not None and [t.id for t in session.interactions] == ["s0", "s1"]
    assert git(store, "status", "--porcelain") == ""
    mm.close()
