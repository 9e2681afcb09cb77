"""git's split index: ``.git/index`` as a small delta over a shared ``sharedindex.<hash>``.

Without it every save rewrites and checksums the whole index (~90 bytes per file: 9 MB at
100,000 sessions). Split, a save writes only the entries that differ from the shared index
(``core.splitIndex``; format in git's gitformat-index, "Split index"):

- the shared index is a plain index file named after its own trailing checksum;
- the main index holds the changed entries and a ``link`` extension: the shared index's id,
  then two EWAH bitmaps over the shared index's positions: the entries deleted and the
  entries replaced. The main index's first entries are the replacements, one per replace
  bit in order, their path left empty (it is the shared entry's); the rest are added
  entries, sorted.

A new shared index (the whole index, once) is written when the delta grows past
:data:`MAX_DELTA_BYTES` (at 100,000 sessions git's ``splitIndex.maxPercentChange`` of 20%
alone would let the main index grow to 1.3 MB), or past that percentage of the entries (git's
rule) once it holds :data:`MIN_ROTATE_BYTES`, so a save writes at most 16 KiB but for one in
a few hundred. Old shared indexes are removed the way git removes them: when not used since
``splitIndex.sharedIndexExpire`` (gitmem sets :data:`STORE_EXPIRE` when it turns the split
index on and the person has not chosen), each reader and writer refreshing the mtime of
the one it uses.
"""

from __future__ import annotations

import contextlib
import os
import struct
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitmem.errors import RepositoryError, UnsupportedIndex
from gitmem.store import ewah
from gitmem.store.gitindex import GitIndex, SharedBase, index_key, parse_entries, seal

# a save's main index stays under this; past it the next write rotates the shared index
MAX_DELTA_BYTES = 16 * 1024

# below this a main index is cheap to rewrite whatever share of the entries it holds
MIN_ROTATE_BYTES = 4 * 1024

DEFAULT_MAX_PERCENT = 20

# what gitmem sets splitIndex.sharedIndexExpire to when it turns the split index on (and
# the person has not set it): git's 2 weeks would keep GBs of old 9 MB shared indexes of a
# busy 100,000-session store, and 5 minutes still kept 234 MB of them after a bulk import;
# readers need one for milliseconds (read the main index, then the shared one), and
# temporary indexes live while index.lock is held, when none rotates
STORE_EXPIRE = "30.seconds.ago"

DEFAULT_EXPIRE_SECONDS = 14 * 24 * 3600

_EXTENDED_FLAG = 0x4000


@dataclass(frozen=True)
class SplitSettings:
    """The git settings a split index write follows."""

    enabled: bool | None  # core.splitIndex; None when unset
    max_percent: int = DEFAULT_MAX_PERCENT  # splitIndex.maxPercentChange
    expire_set: bool = False  # splitIndex.sharedIndexExpire is set


def _head_size(chunk: bytes) -> int:
    flags = struct.unpack_from(">H", chunk, 60)[0]
    return 64 if flags & _EXTENDED_FLAG else 62


def _with_path(chunk: bytes, path: bytes) -> bytes:
    """``chunk`` (an entry) with its path set to ``path`` (flags' length bits too)."""
    head = bytearray(chunk[: _head_size(chunk)])
    flags = struct.unpack_from(">H", head, 60)[0]
    struct.pack_into(">H", head, 60, (flags & 0xF000) | min(len(path), 0xFFF))
    length = len(head) + len(path)
    return bytes(head) + path + b"\0" * (8 - length % 8)


def _stripped(chunk: bytes) -> bytes:
    """``chunk`` with an empty path, as a replacement entry is written (its path is the
    shared entry's)."""
    flags_high = bytes((chunk[60] & 0xF0, 0))
    if chunk[60] & (_EXTENDED_FLAG >> 8):
        return chunk[:60] + flags_high + chunk[62:64] + bytes(8)
    return chunk[:60] + flags_high + b"\0\0"


def shared_path(git_dir: Path, name: str) -> Path:
    return git_dir / f"sharedindex.{name}"


