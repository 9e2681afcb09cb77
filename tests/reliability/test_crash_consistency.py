"""A writer killed with SIGKILL at any moment: acknowledged saves survive, files stay whole,
git stays consistent, and the next writer recovers the lock and saves at once."""

from __future__ import annotations

import contextlib
import os
import random
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.reliability.conftest import (
    SIZES,
    Zygote,
    alive,
    check_working_files,
    fsck_problems,
    kill_and_wait,
    unfinished_save,
)

ROUNDS = {"ci": 50, "full": 200}
# the longest a writer runs before it is killed (seconds after it opened the store)
MAX_LIFE = 0.5


@dataclass
class Ledger:
    """What the killed writers acknowledged, and what was in flight when each died."""

    saved: dict[str, str] = field(default_factory=dict)  # interaction id -> session
    deleted: set[str] = field(default_factory=set)  # sessions deleted (acknowledged)
    shas: list[str] = field(default_factory=list)
    last_output: str = ""

    def read(self, output: str) -> tuple[str, str, list[str]] | None:
        """Take in one writer's output; returns the operation it was killed in, if any."""
        pending: tuple[str, str, list[str]] | None = None
        self.last_output = output
        for line in output.splitlines():
            word, *rest = line.split(" ")
            if word == "begin":
                op, session, ids = rest[0], " ".join(rest[1:-1]), rest[-1]
                pending = (op, session, [] if ids == "-" else ids.split(","))
            elif word == "skip":
                pending = None
            elif word == "ok" and pending is not None:
                op, session, ids = pending
                if rest[0] != "None":
                    self.shas.append(rest[0])
                if op == "delete":
                    self.deleted.add(session)
                    for iid in [i for i, s in self.saved.items() if s == session]:
                        del self.saved[iid]
                for iid in ids:
                    self.saved[iid] = session
                pending = None
        return pending


def _present(reader: MemoryManager) -> Counter[str]:
    """Interaction ids in the files at HEAD (archived turns included), with counts."""
    found: Counter[str] = Counter()
    for sid in reader.session_ids():
        session = reader.load_memory(sid, include_archive=True)
        assert session is not None
        found.update(turn.id for turn in session.interactions)
    return found


def _git_locks(git_dir: Path) -> list[str]:
    """The lock files left in ``git_dir`` (gitmem's own write lock aside), with their start.

    A ``git gc`` the killed writer started can still be running and remove folders and locks
    while they are listed: what vanishes meanwhile was not left behind."""
    found = []
    for folder, _dirs, files in os.walk(git_dir):
        for name in files:
            if name.endswith(".lock") and name != "write.lock":
                with contextlib.suppress(FileNotFoundError):
                    found.append(f"{name}: {(Path(folder) / name).read_bytes()[:60]!r}")
    return found


