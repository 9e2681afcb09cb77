"""Writer processes for the reliability suite, run as ``python -m tests.reliability.workers``.

Each worker prints one line per finished call, flushed, so the test knows exactly which
saves were acknowledged before it killed the process:

    ready                      the store is open
    begin <op> <session> <ids> an operation starts (ids: comma-separated interaction ids)
    ok <sha>                   the operation returned this commit id

``concurrent STORE TAG COUNT`` waits for ``go`` on stdin, then saves COUNT turns, half to
the shared session and half to its own. ``crash STORE TAG SEED [KILL_AT]`` saves, batches,
summarizes and deletes until it is killed; ``KILL_AT`` (``method:when:nth``) makes it
SIGKILL itself at that point of the repository layer instead of waiting to be killed.
``zygote`` forks crash writers on request (see :func:`zygote`). ``saver STORE SESSION
SECONDS`` waits for ``go``, then saves turns to one session for SECONDS (a person commits
hand edits to the same session meanwhile), printing ``ok <id> <sha>`` or ``fail <id> <error>``.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitmem.errors import GitmemError
from gitmem.manager import MemoryManager
from gitmem.store.indexfile import GitIndexFile
from gitmem.store.locks import WriteLock
from gitmem.store.objects import ObjectDatabase
from gitmem.store.revisions import Refs
from gitmem.store.worktree import WorkTree
from gitmem.summary.triggers import SummaryConfig

SHARED = "shared"
CRASH_SHARED = ("alpha", "beta/γ", "共享 会话")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def concurrent(store: str, tag: str, count: int) -> None:
    """Save ``count`` turns, alternating the shared session and this worker's own."""
    mm = MemoryManager(store, agent=tag, lock_timeout=120)
    say("ready")
    sys.stdin.readline()  # "go": every worker starts at once
    for n in range(count):
        session = SHARED if n % 2 == 0 else f"own-{tag}"
        iid = f"{tag}-{n}"
        say(f"begin save {session} {iid}")
        sha = mm.save_interaction(session, f"question {iid}", f"answer {iid}", interaction_id=iid)
        say(f"ok {sha}")
    mm.close()


def saver(store: str, session: str, seconds: float) -> None:
    """Save turns to ``session`` for ``seconds``; each outcome is one flushed line."""
    mm = MemoryManager(store, agent="saver", lock_timeout=120)
    say("ready")
    sys.stdin.readline()  # "go"
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        iid = f"s{n}"
        try:
            sha = mm.save_interaction(
                session, f"question {iid}", f"answer {iid}", interaction_id=iid
            )
        except GitmemError as exc:
            say(f"fail {iid} {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            continue
        say(f"ok {iid} {sha}")
    mm.close()
    say("done")


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


# the parts of a Repository whose methods a kill point names (``Part.method``)
PARTS: dict[str, type] = {
    cls.__name__: cls for cls in (GitIndexFile, ObjectDatabase, Refs, WorkTree, WriteLock)
}


def arm(kill_at: str) -> None:
    """Make the store SIGKILL this process at ``Part.method:when:nth``.

    ``when`` is ``before``, ``after`` or ``torn`` (``GitIndexFile.write``: write the first half
    of the new index to its temp file; ``WriteLock.locked_write`` of the index: the first
    half of the new bytes in place; then die).
    """
    target, when, nth = kill_at.split(":")
    part, _, method = target.partition(".")
    owner = PARTS[part]
    countdown = [int(nth)]
    original: Callable[..., Any] = getattr(owner, method)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if target == "WriteLock.write_journal" and not args[0]:
            return original(self, *args, **kwargs)  # count journal writes only
        if target == "WriteLock.locked_write" and Path(args[0]).name != "index":
            return original(self, *args, **kwargs)
        countdown[0] -= 1
        if countdown[0] > 0:
            return original(self, *args, **kwargs)
        if when == "before":
            _kill_self()
        if when == "torn":
            if target == "GitIndexFile.write":  # it swaps a whole new file in: cut the new file
                path, data = self.temps.name(), self.encode(args[0])
            else:
                path, data = Path(args[0]), args[1]
            handle = os.open(path, os.O_WRONLY | os.O_CREAT)
            os.pwrite(handle, data[: len(data) // 2], 0)
            _kill_self()
        result = original(self, *args, **kwargs)
        _kill_self()
        return result

    setattr(owner, method, wrapper)


def crash(store: str, tag: str, seed: int, kill_at: str | None = None) -> None:
    """Write a mix of operations until killed (or until ``kill_at`` fires), or until the
    process that started it is gone (a test run stopped half-way must not leave it
    writing)."""
    parent = os.getppid()
    rng = random.Random(seed)
    mm = MemoryManager(store, agent=f"crash-{tag}", lock_timeout=10)
    mm.summary_config = SummaryConfig(archive="archive", offline=True)
    say("ready")
    if kill_at:
        arm(kill_at)
    own: list[str] = []
    n = 0
    while os.getppid() == parent:
        roll = rng.random()
        n += 1
        if roll < 0.08 and own:
            victim = own.pop(rng.randrange(len(own)))
            say(f"begin delete {victim} -")
            sha: str | None = mm.delete_session(victim)
        elif roll < 0.14:
            session = rng.choice(CRASH_SHARED)
            ids = [f"{tag}-{n}-{k}" for k in range(3)]
            say(f"begin batch {session} {','.join(ids)}")
            with mm.batch(f"Batch {tag} {n}") as result:
                for iid in ids:
                    mm.save_interaction(session, f"batched {iid}", f"ok {iid}", interaction_id=iid)
            sha = result.commit
        elif roll < 0.18:
            session = rng.choice(CRASH_SHARED)
            say(f"begin summarize {session} -")
            try:
                sha = mm.summarize(session, offline=True)
            except GitmemError as exc:  # nothing new to summarize: not a failure here
                say(f"skip {type(exc).__name__}")
                continue
        else:
            own_session = roll < 0.45
            session = f"{tag}-own-{n}" if own_session else rng.choice(CRASH_SHARED)
            iid = f"{tag}-{n}"
            say(f"begin save {session} {iid}")
            text = f"message {iid} " + "x" * rng.choice([10, 200, 5000])
            sha = mm.save_interaction(session, text, f"reply {iid}", interaction_id=iid)
            if own_session:
                own.append(session)
        say(f"ok {sha}")


def zygote() -> None:
    """Fork crash writers on request, so that each starts without importing gitmem anew.

    Reads ``crash STORE TAG SEED OUTFILE [KILL_AT]`` lines; answers each with the writer's
    pid. The writer's output goes to OUTFILE, one flushed line at a time. Children are
    reaped by the kernel (SIGCHLD ignored), so a killed one disappears at once.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        command, store, tag, seed, outfile, *kill_at = line.split()
        assert command == "crash"
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            fd = os.open(outfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)  # a traceback lands beside the output it interrupts
            os.close(fd)
            try:
                crash(store, tag, int(seed), kill_at[0] if kill_at else None)
            finally:
                os._exit(1)  # never return into the zygote's loop
        say(str(pid))


def main(argv: list[str]) -> None:
    if argv == ["zygote"]:
        zygote()
        return
    command, store, tag, *rest = argv
    if command == "concurrent":
        concurrent(store, tag, int(rest[0]))
    elif command == "crash":
        crash(store, tag, int(rest[0]), rest[1] if len(rest) > 1 else None)
    elif command == "saver":
        saver(store, tag, float(rest[0]))
    else:
        raise SystemExit(f"unknown worker command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