def read_index(data: bytes, git_dir: Path) -> GitIndex:
    """Parse ``.git/index`` bytes, merging a split index with its shared index."""
    version, keys, chunks, link = parse_entries(data)
    if link is None:
        return GitIndex(version, keys, chunks)
    if len(link) < 20:
        raise UnsupportedIndex("index link extension too short")
    name = link[:20].hex()
    if name == "0" * 40:  # a link naming no shared index: not split
        return GitIndex(version, keys, chunks)
    path = shared_path(git_dir, name)
    try:
        shared_data = path.read_bytes()
    except FileNotFoundError:
        raise RepositoryError(
            f"{git_dir / 'index'} is a split index whose shared part {path} is missing; "
            f"nothing was written. Rebuild the index from HEAD with `rm {git_dir / 'index'} "
            "&& git reset -q` (working files are kept)"
        ) from None
    _version, s_keys, s_chunks, s_link = parse_entries(shared_data)
    if s_link is not None or shared_data[-20:].hex() != name:
        raise RepositoryError(
            f"{path} is not the shared index {git_dir / 'index'} names; "
            f"rebuild it with `rm {git_dir / 'index'} && git reset -q`"
        )
    with contextlib.suppress(OSError):
        os.utime(path)  # as git does: a shared index in use is never expired
    base = SharedBase(name, s_keys, s_chunks)
    deleted: list[int] = []
    replaced: list[int] = []
    if len(link) > 20:
        deleted, end = ewah.decode(link, 20)
        replaced, end = ewah.decode(link, end)
        if end != len(link):
            raise UnsupportedIndex("index link extension: bytes after the bitmaps")
    return _merge(version, base, chunks, keys, deleted, replaced)


def _merge(
    version: int,
    base: SharedBase,
    chunks: list[bytes],
    keys: list[bytes],
    deleted: list[int],
    replaced: list[int],
) -> GitIndex:
    """The full index: ``base`` with the main index's replacements, deletions and additions
    applied (as git's merge_base_index does)."""
    if len(replaced) > len(chunks):
        raise UnsupportedIndex(
            f"index link extension: {len(replaced)} replacements for {len(chunks)} entries"
        )
    merged_keys = list(base.keys)
    merged = list(base.chunks)
    touched: set[bytes] = set()
    for at, position in enumerate(replaced):
        if position >= len(merged):
            raise UnsupportedIndex(
                f"index link extension: replaces entry {position} of {len(merged)}"
            )
        if keys[at][:-2]:
            raise UnsupportedIndex(f"index link extension: replacement {at} has a path")
        path = base.keys[position][:-2]
        merged[position] = _with_path(chunks[at], path)
        flags = struct.unpack_from(">H", chunks[at], 60)[0]
        merged_keys[position] = index_key(path, flags)
        touched.add(base.keys[position])
    gone = set(deleted)
    if gone & set(replaced):
        raise UnsupportedIndex("index link extension: an entry both replaced and deleted")
    if gone:
        if max(gone) >= len(merged):
            raise UnsupportedIndex(
                f"index link extension: deletes entry {max(gone)} of {len(merged)}"
            )
        touched.update(base.keys[p] for p in gone)
        merged_keys = [k for p, k in enumerate(merged_keys) if p not in gone]
        merged = [c for p, c in enumerate(merged) if p not in gone]
    added = list(zip(keys[len(replaced) :], chunks[len(replaced) :], strict=True))
    if any(not key[:-2] for key, _chunk in added):
        raise UnsupportedIndex("index link extension: an added entry has no path")
    index = GitIndex(version, merged_keys, merged)
    if added:
        index.keys, index.chunks = _insert_sorted(merged_keys, merged, added)
        touched.update(key for key, _chunk in added)
    index.base = base
    index.touched = touched
    return index


def _insert_sorted(
    keys: list[bytes], chunks: list[bytes], added: list[tuple[bytes, bytes]]
) -> tuple[list[bytes], list[bytes]]:
    """Merge the ``added`` entries into the sorted ``keys``/``chunks`` in one pass: an added
    entry replaces one of the same path and stage, and a stage-0 entry every stage of its
    path (as git's add_index_entry)."""
    added = sorted(added)
    out_keys: list[bytes] = []
    out_chunks: list[bytes] = []
    at = done = 0
    while done < len(added):
        path = added[done][0][:-1]  # path + NUL: below every key of that path
        start = bisect_left(keys, path, at)
        out_keys.extend(keys[at:start])
        out_chunks.extend(chunks[at:start])
        at = start
        stages: dict[bytes, bytes] = {}
        while at < len(keys) and keys[at][:-1] == path:
            stages[keys[at]] = chunks[at]
            at += 1
        while done < len(added) and added[done][0][:-1] == path:
            key, chunk = added[done]
            if key[-1] == 0:
                stages.clear()
            stages[key] = chunk
            done += 1
        for key in sorted(stages):
            out_keys.append(key)
            out_chunks.append(stages[key])
    out_keys.extend(keys[at:])
    out_chunks.extend(chunks[at:])
    return out_keys, out_chunks