@dataclass
class Checker:
    """Checks a store after each kill; keeps what it verified once (files that parse, a
    reader with a parse cache) so a round costs what changed, not the whole store."""

    store: Path
    ledger: Ledger = field(default_factory=Ledger)
    verified: set[str] = field(default_factory=set)
    reader: MemoryManager | None = None

    def after_kill(self, output: str) -> dict[str, Any]:
        """Every invariant that must hold after a kill and after the next writer's save."""
        store, ledger = self.store, self.ledger
        in_flight = ledger.read(output)
        # first as the dead writer left it, read with git only: gitmem would repair it
        lock_text = (store / ".git" / "gitmem" / "write.lock").read_bytes()
        journal_left = b'"files"' in lock_text
        stale_locks = _git_locks(store / ".git")
        assert check_working_files(store, self.verified) == []
        # objects and refs are whole at once; the index can be half-rewritten if the kill
        # hit its in-place write, and then the next gitmem call rebuilds it
        torn = fsck_problems(store)
        assert all("index file" in line for line in torn), torn
        history = set(git(store, "rev-list", "HEAD").split())
        assert set(ledger.shas) <= history, "an acknowledged commit is not on the branch"
        # a person commits an unrelated file with plain git before any gitmem call
        person = persons_commit(store, len(ledger.shas))
        # the next writer opens the store and saves: the dead one's locks are no obstacle
        began = time.monotonic()
        mm = MemoryManager(store, agent="next", lock_timeout=10)
        probe = f"next-{len(ledger.shas)}-{random.randrange(10**9)}"
        sha = mm.save_interaction("after-crash", "still there?", "yes", interaction_id=probe)
        took = time.monotonic() - began
        mm.close()
        assert sha is not None and git(store, "rev-parse", "HEAD").strip() == sha
        assert git(store, "status", "--porcelain") == ""
        assert git(store, "diff", "HEAD", "--stat") == ""
        if torn:
            assert fsck_problems(store) == []
        # every acknowledged save is in the files at HEAD, once
        if self.reader is None:
            self.reader = MemoryManager(store)
        present = _present(self.reader)
        doubled = [iid for iid, n in present.items() if n > 1]
        assert not doubled, f"saved twice: {doubled}"
        if in_flight and in_flight[0] == "delete":
            # the delete it died in may or may not have happened; if it did, its turns go
            doomed = {i for i, s in ledger.saved.items() if s == in_flight[1]}
            if not doomed & set(present):
                for iid in doomed:
                    del ledger.saved[iid]
        lost = [iid for iid in ledger.saved if iid not in present]
        assert not lost, f"acknowledged saves missing at HEAD: {lost[:5]}"
        unknown = set(present) - set(ledger.saved) - set(in_flight[2] if in_flight else [])
        assert not {i for i in unknown if not i.startswith("next-")}, ledger.last_output[-500:]
        if in_flight and in_flight[0] in ("save", "batch"):
            applied = [i for i in in_flight[2] if i in present]
            assert len(applied) in (0, len(in_flight[2])), "half a batch"
            ledger.saved.update((i, in_flight[1]) for i in applied)
        return {
            "in_flight": in_flight,
            "journal": journal_left,
            "stale_locks": stale_locks,
            "torn_index": bool(torn),
            "next_save": took,
            "person": person,
        }

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def _dead_gitmem_lock(lock: Path) -> bool:
    fields = dict(item.partition("=")[::2] for item in lock.read_text().split()[1:])
    return lock.read_text().startswith("gitmem pid=") and not alive(int(fields["pid"]))


def persons_commit(store: Path, n: int) -> str:
    """``git add other.txt && git commit`` as a person types it after a writer was killed,
    doing what git's messages advise: a lock file left by the dead writer is removed, an
    index it left half-written is rebuilt (``rm .git/index && git reset``). sessions/ must
    be exactly as HEAD has it in that commit; returns what the person had to do."""
    before = git(store, "rev-parse", "HEAD").strip()
    pending = unfinished_save(store)
    (store / "other.txt").write_text(f"a person's file {n} {random.random()}\n")
    how = "commit"
    for step in (["add", "other.txt"], ["commit", "-q", "-m", f"a person's commit {n}"]):
        for _ in range(4):
            done = subprocess.run(["git", *step], cwd=store, capture_output=True, text=True)
            if done.returncode == 0:
                break
            locked = re.search(r"Unable to create '([^']+\.lock)': File exists", done.stderr)
            if "index file corrupt" in done.stderr:
                (store / ".git" / "index").unlink()
                git(store, "reset", "-q")
                how = "rebuilt-index"
            elif locked and _dead_gitmem_lock(Path(locked.group(1))):
                Path(locked.group(1)).unlink()
                how = "removed-dead-lock"
            else:
                raise AssertionError(f"git {' '.join(step)}: {done.stderr}")
        else:
            raise AssertionError(f"git {' '.join(step)} kept failing")
    changed = set(git(store, "diff", "--name-only", "-z", before, "HEAD").split("\0")) - {""}
    if changed == {"other.txt"}:
        return how
    # a person who removes the lock of a writer killed after it staged its files and
    # before its branch moved commits that whole unfinished save: nothing is lost
    assert how == "removed-dead-lock", f"a person's commit changed {sorted(changed)}"
    assert changed - {"other.txt"} <= set(pending), sorted(changed)
    for path, (_old, new) in pending.items():
        found = git(store, "ls-tree", "HEAD", "--", path).split()
        assert (found[2] if found else None) == new, f"{path}: part of the unfinished save"
    return "took-unfinished-save"


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    forker = Zygote()
    yield forker
    forker.close()


