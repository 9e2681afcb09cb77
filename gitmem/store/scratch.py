"""The store's temp files: where a writer puts bytes before they go into place.

Every temp file a save makes lives in ``.git/gitmem/tmp`` and is registered here until it
is renamed into place, so a save that fails removes what it left (:meth:`TempFiles.discard`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_SEQ = itertools.count()


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """Name ``path`` in an OSError raised inside the block (a failed write to an open file
    does not say which file)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


class TempFiles:
    """The temp folder of a store and the temp files of the save in progress."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pending: list[Path] = []  # removed by discard() unless moved into place

    def name(self) -> Path:
        """A fresh temp file name (not registered)."""
        return self.folder / f"{os.getpid()}-{threading.get_ident()}-{next(_SEQ)}.tmp"

    def new(self) -> Path:
        """A fresh temp file name, registered until :meth:`done` or :meth:`discard`."""
        tmp = self.name()
        self.pending.append(tmp)
        return tmp

    def track(self, path: Path) -> None:
        self.pending.append(path)

    def done(self, path: Path) -> None:
        """``path`` was moved into place (or removed): no longer the save's to clean up."""
        self.pending.remove(path)

    def discard(self) -> None:
        """Remove the temp files of a save that failed."""
        while self.pending:
            with contextlib.suppress(OSError):
                self.pending.pop().unlink()
