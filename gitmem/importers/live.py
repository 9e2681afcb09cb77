"""Live capture: import a session again each time its agent says it saved a turn.

An agent that announces every persisted turn (nanobot's ``SessionTurnPersisted``, see
:mod:`gitmem.importers.nanobot_live`) keeps a store in step without polling: a
:class:`Capture` takes the session key from the announcement and imports that session with
the importer a batch import uses, so interaction ids match and a later ``gitmem import``
finds nothing new. Imports run one at a time on a worker thread, never on the agent's
event loop, and never raise into the agent: a failure is logged and the next turn tries
again (imports are additive, so the turn that failed comes with the next one).

One persisted turn normally gives one commit; announcements for a session whose import has
not started yet are merged into it (the import reads the file as it is then), so a burst of
turns may share a commit, and a turn that changed nothing (a command, an unchanged file)
makes none. Queued imports finish before the interpreter exits (the worker belongs to a
``ThreadPoolExecutor``, which Python joins at exit), so stopping the agent never cuts a
commit short.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gitmem.errors import GitmemError
from gitmem.importers import nanobot
from gitmem.importers.engine import ImportResult, run_import
from gitmem.importers.nanobot_memory import MEMORY_FILES
from gitmem.importers.watch import Snapshot, snapshot
from gitmem.manager import MemoryManager

log = logging.getLogger("gitmem.importers.live")

Importer = Callable[[MemoryManager, Sequence[str]], ImportResult]


class Capture:
    """Imports the sessions named by :meth:`persisted` into the store at ``store``
    (created on first use), one import at a time, off the caller's thread.

    Args:
        store: the gitmem store's folder.
        importer: ``importer(mm, keys)`` imports those session keys (e.g.
            ``import_nanobot(mm, workspace, keys=keys)``).
        agent: the author of the commits (``Gitmem-Agent``).
        via: the ``Gitmem-Via`` trailer, naming this way in.
        namespace: the namespace the sessions go to (None: the store's default one).
    """

    def __init__(
        self,
        store: str | os.PathLike[str],
        importer: Importer,
        *,
        agent: str = "gitmem",
        via: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.store = Path(store)
        self.namespace = namespace
        self.importer = importer
        self.agent = agent
        self.via = via
        self.imports = 0  # imports that ran (whether or not they committed)
        self.failures = 0
        self.last: ImportResult | None = None
        self._mm: MemoryManager | None = None
        self._waiting: set[str] = set()
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gitmem-capture")

    def persisted(self, key: str) -> None:
        """A turn of session ``key`` was saved: import it soon. Quick, never raises."""
        try:
            with self._lock:
                if key in self._waiting:  # its import has not read the file yet
                    return
                self._waiting.add(key)
            self._worker.submit(self._import, key)
        except Exception:  # e.g. submitted during interpreter shutdown
            log.exception("gitmem: could not queue the import of session %r", key)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every import queued so far has run (the worker keeps their order)."""
        self._worker.submit(lambda: None).result(timeout)

    def close(self) -> None:
        """Run the queued imports, then stop the worker and close the store."""
        self._worker.shutdown(wait=True)
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _import(self, key: str) -> None:
        with self._lock:
            self._waiting.discard(key)  # a turn saved from now on needs another import
        try:
            if self._mm is None:
                self._mm = MemoryManager(
                    self.store,
                    init=True,
                    agent=self.agent,
                    via=self.via,
                    namespace=self.namespace,
                )
            self.imports += 1
            result = self.importer(self._mm, [key])
        except (GitmemError, OSError) as exc:  # the message says what and where
            self.failures += 1
            log.error(
                "gitmem: importing session %r into %s failed; the next saved turn tries again: %s",
                key,
                self.store,
                exc,
            )
            return
        except Exception:  # a bug: keep the traceback
            self.failures += 1
            log.exception(
                "gitmem: importing session %r into %s failed; the next saved turn tries again",
                key,
                self.store,
            )
            return
        self.last = result
        if result.commit:
            log.info("gitmem: %s", result.describe())
        for session_id, turn in result.differing:
            if (session_id, turn) not in self._warned:  # once, not at every later turn
                self._warned.add((session_id, turn))
                log.warning(
                    "gitmem: kept stored turn %s of %s, which differs from the file",
                    turn,
                    session_id,
                )


def nanobot_importer(
    workspace: str | os.PathLike[str],
    sessions: str | os.PathLike[str] | None,
    *,
    tools: nanobot.Tools = "summary",
) -> Importer:
    """What a :class:`Capture` runs for nanobot: the named sessions, read by the batch
    importer's own code (same ids), plus the workspace's memory files and history when they
    (or nanobot's git repository of them) changed since the last capture.

    ``sessions`` is the folder nanobot's session manager writes (it knows; the batch
    importer would guess it from the workspace); None means find it as the batch import does.
    """
    root = Path(workspace)
    memory = [
        root / name
        for name in (
            *MEMORY_FILES,
            "memory/history.jsonl",
            "memory/HISTORY.md",
            ".git/HEAD",
            ".git/refs",
            ".git/packed-refs",
        )
    ]
    seen: list[Snapshot | None] = [None]

    def run(mm: MemoryManager, keys: Sequence[str]) -> ImportResult:
        if sessions is None:
            layout = nanobot.find_layout(root)
        else:
            layout = nanobot.Layout(
                workspaces=[root],
                layouts={">=0.3.5"},
                session_files=sorted(Path(sessions).glob("*.jsonl")),
            )
        now = snapshot(memory)  # before reading: a change while importing shows next time
        parts = [nanobot.read_all(layout, tools=tools, keys=keys)]
        if now != seen[0]:
            parts.append(nanobot.read_all(dataclasses.replace(layout, session_files=[])))
        result = run_import(
            mm,
            itertools.chain.from_iterable(parts),
            source=layout.source,
            subject=f"Capture nanobot session {', '.join(keys)}",
        )
        seen[0] = now
        return result

    return run
