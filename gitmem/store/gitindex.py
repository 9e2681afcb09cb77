"""Git's index file (``.git/index``): reading, updating and writing it byte for byte."""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_left
from dataclasses import dataclass, field

from gitmem.errors import UnsupportedIndex
from gitmem.store.objects import JoinedChunks

_ENTRY_HEAD = struct.Struct(">10I20sH")

_EXTENDED_FLAG = 0x4000

# Extensions this reader cannot honour: sparse directory entries. Others (TREE, UNTR, ...)
# are caches git rebuilds on demand, so they are dropped; ``link`` (split index) is handled
# by ``splitindex``.
_UNSUPPORTED_EXTENSIONS = (b"sdir",)


def index_key(path: bytes, flags: int) -> bytes:
    """The sort key of an entry: path bytes, then stage (NUL sorts below every path byte)."""
    return path + b"\0" + bytes([(flags >> 12) & 3])


_index_key = index_key


def parse_entries(data: bytes) -> tuple[int, list[bytes], list[bytes], bytes | None]:
    """(version, keys, raw entries, ``link`` extension payload or None) of an index file
    (versions 2 and 3); other extensions are dropped."""
    if len(data) < 32 or data[:4] != b"DIRC":
        raise UnsupportedIndex("not an index file")
    if hashlib.sha1(data[:-20]).digest() != data[-20:]:
        raise UnsupportedIndex("index checksum mismatch")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3):
        raise UnsupportedIndex(f"index version {version}")
    keys: list[bytes] = []
    chunks: list[bytes] = []
    pos = 12
    for _ in range(count):
        flags = struct.unpack_from(">H", data, pos + 60)[0]
        head = pos + _ENTRY_HEAD.size + (2 if flags & _EXTENDED_FLAG else 0)
        end = data.index(b"\0", head)
        length = end - pos
        size = length + (8 - length % 8)
        keys.append(index_key(data[head:end], flags))
        chunks.append(data[pos : pos + size])
        pos += size
    end_of_entries = len(data) - 20
    link = None
    while pos + 8 <= end_of_entries:
        signature = data[pos : pos + 4]
        (size,) = struct.unpack_from(">I", data, pos + 4)
        if signature in _UNSUPPORTED_EXTENSIONS:
            raise UnsupportedIndex(f"index extension {signature.decode(errors='replace')}")
        if signature == b"link":
            link = data[pos + 8 : pos + 8 + size]
        pos += 8 + size
    return version, keys, chunks, link


def seal(version: int, entries: list[bytes], extensions: list[tuple[bytes, bytes]]) -> bytes:
    """An index file: header, ``entries``, ``(signature, payload)`` extensions, checksum."""
    parts = [b"DIRC", struct.pack(">II", version, len(entries)), *entries]
    for signature, payload in extensions:
        parts += [signature, struct.pack(">I", len(payload)), payload]
    body = b"".join(parts)
    return body + hashlib.sha1(body).digest()


@dataclass
class SharedBase:
    """The shared index a split index refers to: its name (its checksum) and entries."""

    name: str
    keys: list[bytes]
    chunks: list[bytes]


