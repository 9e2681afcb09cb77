"""Keeping an import in step with a source that is still being written (``--watch``).

:func:`watch` runs one import, then polls the source's files and runs the import again each
time they change. It polls rather than using inotify: the standard library has no file-event
API, polling works the same on every system and file system (network shares, containers),
and a few ``stat`` calls a second cost nothing next to an import. A change must settle
(``debounce``: no further change for that long) before it is imported, so a file nanobot is
writing is not read half-way; if it is anyway (a half-written JSON line), the import fails
with nothing written (an import is one commit or none), the error is reported, and the next
change tries again. Imports are additive and idempotent (see :mod:`gitmem.importers.engine`),
so importing again after any change, or once too often, never loses or doubles a turn.

Stopping is between imports only: ``stop`` is checked before each import and while
waiting, and Ctrl-C (when watching from the main thread) asks for the same stop instead of
raising into a commit; a second Ctrl-C during a long import abandons it, which the store's
transaction undoes as it does any failed import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType

from gitmem.importers.engine import ImportResult

# (device, inode, size, mtime in ns): what a write or an atomic replace always changes
Stamp = tuple[int, int, int, int]
Snapshot = dict[str, Stamp | None]

# shortest pause between two polls (seconds), whatever interval and debounce say
MIN_POLL_S = 0.01


def snapshot(roots: Iterable[Path]) -> Snapshot:
    """Every file under ``roots`` (recursively) with what a write to it changes.

    Entries whose name starts with a dot (``.git``, nanobot's lock and temporary files) are
    skipped inside a root, but a root may itself be one. A missing root is recorded as
    ``None``, so its appearance counts as a change; files that vanish while being listed
    are left out.
    """
    found: Snapshot = {}
    for root in roots:
        path = os.fspath(root)
        stamp = _stamp(path)
        if stamp is None and not os.path.isdir(path):
            found[path] = None
        elif not os.path.isdir(path):
            found[path] = stamp
        else:
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in files:
                    if not name.startswith("."):
                        full = os.path.join(folder, name)
                        found[full] = _stamp(full)
    return found


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def watch(
    roots: Callable[[], Iterable[Path]],
    run: Callable[[], ImportResult],
    *,
    interval: float = 1.0,
    debounce: float = 0.5,
    stop: threading.Event | None = None,
    on_result: Callable[[ImportResult], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
) -> int:
    """Run ``run()`` once, then again after every settled change under ``roots()``, until
    ``stop`` is set or Ctrl-C; return how many times ``run`` was called.

    Args:
        roots: the files and folders to watch, asked again at every poll (a session folder
            may appear later); if asking fails, the last answer stands.
        run: one import; its result goes to ``on_result``.
        interval: seconds between two polls while nothing is changing.
        debounce: seconds the files must stay unchanged before a change is imported.
        stop: set it (from any thread) to end the watch; an import under way finishes first.
        on_result: told every import's result, also those that changed nothing.
        on_error: told an import's exception (e.g. :class:`ImportFormatError` for a line
            being written, or a lock timeout); the watch goes on and tries again at the next
            change. Without it errors are dropped silently.
    """
    stop = stop if stop is not None else threading.Event()
    with _ctrl_c_stops() as busy:
        try:
            return _loop(roots, run, interval, debounce, stop, on_result, on_error, busy)
        except KeyboardInterrupt:
            # Ctrl-C between imports, or a second one inside an import (whose transaction
            # dropped its changes)
            return busy.count


class _Busy:
    """Shared with the Ctrl-C handler: whether an import runs now, how many have run, and
    whether Ctrl-C asked to stop after it."""

    def __init__(self) -> None:
        self.importing = False
        self.count = 0
        self.asked = False


def _loop(
    roots: Callable[[], Iterable[Path]],
    run: Callable[[], ImportResult],
    interval: float,
    debounce: float,
    stop: threading.Event,
    on_result: Callable[[ImportResult], None] | None,
    on_error: Callable[[Exception], None] | None,
    busy: _Busy,
) -> int:
    last_roots: list[Path] = []

    def current_roots() -> list[Path]:
        # a source folder that vanishes for a moment must not end the watch
        nonlocal last_roots
        with contextlib.suppress(Exception):
            last_roots = list(roots())
        return last_roots

    seen = snapshot(current_roots())
    quiet_since = time.monotonic()
    imported: Snapshot | None = None  # what the last import started from
    while not (stop.is_set() or busy.asked):
        if imported is None or (seen != imported and time.monotonic() - quiet_since >= debounce):
            # taken before the import reads: a write during it shows as a change next poll
            imported = seen
            _run_once(run, on_result, on_error, busy)
            if stop.is_set() or busy.asked:
                break
        pending = seen != imported
        stop.wait(max(MIN_POLL_S, min(interval, debounce) if pending else interval))
        current = snapshot(current_roots())
        if current != seen:
            seen, quiet_since = current, time.monotonic()
    return busy.count


def _run_once(
    run: Callable[[], ImportResult],
    on_result: Callable[[ImportResult], None] | None,
    on_error: Callable[[Exception], None] | None,
    busy: _Busy,
) -> None:
    busy.importing = True
    busy.count += 1
    try:
        result = run()
    except Exception as exc:  # reported; the next change tries again
        if on_error is not None:
            on_error(exc)
        return
    finally:
        busy.importing = False
    if on_result is not None:
        on_result(result)


@contextlib.contextmanager
def _ctrl_c_stops() -> Iterator[_Busy]:
    """While watching from the main thread with Python's own SIGINT handler: Ctrl-C
    between imports ends the watch at once, Ctrl-C during an import asks to stop after it
    (the import finishes and commits), and a second one during that import raises as usual.

    The handler only sets a flag: it may run while this thread holds the stop event's lock,
    so it must not take that lock itself."""
    busy = _Busy()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield busy
        return

    def handler(_signum: int, _frame: FrameType | None) -> None:
        if not busy.importing or busy.asked:
            raise KeyboardInterrupt
        busy.asked = True

    signal.signal(signal.SIGINT, handler)
    try:
        yield busy
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
