"""The lines of a large memory file as the reader cut them, kept on disk by the file's blob id.

A new process's first ``facts()`` of a 10,000-fact file spends half its time reading the
lines (decoding, the strict pattern, its checks) before it builds the facts. A file read
in that form is written to ``.git/gitmem/facts-rows/`` (one file per memory path) with the
blob id it was read from and a checksum; the next process that reads the same blob builds
the facts from it. It is keyed by content, never by a time: a hand edit or any commit
makes another blob, and that is read from git. A cache file of another blob, another
format, or whose checksum does not match is ignored (and written again after the read);
a purge drops the folder with gitmem's other caches.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import threading
from pathlib import Path

from gitmem.format.facts import StrictRows

_MAGIC = b"gitmem-fact-rows 1\n"
_SUM = 20  # a SHA-1 of the rows' bytes


class FactRowsCache:
    """The cut lines of a memory file's blob, one cache file per memory path."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _file(self, path: str) -> Path:
        return self.folder / (hashlib.sha1(path.encode("utf-8")).hexdigest()[:16] + ".rows")

    def load(self, path: str, blob_id: str) -> StrictRows | None:
        """The rows kept for ``path`` at blob ``blob_id``, or None (none kept, another
        blob's, or a damaged file)."""
        head = _MAGIC + blob_id.encode("ascii") + b"\n"
        try:
            with open(self._file(path), "rb") as handle:
                if handle.read(len(head)) != head:
                    return None  # another blob's: not read further
                data = handle.read()
        except OSError:
            return None
        body = memoryview(data)[_SUM:]
        if len(data) < _SUM or hashlib.sha1(body).digest() != data[:_SUM]:
            return None
        try:
            rows = marshal.loads(body)
        except (ValueError, EOFError, TypeError):
            return None
        if not isinstance(rows, list) or not all(
            isinstance(part, tuple)
            and len(part) == 2
            and isinstance(part[0], str)
            and isinstance(part[1], list)
            for part in rows
        ):
            return None
        return rows

    def save(self, path: str, blob_id: str, rows: StrictRows) -> None:
        """Keep ``rows`` as the cut lines of ``path`` at ``blob_id`` (best effort: a store
        that cannot be written is read from git every time)."""
        body = marshal.dumps(rows)
        data = _MAGIC + blob_id.encode("ascii") + b"\n" + hashlib.sha1(body).digest() + body
        target = self._file(path)
        tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, target)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