def _run_and_kill(zygote: Zygote, store: Path, tag: str, seed: int, delay: float) -> str:
    """Start a writer, let it work for ``delay`` seconds, SIGKILL it; its output."""
    out = store.parent / f"{tag}.out"
    pid = zygote.spawn(out, str(store), tag, str(seed))
    time.sleep(delay)
    kill_and_wait(pid)
    text = out.read_text()
    assert text.startswith("ready\n")
    return text[len("ready\n") :]


@pytest.mark.parametrize("size", SIZES)
def test_random_kills_lose_nothing_acknowledged(
    store: Path, size: str, zygote: Zygote, figures: dict[str, Any]
) -> None:
    rounds = ROUNDS[size]
    rng = random.Random(20240415)
    MemoryManager.init(store).close()
    checker = Checker(store)
    recoveries = killed_mid_op = torn = 0
    stale: list[str] = []
    slowest = 0.0
    person: Counter[str] = Counter()
    for round_no in range(rounds):
        out = _run_and_kill(
            zygote, store, f"r{round_no}", rng.randrange(10**6), rng.uniform(0, MAX_LIFE)
        )
        result = checker.after_kill(out)
        killed_mid_op += result["in_flight"] is not None
        recoveries += result["journal"]
        stale += result["stale_locks"]
        torn += result["torn_index"]
        slowest = max(slowest, result["next_save"])
        person[result["person"]] += 1
    assert fsck_problems(store) == []
    checker.close()
    assert len(checker.ledger.shas) > rounds  # the writers got work done between kills
    figures.update(
        crash_rounds=rounds,
        recovered_rounds=rounds,
        acknowledged_ops=len(checker.ledger.shas),
        acknowledged_saves_present=len(checker.ledger.saved),
        saves_lost=0,
        killed_mid_operation=killed_mid_op,
        journal_recoveries=recoveries,
        torn_index_rebuilt=torn,
        stale_git_locks=stale,
        slowest_next_save_s=round(slowest, 2),
        persons_commit_after_kill=dict(person),
    )


# Deterministic kill points in the save path: (method, when, nth call after arming)
KILL_POINTS = [
    ("ObjectDatabase.flush", "before", 1),
    ("ObjectDatabase.flush", "after", 1),
    ("WriteLock.write_journal", "after", 1),  # journal written, nothing else
    ("WorkTree.place", "after", 1),  # working file written, index and ref not
    ("Refs.append_reflogs", "after", 1),  # reflog line written, index and ref not
    ("GitIndexFile.write", "before", 1),
    ("GitIndexFile.write", "torn", 1),  # new index file half written, not yet in place
    ("GitIndexFile.write", "torn", 5),
    ("Refs.move", "before", 1),  # index staged, ref not moved
    ("Refs.move", "after", 1),  # ref moved, git locks still held
    ("Refs.move", "after", 3),
    ("WorkTree.place", "after", 4),
]


@pytest.mark.parametrize(
    ("method", "when", "nth"), KILL_POINTS, ids=[f"{m}-{w}-{n}" for m, w, n in KILL_POINTS]
)
def test_kill_at_each_step_of_a_save(
    store: Path, zygote: Zygote, method: str, when: str, nth: int
) -> None:
    MemoryManager.init(store).close()
    checker = Checker(store)
    # a first writer leaves some history (and an index with several entries)
    checker.after_kill(_run_and_kill(zygote, store, "warm", 7, 0.2))
    out = store.parent / "armed.out"
    pid = zygote.spawn(out, str(store), "armed", "11", f"{method}:{when}:{nth}")
    deadline = time.monotonic() + 60
    while alive(pid):  # it kills itself at that step
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert checker.after_kill(out.read_text()[len("ready\n") :])["in_flight"] is not None
    checker.close()


def test_a_dead_writers_lock_file_names_it(store: Path, zygote: Zygote) -> None:
    MemoryManager.init(store).close()
    _run_and_kill(zygote, store, "named", 3, 0.2)
    owner = (store / ".git" / "gitmem" / "write.lock").read_text().splitlines()[0]
    fields = dict(item.split("=", 1) for item in owner.split())
    assert set(fields) >= {"pid", "host", "since"}
    done = subprocess.run(["kill", "-0", fields["pid"]], capture_output=True)
    assert done.returncode != 0  # that process is gone; its lock went with it
