"""Many writers at once, in processes and threads: every save lands exactly once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.reliability.conftest import SIZES, fsck_problems, worker

# (processes, threads, saves each)
SIZE = {"ci": (8, 8, 15), "full": (8, 8, 100)}


def _thread_writer(
    mm: MemoryManager,
    tag: str,
    count: int,
    start: threading.Event,
    acked: list[tuple[str, str | None]],
) -> None:
    start.wait()
    for n in range(count):
        session = "shared" if n % 2 == 0 else f"own-{tag}"
        iid = f"{tag}-{n}"
        acked.append(
            (
                iid,
                mm.save_interaction(
                    session, f"question {iid}", f"answer {iid}", interaction_id=iid
                ),
            )
        )


@pytest.mark.parametrize("size", SIZES)
def test_processes_and_threads_lose_no_save(
    store: Path, size: str, figures: dict[str, Any]
) -> None:
    n_procs, n_threads, count = SIZE[size]
    MemoryManager.init(store).close()
    procs = [
        worker("concurrent", str(store), f"p{w}", str(count), stdin=True) for w in range(n_procs)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    # half the threads share one manager, the others open their own
    shared_mm = MemoryManager(store, agent="threads", lock_timeout=120)
    managers = [
        shared_mm if t % 2 == 0 else MemoryManager(store, agent=f"t{t}", lock_timeout=120)
        for t in range(n_threads)
    ]
    start = threading.Event()
    acked: list[tuple[str, str | None]] = []
    threads = [
        threading.Thread(target=_thread_writer, args=(managers[t], f"t{t}", count, start, acked))
        for t in range(n_threads)
    ]
    for thread in threads:
        thread.start()
    began = time.monotonic()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    start.set()
    for thread in threads:
        thread.join()
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        lines = out.splitlines()
        begun = [ln.split()[3] for ln in lines if ln.startswith("begin ")]
        shas = [ln.split()[1] for ln in lines if ln.startswith("ok ")]
        assert len(begun) == len(shas) == count
        acked += list(zip(begun, shas, strict=True))
    elapsed = time.monotonic() - began
    for mm in {id(m): m for m in managers}.values():
        mm.close()

    attempted = (n_procs + n_threads) * count
    assert len(acked) == attempted
    # every call returned its own new commit, and every one of them is on the branch
    shas = [sha for _iid, sha in acked]
    assert None not in shas and len(set(shas)) == attempted
    history = git(store, "rev-list", "HEAD").split()
    assert len(history) == attempted + 1  # plus the store's first commit
    assert set(shas) <= set(history)
    # every save is in the files at HEAD exactly once, in each writer's own order
    reader = MemoryManager(store)
    present: Counter[str] = Counter()
    for sid in reader.session_ids():
        session = reader.load_memory(sid)
        assert session is not None
        ids = [turn.id for turn in session.interactions]
        present.update(ids)
        for tag in {i.rsplit("-", 1)[0] for i in ids}:
            mine = [int(i.rsplit("-", 1)[1]) for i in ids if i.rsplit("-", 1)[0] == tag]
            assert mine == sorted(mine), f"{sid}: {tag}'s turns out of order"
    reader.close()
    expected = {iid for iid, _sha in acked}
    assert set(present) == expected
    assert all(n == 1 for n in present.values())
    assert fsck_problems(store) == []
    assert git(store, "status", "--porcelain") == ""
    figures.update(
        saves_attempted=attempted,
        saves_present=len(present),
        saves_lost=attempted - len(present),
        commits=len(history),
        processes=n_procs,
        threads=n_threads,
        seconds=round(elapsed, 1),
    )
