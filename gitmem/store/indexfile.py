"""``.git/index`` as the store reads and writes it (:class:`GitIndexFile`), split or not.

The index is read once and kept while its trailing checksum stays the same; a save patches
the entries of its files (with the stat data of the files already in place, so ``git
status`` need not re-read them) and writes it whole or, split (see ``splitindex``), as a
small delta over a shared index.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.store import splitindex
from gitmem.store.config import parse_bool, parse_int
from gitmem.store.git import GitCommands, run_git
from gitmem.store.gitindex import GitIndex, stat_fields
from gitmem.store.scratch import TempFiles, naming
from gitmem.store.splitindex import SplitSettings
from gitmem.store.worktree import swap_into_place

# an existing store whose index passes this many entries (~180 KB rewritten per save) is
# switched to a split index (core.splitIndex=true); new stores start split
SPLIT_FROM_ENTRIES = 2000


def split_config(settings: SplitSettings | None = None) -> dict[str, str]:
    """The git config that turns the split index on (see ``splitindex``), leaving a shared
    index expiry the person set alone."""
    values = {"core.splitIndex": "true"}
    if settings is None or not settings.expire_set:
        values["splitIndex.sharedIndexExpire"] = splitindex.STORE_EXPIRE
    return values


class GitIndexFile:
    """The store's ``.git/index``: loaded (cached by checksum), patched, written."""

    def __init__(self, runner: GitCommands, temps: TempFiles) -> None:
        self.root = runner.root
        self.git_dir = runner.git_dir
        self.path = runner.git_dir / "index"
        self.runner = runner
        self.temps = temps
        self._cached: tuple[bytes, GitIndex] | None = None  # (checksum, parsed)
        # (config file identity, settings): re-read only when .git/config changes
        self._split_config: tuple[tuple[int, int, int], SplitSettings] | None = None

    def remember(self, data: bytes, index: GitIndex) -> None:
        """``index`` was just written as ``data`` (by another route than :meth:`write`)."""
        self._cached = (data[-20:], index)

    @staticmethod
    def entry_hex(index: GitIndex, path: str) -> str | None:
        staged = index.entry_sha(path.encode())
        return staged.hex() if staged is not None else None

    def torn(self) -> bool:
        """True if the index is missing, fails its checksum (a write cut short) or names a
        shared index that is missing."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return True
        if len(data) < 32 or data[:4] != b"DIRC":
            return True
        trailer = data[-20:]
        # index.skipHash writes zeros instead of the checksum
        if trailer != bytes(20) and hashlib.sha1(data[:-20]).digest() != trailer:
            return True
        try:  # a split index whose shared index is gone cannot be read by git either
            splitindex.read_index(data, self.git_dir)
        except RepositoryError:
            return True
        except UnsupportedIndex:
            pass
        return False

    def stage_entries(self, index: GitIndex, changes: dict[str, str | None]) -> None:
        """Point ``index``'s entries of ``changes`` at their new blobs, with the stat data
        of the working files already in place (so ``git status`` need not re-read them)."""
        for path, sha in changes.items():
            if sha is None:
                index.remove(path.encode())
                continue
            st = os.stat(self.root / path)
            fields = stat_fields(
                st.st_ctime_ns,
                st.st_mtime_ns,
                st.st_dev,
                st.st_ino,
                st.st_mode,
                st.st_uid,
                st.st_gid,
                st.st_size,
            )
            index.set(path.encode(), fields, bytes.fromhex(sha))

    def write(self, index: GitIndex) -> None:
        """Write ``index`` over ``.git/index``; the caller holds git's ``index.lock``.

        Split (see ``splitindex``) when ``core.splitIndex`` says so, or when it is unset and
        the index is already split or has grown past :data:`SPLIT_FROM_ENTRIES` entries
        (then ``core.splitIndex=true`` is set, so that git keeps it split too).
        """
        tmp = self.temps.new()
        try:
            data = self.encode(index)
            with naming(tmp), open(tmp, "wb") as out:
                out.write(data)
            # whole or not at all: git reads an index without checking its checksum, so a
            # write cut short in place would be taken at its word by a person's git
            swap_into_place(tmp, self.git_dir / "index")
        except BaseException:
            self._cached = None
            raise
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self.temps.done(tmp)
        self._cached = (data[-20:], index)

    def encode(self, index: GitIndex) -> bytes:
        settings = self.split_settings()
        split = settings.enabled
        if split is None:
            split = index.base is not None or len(index.keys) >= SPLIT_FROM_ENTRIES
            if split:
                self.runner.ensure_config(split_config(settings))
        if not split:
            return splitindex.encode_unsplit(index)
        if index.base is None or not splitindex.freshen(self.git_dir, index):
            return self._rotate(index)
        data, entries = splitindex.encode_delta(index)
        if splitindex.needs_rotation(index, entries, len(data), settings):
            return self._rotate(index)
        return data

    def _rotate(self, index: GitIndex) -> bytes:
        tmp = self.temps.new()
        try:
            with naming(tmp):
                return splitindex.rotate(index, self.git_dir, tmp, self._shared_index_expiry)
        finally:
            self.temps.done(tmp)

    def _shared_index_expiry(self) -> float:
        """The time before which an unused shared index may go (``splitIndex.sharedIndexExpire``,
        as git reads it; 0: never)."""
        done = run_git(
            self.root, "config", "--type=expiry-date", "splitIndex.sharedIndexExpire", ok=None
        )
        if done.returncode == 0 and done.stdout.strip().isdigit():
            return float(done.stdout.strip())
        return time.time() - splitindex.DEFAULT_EXPIRE_SECONDS

    def split_settings(self) -> SplitSettings:
        try:
            st = os.stat(self.git_dir / "config")
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = (0, 0, 0)
        if self._split_config is not None and self._split_config[0] == stamp:
            return self._split_config[1]
        done = run_git(
            self.root, "config", "--get-regexp", r"^(core\.splitindex|splitindex\.)", ok=None
        )
        values = dict(line.partition(" ")[::2] for line in done.stdout.splitlines())
        enabled = values.get("core.splitindex")
        percent = values.get("splitindex.maxpercentchange")
        settings = SplitSettings(
            None if enabled is None else parse_bool("core.splitIndex", enabled),
            splitindex.DEFAULT_MAX_PERCENT
            if percent is None
            else parse_int("splitIndex.maxPercentChange", percent, 0, 100),
            "splitindex.sharedindexexpire" in values,
        )
        self._split_config = (stamp, settings)
        return settings

    def load(self) -> GitIndex:
        # the trailing checksum identifies the content: mtime is too coarse to tell two
        # writes by different processes apart
        try:
            fd = os.open(self.git_dir / "index", os.O_RDONLY)
        except FileNotFoundError:
            return GitIndex.empty()
        try:
            size = os.fstat(fd).st_size
            checksum = os.pread(fd, 20, max(0, size - 20))
            if self._cached is not None and self._cached[0] == checksum:
                return self._cached[1]
            data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        index = splitindex.read_index(data, self.git_dir)
        self._cached = (data[-20:], index)
        return index

    def update_with_git(self, changes: dict[str, str | None]) -> None:
        # index v4 / sparse: let git itself edit it (rare, slower)
        for path, sha in changes.items():
            if sha is None:
                run_git(self.root, "update-index", "--force-remove", "--", path)
            else:
                run_git(self.root, "update-index", "--add", "--cacheinfo", f"100644,{sha},{path}")
        run_git(self.root, "update-index", "-q", "--refresh")
        self._cached = None
