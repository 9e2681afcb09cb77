"""Digests of the source files an import has merged, so a re-import skips what has not changed.

A re-import of an unchanged source used to parse every file again only to find each turn
stored already (14 s for 100 MB). After an import, each file it read whole is recorded with
its SHA-256 and the commit the store was at once the import was in (the import's own, or
HEAD when it changed nothing), in ``<git dir>/gitmem/import-digests-<source>[-<namespace>]
.json`` (never tracked: it says what this clone has read, not what the store holds). A file
whose digest is the recorded one is not read again while that commit is still in HEAD's
history; a store reset to before it reads the file again. A dry run records nothing, nor
does an import that kept stored turns differing from the source (so it reports them again).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from gitmem.format.paths import encode_id
from gitmem.manager import MemoryManager

_CHUNK = 1 << 20


class SourceDigests:
    """What an import of one source kind read last time, and what it reads now."""

    def __init__(self, mm: MemoryManager, source: str) -> None:
        self.repository = mm.repository
        suffix = f"-{encode_id(mm.namespace)}" if mm.namespace else ""
        self.file = self.repository.state_dir / f"import-digests-{source}{suffix}.json"
        self.known: dict[str, list[str]] = _load(self.file)  # path -> [digest, commit]
        self.read: dict[str, str] = {}  # path -> digest, of the files this import checked
        self.skipped = 0
        self._in_history: dict[str, bool] = {}

    def unchanged(self, path: Path) -> bool:
        """True when ``path`` was merged whole before and has not changed since (it is then
        not read again); False also for a file that cannot be read (its reader says why)."""
        key = str(path.resolve())
        try:
            digest = _digest(path)
        except OSError:
            return False
        self.read[key] = digest
        found = self.known.get(key)
        if found is None or found[0] != digest or not self._still_there(found[1]):
            return False
        self.skipped += 1
        return True

    def record(self, commit: str | None) -> None:
        """Remember every file checked as merged at ``commit`` (after a successful import)."""
        if commit is None or not self.read:
            return
        for key, digest in self.read.items():
            self.known[key] = [digest, commit]
        temp = self.file.with_name(self.file.name + ".tmp")
        self.file.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(json.dumps(self.known, sort_keys=True), encoding="utf-8")
        os.replace(temp, self.file)

    def _still_there(self, commit: str) -> bool:
        if commit not in self._in_history:
            self._in_history[commit] = self.repository.is_ancestor(commit)
        return self._in_history[commit]


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def _load(file: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or damaged: every file is read again
    if not isinstance(data, dict):
        return {}
    return {
        str(key): [str(value[0]), str(value[1])]
        for key, value in data.items()
        if isinstance(value, list) and len(value) == 2
    }