def encode_delta(index: GitIndex) -> tuple[bytes, int]:
    """The main index of a split ``index`` over its shared base, and how many entries the
    delta holds; only the keys touched since the last call are compared with the base."""
    base = index.base
    assert base is not None
    delta = index.delta
    for key in index.touched:
        at = bisect_left(base.keys, key)
        in_base = at < len(base.keys) and base.keys[at] == key
        now = bisect_left(index.keys, key)
        in_now = now < len(index.keys) and index.keys[now] == key
        if in_base and in_now and base.chunks[at] != index.chunks[now]:
            delta[key] = (at, _stripped(index.chunks[now]))
        elif in_base and not in_now:
            delta[key] = (at, b"")
        elif in_now and not in_base:
            delta[key] = (-1, index.chunks[now])
        else:  # as in the base again (or never anywhere)
            delta.pop(key, None)
    index.touched = set()
    replaced: list[int] = []
    deleted: list[int] = []
    entries: list[bytes] = []
    added: list[bytes] = []
    for key in sorted(delta):  # base order: the bitmaps ascend
        at, chunk = delta[key]
        if at < 0:
            added.append(chunk)
        elif chunk:
            replaced.append(at)
            entries.append(chunk)
        else:
            deleted.append(at)
    link = b"".join((bytes.fromhex(base.name), ewah.encode(deleted), ewah.encode(replaced)))
    return seal(index.version, entries + added, [(b"link", link)]), len(delta)


def encode_unsplit(index: GitIndex) -> bytes:
    """The whole ``index`` as one plain index file (for ``core.splitIndex=false``)."""
    index.base = None
    index.touched = set()
    index.delta = {}
    return index.encode()


def rotate(index: GitIndex, git_dir: Path, temp: Path, expire: Callable[[], float]) -> bytes:
    """Write the whole ``index`` as a new shared index (durably: temp file, fsync, rename)
    and return the main index that points at it with an empty delta. Shared indexes older
    than ``expire()`` (a time; 0 for never) are removed afterwards, as git does."""
    data = index.encode()
    name = data[-20:].hex()
    target = shared_path(git_dir, name)
    if not target.exists():
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    else:
        os.utime(target)
    index.base = SharedBase(name, list(index.keys), list(index.chunks))
    index.touched = set()
    index.delta = {}
    _expire_shared(git_dir, name, expire)
    return encode_delta(index)[0]


def _expire_shared(git_dir: Path, current: str, expire: Callable[[], float]) -> None:
    names = [p for p in git_dir.glob("sharedindex.*") if p.name != f"sharedindex.{current}"]
    if not names:
        return
    cutoff = expire()
    for path in names:
        with contextlib.suppress(OSError):
            if cutoff and path.stat().st_mtime <= cutoff:
                path.unlink()


def needs_rotation(
    index: GitIndex, delta_entries: int, delta_bytes: int, settings: SplitSettings
) -> bool:
    """True when the delta has grown past our byte cap, or past git's percentage and
    :data:`MIN_ROTATE_BYTES` (a small store would otherwise write a shared index per save)."""
    if settings.max_percent == 0:
        return True
    by_percent = settings.max_percent < 100 and (
        len(index.keys) * settings.max_percent < delta_entries * 100
    )
    return delta_bytes > MAX_DELTA_BYTES or (by_percent and delta_bytes > MIN_ROTATE_BYTES)


def freshen(git_dir: Path, index: GitIndex) -> bool:
    """Refresh the mtime of ``index``'s shared index, as git does at every write, so that
    no expiry removes it; False if it is gone (the caller writes a new one)."""
    assert index.base is not None
    try:
        os.utime(shared_path(git_dir, index.base.name))
    except FileNotFoundError:
        return False
    return True