@dataclass
class GitIndex:
    """An index file held as sorted keys and the raw bytes of each entry.

    Keeping each entry's encoded bytes means rewriting a 10,000-entry index after one save is
    a join and a checksum, not 10,000 re-encodings. A split index (see ``splitindex``) also
    keeps its shared ``base``, its ``delta`` over it as last written (key -> base position
    or -1 for an added entry, and the bytes to write: empty for a deletion) and the keys
    ``touched`` since, so that a save re-examines only the entries it changed.
    """

    version: int
    keys: list[bytes]
    chunks: list[bytes]
    joined: JoinedChunks = field(default_factory=JoinedChunks)
    base: SharedBase | None = None
    touched: set[bytes] = field(default_factory=set)
    delta: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> GitIndex:
        return cls(2, [], [])

    @classmethod
    def parse(cls, data: bytes) -> GitIndex:
        """Parse a plain index file (versions 2 and 3); extensions are dropped."""
        version, keys, chunks, link = parse_entries(data)
        if link is not None:
            raise UnsupportedIndex("index extension link (a split index: see splitindex)")
        return cls(version, keys, chunks)

    def encode(self) -> bytes:
        """Serialise the whole index with header and trailing checksum (no extensions)."""
        header = b"DIRC" + struct.pack(">II", self.version, len(self.chunks))
        entries = self.joined.join(self.chunks)
        digest = hashlib.sha1(header)
        digest.update(entries)
        return b"".join((header, entries, digest.digest()))

    def entry_sha(self, path: bytes) -> bytes | None:
        """The binary object id staged at stage 0 for ``path``, if any."""
        key = path + b"\0\0"
        at = bisect_left(self.keys, key)
        if at < len(self.keys) and self.keys[at] == key:
            return self.chunks[at][40:60]
        return None

    def stages(self, path: bytes) -> list[bytes]:
        """The raw entries (every stage) of ``path``, to put back with :meth:`restore`."""
        at = bisect_left(self.keys, path + b"\0")
        found = []
        while at < len(self.keys) and self.keys[at][:-1] == path + b"\0":
            found.append(self.chunks[at])
            at += 1
        return found

    def restore(self, path: bytes, chunks: list[bytes]) -> None:
        """Make ``path``'s entries exactly ``chunks`` again (as :meth:`stages` gave them)."""
        self.remove(path)
        for chunk in chunks:
            flags = struct.unpack_from(">H", chunk, 60)[0]
            key = _index_key(path, flags)
            at = bisect_left(self.keys, key)
            self.joined.invalidate()
            self.keys.insert(at, key)
            self.chunks.insert(at, chunk)
            self.touched.add(key)

    def remove(self, path: bytes) -> None:
        """Drop every stage of ``path``."""
        at = bisect_left(self.keys, path + b"\0")
        while at < len(self.keys) and self.keys[at][:-1] == path + b"\0":
            self.touched.add(self.keys[at])
            del self.keys[at]
            del self.chunks[at]
            self.joined.invalidate()

    def set(self, path: bytes, stat: tuple[int, ...], sha: bytes) -> None:
        """Stage ``sha`` for ``path`` at stage 0 with the given stat fields."""
        flags = min(len(path), 0xFFF)
        head = _ENTRY_HEAD.pack(*stat, sha, flags)
        length = len(head) + len(path)
        chunk = head + path + b"\0" * (8 - length % 8)
        key = _index_key(path, flags)
        self.touched.add(key)
        at = bisect_left(self.keys, key)
        only_stage = at + 1 >= len(self.keys) or self.keys[at + 1][:-1] != key[:-1]
        if at < len(self.keys) and self.keys[at] == key and only_stage:
            self.joined.replaced(at, self.chunks[at], chunk)
            self.chunks[at] = chunk
            return
        self.remove(path)
        at = bisect_left(self.keys, key)
        self.joined.invalidate()
        self.keys.insert(at, key)
        self.chunks.insert(at, chunk)


def stat_fields(
    st_ctime_ns: int, st_mtime_ns: int, dev: int, ino: int, mode: int, uid: int, gid: int, size: int
) -> tuple[int, ...]:
    """The ten 32-bit stat fields of an index entry, from ``os.stat`` values."""
    mask = 0xFFFFFFFF
    git_mode = 0o100755 if mode & 0o111 else 0o100644
    return (
        (st_ctime_ns // 1_000_000_000) & mask,
        st_ctime_ns % 1_000_000_000,
        (st_mtime_ns // 1_000_000_000) & mask,
        st_mtime_ns % 1_000_000_000,
        dev & mask,
        ino & mask,
        git_mode,
        uid & mask,
        gid & mask,
        size & mask,
    )
